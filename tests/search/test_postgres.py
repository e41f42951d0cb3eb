"""Optuna studies on a real PostgreSQL server (a throwaway cluster: conftest.postgres_url): several
worker processes share one study; bad connection input is one line, exit 2, within seconds."""

from __future__ import annotations

import json
import sys
import threading
import time

import optuna
import pytest
from conftest import ONE_THREAD, cli, run_cli, spawn

from promptsearch.cli import main
from promptsearch.search.study import storage_url

GRAMMAR = {"format": "{prefix} {quote}[X]{quote} {relation} [MASK] .",
           "slots": {"prefix": ["", "This sentence :", "This"], "quote": ["", "\""],
                     "relation": ["means", "is", "says"]}}

# Runs the CLI, but each of N workers waits, once its model is loaded, until all N are there: on a tiny
# model one process could otherwise finish every trial before another has imported torch.
_BARRIER_OF = """
import os, sys, time
from promptsearch.cli import main
from promptsearch.search import {module}
folder, n, me = sys.argv[1], int(sys.argv[2]), sys.argv[3]
run = {module}.{cls}.propose
def waiting_run(self, *a, **k):
    open(os.path.join(folder, me), "w").close()
    deadline = time.time() + 120
    while len(os.listdir(folder)) < n and time.time() < deadline:
        time.sleep(0.01)
    return run(self, *a, **k)
{module}.{cls}.propose = waiting_run
sys.exit(main(sys.argv[4:]))
"""
_BARRIER = _BARRIER_OF.format(module="optuna_search", cls="OptunaSearch")


