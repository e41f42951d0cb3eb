"""promptsearch retrieval --data A,B: several sets searched as one (the mean of their nDCG@10, {task} in a prompt each
set's description), resumed, handed to workers, exported with the user's own task; bad input in one line."""

import dataclasses
import json

import pytest
from conftest import beir_folder, small_retrieval_data

from promptsearch.cli import main


@pytest.fixture(scope="module")
def sets(tmp_path_factory):
    whole = small_retrieval_data(36, 120)
    ids = list(whole.queries)
    root = tmp_path_factory.mktemp("sets")
    out = []
    for name, part in (("seta", ids[:16]), ("setb", ids[16:])):
        d = dataclasses.replace(whole, queries={q: whole.queries[q] for q in part},
                                relevant={q: whole.relevant[q] for q in part})
        out.append(str(beir_folder(root / name, d)))
    return out


def argv_for(model, sets, tmp_path, *more):
    return ["retrieval", "--model", str(model), "--data", ",".join(sets), "--readouts", "cls", "--no-bf16", "-q",
            "--cache-dir", str(tmp_path / "cache"), "--description", "Find the sentence that says the same",
            "--description", "Retrieve a paraphrase", *more]


def test_two_sets_are_searched_as_the_mean_of_their_ndcg_and_resumed(tiny_bert_encoder_only_dir, sets, tmp_path,
                                                                      capsys):
    out = tmp_path / "r.json"
    argv = argv_for(tiny_bert_encoder_only_dir, sets, tmp_path, "--out", str(out))
    assert main(argv) == 0
    text = capsys.readouterr().out
    lines = text.strip().splitlines()
    i = lines.index("next:")
    assert lines[i - 1].startswith("chosen: query prompt ")
    assert any(x.startswith("per set (ndcg@10, the chosen / the model's own): seta ") and ", setb " in x for x in lines)
    assert "searched on 29 of 36 queries (--holdout 0.2)" in text  # 13 of 16 and 16 of 20: each set held out alike
    d = json.loads(out.read_text())
    assert [s["name"] for s in d["data"]["sets"]] == ["seta", "setb"] and d["data"]["objective"] == "mean"
    assert [s["queries"] for s in d["data"]["sets"]] == [13, 16]
    for e in d["entries"]:  # each metric the mean of the two sets' (each rounded to 6 places in the file)
        m = e["metrics"]
        assert m["ndcg@10"] == pytest.approx((m["seta:ndcg@10"] + m["setb:ndcg@10"]) / 2, abs=1.5e-6)
        assert len(e["per_query"]["ndcg@10"]) == 29
    # a prompt naming the task is one candidate, kept as written: each set filled it with its own description
    assert any("{task}" in e["query"] for e in d["entries"])
    assert main(["plot", str(out), "--out", str(tmp_path / "r.svg")]) == 0  # the picture says what its numbers are
    assert "the mean of 2 sets&#x27; ndcg@10" in (tmp_path / "r.svg").read_text() or \
        "the mean of 2 sets' ndcg@10" in (tmp_path / "r.svg").read_text()
    assert main(argv) == 0  # resumed: nothing scored again
    assert "0 candidates scored now" in capsys.readouterr().out
    # another description is another run's numbers: refused in one line
    other = [a if a != "Retrieve a paraphrase" else "Retrieve a question" for a in argv]
    assert main(other) == 2
    err = capsys.readouterr().err  # says which set's description differs (the names and sizes are the same)
    assert ("holds a retrieval run with another description for setb ('Retrieve a paraphrase', not "
            "'Retrieve a question' as now)") in err


