"""Scoring spread over processes and machines through an Optuna RDB storage (PostgreSQL, MySQL,
SQLite on one machine).

A search's driver (``greedy``, ``score``, the generators, racing) puts each candidate it would
have encoded into a *work study* as an enqueued trial (``study.enqueue_trial``) — a job: a
template's full-set scores, or its pair similarities on a racing rung — and ``promptsearch worker``
processes, each with its own copy of the model, claim waiting jobs with ``study.ask()`` (Optuna pops
an enqueued trial under a row lock: a job is claimed once), encode, and report the result in the
trial's user attributes (``study.tell``). Only Optuna's public API is used. The driver works on
its own jobs too (unless told not to), waits for the rest, and then decides exactly as a single
process does: a job's result is the same numbers the driver would have computed (the same
sentences in the same batches, fp32 or the precision and batching the study records), so the
path, the scores and the results file equal a single-process run's. The score cache and the
results file stay the driver's.

Faults: a worker beats the storage's heartbeat while it works (one thread,
``Heartbeats``, as an Optuna search's batch does); a killed worker's
job goes stale after the grace period and is failed and queued again (the storage's stale-trial
callback, or the driver), and a worker interrupted with Ctrl-C fails its job at once. A job's
result is taken once, from its first complete trial. Workers with another model, data, precision
or settings than the study's refuse it with one line.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from typing import Protocol

import numpy as np
import optuna
from optuna.exceptions import StorageInternalError
from optuna.trial import TrialState

from ..errors import PromptSearchError, difference, note
from ..representation import Representation
from .racing import rung_similarities
from .scorer import Score, Scorer
from .study import (
    Heartbeats,
    _shown,
    ask,
    check_storage,
    existing_storage,
    fail_stale_trials,
    open_storage,
    this_process,
)

PREFIX = "promptsearch-work"
RETRIEVAL = "retrieval"  # the job kind of a retrieval candidate
POLL = 0.2  # seconds between looks at the queue while waiting


@dataclass(frozen=True)
class Job:
    """One unit of scoring work: ``full`` (a key's scores on every set, both variants, and its pair
    similarities) or ``rung`` (a key's similarities on racing rung ``k``'s pairs, its sentences
    encoded rung by rung as a single-process race encodes them)."""

    kind: str
    key: str
    layer: int | None = None
    k: int = 0
    rungs: tuple[int, ...] = ()
    seed: int = 0

    @property
    def id(self) -> str:
        return hashlib.sha1(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:16]

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "Job":
        d = json.loads(text)
        return cls(d["kind"], d["key"], d["layer"], d["k"], tuple(d["rungs"]), d["seed"])


def _pack(a: np.ndarray) -> dict:
    """An array as JSON, bit for bit."""
    a = np.ascontiguousarray(a)
    return {"dtype": str(a.dtype), "data": base64.b64encode(a.tobytes()).decode("ascii")}


def _unpack(d: dict) -> np.ndarray:
    return np.frombuffer(base64.b64decode(d["data"]), dtype=np.dtype(d["dtype"])).copy()


class ScoringWork(Protocol):
    """What a work study's driver and its workers score with, whatever the kind of search: what a worker must
    reproduce (``spec``, recorded in the study), the refusal of a study whose numbers it would not reproduce
    (``check``), and one job done (``do``). An STS search's is ``STSWork``; a retrieval search's
    ``search.retrieval.RetrievalWork``."""

    def spec(self, model: str) -> dict:
        """The model (name and weights), the data (names and contents) and every setting that changes a number."""
        ...

    def check(self, spec: dict, model: str) -> None:
        """Refuse (one line naming the first difference) a study whose ``spec`` this work would not reproduce."""
        ...

    def do(self, job: "Job") -> dict:
        """One job's result (JSON-ready)."""
        ...


