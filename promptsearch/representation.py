"""A representation: one frozen value for what turns a sentence into a vector.

A ``Representation`` is a template (or a sentence-transformers prompt: ``query: [X]``) read out
one way — its [MASK] state (a causal LM's last-token state), at ``layer`` when not the last; or its
pass pooled by ``readout`` — or an ``ensemble`` of such members. It is built where text or a folder
enters (``Representation.parse``, ``Representation.of``,
``promptsearch.encoding.encoder.PromptEncoder.own_representation``) and passed down as an object;
``text`` writes the key a results file and the command line use (``T``, ``T @layer L``,
``P[X] @mean``, ``A + B``). This module alone reads and writes that text, and alone compares read-out names.

Pooled read-outs are sentence-transformers' ``Pooling`` modes (``cls``, ``max``, ``mean``,
``mean_sqrt_len_tokens``, ``weightedmean``, ``lasttoken``); ``sentence-MODE`` is the same mode with
``include_prompt=False`` (the prompt's tokens left out of the pooling). A representation whose template
is a prompt before ``[X]`` and nothing after it is *sentence-transformers' own*: it is computed through
the model folder's sentence-transformers modules exactly as ``SentenceTransformer.encode(sentences,
prompt=P)`` computes it (its tokenization of ``P + sentence`` as one string, its max length, its Pooling,
the folder's Dense and Normalize), and exports as such a folder (``Representation.st_pooling``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import TemplateError, did_you_mean
from .template import SENT, Template, quote

# sentence-transformers' Pooling modes, in its own order (``Pooling.POOLING_MODES``)
POOLING_MODES = ("cls", "max", "mean", "mean_sqrt_len_tokens", "weightedmean", "lasttoken")
# ``sentence-MODE``: include_prompt=False. The last token is the sentence's whatever the prompt, so
# lasttoken has one name.
_NO_PROMPT = "sentence-"
POOLED_READOUTS = ("mean", "sentence-mean", "cls", "sentence-cls", "max", "sentence-max", "mean_sqrt_len_tokens",
                   "sentence-mean_sqrt_len_tokens", "weightedmean", "sentence-weightedmean", "lasttoken")
READOUTS = ("mask",) + POOLED_READOUTS
# what a template with text after [X] can be pooled by (promptsearch's own rendering: one pass, three ways)
TEMPLATE_READOUTS = ("mean", "sentence-mean", "cls")
OWN = "[X] @mean"  # the model's own representation when nothing says otherwise: mean pooling, no prompt
_LAYER = " @layer "
_JOIN = " + "


def pooling_of(readout: str) -> tuple[str, bool]:
    """A pooled read-out as sentence-transformers' (``pooling_mode``, ``include_prompt``).

    :param readout: a pooled read-out name (``mean``, ``sentence-cls`` ...).
    :returns: ``(pooling_mode, include_prompt)``, e.g. ``("cls", False)`` for ``sentence-cls``.
    :raises promptsearch.TemplateError: for a name that is no pooled read-out."""
    if readout not in POOLED_READOUTS:
        raise TemplateError(f"unknown read-out {readout!r}{did_you_mean(readout, READOUTS)}; choose "
                            f"{', '.join(READOUTS)}")
    return (readout[len(_NO_PROMPT):], False) if readout.startswith(_NO_PROMPT) else (readout, True)


def readout_of(mode: str, include_prompt: bool = True) -> str:
    """The read-out name of sentence-transformers' Pooling(``mode``, ``include_prompt``).

    :param mode: one of sentence-transformers' pooling modes (``cls``, ``max``, ``mean`` ...).
    :param include_prompt: whether the prompt's tokens are pooled.
    :returns: the read-out name (``mean``, ``sentence-mean`` ...; ``lasttoken`` either way).
    :raises promptsearch.TemplateError: for an unknown mode."""
    if mode not in POOLING_MODES:
        raise TemplateError(f"pooling mode {mode!r} is not one of sentence-transformers' ({', '.join(POOLING_MODES)})")
    return mode if include_prompt or mode == "lasttoken" else _NO_PROMPT + mode


def check_readouts(names, where: str = "readouts=") -> list[str]:
    """Read-out names checked (a one-line error naming the first unknown one); "mask" is the [MASK] state."""
    bad = [x for x in names if x not in READOUTS]
    if bad:
        raise TemplateError(f"{where}: unknown read-out {bad[0]!r}{did_you_mean(bad[0], READOUTS)}; choose from "
                            f"{', '.join(READOUTS)}")
    return list(names)


def uses_first_token(readout: str | None) -> bool:
    """Whether a read-out reads the first token ([CLS]) of its input."""
    return readout == "cls"


def is_mask(readout: str | None) -> bool:
    """Whether a read-out name means the [MASK] (last-token) state."""
    return readout in (None, "mask")


@dataclass(frozen=True)
class Representation:
    """What a results entry, a candidate and an export are, as one object: a template read at its [MASK]
    (causal: last-token) state — at ``layer`` when not the last — or its pass pooled by ``readout``; or an
    ``ensemble`` of such members. ``parse`` reads the text form (``T``, ``T @layer L``, ``T @mean``,
    ``A + B``) and ``text`` writes it: the only code that does either.

    Build one with ``of``, ``parse`` or ``ensemble`` rather than by its fields, which are not checked.

    :param template: the template text (empty for an ensemble).
    :param layer: the layer a [MASK] state is read at (None: the last).
    :param readout: a pooled read-out (see ``POOLED_READOUTS``); None: the [MASK] state.
    :param members: an ensemble's members (then ``template`` is empty)."""

    template: str = ""
    layer: int | None = None
    readout: str | None = None  # a pooled read-out (see POOLED_READOUTS); None: the [MASK] state
    members: tuple["Representation", ...] = ()  # an ensemble's members (then ``template`` is empty)

    @classmethod
    def of(cls, template: str | Template, layer: int | None = None, readout: str | None = None) -> "Representation":
        """One template, parsed (a one-line error for a bad one), its read-out checked. A pooled read-out
        reads the last layer; a template with text after [X] is pooled only the ways promptsearch renders
        (mean, sentence-mean, cls); with no prompt, ``sentence-MODE`` is ``MODE`` (there is no prompt to
        leave out, as in sentence-transformers).

        :param template: the template, text or ``Template``.
        :param layer: the layer its [MASK] state is read at (None: the last; not with a pooled read-out).
        :param readout: None or ``"mask"`` for the [MASK] state, else a pooled read-out.
        :returns: the checked representation.
        :raises promptsearch.TemplateError: for a template that does not parse, an unknown read-out, a layer
            with a pooled read-out, a read-out this template cannot be pooled by, or a template holding `` + ``."""
        if is_mask(readout):
            t = Template.parse(template)
            if layer is not None:
                _no_join(t.text, f"{t.text}{_LAYER}{layer}")
            return cls(t.text, layer)
        assert readout is not None  # None is the [MASK] state, returned above
        pooling_of(readout)  # the name checked
        t = Template.parse(template)
        _no_join(t.text, f"{t.text} @{readout}")
        if layer is not None:
            raise TemplateError(f"{quote(t.text)} @{readout} reads the last layer's states; a layer is read at [MASK]")
        if t.readout != "last" or t.pieces[1]:  # [MASK] in it, or text after [X]: promptsearch's own rendering
            if readout not in TEMPLATE_READOUTS:
                raise TemplateError(f"{quote(t.text)} has {'a [MASK]' if t.readout != 'last' else 'text after [X]'}: "
                                    f"pooled by {readout} only as a prompt before [X] (sentence-transformers' prompt); "
                                    f"choose {', '.join(TEMPLATE_READOUTS)}, or put every word before [X]")
        elif not t.pieces[0] and readout.startswith(_NO_PROMPT):
            readout = readout[len(_NO_PROMPT):]
        return cls(t.text, None, readout)

    @classmethod
    def ensemble(cls, members) -> "Representation":
        """The representation of several members averaged (one member: that member).

        :param members: representations (each one template read one way).
        :returns: the ensemble, or the one member."""
        ms = tuple(members)
        return ms[0] if len(ms) == 1 else cls(members=ms)

    @classmethod
    def parse(cls, text: "str | Representation") -> "Representation":
        """The representation ``text`` names: one template (``T``, ``T @layer L``, ``T @mean``) or an
        ensemble's members joined by `` + `` (a template that parses as it is, naming no layer or read-out,
        is one member).

        :param text: the key text, or a representation (returned as it is).
        :returns: the representation.
        :raises promptsearch.TemplateError: for text that names no template, or a member that does not parse."""
        if isinstance(text, Representation):
            return text
        one = cls.split(text)
        if one.layer is None and one.readout is None:
            try:
                return cls(Template.parse(text).text)
            except TemplateError:
                if text.count(SENT) <= 1:
                    raise  # one template (or none): its own error says what is wrong with it
        members = []
        for m in text.split(_JOIN):
            if not m.strip():
                raise TemplateError(f"{quote(text)} has a dangling '+': an ensemble joins whole templates as 'A + B'")
            k = cls.split(m)
            members.append(cls.of(k.template, k.layer, k.readout))  # 'T @layer x' stays text, which the parser refuses
        return cls.ensemble(members)

    @classmethod
    def split(cls, text: str) -> "Representation":
        """One member's text with its layer or read-out suffix split off, the template left as written
        (a key already made by ``text``; ``of`` parses the template)."""
        for r in sorted(POOLED_READOUTS, key=len, reverse=True):
            if text.endswith(" @" + r):
                return cls(text[: -len(r) - 2], readout=r)
        m = re.fullmatch(r"(.*)" + re.escape(_LAYER) + r"(-?\d+)", text, flags=re.S)
        return cls(m.group(1), int(m.group(2))) if m else cls(text)

    @property
    def text(self) -> str:
        """The key as a results file and the command line write it."""
        if self.members:
            return _JOIN.join(m.text for m in self.members)
        if self.readout:
            return f"{self.template} @{self.readout}"
        return self.template if self.layer is None else f"{self.template}{_LAYER}{self.layer}"

    def __str__(self) -> str:
        return self.text

    @property
    def shown(self) -> str:
        """The key as a terminal line shows it: a prompt's newline or tab escaped (``\\n``), so one key is one line."""
        if any(c in self.text for c in "\n\r\t"):
            return self.text.encode("unicode_escape").decode("ascii")
        return self.text

    # ---- what it is ------------------------------------------------------------------------------
    @property
    def without_layer(self) -> "Representation":
        """This representation read at the last layer (a pooled read-out keeps its ``@readout``)."""
        return Representation(self.template, None, self.readout, self.members)

    @property
    def parts(self) -> tuple["Representation", ...]:
        """The members of an ensemble, or this representation alone."""
        return self.members or (self,)

    @property
    def first_template(self) -> str:
        """The (first member's) template, without layer or read-out."""
        return self.parts[0].template

    @property
    def names_readout_or_layer(self) -> bool:
        """Whether the text names more than a template (``T @mean``, ``T @layer L``): then it is a key."""
        return any(m.readout is not None or m.layer is not None for m in self.parts)

    @property
    def pooled(self) -> bool:
        """A template's pass pooled (not its [MASK] state, not an ensemble)."""
        return not self.members and self.readout is not None

    @property
    def prompt(self) -> str | None:
        """The sentence-transformers prompt this is (the text before [X], verbatim) when the template is a
        prompt and nothing else: no [MASK], no text after [X]. None otherwise."""
        if self.members or not self.template:
            return None
        t = Template.parse(self.template)
        return t.pieces[0] if t.readout == "last" and not t.pieces[1] else None

    @property
    def st_pooling(self) -> tuple[str, bool] | None:
        """sentence-transformers' (pooling_mode, include_prompt) when this is a prompt pooled by one of its
        modes (then computed, and exported, as sentence-transformers computes it); None otherwise."""
        if not self.pooled or self.prompt is None:
            return None
        assert self.readout is not None  # pooled
        return pooling_of(self.readout)

    def why_not_sentence_transformers(self) -> str | None:
        """None when sentence-transformers computes this representation (a prompt + a Pooling mode), else why
        it cannot, in a few words."""
        if self.members:
            return ("it is an ensemble: sentence-transformers runs one pass and one pooling, so it cannot average "
                    "several")
        if not self.pooled:
            return (f"it reads the [MASK] state{' at a layer' if self.layer is not None else ''}, which "
                    "sentence-transformers' Pooling cannot")
        if self.prompt is None:
            return "it has text after [X] (or a [MASK]): a sentence-transformers prompt goes before the sentence only"
        return None


