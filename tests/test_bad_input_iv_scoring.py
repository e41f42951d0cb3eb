"""Bad input IV (issue 46), the scoring items: one data set named twice, the last layer scored twice,
near-constant similarities, the score cache and the tokenizer, a folder's representation in ``score``."""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import PAPER_T


def _pairs_csv(path, n=40, same=False):
    """``n`` STS-B dev pairs as a csv (``same``: each pair a sentence with itself)."""
    import datasets

    from promptsearch.data import load_task

    a, b, y = next(iter(load_task("stsb-dev").subsets.values()))
    a, b, y = list(a[:n]), list(b[:n]), [float(v) for v in y[:n]]
    datasets.Dataset.from_dict({"sentence1": a, "sentence2": a if same else b, "score": y}).to_csv(str(path), index=False)
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
    from promptsearch.search import Scorer

    scorer = Scorer(bert_enc, dataset="sts16", cache=False)
    n = bert_enc.prompt.n_layers
    assert scorer.layer_list("all") == list(range(1, n + 1))
    assert scorer.at_layer(n) is scorer and scorer.at_layer(-1) is scorer and scorer.at_layer(1).layer == 1
    plain = scorer.score(PAPER_T)
    scores = scorer.score_layers(PAPER_T, scorer.layer_list("all"))
    assert scores[n].key == plain.key == PAPER_T and scores[n].spearman == plain.spearman and scores[n].cached
    assert scores[1].key == f"{PAPER_T} @layer 1"


def test_greedy_over_all_layers_holds_each_representation_once(tiny_bert_dir, tmp_path):
    from promptsearch.cli import main
    from conftest import write_vocab

    out = tmp_path / "best.json"
    assert main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--vocabulary", write_vocab(tmp_path),
                 "--max-steps", "1", "--layers", "all", "--readouts", "none", "--out", str(out), "--no-cache", "-q",
                 "--no-bf16", "--validate-top", "0", "--no-racing"]) == 0
    d = json.loads(out.read_text())
    assert not [e for e in d["templates"] if e.get("layer") == 2]  # 'T @layer 2' is 'T' (this model's last layer)
    template = [r for r in d["path"] if r["stage"] == "layer"][0]["template"]
    assert sorted(e.get("layer") or 0 for e in d["templates"] if e["template"] == template) == [0, 1]
    assert d["x_spread"]["n"] == len(d["templates"])
