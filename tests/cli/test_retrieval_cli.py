"""promptsearch retrieval: a whole run on a BEIR folder (its output ends with the chosen prompts, the model's own, the
spread and the next step), a rerun resumed without scoring, bad input in one line with exit 2."""

import dataclasses
import json
import re

import numpy as np
import pytest
from conftest import beir_folder, run_cli, small_retrieval_data

from promptsearch.cli import main
from promptsearch.cli.retrieval import _raced, few_searched_note


@pytest.fixture(scope="module")
def beir(tmp_path_factory):
    return beir_folder(tmp_path_factory.mktemp("beir") / "small", small_retrieval_data(20, 80))


def test_a_run_prints_the_answer_and_a_rerun_resumes_it(tiny_bert_encoder_only_dir, beir, tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
            "--cache-dir", str(tmp_path / "cache"), "--readouts", "cls", "-q"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    lines = text.strip().splitlines()
    assert "corpus encodings: " in text and "0 resumed" in text
    assert any(x.startswith("the model's own: query \"\"  document \"\"  @mean") for x in lines)
    i = lines.index("next:")
    assert lines[i - 1].startswith("chosen: query prompt ") and lines[i - 2].startswith("spread of the ")
    assert f"promptsearch export {out} --out my-retrieval-model" in lines[i + 1] and "encode_query" in lines[i + 2]
    assert lines[i + 3:] == [f"  promptsearch plot {out}     # the search's picture: every candidate and each step's "
                             "judgement", f"  promptsearch tui --results {out}     # the leaderboard"]
    d = json.loads(out.read_text())
    assert d["kind"] == "retrieval" and d["data"]["queries"] == 16 and d["best"] and d["own"]  # 4 of 20 held out
    n = len(d["entries"])
    assert d["stats"]["corpus_encodings"] == len({(e["document"], e["readout"]) for e in d["entries"]})
    assert main(argv) == 0  # the same command again: resumed, nothing scored, the corpus not encoded
    again = capsys.readouterr().out
    assert ("corpus encodings: 0 computed in 0 passes over the corpus, 0 read back from the cache; 0 candidates "
            "scored now") in again
    assert len(json.loads(out.read_text())["entries"]) == n
    assert again.splitlines()[-6:] == lines[-6:]


@pytest.mark.parametrize(("stats", "said"), [
    ({"screen_passes": 2, "screen_reused": 1}, "racing dropped 3 after 2 passes over a smaller corpus and 1 encoding "
                                               "read back from the cache"),
    ({"screen_passes": 1, "screen_reused": 0}, "racing dropped 3 after 1 pass over a smaller corpus"),
    ({"screen_passes": 0, "screen_reused": 2}, "racing dropped 3 on a smaller corpus, its 2 encodings read back from "
                                               "the cache"),
    ({"races_read": 1}, "racing dropped 3 (1 race read back from r.json, not screened again)")])
def test_the_racing_summary_says_how_the_screen_was_had(stats, said):
    # a screen in part encoded and in part read back from the cache (a run cut off midway) says both
    res = dataclasses.make_dataclass("Res", ["stats", "path"])(stats, "r.json")
    assert _raced(res, 3) == said


def test_the_document_step_races_unless_told_not_to(tiny_bert_encoder_only_dir, tmp_path, capsys):
    # a corpus whose screen is small: the 16 queries' judged documents and a tenth of 300 others
    beir = beir_folder(tmp_path / "race", small_retrieval_data(20, 300))
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--readouts", "cls", "-q",
            "--cache-dir", str(tmp_path / "cache")]
    assert main([*argv, "--out", str(tmp_path / "raced.json")]) == 0
    raced = capsys.readouterr().out
    assert main([*argv, "--out", str(tmp_path / "plain.json"), "--no-racing"]) == 0
    plain = capsys.readouterr().out
    r, p = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("raced", "plain"))
    race = next(s for s in r["path"] if s["stage"] == "document")["race"]
    assert race["screened"] == 3 and len(race["dropped"]) >= 1
    assert "racing dropped" in raced and "racing dropped" not in plain
    assert f"({len(race['dropped'])} of 3 document prompts dropped by racing on " in raced
    assert len(p["entries"]) - len(r["entries"]) == len(race["dropped"])  # the rest scored alike ...
    same = {json.dumps({k: e[k] for k in ("query", "document", "readout")}): e["metrics"] for e in r["entries"]}
    assert all(same[json.dumps({k: e[k] for k in ("query", "document", "readout")})] == e["metrics"]
               for e in p["entries"] if json.dumps({k: e[k] for k in ("query", "document", "readout")}) in same)
    assert not any("race" in s for s in p["path"])  # ... and nothing raced without it
    # the screen read back from the cache (no pass over it) drops the same ones, and the summary says so
    assert main([*argv, "--out", str(tmp_path / "again.json")]) == 0
    again = capsys.readouterr().out
    a = json.loads((tmp_path / "again.json").read_text())
    assert a["stats"]["screen_passes"] == 0 and a["stats"]["screen_reused"] == r["stats"]["screen_passes"] > 0
    n = a["stats"]["screen_reused"]
    assert (f"racing dropped {len(race['dropped'])} on a smaller corpus, its {n} encoding{'s' if n > 1 else ''} "
            "read back from the cache") in again
    # a resumed run reads the race back from its file: no screen at all, the same path
    assert main([*argv, "--out", str(tmp_path / "raced.json")]) == 0
    resumed = capsys.readouterr().out
    b = json.loads((tmp_path / "raced.json").read_text())
    assert b["stats"]["screen_passes"] == b["stats"]["screen_reused"] == 0 and b["stats"]["races_read"] == 1
    assert b["path"] == r["path"] and list(b["races"].values()) == [race]
    assert (f"racing dropped {len(race['dropped'])} (1 race read back from {tmp_path / 'raced.json'}, not screened "
            "again)") in resumed