def test_three_workers_share_one_study_on_postgresql(postgres_url, tiny_bert_dir, tmp_path):
    grammar = tmp_path / "grammar.json"
    grammar.write_text(json.dumps(GRAMMAR))
    met = tmp_path / "met"
    met.mkdir()
    args = ["optuna", "--model", tiny_bert_dir, "--dataset", "sts16", "--trials", "12", "--batch-trials", "2",
            "--grammar", grammar, "--storage", postgres_url, "--study-name", "three", "--no-bf16", "-q"]
    procs = [spawn([sys.executable, "-c", _BARRIER, met, "3", str(i)] + args + ["--out", tmp_path / f"w{i}.json",
                                                                                "--seed",
                   str(i)], ONE_THREAD) for i in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    study = optuna.load_study(study_name="three", storage=storage_url(postgres_url))
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE,
                                                       optuna.trial.TrialState.PRUNED)]
    assert 12 <= len(finished) <= 12 + 3 * 2  # each worker's batch in flight may finish past the target
    assert len({t.user_attrs["process"] for t in study.trials}) == 3  # every worker ran trials
    assert len({t.number for t in study.trials}) == len(study.trials)  # one numbering, no trial twice
    completed = {t.user_attrs["template"] for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    files = [{e["template"] for e in json.loads((tmp_path / f"w{i}.json").read_text())["templates"]} for i in range(3)]
    assert any(completed <= f for f in files)  # the worker that finished last holds every complete trial
    # the same study read back: the values equal what the results files recorded
    by_template = {t.user_attrs["template"]: t.value for t in study.trials
                   if t.state == optuna.trial.TrialState.COMPLETE}
    recorded = {e["template"]: e["spearman"] for i in range(3)
                for e in json.loads((tmp_path / f"w{i}.json").read_text())["templates"] if e.get("source",
                                                                                                 "").startswith("optuna")}
    assert all(abs(by_template[t] - v) < 1e-3 for t, v in recorded.items() if t in by_template)


@pytest.mark.parametrize("command", ["optuna", "greedy", "worker"])
@pytest.mark.parametrize("how, message", [
    ("password", "password authentication failed"),
    ("host", "Connection refused"),
])
def test_bad_connection_input_is_one_line_within_seconds(postgres_url, tiny_bert_dir, tmp_path, how, message, command):
    url = (postgres_url.replace(":secret@", ":wrong@") if how == "password"
           else "postgresql://promptsearch:secret@127.0.0.1:1/postgres")
    t0 = time.time()
    argv = {"optuna": ["--trials", "2"], "greedy": [], "worker": []}[command]
    if command != "worker":
        argv += ["--dataset", "sts16", "--out", tmp_path / "o.json"]
    r = run_cli([command, "--model", tiny_bert_dir, "--storage", url, "-q", "--no-bf16", *argv], timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert message in lines[0] and "storage" in lines[0]
    assert "secret" not in r.stderr and "wrong" not in r.stderr  # no password shown
    assert time.time() - t0 < 30  # no retry storm (the process's start-up included)
    assert not (tmp_path / "o.json").exists()


def test_a_missing_driver_is_one_line_naming_the_package(tmp_path, monkeypatch, capsys, tiny_bert_dir):
    """No server needed: the driver is looked for before any connection."""
    pytest.importorskip("sqlalchemy")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--trials", "1", "--storage",
                 "postgresql://u:p@localhost/db", "--out", str(tmp_path / "o.json"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "psycopg" in err[0], err


# ---- greedy's candidates on workers -------------------------------------------------------------------
def _greedy(tiny_bert_dir, vocab, out, *extra):
    return [str(a) for a in ["greedy", "--model", tiny_bert_dir, "--dataset", "sts16", "--vocabulary", vocab,
            "--max-steps", "2", "--min-gain", "0", "--out", out, "--no-cache", "-q", "--no-bf16",
            "--validate-top", "0", *extra]]


def _comparable(path):
    """What a search decided and scored: the path, every entry's numbers, the races' decisions."""
    d = json.loads(path.read_text())
    keep = ("template", "spearman", "denoise", "sets", "layer", "members", "readout", "chosen")
    entries = sorted(({k: e.get(k) for k in keep} for e in d["templates"]),
                     key=lambda e: (e["template"], str(e["readout"])))
    path_rows = [{k: v for k, v in r.items() if k not in ("seconds",)} for r in d.get("path", [])]
    races = {k: {f: v for f, v in r.items() if f != "known"} for k, r in d.get("x_races", {}).items()}
    return entries, path_rows, races, d.get("x_chosen"), d.get("x_baseline")


# Every process of these tests runs one thread (ONE_THREAD): several processes on a 2-core machine would
# oversubscribe it, and a CPU's kernels may sum in another order with another thread count (the last float
# digits, and on a tiny random model's near-tied similarities a rank or two), so the single-process run they
# are compared with runs one thread too.
@pytest.fixture(scope="module")
def single(tiny_bert_dir, tmp_path_factory):
    """What the single-process greedy run decided and scored, run once for the tests that compare a distributed
    run with it (the same model, vocabulary and flags; one thread, like every process here)."""
    from conftest import write_vocab

    d = tmp_path_factory.mktemp("single")
    r = run_cli(_greedy(tiny_bert_dir, write_vocab(d), d / "single.json"), ONE_THREAD, timeout=600)
    assert r.returncode == 0, r.stderr
    return _comparable(d / "single.json")


def _workers(url, name, n, tiny_bert_dir, wrapper=None):
    args = ["worker", "--storage", url, "--study-name", name, "--model", tiny_bert_dir, "--no-bf16", "-q", "--grace",
            "3"]
    one_thread = ONE_THREAD
    if wrapper is None:
        return [cli(args, one_thread) for _ in range(n)]
    return [spawn([sys.executable, "-c", wrapper, *args], one_thread) for _ in range(n)]


def test_greedy_on_three_workers_equals_the_single_process_run(postgres_url, tiny_bert_dir, tmp_path, single):
    from conftest import write_vocab

    vocab = write_vocab(tmp_path)
    workers = _workers(postgres_url, "g3", 3, tiny_bert_dir)
    r = run_cli(_greedy(tiny_bert_dir, vocab, tmp_path / "dist.json", "--storage", postgres_url, "--study-name", "g3",
                        "--no-local", "--grace", "3"), ONE_THREAD, timeout=600)
    assert r.returncode == 0, r.stderr
    outs = [w.communicate(timeout=120) for w in workers]  # the driver said the search is over: they stop
    assert [w.returncode for w in workers] == [0, 0, 0], outs
    assert _comparable(tmp_path / "dist.json") == single
    study = optuna.load_study(study_name="g3", storage=storage_url(postgres_url))
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    kinds = {json.loads(t.user_attrs["job"])["kind"] for t in done}
    assert kinds == {"full", "rung"} and all(t.user_attrs["worker"].split(":")[-1] in {str(w.pid) for w in workers}
                                            for t in done)  # every job done by a worker (--no-local)
    assert len({t.user_attrs["job_id"] for t in done}) == len(done)  # none done twice


def test_greedy_on_a_worker_through_sqlite_equals_the_single_process_run(tiny_bert_dir, tmp_path, single):
    """The same queue on a SQLite file (one machine, no server): a worker does every job (--no-local), claimed
    with study.ask() and told, and the search equals the single process's."""
    from conftest import write_vocab

    url = f"sqlite:///{tmp_path / 'work.db'}"
    worker = _workers(url, "lite", 1, tiny_bert_dir)[0]
    r = run_cli(_greedy(tiny_bert_dir, write_vocab(tmp_path), tmp_path / "dist.json", "--storage", url, "--study-name",
                        "lite", "--no-local", "--grace", "3"), ONE_THREAD, timeout=600)
    assert r.returncode == 0, r.stderr
    out = worker.communicate(timeout=120)
    assert worker.returncode == 0, out
    assert _comparable(tmp_path / "dist.json") == single
    study = optuna.load_study(study_name="lite", storage=url)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert done and all(t.user_attrs["worker"].endswith(f":{worker.pid}") for t in done)
    assert len({t.user_attrs["job_id"] for t in done}) == len(done)  # none done twice


def test_a_worker_on_a_model_with_its_own_max_length_scores_as_the_search_does(tiny_bert_encoder_only_dir, tmp_path):
    """A sentence-transformers folder whose max length (32 tokens) is below its positions (64), as the default
    MiniLM's (256 of 512): a worker given no --max-length pools a prompt as the search does, and its job's
    scores and similarities are the search's own. (It took the [MASK] inputs' limit, 64, for a --max-length
    and refused every such study: "this worker's pooled differ".) A worker given --max-length 64 would cut
    pooled inputs at 64, not 32 (other numbers: STS-B has longer sentences): it is still refused."""
    from conftest import CLI_DEVICE, make_encoder, stsb_dev_csv
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from promptsearch.representation import pooled_ways
    from promptsearch.search import Scorer
    from promptsearch.search.distributed import Job, STSWork, WorkQueue

    folder = tmp_path / "st"
    tr = Transformer(str(tiny_bert_encoder_only_dir), max_seq_length=32)
    SentenceTransformer(modules=[tr, Pooling(tr.get_embedding_dimension(), pooling_mode="mean")],
                        device="cpu").save(str(folder))
    # the MiniLM folder's layout: the tokenizer's limit is
    tok = json.loads((folder / "tokenizer_config.json").read_text())
    # the positions, the stack's
    (folder / "tokenizer_config.json").write_text(json.dumps({**tok, "model_max_length": 64}))
    # below
    (folder / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 32, "do_lower_case": False}))
    dev = str(stsb_dev_csv(tmp_path / "dev.csv", 0, 200))
    scorer = Scorer(make_encoder(folder, device=CLI_DEVICE), dataset=dev, cache=False)  # on the worker's device
    assert (scorer.encoder.max_length, scorer.encoder.pooled_max_length) == (64, 32)
    url = f"sqlite:///{tmp_path / 'work.db'}"
    queue = WorkQueue(url, STSWork(scorer), str(folder), "own", local=False, grace=3)
    try:
        base = ["worker", "--storage", url, "--study-name", "own", "--model", folder, "--no-bf16", "-q", "--grace", "3"]
        r = run_cli(base + ["--max-length", "64"], timeout=300)
        error = r.stderr.strip().splitlines()[-1]  # (after the CSV's note on its repeated pairs)
        assert (r.returncode == 2 and error.startswith("promptsearch worker: error:")
                and "pooled differ" in error), r.stderr
        worker = cli(base)  # the test's own thread count: its numbers are compared with this process's below
        job, got = Job("full", pooled_ways("This sentence : [X]", ["mean"])[0].text), {}
        driver = threading.Thread(target=lambda: got.update(queue.run([job])[job.id]), daemon=True)
        driver.start()
        while driver.is_alive() and worker.poll() is None:  # a worker that refused the study: failed, not waited for
            driver.join(0.2)
        driver.join(10)
        assert got, worker.communicate()
    finally:
        queue.close()
    out = worker.communicate(timeout=120)
    assert worker.returncode == 0, out
    here = STSWork(scorer).do(job)
    assert got["scores"] == here["scores"] and got["sims"] == here["sims"]  # the same computation: the same floats

_SLOW_WORKER = """
import sys, time
from promptsearch.cli import main
from promptsearch.search import distributed
do = distributed.STSWork.do
def slow(self, job):
    print("claimed", flush=True)
    time.sleep(30)  # killed in here
    return do(self, job)
distributed.STSWork.do = slow
sys.exit(main(sys.argv[1:]))
"""


@pytest.mark.parametrize("how", ["SIGKILL", "SIGINT"])
def test_a_killed_worker_loses_nothing_and_late_ones_take_over(postgres_url, tiny_bert_dir, tmp_path, how, single):
    """A driver and three workers, one killed holding a candidate: SIGKILL — the candidate goes stale after
    the grace period and is queued again; Ctrl-C — the worker fails it at once (one line, exit 130). The
    two that joined late finish the search with the single process's results."""
    import signal

    from conftest import write_vocab

    vocab = write_vocab(tmp_path)
    name = f"kill-{how}"
    slow = _workers(postgres_url, name, 1, tiny_bert_dir, _SLOW_WORKER)[0]
    driver = cli(_greedy(tiny_bert_dir, vocab, tmp_path / "dist.json", "--storage", postgres_url, "--study-name", name,
                         "--no-local", "--grace", "3"), ONE_THREAD)
    line = slow.stdout.readline()
    assert line.strip() == "claimed", (line, slow.communicate(timeout=60))  # it holds a candidate ...
    slow.send_signal(getattr(signal, how))  # ... and dies with it
    _, err = slow.communicate(timeout=60)
    if how == "SIGINT":
        assert slow.returncode == 130 and err.strip().splitlines() == ["promptsearch worker: interrupted"], err
    # two more join late and take the work, the killed one's included
    late = _workers(postgres_url, name, 2, tiny_bert_dir)
    _, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err
    for w in late:
        w.communicate(timeout=120)
    assert [w.returncode for w in late] == [0, 0]
    assert _comparable(tmp_path / "dist.json") == single
    study = optuna.load_study(study_name=name, storage=storage_url(postgres_url))
    failed = [t for t in study.trials if t.state == optuna.trial.TrialState.FAIL and "job_id" in t.user_attrs]
    assert len(failed) == 1  # the killed worker's candidate, failed (SIGKILL: after the grace period) and done again
    assert all(t.user_attrs.get("no_job") for t in study.trials if "job_id" not in t.user_attrs)  # asks that found none
    done = {t.user_attrs["job_id"] for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    assert failed[0].user_attrs["job_id"] in done


def test_a_worker_with_other_weights_or_settings_refuses_the_study(postgres_url, tiny_bert_dir, tiny_roberta_dir,
                                                                   tmp_path):
    from conftest import write_vocab

    vocab = write_vocab(tmp_path)
    driver = cli(_greedy(tiny_bert_dir, vocab, tmp_path / "d.json", "--storage", postgres_url, "--study-name", "mixed",
                         "--grace", "3"), ONE_THREAD)
    try:
        for extra, message in ((["--model", tiny_roberta_dir], "model weights differ"),
                               (["--model", tiny_bert_dir, "--max-length", "16"], "max_length")):
            r = run_cli(["worker", "--storage", postgres_url, "--study-name", "mixed", "--no-bf16", "-q", *extra],
                        timeout=300)
            lines = r.stderr.strip().splitlines()
            assert r.returncode == 2 and len(lines) == 1 and message in lines[0], r.stderr
    finally:
        driver.communicate(timeout=600)
    assert driver.returncode == 0


def test_the_database_restarted_mid_search_is_waited_out(postgres_cluster, tiny_bert_dir, tmp_path, single):
    """The server stops and comes back while a driver and a worker are at work: both reconnect and the
    search ends as a single-process run does."""
    from conftest import write_vocab

    url = postgres_cluster.url
    vocab = write_vocab(tmp_path)
    worker = cli(["worker", "--storage", url, "--study-name", "restart", "--model", tiny_bert_dir, "--no-bf16", "-q",
                  "--grace", "30"], ONE_THREAD)
    driver = cli(_greedy(tiny_bert_dir, vocab, tmp_path / "dist.json", "--storage", url, "--study-name", "restart",
                         "--no-local", "--grace", "30"), ONE_THREAD)
    deadline = time.time() + 300
    while time.time() < deadline:  # some work done, the search not over
        try:
            study = optuna.load_study(study_name="restart", storage=storage_url(url))
            if sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials) >= 3:
                break
        except Exception:
            pass
        time.sleep(0.2)
    postgres_cluster.stop()
    time.sleep(3)
    postgres_cluster.start()
    _, err = driver.communicate(timeout=600)
    assert driver.returncode == 0, err
    worker.communicate(timeout=120)
    assert worker.returncode == 0
    assert _comparable(tmp_path / "dist.json") == single


def test_a_database_gone_for_good_is_one_line_and_the_rerun_resumes(postgres_cluster, tiny_bert_dir, tmp_path, single):
    from conftest import write_vocab

    url = postgres_cluster.url
    vocab = write_vocab(tmp_path)
    argv = _greedy(tiny_bert_dir, vocab, tmp_path / "dist.json", "--storage", url, "--study-name", "gone", "--grace",
                   "3")
    driver = cli(argv, ONE_THREAD)
    deadline = time.time() + 300
    while time.time() < deadline and not (tmp_path / "dist.json").exists():
        time.sleep(0.1)
    time.sleep(1)
    postgres_cluster.stop()
    try:
        _, err = driver.communicate(timeout=120)
    finally:
        postgres_cluster.start()
    lines = err.strip().splitlines()
    if driver.returncode == 0:  # the search was done before the server went: nothing to show
        pytest.skip("the search ended before the server stopped")
    assert driver.returncode == 2 and len(lines) == 1 and "lost the storage" in lines[0], err
    r = run_cli(argv, ONE_THREAD, timeout=600)  # the same command, the server back: it resumes
    assert r.returncode == 0, r.stderr
    assert _comparable(tmp_path / "dist.json") == single


def test_score_through_the_storage_equals_scoring_here(postgres_url, tiny_bert_dir, tmp_path):
    templates = ["[X] means [MASK] .", "This sentence : \"[X]\" means [MASK] .", "[X] is [MASK] ."]
    base = ["score", "--model", tiny_bert_dir, "--dataset", "sts16", "--no-cache", "-q", "--no-bf16", "--validate-top",
            "0"]
    assert main([str(a) for a in base + ["--out", tmp_path / "here.json", *templates]]) == 0
    r = run_cli(base + ["--out", tmp_path / "there.json", "--storage", postgres_url, *templates], timeout=300)
    assert r.returncode == 0, r.stderr
    assert _comparable(tmp_path / "there.json")[0] == _comparable(tmp_path / "here.json")[0]


def test_a_job_claimed_but_never_beating_is_failed_after_the_grace_period(tmp_path):
    """A worker lost between claiming a job and its first heartbeat (the database stopped, the process killed)
    leaves a running trial Optuna never sees as stale: the driver fails it once the grace period has passed
    since the claim, and queues it again; a job whose worker beats and named itself is left alone."""
    from optuna.trial import TrialState

    from promptsearch.search.distributed import fail_orphans

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'w.db'}", study_name="work")
    for jid in ("a", "b", "other"):
        study.enqueue_trial({}, user_attrs={"job_id": jid})
    trials = [study.ask() for _ in range(3)]  # each claimed (popped from the queue, oldest first)
    assert [t.user_attrs["job_id"] for t in trials] == ["a", "b", "other"]
    trials[1].set_user_attr("worker", "host:1")  # b: claimed and named by a live worker
    assert fail_orphans(study, {"a", "b"}, grace=60) == []  # within the grace period: nothing failed
    assert fail_orphans(study, {"a", "b"}, grace=-1) == [trials[0].number]  # a only ("other" is not this driver's job)
    states = {t.user_attrs["job_id"]: t.state for t in study.get_trials(deepcopy=False)}
    assert states == {"a": TrialState.FAIL, "b": TrialState.RUNNING, "other": TrialState.RUNNING}


