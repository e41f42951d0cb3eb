"""The score cache file: one JSON line per (model, template, variant, data set, settings) score.

Appending one line per score makes the cache safe to interrupt: a line cut by an interrupted
write is skipped (with one warning) when the file is read again. The keys are the
``Scorer``'s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import PromptSearchError, note

RECORD_START = b'{"key": '  # how every line append_scores writes begins


def load_scores(path: Path) -> dict[str, float] | None:
    """Read the cache; a file that is not one is refused before anything is appended to it, and
    damaged lines (cut by an interrupted write, even inside a UTF-8 character) are skipped with
    one warning. An unreadable file is said once: None (scoring goes on without the cache)."""
    out: dict[str, float] = {}
    damaged, first = 0, True
    try:
        with open(path, "rb") as f:
            for line in f:
                if not line.strip():
                    continue
                if first and not line.startswith(RECORD_START):
                    raise PromptSearchError(f"cache={path} is not a promptsearch score cache (its first line "
                                            "is no score record); give a new file name, or an existing cache")
                first = False
                try:
                    rec = json.loads(line.decode("utf-8"))
                    out[rec["key"]] = float(rec["spearman"])
                except (ValueError, KeyError, TypeError):  # UnicodeDecodeError is a ValueError
                    damaged += 1
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        raise PromptSearchError(f"cache={path} is a folder; give a file name such as scores.jsonl") from None
    except OSError as exc:
        unusable(path, exc)
        return None
    if damaged:
        print(f"warning: skipped {damaged} damaged line(s) of the score cache {path} (cut by an interrupted "
              "write); those templates are scored again", file=sys.stderr)
    return out


def append_scores(path: Path, records: dict[str, float], seconds: float) -> bool:
    """Append one line per score; False (said once) when the file cannot be written, e.g. a
    read-only home: scoring goes on, the scores are just not kept across runs."""
    lines = [json.dumps({"key": k, "spearman": s, "seconds": round(seconds, 3)},
                        ensure_ascii=False) for k, s in records.items()]
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a", encoding="utf-8") as f:
            f.write("\n".join(lines) + "\n")
    except OSError as exc:
        unusable(path, exc)
        return False
    return True


def unusable(path: Path, exc: OSError) -> None:
    note(f"warning: cannot use the score cache {path} ({exc.strerror or exc}); scores will not be "
         "kept across runs (pass cache=PATH in a writable folder)")
