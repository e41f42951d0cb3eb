"""A search resumed from the TUI: the command its results file recorded (a retrieval search's or an STS one's), run
again in a child process (its output in a log beside the file), ended with the TUI."""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path


def why_not(command: dict | None, out: str, search: str = "greedy") -> str | None:
    """Why a results file's recorded ``command`` cannot be run again from here, or None.

    :param command: the file's command (``{"argv", "cwd"}``, or None in a file written before it was kept).
    :param out: the results file.
    :param search: the command that runs a search of the file's kind, named in the advice when its own is not known.
    :returns: the reason, with the command to run instead, or None."""
    argv = command.get("argv") if isinstance(command, dict) else None
    ok = (isinstance(argv, list) and bool(argv) and all(isinstance(a, str) for a in argv)
          and argv[0] not in ("tui", "worker"))
    ask = (f"run promptsearch {argv[0] if ok and argv else search} … "
           f"--out {out} to resume it (the board follows it)")
    if command is None or not ok:
        return f"this results file does not record the command that wrote it: {ask}"
    if command.get("masked"):
        return f"the command that wrote this file had a password in a URL, not kept in the file: {ask}"
    if not Path(str(command.get("cwd", ""))).is_dir():
        return f"the folder the search ran in ({command.get('cwd')}) is gone: {ask}"
    return None


def log_path(out: str) -> Path:
    """Where a resumed search's output goes: beside its results file, ``FILE.log``."""
    return Path(f"{out}.log")


def shown(command: dict) -> str:
    """The recorded command as a shell would take it (said when the TUI runs it)."""
    return shlex.join(["promptsearch", *_without_out(command["argv"])])


def _without_out(argv: list[str]) -> list[str]:
    """``argv`` less its ``--out`` (the TUI gives the file it follows instead)."""
    kept: list[str] = []
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--out":
            skip = True
        elif not a.startswith("--out="):
            kept.append(a)
    return kept


def start(command: dict, out: str) -> subprocess.Popen:
    """Run the recorded command again, in its folder, into ``out`` (the file the TUI follows, wherever it now is):
    it resumes the search, scoring only what the file does not hold. Its output goes to ``log_path(out)``. It
    shares the TUI's process group, so a hang-up that ends the TUI (its terminal closed) ends it too; it runs the
    promptsearch this TUI runs (its folder first on the child's path).

    :param command: the file's recorded command (``why_not`` gave None).
    :param out: the results file.
    :returns: the child process."""
    argv = [sys.executable, "-m", "promptsearch", *_without_out(command["argv"]), "--out", str(Path(out).resolve())]
    here = str(Path(__file__).resolve().parents[2])  # the folder this promptsearch package is in
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)}
    with open(log_path(out), "w", encoding="utf-8") as log:
        return subprocess.Popen(argv, cwd=command["cwd"], env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT)


def end(child: subprocess.Popen, seconds: float = 60.0) -> None:
    """End a resumed search that still runs as a SIGTERM ends the command: it keeps every score made (a rerun
    resumes). Killed if it has not ended within ``seconds``."""
    if child.poll() is not None:
        return
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()
    except BaseException:  # a second Ctrl-C while it ends: killed, not left behind
        child.kill()
        raise


def last_line(out: str) -> str:
    """The last line a resumed search wrote (its error, when it failed)."""
    try:
        lines = log_path(out).read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return lines[-1] if lines else ""
