"""Bad input IV (issue 46), the scoring items: one data set named twice, the last layer scored twice,
near-constant similarities, the score cache and the tokenizer, a folder's representation in ``score``."""

from __future__ import annotations

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
