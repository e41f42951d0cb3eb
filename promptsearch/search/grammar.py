"""A template grammar: a format string with {slots}, each slot a list of options."""

from __future__ import annotations

import itertools
import math
import string
from dataclasses import dataclass

from ..errors import PromptSearchError, TemplateError
from ..library import load_json
from ..template import Template


@dataclass(frozen=True)
class Grammar:
    format: str
    slots: dict[str, tuple[str, ...]]
    source: str = ""

    @classmethod
    def load(cls, name_or_path: str = "grammar") -> "Grammar":
        where = name_or_path if name_or_path.endswith(".json") else f"templates/{name_or_path}.json"
        d = load_json(name_or_path)
        if not isinstance(d, dict) or not isinstance(d.get("format"), str) or not isinstance(d.get("slots"), dict):
            raise PromptSearchError(f"{where}: a grammar needs a 'format' string and a 'slots' object")
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(d["format"]) if f is not None]
        except ValueError as exc:
            raise PromptSearchError(f"{where}: bad format string ({exc})") from None
        slots = {}
        for n in names:
            opts = d["slots"].get(n)
            if not isinstance(opts, list) or not opts or not all(isinstance(o, str) for o in opts):
                raise PromptSearchError(f"{where}: slot '{n}' used in the format needs a non-empty list of strings")
            slots[n] = tuple(dict.fromkeys(opts))
        g = cls(d["format"], slots, where)
        try:
            g.render({n: o[0] for n, o in slots.items()})
        except TemplateError as exc:
            raise PromptSearchError(f"{where}: the format does not make a valid template: {exc}") from None
        return g

    def render(self, choice: dict[str, str]) -> str:
        return Template.parse(self.format.format(**choice)).text

    @property
    def size(self) -> int:
        return math.prod(len(o) for o in self.slots.values())

    def all_templates(self):
        names = list(self.slots)
        for combo in itertools.product(*(self.slots[n] for n in names)):
            yield self.render(dict(zip(names, combo)))