def test_queries_held_out_and_left_out_of_a_sample_are_where_the_answer_is_checked(tiny_bert_encoder_only_dir, beir,
                                                                                   tmp_path, capsys):
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--readouts", "cls", "-q",
            "--cache-dir", str(tmp_path / "cache")]
    assert main([*argv, "--out", str(tmp_path / "s.json"), "--queries", "5"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    i = lines.index("next:")
    assert lines[i - 1].startswith("chosen: query prompt ")  # the output still ends with the answer and the next step
    assert lines[1] == ("searched on 5 of 20 queries (--holdout 0.2, --queries 5); an answer other than the "
                        "model's own is checked on the other 15")  # after the corpus line, before the ranking
    assert json.loads((tmp_path / "s.json").read_text())["data"]["queries"] == 5
    assert main([*argv, "--out", str(tmp_path / "h.json")]) == 0  # the default: a fifth held out
    assert "searched on 16 of 20 queries (--holdout 0.2); " in capsys.readouterr().out
    assert main([*argv, "--out", str(tmp_path / "all.json"), "--holdout", "0"]) == 0  # none held out: no such line
    assert "searched on" not in capsys.readouterr().out
    r = run_cli([*argv, "--out", str(tmp_path / "bad.json"), "--holdout", "1"], timeout=300)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and err[-1].startswith("promptsearch retrieval: error: --holdout 1.0: give the share")


@pytest.mark.parametrize("holdout", ["0", "0.2"])
def test_the_answer_exports_to_a_folder_whose_encode_query_and_document_score_the_same(tiny_bert_encoder_only_dir,
                                                                                     beir, holdout, tmp_path, capsys):
    """The folder's encode_query / encode_document give the file's numbers on the queries searched: all of them, or
    with a fifth held out, the ones the file's query_ids lists (what the chosen line says it is on)."""
    from sentence_transformers import SentenceTransformer

    from promptsearch.data.retrieval import load_retrieval
    from promptsearch.eval.ir_metrics import retrieval_metrics

    out = tmp_path / "r.json"
    assert main(["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
                 "--no-cache", "--readouts", "cls", "--no-bf16", "--holdout", holdout, "-q"]) == 0
    n = 20 if holdout == "0" else 16
    chosen = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("chosen: "))
    assert re.search(rf"   ndcg@10 \d\.\d{{4}} on the {n} queries searched$", chosen), chosen
    assert main(["export", str(out), "--out", str(tmp_path / "m")]) == 0
    capsys.readouterr()
    d = json.loads(out.read_text())
    best = next(e for e in d["entries"] if {k: e[k] for k in ("query", "document", "readout")} == d["best"])
    m = SentenceTransformer(str(tmp_path / "m"), device="cpu")
    assert m.prompts["query"] == d["best"]["query"] and m.prompts["document"] == d["best"]["document"]
    data = load_retrieval(str(beir))
    assert len(d["query_ids"]) == n and set(d["query_ids"]) <= set(data.queries)
    data = dataclasses.replace(data, queries={i: data.queries[i] for i in d["query_ids"]},
                               relevant={i: data.relevant[i] for i in d["query_ids"]})
    q = m.encode_query([data.queries[i] for i in data.queries])
    c = m.encode_document([data.corpus[i] for i in data.corpus])
    got = retrieval_metrics(q, c, list(data.queries), list(data.corpus), data.relevant, per_query=True)
    # the search scored the corpus's float32 vectors, which the folder's encode_document gives again (up to how rows
    # are batched, ~1e-7, which reorders no two documents here): the same cosines, the same numbers exactly, as the
    # results file writes them (6 decimals), and each query's nDCG@10 where query_ids puts it
    assert got["ndcg@10"] != pytest.approx(1.0, abs=0.05)  # mid-range: a reordering would move it
    assert {k: round(got[k], 6) for k in best["metrics"]} == best["metrics"]
    each = [round(float(x), 6) for x in got["per_query"]["ndcg@10"]]
    assert each == best["per_query"]["ndcg@10"] and len(set(each)) > 2  # differing values: their order is checked


def test_a_corpus_above_the_float16_limit_is_noted_and_a_bad_limit_is_one_line(tiny_bert_encoder_only_dir, beir,
                                                                               tmp_path, capsys):
    out = tmp_path / "r.json"
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
            "--cache-dir", str(tmp_path / "cache"), "--readouts", "cls", "-q"]
    assert main([*argv, "--float16-above-gib", "0"]) == 0
    notes = [x for x in capsys.readouterr().err.splitlines() if "float16" in x]
    assert len(notes) == 1 and "above --float16-above-gib 0: they are stored in float16" in notes[0], notes
    assert all(np.load(p, mmap_mode="r").dtype == np.float16 for p in (tmp_path / "cache").iterdir())
    resumed = main(argv)  # the same file at the default limit would store float32: its scores are not mixed in
    err = capsys.readouterr().err
    assert resumed == 2 and "corpus_dtype" in err and "Traceback" not in err, err
    assert json.loads(out.read_text())["numbers"]["corpus_dtype"] == "float16"
    code = main([*argv, "--out", str(tmp_path / "r2.json"), "--float16-above-gib", "-1"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--float16-above-gib: must be at least 0, not -1" in err
    assert not (tmp_path / "r2.json").exists()


def test_another_models_results_are_refused(tiny_bert_encoder_only_dir, tiny_bert_dir, beir, tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text(json.dumps({"kind": "retrieval", "version": 1, "model": str(tiny_bert_dir), "data": {},
                               "precision": "fp32", "entries": []}))
    code = main(["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
                 "--no-cache", "-q"])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # (a note about the tiny model's missing MLM head comes first)
    assert code == 2 and last.startswith("promptsearch retrieval: error: ") and "Traceback" not in err
    assert f"holds a retrieval run with --model '{tiny_bert_dir}', not" in last and "pass another --out" in last


@pytest.mark.parametrize("argv, says", [
    (["--data", "/no/such/folder"], "no retrieval data '/no/such/folder'"),
    (["--data", "demo", "--split", "dev"], "drop --split 'dev'"),
    (["--readouts", "avg"], "--readouts: 'avg' is no pooled read-out"),
    (["--relevant-from", "x"], "--relevant-from 'x' is not a number"),
    (["--queries", "0"], "--queries: must be at least 1"),
    (["--columns", "a,b,score"], "--columns and --subset-column name the columns of sentence pairs"),
    (["--race-share", "1.5"], "--race-share 1.5: give the share of the corpus racing screens on"),
    (["--no-local"], "--no-local leaves the greedy steps' scoring to 'promptsearch worker' processes: give --storage"),
    (["--no-local", "--storage", "sqlite:///x.db", "--strategy", "optuna"], "without --strategy optuna"),
    # an Optuna flag under the greedy steps would do nothing: said, not ignored
    (["--trials", "5"], "--trials applies to --strategy optuna; add it, or drop --trials"),
    (["--tpe-seed", "1"], "--tpe-seed applies to --strategy optuna"),
    (["--batch-trials", "2"], "--batch-trials applies to --strategy optuna"),
    (["--study-name", "s"], "--study-name names an Optuna study (--strategy optuna) or, with --storage URL"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, tmp_path, capsys):
    code = main(["retrieval", "--out", str(tmp_path / "r.json"), "-q", *argv])
    err = capsys.readouterr().err
    assert code == 2 and says in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "r.json").exists()


@pytest.mark.slow  # the default model over the demo corpus (2,647 sentences) about 5 times: minutes on 2 cores
@pytest.mark.realmodel
def test_the_default_model_on_the_demo_task(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli(["retrieval", "--model", "default", "--data", "demo", "--queries", "20", "--out", out, "--no-cache",
                 "-q"], timeout=1800)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.strip().splitlines()
    i = lines.index("next:")
    assert lines[i - 1].startswith("chosen: query prompt ") and lines[i - 2].startswith("spread of the ")
    assert lines[-2:] == [f"  promptsearch plot {out}     # the search's picture: every candidate and each step's "
                          "judgement", f"  promptsearch tui --results {out}     # the leaderboard"]
    assert ("searched on 20 of 259 queries (--holdout 0.2, --queries 20); an answer other than the model's own is "
            "checked on the other 239") in lines
    assert any(x.startswith("the model's own: query \"\"  document \"\"  @mean") for x in lines)
    d = json.loads(out.read_text())
    assert d["data"] == {**d["data"], "name": "stsb-paraphrase", "queries": 20, "corpus": 2647}
    own = next(e for e in d["entries"] if e["source"] == "own")
    best = next(e for e in d["entries"] if {k: e[k] for k in ("query", "document", "readout")} == d["best"])
    assert best["metrics"]["ndcg@10"] >= own["metrics"]["ndcg@10"]  # never worse than the model's own


def test_optuna_over_the_prompts_runs_end_to_end_and_resumes(tiny_bert_encoder_only_dir, beir, tmp_path, capsys):
    out = tmp_path / "o.json"
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
            "--cache-dir", str(tmp_path / "cache"), "--strategy", "optuna", "--trials", "6", "--batch-trials", "3"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    lines = captured.out.strip().splitlines()
    assert "optuna: study 'promptsearch-retrieval-" in captured.err and (tmp_path / "o.db").is_file()  # beside --out
    # a new study: its first trial, the model's own this run scored first, is told, not run, and the line says so
    # (not "the results file's": a new run's file held nothing)
    assert ("a new study of 6 trials, its first score this run already has (the model's own, scored first), not "
            "scored again" in captured.err)
    i = lines.index("next:")
    assert lines[i - 1].startswith("chosen: query prompt ") and lines[i - 2].startswith("spread of the ")
    d = json.loads(out.read_text())
    assert d["strategy"]["name"] == "optuna" and d["stats"]["study"]["complete"] + d["stats"]["study"]["pruned"] >= 6
    n = len(d["entries"])
    assert main([*argv[:-6], "--strategy", "optuna", "--trials", "9", "--batch-trials", "3", "-q"]) == 0  # resumed
    again = capsys.readouterr().out
    d2 = json.loads(out.read_text())
    assert f"{n} resumed from {out}" in again and d2["stats"]["study"]["complete"] + d2["stats"]["study"]["pruned"] >= 9
    # the resumed run's sampler does not draw the first run's candidates again (a seeded sampler restarted would)
    assert len(d2["entries"]) > n
    r = run_cli([*argv[:5], "--out", str(tmp_path / "bad.json"), *argv[7:], "--storage", "nonsense"], timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "not a database URL" in r.stderr
    assert not (tmp_path / "bad.json").exists()  # refused before the results file is opened


def test_scores_outside_fp32_say_they_differ_from_the_reference_by_rounding(tiny_bert_encoder_only_dir, beir, tmp_path,
                                                                            capsys):
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--readouts", "cls",
            "--cache-dir", str(tmp_path / "cache")]
    assert main([*argv, "--out", str(tmp_path / "b.json"), "--bf16"]) == 0
    assert "note: these scores were computed in bf16; sentence-transformers' evaluator" in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path / "f.json"), "--no-bf16"]) == 0
    assert "note: these scores" not in capsys.readouterr().err  # fp32: the reference's own numbers


def test_greedy_over_a_worker_gives_the_numbers_of_one_process(tiny_bert_encoder_only_dir, beir, tmp_path, capsys):
    """--storage with the greedy steps: each candidate a job for 'promptsearch worker' processes; with --no-local a
    worker (its own process, its own corpus cache) scores them all, and the results equal a single process's."""
    from conftest import ONE_THREAD, cli

    common = ["--model", str(tiny_bert_encoder_only_dir), "--no-bf16", "-q"]
    argv = ["retrieval", *common, "--data", str(beir), "--readouts", "cls"]
    # with --storage each candidate is a whole job, so no race: the single process without one scores the same
    assert main([*argv, "--out", str(tmp_path / "one.json"), "--cache-dir", str(tmp_path / "c1"), "--no-racing"]) == 0
    url = f"sqlite:///{tmp_path / 'work.db'}"
    worker = cli(["worker", *common, "--storage", url, "--study-name", "w", "--wait", "120",
                  "--cache-dir", str(tmp_path / "worker-corpus")],
                 {**ONE_THREAD, "XDG_CACHE_HOME": str(tmp_path / "wc")})
    try:
        r = run_cli([*argv, "--out", tmp_path / "many.json", "--cache-dir", tmp_path / "c2", "--storage", url,
                     "--study-name", "w", "--no-local"], ONE_THREAD, timeout=600)
        assert r.returncode == 0, r.stderr
        assert "corpus encodings in this process (workers count their own): " in r.stdout
        assert "candidates scored in the work study (here or by its workers, while this ran or before)" in r.stdout
        out, err = worker.communicate(timeout=120)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    done = int(out.strip().splitlines()[-1].split()[1])  # "worker: N candidates scored"

    def numbers(path):
        d = json.loads(path.read_text())
        return ({(e["query"], e["document"], e["readout"]): e["metrics"] for e in d["entries"]}, d["best"],
                d["verdict"], [{k: v for k, v in s.items()} for s in d["path"]])

    one, many = numbers(tmp_path / "one.json"), numbers(tmp_path / "many.json")
    assert done == len(many[0]) and many == one  # every candidate the worker's, every number the same
    assert any((tmp_path / "worker-corpus").iterdir())  # its corpus vectors where its --cache-dir said


def test_a_worker_started_in_another_folder_reads_the_searchs_relative_paths_from_its_folder(
        tiny_bert_encoder_only_dir, beir, tmp_path):
    """From a user's trial: a search given --model and --data as paths relative to its folder, and a worker started
    in another folder of the same machine, which refused the study (its data could not be read there) while the
    search did every job itself. The study records the search's folder: a worker that cannot read the study's paths
    from its own folder reads them from the search's, and its own paths (--cache-dir) stay its own."""
    import shutil

    from conftest import ONE_THREAD, cli

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    shutil.copytree(tiny_bert_encoder_only_dir, work / "m")
    shutil.copytree(beir, work / "data")
    elsewhere.mkdir()
    url = f"sqlite:///{tmp_path / 'work.db'}"
    worker = cli(["worker", "--no-bf16", "-q", "--storage", url, "--study-name", "w", "--wait", "120", "--cache-dir",
                  "its-cache"], {**ONE_THREAD, "XDG_CACHE_HOME": str(tmp_path / "wc")}, cwd=elsewhere)
    try:
        r = run_cli(["retrieval", "--model", "m", "--data", "data", "--readouts", "cls", "--no-bf16", "-q", "--out",
                     "r.json", "--storage", url, "--study-name", "w", "--no-local"], ONE_THREAD, timeout=600, cwd=work)
        assert r.returncode == 0, r.stderr
        out, err = worker.communicate(timeout=120)
    finally:
        worker.kill()
    assert worker.returncode == 0, err
    done = int(out.strip().splitlines()[-1].split()[1])  # "worker: N candidates scored"
    assert done == len(json.loads((work / "r.json").read_text())["entries"]) > 0  # every candidate the worker's
    assert any((elsewhere / "its-cache").iterdir())  # its own --cache-dir, from its own folder


def test_a_worker_for_other_data_is_refused_in_one_line(tiny_bert_encoder_only_dir, beir, tmp_path):
    from promptsearch.cli.parser import build_parser
    from promptsearch.cli.retrieval import source_of, work_for

    args = build_parser().parse_args(["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir),
                                      "--no-bf16", "-q"])
    work = work_for(args, {"source": source_of(args), "precision": "fp32"}, str(tiny_bert_encoder_only_dir))
    spec = work.spec(str(tiny_bert_encoder_only_dir))
    work.check(spec, str(tiny_bert_encoder_only_dir))  # the same: accepted
    with pytest.raises(Exception) as got:
        work.check({**spec, "data": {**spec["data"], "fingerprint": "0" * 16}}, str(tiny_bert_encoder_only_dir))
    # one line naming where they differ and what to do, not the two records (a user's trial)
    assert f"fingerprint: '{spec['data']['fingerprint']}' here, '{'0' * 16}' there" in str(got.value)
    assert f"the study reads its data as the search was given it, {str(beir)!r}; run the worker where" in str(got.value)
    assert "'queries'" not in str(got.value) and "\n" not in str(got.value)
    with pytest.raises(Exception, match=r"model weights.*\(model: '.*' here, 'x' there; the study's model is 'm',"):
        work.check({**spec, "model": "m", "numbers": {**spec["numbers"], "model": "x"}},
                   str(tiny_bert_encoder_only_dir))
    args = build_parser().parse_args(["worker", "--storage", "sqlite:///x.db", "-q"])
    with pytest.raises(Exception, match=r"the study's data, --data 'no-such-beir' as the search was given it, cannot "
                                        r"be read here \(.*\); run the worker where those paths hold"):
        work_for(args, {"source": {**spec["source"], "data": "no-such-beir"}, "precision": "fp32"}, "m")
    with pytest.raises(Exception, match="this worker's precision is 'fp32', the study's 'bf16'"):
        work.check({**spec, "precision": "bf16"}, str(tiny_bert_encoder_only_dir))


def test_a_worker_given_another_precision_is_refused_not_overridden(tiny_bert_encoder_only_dir, beir):
    """'promptsearch worker --bf16' on an fp32 study: refused in one line, as an STS study's worker is, not silently
    run in the study's precision."""
    from promptsearch.cli.parser import build_parser
    from promptsearch.cli.retrieval import source_of, work_for

    model = str(tiny_bert_encoder_only_dir)
    source = source_of(build_parser().parse_args(["retrieval", "--model", model, "--data", str(beir), "--no-bf16"]))
    spec = work_for(build_parser().parse_args(["worker", "--storage", "sqlite:///x.db", "--no-bf16", "-q"]),
                    {"source": source, "precision": "fp32"}, model).spec(model)
    worker = build_parser().parse_args(["worker", "--storage", "sqlite:///x.db", "--bf16", "-q"])
    with pytest.raises(Exception, match="this worker's precision is 'bf16', the study's 'fp32'"):
        work_for(worker, spec, model).check(spec, model)


def test_generated_query_prompts_join_the_search_and_a_resumed_run_reuses_them(tiny_bert_encoder_only_dir, beir,
                                                                               tmp_path, capsys, monkeypatch):
    from promptsearch.cli import retrieval as cli_retrieval

    asked = []

    def fake(model, task, n, seed, device):  # what a language model would answer, and the rubbish it may
        asked.append((model, task, n, seed))
        return ["Find sentences that mean the same as the query.", "1. Retrieve paraphrases of the given sentence",
                "??", "Find sentences that mean the same as the query."]

    monkeypatch.setattr(cli_retrieval, "generate_instructions", fake)
    out = tmp_path / "g.json"
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
            "--cache-dir", str(tmp_path / "cache"), "--readouts", "cls", "--generate", "some/llm", "--generate-n", "4"]
    assert main(argv) == 0
    assert "generated 2 query prompts with some/llm (4 sampled; " in capsys.readouterr().err
    assert asked == [("some/llm", "Given a query, retrieve relevant passages", 4, 0)]
    d = json.loads(out.read_text())
    want = ["Instruct: Find sentences that mean the same as the query.\nQuery: ",
            "Instruct: Retrieve paraphrases of the given sentence.\nQuery: "]
    assert [g["prompt"] for g in d["generated"]] == want
    scored = {e["query"]: e["source"] for e in d["entries"]}
    assert all(scored[p] == "library: generated by some/llm" for p in want)  # scored in the query step
    monkeypatch.setattr(cli_retrieval, "generate_instructions", lambda *a: pytest.fail("generated again"))
    assert main(argv) == 0  # resumed: the same prompts, from the file
    assert "0 candidates scored now" in capsys.readouterr().out


def test_instructions_are_read_from_what_a_model_generates():
    from promptsearch.search.retrieval_generate import instruction_of, prompts_of

    assert instruction_of("  1. Find passages that answer the question\nmore text") == \
        "Find passages that answer the question."
    assert instruction_of('Instruction: "Retrieve documents about the topic."') == "Retrieve documents about the topic."
    for bad in ("", "Find it", "word " * 41, "Use {task} here now", "Read [MASK] now please", "tab\there ok now",
                "Find the mP\ufffd speaking ones"):
        assert instruction_of(bad) is None, bad
    assert prompts_of(["Find the same meaning.", "find nothing", "Find the same meaning."], "src") == \
        [("Instruct: Find the same meaning.\nQuery: ", "src")]


def test_a_real_generator_samples_seeded_answers(tmp_path):
    """A randomly initialised GPT-2 (its answers are noise; what is tested is the sampling, seeded, and its length)."""
    import torch
    from conftest import _bpe_files
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

    from promptsearch.errors import ModelError
    from promptsearch.search.retrieval_generate import generate_instructions

    vocab, merges = _bpe_files(tmp_path)
    tok = GPT2Tokenizer(vocab=vocab, merges=merges)
    tok.save_pretrained(tmp_path / "g")
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=256, bos_token_id=0,
                               eos_token_id=0)).save_pretrained(tmp_path / "g")
    a = generate_instructions(str(tmp_path / "g"), "Find the paraphrase", n=3, seed=1, device="cpu", max_new_tokens=8)
    assert len(a) == 3 and a == generate_instructions(str(tmp_path / "g"), "Find the paraphrase", n=3, seed=1,
                                                      device="cpu", max_new_tokens=8)
    with pytest.raises(ModelError, match="reads 256 positions, fewer than the request and its answer need"):
        generate_instructions(str(tmp_path / "g"), "Find the paraphrase", n=1, max_new_tokens=250)
    with pytest.raises(ModelError, match="cannot load the generator"):
        generate_instructions(str(tmp_path / "missing"), "t")


