"""A pytest plugin for a run whose processes do not exit after the last test (seen on a lent GPU machine): every
process (the controller and each xdist worker) writes $EXIT_REPORT_DIR/exit-PID.txt at the end of its session —
the threads still alive (non-daemon ones keep a process from exiting), its child processes, the last test it ran —
and dumps every thread's stack to $EXIT_REPORT_DIR/stacks-PID.txt on SIGUSR1. Used by scripts/gpu-check.sh exit."""

import faulthandler
import os
import signal
import threading

_dir = os.environ.get("EXIT_REPORT_DIR", ".")
_last = ""
_stacks = open(os.path.join(_dir, f"stacks-{os.getpid()}.txt"), "w")  # noqa: SIM115 (kept open for the handler)
faulthandler.register(signal.SIGUSR1, file=_stacks, all_threads=True)


def pytest_runtest_logstart(nodeid, location):
    global _last
    _last = nodeid


def pytest_unconfigure(config):
    me = os.getpid()
    kids = []
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                with open(f"/proc/{p}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == me:
                        with open(f"/proc/{p}/cmdline", "rb") as c:
                            cmd = c.read().replace(b"\0", b" ").decode(errors="replace")[:200]
                        kids.append(f"{p} {cmd}")
            except (OSError, ValueError, IndexError):
                pass
    with open(os.path.join(_dir, f"exit-{me}.txt"), "w") as f:
        f.write(f"last test: {_last}\n")
        for t in threading.enumerate():
            f.write(f"thread {t.name!r} daemon={t.daemon} alive={t.is_alive()}\n")
        for k in kids:
            f.write(f"child {k}\n")
