"""Read-outs of a template's pass (issue 31): the mean over all tokens, over the sentence's tokens
(and the closing special tokens), the first token — each against a hand computation from the model's
own hidden states, masked and causal, right and left padding; the model's own representation as the
first candidate of every search and the rule that keeps it; the export to sentence-transformers."""

import json
import re
import warnings

import numpy as np
import pytest
import torch
from conftest import CLI_DEVICE, PAPER_T, json_without_promptsearch, make_encoder

from promptsearch.cli import main
from promptsearch.data import load_task
from promptsearch.encoding.reps import Mean, PromptPool
from promptsearch.eval import STSEvaluator
from promptsearch.representation import OWN

SENTS = ["a man is playing a guitar .", "a woman slices an onion", "the cat sat on the mat in the sun today",
         "dogs run ."]


def _hand(model, ids: list[int], sentence: slice, trail: int) -> dict[str, np.ndarray]:
    """One input alone (no padding): every read-out from its last hidden state."""
    with torch.no_grad():
        h = model(input_ids=torch.tensor([ids])).last_hidden_state[0].double().numpy()
    keep = list(range(len(ids)))[sentence] + list(range(len(ids) - trail, len(ids)))
    return {"mean": h.mean(0), "sentence-mean": h[sorted(set(keep))].mean(0), "cls": h[0]}


@pytest.mark.parametrize("template", ["query : [X]", "[X] means [MASK] .", "[X]"])
def test_bert_readouts_equal_a_hand_computation(tiny_bert_dir, template):
    enc = make_encoder(tiny_bert_dir)
    tok, model = enc.tokenizer, enc.encoder.eval()
    before, after = template.split("[X]")
    reps = [PromptPool(template, r) for r in ("mean", "sentence-mean", "cls")]
    got = enc.encode_reps(SENTS, reps)
    for i, s in enumerate(SENTS):
        pre = tok(before.strip(), add_special_tokens=False)["input_ids"] if before.strip() else []
        sent = tok(s, add_special_tokens=False)["input_ids"]
        post = tok(after.strip(), add_special_tokens=False)["input_ids"] if after.strip() else []
        ids = [tok.cls_token_id] + pre + sent + post + [tok.sep_token_id]
        want = _hand(model, ids, slice(1 + len(pre), 1 + len(pre) + len(sent)), 1)
        for r in reps:  # batched with padding: fp32 rounding only
            np.testing.assert_allclose(got[r][i], want[r.readout], rtol=0, atol=2e-5)


@pytest.mark.parametrize("side", ["right", "left"])
def test_causal_readouts_equal_a_hand_computation(tiny_gpt2_dir, side):
    enc = make_encoder(tiny_gpt2_dir, padding_side=side)
    tok, model = enc.tokenizer, enc.encoder.eval()
    template = "This sentence : [X] means"
    reps = [PromptPool(template, r) for r in ("mean", "sentence-mean")]
    got = enc.encode_reps(SENTS, reps)
    for i, s in enumerate(SENTS):
        pre = tok("This sentence :", add_special_tokens=False)["input_ids"]
        sent = tok(" " + s, add_special_tokens=False)["input_ids"]
        post = tok(" means", add_special_tokens=False)["input_ids"]
        want = _hand(model, pre + sent + post, slice(len(pre), len(pre) + len(sent)), 0)
        for r in reps:
            np.testing.assert_allclose(got[r][i], want[r.readout], rtol=0, atol=2e-5)


def test_plain_mean_template_is_the_models_mean_pooling(tiny_bert_dir):
    """``[X] @mean`` (sentence-transformers' mean pooling of the model's default stack) and the paper's "last avg"
    baseline pool the same tokens of the same pass: the same vectors up to float32 rounding (two code paths)."""
    enc = make_encoder(tiny_bert_dir)
    out = enc.encode_reps(SENTS, [PromptPool(OWN.split(" @")[0], "mean"), Mean()])
    a, b = out.values()
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-5 * float(np.abs(a).max()))


def _score(tiny_bert_dir, out, *templates, extra=()):
    return main(["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--no-cache", "-q", "--no-bf16",
                 "--validate-top", "0", "--out", str(out), *extra, *templates])


