"""Where data is read from and how loading shows itself: the options that travel together."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .user import PairFormat


@dataclass(frozen=True)
class DataOptions:
    """Where data is read from, in which columns, and whether loading shows progress.

    :param data_dir: the SentEval-layout folder (None: ``$PROMPTSEARCH_DATA_DIR`` or ../shared/data).
    :param fmt: the columns (and subset column) of a user's own pairs file (None: found by name).
    :param show_progress_bar: None shows bars on a terminal, False never."""

    data_dir: str | os.PathLike | None = None
    fmt: PairFormat | None = None
    show_progress_bar: bool | None = None