class STSWork:
    """An STS search's scoring as jobs, with one scorer (its own model copy): a template's full-set scores, or its
    similarities on a racing rung. A rung job's vectors are kept for the next rung of the same key (at most ``keep``
    keys): the sentences encoded at one rung are not encoded again at the next.

    :param scorer: the ``Scorer``.
    :param keep: how many keys' rung vectors are kept."""

    def __init__(self, scorer: Scorer, keep: int = 32):
        self.scorer, self.keep = scorer, keep
        self.memo: dict[tuple, tuple[dict, np.ndarray]] = {}

    def spec(self, model: str) -> dict:
        """The model, the sets, and every setting that changes a number (``Scorer.numbers``)."""
        sc = self.scorer
        return {"model": model, "dataset": sc.dataset, "denoise": sc.denoise, "objective": sc.objective,
                "screening": sc.screening_precision, "numbers": sc.numbers()}

    def check(self, spec: dict, model: str) -> None:
        mine = self.spec(model)
        if spec.get("kind") is not None:
            raise PromptSearchError(f"this worker's kind of search is an STS one, the study's {spec['kind']!r}: start "
                                    "it with the search's settings")
        for field in ("dataset", "denoise", "objective", "screening"):
            if mine[field] != spec[field]:
                raise PromptSearchError(f"this worker's {field} is {mine[field]!r}, the study's {spec[field]!r}: start "
                                        "it with the search's settings")
        for field, theirs in spec["numbers"].items():
            ours = mine["numbers"].get(field)
            if ours != theirs:
                what = {"model": "model weights", "data": "data sets' contents"}.get(field, field)
                raise PromptSearchError(f"this worker's {what} differ from the study's "
                                        f"({difference(ours, theirs, field)}; the study's model is {spec['model']!r}, "
                                        "a worker's unless model= names another): give it the search's model, data "
                                        "and settings")

    def do(self, job: "Job") -> dict:
        sc = self.scorer.at_layer(job.layer)
        t0 = time.perf_counter()
        if job.kind == "full":
            scores, sims, seconds = sc.measure(job.key)
            return {"scores": {str(int(dn)): s for dn, s in scores.items()}, "sims": _pack(sims), "seconds": seconds}
        perm = np.random.default_rng(job.seed).permutation(sc.evaluator.n_pairs)
        mk = (job.key, job.layer, job.seed, job.rungs)
        vecs, have = self.memo.pop(mk, ({job.key: {sc.denoise: None}}, np.zeros(len(sc.sentences), bool)))
        rung_sims, encoded = rung_similarities(sc, sc.screening_encoder, [job.key], perm,
                                               list(job.rungs)[: job.k + 1], vecs, {job.key: have})
        self.memo[mk] = (vecs, have)
        while len(self.memo) > self.keep:
            self.memo.pop(next(iter(self.memo)))
        return {"sims": _pack(rung_sims[job.key]), "encoded": encoded, "seconds": time.perf_counter() - t0}


def study_name(spec: dict) -> str:
    return f"{PREFIX}-{hashlib.sha1(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:12]}"


def retrying(fn, patience: float, what: str = "the storage"):
    """``fn()``, tried again while the database does not answer (a restart, a dropped connection) for
    up to ``patience`` seconds; then one line: the search resumes from its results file when re-run."""
    from sqlalchemy.exc import DBAPIError, OperationalError  # lazy: start-up time

    def lost(exc: BaseException | None) -> BaseException | None:
        """The connection failure behind ``exc`` (Optuna wraps SQLAlchemy's errors), or None."""
        while exc is not None:
            if isinstance(exc, OperationalError) or (isinstance(exc, DBAPIError) and exc.connection_invalidated):
                return exc
            exc = exc.__cause__ or exc.__context__
        return None

    start = time.monotonic()
    while True:
        try:
            return fn()
        except (DBAPIError, StorageInternalError) as exc:
            cause = lost(exc)
            if cause is None or "locked" in str(cause):  # not a lost connection (SQLite's locks have their own waits)
                raise
            if time.monotonic() - start > patience:
                reason = str(getattr(cause, "orig", cause)).strip().splitlines()[0]
                raise PromptSearchError(f"lost {what} for {patience:.0f}s ({reason}); re-run the same command when it "
                                        "is back: the search resumes from its results file") from None
            time.sleep(1)


def claim(study: optuna.Study, only: set[str] | None = None) -> tuple[optuna.Trial, Job] | None:
    """The oldest waiting job, claimed for this process by ``study.ask()`` (Optuna's queue of enqueued
    trials: each is popped once, under the database's row lock), when a job (of ``only``, when given)
    waits; None otherwise. ``ask`` pops the oldest of any: a driver may do a job another search of the
    same study left waiting, which is work for this study all the same.

    ``ask`` makes a new trial when nothing waits any more (another process popped the last job between
    the look and the ask): that trial, no job, is told failed at once (user attribute ``no_job``)."""
    waiting = study.get_trials(deepcopy=False, states=(TrialState.WAITING,))
    if not any("job" in t.user_attrs and (only is None or t.user_attrs.get("job_id") in only) for t in waiting):
        return None
    trial = ask(study)
    text = trial.user_attrs.get("job")
    if text is None:
        try:
            trial.set_user_attr("no_job", True)
        finally:
            study.tell(trial, state=TrialState.FAIL)
        return None
    return trial, Job.from_json(text)


