"""Bad input IV (issue 46), the scoring items: one data set named twice, the last layer scored twice,
near-constant similarities, the score cache and the tokenizer, a folder's representation in ``score``."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from conftest import PAPER_T, make_encoder

from promptsearch import PromptSearchError


def _pairs_csv(path, n=40, same=False, title=False):
    """``n`` STS-B dev pairs as a csv (``same``: each pair a sentence with itself; ``title``: Every Word
    Capitalized)."""
    import datasets

    from promptsearch.data import load_task

    a, b, y = next(iter(load_task("stsb-dev").subsets.values()))
    first = {s: i for i, s in reversed(list(enumerate(a)))}  # each first sentence once: no pair repeated
    keep = sorted(first.values())[:n]
    a, b, y = [a[i] for i in keep], [b[i] for i in keep], [float(y[i]) for i in keep]
    if title:
        a, b = [x.title() for x in a], [x.title() for x in b]
    datasets.Dataset.from_dict({"sentence1": a, "sentence2": a if same else b, "score": y}).to_csv(str(path),
                                                                                                   index=False)
    return path


# ---- item 5: one data set under two spellings is one set ---------------------------------------------

@pytest.mark.parametrize("second", ["./p.csv", "q.csv"])  # the same file, or a copy of its pairs
def test_one_data_set_named_twice_is_refused(second, tiny_bert_dir, tmp_path, monkeypatch, capsys):
    from promptsearch.cli import main

    monkeypatch.chdir(tmp_path)
    _pairs_csv(tmp_path / "p.csv")
    shutil.copy(tmp_path / "p.csv", tmp_path / "q.csv")
    out = tmp_path / "s.json"
    capsys.readouterr()
    code = main(["score", PAPER_T, "--model", str(tiny_bert_dir), "--dataset", f"p.csv,{second}", "--out", str(out),
                 "-q", "--no-bf16", "--validate-top", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "once" in err and "\n" not in err
    assert not out.exists() and not (tmp_path / "scores.jsonl").exists()


# ---- item 6: the last layer is the template itself, scored once --------------------------------------

def test_the_last_layer_is_the_template_itself(bert_enc):
    from promptsearch.representation import Representation
    from promptsearch.search import Scorer

    scorer = Scorer(bert_enc, dataset="sts16", cache=False)
    n = bert_enc.prompt.n_layers
    assert scorer.layer_list("all") == list(range(1, n + 1))
    assert scorer.at_layer(n) is scorer and scorer.at_layer(-1) is scorer and scorer.at_layer(1).layer == 1
    plain = scorer.score(PAPER_T)
    scores = dict(zip(scorer.layer_list("all"),
                      scorer.score([Representation(PAPER_T, k) for k in scorer.layer_list("all")])))
    assert scores[n].key == plain.key == PAPER_T and scores[n].spearman == plain.spearman and scores[n].cached
    assert scores[1].key == f"{PAPER_T} @layer 1"


def test_greedy_over_all_layers_holds_each_representation_once(tiny_bert_dir, tmp_path):
    from conftest import write_vocab

    from promptsearch.cli import main

    out = tmp_path / "best.json"
    assert main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--vocabulary", write_vocab(tmp_path),
                 "--max-steps", "1", "--layers", "all", "--readouts", "none", "--out", str(out), "--no-cache", "-q",
                 "--no-bf16", "--validate-top", "0", "--no-racing"]) == 0
    d = json.loads(out.read_text())
    assert not [e for e in d["templates"] if e.get("layer") == 2]  # 'T @layer 2' is 'T' (this model's last layer)
    template = [r for r in d["path"] if r["stage"] == "layer"][0]["template"]
    assert sorted(e.get("layer") or 0 for e in d["templates"] if e["template"] == template) == [0, 1]
    assert d["x_spread"]["n"] == len(d["templates"])


# ---- item 7: similarities constant up to rounding give no number --------------------------------------

def test_similarities_that_differ_by_rounding_alone_give_no_number():
    from promptsearch.data import STSData
    from promptsearch.eval import STSEvaluator
    from promptsearch.eval.objective import Objective
    from promptsearch.eval.sts import rounding_spread

    rng = np.random.default_rng(0)
    sents = [f"sentence {i}" for i in range(60)]
    data = STSData("same", {"same": (sents, sents, list(rng.uniform(0, 5, 60)))})  # each pair a sentence and itself
    ev = STSEvaluator(data)
    vecs = rng.standard_normal((60, 384)).astype(np.float32) * rng.uniform(0.1, 10, (60, 1)).astype(np.float32)
    sims = ev.similarities(vecs)
    assert 0 < np.ptp(sims) <= rounding_spread(sims, 384)  # cos(v, v) = 1, up to float32 rounding
    assert np.ptp(ev.similarities(vecs.astype(np.float64))) < 1e-14
    for score in (ev.score, ev.spearman, Objective({"same": ev}).scores):
        with pytest.raises(PromptSearchError, match="up to float rounding"):
            score(vecs)
    # a spread below what rounding could make, yet made by the vectors (it is there in float64): a number
    base = rng.standard_normal(384)
    tiny = (base + 1e-2 * rng.standard_normal((60, 384))).astype(np.float32)
    pairs = STSData("tiny", {"tiny": (sents, [s + " ." for s in sents], list(rng.uniform(0, 5, 60)))})
    ev3 = STSEvaluator(pairs)
    both = np.concatenate([tiny, np.repeat(base[None].astype(np.float32), 60, 0)])
    sims = ev3.similarities(both)
    assert np.ptp(sims) <= rounding_spread(sims, 384)
    assert np.isfinite(ev3.score(both)["spearman"])
    # a real spread is a number, however small against 1
    other = vecs.copy()
    other[:, 0] += np.linspace(0, 1, 60, dtype=np.float32) * np.abs(vecs).max()
    data2 = STSData("near", {"near": (sents, [s + " ." for s in sents], list(rng.uniform(0, 5, 60)))})
    ev2 = STSEvaluator(data2)
    assert np.isfinite(ev2.score(np.concatenate([vecs, other]))["spearman"])


def test_eval_on_pairs_of_identical_sentences_is_one_line(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    p = _pairs_csv(tmp_path / "same.csv", n=60, same=True)
    capsys.readouterr()
    code = main(["eval", "--model", str(tiny_bert_dir), "--tasks", str(p), "--template", PAPER_T, "-q", "--no-bf16"])
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2 and "undefined" in err and "\n" not in err and not captured.out


# ---- item 8: the score cache knows the tokenizer ----------------------------------------------------

def test_the_score_cache_follows_the_tokenizer(tiny_bert_dir, tmp_path):
    from promptsearch.model.loading import model_fingerprint, tokenizer_fingerprint
    from promptsearch.search import Scorer

    m = tmp_path / "m"
    shutil.copytree(tiny_bert_dir, m)
    cache, data = tmp_path / "c.jsonl", str(_pairs_csv(tmp_path / "p.csv", n=200, title=True))  # cased words
    lower = Scorer(make_encoder(m, bf16=False), dataset=data, cache=cache).score("[X] is [MASK] .")
    assert not lower.cached
    # the same: reused
    assert Scorer(make_encoder(m, bf16=False), dataset=data, cache=cache).score("[X] is [MASK] .").cached
    cfg = json.loads((m / "tokenizer_config.json").read_text())
    assert cfg["do_lower_case"] is True
    (m / "tokenizer_config.json").write_text(json.dumps({**cfg, "do_lower_case": False}))
    cased = make_encoder(m, bf16=False)
    assert cased.tokenizer("A Man")["input_ids"] != make_encoder(tiny_bert_dir).tokenizer("A Man")["input_ids"]
    got = Scorer(cased, dataset=data, cache=cache).score("[X] is [MASK] .")
    fresh = Scorer(cased, dataset=data, cache=False).score("[X] is [MASK] .")
    assert not got.cached and got.spearman == fresh.spearman and abs(got.spearman - lower.spearman) > 0.01
    # a copy of a folder is the same model: its fingerprint (weights and tokenizer) the same
    shutil.copytree(tiny_bert_dir, tmp_path / "copy")
    a, b = make_encoder(tmp_path / "copy"), make_encoder(tiny_bert_dir)
    assert model_fingerprint(a.model) == model_fingerprint(b.model)
    assert tokenizer_fingerprint(a.tokenizer) == tokenizer_fingerprint(b.tokenizer)


def test_a_results_file_resumes_unless_its_tokenizer_changed(tiny_bert_dir, tmp_path, capsys):
    """A results file records the tokenizer beside the weights: one from before it was recorded resumes (its weights
    decide, as they did then); one recorded with another tokenizer is refused, in words that say so."""
    from promptsearch.cli import main

    res = tmp_path / "r.json"
    argv = ["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--no-cache", "--no-bf16", "--validate-top",
            "0", "--out", str(res), "-q"]
    assert main([*argv, "[X] is [MASK] ."]) == 0
    d = json.loads(res.read_text())
    assert d["numbers"]["tokenizer"] and d["numbers"]["model"]
    del d["numbers"]["tokenizer"]
    res.write_text(json.dumps(d))
    assert main([*argv, "[X] means [MASK] ."]) == 0  # resumed
    d = json.loads(res.read_text())
    d["numbers"]["tokenizer"] = "0" * 12
    res.write_text(json.dumps(d))
    capsys.readouterr()
    assert main([*argv, "[X] says [MASK] ."]) == 2
    assert "another tokenizer" in capsys.readouterr().err


# ---- item 9: score reads a folder's representation as eval does ---------------------------------------

def _eval_number(main, capsys, folder, *extra) -> float:
    assert main(["eval", "--template-dir", str(folder), "--tasks", "sts16", "--json", "-q", "--no-bf16", *extra]) == 0
    return json.loads(capsys.readouterr().out)["sts16"]


def _score_entry(main, capsys, folder, out, *extra) -> dict:
    assert main(["score", "--template-dir", str(folder), "--dataset", "sts16", "--out", str(out), "--no-cache", "-q",
                 "--no-bf16", "--validate-top", "0", *extra]) == 0
    capsys.readouterr()
    return [e for e in json.loads(out.read_text())["templates"] if e["source"] == "score"][0]


def test_a_tokenizers_fingerprint_does_not_change_as_it_is_used(tiny_bert_dir, tiny_roberta_dir):
    """Truncation and padding a call sets on a fast tokenizer are not what it does: the fingerprint stays, so a run
    resumed in the same process (train-head's checkpoint, the score cache) is not taken for another model."""
    from transformers import AutoTokenizer

    from promptsearch.model.loading import tokenizer_fingerprint

    for d in (tiny_bert_dir, tiny_roberta_dir):
        tok = AutoTokenizer.from_pretrained(str(d))
        before = tokenizer_fingerprint(tok)
        tok(["a man plays a guitar .", "a dog"], truncation=True, max_length=4, padding="max_length")
        assert tokenizer_fingerprint(tok) == before


def test_score_reads_a_folders_representation_as_eval_does(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    train = tmp_path / "train.txt"
    train.write_text("\n".join(f"sentence number {i} is about a {w} ." for i, w in enumerate(["cat", "dog",
                                                                                              "man"] * 20)))
    common = ["--model", str(tiny_bert_dir), "--train-file", str(train), "--max-steps", "1", "--train-batch-size", "8",
              "--micro-batch", "4", "--final-tasks", "sts16", "--no-bf16", "-q"]
    # a pooled folder: its read-out, not the [MASK] state
    assert main(["finetune", *common, "--template", "query : [X]", "--readout", "mean", "--out",
                 str(tmp_path / "pooled")]) == 0
    capsys.readouterr()
    e = _score_entry(main, capsys, tmp_path / "pooled", tmp_path / "p.json")
    assert e.get("readout") == "mean" and e["denoise"] is False
    # both round to 4 places
    assert e["spearman"] == pytest.approx(_eval_number(main, capsys, tmp_path / "pooled"), abs=1e-4)
    # a [MASK] folder (OptiPrompt vectors) read at layer 1, raw: its layer and its denoising
    assert main(["optiprompt", "--model", str(tiny_bert_dir), "--train-file", str(train), "--steps", "1",
                 "--train-batch-size", "8", "--final-tasks", "sts16", "--no-bf16", "-q", "--template", PAPER_T, "--out",
                 str(tmp_path / "mask")]) == 0
    capsys.readouterr()
    cfg_path = tmp_path / "mask" / "promptsearch.json"
    cfg = json.loads(cfg_path.read_text())
    cfg_path.write_text(json.dumps({**cfg, "layer": 1, "denoise": False}))
    e = _score_entry(main, capsys, tmp_path / "mask", tmp_path / "m.json")
    assert (e["template"], e.get("layer"), e["denoise"]) == (PAPER_T, 1, False)
    at1 = _eval_number(main, capsys, tmp_path / "mask")
    assert e["spearman"] == pytest.approx(at1, abs=1e-4)
    assert abs(at1 - _eval_number(main, capsys, tmp_path / "mask", "--layer", "2")) > 1e-3  # layer 1 is not the last
    # a --readout given still wins over the folder's
    e = _score_entry(main, capsys, tmp_path / "pooled", tmp_path / "p2.json", "--readout", "cls")
    assert e.get("readout") == "cls"
