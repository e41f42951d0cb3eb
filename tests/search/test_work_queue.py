"""The work queue (search/distributed.py) on Optuna's public API: jobs enqueued, claimed with
``study.ask()``, reported with ``study.tell``, beating the storage's heartbeat from one thread (the
Optuna search's, study.Heartbeats), a killed worker's job queued again by the storage's stale-trial
callback. No model needed: a stand-in worker does the jobs. The distributed searches themselves
(results equal to one process, killed and interrupted workers) are test_postgres's."""

from __future__ import annotations

import ast
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.trial import TrialState

from promptsearch.search import distributed
from promptsearch.search.distributed import Job, claim, claim_and_do
from promptsearch.search.study import HEARTBEAT_THREAD, Heartbeats, fail_stale_trials, open_storage

# What Optuna keeps to itself (underscored attributes of its Study, Trial, FrozenTrial and storages) and that
# the queue once reached into to claim a job by hand: an Optuna upgrade may rename any of them silently.
OPTUNA_PRIVATE = {"_storage", "_study_id", "_trial_id", "_pop_waiting_trial_id", "_thread_local",
                  "_cached_frozen_trial", "_get_stale_trial_ids", "_backend", "_optimize", "_run_trial"}
MODULES = [Path(distributed.__file__), Path(distributed.__file__).with_name("study.py")]


