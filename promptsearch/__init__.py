"""promptsearch: find prompt templates that turn a masked LM into a sentence encoder."""

from .encoding import PromptEncoder, PromptStates, rep
from .errors import PromptSearchError, TemplateError
from .template import Template

__version__ = "0.1.0"
__all__ = ["PromptEncoder", "PromptStates", "rep", "Template", "PromptSearchError", "TemplateError", "__version__"]
