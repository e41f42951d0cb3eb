"""Prompt templates: parse and validate model-independently, render per tokenizer.

A template is plain text with exactly one ``[X]`` (the sentence) and exactly one
``[MASK]`` (the position whose hidden state is the sentence embedding)::

    This sentence : "[X]" means [MASK] .

Rendering tokenizes every literal piece of the template *separately* from the
sentence, so the template's token ids never depend on the sentence. That makes
truncation safe (only sentence tokens are dropped, the template and [MASK] always
survive) and makes template denoising exact (the template-only input holds the
very same template tokens).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .errors import TemplateError

SENT = "[X]"
MASK = "[MASK]"
_TOKEN_RE = re.compile(r"\[X\]|\[MASK\]")


def quote(text: str, n: int = 60) -> str:
    """``repr`` of a text for an error line, cut to about ``n`` characters."""
    return repr(text if len(text) <= n else text[: n - 1] + "…")


def from_reference_syntax(text: str) -> str:
    """kongds/Prompt-BERT's template syntax (``*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*``:
    ``_`` for a space, ``*sent_0*`` for the sentence, ``*mask*``) in this package's; other text as is."""
    if "*sent_0*" not in text:
        return text
    for ref, ours in (("*cls*", ""), ("*sep+*", ""), ("*mask*", MASK), ("*sent_0*", SENT), ("_", " ")):
        text = text.replace(ref, ours)
    return text


@dataclass(frozen=True)
class Template:
    """A parsed template. ``pieces`` are the literal texts between the slots."""

    text: str
    order: tuple[str, str]  # ("X", "MASK") or ("MASK", "X")
    pieces: tuple[str, str, str]  # before first slot, between slots, after second slot

    @classmethod
    def parse(cls, text: str | "Template") -> "Template":
        if isinstance(text, Template):
            return text
        if not isinstance(text, str):
            raise TemplateError(f"template must be a string, got {type(text).__name__}")
        return _parse(text)

    @classmethod
    def _from_text(cls, text: str) -> "Template":
        text = " ".join(from_reference_syntax(text).split())
        n_x, n_mask = text.count(SENT), text.count(MASK)
        if n_x != 1:
            raise TemplateError(
                f"template {quote(text)} has {n_x} [X] placeholders; write exactly one [X] where the sentence goes"
            )
        if n_mask != 1:
            raise TemplateError(
                f"template {quote(text)} has {n_mask} [MASK] tokens; write exactly one [MASK]"
            )
        parts = _TOKEN_RE.split(text)
        slots = tuple("X" if s == SENT else "MASK" for s in _TOKEN_RE.findall(text))
        return cls(text=text, order=slots, pieces=(parts[0], parts[1], parts[2]))

    def __str__(self) -> str:
        return self.text

    def fill(self, sentence: str) -> str:
        """The template as text with the sentence in place of [X] (for display)."""
        return self.text.replace(SENT, sentence)

    def render(self, tokenizer) -> "RenderedTemplate":
        return _render(self, tokenizer)


@dataclass(frozen=True)
class RenderedTemplate:
    """Token ids of a template for one tokenizer.

    ``before`` are the ids up to the sentence (leading special tokens included),
    ``after`` the ids from the sentence to the end (trailing specials included);
    ``mask_in_before``/``mask_index`` locate [MASK] within one of them.
    ``sentence_prefix_space``: whether the sentence follows whitespace in the
    template (matters for BPE/SentencePiece tokenizers, which encode it).
    """

    before: tuple[int, ...]
    after: tuple[int, ...]
    mask_in_before: bool
    mask_index: int
    sentence_prefix_space: bool
    n_lead: int = 0  # special tokens at the start of ``before``
    n_trail: int = 0  # special tokens at the end of ``after``

    def soft_slots(self) -> tuple[list[int], list[int]]:
        """Indices (into ``before`` and into ``after``) of the literal template tokens — every
        token but [X]'s, [MASK] and the special tokens. OptiPrompt makes these trainable."""
        b = [i for i in range(self.n_lead, len(self.before)) if not (self.mask_in_before and i == self.mask_index)]
        a = [i for i in range(len(self.after) - self.n_trail) if self.mask_in_before or i != self.mask_index]
        return b, a

    @property
    def n_soft(self) -> int:
        b, a = self.soft_slots()
        return len(b) + len(a)

    @property
    def n_template_tokens(self) -> int:
        return len(self.before) + len(self.after)

    def ids(self, sentence_ids: list[int]) -> tuple[list[int], int]:
        """Full input ids for one (already truncated) sentence and the [MASK] position."""
        ids = list(self.before) + list(sentence_ids) + list(self.after)
        pos = self.mask_index if self.mask_in_before else len(self.before) + len(sentence_ids) + self.mask_index
        return ids, pos


def special_tokens_around(tokenizer) -> tuple[list[int], list[int]]:
    """The special ids a tokenizer puts before and after a single sequence."""
    probe = tokenizer("a", add_special_tokens=False)["input_ids"]
    full = tokenizer("a", add_special_tokens=True)["input_ids"]
    for k in range(len(full) - len(probe) + 1):
        if full[k : k + len(probe)] == probe:
            return full[:k], full[k + len(probe) :]
    return [], []  # pragma: no cover - every known tokenizer keeps the text ids contiguous


def _piece_ids(tokenizer, text: str) -> list[int]:
    # Trailing whitespace only says that the next slot follows a space: the slot's
    # own tokenization encodes that (a BPE "Ġ" would otherwise become a lone token).
    text = text.rstrip()
    if not text:
        return []
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def _render(template: Template, tokenizer) -> RenderedTemplate:
    if tokenizer.mask_token_id is None:
        raise TemplateError("this tokenizer has no mask token, so it cannot fill a [MASK] template")
    lead, trail = special_tokens_around(tokenizer)
    p0, p1, p2 = template.pieces
    # Literal pieces keep their leading whitespace: BPE tokenizers encode it ("Ġmeans").
    # A piece right after [MASK] is tokenized with the space it has in the template.
    ids0, ids1, ids2 = _piece_ids(tokenizer, p0), _piece_ids(tokenizer, p1), _piece_ids(tokenizer, p2)
    mask = [tokenizer.mask_token_id]
    if template.order == ("X", "MASK"):
        before = lead + ids0
        after = ids1 + mask + ids2 + trail
        mask_in_before, mask_index = False, len(ids1)
        space = p0.endswith(" ")
    else:
        before = lead + ids0 + mask + ids1
        after = ids2 + trail
        mask_in_before, mask_index = True, len(lead) + len(ids0)
        space = p1.endswith(" ")
    return RenderedTemplate(tuple(before), tuple(after), mask_in_before, mask_index, space, len(lead), len(trail))


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Template:
    """Templates are immutable: a text is parsed once, however often it is passed as a string."""
    return Template._from_text(text)