def test_a_file_of_another_precision_is_refused_naming_the_flags_that_set_it(tiny_bert_encoder_only_dir, beir,
                                                                              tmp_path, capsys):
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--readouts", "cls",
            "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "b.json"), "-q"]
    assert main([*argv, "--bf16"]) == 0
    capsys.readouterr()
    code = main([*argv, "--no-bf16"])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert code == 2 and "Traceback" not in err and last.startswith("promptsearch retrieval: error: "), err
    # retrieval has no --precision option: the message names the flags it has
    assert "--precision" not in last and "bf16" in last and "--no-bf16" in last, last


def test_the_data_line_writes_counts_as_the_other_lines_do(tiny_bert_encoder_only_dir, tmp_path, capsys):
    """'data: ..., 1100 documents' beside 'racing: ... of 1,100 documents': the data line writes thousands apart."""
    big = beir_folder(tmp_path / "big", small_retrieval_data(10, 1100))
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(big), "--readouts", "cls",
            "--no-racing", "--no-cache", "--out", str(tmp_path / "r.json")]
    assert main(argv) == 0
    n = json.loads((tmp_path / "r.json").read_text())["data"]["corpus"]
    assert n > 999
    line = next(x for x in capsys.readouterr().err.splitlines() if x.startswith("data: "))
    assert line.endswith(f", {n:,} documents"), line


