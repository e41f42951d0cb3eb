"""A pytest plugin for runs that may be stopped before their summary (a lent GPU machine's time limit): each
failure's report is appended to $FAILURES_FILE the moment it arrives. Used by scripts/gpu-check.sh:
``PYTHONPATH=scripts python3 -m pytest -p failures_as_they_come ...``."""

import os

_config = None


def _path() -> str:
    return os.environ.get("FAILURES_FILE", "failures.txt")


def pytest_configure(config):
    global _config
    _config = config
    if not hasattr(config, "workerinput"):  # the controller starts the file afresh: one run's failures
        open(_path(), "w", encoding="utf-8").close()


def pytest_runtest_logreport(report):
    if not report.failed or hasattr(_config, "workerinput"):  # the controller alone writes (xdist)
        return
    with open(_path(), "a", encoding="utf-8") as f:
        f.write(f"===== {report.nodeid} ({report.when})\n{report.longreprtext}\n\n")