@pytest.mark.parametrize("error, retried",
                         [("DuplicateObject", True), ("DuplicateTable", True), ("SyntaxError", False)])
def test_workers_racing_to_create_the_schema_retry_only_what_the_other_created(monkeypatch, error, retried):
    """Workers started together on a fresh PostgreSQL database race to create Optuna's tables and enum types:
    the loser's CREATE fails with PostgreSQL's "already exists" (seen: three workers, one exited 1 on
    'CREATE TYPE studydirection'). It opens the storage again and finds them; any other programming error is
    raised at once. No server needed: the first attempt fails as the loser's did."""
    from sqlalchemy.exc import ProgrammingError

    from promptsearch.search import study as study_mod

    pg_errors = pytest.importorskip("psycopg.errors",
                                    reason="psycopg is not installed; bash scripts/setup.sh --dev installs it")
    calls = []

    def storage(url, **kwargs):
        calls.append(url)
        if len(calls) == 1:
            raise ProgrammingError("CREATE TYPE studydirection AS ENUM (...)", {}, getattr(pg_errors, error)("x"))
        return "opened"

    monkeypatch.setattr(study_mod.optuna.storages, "RDBStorage", storage)
    monkeypatch.setattr(study_mod.time, "sleep", lambda s: None)
    if retried:
        assert study_mod.open_storage("postgresql://u:p@/db?host=/nowhere") == "opened" and len(calls) == 2
    else:
        with pytest.raises(ProgrammingError):
            study_mod.open_storage("postgresql://u:p@/db?host=/nowhere")
        assert len(calls) == 1