def claim_and_do(study: optuna.Study, storage, work: ScoringWork, only: set[str] | None = None,
                 patience: float = 90) -> bool:
    """Claim the oldest waiting job (``claim``), do it and report it (its result a user attribute,
    the trial told complete); False if none was waiting. While it runs the job beats the storage's
    heartbeat (``Heartbeats``, the storage ``study`` was opened with):
    a killed worker's job goes stale and is queued again. An interrupt or an error while it runs fails
    the job (the driver queues it again) and is raised. The writes wait out a database restart
    (``patience`` seconds)."""
    claimed = claim(study, only)
    if claimed is None:
        return False
    trial, job = claimed
    try:
        # The job is this worker's from here: its first heartbeat goes in before anything else, waiting out a restart,
        # so that from now on a worker lost (or a database lost for good) leaves a job that goes stale and is queued
        # again. (Lost between the claim and this beat, the driver fails it: claimed, never beating, see fail_orphans.)
        beats = Heartbeats(storage, study, [trial])
        retrying(beats.beat, patience)
        retrying(lambda: trial.set_user_attr("worker", this_process()), patience)
        with beats:
            result = work.do(job)
    except BaseException:
        with contextlib.suppress(Exception):  # the database is gone too: the job goes stale and is queued again
            study.tell(trial, state=TrialState.FAIL, skip_if_finished=True)
        raise
    try:
        retrying(lambda: trial.set_user_attr("result", result), patience)
    except optuna.exceptions.UpdateFinishedTrialError:  # failed meanwhile (it went stale) and queued again: not ours
        return True
    retrying(lambda: study.tell(trial, [0.0], skip_if_finished=True), patience)
    return True


def fail_orphans(study: optuna.Study, jobs: set[str], grace: float) -> list[int]:
    """Jobs claimed (running) that never got a worker's heartbeat and name — the worker lost between its
    claim and its first beat — failed once ``grace`` seconds have passed since the claim, so the driver
    queues them again (a heartbeat's absence is not staleness to Optuna). The trial numbers failed."""
    now, out = datetime.datetime.now(), []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if (t.user_attrs.get("job_id") in jobs and "worker" not in t.user_attrs and t.datetime_start is not None
                and (now - t.datetime_start).total_seconds() > grace):
            study.tell(t.number, state=TrialState.FAIL, skip_if_finished=True)
            out.append(t.number)
    return out


