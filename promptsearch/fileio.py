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
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, p)
    except OSError as exc:
        raise PromptSearchError(f"cannot write {p}: {exc.strerror or exc}; choose a writable --out path") from None


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: os.umask is process-wide, so never toggle it later
