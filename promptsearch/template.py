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
# How a template's pass becomes a vector besides its [MASK] (or last-token) state: the mean over
# every token of the input, the mean over the sentence's tokens and the closing special tokens
# (the template's words left out: what sentence-transformers' ``include_prompt=False`` pools for a
# prefix prompt), or the first token's state ([CLS]).
POOLED_READOUTS = ("mean", "sentence-mean", "cls")
READOUTS = ("mask",) + POOLED_READOUTS
OWN = "[X] @mean"  # the model's own representation when it names no other: mean pooling, no template
_TOKEN_RE = re.compile(r"\[X\]|\[MASK\]")
_READOUT_KEY_RE = re.compile(r"(^|\s)@(" + "|".join(map(re.escape, POOLED_READOUTS)) + r")$")  # 'T @mean': a key


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
    order: tuple[str, ...]  # ("X", "MASK"), ("MASK", "X"), or ("X",): no [MASK], the last token is read (causal LMs)
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
        if re.search(r"(^|\s)@layer(\s|$)", text):
            raise TemplateError(f"{quote(text)} names a read-out layer ('@layer'), as a results file's keys do; give the "
                                "template alone and the layer with layer=N")
        if m := _READOUT_KEY_RE.search(text):
            raise TemplateError(f"{quote(text)} names a read-out ('@{m.group(2)}'), as a results file's keys do; give the "
                                f"template alone and readout={m.group(2)}")
        if text.startswith("+ ") or text.endswith(" +") or text == "+":
            raise TemplateError(f"{quote(text)} has a dangling '+': an ensemble joins whole templates as 'A + B'")
        n_x, n_mask = text.count(SENT), text.count(MASK)
        if n_x != 1:
            raise TemplateError(
                f"template {quote(text)} has {n_x} [X] placeholders; write exactly one [X] where the sentence goes"
            )
        if n_mask > 1:
            raise TemplateError(
                f"template {quote(text)} has {n_mask} [MASK] tokens; write exactly one [MASK] (or none for a causal LM, "
                "which reads the last token)"
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
        """The template as text with the sentence in place of [X] (for display)."""
        return self.text.replace(SENT, sentence)

    def render(self, tokenizer, causal: bool = False, pooled: bool = False) -> "RenderedTemplate":
        """Token ids for ``tokenizer``; ``causal``: for a causal LM (no [MASK]; the last token is read);
        ``pooled``: for a pooled read-out (:data:`POOLED_READOUTS`), where a template needs no [MASK]."""
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
    if (backend is None or getattr(backend, "truncation", None) is not None or getattr(backend, "padding", None) is not None
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
            raise TemplateError(f"template {quote(template.text)} has a [MASK], but a causal LM has no mask token: drop "
                                f"[MASK], the last token's state is read (e.g. PromptEOL: {CAUSAL_EXAMPLE!r})")
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


def _render_pooled(template: Template, tokenizer) -> RenderedTemplate:
    """A template without [MASK] for a pooled read-out: the pieces around [X] (no token is read alone)."""
    lead, trail = special_tokens_around(tokenizer)
    p0, p1, _ = template.pieces
    ids0, ids1 = _piece_ids(tokenizer, p0, continues=False), _piece_ids(tokenizer, p1)
    return RenderedTemplate(tuple(lead + ids0), tuple(ids1 + trail), False, 0, p0.endswith(" "), len(lead), len(trail))


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
                            len(lead), len(trail))


# ---- results-entry keys: a template, its read-out, its layer, an ensemble --------------------------------
@dataclass(frozen=True)
class EntryKey:
    """What a results entry (a score, a candidate) is, as an object: a template read at its [MASK]
    (causal: last-token) state — at ``layer`` when not the last — or its pass pooled by ``readout``;
    or an ``ensemble`` of such members. :meth:`parse` reads the text form (``T``, ``T @layer L``,
    ``T @mean``, ``A + B``) and :attr:`text` writes it: the only code that does either."""

    template: str = ""
    layer: int | None = None
    readout: str | None = None  # a pooled read-out (mean, sentence-mean, cls); None: the [MASK] state
    members: tuple["EntryKey", ...] = ()  # an ensemble's members (then ``template`` is empty)

    @classmethod
    def of(cls, template: str, layer: int | None = None, readout: str | None = None) -> "EntryKey":
        """A one-template key, its template parsed (a one-line error for a bad one), its read-out checked."""
        if readout == "mask":
            readout = None
        if readout is not None and readout not in POOLED_READOUTS:
            raise TemplateError(f"unknown read-out {readout!r}; choose {', '.join(READOUTS)}")
        return cls(Template.parse(template).text, layer, readout)

    @classmethod
    def ensemble(cls, members) -> "EntryKey":
        """The key of several members (one member: that member's key)."""
        ms = tuple(members)
        return ms[0] if len(ms) == 1 else cls(members=ms)

    @classmethod
    def parse(cls, text: str) -> "EntryKey":
        """The key ``text`` names: one template (``T``, ``T @layer L``, ``T @mean``) or an ensemble's members
        joined by `` + `` (a template that parses as it is, naming no layer or read-out, is one member)."""
        one = cls.split(text)
        if one.layer is None and one.readout is None:
            try:
                return cls(Template.parse(text).text)
            except TemplateError:
                if text.count(SENT) <= 1:
                    raise  # one template (or none): its own error says what is wrong with it
        members = []
        for m in text.split(" + "):
            if not m.strip():
                raise TemplateError(f"{quote(text)} has a dangling '+': an ensemble joins whole templates as 'A + B'")
            k = cls.split(m.strip())
            members.append(cls.of(k.template, k.layer, k.readout))  # 'T @layer x' stays text, which the parser refuses
        return cls.ensemble(members)

    @classmethod
    def split(cls, text: str) -> "EntryKey":
        """One member's text with its layer or read-out suffix split off, the template left as written
        (a key already made by :attr:`text`; :meth:`of` parses the template)."""
        for r in POOLED_READOUTS:
            if text.endswith(" @" + r):
                return cls(text[: -len(r) - 2], readout=r)
        m = re.fullmatch(r"(.*) @layer (-?\d+)", text, flags=re.S)
        return cls(m.group(1), int(m.group(2))) if m else cls(text)

    @property
    def text(self) -> str:
        """The key as a results file and the command line write it."""
        if self.members:
            return " + ".join(m.text for m in self.members)
        if self.readout:
            return f"{self.template} @{self.readout}"
        return self.template if self.layer is None else f"{self.template} @layer {self.layer}"

    def __str__(self) -> str:
        return self.text

    @property
    def without_layer(self) -> "EntryKey":
        """This key read at the last layer (a pooled read-out keeps its ``@readout``)."""
        return EntryKey(self.template, None, self.readout, self.members)

    @property
    def parts(self) -> tuple["EntryKey", ...]:
        """The members of an ensemble, or this key alone."""
        return self.members or (self,)

    @property
    def first_template(self) -> str:
        """The (first member's) template, without layer or read-out."""
        return self.parts[0].template

    @property
    def names_readout_or_layer(self) -> bool:
        """Whether the text names more than a template (``T @mean``, ``T @layer L``): then it is a key."""
        return any(m.readout is not None or m.layer is not None for m in self.parts)


def entry_key(template: str, layer: int | None = None) -> str:
    """How a results file keys an entry: the template, with its read-out layer when it has one."""
    return EntryKey(template, layer).text


def ensemble_key(members) -> str:
    """How a results file keys an ensemble: its members' keys (or labels) joined by `` + `` (one member: its own)."""
    ms = [m.text if isinstance(m, EntryKey) else m for m in members]
    return ms[0] if len(ms) == 1 else " + ".join(ms)


def template_of(key: str) -> str:
    """The (first) template of an entry key: itself, without its layer or read-out, or an ensemble's first member's."""
    return EntryKey.parse(key).first_template


def readout_key(template: str, readout: str | None) -> str:
    """The key of ``template`` read out by ``readout`` (``None``/``"mask"``: the template itself)."""
    return EntryKey.of(template, readout=readout).text


def is_key(text: str) -> bool:
    """Whether ``text`` is a results-entry key naming a read-out or a layer (``T @mean``, ``T @layer L``)."""
    return EntryKey.split(text).names_readout_or_layer
