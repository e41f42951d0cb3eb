"""Template libraries and grammars shipped in ``promptsearch/templates/`` (JSON)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from .errors import PromptSearchError
from .template import Template


def _read(name_or_path: str) -> dict:
    p = Path(name_or_path)
    try:
        if p.suffix == ".json" and p.exists():
            text = p.read_text(encoding="utf-8")
        else:
            text = resources.files("promptsearch.templates").joinpath(f"{name_or_path}.json").read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PromptSearchError(f"no template file {name_or_path!r}; give a .json path or a shipped name") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise PromptSearchError(f"{name_or_path}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}") from None


def paper_templates(model_type: str = "bert", compat: str = "promptsearch") -> list[str]:
    """The three PromptBERT templates for a model family (RoBERTa-likes use ' quotes); with
    ``compat="reference"`` spelled exactly as the authors' scripts spell them."""
    data = _read("paper")
    family = "roberta" if model_type in {"roberta", "xlm-roberta", "camembert", "longformer"} else "bert"
    if compat == "reference":
        family += "-reference"
    return [Template.parse(t).text for t in data[family]]


def load_json(name_or_path: str) -> dict:
    return _read(name_or_path)