class WorkQueue:
    """The driver's side: jobs into the work study, results out, each job's result taken once."""

    def __init__(self, url: str, work: ScoringWork, model: str, name: str | None = None,
                 local: bool = True, grace: int = 90):
        optuna.logging.set_verbosity(optuna.logging.ERROR)  # the work study is plumbing: its hiccups are handled here
        self.spec = work.spec(model)
        self.storage = open_storage(url, grace=grace)
        self.name = name or study_name(self.spec)
        self.study = optuna.create_study(study_name=self.name, storage=self.storage, load_if_exists=True)
        old = self.study.user_attrs.get("spec")
        if old is not None and old != self.spec:
            raise PromptSearchError(f"the work study {self.name!r} in the storage belongs to another search (other "
                                    "model, data or settings); give another study name")
        # the folder the search runs in: a worker elsewhere on this machine reads the study's relative paths from it;
        # a worker's refusal of an earlier run cleared (both set before the spec, which tells a worker the study is
        # ready: a refusal from now on is this run's)
        self.study.set_user_attr("cwd", os.getcwd())
        self.study.set_user_attr("refused", None)
        self.study.set_user_attr("spec", self.spec)
        self.study.set_user_attr("finished", False)
        self.study.set_user_attr("interrupted", None)  # resumed: its waiting workers go on
        self.work = work if local else None  # the driver does jobs too
        self.refusal_told: dict | None = None  # the refusal said (one of this run's)
        self.grace = grace

    def run(self, jobs: list[Job]) -> dict[str, dict]:
        """Each job's result ({job id: result}), by whichever process did it."""
        want = {j.id: j for j in jobs}
        results: dict[str, dict] = {}
        queued = retrying(self._known, self.grace)
        for j in jobs:
            if j.id not in queued:
                retrying(lambda j=j: self.study.enqueue_trial({}, user_attrs={"job_id": j.id, "job": j.to_json()}),
                         self.grace)
        last_stale = 0.0
        while len(results) < len(want):
            if retrying(lambda: self._step(want, results), self.grace):
                continue
            if time.monotonic() - last_stale > 5:
                retrying(lambda: fail_stale_trials(self.study), self.grace)
                retrying(lambda: fail_orphans(self.study, set(want), self.grace), self.grace)
                self._tell_refusal(retrying(lambda: self.study.user_attrs, self.grace).get("refused"))
                last_stale = time.monotonic()
            time.sleep(POLL)
        return results

    def _tell_refusal(self, refused) -> None:
        """A worker's refusal of this study (``serve`` records the latest), said once: without it a search whose jobs
        only workers do would wait for that worker without a word."""
        if isinstance(refused, dict) and refused != self.refusal_told:
            self.refusal_told = refused
            note(f"note: a worker ({refused.get('by')}) refused the work study {self.name!r}: {refused.get('why')}"
                 + ("; this process waits for a worker that takes its jobs" if self.work is None else
                    "; this process does the jobs itself meanwhile"))

    def _step(self, want: dict[str, Job], results: dict[str, dict]) -> bool:
        """One look at the queue: results taken, failed jobs queued again, one job done here if any
        waits; True when there is no reason to wait before the next look."""
        live: set[str] = set()
        for t in self.study.get_trials(deepcopy=False):
            jid = t.user_attrs.get("job_id")
            if jid not in want:
                continue
            if t.state == TrialState.COMPLETE and jid not in results and "result" in t.user_attrs:
                results[jid] = t.user_attrs["result"]
            elif t.state in (TrialState.WAITING, TrialState.RUNNING):
                live.add(jid)
        for jid in set(want) - set(results) - live:  # failed (a killed or interrupted worker): queue it again
            self.study.enqueue_trial({}, user_attrs={"job_id": jid, "job": want[jid].to_json()})
        if len(results) == len(want):
            return True
        return self.work is not None and claim_and_do(self.study, self.storage, self.work, set(want) - set(results),
                                                      self.grace)

    def _known(self) -> set[str | None]:
        """Job ids already in the study, waiting, running or done (a resumed search reuses them; None: a trial
        with no job id)."""
        return {t.user_attrs.get("job_id") for t in self.study.get_trials(deepcopy=False)
                if t.state in (TrialState.WAITING, TrialState.RUNNING, TrialState.COMPLETE)}

    # ---- what the scorer and racing ask ---------------------------------------------------------
    def full(self, scorer: Scorer, keys: list[Representation]) -> dict[Representation, Score]:
        """Full-set scores of ``keys`` at ``scorer``'s layer: recorded, kept and cached by the driver's
        scorer exactly as ``Scorer.record`` does (a job names its key as text: the storage's)."""
        jobs = {k: Job("full", k.text, scorer.layer) for k in keys}
        got = self.run(list(jobs.values()))
        out = {}
        for k, job in jobs.items():
            r = got[job.id]
            out[k] = scorer.record_measured(k, {dn == "1": s for dn, s in r["scores"].items()}, _unpack(r["sims"]),
                                            r["seconds"])
        return out

    def retrieval(self, keys: list[str]) -> dict[str, dict]:
        """Retrieval candidates' scores (``search.retrieval.job_key`` → ``RetrievalWork.measure_job``'s result), by
        whichever process did each.

        :param keys: the candidates' job keys.
        :returns: key → ``{"metrics", "per_query", "seconds"}``."""
        jobs = {key: Job(RETRIEVAL, key) for key in keys}
        got = self.run(list(jobs.values()))
        return {key: got[j.id] for key, j in jobs.items()}

    def rung(self, scorer: Scorer, keys: list[str], k: int, rungs: list[int],
             seed: int) -> tuple[dict[str, np.ndarray], int]:
        """Each key's similarities on rung ``k``'s pairs, and the sentences encoded for them."""
        jobs = {key: Job("rung", key, scorer.layer, k, tuple(rungs), seed) for key in keys}
        got = self.run(list(jobs.values()))
        encoded = sum(got[j.id]["encoded"] for j in jobs.values())
        return {key: _unpack(got[j.id]["sims"]) for key, j in jobs.items()}, encoded

    def __enter__(self) -> WorkQueue:
        return self

    def __exit__(self, kind, exc, tb) -> None:
        """Closed as the search ends: a KeyboardInterrupt (Ctrl-C, SIGTERM) or its output's reader gone (a broken
        pipe) leaves its workers waiting for the same command to resume it; its end, or an error, stops them."""
        self.close(kind is not None and issubclass(kind, (KeyboardInterrupt, BrokenPipeError)))

    def close(self, interrupted: bool = False) -> None:
        """The search is over (workers attached to the study stop), or ``interrupted`` (Ctrl-C, SIGTERM): its
        workers wait for it to be resumed, the same command run again, which finds the jobs they finished meanwhile.

        :param interrupted: whether the search was interrupted rather than over."""
        try:
            self.study.set_user_attr(*(("interrupted", time.time()) if interrupted else ("finished", True)))
        except Exception:  # the storage is gone: the workers find out by themselves
            pass