def test_the_models_own_representation_is_scored_first(tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "r.json"
    assert _score(tiny_bert_dir, out, PAPER_T, "query : [X]", extra=["--readout", "sentence-mean"]) == 0
    printed = capsys.readouterr().out
    d = json.loads(out.read_text())
    first = min(d["templates"], key=lambda e: e["order"])
    assert (first["template"], first.get("readout"), first["source"]) == ("[X]", "mean", "baseline")
    assert d["x_baseline"]["key"] == OWN and "model's own representation" in printed
    s = d["x_spread"]
    scores = [e["spearman"] for e in d["templates"]]
    assert (s["n"], s["min"], s["max"]) == (3, min(scores), max(scores))
    assert s["own_rank"] == 1 + sum(v > first["spearman"] for v in scores)
    enc = make_encoder(tiny_bert_dir, device=CLI_DEVICE)
    from promptsearch.eval import evaluate_reps
    own = PromptPool("[X]", "mean")
    want = evaluate_reps(enc, [own], ["sts16"])[own]["sts16"]["spearman"]
    assert first["spearman"] == pytest.approx(want, abs=1e-4)  # the results file rounds to 4 decimals
    # and "[X] @mean" is mean pooling: the same vectors to float32 rounding (the two passes batch the
    # sentences differently, which moves the last digits on some CPUs: on this tiny random model's
    # near-tied similarities that can move a rank, so the vectors are compared, not the Spearman)
    sents = STSEvaluator(load_task("sts16")).sentences
    got = enc.encode(sents[:200], rep=own)
    np.testing.assert_allclose(got, enc.encode(sents[:200], rep=Mean()), rtol=0, atol=2e-5 * float(np.abs(got).max()))


@pytest.mark.parametrize("min_gain, kept", [(1000.0, True), (-1000.0, False)])
def test_a_template_replaces_the_own_representation_only_beyond_noise(tiny_bert_dir, min_gain, kept):
    from promptsearch.representation import Representation
    from promptsearch.search import GivenTemplates, Results, Runner, Scorer
    from promptsearch.search.baseline import score_own, settle, verdict_lines

    scorer = Scorer(make_encoder(tiny_bert_dir), dataset="sts16", cache=False)
    res = Results(None, "tiny", "sts16", "score", True)
    strategy = GivenTemplates([PAPER_T])
    strategy.min_gain = min_gain
    runner = Runner(strategy, scorer, res)
    own = score_own(runner)
    runner.record(scorer.score(PAPER_T), "score")
    paper = Representation.of(PAPER_T)
    runner.choose(paper)  # the strategy's answer, whatever it scored
    settle(runner)
    assert res.best.entry_key == (own if kept else paper) and own.text == OWN
    said, line = verdict_lines(res)[:2]
    assert said == "the model's own: mean pooling, 64 tokens"  # what was read as the model's own (its default stack)
    if kept:
        assert line.startswith("no template beats the model's own representation")
    else:
        assert " beats the model's own" in line
    v = res.baseline
    assert v.kept is kept and v.gain == pytest.approx(res.entries[paper].spearman - res.entries[own].spearman, abs=2e-4)


def test_export_round_trip_through_sentence_transformers(tiny_bert_dir, tmp_path, capsys):
    """SentenceTransformer(folder).encode scored by its own EmbeddingSimilarityEvaluator equals
    promptsearch eval of the same representation (STS-B dev, within 0.01)."""
    folder = tmp_path / "st"
    assert main(["export", "--model", str(tiny_bert_dir), "--template", "query : [X] @sentence-mean", "--out",
                 str(folder)]) == 0
    capsys.readouterr()
    assert not (folder / "promptsearch.json").exists()
    cfg = json.loads((folder / "config_sentence_transformers.json").read_text())
    assert cfg["prompts"] == {"query": "query : ", "document": "query : "} and cfg["default_prompt_name"] == "query"
    assert main(["eval", "--model", str(tiny_bert_dir), "--template", "query : [X]", "--readout", "sentence-mean",
                 "--tasks", "stsb-dev", "--json", "-q", "--no-bf16"]) == 0
    ours = json.loads(capsys.readouterr().out)["stsb-dev"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from sentence_transformers import SentenceTransformer
        from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

        from promptsearch.data import load_task

        a, b, y = load_task("stsb-dev").subsets["dev"]
        st = SentenceTransformer(str(folder), device="cpu")  # no trust_remote_code
        theirs = EmbeddingSimilarityEvaluator(a, b, y, main_similarity="cosine", write_csv=False)(st)
    key = next(k for k in theirs if k.endswith("spearman_cosine"))
    assert abs(100 * theirs[key] - ours) < 0.01
    # another process in which promptsearch cannot be imported at all loads the folder the same way
    probe = ["two dogs run in the park .", "a man plays a guitar ."]
    got = json_without_promptsearch(f"""
st = SentenceTransformer({str(folder)!r}, device="cpu")
print(json.dumps(st.encode({probe!r}).tolist()))
""", tmp_path)
    np.testing.assert_allclose(np.array(got), st.encode(probe), atol=1e-5)


@pytest.mark.parametrize("argv, message", [
    (["eval", "--template", "query : [X]", "--readout", "maxi"], "invalid choice: 'maxi'"),
    (["eval", "--model", "{gpt2}", "--template", "a [X] b", "--readout", "cls", "--tasks", "sts16", "-q"],
     "does not put first"),
    (["eval", "--model", "{bert}", "--template", "query : [X]", "--readout", "mean", "--denoise", "-q"],
     "drop --denoise"),
    (["eval", "--model", "{bert}", "--pooling", "mean", "--readout", "mean", "-q"], "give a --template"),
    (["export", "--model", "{bert}", "--template", "a [X] @mean + [X] @cls", "--out", "{new}"], "is an ensemble"),
    (["export", "--model", "{bert}", "--template", PAPER_T, "--out", "{new}"], "reads the [MASK] state"),
    (["export", "--model", "{bert}", "--template", "[X] means @mean", "--out", "{new}"], "has text after [X]"),
    (["greedy", "--model", "{bert}", "--readouts", "mean,maxi", "--out", "{new}.json"], "unknown read-out 'maxi'"),
])
def test_bad_readout_input_is_one_line(tiny_bert_dir, tiny_gpt2_dir, tmp_path, capsys, argv, message):
    new = tmp_path / "new"
    argv = [a.format(gpt2=tiny_gpt2_dir, bert=tiny_bert_dir, new=new) for a in argv]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not new.exists() and not (tmp_path / "new.json").exists()


def test_optuna_takes_the_readout_as_a_trial_parameter(tiny_bert_dir, tmp_path):
    from promptsearch.encoding.reps import rep_from_key
    from promptsearch.eval import evaluate_reps

    g = tmp_path / "grammar.json"
    g.write_text(json.dumps({"format": "{prefix} [X] {relation} [MASK] .",
                             "slots": {"prefix": ["", "This sentence :"], "relation": ["means", "is"]}}))
    out = tmp_path / "optuna.json"
    assert main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--readouts", "mean,sentence-mean",
                 "--trials", "12", "--grammar", str(g), "--seed", "0", "--out", str(out), "--no-cache", "-q",
                 "--no-bf16",
                 "--validate-top", "0", "--no-prune"]) == 0  # every trial scored on the full set at once: eval's number
    d = json.loads(out.read_text())
    trials = [e for e in d["templates"] if e["source"].startswith("optuna")]
    assert {e.get("readout") for e in trials} > {None}  # pooled and [MASK] trials both
    enc = make_encoder(tiny_bert_dir, device=CLI_DEVICE)
    for e in trials:
        key = e["template"] + (" @" + e["readout"] if e.get("readout") else "")
        r = rep_from_key(key, denoise=True)
        want = evaluate_reps(enc, [r], ["sts16"])[r]["sts16"]["spearman"]
        assert e["spearman"] == pytest.approx(want, abs=1e-4)
        assert e["denoise"] is (e.get("readout") is None)


