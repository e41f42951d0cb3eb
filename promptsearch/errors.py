"""User-facing errors: the CLI prints ``str(err)`` on one line and exits non-zero."""


class PromptSearchError(Exception):
    """An error caused by input the user can fix; the message says how."""


class TemplateError(PromptSearchError, ValueError):
    """A template string that cannot be used (no [X], zero or several [MASK] ...)."""


class DataError(PromptSearchError):
    """A missing data directory or a malformed data file."""


class ModelError(PromptSearchError):
    """A model id or path that cannot be loaded, or lacks what a command needs."""