SEARCH_ATTRS = ("numbers", "retrieval", "making")  # an Optuna search's study has one of these; a work study "spec"
JOIN_OPTUNA = ("an Optuna search is joined by running its own command, with the same storage=, on each machine, not "
               "by a worker")


def _optuna_search(attrs: dict) -> bool:
    """Whether a study (its user attributes) is an Optuna search's, not a work study."""
    return "spec" not in attrs and any(k in attrs for k in SEARCH_ATTRS)


def _is_open(summary, wait: float) -> bool:
    """Whether a study (its summary) is a work study a worker may join unnamed: described, not over, and not
    interrupted longer than ``wait`` seconds ago (a search left for good; by the driver's clock, which a worker's
    may differ from by a little)."""
    attrs = summary.user_attrs
    stopped = attrs.get("interrupted")
    return (summary.study_name.startswith(PREFIX) and "spec" in attrs and not attrs.get("finished")
            and not (stopped and time.time() - stopped > wait))


def find_study(storage, name: str | None, wait: float = 600) -> optuna.Study | None:
    """The work study ``name``, or the newest open one in the storage (``_is_open``: None while there is none).

    :raises promptsearch.PromptSearchError: for ``name`` naming an Optuna search's study (no work study)."""
    if name is not None:
        try:
            study = optuna.load_study(study_name=name, storage=storage)
        except KeyError:
            return None
        attrs = study.user_attrs
        if _optuna_search(attrs):
            raise PromptSearchError(f"the study {name!r} is an Optuna search's, not a work study: {JOIN_OPTUNA}")
        return study if "spec" in attrs else None  # made, not yet described: a moment more
    open_ = [s for s in optuna.get_all_study_summaries(storage, include_best_trial=False) if _is_open(s, wait)]
    if not open_:
        return None
    newest = max(open_, key=lambda s: s.datetime_start or datetime.datetime.min)  # no trial yet: no start
    return optuna.load_study(study_name=newest.study_name, storage=storage)


def _open_studies(storage, wait: float) -> str:
    """' (it holds NAME, ...)': the open work studies a worker could join, to name in a message."""
    summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    names = [s.study_name for s in summaries if _is_open(s, wait)]
    if names:
        return f" (open there: {', '.join(names[:3])}{', ...' if len(names) > 3 else ''})"
    return _optuna_searches(storage, summaries) or " (no search is open there)"


def _optuna_searches(storage, summaries=None) -> str:
    """' (it holds the Optuna search study NAME: ...)' when the storage holds an Optuna search's study, else empty: what
    a worker that found no work study was maybe pointed at (``summaries``: the storage's, when already read)."""
    if summaries is None:
        summaries = optuna.get_all_study_summaries(storage, include_best_trial=False)
    names = [s.study_name for s in summaries if _optuna_search(s.user_attrs)]
    return f" (it holds the Optuna search study {names[0]!r}: {JOIN_OPTUNA})" if names else ""