def private_optuna_uses(source: str) -> list[str]:
    """``line: what`` for each use of Optuna's private names in ``source``: an attribute of
    :data:`OPTUNA_PRIVATE`, or an import from a private Optuna module (``optuna.storages._heartbeat``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in OPTUNA_PRIVATE:
            out.append(f"{node.lineno}: .{node.attr}")
        modules = ([node.module or ""] if isinstance(node, ast.ImportFrom)
                   else [a.name for a in node.names] if isinstance(node, ast.Import) else [])
        for m in modules:
            if m.split(".")[0] == "optuna" and any(part.startswith("_") for part in m.split(".")):
                out.append(f"{node.lineno}: import {m}")
    return sorted(out, key=lambda line: int(line.split(":")[0]))


def test_the_check_for_private_optuna_names_finds_them():
    """The check below can fail: the hand-made claim the queue had is caught, line by line."""
    old = ("storage = study._storage\n"
           "if storage.set_trial_state_values(t._trial_id, TrialState.RUNNING):\n"
           "    storage.get_study_user_attrs(study._study_id)\n"
           "from optuna.storages._heartbeat import is_heartbeat_enabled\n")
    assert private_optuna_uses(old) == ["1: ._storage", "2: ._trial_id", "3: ._study_id",
                                        "4: import optuna.storages._heartbeat"]
    assert private_optuna_uses("trial = study.ask()\nstudy.tell(trial, [0.0])\nstorage.record_heartbeat(1)\n") == []


@pytest.mark.parametrize("module", MODULES, ids=lambda p: p.name)
def test_the_queue_uses_only_optunas_public_api(module):
    assert private_optuna_uses(module.read_text(encoding="utf-8")) == []


def _queue(tmp_path, grace=3, jobs=("a",)):
    storage = open_storage(f"sqlite:///{tmp_path / 'work.db'}", grace=grace)
    study = optuna.create_study(study_name="work", storage=storage)
    for key in jobs:
        job = Job("full", key)
        study.enqueue_trial({}, user_attrs={"job_id": job.id, "job": job.to_json()})
    return storage, study


class StandIn:
    """A worker that notes the heartbeat threads alive while it works, and returns (or raises) at once."""

    def __init__(self, error: BaseException | None = None):
        self.error, self.beating, self.jobs = error, [], []

    def do(self, job: Job) -> dict:
        self.jobs.append(job)
        self.beating.append(sum(t.name == HEARTBEAT_THREAD for t in threading.enumerate()))
        if self.error is not None:
            raise self.error
        return {"key": job.key}


def test_a_worker_claims_with_ask_beats_from_one_thread_and_tells(tmp_path):
    storage, study = _queue(tmp_path, jobs=("a", "b"))
    worker = StandIn()
    assert claim_and_do(study, storage, worker, patience=5) and claim_and_do(study, storage, worker, patience=5)
    assert [j.key for j in worker.jobs] == ["a", "b"]  # oldest first
    assert worker.beating == [1, 1]  # one heartbeat thread while a job runs ...
    assert not any(t.name == HEARTBEAT_THREAD for t in threading.enumerate())  # ... and none after
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 2
    assert [t.user_attrs["result"] for t in trials] == [{"key": "a"}, {"key": "b"}]
    assert all(":" in t.user_attrs["worker"] for t in trials)
    assert not claim_and_do(study, storage, worker, patience=5)  # nothing waits: False, and no trial asked for it
    assert len(study.get_trials(deepcopy=False)) == 2


def test_a_driver_claims_only_while_one_of_its_jobs_waits(tmp_path):
    storage, study = _queue(tmp_path, jobs=("a",))
    assert claim(study, only={"another job's id"}) is None
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.WAITING]  # left for the workers
    trial, job = claim(study, only={Job("full", "a").id})
    assert job == Job("full", "a") and trial.user_attrs["job_id"] == job.id
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.RUNNING]


def test_an_interrupted_job_is_failed_at_once(tmp_path):
    storage, study = _queue(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        claim_and_do(study, storage, StandIn(KeyboardInterrupt()), patience=5)
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.FAIL]
    assert not any(t.name == HEARTBEAT_THREAD for t in threading.enumerate())


def test_an_ask_that_finds_the_queue_emptied_is_no_job(tmp_path, monkeypatch):
    """``study.ask()`` makes a new trial when nothing waits: another process popped the last job between
    the look and the ask. That trial is told failed at once, marked, and nothing is done."""
    storage, study = _queue(tmp_path)
    ask = distributed.ask

    def after_another(study):
        ask(study)  # the other process's claim
        return ask(study)

    monkeypatch.setattr(distributed, "ask", after_another)
    worker = StandIn()
    assert not claim_and_do(study, storage, worker, patience=5) and worker.jobs == []
    theirs, empty = study.get_trials(deepcopy=False)
    assert theirs.state == TrialState.RUNNING and "job" in theirs.user_attrs
    assert empty.state == TrialState.FAIL and empty.user_attrs == {"no_job": True}


def test_a_killed_workers_job_goes_stale_and_is_queued_again(tmp_path):
    """The storage's stale-trial callback (open_storage) queues a job whose worker stopped beating, once."""
    storage, study = _queue(tmp_path, grace=2)  # heartbeat every second, stale 2 s after the last beat
    trial, job = claim(study)
    Heartbeats(storage, study, [trial]).beat()  # one beat, then the worker is gone
    fail_stale_trials(study)
    assert [t.state for t in study.get_trials(deepcopy=False)] == [TrialState.RUNNING]  # within the grace period
    # SQLite's CURRENT_TIMESTAMP has whole seconds: wait grace + 1 s + margin
    time.sleep(2 + 1 + 1.5)
    fail_stale_trials(study)
    first, again = study.get_trials(deepcopy=False)
    assert (first.state, again.state) == (TrialState.FAIL, TrialState.WAITING)
    assert again.user_attrs["job_id"] == job.id and again.user_attrs["job"] == job.to_json()
    assert claim(study)[1] == job  # and a worker claims it as any job


class Work(StandIn):
    """A stand-in search's work as a worker builds it: any spec, any model."""

    def spec(self, model: str) -> dict:
        return {"model": model, "dataset": "d"}

    def check(self, spec: dict, model: str) -> None:
        pass


