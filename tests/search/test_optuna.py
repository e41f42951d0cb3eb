"""Optuna strategy: resume, pruning reports, two concurrent workers on one study."""

import json
import os
import subprocess
import sys

import optuna
import pytest
from conftest import ONE_THREAD, run_child, spawn

from promptsearch.search import Scorer, run_strategy
from promptsearch.search.optuna_search import OptunaSearch

GRAMMAR = {"format": "{prefix} {quote}[X]{quote} {relation} [MASK] .",
           "slots": {"prefix": ["", "This sentence :", "This"], "quote": ["", "\""],
                     "relation": ["means", "is", "says"]}}


@pytest.fixture
def grammar(tmp_path):
    p = tmp_path / "grammar.json"
    p.write_text(json.dumps(GRAMMAR))
    return str(p)


def test_study_resumes_and_reports_growing_subsets(bert_enc, grammar, tmp_path):
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{tmp_path / 'study.db'}"
    scorer = Scorer(bert_enc, dataset="sts16", cache=tmp_path / "c.jsonl")
    s = OptunaSearch(storage=storage, study_name="t", trials=4, grammar=grammar, seed=0, show_progress_bar=False)
    run_strategy(s, scorer, tmp_path / "o.json", "tiny")
    study = optuna.load_study(study_name="t", storage=storage)
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE,
                                                       optuna.trial.TrialState.PRUNED)]
    assert len(finished) == 4
    fresh = [t for t in finished if t.intermediate_values]
    assert fresh and all(set(t.intermediate_values) <= {148, 296, 593} for t in fresh)
    # each value says what it was measured on: a complete trial the full set, a pruned one its rung (marked partial)
    for t in finished:
        if t.state == optuna.trial.TrialState.COMPLETE:
            assert t.user_attrs["value_pairs"] == 1186 and "partial" not in t.user_attrs
        else:
            assert t.user_attrs["value_pairs"] == t.user_attrs["pruned_at_pairs"] < 1186
            assert "not comparable" in t.user_attrs["partial"]
    # re-running the same command with a larger target continues the same study
    s2 = OptunaSearch(storage=storage, study_name="t", trials=7, grammar=grammar, seed=1, show_progress_bar=False)
    res = run_strategy(s2, scorer, tmp_path / "o.json", "tiny")
    study = optuna.load_study(study_name="t", storage=storage)
    assert len([t for t in study.trials if t.state.is_finished() and t.state != optuna.trial.TrialState.FAIL]) == 7
    completed = {t.user_attrs["template"] for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    assert completed <= {e.key for e in res.entries.values()}
    d = json.loads((tmp_path / "o.json").read_text())
    assert d["x_study"]["finished"] == 7


# Runs the CLI, but each worker waits at the start of the optimisation loop (model loaded) until
# both are there, and again after its first batch of trials is asked until the other has asked
# its own: on a tiny model one process could otherwise finish every trial before the other has
# even imported torch, or (a CI run) before the other's first ask reached the database.
_BARRIER = """
import os, sys, time
from promptsearch.cli import main
from promptsearch.search import optuna_search
ready, other = sys.argv[1], sys.argv[2]

def meet(mark, seconds):  # leave this worker's mark, wait for the other's (bounded: under the 90 s heartbeat grace)
    open(ready + mark, "w").close()
    deadline = time.time() + seconds
    while not os.path.exists(other + mark) and time.time() < deadline:
        time.sleep(0.01)

run, ask = optuna_search.OptunaSearch.propose, optuna_search.ask_batch
def waiting_run(self, *a, **k):
    meet('', 120)
    return run(self, *a, **k)
asked = []
def ask_then_wait(*a, **k):
    trials = ask(*a, **k)
    if not asked:
        asked.append(len(trials))
        meet(".asked", 60)
    return trials
optuna_search.OptunaSearch.propose, optuna_search.ask_batch = waiting_run, ask_then_wait
sys.exit(main(sys.argv[3:]))
"""


def test_two_concurrent_workers_share_one_study(tiny_bert_dir, grammar, tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    # one thread each: two processes of two threads on two cores wait on each other's spinning threads (25-83 s)
    env = {**os.environ, "PROMPTSEARCH_CACHE": str(tmp_path / "cache.jsonl"), **ONE_THREAD}
    args = ["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16",
            "--trials", "8", "--batch-trials", "4", "--grammar", grammar, "--storage", storage, "--study-name",
            "shared", "--no-bf16", "-q"]
    ready = [str(tmp_path / f"ready{i}") for i in range(2)]
    procs = [spawn([sys.executable, "-c", _BARRIER, ready[i], ready[1 - i]] + args
                   + ["--out", str(tmp_path / f"w{i}.json"), "--seed", str(i)], env) for i in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    study = optuna.load_study(study_name="shared", storage=storage)
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE,
                                                       optuna.trial.TrialState.PRUNED)]
    # batches of 4 towards 8: each worker's first batch fits beside the other's. A worker waits for the other's
    # running trials that would reach the target rather than run past it; two asking at the same moment may still
    # end it past it by a batch at most
    assert 8 <= len(finished) <= 8 + 4
    assert len({t.user_attrs["process"] for t in study.trials}) == 2  # both workers ran trials
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
    p = spawn(cmd + ["--trials", "50"], env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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
    killed = optuna.load_study(study_name="k", storage=storage).trials  # more may have finished before the kill landed
    before, n_done = len(killed), len([t for t in killed if t.state == optuna.trial.TrialState.COMPLETE])
    r = run_child(cmd + ["--trials", str(n_done + 2)], env, timeout=300)
    assert r.returncode == 0, r.stderr
    study = optuna.load_study(study_name="k", storage=storage)
    assert len(study.trials) > before  # same study, new trials appended
    assert len([t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]) >= n_done + 2
    assert json.loads((tmp_path / "k.json").read_text())["x_study"]["study_name"] == "k"


def _counting(encoder, calls):
    """Record the templates of each ``template_states`` call of ``encoder``."""
    inner = encoder.template_states

    def wrapped(sentences, templates, *a, **k):
        calls.append(list(templates))
        return inner(sentences, templates, *a, **k)
    encoder.template_states = wrapped


def test_progressive_rungs_score_several_templates_in_one_call_as_if_alone(tiny_bert_dir, tmp_path):
    """A rung of several templates is one encoding call, and each template's rung scores and full score
    are exactly those it gets scored alone (a batch holds one template's rows)."""
    from conftest import make_encoder

    from promptsearch.search.progressive import Progressive, score_progressive

    templates = ['This sentence : "[X]" means [MASK] .', "[X] is [MASK] .", "This [X] says [MASK] ."]
    calls: list = []
    scorer = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset="sts16", cache=False)
    _counting(scorer.encoder, calls)
    together = Progressive(scorer, seed=0)
    rungs = [[together.rung(templates, r) for r in (148, 296)]]
    full = together.finish(templates)
    assert [len(c) for c in calls] == [3, 3, 3]  # one call per rung and one for the rest of the set
    alone = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset="sts16", cache=False)
    for t in templates:
        steps = list(score_progressive(alone, t, [148, 296]))
        assert [v for _, v in steps] == [rungs[0][0][t], rungs[0][1][t], full[t].spearman]


