"""An Optuna study's plumbing for batches of trials: RDB storage with heartbeats, trials asked
several at a time (``study.ask()``, then ``tell``) so one encoding pass holds several candidates,
their heartbeats while they run (``Heartbeats``: the one heartbeat, which the work queue of
``distributed`` uses too), and interrupts held back around storage writes. Only Optuna's public API
is used: ``study.ask``/``tell``, the storage's heartbeat and its stale-trial callback.

``study.optimize`` runs one trial at a time; the batch loop keeps what it gave: stale trials of a
killed worker failed (and retried once) before each batch, a heartbeat per running trial, the
study's target of finished trials shared by every worker, and an interrupted batch's trials told
failed rather than left RUNNING.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Callable

import optuna
from optuna.trial import TrialState

from ..errors import PromptSearchError, first_line, without_password
from ..interrupts import SIGNALS

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)
POLL_RUNNING = 0.5  # seconds between looks at other processes' running trials (``ask_batch``)
RUNNING_WAIT = 90.0  # the most seconds a process waits for others' running trials without one finishing: a grace


class StudyInterrupts:
    """Ctrl-C and SIGTERM during a study: raised at once while a template is being encoded, held back
    while Optuna writes to its storage — an interrupt there left trials RUNNING, broke Optuna
    itself (``UnboundLocalError: updated_state``) or left a SQLite transaction open. The batch's
    open trials are then told failed and the interrupt goes on to the CLI's one line.

    An interrupt stays requested until it is seen leaving the objective: a signal handler can run
    inside a garbage-collector callback, where Python swallows the exception ("Exception ignored
    in ..."), so it is raised again at the next checkpoint (after each encoded rung). Signals after
    that are ignored while the study unwinds. The handlers that were installed (the CLI's SIGTERM
    one) still run."""

    def __init__(self):
        self.scoring = False
        self.requested = None  # (signum, frame) of a signal not yet seen leaving the objective
        self.delivered = False
        self.previous: dict = {}

    def __enter__(self):
        for sig in SIGNALS:
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: signals are the main thread's business
                pass
        self.unraisable, sys.unraisablehook = sys.unraisablehook, self._swallowed
        return self

    def _swallowed(self, unraisable) -> None:
        """Python prints an exception raised in a GC callback ("Exception ignored in ..."): not ours,
        which is raised again at the next checkpoint."""
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.unraisable(unraisable)

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        sys.unraisablehook = self.unraisable
        if self.requested and not self.delivered and exc[0] is None:
            self._raise()

    def _handle(self, signum, frame):
        if self.delivered or self.requested:
            return  # already on its way out
        self.requested = (signum, frame)
        if self.scoring:
            self._raise()

    def _raise(self):
        signum, frame = self.requested
        handler = self.previous.get(signum)
        if callable(handler):
            handler(signum, frame)  # the default SIGINT handler raises KeyboardInterrupt itself
        raise KeyboardInterrupt

    def check(self) -> None:
        """Between batches: an interrupt held back during storage writes is raised here."""
        if self.requested:
            self._raise()

    @contextlib.contextmanager
    def objective(self):
        """Around a batch's scoring and telling: notes the interrupt leaving it."""
        try:
            yield
        except KeyboardInterrupt:
            self.delivered = True
            raise

    @contextlib.contextmanager
    def scoring_region(self):
        """Where an interrupt may land at once: encoding, no storage write. One held back, or
        swallowed on the way, is raised here, before and after."""
        self.check()
        self.scoring = True
        try:
            yield
        finally:
            self.scoring = False
        self.check()


def storage_url(url: str) -> str:
    """``postgresql://`` and ``postgres://`` name psycopg 3 (``postgresql+psycopg://``), the driver
    promptsearch installs; any other SQLAlchemy URL is used as given."""
    for scheme in ("postgresql://", "postgres://"):
        if url.startswith(scheme):
            return "postgresql+psycopg://" + url[len(scheme):]
    return url


def _shown(url: str) -> str:
    """The URL as a message or a results file may show it: no password (``user:***@``, ``?password=***``)."""
    try:
        from sqlalchemy.engine import make_url  # lazy: start-up time

        shown = make_url(url).render_as_string(hide_password=True)
    except Exception:
        shown = url.split("@")[-1]
    return without_password(shown)  # also libpq's ?password=, which SQLAlchemy keeps


CONNECT_TIMEOUT = 5  # seconds a server gets to answer before the storage is refused


# PostgreSQL's "already exists" for a type (Optuna's enums) or a table: another worker created it first
DUPLICATE_OBJECT, DUPLICATE_TABLE = "42710", "42P07"


def _created_meanwhile(exc) -> bool:
    """Whether a failed schema statement failed because another process had just created what it creates."""
    return getattr(getattr(exc, "orig", None), "sqlstate", None) in (DUPLICATE_OBJECT, DUPLICATE_TABLE)


STORAGE_EXAMPLES = "e.g. sqlite:///study.db (a file here) or postgresql://user:password@host/db"


def _parsed(url: str):
    """``url`` as SQLAlchemy reads it, its dialect known: one line if it is not a database URL."""
    from sqlalchemy.engine import make_url  # lazy: start-up time
    from sqlalchemy.exc import ArgumentError  # lazy: start-up time

    try:
        parsed = make_url(storage_url(url))
        parsed.get_dialect()
    except ArgumentError as exc:  # not a URL, or a database SQLAlchemy knows no dialect for
        raise PromptSearchError(
            f"storage={url} is not a database URL ({first_line(exc)}): give one, {STORAGE_EXAMPLES}") from None
    except ImportError:  # the dialect's driver: open_storage names it
        pass
    return parsed


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite storage URL (None: not SQLite, or an in-memory or URI database)."""
    parsed = _parsed(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "",
                                                                    ":memory:") or parsed.database.startswith("file:"):
        return None
    return Path(parsed.database)


def check_storage(url: str, grace: int = 90) -> None:
    """Refuse a storage that cannot be used, creating nothing: a URL that is not a database's, a SQLite
    file whose folder is missing or not writable (a new file is made only when the search starts), an
    existing file that is not a database; a server that cannot be reached (``open_storage``)."""
    path = sqlite_file(url)
    if path is None:
        if _parsed(url).get_backend_name() != "sqlite":
            open_storage(url, grace=grace)
        return
    if path.exists():
        open_storage(url, grace=grace)
        return
    folder = path.parent
    if not folder.is_dir():
        raise PromptSearchError(f"storage={url}: the folder {folder} does not exist; create it or give another path, "
                                f"{STORAGE_EXAMPLES}")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PromptSearchError(f"storage={url}: the folder {folder} is not writable; give a path in a folder you can "
                                "write")


def existing_storage(url: str, grace: int = 90) -> optuna.storages.BaseStorage | None:
    """The storage, opened only if it may already hold studies (a SQLite file that does not exist yet: None)."""
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return None
    if path is None and _parsed(url).get_backend_name() == "sqlite":  # in memory: nothing before this process
        return None
    return open_storage(url, grace=grace)


STUDY_EXISTS = "give another study_name= (or delete the study) to start a new one"  # how to start afresh


def existing_study(url: str, name: str) -> tuple[optuna.storages.BaseStorage, int, str] | None:
    """The study ``name`` when the storage at ``url`` already holds it — its storage, its id and how a message names
    it — for a search that resumes or joins it only if its numbers compare; None when there is none yet. Reads,
    writes nothing.

    :param url: the storage URL.
    :param name: the study's name.
    :returns: ``(storage, study id, "study NAME in URL")``, or None."""
    storage = existing_storage(url)
    if storage is None:
        return None
    try:
        sid = storage.get_study_id_from_name(name)
    except KeyError:
        return None
    return storage, sid, f"study {name!r} in {_shown(url)}"


def _retry_stale_once() -> dict:
    """RDBStorage's argument that queues a stale trial (its worker stopped beating) again, once. Optuna 4.9
    renamed ``failed_trial_callback=RetryFailedTrialCallback`` to ``heartbeat_stale_trial_callback=
    RetryHeartbeatStaleTrialCallback`` (the old names go in 6.0); both are public: the new ones where they exist."""
    new = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
    if new is not None:
        return {"heartbeat_stale_trial_callback": new(max_retry=1)}
    return {"failed_trial_callback": optuna.storages.RetryFailedTrialCallback(max_retry=1)}


def open_storage(url: str, attempts: int = 5, grace: int = 90) -> optuna.storages.BaseStorage:
    """RDB storage with heartbeats (a killed worker's trial is failed ``grace`` seconds after its last
    beat, and retried once).

    Workers started together on a fresh database race to create its tables; the loser retries and
    then finds them. A server that cannot be reached, refuses the login or needs a driver that is
    not installed is one ``PromptSearchError`` within seconds, no retries.
    """
    from sqlalchemy.exc import DatabaseError, IntegrityError, OperationalError, ProgrammingError  # lazy: start-up time

    _parsed(url)  # a URL, of a database SQLAlchemy knows
    given, url = url, storage_url(url)
    sqlite = url.startswith("sqlite")
    kwargs = ({"connect_args": {"timeout": 60}} if sqlite
              else {"connect_args": {"connect_timeout": CONNECT_TIMEOUT},
                    "pool_pre_ping": True} if url.startswith("postgresql")
              else {"pool_pre_ping": True})
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # heartbeat args are flagged experimental/deprecated, still supported
                return optuna.storages.RDBStorage(url, engine_kwargs=kwargs, heartbeat_interval=max(1, grace // 3),
                                                  grace_period=grace, **_retry_stale_once())
        except ImportError as exc:
            driver = getattr(exc, "name", None) or "its database driver"
            hint = ("pip install 'psycopg[binary]'" if url.startswith("postgresql")
                    else "pip install mysqlclient (or PyMySQL, with a mysql+pymysql:// URL)" if url.startswith("mysql")
                    else f"install {driver}")
            raise PromptSearchError(
                f"the storage {_shown(given)} needs {driver}, which is not installed: {hint}") from None
        except (IntegrityError, ProgrammingError) as exc:  # another process created the tables or types first
            if attempt == attempts - 1 or not (isinstance(exc, IntegrityError) or _created_meanwhile(exc)):
                raise
        except OperationalError as exc:
            reason = first_line(getattr(exc, "orig", None) or exc)
            if not sqlite:  # the server is unreachable or refused the login: say so at once
                raise PromptSearchError(f"cannot open the storage {_shown(given)}: {reason}; check its host, port, "
                                        "user, password and database, and that the server is running") from None
            # a file that cannot be opened (no folder, a folder, no permission): no retry helps; others (a lock, a table
            # another worker just created) are retried
            if "unable to open" in reason:
                raise PromptSearchError(f"cannot open the storage {given}: {reason}; give a SQLite file in a folder "
                                        f"you can write, {STORAGE_EXAMPLES}") from None
            if attempt == attempts - 1:  # still locked by another process after every retry: not the file's fault
                raise PromptSearchError(f"cannot open the storage {given}: {reason} after {attempts} tries; another "
                                        "process holds it (wait for it and re-run, or use PostgreSQL for many "
                                        "workers)") from None
        except DatabaseError as exc:  # a file that is not a SQLite database
            raise PromptSearchError(f"cannot open the storage {_shown(given)}: "
                                    f"{first_line(getattr(exc, 'orig', None) or exc)}; give a new file or a study "
                                    f"database, {STORAGE_EXAMPLES}") from None
        time.sleep(0.5 + random.random())
    raise AssertionError("unreachable")


HEARTBEAT_THREAD = "promptsearch-heartbeat"  # the name of the one thread that beats a process's running trials


def trial_ids(storage: optuna.storages.BaseStorage, study: optuna.Study, trials: list) -> list[int]:
    """The storage's ids of ``trials`` (asked or frozen) of ``study``, read through the storage's public
    interface: the study's id by its name, each trial's by its number."""
    study_id = storage.get_study_id_from_name(study.study_name)
    return [storage.get_trial_id_from_study_id_trial_number(study_id, t.number) for t in trials]


class Heartbeats:
    """The heartbeat of running trials — an Optuna search's batch, or a worker's one job — from one
    thread, recorded in ``storage`` (the RDB storage the study was opened with) every
    ``heartbeat_interval`` seconds, as ``study.optimize`` records it for its one trial: a killed
    process's trials go stale and are failed and retried (the storage's callback, see
    ``fail_stale_trials``). The one heartbeat of both the Optuna search and the work queue.
    A missed beat in the thread (a locked database) is not an error; ``beat`` raises one."""

    def __init__(self, storage: optuna.storages.BaseStorage, study: optuna.Study, trials: list):
        interval = getattr(storage, "get_heartbeat_interval", lambda: None)()  # None: a storage without heartbeats
        self.storage, self.study, self.trials, self.interval = storage, study, list(trials), interval
        self.ids: list[int] | None = None  # looked up at the first beat
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._beat, name=HEARTBEAT_THREAD, daemon=True) if interval else None

    def beat(self) -> None:
        """One beat for each trial now; a database error is raised (the caller may wait it out)."""
        if not self.interval:
            return
        if self.ids is None:
            self.ids = trial_ids(self.storage, self.study, self.trials)
        for trial_id in self.ids:
            # a storage with a heartbeat interval records heartbeats (Optuna's BaseHeartbeat, not a public name)
            self.storage.record_heartbeat(trial_id)  # type: ignore[attr-defined]

    def _beat(self) -> None:
        while True:
            with contextlib.suppress(Exception):
                self.beat()
            if self.stop.wait(self.interval):
                return

    def __enter__(self):
        if self.thread:
            self.thread.start()
        return self

    def __exit__(self, *exc):
        if self.thread:
            self.stop.set()
            self.thread.join()


def fail_stale_trials(study: optuna.Study) -> None:
    """Trials whose worker stopped beating: failed, and retried once (the storage's callback)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)


def ask(study: optuna.Study) -> optuna.Trial:
    """``study.ask()``: the oldest waiting (enqueued) trial, claimed for this process, or a new one. Its
    warning that heartbeats belong to ``study.optimize`` is silenced: ``Heartbeats`` records them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Heartbeat of storage is supposed to be used with Study.optimize")
        return study.ask()


def this_process() -> str:
    """This process as a trial or study records it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def stopped(process) -> bool:
    """Whether the process ``this_process`` named is known to have stopped: one on this host that no longer runs (one
    on another host, or unnamed, is not known to have).

    :param process: ``host:pid``, or None.
    :returns: True only for a process known to be gone."""
    host, _, pid = str(process or "").rpartition(":")
    if host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except OSError:  # another user's process: it runs
        return False
    return False


def ask_batch(study: optuna.Study, size: int, target: int, suggest, wait: float = 0.0,
              check: Callable[[], None] | None = None, say: Callable[[str], None] | None = None) -> list[optuna.Trial]:
    """Up to ``size`` new trials, each marked with this process (``process``) and given its parameters by
    ``suggest(trial)`` before the next is asked (the sampler sees the earlier ones running). The study's finished and
    running trials are counted before each ask, so workers sharing it stop near ``target`` finished trials together.
    When other processes' running trials would reach ``target``, this one waits for them (looking every
    ``POLL_RUNNING``; ``check()`` at each look, which may raise an interrupt; ``say`` told once) rather than run a
    trial past it: they finish (the study is done: empty), or fail, or a killed worker's go stale (failed). A running
    trial of a process on this host that no longer runs (a rerun after a crash) is not waited for. After ``wait``
    seconds in which no trial finished, one trial is still asked while fewer than ``target`` have finished (the
    running ones may be a killed worker's on another host that never beat), as ``study.optimize`` with
    ``MaxTrialsCallback`` does; so a peer's batch that runs longer than that, or two processes asking at the same
    moment, can end a shared study a trial or a batch past ``target``. ``suggest`` failing fails the batch's trials
    (none is left running) and goes on.

    :param study: the study.
    :param size: the most trials to ask.
    :param target: the study's total of finished trials.
    :param suggest: gives a trial its parameters.
    :param wait: the most seconds to wait without a trial finishing (0: ask at once).
    :param check: called at each look while waiting (None: nothing).
    :param say: told one line when the wait begins (None: nothing said).
    :returns: the trials (empty: the study is done)."""
    trials: list[optuna.Trial] = []
    until, seen = time.monotonic() + wait, -1
    while len(trials) < size:
        got = study.get_trials(deepcopy=False, states=FINISHED + (TrialState.RUNNING,))
        finished = sum(t.state in FINISHED for t in got)
        running = [t for t in got if t.state == TrialState.RUNNING and not stopped(t.user_attrs.get("process"))]
        if finished >= target or (trials and len(got) >= target):
            break
        if not trials and finished + len(running) >= target:  # others' running trials reach it
            if finished != seen:  # a trial finished (or the wait begins): the wait starts again
                if seen < 0 and wait > 0 and say is not None:
                    say(f"optuna: {len(running)} trials other processes are running reach trials={target}: waiting "
                        "for them")
                until, seen = time.monotonic() + wait, finished
            if time.monotonic() < until:
                if check is not None:
                    check()
                time.sleep(POLL_RUNNING)
                fail_stale_trials(study)
                continue
        trial = ask(study)
        trials.append(trial)
        try:
            trial.set_user_attr("process", this_process())  # a rerun on this host need not wait for it once it stops
            suggest(trial)
        except BaseException:  # a parameter Optuna refuses: the batch's trials told failed, none left running
            for t in trials:
                with contextlib.suppress(Exception):
                    study.tell(t, state=TrialState.FAIL)
            raise
    return trials
