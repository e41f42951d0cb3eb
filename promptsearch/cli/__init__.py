"""The ``promptsearch`` command line: a thin layer over the library.

:mod:`.parser` holds every subcommand's flags; a command's module (:mod:`.evaluate`, :mod:`.search`,
:mod:`.train`) loads when it runs, so ``--help`` and usage errors answer at once. This module reads the
arguments, runs the command and turns errors and interrupts into one line."""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from ..errors import PromptSearchError
from ..interrupts import ignore_interrupts, restored_handlers, terminable
from ..template import quote
from .parser import build_parser


def _check_utf8(argv: list[str]) -> None:
    """Arguments from the shell arrive with undecodable bytes as lone surrogates: say so."""
    for a in argv:
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            shown = a.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise PromptSearchError(f"argument {quote(shown, 80)} is not valid UTF-8; pass text in UTF-8") from None


def main(argv: list[str] | None = None) -> int:
    with restored_handlers():  # main() called from Python (tests, a notebook) leaves the handlers as it found them
        try:
            return _main(argv)
        except KeyboardInterrupt:  # Ctrl-C before a command started (start-up, reading the arguments)
            ignore_interrupts()
            print("promptsearch: interrupted", file=sys.stderr)
            return 130


def _saved_hint(args) -> str:
    """What an interrupted command kept, and how to go on."""
    out = getattr(args, "out", None)
    if args.command == "train-head":
        return f"; masked states are cached and finished epochs saved in {out}, re-run the same command to resume"
    if args.command in ("optiprompt", "finetune"):
        saved = out and any(Path(out).rglob("*-checkpoint.pt"))
        return f"; the last checkpoint is in {out}, re-run the same command to resume" if saved else ""
    return f"; scored templates are saved in {out}, re-run the same command to resume" if out and Path(out).is_file() else ""


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        _check_utf8(argv)
    except PromptSearchError as exc:
        print(f"promptsearch: error: {exc}", file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (one line, already printed), --help or --version: an exit code
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    with terminable() as terminated:
        try:
            module, name = args.func.split(":")
            return int(getattr(importlib.import_module(f".{module}", __name__), name)(args) or 0)
        except PromptSearchError as exc:
            print(f"promptsearch {args.command}: error: {exc}", file=sys.stderr)
            return 2
        except KeyboardInterrupt:
            ignore_interrupts()
            print(f"promptsearch {args.command}: {'terminated' if terminated else 'interrupted'}{_saved_hint(args)}",
                  file=sys.stderr)
            return 143 if terminated else 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