def _work_for(spec: dict, cwd, make_work, log=None):
    """The work for a study's ``spec`` (``make_work``, whose own paths are absolute), checked against it: built in
    this worker's folder, or, where that fails (a model or data the search named by a path relative to its own
    folder: refused here), in the folder the search runs in (``cwd``) when this machine has it, which the worker then
    works from; the first refusal stands when neither reads.

    :param spec: the study's spec.
    :param cwd: the folder the search's command runs in, as the study recorded it (None: not recorded).
    :param make_work: ``spec`` -> ``(work, model)``.
    :param log: told where the study's paths were read from, when it is the search's folder.
    :returns: ``(work, model)``."""
    try:
        work, model = make_work(spec)
        work.check(spec, model)
        return work, model
    except PromptSearchError as exc:
        if not isinstance(cwd, str) or not os.path.isdir(cwd) or os.path.samefile(cwd, os.getcwd()):
            raise
        here = exc.with_traceback(None)  # its frames would keep the first model loaded while the second loads
        work = None  # noqa: F841 - (the same: a model loaded, then refused by its check)
        back = os.getcwd()
        os.chdir(cwd)  # the study's relative paths as the search reads them, for the worker's life: a model's
        # sentence-transformers modules, for one, are read when first used (make_work's own paths are absolute)
        try:
            work, model = make_work(spec)
            work.check(spec, model)
        except PromptSearchError:
            os.chdir(back)
            raise here from None
    if log:
        log(f"worker: the study's model and data read from the search's folder, {cwd}, where it works from now")
    return work, model


def serve(url: str, name: str | None, make_work, grace: int = 90, wait: float = 600, log=None) -> int:
    """``promptsearch worker``: attach to the work study ``name`` (or the newest open one; waiting up to
    ``wait`` seconds for a search to start), build the work for its spec (``make_work(spec)`` ->
    (``ScoringWork``, model)), refuse a study it would compute other numbers for, then do jobs until the
    driver says the search is over. Returns the number of jobs done."""
    optuna.logging.set_verbosity(optuna.logging.ERROR)
    start = time.monotonic()
    storage = existing_storage(url, grace=grace)  # not a database URL, a server not reached: refused at once
    if storage is None:  # a SQLite file the search has not made yet: its folder checked, the file left to the search
        check_storage(url, grace=grace)
    study = find_study(storage, name, wait) if storage else None
    if study is None and log:
        log(f"worker: waiting up to {wait:.0f}s for a search to open "
            + (f"the work study {name!r}" if name else "a work study") + f" in {_shown(url)}"
            + ("" if storage else " (its file does not exist yet)") + (_optuna_searches(storage) if storage else ""))
    while study is None:
        if time.monotonic() - start > wait:
            missing = " (its file does not exist: check the path)"
            if name is None:
                there = (_optuna_searches(storage) or " (no search is open there)") if storage else missing
                raise PromptSearchError(f"no search is open in the storage after {wait:.0f}s{there}: start the search "
                                        "with storage= first, or give its study name")
            there = _open_studies(storage, wait) if storage else missing
            raise PromptSearchError(f"no work study {name!r} in the storage after {wait:.0f}s{there}: give the "
                                    "study_name= the search printed, or none for the newest open one")
        time.sleep(1)
        storage = storage or existing_storage(url, grace=grace)
        study = find_study(storage, name, wait) if storage else None
    spec = study.user_attrs["spec"]
    if log:
        log(f"worker: study {study.study_name!r} ({spec['model']} on {spec['dataset']}); loading the model")
    try:
        work, model = _work_for(spec, study.user_attrs.get("cwd"), make_work, log)
    except PromptSearchError as exc:  # told to the search too, which would otherwise wait for it without a word
        with contextlib.suppress(Exception):
            study.set_user_attr("refused", {"by": this_process(), "why": str(exc)})
        raise
    done, last_stale, paused, since = 0, 0.0, None, 0.0
    while True:
        if retrying(lambda: claim_and_do(study, storage, work, patience=grace), grace):
            done += 1
            if paused:  # a job while interrupted: the search resumed (said before its end, however soon that is)
                paused = None
                if log:
                    log("worker: the search resumed")
            continue
        attrs = retrying(lambda: study.user_attrs, grace)
        if attrs.get("finished"):
            break
        if attrs.get("interrupted") != paused:  # the search interrupted, or resumed (None)
            paused, since = attrs.get("interrupted"), time.monotonic()  # timed by this worker's clock
            if log:
                log(f"worker: the search was interrupted; waiting up to {wait:.0f}s for it to be resumed (its command "
                    "run again)" if paused else "worker: the search resumed")
        if paused and time.monotonic() - since > wait:
            if log:
                log(f"worker: the search was interrupted and not resumed within {wait:.0f}s; {done} jobs done here")
            return done
        if time.monotonic() - last_stale > 5:
            retrying(lambda: fail_stale_trials(study), grace)
            last_stale = time.monotonic()
        time.sleep(POLL)
    if log:
        log(f"worker: the search is over; {done} jobs done here")
    return done
