"""Results files: atomic writes (a crash never leaves a half-written file)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import PromptSearchError


def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` to ``path`` via a temp file in the same folder and ``os.replace``."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, p)
    except OSError as exc:
        raise PromptSearchError(f"cannot write {p}: {exc.strerror or exc}; choose a writable --out path") from None
