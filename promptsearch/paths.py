"""Where things live: the data folder (flag, env var, or ../shared/data), the score cache."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import DataError

ENV_VAR = "PROMPTSEARCH_DATA_DIR"
CACHE_ENV = "PROMPTSEARCH_CACHE"
STS_FOLDERS = ("STS12-en-test", "STS13-en-test", "STS14-en-test", "STS15-en-test", "STS16-en-test")


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/promptsearch`` (default ``~/.cache/promptsearch``)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "promptsearch"


def default_cache_path() -> Path:
    """The score cache: ``$PROMPTSEARCH_CACHE`` or ``<cache dir>/scores.jsonl``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    return cache_dir() / "scores.jsonl"


def _candidates() -> list[Path]:
    here = Path.cwd()
    return [here / "../shared/data", here / "data", here / "../data"]


def data_dirs(data_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(sts folder, train folder) from the flag, the env var or the defaults.

    The given folder may be the ``sts/`` folder itself or its parent holding ``sts/`` and
    ``train/``; ``train/`` is looked for beside ``sts/``.
    """
    given = data_dir or os.environ.get(ENV_VAR)
    if given:
        p = Path(given).expanduser()
        src = "--data-dir" if data_dir else ENV_VAR
        if not p.is_dir():
            raise DataError(f"data directory {p} ({src}) does not exist; point it at the STS data (e.g. ../shared/data/sts)")
        if (p / "sts").is_dir():
            return p / "sts", p / "train"
        if (p / "STSBenchmark").is_dir() or any((p / d).is_dir() for d in STS_FOLDERS):
            return p, p.parent / "train"
        raise DataError(f"data directory {p} ({src}) holds no STSBenchmark/ or sts/ folder; point it at the SentEval-layout STS data")
    for c in _candidates():
        if (c / "sts" / "STSBenchmark").is_dir():
            return (c / "sts").resolve(), (c / "train").resolve()
    raise DataError(f"no data directory: pass --data-dir or set {ENV_VAR} (e.g. ../shared/data/sts)")


def sts_dir(data_dir=None) -> Path:
    return data_dirs(data_dir)[0]


def train_dir(data_dir=None) -> Path:
    return data_dirs(data_dir)[1]