# ---- retrieval's optuna study shared by two processes ---------------------------------------------------
_RETRIEVAL_BARRIER = _BARRIER_OF.format(module="retrieval_optuna", cls="OptunaRetrieval")


def test_two_retrieval_processes_share_one_optuna_study_on_postgresql(postgres_url, tiny_bert_encoder_only_dir,
                                                                       tmp_path):
    from conftest import beir_folder, small_retrieval_data

    beir = beir_folder(tmp_path / "beir", small_retrieval_data(12, 40))
    met = tmp_path / "met"
    met.mkdir()
    args = ["retrieval", "--model", tiny_bert_encoder_only_dir, "--data", beir, "--strategy", "optuna", "--trials",
            "10", "--batch-trials", "2", "--storage", postgres_url, "--study-name", "shared", "--no-bf16", "-q"]
    procs = [spawn([sys.executable, "-c", _RETRIEVAL_BARRIER, met, "2", str(i)] + args
                   + ["--out", tmp_path / f"w{i}.json", "--cache-dir", tmp_path / f"cache{i}", "--tpe-seed", str(i)],
                   ONE_THREAD) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    # a string, so that pytest shows it whole (a list's repr is cut in the middle, where the error is)
    assert [p.returncode for p in procs] == [0, 0], "\n".join(f"process {i}: {err[-1500:]}" for i, (_, err) in
                                                               enumerate(outs))
    study = optuna.load_study(study_name="shared", storage=storage_url(postgres_url))
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    pruned = [t for t in study.trials if t.state == optuna.trial.TrialState.PRUNED]  # racing's, on the smaller corpus
    assert 10 <= len(done) + len(pruned) <= 10 + 2 * 2  # each process's batch in flight may finish past the target
    assert done and all("screen" in t.user_attrs and t.user_attrs["why"].startswith("pruned by racing")
                        for t in pruned)
    files = [json.loads((tmp_path / f"w{i}.json").read_text()) for i in range(2)]
    scores = [{(e["query"], e["document"], e["readout"]): e["metrics"]["ndcg@10"] for e in d["entries"]} for d in files]
    trials = {(t.user_attrs["candidate"]["query"], t.user_attrs["candidate"]["document"],
               t.user_attrs["candidate"]["readout"]): t.value for t in done}
    assert any(set(trials) <= set(s) for s in scores)  # the process that finished last holds every complete trial
    for s in scores:  # and a trial's score is the study's in every file that holds it
        assert all(abs(s[c] - v) < 1e-6 for c, v in trials.items() if c in s)
    assert all(f["stats"]["study"]["finished_now"] > 0 for f in files)  # both processes ran trials
