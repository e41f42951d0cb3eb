"""``promptsearch plot``: pictures of a greedy path, an Optuna study and plain scores (issue 21, item 7)."""

import json

import pytest
from conftest import PAPER_T

from promptsearch.cli import main


@pytest.fixture(scope="module")
def greedy_file(tiny_bert_dir, tmp_path_factory):
    from conftest import write_vocab as _vocab

    d = tmp_path_factory.mktemp("plot")
    out = d / "best.json"
    assert main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sick-trial,sts16", "--vocabulary", _vocab(d),
                 "--max-steps", "2", "--ensemble", "2", "--min-gain", "0", "--out", str(out), "--no-cache", "-q",
                 "--no-bf16", "--validate-top", "1", "--validate-on", "sts13", "--no-racing"]) == 0
    return out


def test_greedy_path_records_error_bars_and_plots(greedy_file, tmp_path, capsys):
    d = json.loads(greedy_file.read_text())
    steps = [r for r in d["path"] if r["stage"] in ("relation:best", "prefix")]
    assert all(0 < r["score_se"] < 10 for r in steps)  # a bootstrap s.e. of a Spearman ×100 on ~1,700 pairs
    svg = tmp_path / "path.svg"
    assert main(["plot", str(greedy_file), "--out", str(svg)]) == 0
    assert f"wrote {svg}" in capsys.readouterr().out
    text = svg.read_text()
    assert (text.startswith("<?xml") and "greedy path" in text and "STS13 (held out)" in text
            and "SICK-R trial (dev)" in text)
    png = tmp_path / "path.png"
    assert main(["plot", str(greedy_file), "--out", str(png)]) == 0 and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plain_scores_plot_and_bad_input(tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "scores.json"
    assert main(["score", PAPER_T, "[X] means [MASK] .", "--model", str(tiny_bert_dir), "--dataset", "sts16",
                 "--out", str(out), "--no-cache", "-q", "--no-bf16", "--validate-top", "0"]) == 0
    assert main(["plot", str(out)]) == 0
    svg = (tmp_path / "scores.svg").read_text()
    assert "3 templates" in svg and "median" in svg  # the two and the model's own representation, with the spread
    capsys.readouterr()
    for argv, message in ((["plot", str(out), "--out", str(tmp_path / "p.txt")], "give a .svg, .png or .pdf"),
                          (["plot", str(tmp_path / "none.json")], "no results file"),
                          (["plot", str(out), "--out", str(tmp_path)], "is a directory")):
        code = main(argv)
        err = capsys.readouterr().err.strip()
        assert code == 2 and message in err and "\n" not in err
    assert not (tmp_path / "p.txt").exists()


def test_optuna_plots_history_importances_and_pareto_front(tiny_bert_dir, tmp_path, capsys):
    g = tmp_path / "grammar.json"
    g.write_text(json.dumps({"format": "{prefix} [X] {relation} [MASK] .",
                             "slots": {"prefix": ["", "This sentence :", "A"],
                                       "relation": ["means", "is", "is like"]}}))
    out = tmp_path / "optuna.json"
    assert main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sick-trial,sts16", "--pareto", "--trials", "5",
                 "--grammar", str(g), "--seed", "0", "--out", str(out), "--no-cache", "-q", "--no-bf16",
                 "--validate-top", "0"]) == 0
    assert main(["plot", str(out), "--out", str(tmp_path / "study.svg")]) == 0
    for name in ("study.svg", "study-importances.svg", "study-pareto.svg"):
        assert (tmp_path / name).read_text().startswith("<?xml")
    # a database's password is kept out of the file (a user's trial: it was written there in clear); plot is given
    # the URL with it
    d = json.loads(out.read_text())
    real = d["x_study"]["storage"]
    assert real == d["settings"]["storage"] and real.startswith("sqlite:///")
    d["x_study"]["storage"] = "postgresql://me:***@db.example.org/ps"  # as a PostgreSQL run's file records it
    out.write_text(json.dumps(d))
    assert main(["plot", str(out), "--out", str(tmp_path / "again.svg")]) == 2
    assert "records its study's storage postgresql://me:***@db.example.org/ps without its password; give the URL " \
           "with it: --storage URL" in capsys.readouterr().err
    assert main(["plot", str(out), "--out", str(tmp_path / "again.svg"), "--storage", real]) == 0
    assert (tmp_path / "again-importances.svg").is_file()


def test_a_storage_password_is_kept_out_of_an_optuna_runs_results():
    from promptsearch.search.optuna_search import OptunaSearch

    s = OptunaSearch(storage="postgresql://me:secret@db.example.org/ps", study_name="x")
    assert s.settings()["storage"] == "postgresql://me:***@db.example.org/ps"
    s = OptunaSearch(storage="postgresql://me@db.example.org/ps?password=secret", study_name="x")  # libpq's form
    assert s.settings()["storage"] == "postgresql://me@db.example.org/ps?password=***"