@pytest.mark.parametrize("held, left_out, advice", [
    (50, 0, "a smaller --holdout"),
    (0, 30, "a larger --queries"),
    (50, 30, "a larger --queries"),  # the search has --queries of them, whatever --holdout
    (0, 0, "data with more queries: every query with a relevant document is searched, 1 query here"),
    (4, 0, "data with more queries: 20 queries with a relevant document, too few to search on and check on both"),
    (4, 30, "a larger --queries"),
], ids=["held out", "sampled", "both", "neither", "too few to hold out", "sampled, too few to hold out"])
def test_the_few_queries_note_names_only_what_would_give_more(held, left_out, advice):
    """--queries 500 on a set of 20 samples all it can and holds out 4: a larger --queries would give nothing, and a
    smaller --holdout would leave the check weaker still (fewer than 30 queries in all for both)."""
    n = 1 if not held + left_out else 16
    note = few_searched_note(n, held, left_out)
    assert note.startswith(f"note: only {n} {'query' if n == 1 else 'queries'} searched: ")
    assert note.endswith(f"for that reason (give {advice})"), note
    assert few_searched_note(30, held, left_out) == ""


def test_the_run_says_what_it_left_out_how_weak_its_check_is_and_that_it_resumes(tiny_bert_encoder_only_dir, tmp_path,
                                                                                capsys):
    """A query whose only judgement is 0 is left out, as sentence-transformers' evaluator leaves it out: the data line
    says so. Eight queries hold out one or two: the check on them is called weak. A rerun says it resumes before it
    starts, not only in its last lines."""
    data = small_retrieval_data(8, 30)
    folder = beir_folder(tmp_path / "few", data)
    qrels = folder / "qrels" / "test.tsv"
    (folder / "queries.jsonl").write_text((folder / "queries.jsonl").read_text() + json.dumps(
        {"_id": "lonely", "text": "a query no document answers"}) + "\n")
    qrels.write_text(qrels.read_text() + f"lonely\t{next(iter(data.corpus))}\t0\n")
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(folder), "--readouts", "cls",
            "--no-cache", "--out", str(tmp_path / "r.json")]
    assert main(argv) == 0
    err = capsys.readouterr().err.splitlines()
    line = next(x for x in err if x.startswith("data: "))
    assert line.endswith("; 1 query without a relevant document left out, as sentence-transformers' evaluator leaves "
                         "them out"), line
    unseen = 8 - json.loads((tmp_path / "r.json").read_text())["data"]["queries"]
    # 8 queries are too few for a strong search and a strong check: both notes say more queries, neither says to
    # move queries from one to the other
    assert 0 < unseen < 30 and (f"note: only {unseen} queries are held out: the check on them is weak (more queries "
                                "would make it stronger)") in err
    assert ("note: only 6 queries searched: a step's gain over so few is mostly noise, so steps are rarely taken and "
            "the answer is likely the model's own for that reason (give data with more queries: 8 queries with a "
            "relevant document, too few to search on and check on both)") in err
    assert not any(x.startswith("resuming ") for x in err)
    assert main(argv) == 0
    n = len(json.loads((tmp_path / "r.json").read_text())["entries"])
    again = capsys.readouterr().err.splitlines()
    i = again.index(f"resuming {tmp_path / 'r.json'}: its {n} scored candidates are read back, not scored again")
    # the precision next, as a fresh run says it after its data, not after the steps (where the resumed run encodes)
    assert again[i + 1].startswith("precision: ") and again[i + 1].endswith("a resumed run keeps it)"), again
    assert sum(x.startswith("precision: ") for x in again) == 1
    assert main([*argv, "--holdout", "0"]) == 2  # the same file, every query searched: refused, saying which flags
    assert "other queries searched (6, not 8 as now: --holdout, --queries and --seed choose them)" in \
        capsys.readouterr().err
    assert main([*argv[:-1], str(tmp_path / "none.json"), "--holdout", "0"]) == 0
    assert not any(x.startswith("note: ") and "held out" in x for x in capsys.readouterr().err.splitlines())
    from promptsearch.cli.retrieval import holdout_note

    assert holdout_note(0.2, 0, 8) == ("note: too few queries to hold any out (--holdout 0.2): an answer other than "
                                       "the model's own is not checked on unseen queries")
    assert holdout_note(0.2, 52, 207) == holdout_note(0.0, 0, 8) == ""
    assert holdout_note(0.1, 20, 180).endswith("are held out: the check on them is weak (more queries, or a larger "
                                               "--holdout, make it stronger)")
    # a --queries sample left 5 of the 20 unseen out: a larger --holdout would only take from those
    assert holdout_note(0.1, 20, 180, left_out=5).endswith("are unseen: the check on them is weak (more queries, or a "
                                                          "smaller --queries, make it stronger)")


