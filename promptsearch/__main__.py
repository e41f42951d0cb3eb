"""``python -m promptsearch`` and the ``promptsearch`` console script."""

import _thread
import atexit
import contextlib
import os
import signal
import sys
import time

INTERRUPTED = (130, 143)  # Ctrl-C, SIGTERM
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run() -> None:
    """Import the command line and run it. Ctrl-C while it is still importing (a cold start compiles
    every module) is the same one line as later. An interrupted command, its line said, leaves
    without Python's shutdown: CPython notes a KeyboardInterrupt that passed through code a library
    ran at import time and would then end the process by SIGINT (status -2 to a caller, not 130)
    however the command handled it; and finalizers of half-loaded libraries need not run."""
    atexit.register(_ignore_signals)  # registered before any library's: the last exit handler to run
    handle_signals()
    try:
        from .cli import flushed, main  # lazy: start-up time (and a Ctrl-C while importing is caught)
    except KeyboardInterrupt:
        print("promptsearch: interrupted", file=sys.stderr)
        _leave(130)
    code = flushed(main())  # flushed after main: a signal then finds the command's status, not its handler
    if code in INTERRUPTED:
        _leave(code)
    sys.exit(code)


def handle_signals() -> None:
    """The command's handlers of Ctrl-C and SIGTERM (main restores the handlers it finds: these, not Python's; an
    ignored signal, a script's background job's Ctrl-C, stays ignored), and a Ctrl-C that Python would drop sent
    again (``_unraisable``)."""
    for sig, handler in ((signal.SIGINT, _on_ctrl_c), (signal.SIGTERM, _on_sigterm)):
        if signal.getsignal(sig) != signal.SIG_IGN:
            signal.signal(sig, handler)
    sys.unraisablehook = _unraisable


def _unraisable(unraisable) -> None:
    """Python's hook for an exception it cannot raise: one raised in a finalizer (a ``__del__`` the garbage
    collector ran) is printed, "Exception ignored in ...", and dropped. A Ctrl-C (or a SIGTERM, which a command
    raises as one) whose handler ran inside a finalizer would be lost so, and the command would run on to its end,
    status 0 (a user's trial: 1 Ctrl-C in 25, inside the ``regex`` module's ``__del__``). It is sent again, as
    Ctrl-C, from another thread a moment later (``_interrupt_soon``), once the finalizer has returned: the
    command's own code gets it (a SIGTERM's handler has noted it came, so the command still says it was
    terminated). Anything else is printed as Python prints it."""
    if isinstance(unraisable.exc_value, KeyboardInterrupt):
        # not from here: a signal tripped in this hook is handled in it, where Python drops it again; nor through
        # threading, whose locks the code the collector interrupted may hold: a bare thread, which never holds the
        # process up at its exit (one refused as Python shuts down leaves the command's own ending to it)
        with contextlib.suppress(RuntimeError):
            _thread.start_new_thread(_interrupt_soon, ())
        return
    sys.__unraisablehook__(unraisable)


def _interrupt_soon() -> None:
    """Ctrl-C again, once the finalizer that dropped it has returned."""
    time.sleep(0.01)
    _thread.interrupt_main()


def _ended() -> int | None:
    """The command's status once it has one (``cli.ended``: its work done and said), else None."""
    return getattr(sys.modules.get(f"{__package__}.cli"), "ended", None)


def _on_ctrl_c(signum, frame) -> None:
    """Ctrl-C: Python's own KeyboardInterrupt until the command has its status, then no interrupt of it: from the
    instant before ``main`` returns, through Python's shutdown (about a second and a half once a model was loaded:
    its libraries' exit handlers, then their modules freed), it leaves at once with that status, not a
    KeyboardInterrupt's traceback in an exit handler or a death by SIGINT (status -2); once the modules are being
    freed (Python's own handlers are gone by then) it is ignored (``_ignore_signals``, the last exit handler)."""
    ended = _ended()
    if ended is not None:
        _leave(ended)
    raise KeyboardInterrupt


def _on_sigterm(signum, frame) -> None:
    """SIGTERM outside a command's work (a command has its own handler while it runs, ``interrupts.terminable``):
    while it starts, its one line and 143; once it has its status, as Ctrl-C then (``_on_ctrl_c``)."""
    ended = _ended()
    if ended is None:
        print("promptsearch: terminated", file=sys.stderr)
    _leave(143 if ended is None else ended)


def _ignore_signals() -> None:
    for sig in SIGNALS:
        signal.signal(sig, signal.SIG_IGN)


def _leave(code: int) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