def test_a_worker_rebuilds_the_same_sets_and_scores_a_job_as_the_driver_does(tiny_bert_encoder_only_dir, sets,
                                                                             tmp_path):
    from promptsearch.cli.parser import build_parser
    from promptsearch.cli.retrieval import source_of, work_for
    from promptsearch.eval.retrieval import RetrievalCandidate
    from promptsearch.search.distributed import Job
    from promptsearch.search.retrieval import job_key

    args = build_parser().parse_args(argv_for(tiny_bert_encoder_only_dir, sets, tmp_path))
    driver = work_for(args, {"source": source_of(args), "precision": "fp32"}, str(tiny_bert_encoder_only_dir))
    spec = json.loads(json.dumps(driver.spec(str(tiny_bert_encoder_only_dir))))  # as the work study stores it
    worker = work_for(args, spec, str(tiny_bert_encoder_only_dir))
    worker.check(spec, str(tiny_bert_encoder_only_dir))  # the same sets, descriptions and draws: accepted
    c = RetrievalCandidate.of("Instruct: {task}\nQuery: ", "", "cls")
    got = worker.do(Job("retrieval", job_key(c)))
    want = driver.task.evaluate(driver.enc, [c], per_query=True)[c]
    assert got["metrics"] == {k: v for k, v in want.items() if k != "per_query"}
    assert got["per_query"] == list(want["per_query"]["ndcg@10"])
    # another set's description: other data
    with pytest.raises(Exception, match=r"this worker.s retrieval data differ from the study.s \(fingerprint: "):
        worker.check({**spec, "data": {**spec["data"], "fingerprint": "0" * 16}}, str(tiny_bert_encoder_only_dir))


