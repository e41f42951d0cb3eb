"""The read-out layer (issue 21, item 3): a layer's state is the model's own ``hidden_states[layer]``
at [MASK] (or a causal LM's last template token), raw and denoised, every layer from one pass."""

import numpy as np
import pytest
import torch
from conftest import CAUSAL_T, CLI_DEVICE, PAPER_T, ROBERTA_T, make_encoder

from promptsearch import PromptSearchError, rep
from promptsearch.encoding import MaskState
from promptsearch.train.loop import TrainRun

SENTS = ["a man is playing a guitar .", "two dogs run in the park", "the cat sat on the mat .",
         "a woman slices an onion"]


def _states(enc, ids, at, position_ids=None):
    """Every layer's state at position ``at`` of one unpadded fp32 forward: (layers + 1, hidden)."""
    with torch.no_grad():
        kw = {} if position_ids is None else {"position_ids": torch.tensor([position_ids])}
        o = enc.encoder(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                        output_hidden_states=True, **kw)
    return torch.stack([h[0, at] for h in o.hidden_states]).float().numpy()


@pytest.mark.parametrize("kind, template, side",
                         [("tiny_bert_dir", PAPER_T, "right"), ("tiny_roberta_dir", ROBERTA_T, "right"),
                          ("tiny_gpt2_dir", CAUSAL_T, "right"), ("tiny_llama_dir", CAUSAL_T, "left")])
def test_a_layers_state_is_the_models_own_hidden_state(kind, template, side, request):
    enc = make_encoder(request.getfixturevalue(kind), bf16=False, padding_side=side)
    n = enc.prompt.n_layers
    layers = list(range(n + 1))
    st = enc.prompt_states(SENTS, template, denoise=True, layers=layers, batch_size=4)  # one padded batch
    r = enc.rendered(template)
    off = enc.model.position_offset
    for i, s in enumerate(SENTS):
        sent = enc.sentence_ids(enc.prepare([s]), template)[0]
        ids, pos = r.ids(sent)
        own = _states(enc, ids, pos)
        k = len(sent)
        t_ids = list(r.before) + list(r.after)
        t_pos = list(range(off, off + len(r.before))) + list(range(off + len(r.before) + k,
                                                                   off + len(r.before) + k + len(r.after)))
        mask = r.mask_index if r.mask_in_before else len(r.before) + r.mask_index
        alone = _states(enc, t_ids, mask, t_pos)
        for layer in layers:  # fp32, other padding: rounding only
            np.testing.assert_allclose(st[layer].raw[i], own[layer], atol=1e-5)
            np.testing.assert_allclose(st[layer].bias[i], alone[layer], atol=1e-5)
    # the last layer is the default read-out exactly, and layers really differ
    last = enc.prompt_states(SENTS, template, denoise=True, batch_size=4)
    np.testing.assert_array_equal(st[n].raw, last.raw)
    np.testing.assert_array_equal(st[n].bias, last.bias)
    assert np.abs(st[1].raw - st[n].raw).max() > 1e-3


def test_every_layer_comes_from_one_pass(bert_enc):
    calls = []
    bert_enc.prompt.clear_cache()  # (another test may have filled it)
    hook = bert_enc.encoder.register_forward_hook(lambda *a: calls.append(1))
    try:
        reps = [MaskState(PAPER_T, True, layer) for layer in (0, 1, None)]
        out = bert_enc.encode_reps(SENTS, reps, batch_size=64)
        with_layers = len(calls)
        calls.clear()
        bert_enc.prompt.clear_cache()
        bert_enc.encode_reps(SENTS, [MaskState(PAPER_T, True)], batch_size=64)
    finally:
        hook.remove()
    assert with_layers == len(calls)  # the same forward passes (sentences + bias buckets) as one layer
    np.testing.assert_array_equal(out[reps[2]], bert_enc.encode(SENTS, template=PAPER_T, denoise=True))
    np.testing.assert_array_equal(out[reps[1]], bert_enc.encode(SENTS, rep=rep(PAPER_T, denoise=True, layer=1)))


