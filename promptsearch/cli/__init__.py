"""The ``promptsearch`` command line: a thin layer over the library.

``parser`` holds every subcommand's flags; a command's module (``evaluate``, ``search``,
``train``) loads when it runs, so ``--help`` and usage errors answer at once. This module reads the
arguments, runs the command and turns errors and interrupts into one line."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from pathlib import Path

from .. import errors
from ..errors import PromptSearchError, first_line
from ..interrupts import ignore_interrupts, restored_handlers, terminable
from .flags import as_flags, flag_table
from .parser import build_parser


def _saved_hint(args) -> str:
    """What an interrupted command kept, and how to go on."""
    out, again = getattr(args, "out", None), "re-run the same command to resume"
    if args.command == "train-head":
        return f"; masked states are cached and finished epochs saved in {out}, {again}"
    if args.command in ("optiprompt", "finetune"):
        return f"; the last checkpoint is in {out}, {again}" if out and any(Path(out).rglob("*-checkpoint.pt")) else ""
    what, key = ("candidates", "entries") if args.command == "retrieval" else ("templates", "templates")
    if not out or not Path(out).is_file():
        return ""
    kept = f"; scored {what} are saved in {out}, {again}"
    try:  # a results file is written when its run starts; one scored into is larger than a small read: not read
        if Path(out).stat().st_size >= 2 ** 20:
            return kept
        held = json.loads(Path(out).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    if not isinstance(held, dict) or key not in held:  # not a results file (a picture plot writes, a folder ...)
        return ""
    return "; nothing was scored yet, re-run the same command to start it again" if held[key] == [] else kept


# The status of the command ``main`` ran, from the moment it has one (its work done, its last line printed) until the
# next ``main``: a Ctrl-C after it is no interrupt of the command (``promptsearch.__main__`` leaves with it).
ended: int | None = None


def _ended(code: int) -> int:
    global ended
    ended = code
    return code


def _stdout_gone() -> bool:
    """Whether the standard output is a pipe whose reader is gone (polled: POLLERR on its write end)."""
    import select  # lazy: only a broken pipe asks

    try:
        poll = select.poll()
        poll.register(sys.stdout.fileno(), select.POLLOUT)
        return any(ev & select.POLLERR for _, ev in poll.poll(0))
    except (AttributeError, OSError, ValueError):  # no fileno (captured), no poll (not POSIX)
        return False


def _stdout_to_devnull() -> None:
    """The process's standard output sent nowhere once its reader is gone, so that Python's last flush of it at exit
    raises no second BrokenPipeError (Python's documented recipe); a captured stdout (tests) is left as it is."""
    try:
        if sys.stdout is sys.__stdout__ and sys.stdout is not None:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
    except (OSError, ValueError):
        pass


def flushed(code: int) -> int:
    """The status of a command whose output is flushed now (``python -m promptsearch`` calls it after ``main``, its
    signal handlers back to the process's own): 141, quietly, when the output's reader is gone (``| head``), not a
    BrokenPipeError in Python's last flush at exit; else ``code``."""
    try:
        if sys.stdout is not None:
            sys.stdout.flush()
    except BrokenPipeError:
        _stdout_to_devnull()
        return 141
    return code


def main(argv: list[str] | None = None) -> int:
    """Run one command; errors and interrupts end it with one line and an exit status (2, 130, 143)."""
    _line_buffered()
    try:
        return _command(argv)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM in the instant its handlers are put back, the command done: a clean
        # run caught SIGTERM's handler raising inside the restoring signal.signal call, a traceback past every except
        if ended is None:
            raise
        return ended


def _line_buffered() -> None:
    """Results (stdout) written a line at a time, as the notes and progress (stderr) are: redirected to one log, stdout
    was block-buffered and its lines came after stderr's of later steps (a user's trial)."""
    try:
        sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):  # a stream that cannot (a test's capture, a closed one): as it is
        pass


def _command(argv: list[str] | None) -> int:
    """``main``'s command, its status noted in ``ended`` as it is had."""
    global ended
    ended = None
    with restored_handlers(), terminable() as terminated:  # handlers left as found (tests, notebooks call main())
        args, was = None, errors.wording
        try:
            parser = build_parser()
            try:
                given = sys.argv[1:] if argv is None else list(argv)
                # the command line as given rides along (``args.command_line``, no flag's dest): a results file
                # may record it
                args = parser.parse_args(given, namespace=argparse.Namespace(command_line=given))
            except SystemExit as exc:  # a usage error (one line, already printed), --help or --version: an exit code
                return _ended(exc.code if isinstance(exc.code, int) else 2)
            if not getattr(args, "func", None):
                parser.print_help()
                return _ended(2)
            # the library's parameters said as this command's flags (the table read only when a message needs it)
            errors.wording = lambda text: as_flags(text, flag_table(parser, args.command))
            os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
            module, name = args.func.split(":")
            return _ended(int(getattr(importlib.import_module(f".{module}", __name__), name)(args) or 0))
        except PromptSearchError as exc:
            assert args is not None  # the library's errors come from a command, after its arguments are read
            print(f"promptsearch {args.command}: error: {errors.worded(str(exc))}", file=sys.stderr)
            return _ended(2)
        except BrokenPipeError as exc:  # what reads the output stopped (``| head``): quiet, as a pipe's writer is by
            # SIGPIPE; results are saved before the summary is printed, and an interrupted search resumes
            if not _stdout_gone():  # another pipe (a worker's, a subprocess's): said, not hidden
                print(f"promptsearch {args.command if args else ''}: error: a pipe closed ({first_line(exc)}); run the "
                      "command again (a search resumes)", file=sys.stderr)
                return _ended(2)
            _stdout_to_devnull()
            return _ended(141)
        except KeyboardInterrupt:  # Ctrl-C (or SIGTERM), also while starting up
            ignore_interrupts()
            what = "terminated" if terminated else "interrupted"
            print(f"promptsearch {args.command}: {what}{_saved_hint(args)}" if args else f"promptsearch: {what}",
                  file=sys.stderr)
            return _ended(143 if terminated else 130)
        finally:
            errors.wording = was