def test_an_answer_naming_the_task_exports_with_the_users_own(tiny_bert_encoder_only_dir, sets, tmp_path, capsys):
    from sentence_transformers import SentenceTransformer

    out = tmp_path / "r.json"
    assert main(argv_for(tiny_bert_encoder_only_dir, sets, tmp_path, "--out", str(out), "--holdout", "0")) == 0
    capsys.readouterr()
    d = json.loads(out.read_text())
    d["best"] = {"query": "Instruct: {task}\nQuery: ", "document": "", "readout": "cls"}  # as if it had won
    out.write_text(json.dumps(d))
    from promptsearch.cli.retrieval import next_steps
    from promptsearch.search.retrieval import RetrievalResults

    assert "--description 'what your task is, in one sentence'" in next_steps(RetrievalResults.load(out))
    assert main(["export", str(out), "--out", str(tmp_path / "m0")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "give --description 'one sentence" in err
    assert main(["export", str(out), "--out", str(tmp_path / "m"), "--description", "Find the same question."]) == 0
    m = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    assert m.prompts["query"] == "Instruct: Find the same question\nQuery: " and m.prompts["document"] == ""
    d["best"] = {"query": "query: ", "document": "", "readout": "cls"}
    out.write_text(json.dumps(d))
    assert main(["export", str(out), "--out", str(tmp_path / "m2"), "--description", "x"]) == 2
    assert "name no {task}" in capsys.readouterr().err


@pytest.mark.parametrize("more, says", [
    (["--description", "a", "--description", "b", "--description", "c"], "--description is given 3 times for 2"),
    (["--generate", "gpt2"], "--generate asks for instructions for one task"),
])
def test_bad_input_over_several_sets_is_one_line(more, says, sets, tmp_path, capsys):
    code = main(["retrieval", "--data", ",".join(sets), "--out", str(tmp_path / "r.json"), "-q", *more])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.json").exists()


def test_one_set_given_twice_is_one_line(sets, tmp_path, capsys):
    code = main(["retrieval", "--data", f"{sets[0]},{sets[0]}", "--out", str(tmp_path / "r.json"), "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "give each set once" in err and len(err.strip().splitlines()) == 1, err


def test_optuna_over_two_sets_keeps_each_sets_score_and_the_task_unfilled(tiny_bert_encoder_only_dir, sets, tmp_path,
                                                                          capsys):
    out = tmp_path / "o.json"
    argv = argv_for(tiny_bert_encoder_only_dir, sets, tmp_path, "--out", str(out), "--strategy", "optuna",
                    "--trials", "12", "--tpe-seed", "0")
    assert main(argv) == 0
    said = capsys.readouterr().out
    assert "per set (ndcg@10, the " in said and ": seta 0." in said and ", setb 0." in said
    d = json.loads(out.read_text())
    assert len(d["entries"]) >= 8 and all({"seta:ndcg@10", "setb:ndcg@10"} <= set(e["metrics"]) for e in d["entries"])
    # the grammar's and library's {task} stays as written in every candidate: each set filled it with its own
    assert not any("Find the sentence that says the same" in e["query"] for e in d["entries"])
    assert any("{task}" in e["query"] for e in d["entries"])
    assert main(argv) == 0 and "0 candidates scored now" in capsys.readouterr().out  # the study resumed


def test_the_help_says_queries_is_each_sets_count():
    """--queries N with several sets draws N of each (200 searched for --queries 100 over two): the help says so."""
    from promptsearch.cli.parser import build_parser

    subs = build_parser()._subparsers._group_actions[0].choices
    text = " ".join(subs["retrieval"].format_help().split())
    assert "several --data sets, N of each set's" in text


def test_per_set_line_shows_the_searchs_best_when_the_own_is_the_answer():
    """The held-out check (or the step rule) gave the model's own: 'the chosen / the model's own' was one number
    twice; the line then shows the search's best against the model's own."""
    import numpy as np

    from promptsearch.search.retrieval import RetrievalCandidate, RetrievalEntry, RetrievalResults, summary

    data = {"name": "a,b", "fingerprint": "0" * 16, "queries": 4, "corpus": 9, "objective": "mean",
            "sets": [{"name": "a", "queries": 2, "corpus": 4}, {"name": "b", "queries": 2, "corpus": 5}]}
    res = RetrievalResults(None, "tiny", data, "fp32", {})
    own, q = RetrievalCandidate.of("", "", "mean"), RetrievalCandidate.of("query: ", "", "mean")
    for c, a, b in ((own, 0.9, 0.5), (q, 0.95, 0.45)):
        res.add(RetrievalEntry(c, {"ndcg@10": (a + b) / 2, "a:ndcg@10": a, "b:ndcg@10": b}, "x", 0.0,
                               np.array([a, a, b, b])))
    res.own = res.best = own
    res.verdict = {"kept": True, "challenger": q.to_json(), "gain": 0.0, "se": 0.01, "min_gain": 0.01,
                   "taken": False}
    line = next(x for x in summary(res) if x.startswith("per set"))
    assert line == ("per set (ndcg@10, the search's best, query \"query: \"  document \"\"  @mean / the model's own, "
                    "the answer): a 0.9500 / 0.9000, b 0.4500 / 0.5000")
    res.best = q  # the search's best is the answer: the chosen / the model's own
    line = next(x for x in summary(res) if x.startswith("per set"))
    assert line == "per set (ndcg@10, the chosen / the model's own): a 0.9500 / 0.9000, b 0.4500 / 0.5000"


def test_min_over_two_sets_scores_the_worst_set_is_recorded_and_a_mean_run_is_another(tiny_bert_encoder_only_dir, sets,
                                                                                     tmp_path, capsys):
    """--objective min, as STS's several dev sets take it: each candidate's score is its worse set's, the data line and
    the picture say min, a worker rebuilds the same objective, and the file refuses a rerun with the mean."""
    from promptsearch.cli.retrieval import work_for
    from promptsearch.search.retrieval import RetrievalResults

    out = tmp_path / "min.json"
    argv = argv_for(tiny_bert_encoder_only_dir, sets, tmp_path, "--out", str(out), "--objective", "min")
    argv.remove("-q")
    assert main(argv) == 0
    got = capsys.readouterr()
    assert "in 2 sets (the metric: the min of their nDCG@10;" in got.err
    d = json.loads(out.read_text())
    assert d["data"]["objective"] == "min"
    for e in d["entries"]:
        m = e["metrics"]
        assert m["ndcg@10"] == pytest.approx(min(m["seta:ndcg@10"], m["setb:ndcg@10"]), abs=1e-6)
    assert RetrievalResults.load(out).objective == "min"
    assert main(["plot", str(out), "--out", str(tmp_path / "m.svg")]) == 0
    assert "the min of 2 sets" in (tmp_path / "m.svg").read_text()
    mean = [a for a in argv if a not in ("--objective", "min")]
    assert main(mean) == 2
    err = capsys.readouterr().err
    assert "holds a retrieval run with the min of its sets' scores, not their mean (--objective)" in err
    import argparse

    spec = {"source": {"data": ",".join(sets), "split": "test", "relevant_from": None,
                       "description": ["Find the sentence that says the same", "Retrieve a paraphrase"],
                       "holdout": 0.2, "queries": None, "seed": 0, "float16_above_gib": 2.0, "max_length": None,
                       "objective": "min"}, "precision": "fp32"}
    args = argparse.Namespace(data_dir=None, bf16=False, max_length=None, cache_dir=str(tmp_path / "cache"),
                              device=None, mlm_head=None, batch_size=None, max_tokens=None, add_period=True,
                              compat="promptsearch", quiet=True, model=str(tiny_bert_encoder_only_dir))
    assert work_for(args, spec, str(tiny_bert_encoder_only_dir)).task.objective == "min"
