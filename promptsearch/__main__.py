"""``python -m promptsearch`` and the ``promptsearch`` console script."""

import os
import sys

INTERRUPTED = (130, 143)  # Ctrl-C, SIGTERM


def run() -> None:
    """Import the command line and run it. Ctrl-C while it is still importing (a cold start compiles
    every module) is the same one line as later. An interrupted command, its line said, leaves
    without Python's shutdown: CPython notes a KeyboardInterrupt that passed through code a library
    ran at import time and would then end the process by SIGINT (status -2 to a caller, not 130)
    however the command handled it; and finalizers of half-loaded libraries need not run."""
    try:
        from .cli import main  # lazy: start-up time (and a Ctrl-C while importing is caught)
    except KeyboardInterrupt:
        print("promptsearch: interrupted", file=sys.stderr)
        _leave(130)
    code = main()
    if code in INTERRUPTED:
        _leave(code)
    sys.exit(code)


def _leave(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
