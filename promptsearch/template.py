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
_READOUT_KEY_RE = re.compile(r"(^|\s)@([a-z][a-z_-]*)(\s+\S+)?$")  # 'T @mean', 'T @layer 4': a key, not a template


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
    """A parsed template. ``pieces`` are the literal texts between the slots.

    Make one with ``parse``; the fields are what it found.

    :param text: the template as normalized (a [MASK] template's whitespace collapsed).
    :param order: the slots in order: ``("X", "MASK")``, ``("MASK", "X")``, or ``("X",)`` (no [MASK]: the last
        token is read, or the pass is pooled).
    :param pieces: the literal text before the first slot, between the slots, after the second."""

    text: str
    order: tuple[str, ...]  # ("X", "MASK"), ("MASK", "X"), or ("X",): no [MASK], the last token is read (causal LMs)
    pieces: tuple[str, str, str]  # before first slot, between slots, after second slot

    @classmethod
    def parse(cls, text: str | "Template") -> "Template":
        """Parse template text (kongds/Prompt-BERT's ``*sent_0*`` syntax is read too).

        :param text: a template with exactly one ``[X]`` and at most one ``[MASK]``, or a ``Template``
            (returned as it is).
        :returns: the parsed template.
        :raises promptsearch.TemplateError: for a non-string, a count of ``[X]`` other than one, several
            ``[MASK]``, a representation's key (``T @mean``) or a dangling ``+``."""
        if isinstance(text, Template):
            return text
        if not isinstance(text, str):
            raise TemplateError(f"template must be a string, got {type(text).__name__}")
        return _parse(text)

    @classmethod
    def _from_text(cls, text: str) -> "Template":
        text = from_reference_syntax(text)
        # A [MASK] template's pieces are tokenized apart, its whitespace collapsed. A template without one (a
        # sentence-transformers prompt, a causal LM's template) keeps its text as written: a prompt's newline or
        # double space is part of what sentence-transformers feeds (only trailing whitespace goes: nothing follows).
        text = " ".join(text.split()) if MASK in text else text.rstrip()
        if m := _READOUT_KEY_RE.search(text):  # 'T @mean', 'T @layer 4': a representation's key, not a template
            layer = bool(m.group(3))  # '@NAME N': a layer (the only key suffix with an argument)
            raise TemplateError(f"{quote(text)} names a read-out{' layer' if layer else ''} ('@{m.group(2)}'), as a "
                                f"representation's key does; give the template alone and "
                                f"{'layer=N' if layer else 'readout=' + m.group(2)}")
        if text.startswith("+ ") or text.endswith(" +") or text == "+":
            raise TemplateError(f"{quote(text)} has a dangling '+': an ensemble joins whole templates as 'A + B'")
        n_x, n_mask = text.count(SENT), text.count(MASK)
        if n_x != 1:
            raise TemplateError(
                f"template {quote(text)} has {n_x} [X] placeholders; write exactly one [X] where the sentence goes"
            )
        if n_mask > 1:
            raise TemplateError(
                f"template {quote(text)} has {n_mask} [MASK] tokens; write exactly one [MASK] (or none for a causal "
                "LM, which reads the last token)"
            )
        parts = _TOKEN_RE.split(text)
        slots = tuple("X" if s == SENT else "MASK" for s in _TOKEN_RE.findall(text))
        return cls(text=text, order=slots, pieces=(parts[0], parts[1], parts[2] if len(parts) > 2 else ""))

    @property
    def readout(self) -> str:
        """``"mask"``: the [MASK] state (masked LMs); ``"last"``: the last token's state (causal LMs)."""
        return "mask" if "MASK" in self.order else "last"

    def __str__(self) -> str:
        return self.text

    def fill(self, sentence: str) -> str:
        """The template as text with the sentence in place of [X] (for display).

        :param sentence: the sentence.
        :returns: the filled template."""
        return self.text.replace(SENT, sentence)

    def render(self, tokenizer, causal: bool = False, pooled: bool = False) -> "RenderedTemplate":
        """Token ids for ``tokenizer``; ``causal``: for a causal LM (no [MASK]; the last token is read);
        ``pooled``: for a pooled read-out (``POOLED_READOUTS``), where a template needs no [MASK].

        :param tokenizer: a Hugging Face tokenizer.
        :param causal: render for a causal LM.
        :param pooled: render for a pooled read-out.
        :returns: the template's token ids around the sentence.
        :raises promptsearch.TemplateError: for a [MASK] template the tokenizer has no mask token for, or (for a
            masked LM) a template without [MASK]."""
        if pooled and self.readout == "last":
            return _render_pooled(self, tokenizer)
        return _render(self, tokenizer, causal)


