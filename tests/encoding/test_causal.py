"""Causal LMs (GPT-2, OPT, Llama; tiny, random, real tokenizer classes): the last token's state,
padding on either side, denoising, next-token predictions, and every search end to end."""

import json

import numpy as np
import pytest
import torch
from conftest import CAUSAL_T, make_encoder

from promptsearch.cli import main
from promptsearch.library import with_demos

KINDS = ["tiny_gpt2_dir", "tiny_opt_dir", "tiny_llama_dir"]
SENTS = ["a man is playing a guitar .", "two dogs run in the park", "the cat sat on the mat .",
         "a woman slices an onion"]


def _last_state(enc, ids, position_ids=None):
    """One unpadded forward of one input: the state at its last position."""
    with torch.no_grad():
        kw = {} if position_ids is None else {"position_ids": torch.tensor([position_ids])}
        h = enc.encoder(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long), **kw)
    return h.last_hidden_state[0, -1].float().numpy()


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("side", ["right", "left"])
def test_last_token_state_equals_a_plain_forward(kind, side, request):
    enc = make_encoder(request.getfixturevalue(kind), padding_side=side)
    assert enc.model.causal and enc.rendered(CAUSAL_T).n_template_tokens > 0
    vecs = enc.encode(SENTS, template=CAUSAL_T, batch_size=4)  # one batch: three rows are padded
    lengths = set()
    for s, v in zip(SENTS, vecs):
        sent = enc.sentence_ids(enc.prepare([s]), CAUSAL_T)[0]
        ids, pos = enc.rendered(CAUSAL_T).ids(sent)
        assert pos == len(ids) - 1 - enc.rendered(CAUSAL_T).n_trail  # the template's last token
        lengths.add(len(ids))
        np.testing.assert_allclose(v, _last_state(enc, ids), atol=1e-5)
    assert len(lengths) > 1  # the batch really was padded
    assert np.abs(vecs[0] - vecs[1]).max() > 1e-3


@pytest.mark.parametrize("kind", KINDS)
def test_denoising_subtracts_the_template_alone_with_shifted_positions(kind, request):
    enc = make_encoder(request.getfixturevalue(kind))
    r = enc.rendered(CAUSAL_T)
    st = enc.prompt_states(SENTS, CAUSAL_T, denoise=True)
    for i, s in enumerate(SENTS):
        n = len(enc.sentence_ids(enc.prepare([s]), CAUSAL_T)[0])
        ids = list(r.before) + list(r.after)
        pos = list(range(len(r.before))) + list(range(len(r.before) + n, len(r.before) + n + len(r.after)))
        np.testing.assert_allclose(st.bias[i], _last_state(enc, ids, pos), atol=1e-5)
    np.testing.assert_allclose(enc.encode(SENTS, template=CAUSAL_T, denoise=True), st.raw - st.bias, atol=1e-6)
    with torch.no_grad():
        b = enc.prompt.template_bias(CAUSAL_T, [1, 20]).numpy()
    assert np.abs(b[0] - b[1]).max() > 1e-4  # the bias depends on the shift


@pytest.mark.parametrize("kind", KINDS)
def test_next_token_logits_are_the_lm_head_at_the_last_token(kind, request):
    from promptsearch.eval.predict import mask_logits

    enc = make_encoder(request.getfixturevalue(kind))
    raw, _ = mask_logits(enc, ["a man plays ."], CAUSAL_T)
    sent = enc.sentence_ids(enc.prepare(["a man plays ."]), CAUSAL_T)[0]
    ids, _ = enc.rendered(CAUSAL_T).ids(sent)
    with torch.no_grad():
        expected = enc.model.lm(input_ids=torch.tensor([ids])).logits[0, -1]
    finite = torch.isfinite(raw[0])
    torch.testing.assert_close(raw[0][finite], expected[finite], atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_every_command_runs_on_a_causal_lm(kind, request, tmp_path, capsys):
    d = str(request.getfixturevalue(kind))
    common = ["--model", d, "-q", "--no-bf16"]
    assert main(["eval", *common, "--template", "PromptEOL", "--denoise", "--tasks", "sts16", "--json"]) == 0
    assert 0 < abs(json.loads(capsys.readouterr().out)["sts16"]) < 100
    assert main(["predict", *common, "--template", "PromptEOL", "a man plays the guitar ."]) == 0
    assert "without denoising" in capsys.readouterr().out
    assert main(["greedy", *common, "--vocabulary", "greedy-causal", "--max-steps", "1", "--dataset", "sts16",
                 "--out", str(tmp_path / "g.json"), "--no-cache"]) == 0
    g = json.loads((tmp_path / "g.json").read_text())
    assert g["templates"] and all("[MASK]" not in e["template"] for e in g["templates"])
    assert main(["optuna", *common, "--grammar", "grammar-causal", "--trials", "2", "--dataset", "sts16",
                 "--out", str(tmp_path / "o.json"), "--no-cache"]) == 0
    assert json.loads((tmp_path / "o.json").read_text())["x_study"]["finished"] >= 2
    assert main(["optiprompt", *common, "--template", "PromptEOL", "--steps", "2", "--eval-steps", "2",
                 "--train-batch-size", "8", "--micro-tokens", "64", "--final-tasks", "sts16", "--out",
                 str(tmp_path / "op")]) == 0
    saved = json.loads((tmp_path / "op" / "promptsearch.json").read_text())
    assert saved["template"] == CAUSAL_T and saved["soft_prompt"]
    capsys.readouterr()


def test_demonstrations_go_before_the_template(tiny_gpt2_dir, tmp_path, capsys):
    demos = tmp_path / "demos.tsv"
    demos.write_text("A jockey riding a horse.\tEquestrian\n# a comment\nA man is playing a flute.\tMusic\n",
                     encoding="utf-8")
    t = with_demos(CAUSAL_T, str(demos))
    assert t == ('This sentence : "A jockey riding a horse." means in one word:"Equestrian". '
                 'This sentence : "A man is playing a flute." means in one word:"Music". ' + CAUSAL_T)
    enc = make_encoder(tiny_gpt2_dir)
    assert len(enc.rendered(t).before) > len(enc.rendered(CAUSAL_T).before)
    one = tmp_path / "one.tsv"  # the tiny model has 64 positions: one demonstration fits with a sentence
    one.write_text("A dog runs.\tDog\n", encoding="utf-8")
    assert main(["eval", "--model", str(tiny_gpt2_dir), "--template", "PromptEOL", "--demos", str(one), "--tasks",
                 "sts16", "--json", "-q", "--no-bf16"]) == 0, capsys.readouterr().err


def test_device_auto_places_the_model_with_accelerate(tiny_gpt2_dir):
    from promptsearch import PromptEncoder

    # "auto" is no torch device: it must reach from_pretrained as device_map="auto" (one CPU here: all on it)
    enc = PromptEncoder.from_pretrained(str(tiny_gpt2_dir), device="auto", bf16=False, show_progress_bar=False)
    ref = make_encoder(tiny_gpt2_dir)
    np.testing.assert_allclose(enc.encode(SENTS, template=CAUSAL_T), ref.encode(SENTS, template=CAUSAL_T), atol=1e-5)
