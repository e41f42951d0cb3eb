"""``python -m promptsearch`` and the ``promptsearch`` console script."""

import atexit
import os
import signal
import sys

INTERRUPTED = (130, 143)  # Ctrl-C, SIGTERM
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run() -> None:
    """Import the command line and run it. Ctrl-C while it is still importing (a cold start compiles
    every module) is the same one line as later. An interrupted command, its line said, leaves
    without Python's shutdown: CPython notes a KeyboardInterrupt that passed through code a library
    ran at import time and would then end the process by SIGINT (status -2 to a caller, not 130)
    however the command handled it; and finalizers of half-loaded libraries need not run."""
    atexit.register(_ignore_signals)  # registered before any library's: the last exit handler to run
    if signal.getsignal(signal.SIGINT) != signal.SIG_IGN:  # an ignored Ctrl-C (a script's background job) stays so
        signal.signal(signal.SIGINT, _on_ctrl_c)  # main restores the handler it finds: this one, not Python's
    try:
        from .cli import main  # lazy: start-up time (and a Ctrl-C while importing is caught)
    except KeyboardInterrupt:
        print("promptsearch: interrupted", file=sys.stderr)
        _leave(130)
    code = main()
    if code in INTERRUPTED:
        _leave(code)
    _done(code)
    sys.exit(code)


def _on_ctrl_c(signum, frame) -> None:
    """Ctrl-C: Python's own KeyboardInterrupt until the command has its status (``cli.ended``: its work done and
    said), then no interrupt of it: the instant before ``main`` returns leaves with that status."""
    ended = getattr(sys.modules.get(f"{__package__}.cli"), "ended", None)
    if ended is not None:
        _leave(ended)
    raise KeyboardInterrupt


def _done(code: int) -> None:
    """The command has finished and said so. Python's shutdown takes about a second and a half once a model was
    loaded: its libraries' exit handlers, then their modules freed. A Ctrl-C or SIGTERM in it must not turn the
    finished command into a KeyboardInterrupt's traceback in an exit handler or a death by SIGINT (status -2): until
    the exit handlers are done it ends the process at once with the command's own status (so a hung one can still
    be left), and while the modules are freed (Python's own handlers are gone by then) it is ignored
    (``_ignore_signals``, the last exit handler). Ctrl-C's handler already leaves so (``cli.ended`` is set); a
    SIGTERM is told to here."""
    if signal.getsignal(signal.SIGTERM) != signal.SIG_IGN:  # an ignored one stays ignored
        signal.signal(signal.SIGTERM, lambda signum, frame: _leave(code))


def _ignore_signals() -> None:
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _leave(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
