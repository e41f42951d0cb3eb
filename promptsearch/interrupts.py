"""A long job and the signals that end it: SIGTERM ends it like Ctrl-C (a KeyboardInterrupt, so
what is saved can be said), the handlers found are restored afterwards (an ignored SIGINT left
behind would be inherited by every child process), and once a job is ending a second Ctrl-C
cannot break its goodbye into a traceback."""

from __future__ import annotations

import contextlib
import signal

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def ignore_interrupts() -> None:
    """The job is ending: further Ctrl-C / SIGTERM are ignored (until the handlers are restored)."""
    for sig in SIGNALS:
        with contextlib.suppress(ValueError):  # not the main thread
            signal.signal(sig, signal.SIG_IGN)


@contextlib.contextmanager
def restored_handlers():
    """Leave SIGINT and SIGTERM as they were found, whatever the job did to them."""
    before = {sig: signal.getsignal(sig) for sig in SIGNALS}
    try:
        yield
    finally:
        for sig, handler in before.items():
            with contextlib.suppress(ValueError):  # not the main thread
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)


@contextlib.contextmanager
def terminable():
    """SIGTERM raises KeyboardInterrupt inside; yields a list that holds the signal once one came
    (empty: a Ctrl-C, or none). Outside the main thread signals are left alone."""
    terminated: list[int] = []

    def on_sigterm(signum, frame):
        terminated.append(signum)
        raise KeyboardInterrupt

    try:
        previous = signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread (e.g. called from a worker)
        previous = None
    try:
        yield terminated
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