def test_a_retrieval_run_plots_its_candidates_and_judgements(tiny_bert_encoder_only_dir, tmp_path, capsys):
    from conftest import beir_folder, small_retrieval_data

    beir = beir_folder(tmp_path / "beir", small_retrieval_data(20, 60))
    common = ["--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--cache-dir", str(tmp_path / "c"),
              "--readouts", "cls", "-q"]
    out = tmp_path / "r.json"
    assert main(["retrieval", *common, "--out", str(out)]) == 0
    capsys.readouterr()
    assert main(["plot", str(out)]) == 0
    svg = tmp_path / "r.svg"
    assert capsys.readouterr().out.strip() == f"wrote {svg}"
    text = svg.read_text()
    d = json.loads(out.read_text())
    assert "the model&#x27;s own" in text or "the model's own" in text
    assert f"{len(d['entries'])} candidates" in text and "judgements" in text
    # every step of the path has its row, judged or not (a step whose best was the lead: no step, said so)
    assert d["path"] and all(f"step {s['stage']}" in text for s in d["path"])
    if any("gain" not in s for s in d["path"]):
        assert "the lead scored best: no step" in text
    if d["best"] == d["own"]:  # one label saying both, not two brackets
        assert "(the model&#x27;s own, the answer)" in text or "(the model's own, the answer)" in text
    # an Optuna run: its study's history beside it
    opt = tmp_path / "o.json"
    assert main(["retrieval", *common, "--out", str(opt), "--strategy", "optuna", "--trials", "4"]) == 0
    capsys.readouterr()
    assert main(["plot", str(opt), "--out", str(tmp_path / "o.png")]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'o.png'}, {tmp_path / 'o-history.png'}"
    assert (tmp_path / "o-history.png").read_bytes()[:4] == b"\x89PNG"
    # a PostgreSQL study (its URL recorded without the password): the picture, and a note that the history is not
    # drawn and how to draw it; given --storage, drawn (a user's trial: it was left out without a word)
    o = json.loads(opt.read_text())
    real = o["strategy"]["storage"]
    opt.write_text(json.dumps({**o, "strategy": {**o["strategy"], "storage": "postgresql://me:***@h/ps"}}))
    assert main(["plot", str(opt), "--out", str(tmp_path / "p.png")]) == 0
    out_err = capsys.readouterr()
    assert out_err.out.strip() == f"wrote {tmp_path / 'p.png'}"
    assert "note: the study's history is not drawn (" in out_err.err and "--storage URL" in out_err.err, out_err.err
    assert main(["plot", str(opt), "--out", str(tmp_path / "p.png"), "--storage", real]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'p.png'}, {tmp_path / 'p-history.png'}"
    empty = tmp_path / "e.json"
    empty.write_text(json.dumps({**d, "entries": [], "own": None, "best": None}))
    assert main(["plot", str(empty)]) == 2
    assert "holds no scored candidate yet" in capsys.readouterr().err


def test_a_retrieval_pictures_judgements_hold_every_step_and_labels_say_both_tags_once():
    from types import SimpleNamespace

    from promptsearch.search.plots import _judgements, _tags

    path = [{"stage": "query", "gain": 0.01, "se": 0.004, "min_gain": 0.004, "taken": True},
            {"stage": "document"},  # its best was the lead: nothing judged
            {"stage": "readout", "gain": -0.002, "se": 0.003, "min_gain": 0.003, "taken": False}]
    verdict = {"gain": 0.01, "se": 0.004, "min_gain": 0.004, "taken": True,
               "unseen": {"queries": 40, "gain": 0.002, "se": 0.005, "min_gain": 0.0, "taken": True}}
    rows = _judgements(SimpleNamespace(steps=path, verdict=verdict))
    assert [r[0] for r in rows] == ["step query", "step document", "step readout", "verdict: vs the model's own",
                                    "check: 40 unseen queries"]
    assert [r[4] for r in rows] == [True, None, False, True, True]
    assert _judgements(SimpleNamespace(steps=[], verdict=None)) == [
        ("nothing judged: the model's own scored best", 0.0, 0.0, 0.0, None)]
    assert _tags(True, True) == " (the model's own, the answer)" and _tags(False, True) == " (the answer)"
    assert _tags(True, False) == " (the model's own)" and _tags(False, False) == ""


def test_a_retrieval_picture_tells_candidates_with_long_prompts_apart(tiny_bert_encoder_only_dir, tmp_path):
    """Candidates that share a long query prompt, or differ only at its end, keep distinct labels that name their
    document prompt and read-out (a label cut at a fixed length showed the same text for all of them)."""
    import re

    from conftest import beir_folder, small_retrieval_data

    beir = beir_folder(tmp_path / "beir", small_retrieval_data(10, 30))
    long = "Represent this sentence for searching relevant passages about the same topic"
    lib = tmp_path / "lib.json"
    lib.write_text(json.dumps({"query": [{"prompt": p, "source": "t"} for p in ("", long + ": ", long + "\nQuery: ")],
                               "document": [{"prompt": p, "source": "t"} for p in ("", "passage: ")]}))
    out = tmp_path / "r.json"
    assert main(["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--cache-dir",
                 str(tmp_path / "c"), "--readouts", "cls", "--prompts", str(lib), "--holdout", "0", "-q",
                 "--out", str(out)]) == 0
    assert main(["plot", str(out)]) == 0
    labels = re.findall(r"<!-- (query .*?) -->", (tmp_path / "r.svg").read_text())
    n = len(json.loads(out.read_text())["entries"])
    assert n >= 4 and len(set(labels)) == len(labels) == n, labels
    assert all(re.search(r'document ".*" +@\w', s) for s in labels), labels