def _worker(url: str, wait: float, name: str | None = "work") -> tuple[threading.Thread, list[str], list[int]]:
    """``promptsearch worker`` on the study ``name`` (None: the newest open one) in a thread: its log lines and, once it
    returns, its jobs done."""
    logs: list[str] = []
    done: list[int] = []
    t = threading.Thread(target=lambda: done.append(distributed.serve(url, name, lambda spec: (Work(), "m"),
                                                                       grace=3, wait=wait, log=logs.append)))
    t.start()
    return t, logs, done


def _until(condition, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_workers_wait_for_an_interrupted_search_to_resume(tmp_path):
    """From a user's trial: Ctrl-C on a search with workers told them "the search is over", and they quit as the
    same command resumed it, leaving it to score alone. An interrupted search's workers now wait for it (up to their
    wait) and do the resumed search's jobs; a search that ends still sends them home."""
    url = f"sqlite:///{tmp_path / 'work.db'}"
    first = distributed.WorkQueue(url, Work(), "m", name="work", local=False)
    t, logs, done = _worker(url, wait=60)
    _until(lambda: any("loading the model" in x for x in logs))
    first.close(interrupted=True)  # the driver's Ctrl-C
    _until(lambda: any("interrupted; waiting up to 60s" in x for x in logs))
    time.sleep(3 * distributed.POLL)
    assert t.is_alive()  # not gone home
    again = distributed.WorkQueue(url, Work(), "m", name="work", local=False)  # the same command, run again
    assert again.run([Job("full", "z")]) == {Job("full", "z").id: {"key": "z"}}  # done by the worker
    again.close()
    t.join(30)
    assert not t.is_alive() and done == [1], logs
    assert any(x == "worker: the search resumed" for x in logs)
    assert logs[-1] == "worker: the search is over; 1 jobs done here", logs


def test_a_workers_refusal_is_told_to_the_search_that_waits_for_it(tmp_path, capsys):
    """From a user's trial: a worker that refused the study (its data not readable there) quit, and the search, which
    left its jobs to the workers, waited for it without a word. The refusal is recorded in the study and said once
    by the search while it waits; a worker that takes the jobs then does them."""
    from promptsearch.errors import PromptSearchError

    url = f"sqlite:///{tmp_path / 'work.db'}"
    queue = distributed.WorkQueue(url, Work(), "m", name="work", local=False)

    def refuse(spec):
        raise PromptSearchError("the study's data cannot be read here")

    with pytest.raises(PromptSearchError, match="cannot be read here"):
        distributed.serve(url, "work", refuse, grace=3, wait=5)
    t, logs, done = _worker(url, wait=60)  # a worker that reads it, joining while the search waits
    assert queue.run([Job("full", "z")]) == {Job("full", "z").id: {"key": "z"}}
    queue.close()
    t.join(30)
    err = capsys.readouterr().err
    assert err.count("refused") == 1, err
    assert ("note: a worker (" in err and "refused the work study 'work': the study's data cannot be read here; this "
            "process waits for a worker that takes its jobs") in err
    again = distributed.WorkQueue(url, Work(), "m", name="work", local=False)  # resumed: an earlier refusal is old
    t, logs, done = _worker(url, wait=60)
    again.run([Job("full", "y")])
    again.close()
    t.join(30)
    assert "refused" not in capsys.readouterr().err


def test_workers_leave_a_search_not_resumed_within_their_wait(tmp_path):
    url = f"sqlite:///{tmp_path / 'work.db'}"
    queue = distributed.WorkQueue(url, Work(), "m", name="work", local=False)
    t, logs, done = _worker(url, wait=1)
    _until(lambda: any("loading the model" in x for x in logs))
    queue.close(interrupted=True)
    t.join(30)
    assert not t.is_alive() and done == [0], logs
    assert logs[-1] == "worker: the search was interrupted and not resumed within 1s; 0 jobs done here", logs


@pytest.mark.parametrize("raised, interrupted", [(None, False), (KeyboardInterrupt, True), (ValueError, False)])
def test_a_queue_used_as_a_context_closes_as_its_search_ended(tmp_path, raised, interrupted):
    """The search commands close their work queue with ``with``: a KeyboardInterrupt (Ctrl-C, or SIGTERM raised as
    one) leaves it interrupted (its workers wait for it to resume), an end or an error finishes it (they go home)."""
    url = f"sqlite:///{tmp_path / 'work.db'}"
    try:
        with distributed.WorkQueue(url, Work(), "m", name="work", local=False):
            if raised is not None:
                raise raised
    except (KeyboardInterrupt, ValueError):
        pass
    attrs = optuna.load_study(study_name="work", storage=url).user_attrs
    assert (attrs["interrupted"] is not None) is interrupted and attrs["finished"] is not interrupted


def test_a_worker_pointed_at_an_optuna_search_says_how_to_join_it(tmp_path):
    """From a user's trial: a worker given an Optuna search's storage waited its whole --wait and said "no search is
    open" (named: "no work study ... no search is open there") while the search ran. Named, it is refused at once;
    unnamed, its wait says from the start, and its end, that an Optuna search is joined by running its command."""
    url = f"sqlite:///{tmp_path / 'opt.db'}"
    storage = open_storage(url, grace=3)
    optuna.create_study(study_name="my-search", storage=storage).set_user_attr("retrieval", {"model": "m"})
    make = lambda spec: (Work(), "m")  # noqa: E731 never called: no work study
    t0 = time.monotonic()
    with pytest.raises(distributed.PromptSearchError, match="'my-search' is an Optuna search's, not a work study: "
                                                            "an Optuna search is joined by running its own command"):
        distributed.serve(url, "my-search", make, grace=3, wait=60)
    assert time.monotonic() - t0 < 30  # at once, not after the wait
    logs: list[str] = []
    with pytest.raises(distributed.PromptSearchError, match=r"after 1s \(it holds the Optuna search study 'my-search'"):
        distributed.serve(url, None, make, grace=3, wait=1, log=logs.append)
    assert logs == [f"worker: waiting up to 1s for a search to open a work study in {url} (it holds the Optuna search "
                    "study 'my-search': an Optuna search is joined by running its own command, with the same "
                    "storage=, on each machine, not by a worker)"]


def test_a_search_interrupted_longer_ago_than_the_wait_is_not_joined(tmp_path):
    """A search interrupted and never resumed stays unfinished in the storage: an unnamed worker does not join it
    once it was interrupted longer ago than its wait (it would leave at once), and says no search is open."""
    url = f"sqlite:///{tmp_path / 'work.db'}"
    queue = distributed.WorkQueue(url, Work(), "m", local=False)
    queue.study.set_user_attr("interrupted", time.time() - 3600)  # an hour ago
    with pytest.raises(distributed.PromptSearchError, match=r"no search is open in the storage after 1s"):
        distributed.serve(url, None, lambda spec: (Work(), "m"), grace=3, wait=1)
    queue.study.set_user_attr("interrupted", time.time())  # just now: joined, waited for
    t, logs, done = _worker(url, wait=1, name=None)
    t.join(30)
    assert done == [0] and any("interrupted; waiting up to 1s" in x for x in logs), logs


def test_a_difference_is_said_where_it_is():
    from promptsearch.errors import difference

    assert difference({"a": 1}, {"a": 1}) == ""
    assert difference({"a": 1}, {"a": 1, "b": None}) == "b: missing here, None there"
    assert difference({"fingerprint": "x", "sets": [{"name": "my.data.csv", "fingerprint": "a"}]},
                      {"fingerprint": "y", "sets": [{"name": "my.data.csv", "fingerprint": "b"}]}) \
        == "sets[my.data.csv].fingerprint: 'a' here, 'b' there"
    assert difference("abc", "abd", "model") == "model: 'abc' here, 'abd' there"
