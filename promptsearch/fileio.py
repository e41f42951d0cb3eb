"""Atomic writes, the only implementation: a crash never leaves a half-written file; and the lock
that keeps two processes from writing one results file."""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Callable

from .errors import PromptSearchError
from .paths import same_model


def atomic_replace(path: str | os.PathLike, write: Callable[[str], None], mode: int | None = None) -> Path:
    """Have ``write(tmp)`` write a temp file in ``path``'s folder, then ``os.replace`` it onto
    ``path``: a crash or Ctrl-C never leaves a half-written file. The file gets the usual
    permissions (``mode``, default 0666 less the umask)."""
    p = Path(path)
    if p.is_symlink():  # write through a link to its target (replacing the link would leave the target stale)
        p = Path(os.path.realpath(p))
    if mode is None and p.exists():
        mode = p.stat().st_mode & 0o7777  # a rewritten file keeps its permissions
    fd, tmp = temp_beside(p)
    os.close(fd)
    try:
        write(tmp)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise _cannot_write(p, exc) from None
        raise
    put_in_place(tmp, p, mode)
    return p


def temp_beside(path: str | os.PathLike) -> tuple[int, str]:
    """A new temp file in ``path``'s folder (made if missing), for a file written over many calls and then put in
    place with ``put_in_place`` (what ``atomic_replace`` does in one call).

    :param path: the file it will become.
    :returns: (open descriptor, temp path).
    :raises promptsearch.PromptSearchError: when the folder cannot be written."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
    except OSError as exc:
        raise _cannot_write(p, exc) from None


def put_in_place(tmp: str | os.PathLike, path: str | os.PathLike, mode: int | None = None) -> None:
    """Give the finished temp file ``tmp`` the usual permissions (``mode``, default 0666 less the umask) and
    ``os.replace`` it onto ``path``; on failure it is deleted.

    :param tmp: a finished file from ``temp_beside``.
    :param path: where it goes.
    :param mode: its permissions (default 0666 less the umask).
    :raises promptsearch.PromptSearchError: when it cannot be put there."""
    try:
        os.chmod(tmp, (0o666 & ~_UMASK) if mode is None else mode)  # mkstemp makes 0600
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise _cannot_write(path, exc) from None


def _cannot_write(path: str | os.PathLike, exc: OSError) -> PromptSearchError:
    return PromptSearchError(f"cannot write {path}: {exc.strerror or exc}; choose a writable output path")


def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_replace(path, write)


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: os.umask is process-wide, so never toggle it later


_HELD: dict[str, int] = {}  # results files this process writes: path -> the descriptor holding its lock


def hold_write_lock(path: str | os.PathLike) -> None:
    """Take the lock on ``path`` for the rest of this process (kept until it exits; taking it again in
    the same process is a no-op), or raise a one-line error naming the process that holds it.

    The file itself is replaced at every write (``atomic_replace``), so the lock lives on a
    hidden file beside it, ``.NAME.lock``. The kernel drops it when the process ends, killed or not."""
    try:
        import fcntl  # here, not at the top: POSIX only
    except ImportError:  # not POSIX: no lock
        return
    p = Path(path).resolve()
    if str(p) in _HELD:
        return
    lock = p.parent / f".{p.name}.lock"
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666 & ~_UMASK)
    except OSError:
        return  # a folder we cannot write: the results write itself will say so
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 32).decode("ascii", "replace").strip() or "?"
        os.close(fd)
        raise PromptSearchError(f"{p} is being written by another promptsearch run (pid {holder}); wait for it to end, "
                                "or pass another out=") from None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    _HELD[str(p)] = fd


def check_writable(path, param: str = "out", example: str = "best.json") -> None:
    """Fail before loading anything if ``path`` (a file, the parameter ``param``) cannot be written."""
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise PromptSearchError(f"{param}={p} is a directory; give a file name such as {example}")
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise PromptSearchError(f"{param}={p} is not writable; choose a path in a writable folder")
    check_not_read_only(p, param)


def check_not_read_only(path, param: str = "out") -> None:
    """A file whose mode has no write bit is refused, whoever runs (root may write it, but its owner
    made it read-only on purpose)."""
    p = Path(path)
    if p.exists() and p.is_file() and not p.stat().st_mode & 0o222:
        raise PromptSearchError(f"{param}={p} is read-only (mode {p.stat().st_mode & 0o777:o}); make it writable "
                                "(chmod u+w) or pass another path")


def check_apart(cache, out) -> None:
    """The score cache and the results file must be two files."""
    if out and cache and Path(cache).resolve() == Path(out).resolve():
        raise PromptSearchError(f"cache= and out= are both {out}; the cache is a separate file (e.g. scores.jsonl)")


RETRIEVAL = "retrieval"  # a retrieval search's results file says ``"kind": "retrieval"``; a template search's none


def results_kind(path: str | os.PathLike) -> str | None:
    """What a results file holds, by its ``"kind"``: ``"retrieval"`` (a retrieval search's), ``"templates"`` (any other
    JSON object: a template search's, which ``Results.load`` reads and judges), or None (no file, or not a JSON object:
    the reader of the caller's kind says why).

    :param path: the file.
    :returns: the kind, or None."""
    try:
        d = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    if not isinstance(d, dict):
        return None
    return RETRIEVAL if d.get("kind") == RETRIEVAL else "templates"


def recorded_place(d: dict) -> tuple[str | None, str | None]:
    """Where a results file (its JSON) says its model was named: the folder its command last ran in and the model's
    own folder when it was a local one (a retrieval file's ``command``/``model_folder``, a template search's
    ``x_command``/``x_model_folder``), each None when not recorded.

    :param d: the file's JSON object.
    :returns: ``(cwd, folder)`` for ``paths.model_here``."""
    command = d.get("command", d.get("x_command"))
    cwd = command.get("cwd") if isinstance(command, dict) else None
    folder = d.get("model_folder", d.get("x_model_folder"))
    return (cwd if isinstance(cwd, str) else None), (folder if isinstance(folder, str) else None)


def resumed_model(out: str | os.PathLike | None, given: str) -> str:
    """The model name a run into the results file ``out`` goes on under: the file's own where ``given`` names the same
    local folder another way (a relative and an absolute path, a link), so that the file, its study and its work
    queue stay one run's; else ``given`` (no file; another model: the file's own check refuses it).

    :param out: the results file (None: none).
    :param given: the model as named now.
    :returns: the name the run records."""
    try:
        d = json.loads(Path(out).read_text(encoding="utf-8")) if out else None
    except (OSError, UnicodeDecodeError, ValueError):
        return given
    if isinstance(d, dict) and isinstance(d.get("model"), str) and same_model(d["model"], given, *recorded_place(d)):
        return d["model"]
    return given