def test_the_guides_python_api_prints_what_the_command_prints(tiny_bert_encoder_only_dir, beir, tmp_path, capsys):
    """The retrieval guide's Python API, as it writes it (a fifth of the queries held out, the answer checked there,
    the document step raced), gives the command's summary line for line, and its answer."""
    from promptsearch import PromptEncoder
    from promptsearch.data.retrieval import load_retrieval
    from promptsearch.eval.retrieval import RetrievalTask, hold_out, unseen
    from promptsearch.search.retrieval import CorpusRace, GreedyRetrieval, RetrievalResults, RetrievalSearch, summary

    model = str(tiny_bert_encoder_only_dir)
    assert main(["retrieval", "--model", model, "--data", str(beir), "--out", str(tmp_path / "cli.json"), "--no-cache",
                 "--no-bf16", "-q"]) == 0
    printed = capsys.readouterr().out.splitlines()
    enc = PromptEncoder.from_pretrained(model, bf16=False, show_progress_bar=False)
    whole = load_retrieval(str(beir))
    searched = hold_out(whole, 0.2, seed=0)
    task = RetrievalTask(searched, cache_dir=False, show_progress_bar=False)
    check = RetrievalTask(unseen(whole, searched), cache_dir=False, show_progress_bar=False)
    try:
        res = RetrievalSearch(task, enc, RetrievalResults.for_task(tmp_path / "api.json", model, task, enc),
                              GreedyRetrieval(racing=CorpusRace()), confirm=check).run()
    finally:
        task.close()
        check.close()
    lines = summary(res)
    start = printed.index(lines[0])
    assert printed[start : start + len(lines)] == lines and printed[start + len(lines)] == "next:"
    assert res.best == RetrievalResults.load(tmp_path / "cli.json").best