def test_finetune_starts_from_a_pooled_answer_and_never_ends_below_it(tiny_bert_dir, tmp_path, capsys):
    """``finetune --templates best.json`` where the answer is a pooled read-out (the model's own mean
    pooling here): it trains that read-out (SimCSE-style: the prompt is both views' context), keeps the
    best dev checkpoint with the start among them, and the folder reads out the same way."""
    from promptsearch import PromptEncoder
    from promptsearch.search.results import Results

    res = tmp_path / "r.json"
    assert _score(tiny_bert_dir, res, "query : [X]", extra=["--readout", "mean", "--dataset", "stsb-dev"]) == 0
    answer = Results.load(res).best
    assert answer.readout == "mean"
    ft = tmp_path / "ft"
    assert main(["finetune", "--model", str(tiny_bert_dir), "--templates", str(res), "--max-steps", "3", "--eval-steps",
                 "1", "--train-batch-size", "8", "--micro-batch", "4", "--out", str(ft), "--final-tasks", "sts16",
                 "--no-bf16", "-q"]) == 0
    cap = capsys.readouterr()
    assert f"fine-tuning {answer.key}" in cap.err
    saved = json.loads((ft / "promptsearch.json").read_text())
    assert (saved["template"], saved["readout"], saved["denoise"]) == (answer.template, "mean", False)
    start, best = (float(x) for x in re.search(r"STS-B dev ([\d.]+) \(start\) -> ([\d.]+)", cap.out).groups())
    # printed to 2 decimals; never below its start
    assert start == pytest.approx(answer.spearman, abs=0.0051) and best >= start
    tuned = PromptEncoder.from_pretrained(str(ft), bf16=False, show_progress_bar=False)
    assert tuned.default_readout == "mean"
    r = PromptPool(answer.template, "mean")
    np.testing.assert_allclose(tuned.encode(SENTS), tuned.encode_reps(SENTS, [r])[r], rtol=0, atol=1e-6)
    # a pooled prompt's folder is a plain sentence-transformers folder of what was trained
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(ft), device="cpu")
    np.testing.assert_allclose(st.encode(SENTS), tuned.encode(SENTS), rtol=0, atol=1e-5)
    assert tuned.own_representation() == answer.entry_key