def test_a_batch_of_trials_is_encoded_together_and_told(tiny_bert_dir, grammar, tmp_path):
    """--batch-trials 4: four trials asked, each rung of the ones still in encoded in one call; every trial
    finished (pruned at a rung or complete with its template's full score)."""
    from conftest import make_encoder

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = f"sqlite:///{tmp_path / 'b.db'}"
    scorer = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset="sts16", cache=False)
    calls: list = []
    _counting(scorer.encoder, calls)
    s = OptunaSearch(storage=storage, study_name="b", trials=4, batch=4, grammar=grammar, seed=3,
                     show_progress_bar=False)
    run_strategy(s, scorer, tmp_path / "b.json", "tiny", validate_top=0)
    trials = optuna.load_study(study_name="b", storage=storage).trials
    assert [t.state for t in trials if not t.state.is_finished()] == []
    assert len([t for t in trials if t.state in (optuna.trial.TrialState.COMPLETE,
                                                 optuna.trial.TrialState.PRUNED)]) == 4
    distinct = len({t.user_attrs["template"] for t in trials})
    assert len(calls[0]) == distinct > 1 and len(calls) <= 4  # the first rung: every distinct template in one call
    fresh = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset="sts16", cache=False)
    for t in trials:
        if t.state == optuna.trial.TrialState.COMPLETE:  # rung by rung, the same number as one full pass (± padding)
            assert t.value == pytest.approx(fresh.score(t.user_attrs["template"]).spearman, abs=0.05)