@dataclass(frozen=True)
class RenderedTemplate:
    """Token ids of a template for one tokenizer.

    ``before`` are the ids up to the sentence (leading special tokens included),
    ``after`` the ids from the sentence to the end (trailing specials included);
    ``mask_in_before``/``mask_index`` locate [MASK] within one of them.
    ``sentence_prefix_space``: whether the sentence follows whitespace in the
    template (matters for BPE/SentencePiece tokenizers, which encode it);
    ``sentence_starts_text``: whether no text comes before it (``[X]`` first: a
    SentencePiece tokenizer then marks its first word's start, as it does when the
    filled template is tokenized as one string).
    """

    before: tuple[int, ...]
    after: tuple[int, ...]
    mask_in_before: bool
    mask_index: int
    sentence_prefix_space: bool
    n_lead: int = 0  # special tokens at the start of ``before``
    n_trail: int = 0  # special tokens at the end of ``after``
    sentence_starts_text: bool = False

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


def _piece_ids(tokenizer, text: str, continues: bool = True) -> list[int]:
    """A literal piece's ids; ``continues``: it follows other text (not the start of the input)."""
    # Trailing whitespace only says that the next slot follows a space: the slot's
    # own tokenization encodes that (a BPE "Ġ" would otherwise become a lone token).
    text = text.rstrip()
    if not text:
        return []
    if not continues:
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    return tokens_in_context(tokenizer, [text])[0]


_ANCHOR = "a"


@functools.lru_cache(maxsize=64)
def _marks_word_starts(tokenizer) -> bool:
    """SentencePiece-style tokenizers (Llama, T5, XLM-R) put a word-start mark ("▁") on the first
    token of every text they are given, whether or not a space came before it."""
    toks = tokenizer.convert_ids_to_tokens(tokenizer(_ANCHOR, add_special_tokens=False)["input_ids"])
    return bool(toks) and toks[0].startswith("▁")


PROBE = 8  # texts tokenized both ways before the fast path is taken (see token_ids)


def token_ids(tokenizer, texts: list[str]) -> list[list[int]]:
    """``tokenizer(texts, add_special_tokens=False)["input_ids"]``, as lists. A fast tokenizer's
    Rust backend tokenizes the bulk in one ``encode_batch`` call, without transformers' per-text
    conversion to Python (which takes longer than the tokenizing itself on a few thousand short
    sentences). The first texts go through the tokenizer's own call, which also sets the backend
    as that call would (no truncation or padding); the backend is used only when it returns the
    same ids for them."""
    backend = getattr(tokenizer, "_tokenizer", None) if getattr(tokenizer, "is_fast", False) else None
    head = [list(x) for x in tokenizer(texts[:PROBE], add_special_tokens=False)["input_ids"]] if texts else []
    if len(texts) <= PROBE:
        return head
    if (backend is None or getattr(backend, "truncation", None) is not None
            or getattr(backend, "padding", None) is not None
            or [e.ids for e in backend.encode_batch(texts[:PROBE], add_special_tokens=False)] != head):
        return head + [list(x) for x in tokenizer(texts[PROBE:], add_special_tokens=False)["input_ids"]]
    return head + [e.ids for e in backend.encode_batch(texts[PROBE:], add_special_tokens=False)]