def test_finetune_reuses_the_scores_it_has(tiny_bert_dir, tmp_path, capsys, monkeypatch):
    """The start's dev score and the table's start row are score-cache lookups: a second run from the
    same start encodes neither again (only its own training-time dev evaluations), and prints the same."""
    from collections import Counter

    from promptsearch.eval.objective import Objective
    from promptsearch.eval.sts import STSEvaluator

    monkeypatch.setenv("PROMPTSEARCH_CACHE", str(tmp_path / "scores.jsonl"))
    passes = Counter()

    def counting(cls, name):
        real = cls.encode

        def counted(self, *a, **kw):
            passes[name(self)] += 1
            return real(self, *a, **kw)
        monkeypatch.setattr(cls, "encode", counted)

    counting(STSEvaluator, lambda ev: ev.name)  # the trainer's dev evaluations
    counting(Objective, lambda ob: ",".join(ob.sets))  # scorer passes: the start, the table

    def run(out):
        passes.clear()
        assert main(["finetune", "--model", str(tiny_bert_dir), "--template", "query : [X]", "--readout", "mean",
                     "--max-steps", "2", "--eval-steps", "1", "--train-batch-size", "8", "--micro-batch", "4", "--out",
                     str(tmp_path / out), "--final-tasks", "sts16", "--no-bf16", "-q"]) == 0
        printed = capsys.readouterr().out
        return dict(passes), re.search(r"STS-B dev ([\d.]+) \(start\)", printed).group(1), printed.splitlines()[-2]

    first, start1, row1 = run("a")
    second, start2, row2 = run("b")
    assert first["stsb-dev"] == 3 and second["stsb-dev"] == 2  # the start, then steps 1 and 2; the start once only
    assert first["sts16"] == 2 and second["sts16"] <= 1  # start and trained rows; the start row once only
    assert (start1, row1) == (start2, row2)


def test_greedy_prefix_steps_on_the_best_pooled_prompt(tiny_bert_dir, tmp_path):
    from conftest import write_vocab as _vocab

    from promptsearch.encoding.reps import rep_from_key
    from promptsearch.eval import evaluate_reps

    out = tmp_path / "best.json"
    assert main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--vocabulary", _vocab(tmp_path),
                 "--max-steps", "1", "--readout-steps", "2", "--min-gain", "0", "--out", str(out), "--no-cache", "-q",
                 "--no-bf16", "--validate-top", "0", "--no-racing"]) == 0
    d = json.loads(out.read_text())
    rows = [r for r in d["path"] if r["stage"] in ("readout-prefix", "readout-stop")]
    assert rows and all(r["stage"] == "readout-prefix" for r in rows[:-1]) and len(rows) <= 2
    assert all((r["stage"] == "readout-prefix") == (r["gain"] > 0) for r in rows)  # --min-gain 0: any gain is a step
    enc = make_encoder(tiny_bert_dir, device=CLI_DEVICE)
    for r in rows:
        rep = rep_from_key(r["template"])
        assert r["spearman"] == pytest.approx(evaluate_reps(enc, [rep], ["sts16"])[rep]["sts16"]["spearman"], abs=1e-4)


def test_optuna_over_a_grammar_of_prompts_without_mask(tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "o.json"
    argv = ["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--grammar", "grammar-pooled", "--trials",
            "6", "--seed", "0", "--out", str(out), "--no-cache", "-q", "--no-bf16", "--validate-top", "0"]
    assert main(argv) == 2 and "--readouts mean,sentence-mean" in capsys.readouterr().err and not out.exists()
    assert main(argv + ["--readouts", "mean,sentence-mean"]) == 0
    trials = [e for e in json.loads(out.read_text())["templates"] if e["source"].startswith("optuna")]
    assert len(trials) >= 1 and all(e["readout"] in ("mean",
                                                     "sentence-mean") and "[MASK]" not in e["template"] for e in trials)