def _no_join(template: str, key: str) -> None:
    """A template read at a layer or pooled is written ``T @layer L`` / ``T @mean``, and a key with a suffix is
    read as an ensemble's members joined by `` + ``: a template holding `` + `` would not read back as itself."""
    if _JOIN in template:
        raise TemplateError(f"{quote(template)} holds ' + ', which joins an ensemble's members in a key: {quote(key)} "
                            "would read as an ensemble; write the '+' without spaces around it, or as a word")


def pooled_ways(template: str | Template, readouts) -> list[Representation]:
    """``template`` pooled each of ``readouts`` ways that apply to it, without repeats: a prompt before [X] any of
    sentence-transformers' modes, a template with text after [X] (or a [MASK]) those promptsearch renders (mean,
    sentence-mean, cls).

    :param template: the template, text or ``Template``.
    :param readouts: pooled read-out names.
    :returns: the representations, in the order of ``readouts``.
    :raises promptsearch.TemplateError: for a template that does not parse or an unknown read-out."""
    t = Template.parse(template)
    prompt = t.readout == "last" and not t.pieces[1]
    return list(dict.fromkeys(Representation.of(t, readout=r) for r in readouts if prompt or r in TEMPLATE_READOUTS))


def ensemble_key(members) -> str:
    """The text of an ensemble of members (representations or their texts; one member: its own).

    :param members: representations or their key texts.
    :returns: the key text, members joined by `` + ``."""
    ms = [m.text if isinstance(m, Representation) else m for m in members]
    return ms[0] if len(ms) == 1 else _JOIN.join(ms)


def entry_key(template: str, layer: int | None = None) -> str:
    """The text of a template read at [MASK], at ``layer`` when not the last.

    :param template: the template text.
    :param layer: the read-out layer (None: the last).
    :returns: ``T`` or ``T @layer L``."""
    return Representation(template, layer).text


def template_of(key: str) -> str:
    """The (first) template of a key: itself, without its layer or read-out, or an ensemble's first member's."""
    return Representation.parse(key).first_template


def readout_key(template: str, readout: str | None) -> str:
    """The text of ``template`` read out by ``readout`` (``None``/``"mask"``: the template itself).

    :param template: the template text.
    :param readout: None, ``"mask"`` or a pooled read-out.
    :returns: ``T`` or ``T @readout``.
    :raises promptsearch.TemplateError: as ``Representation.of``."""
    return Representation.of(template, readout=readout).text


def is_key(text: str) -> bool:
    """Whether ``text`` names a read-out or a layer (``T @mean``, ``T @layer L``): a representation's key."""
    return Representation.split(text).names_readout_or_layer
