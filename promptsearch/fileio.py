"""Atomic writes, the only implementation: a crash never leaves a half-written file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable

from .errors import PromptSearchError


def atomic_replace(path: str | os.PathLike, write: Callable[[str], None], mode: int | None = None) -> Path:
    """Have ``write(tmp)`` write a temp file in ``path``'s folder, then ``os.replace`` it onto
    ``path``: a crash or Ctrl-C never leaves a half-written file. The file gets the usual
    permissions (``mode``, default 0666 less the umask)."""
    p = Path(path)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", dir=p.parent)
        os.close(fd)
        try:
            write(tmp)
            os.chmod(tmp, (0o666 & ~_UMASK) if mode is None else mode)  # mkstemp makes 0600
            os.replace(tmp, p)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError as exc:
        raise PromptSearchError(f"cannot write {p}: {exc.strerror or exc}; choose a writable output path") from None
    return p


def atomic_write(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    def write(tmp: str) -> None:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)

    atomic_replace(path, write)


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once, at import: os.umask is process-wide, so never toggle it later