def test_layer_out_of_range_is_one_line_before_any_pass(tiny_bert_dir, capsys):
    from promptsearch.cli import main

    enc = make_encoder(tiny_bert_dir)
    with pytest.raises(PromptSearchError, match="layer 3 .*out of range.* 2"):
        enc.encode(SENTS, rep=rep(PAPER_T, layer=3))
    assert enc.encode(SENTS[:1], rep=rep(PAPER_T, layer=-1)).tolist() == enc.encode(SENTS[:1],
                                                                                    template=PAPER_T).tolist()
    code = main(["eval", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--layer", "-4", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "layer -4 is out of range" in err and "\n" not in err
    code = main(["eval", "--model", str(tiny_bert_dir), "--pooling", "mean", "--layer", "1", "-q"])
    assert code == 2 and "--layer" in capsys.readouterr().err


def test_greedy_layer_step_scores_each_layer_as_eval_does(tiny_bert_dir, tmp_path):
    import json

    from conftest import write_vocab as _vocab

    from promptsearch.cli import main
    from promptsearch.encoding import rep
    from promptsearch.eval import evaluate_reps

    out = tmp_path / "best.json"
    argv = ["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--vocabulary", _vocab(tmp_path),
            "--max-steps", "1", "--layers", "all", "--readouts", "none", "--out", str(out), "--no-cache", "-q",
            "--no-bf16", "--validate-top", "0", "--no-racing"]
    assert main(argv) == 0
    d = json.loads(out.read_text())
    rows = [r for r in d["path"] if r["stage"] == "layer"]
    assert [r.get("layer") for r in rows] == [1, None]  # the last layer is the template itself: one entry, "T"
    enc = make_encoder(tiny_bert_dir, bf16=False, device=CLI_DEVICE)
    by_key = {(e["template"], e.get("layer")): e for e in d["templates"]}
    for r in rows:
        want = evaluate_reps(enc, [rep(r["template"], denoise=True, layer=r.get("layer", 2))], ["sts16"])
        assert r["spearman"] == pytest.approx(next(iter(want.values()))["sts16"]["spearman"], abs=1e-4)
        assert by_key[(r["template"], r.get("layer"))]["spearman"] == r["spearman"]
    assert len(by_key) == len(d["templates"])  # no representation twice
    best = [r for r in d["path"] if r["stage"] == "layer:best"][0]
    last = [r for r in d["path"] if r["stage"] in ("relation:best", "prefix")][-1]
    assert best["taken"] == (best["spearman"] > last["spearman"] + best["min_gain"])
    assert d["x_baseline"]["best"] == (f"{last['template']} @layer {best['layer']}" if best["taken"]
                                       else last["template"])


@pytest.mark.parametrize("layers, message", [("0", "layer 0 (the embeddings)"), ("5", "layer 5"), ("x", "'x'")])
def test_greedy_bad_layers_are_one_line_and_write_nothing(layers, message, tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    out = tmp_path / "best.json"
    code = main(["greedy", "--model", str(tiny_bert_dir), "--layers", layers, "--out", str(out), "--no-cache", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and message in err and "\n" not in err and not out.exists()


def test_layers_are_parsed_once_at_the_command_line(bert_enc):
    """``--layers 3,4`` is parsed by the command line; the library takes "all" or layer numbers and says so
    in its own words when given the command line's text."""
    import argparse

    from promptsearch.cli.parser import layer_numbers
    from promptsearch.search import Scorer

    assert layer_numbers("all") == "all" and layer_numbers("2,-1") == [2, -1]
    with pytest.raises(argparse.ArgumentTypeError, match="'2,x'"):
        layer_numbers("2,x")
    scorer = Scorer(bert_enc, dataset="sts16", cache=False)
    assert scorer.layer_list([2, -1, 2]) == [2] and scorer.layer_list("all") == [1, 2] and scorer.layer_list(None) == []
    with pytest.raises(PromptSearchError, match=r"layers='1,2'"):
        scorer.layer_list("1,2")


def test_optuna_searches_the_layer_as_a_trial_parameter(tiny_bert_dir, tmp_path):
    import json

    from promptsearch.cli import main
    from promptsearch.encoding import rep
    from promptsearch.eval import evaluate_reps

    g = tmp_path / "grammar.json"
    g.write_text(json.dumps({"format": "{prefix} [X] {relation} [MASK] .",
                             "slots": {"prefix": ["", "This sentence :"], "relation": ["means", "is"]}}))
    out = tmp_path / "optuna.json"
    assert main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--layers", "all", "--trials", "6",
                 "--grammar", str(g), "--seed", "0", "--out", str(out), "--no-cache", "-q", "--no-bf16",
                 "--validate-top", "0", "--no-prune"]) == 0
    d = json.loads(out.read_text())
    trials = [e for e in d["templates"] if e["source"] != "baseline"]  # the model's own representation reads no layer
    # layer 2, the last, is the template's own read-out: its key names no layer
    assert {e.get("layer") for e in trials} <= {1, None}
    enc = make_encoder(tiny_bert_dir, bf16=False, device=CLI_DEVICE)
    for e in trials[:3]:
        at = {k: evaluate_reps(enc, [r], ["sts16"])[r]["sts16"]["spearman"]
              for k in (1, 2) for r in [rep(e["template"], denoise=True, layer=k)]}
        # without pruning a trial is scored on the full set at once: its own layer's eval number, told apart
        # from the other layer's
        assert e["spearman"] == pytest.approx(at[e.get("layer", 2)], abs=1e-4)
        assert abs(at[1] - at[2]) > 0.1


def test_a_layer_is_trained_saved_loaded_and_exported(tiny_bert_dir, sentences, tmp_path):
    import json

    from promptsearch import PromptEncoder
    from promptsearch.train.finetune import FinetuneConfig, finetune

    enc = make_encoder(tiny_bert_dir, bf16=False)
    cfg = FinetuneConfig(mode="unsup", templates=[PAPER_T, "[X] means [MASK] ."], lr=1e-3, batch_size=16, micro_batch=8,
                         max_steps=2, eval_steps=1, layer=1)
    summary = finetune(enc, sentences[:32], cfg, tmp_path / "ft", "tiny", TrainRun(resume=False))
    out = tmp_path / "ft"
    assert summary["device"] == "cpu"  # where the encoder is, also where a GPU is (Accelerate's default device)
    saved = json.loads((out / "promptsearch.json").read_text())
    assert saved["layer"] == 1
    # the dev score it tracked is the layer-1 read-out of the weights it started from
    start = make_encoder(tiny_bert_dir, bf16=False)
    from promptsearch.encoding import rep
    from promptsearch.eval import evaluate_reps

    r = rep(PAPER_T, denoise=True, layer=1)
    assert summary["start_dev"] == pytest.approx(evaluate_reps(start, [r], ["stsb-dev"])[r]["stsb-dev"]["spearman"],
                                                      abs=1e-4)
    loaded = PromptEncoder.from_pretrained(str(out), device="cpu", bf16=False)
    assert loaded.default_layer == 1
    probe = sentences[200:220]
    got = loaded.encode(probe)
    np.testing.assert_allclose(got, loaded.encode(probe, rep=rep(PAPER_T, denoise=True, layer=1)), atol=0)
    assert np.abs(got - loaded.encode(probe, template=PAPER_T, denoise=True)).max() > 1e-3  # not the last layer
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(st.encode(probe, batch_size=7), got, atol=1e-5)
