"""The Textual TUI: ``promptsearch tui --results best.json`` (or ``--storage URL --study-name S``)."""

from .app import PromptSearchApp

__all__ = ["PromptSearchApp"]
