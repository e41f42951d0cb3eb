"""Optuna strategy: resume, pruning reports, two concurrent workers on one study."""

import json
import os
import subprocess
import sys

import optuna
import pytest

from promptsearch.search import Scorer, run_strategy
from promptsearch.search.optuna_search import OptunaSearch

GRAMMAR = {"format": "{prefix} {quote}[X]{quote} {relation} [MASK] .",
           "slots": {"prefix": ["", "This sentence :", "This"], "quote": ["", "\""], "relation": ["means", "is", "says"]}}


@pytest.fixture
def grammar(tmp_path):
    p = tmp_path / "grammar.json"
    p.write_text(json.dumps(GRAMMAR))
    return str(p)


def test_study_resumes_and_reports_growing_subsets(bert_enc, grammar, tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    scorer = Scorer(bert_enc, dataset="sts16", cache_path=tmp_path / "c.jsonl")
    s = OptunaSearch(storage=storage, study_name="t", trials=4, grammar=grammar, seed=0, show_progress_bar=False)
    run_strategy(s, scorer, tmp_path / "o.json", "tiny")
    study = optuna.load_study(study_name="t", storage=storage)
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert len(finished) == 4
    fresh = [t for t in finished if t.intermediate_values]
    assert fresh and all(set(t.intermediate_values) <= {148, 296, 593} for t in fresh)
    # re-running the same command with a larger target continues the same study
    s2 = OptunaSearch(storage=storage, study_name="t", trials=7, grammar=grammar, seed=1, show_progress_bar=False)
    res = run_strategy(s2, scorer, tmp_path / "o.json", "tiny")
    study = optuna.load_study(study_name="t", storage=storage)
    assert len([t for t in study.trials if t.state.is_finished() and t.state != optuna.trial.TrialState.FAIL]) == 7
    completed = {t.user_attrs["template"] for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    assert completed <= set(res.entries)
    d = json.loads((tmp_path / "o.json").read_text())
    assert d["x_study"]["finished"] == 7


# Runs the CLI, but each worker waits at the start of the optimisation loop (model loaded,
# study opened) until both are there: on a tiny model one process could otherwise finish
# every trial before the other has even imported torch.
_BARRIER = """
import os, sys, time
from promptsearch.cli import main
from promptsearch.search import optuna_search
ready, other = sys.argv[1], sys.argv[2]
run = optuna_search.OptunaSearch.run
def waiting_run(self, *a, **k):
    open(ready, "w").close()
    deadline = time.time() + 120
    while not os.path.exists(other) and time.time() < deadline:
        time.sleep(0.01)
    return run(self, *a, **k)
optuna_search.OptunaSearch.run = waiting_run
sys.exit(main(sys.argv[3:]))
"""


def test_two_concurrent_workers_share_one_study(tiny_bert_dir, grammar, tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    env = {**os.environ, "PROMPTSEARCH_CACHE": str(tmp_path / "cache.jsonl")}
    args = ["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16",
            "--trials", "8", "--grammar", grammar, "--storage", storage, "--study-name", "shared", "--no-bf16", "-q"]
    ready = [str(tmp_path / f"ready{i}") for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", _BARRIER, ready[i], ready[1 - i]] + args
                              + ["--out", str(tmp_path / f"w{i}.json"), "--seed", str(i)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    study = optuna.load_study(study_name="shared", storage=storage)
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert 8 <= len(finished) <= 9  # MaxTrialsCallback may let one in-flight trial finish past the target
    assert len({t.user_attrs["worker"] for t in study.trials}) == 2  # both workers ran trials
    # the worker that finished last synced after every trial had ended: its file holds them all
    completed = {t.user_attrs["template"] for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    files = [{e["template"] for e in json.loads((tmp_path / f"w{i}.json").read_text())["templates"]} for i in range(2)]
    assert any(completed <= f for f in files)


def test_killed_worker_then_rerun_continues_the_study(tiny_bert_dir, grammar, tmp_path):
    import signal
    import time

    storage = f"sqlite:///{tmp_path / 'k.db'}"
    env = {**os.environ, "PROMPTSEARCH_CACHE": str(tmp_path / "cache.jsonl")}
    cmd = [sys.executable, "-m", "promptsearch", "optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16",
           "--grammar", grammar, "--storage", storage, "--study-name", "k", "--no-bf16", "-q", "--no-prune",
           "--out", str(tmp_path / "k.json"), "--seed", "0"]
    p = subprocess.Popen(cmd + ["--trials", "50"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    n_done = 0
    while time.time() < deadline:
        time.sleep(1)
        try:
            study = optuna.load_study(study_name="k", storage=storage)
            n_done = len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE])
        except Exception:
            continue
        if n_done >= 2:
            break
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert n_done >= 2
    before = len(optuna.load_study(study_name="k", storage=storage).trials)
    r = subprocess.run(cmd + ["--trials", str(n_done + 2)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    study = optuna.load_study(study_name="k", storage=storage)
    assert len(study.trials) > before  # same study, new trials appended
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) >= n_done + 2
    assert json.loads((tmp_path / "k.json").read_text())["x_study"]["study_name"] == "k"
