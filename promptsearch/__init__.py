"""promptsearch: find prompt templates that turn a masked LM into a sentence encoder."""

from .errors import PromptSearchError, TemplateError
from .template import Template

__version__ = "0.1.0"
__all__ = ["PromptEncoder", "EncodeOptions", "PromptStates", "rep", "Template", "PromptSearchError", "TemplateError",
           "__version__"]


def __getattr__(name: str):
    """``PromptEncoder``, ``EncodeOptions``, ``PromptStates`` and ``rep`` load torch: imported on first use, so that the
    command line starts (and answers ``--help``, a bad flag or Ctrl-C) before torch is loaded."""
    if name in ("PromptEncoder", "EncodeOptions", "PromptStates", "rep"):
        from . import encoding  # lazy: start-up time (torch)

        return getattr(encoding, name)
    raise AttributeError(f"module 'promptsearch' has no attribute {name!r}")