def test_a_worker_waits_for_the_others_running_trials_that_reach_the_target_rather_than_run_past_it(tmp_path):
    """Another process has 2 trials running and 1 finished of 3: asking now would end the study at 4. A worker waits
    for them (looking, its interrupt check called) and, once they finish, has nothing to run; without a wait, or once
    the wait is over (they may be a killed worker's that never beat), it asks one trial as Optuna's own loop does."""
    import threading
    import time

    from conftest import dead_process

    from promptsearch.search.study import ask_batch, this_process

    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'w.db'}")
    study.tell(study.ask(), 0.5)
    theirs = [study.ask(), study.ask()]
    assert len(ask_batch(study, 4, 3, lambda t: None)) == 1  # no wait: one past what theirs reach (as before)
    study.tell(study.trials[-1].number, state=optuna.trial.TrialState.FAIL)
    looks, said = [], []
    started = time.monotonic()
    threading.Timer(1.0, lambda: [study.tell(t, 0.7) for t in theirs]).start()
    assert ask_batch(study, 4, 3, lambda t: None, wait=30, check=lambda: looks.append(1), say=said.append) == []
    assert 1.0 <= time.monotonic() - started < 30 and looks  # it waited, looking, and the study is done
    assert said == ["optuna: 2 trials other processes are running reach trials=3: waiting for them"]
    theirs = [study.ask(), study.ask()]  # once more, never finished: after the wait, one trial is asked
    asked = ask_batch(study, 4, 5, lambda t: None, wait=0.6)
    assert len(asked) == 1 and asked[0].user_attrs["process"] == this_process()
    # a process on this host that no longer runs (a crashed run's trials, before they go stale): not waited for
    study.tell(asked[0], 0.1)
    for t in theirs:
        t.set_user_attr("process", dead_process())
    started = time.monotonic()
    assert len(ask_batch(study, 1, 6, lambda t: None, wait=30)) == 1 and time.monotonic() - started < 10  # 4 + 2 = 6


def test_a_batch_keeps_its_trials_heartbeats(tmp_path):
    """Asked (not optimize-run) trials get heartbeats while their batch runs: a worker killed in a batch
    leaves trials that go stale and are failed, instead of RUNNING for ever."""
    import threading
    import time

    from promptsearch.search.study import HEARTBEAT_THREAD, Heartbeats, ask_batch, fail_stale_trials

    with pytest.warns(optuna.exceptions.ExperimentalWarning):  # Optuna flags the heartbeat arguments
        # grace 3 s: the check right after the batch (≈0.2 s after a beat) has seconds of margin on a busy machine
        storage = optuna.storages.RDBStorage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_interval=1, grace_period=3)
    study = optuna.create_study(storage=storage)
    trials = ask_batch(study, 2, 10, lambda t: t.suggest_float("x", 0, 1))
    assert len(trials) == 2
    with Heartbeats(storage, study, trials):
        time.sleep(0.2)
        beating = [t for t in threading.enumerate() if t.name == HEARTBEAT_THREAD]
    assert len(beating) == 1  # one thread beats the whole batch
    assert not any(t.name == HEARTBEAT_THREAD for t in threading.enumerate())  # and it stops with the batch
    last_beat = time.monotonic()  # no beat after the block
    fail_stale_trials(study)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.RUNNING] * 2  # beating: not stale
    # SQLite's CURRENT_TIMESTAMP, which Optuna stamps beats and "now" with, has whole seconds: the
    # difference it sees can be up to 1 s short of the elapsed time, so wait grace + 1 s + margin
    time.sleep(max(0.0, last_beat + 3 + 1.5 - time.monotonic()))  # a killed worker's trials
    fail_stale_trials(study)
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.FAIL] * 2