def test_a_run_interrupted_before_it_scored_anything_says_so(tiny_bert_encoder_only_dir, beir, tmp_path, capsys,
                                                             monkeypatch):
    """Ctrl-C before the first candidate is scored: the file holds the run's settings and no score, and the last
    line says nothing was scored yet (not that scored candidates are saved); once one is scored, it says they are."""
    from promptsearch.search import retrieval as search_retrieval

    out = tmp_path / "r.json"
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
            "--no-cache", "--no-bf16", "-q"]

    def stop(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(search_retrieval.RetrievalSearch, "run", stop)
    assert main(argv) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert json.loads(out.read_text())["entries"] == []
    assert last.endswith("nothing was scored yet, re-run the same command to start it again"), last
    record = search_retrieval.RetrievalResults.add

    def add_then_stop(self, entry, source=""):
        record(self, entry, source)
        raise KeyboardInterrupt

    monkeypatch.undo()
    monkeypatch.setattr(search_retrieval.RetrievalResults, "add", add_then_stop)
    assert main(argv) == 130
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert len(json.loads(out.read_text())["entries"]) == 1
    assert f"scored candidates are saved in {out}, re-run the same command to resume" in last, last


def test_documents_that_share_a_text_are_noted_as_ties(tiny_bert_encoder_only_dir, tmp_path, capsys):
    """Two documents of one text tie in every ranking; which ranks first moves with their ids (in sentence-
    transformers' evaluator too), so the run says so."""
    data = small_retrieval_data(8, 30)
    ids = list(data.corpus)
    copy = dataclasses.replace(data, corpus={**data.corpus, "copy": data.corpus[ids[0]], "copy2": data.corpus[ids[1]]})
    assert copy.duplicate_texts == 2 and data.duplicate_texts == 0
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--readouts", "cls", "--no-cache"]
    assert main([*argv, "--data", str(beir_folder(tmp_path / "dup", copy)), "--out", str(tmp_path / "d.json")]) == 0
    assert ("note: 2 documents have the text of another in dup: they tie in every ranking, ranked by document id as "
            "sentence-transformers' evaluator ranks them, so a score can move with their ids alone (keep one of each "
            "for a number that does not)") in capsys.readouterr().err.splitlines()
    assert main([*argv, "--data", str(beir_folder(tmp_path / "own", data)), "--out", str(tmp_path / "o.json")]) == 0
    assert "tie in every ranking" not in capsys.readouterr().err


def test_a_model_named_by_a_relative_path_resumes_and_exports_from_anywhere(tiny_bert_encoder_only_dir, beir, tmp_path,
                                                                            monkeypatch, capsys):
    """From a user's trial: a results file recorded ``--model tiny`` as typed, so an export run from another folder
    asked the hub for 'tiny' (75 s of retries, then an error), and the same folder named by its absolute path was
    refused as "another model". The file keeps the name as typed and the folder's absolute path beside it: another
    spelling of the same folder resumes it (again and again, a template search's as a retrieval search's), an export
    finds it from anywhere, and a project moved elsewhere still resumes and exports from inside under its name."""
    import shutil

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copytree(tiny_bert_encoder_only_dir, work / "tiny")
    monkeypatch.chdir(work)
    argv = ["--data", str(beir), "--no-cache", "--readouts", "cls", "--holdout", "0", "-q"]
    sts = ["--dataset", "sts16", "--no-cache", "--readout", "mean", "query: [X]", "-q"]
    assert main(["retrieval", "--model", "tiny", "--out", "r.json", *argv]) == 0
    assert main(["score", "--model", "tiny", "--out", "s.json", *sts]) == 0
    d = json.loads((work / "r.json").read_text())
    assert d["model"] == "tiny" and d["model_folder"] == str(work / "tiny")
    assert json.loads((work / "s.json").read_text())["x_model_folder"] == str(work / "tiny")
    monkeypatch.chdir(elsewhere)
    capsys.readouterr()
    for spelling in ("../work/tiny", str(work / "tiny")):  # the second after the first rewrote the command's folder
        assert main(["retrieval", "--model", spelling, "--out", "../work/r.json", *argv]) == 0
        assert "0 candidates scored now" in capsys.readouterr().out  # resumed, not refused
        assert main(["score", "--model", spelling, "--out", "../work/s.json", *sts]) == 0
        assert json.loads((work / "r.json").read_text())["model"] == "tiny"
    for results in ("r.json", "s.json"):
        assert main(["export", str(work / results), "--out", results + ".folder"]) == 0
        assert (elsewhere / (results + ".folder") / "modules.json").is_file()
    moved = tmp_path / "moved"
    work.rename(moved)  # the project moved: its recorded folder gone, its name still right from inside it
    for lock in moved.glob(".*.lock"):  # held by this process under the old path (another process's would be stale)
        lock.unlink()
    monkeypatch.chdir(moved)
    assert main(["retrieval", "--model", "tiny", "--out", "r.json", *argv]) == 0
    assert main(["score", "--model", "tiny", "--out", "s.json", *sts]) == 0
    assert json.loads((moved / "r.json").read_text())["model_folder"] == str(moved / "tiny")  # the one loaded now
    assert json.loads((moved / "s.json").read_text())["x_model_folder"] == str(moved / "tiny")
    for results in ("r.json", "s.json"):
        assert main(["export", results, "--out", results + ".again"]) == 0
    assert main(["retrieval", "--model", "default", "--out", "r.json", *argv]) == 2  # another model: refused
    assert "holds a retrieval run with --model 'tiny', not 'default'" in capsys.readouterr().err


def test_an_export_of_a_folder_whose_weights_changed_since_its_search_is_refused(tiny_bert_encoder_only_dir, beir,
                                                                                 tmp_path, monkeypatch, capsys):
    """An export ships the weights its folder holds now: a folder retrained in place after its search, or another
    model put where a moved project's folder was, would have shipped prompts chosen for other weights under the
    file's numbers. Each search records a hash of the folder's weights; an export of a folder that no longer holds
    them is one line, exit 2, nothing written, and exports again once the weights are back."""
    import shutil

    from safetensors.torch import load_file, save_file

    work = tmp_path / "work"
    shutil.copytree(tiny_bert_encoder_only_dir, work / "tiny")
    monkeypatch.chdir(work)
    weights = work / "tiny" / "model.safetensors"
    kept = weights.read_bytes()
    assert main(["retrieval", "--model", "tiny", "--out", "r.json", "--data", str(beir), "--no-cache", "--readouts",
                 "cls", "--holdout", "0", "-q"]) == 0
    assert main(["score", "--model", "tiny", "--out", "s.json", "--dataset", "sts16", "--no-cache", "--readout",
                 "mean", "query: [X]", "-q"]) == 0
    assert list(json.loads((work / "r.json").read_text())["model_weights"]) == ["model.safetensors"]
    assert json.loads((work / "s.json").read_text())["x_model_weights"] == json.loads(
        (work / "r.json").read_text())["model_weights"]
    tensors = load_file(weights)
    name = "encoder.layer.0.attention.self.query.weight"  # one layer moved a little, as a training step moves it
    tensors[name] = tensors[name] + 1e-3
    save_file(tensors, weights, metadata={"format": "pt"})
    capsys.readouterr()
    for results in ("r.json", "s.json"):
        assert main(["export", results, "--out", results + ".folder"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and f"{results} was scored on other weights than {work / 'tiny'} holds now" in err
        assert "(its model.safetensors differs: retrained or replaced since)" in err
        assert not (work / (results + ".folder")).exists()
    moved = tmp_path / "moved"
    work.rename(moved)  # the project moved and another model put where its folder was: the recorded folder is read
    shutil.copytree(moved / "tiny", work / "tiny")
    (moved / "tiny" / "model.safetensors").write_bytes(kept)  # the moved project's own folder holds the scored weights
    monkeypatch.chdir(tmp_path)
    assert main(["export", str(moved / "r.json"), "--out", "r.folder"]) == 2
    assert "was scored on other weights than" in capsys.readouterr().err
    (work / "tiny" / "model.safetensors").write_bytes(kept)  # the weights back: exported
    for results in ("r.json", "s.json"):
        assert main(["export", str(moved / results), "--out", results + ".again"]) == 0
    # the model folder moved on its own (a user's trial: 'model path ../mdl does not exist'): said, and the folder it
    # moved to is taken when its weights are the file's; another model's folder is not
    shutil.rmtree(work)
    (moved / "tiny").rename(tmp_path / "mdl")
    capsys.readouterr()
    for results in ("r.json", "s.json"):
        assert main(["export", str(moved / results), "--out", results + ".gone"]) == 2
        assert (f"was searched on the model folder {work / 'tiny'}, which is not there now; give --model the folder "
                "where it is now") in capsys.readouterr().err
        found = ["export", str(moved / results), "--model", str(tmp_path / "mdl"), "--out", results + ".found"]
        assert main(found) == 0
        other = tmp_path / "other"  # the same architecture, other weights
        if not other.exists():
            shutil.copytree(tmp_path / "mdl", other)
            save_file({k: v + 1e-3 for k, v in load_file(other / "model.safetensors").items()},
                      other / "model.safetensors", metadata={"format": "pt"})
        assert main(["export", str(moved / results), "--model", str(other), "--out", results + ".other"]) == 2
        assert "drop --model (or give the folder the model moved to" in capsys.readouterr().err


@pytest.mark.parametrize(("changed", "says"), [(["--description", "Find facts"], "another task description"),
                                               (["--readouts", "cls,max"], "other read-outs (--readouts)")])
def test_a_resumed_search_of_another_space_is_refused(tiny_bert_encoder_only_dir, beir, tmp_path, capsys, changed,
                                                      says):
    """From a user's trial: a rerun with another --description (or read-outs) resumed the file and added its
    candidates beside the first run's: one file, two searches' candidates, spread and path. It is refused in one line
    naming the setting, the file untouched."""
    out = tmp_path / "r.json"
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out", str(out),
            "--cache-dir", str(tmp_path / "cache"), "--readouts", "cls", "--holdout", "0", "-q"]
    assert main(argv) == 0
    before = out.read_text()
    capsys.readouterr()
    assert argv[-1] == "-q" and main([*argv[:-1], *changed]) == 2  # not quiet: what it says before refusing
    err = capsys.readouterr().err.strip().splitlines()  # (after the model's note: the space needs its read-outs)
    assert err[-1].startswith("promptsearch retrieval: error: ") and says in err[-1] and "--out" in err[-1], err
    assert not any(x.startswith("resuming ") for x in err), err  # refused before it is said to resume
    assert out.read_text() == before


def test_another_draw_of_as_many_queries_is_named_as_such(tiny_bert_encoder_only_dir, beir, tmp_path, capsys):
    """From a user's trial: a rerun with only --seed changed was refused as "other data of the same name and size":
    the queries drawn differ, not the data. The refusal says so and names what draws them."""
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--out",
            str(tmp_path / "r.json"), "--no-cache", "--readouts", "cls", "-q"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv, "--seed", "1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "other queries searched (as many, 16, but others: --holdout, --queries and --seed choose them" in err, err


def test_a_held_out_set_of_the_searched_queries_is_not_called_unseen(tiny_bert_encoder_only_dir, beir, tmp_path,
                                                                     capsys):
    """From a user's trial: --validate-on a set with the searched queries over a larger corpus was introduced as
    "data the search never saw". A note now says how many of its queries the search's data has; a set of other
    queries gets none."""
    bigger = beir_folder(tmp_path / "bigger", small_retrieval_data(20, 160))  # the same 20 queries, more documents
    others = beir_folder(tmp_path / "others", small_retrieval_data(40, 80))  # 20 of its 40 queries are --data's too
    argv = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--no-cache", "--readouts",
            "cls", "--holdout", "0", "--validate-top", "1", "--validate-on"]
    assert main([*argv, f"{bigger},{others}", "--out", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert ("note: --validate-on bigger shares 20 of its 20 queries with the queries searched: on those it checks the "
            "answer on its corpus, not on queries the search never saw") in err, err
    assert "note: --validate-on others shares 20 of its 40 queries" in err, err
    capsys.readouterr()
    assert main([*argv, str(bigger), "--holdout", "0.5", "--out", str(tmp_path / "h.json")]) == 0
    assert "bigger shares 10 of its 20 queries" in capsys.readouterr().err  # the held-out half was never searched


def test_a_sample_larger_than_the_queries_is_said(tiny_bert_encoder_only_dir, beir, tmp_path, capsys):
    """From a user's trial: --queries 100 on 20 queries ran silently (its line read "--queries 100" beside 16
    searched). A note says every query left is searched."""
    assert main(["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(beir), "--no-cache",
                 "--readouts", "cls", "--queries", "100", "--out", str(tmp_path / "r.json")]) == 0
    assert ("note: --queries 100 asks for more queries than small has to search (16 after --holdout): all of them "
            "are searched") in capsys.readouterr().err
