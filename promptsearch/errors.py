"""User-facing errors: the CLI prints ``str(err)`` on one line and exits non-zero."""

import re
import sys
from typing import Callable


class PromptSearchError(Exception):
    """An error caused by input the user can fix; the message says how."""


class TemplateError(PromptSearchError, ValueError):
    """A template string that cannot be used (no [X], zero or several [MASK] ...)."""


class DataError(PromptSearchError):
    """A missing data directory or a malformed data file."""


class ModelError(PromptSearchError):
    """A model id or path that cannot be loaded, or lacks what a command needs."""


def first_line(exc: BaseException, limit: int | None = None) -> str:
    """The first line of an exception's message (its type name if it has none), cut to ``limit``
    characters: what a one-line error quotes of a library's error."""
    text = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def did_you_mean(word: str, choices) -> str:
    """`` (did you mean 'X'?)`` for the one of ``choices`` closest to a mistyped ``word`` (difflib's ratio 0.75 or
    more, as a typo of a letter or two scores), else empty: what an "unknown NAME" error adds before its choices."""
    import difflib  # lazy: only an error needs it

    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def difference(mine, theirs, name: str = "") -> str:
    """The most specific place where two JSON-like records differ, for a one-line error: ``"PATH: A here, B there"``
    (a list's items named by their ``"name"`` when both sides name them alike, ``sets[beir].fingerprint``; a key one
    side lacks is ``missing``), not two whole records; ``name`` is the records' own (the path's start). Empty when
    they are equal."""
    missing = _Missing()
    found: list[tuple[int, str]] = []  # (depth, what)

    def walk(a, b, at: str, depth: int) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in dict.fromkeys([*a, *b]):
                walk(a.get(k, missing), b.get(k, missing), f"{at}.{k}" if at else str(k), depth + 1)
        elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b)):
                named = isinstance(x, dict) and isinstance(y, dict) and x.get("name") == y.get("name") is not None
                walk(x, y, f"{at}[{x['name'] if named else i}]", depth + 1)
        elif a != b:
            found.append((depth, f"{at or 'the record'}: {a!r} here, {b!r} there"))

    walk(mine, theirs, name, 0)
    return max(found, key=lambda f: f[0])[1] if found else ""


class _Missing:
    """A key one record lacks, as ``difference`` says it."""

    def __repr__(self) -> str:
        return "missing"


# How a note is worded for whoever runs the library: the command line sets this to say parameters as its flags.
wording: Callable[[str], str] | None = None


def without_password(text: str) -> str:
    """A URL (or an argument holding one) with its password as ``***``: ``user:PASSWORD@`` (a slash in it too, as
    SQLAlchemy reads it) and a ``password=`` query parameter (libpq's form, which SQLAlchemy's own hiding keeps)."""
    text = re.sub(r"(://[^/@:]*:)[^@]*@", r"\1***@", text)
    return re.sub(r"([?&]password=)[^&]*", r"\1***", text, flags=re.IGNORECASE)


def note(message: str) -> None:
    """A line for the user that is not an error (stderr), worded by ``wording`` when set."""
    print(worded(message), file=sys.stderr)


def worded(message: str) -> str:
    """``message`` as ``note`` would word it."""
    return wording(message) if wording else message