def tokens_in_context(tokenizer, texts: list[str]) -> list[list[int]]:
    """Token ids of texts that continue a text (no special tokens). A text that does not start
    with a space gets no word-start mark: for SentencePiece-style tokenizers it is tokenized after
    an anchor letter, whose tokens are then dropped (when they come out unmerged)."""
    plain = token_ids(tokenizer, texts)
    if not _marks_word_starts(tokenizer):
        return plain
    anchor = tokenizer(_ANCHOR, add_special_tokens=False)["input_ids"]
    out = []
    todo = [i for i, t in enumerate(texts) if t and not t[0].isspace()]
    anchored = token_ids(tokenizer, [_ANCHOR + texts[i] for i in todo]) if todo else []
    fixed = dict(zip(todo, anchored))
    for i, ids in enumerate(plain):
        a = fixed.get(i)
        out.append(list(a[len(anchor):]) if a is not None and list(a[: len(anchor)]) == anchor else list(ids))
    return out


CAUSAL_EXAMPLE = 'This sentence : "[X]" means in one word:"'


def _render(template: Template, tokenizer, causal: bool = False) -> RenderedTemplate:
    if template.readout == "last":
        if not causal:
            raise TemplateError(f"template {quote(template.text)} has 0 [MASK] tokens; write exactly one [MASK] "
                                "(a masked LM's sentence vector is its [MASK] state)")
        return _render_last(template, tokenizer)
    if tokenizer.mask_token_id is None:
        if causal:
            raise TemplateError(f"template {quote(template.text)} has a [MASK], but a causal LM has no mask token: "
                                f"drop [MASK], the last token's state is read (e.g. PromptEOL: {CAUSAL_EXAMPLE!r})")
        raise TemplateError("this tokenizer has no mask token, so it cannot fill a [MASK] template")
    lead, trail = special_tokens_around(tokenizer)
    p0, p1, p2 = template.pieces
    # Literal pieces keep their leading whitespace: BPE tokenizers encode it ("Ġmeans").
    # A piece right after [MASK] is tokenized with the space it has in the template.
    ids0, ids1, ids2 = _piece_ids(tokenizer, p0, continues=False), _piece_ids(tokenizer, p1), _piece_ids(tokenizer, p2)
    mask = [tokenizer.mask_token_id]
    if template.order == ("X", "MASK"):
        before = lead + ids0
        after = ids1 + mask + ids2 + trail
        mask_in_before, mask_index = False, len(ids1)
        space = p0.endswith(" ")
        starts = not p0.strip()
    else:
        before = lead + ids0 + mask + ids1
        after = ids2 + trail
        mask_in_before, mask_index = True, len(lead) + len(ids0)
        space, starts = p1.endswith(" "), False
    return RenderedTemplate(tuple(before), tuple(after), mask_in_before, mask_index, space, len(lead), len(trail),
                            starts)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Template:
    """Templates are immutable: a text is parsed once, however often it is passed as a string."""
    return Template._from_text(text)


def _render_pooled(template: Template, tokenizer) -> RenderedTemplate:
    """A template without [MASK] for a pooled read-out: the pieces around [X] (no token is read alone)."""
    lead, trail = special_tokens_around(tokenizer)
    p0, p1, _ = template.pieces
    ids0, ids1 = _piece_ids(tokenizer, p0, continues=False), _piece_ids(tokenizer, p1)
    return RenderedTemplate(tuple(lead + ids0), tuple(ids1 + trail), False, 0, p0.endswith(" "), len(lead), len(trail),
                            not p0.strip())


def _render_last(template: Template, tokenizer) -> RenderedTemplate:
    """A causal template: the readout is the template's last token (the one that would predict
    the next word), so there must be template text after [X]."""
    lead, trail = special_tokens_around(tokenizer)
    p0, p1, _ = template.pieces
    ids0, ids1 = _piece_ids(tokenizer, p0, continues=False), _piece_ids(tokenizer, p1)
    if not ids1:
        raise TemplateError(f"template {quote(template.text)} ends with [X]; a causal LM reads the last token, so put "
                            f"the words it should complete after [X] (e.g. {CAUSAL_EXAMPLE!r})")
    return RenderedTemplate(tuple(lead + ids0), tuple(ids1 + trail), False, len(ids1) - 1, p0.endswith(" "),
                            len(lead), len(trail), not p0.strip())
