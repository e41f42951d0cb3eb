"""The command line: results on the tiny model, one-line errors for bad input."""

import json

import pytest
from conftest import PAPER_T, run_cli

from promptsearch.cli import main


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_eval_json_on_tiny_model(tiny_bert_dir, capsys):
    code, out, err = run(["eval", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--denoise",
                          "--tasks", "sts16,stsb-dev", "--json", "-q", "--no-bf16"], capsys)
    assert code == 0
    res = json.loads(out)
    assert set(res) == {"sts16", "stsb-dev", "avg"}
    assert res["avg"] == pytest.approx((res["sts16"] + res["stsb-dev"]) / 2, abs=1e-3)


def test_eval_table_and_ditto_search(tiny_bert_dir, capsys):
    code, out, _ = run(["eval", "--model", str(tiny_bert_dir), "--pooling", "first-last", "--tasks", "sts13", "-q"],
                       capsys)
    assert code == 0 and "STS13" in out and "first-last" in out
    code, out, _ = run(["ditto-search", "--model", str(tiny_bert_dir), "-q", "--json"], capsys)
    heads = json.loads(out)
    assert code == 0 and len(heads) == 2 * 4
    assert heads == sorted(heads, key=lambda h: -h["spearman"])


def test_eval_ditto_uses_the_given_attention_head(tiny_bert_dir, capsys):
    code, out, _ = run(["ditto-search", "--model", str(tiny_bert_dir), "-q", "--json"], capsys)
    best = json.loads(out)[0]
    code, out, _ = run(["eval", "--model", str(tiny_bert_dir), "--pooling", "ditto", "--head", best["head"],
                        "--tasks", "stsb-dev", "-q", "--json"], capsys)
    assert code == 0 and json.loads(out)["stsb-dev"] == pytest.approx(best["spearman"], abs=0.05)


# Bad input of every command: tests/cli/test_bad_input.py (one table).


def test_unreadable_row_via_console_script(tmp_path):
    (tmp_path / "STSBenchmark").mkdir()
    (tmp_path / "STSBenchmark" / "sts-dev.csv").write_text("only\tthree\tfields\n", encoding="utf-8")
    p = run_cli(["eval", "--pooling", "static", "--data-dir", tmp_path])
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"promptsearch eval: error: {tmp_path}/STSBenchmark/sts-dev.csv:1: "
        "expected 7 tab-separated fields, found 3 field(s)"]


def test_usage_error_is_one_line(capsys):
    assert main(["eval", "--batch-size", "many"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "--batch-size" in err and "'many'" in err


def test_score_command_table_and_cache(tiny_bert_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PROMPTSEARCH_CACHE", str(tmp_path / "c.jsonl"))
    (tmp_path / "t.txt").write_text("# paper\n" + PAPER_T + "\n[X] means [MASK] .\n")
    argv = ["score", "--model", str(tiny_bert_dir), "--file", str(tmp_path / "t.txt"), "--dataset", "sts16", "-q",
            "--no-bf16", "--out", str(tmp_path / "s.json")]
    code, out, _ = run(argv, capsys)
    assert code == 0 and PAPER_T in out and "scored 3 templates" in out  # 2 and the model's own representation
    code, out, _ = run(argv[:-2] + ["--out", str(tmp_path / "s2.json")], capsys)
    assert "scored no template in full: 3 came from the cache;" in out and "racing" not in out


def test_the_next_step_exports_only_what_a_sentence_transformers_folder_holds(tmp_path, capsys):
    """From a user's trial: greedy chose its [MASK] template pooled ('[X] is [MASK] . @mean', its read-out step) and
    said 'next: promptsearch export ... # a sentence-transformers folder', which export then refused (text after
    [X]). The step now exports the best entry a folder holds, on the search's model, and says why not the chosen;
    an answer a folder holds is exported from the results file as before."""
    import argparse

    from promptsearch.cli.search import next_steps
    from promptsearch.search import Results

    def steps(chosen: str) -> list[str]:
        rows = [("[X] is [MASK] .", "mean", 35.0), ("query: [X]", "sentence-mean", 34.0),
                ("[X] is [MASK] .", None, 30.0)]
        path = tmp_path / "r.json"
        path.write_text(json.dumps({
            "schema": "promptsearch.results/1", "model": "tiny", "dataset": "stsb-dev", "strategy": "greedy",
            "denoise": False, "settings": {}, "created": "", "updated": "",
            "stats": {"scored": 3, "cached": 0, "seconds": 1.0, "templates_per_minute": 1.0},
            "templates": [{"template": t, "spearman": s, "denoise": False, "seconds": 1.0, "order": i + 1,
                           **({"readout": ro} if ro else {})} for i, (t, ro, s) in enumerate(rows)],
            "x_chosen": chosen}))
        return next_steps(Results.load(path), argparse.Namespace(model="tiny")).splitlines()

    export = steps("[X] is [MASK] . @mean")[3]
    assert export.startswith("  promptsearch export --model tiny --template 'query: [X] @sentence-mean' --out my-model"
                             "     # 34.00, the best a sentence-transformers folder holds (the chosen cannot: it has "
                             "text after [X]"), export
    assert steps("query: [X] @sentence-mean")[3] == (f"  promptsearch export {tmp_path / 'r.json'} --out my-model     "
                                                      "# a sentence-transformers folder")
