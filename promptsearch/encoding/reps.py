"""Sentence representations: one small frozen object per representation, resolved once.

A template representation reads the last hidden state at [MASK] (``MaskState``, Eq. 2,
optionally denoised) or averages the MLM head's top-k static embeddings (``TopKStatic``,
Eq. 3). A pooling baseline reads a plain ``[CLS] sentence [SEP]`` pass: each one says which
outputs it needs (every layer's hidden states, attention maps, or no forward pass at all) and
pools a ``Batch`` into ``(batch, hidden)``. Each object carries its own parameters —
Ditto its (layer, head), static-debiased its token ids — so an encoder holds no per-call
representation state. ``rep`` builds one from the words the CLI and ``encode`` take.
"""

from __future__ import annotations

import functools
import string
from collections import Counter
from dataclasses import dataclass
from typing import ClassVar, TypeVar, cast

import numpy as np
import torch

from ..errors import PromptSearchError
from ..library import resolve_key, resolve_template
from ..representation import POOLED_READOUTS, READOUTS, Representation, ensemble_key, entry_key, is_key, is_mask
from ..template import Template

# "first-last" averages the embedding-layer output (hidden_states[0]) and the last layer,
# as the PromptBERT / Ditto evaluation code does.
FIRST_LAYER = 0

R = TypeVar("R", bound="Rep")


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T) 1 for real tokens
    token_mask: torch.Tensor  # (B, T) 1 for real non-special tokens
    last_hidden: torch.Tensor | None = None
    hidden_states: tuple | None = None
    attentions: tuple | None = None


class Rep:
    """A sentence representation. Subclasses are frozen dataclasses (hashable: results are keyed by them).

    Each one says how it is computed: ``prompt`` (read from a template pass, ``from_states``)
    or a plain-sentence pass (``Pooling.pool``); ``resolve`` fills in what it needs from
    an encoder (a checked head, token ids); ``fields`` is its JSON form."""

    prompt: ClassVar[bool] = False  # computed from a template's [MASK] states

    @property
    def label(self) -> str:  # pragma: no cover - every subclass names itself
        raise NotImplementedError

    def resolve(self: R, encoder) -> R:
        """This representation ready for ``encoder``'s model (itself unless it needs something)."""
        return self

    def fields(self) -> dict:  # pragma: no cover - every subclass says
        """{template, denoise, pooling, head} as results files write them (None where unused)."""
        raise NotImplementedError

    def parts(self) -> tuple["Rep", ...]:
        """The representations this one is made of (itself, unless it combines several)."""
        return (self,)

    def combine(self, vectors: list[np.ndarray]) -> np.ndarray:
        """This representation from its parts' vectors (in ``parts`` order)."""
        return vectors[0]


@dataclass(frozen=True)
class MaskState(Rep):
    """The last hidden state at [MASK] (PromptBERT Eq. 2), minus the template bias when ``denoise``;
    ``layer`` reads another layer instead (as ``hidden_states`` counts: 0 the embeddings).

    :param template: a template with ``[X]`` and ``[MASK]`` (its text is normalized by ``Template.parse``).
    :param denoise: subtract the template bias.
    :param layer: the read-out layer (default: the last).
    :raises promptsearch.TemplateError: for a template that does not parse."""

    template: str
    denoise: bool = False
    layer: int | None = None
    prompt: ClassVar[bool] = True

    def __post_init__(self):
        object.__setattr__(self, "template", Template.parse(self.template).text)

    @property
    def label(self) -> str:
        return entry_key(self.template, self.layer) + (" (denoised)" if self.denoise else "")

    pooling: ClassVar[str | None] = None

    def resolve(self, encoder) -> "MaskState":
        """Itself, once its layer is known to exist in ``encoder``'s model (a one-line error if not)."""
        if self.layer is not None:
            encoder.prompt.layer_index(self.layer)
        return self

    def fields(self) -> dict:
        f = {"template": self.template, "denoise": self.denoise, "pooling": self.pooling, "head": None}
        return f if self.layer is None else {**f, "layer": self.layer}

    def from_states(self, raw: np.ndarray, denoised: np.ndarray, encoder) -> np.ndarray:
        """The vectors from the template pass's raw and denoised [MASK] states."""
        return denoised if self.denoise else raw


@dataclass(frozen=True)
class TopKStatic(MaskState):
    """Eq. 3: the MLM head's top-k tokens' static embeddings weighted by their probabilities.

    :param k: how many of the head's most probable tokens are averaged (the other fields as ``MaskState``'s)."""

    k: int = 200
    pooling: ClassVar[str | None] = "topk-static"

    @property
    def label(self) -> str:
        return entry_key(self.template, self.layer) + f" [avg top-{self.k}]" + (" (denoised)" if self.denoise else "")

    @torch.inference_mode()
    def from_states(self, raw, denoised, encoder, batch_size: int = 256) -> np.ndarray:
        """Eq. 3: Σ_{v in top-k} P(v | h) · e_v / Σ P over the MLM's top-k tokens, for [MASK] states h."""
        states = super().from_states(raw, denoised, encoder)
        emb = encoder.word_embeddings.float()
        out = []
        for start in range(0, len(states), batch_size):
            p = encoder.word_logits(states[start : start + batch_size]).softmax(-1)
            v, ix = p.topk(min(self.k, p.shape[-1]), dim=-1)
            w = v / v.sum(-1, keepdim=True)
            out.append(torch.einsum("bk,bkd->bd", w, emb[ix]).cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, emb.shape[1]), np.float32)


@dataclass(frozen=True)
class PromptPool(Rep):
    """A template's pass pooled instead of read at [MASK].

    A prompt before [X] and nothing after it (``query: [X]``, ``[X]``) is pooled as sentence-transformers
    pools it (``pooled``): ``P + sentence`` tokenized as one string, the model's sentence-transformers
    stack with its Pooling set to ``readout`` (``mean``, ``cls``, ``max`` …; ``sentence-MODE``:
    ``include_prompt=False``), its Dense and Normalize after it — ``SentenceTransformer.encode(sentences,
    prompt=P)``'s vectors. Any other template (text after [X], a [MASK]) is rendered by promptsearch, its
    pieces tokenized apart: ``"mean"`` averages every token, ``"sentence-mean"`` the sentence's tokens and the
    closing special tokens, ``"cls"`` reads the first token. Sentences are fed as they are, no period added.

    :param template: the prompt or template, with ``[X]``.
    :param readout: a pooled read-out (``mean``, ``sentence-mean``, ``cls``, ``max`` ...).
    :raises promptsearch.PromptSearchError: for an unknown read-out, or one this template cannot be pooled by."""

    template: str
    readout: str = "mean"
    prompt: ClassVar[bool] = False

    def __post_init__(self):
        k = Representation.of(self.template, readout=self.readout)  # checked, and sentence-X with no prompt is X
        if k.readout is None:
            raise PromptSearchError(f"unknown read-out {self.readout!r}; choose {', '.join(READOUTS)}")
        object.__setattr__(self, "template", k.template)
        object.__setattr__(self, "readout", k.readout)

    @property
    def representation(self) -> Representation:
        return Representation(self.template, None, self.readout)

    @property
    def st_prompt(self) -> str | None:
        """The sentence-transformers prompt this pools (computed as sentence-transformers does), or None (a
        template promptsearch renders itself)."""
        return self.representation.prompt

    @property
    def key(self) -> str:
        return self.representation.text

    @property
    def label(self) -> str:
        return self.representation.shown

    def resolve(self, encoder) -> "PromptPool":
        encoder.check_readout(self)
        return self

    def fields(self) -> dict:
        return {"template": self.template, "denoise": False, "pooling": self.readout, "head": None}


@dataclass(frozen=True)
class Ensemble(Rep):
    """Several template representations averaged: the mean of their L2-normalized vectors
    (Contrastive Prompting's prompt averaging; a search grows one with ``--ensemble K``).

    :param members: two or more ``MaskState`` or ``PromptPool`` representations.
    :raises promptsearch.PromptSearchError: for fewer than two members, or a member of another kind."""

    members: tuple[MaskState | PromptPool, ...]

    def __post_init__(self):
        if len(self.members) < 2 or not all(isinstance(m, (MaskState, PromptPool)) for m in self.members):
            raise PromptSearchError("an ensemble averages two or more templates' read-outs")

    @property
    def label(self) -> str:
        return ensemble_key(m.label for m in self.members)

    @property
    def template(self) -> str:
        return ensemble_key(m.template for m in self.members)

    def resolve(self, encoder) -> "Ensemble":
        return Ensemble(tuple(m.resolve(encoder) for m in self.members))

    def fields(self) -> dict:
        return {"template": [getattr(m, "key", m.template) for m in self.members],
                "denoise": [getattr(m, "denoise", False) for m in self.members],
                "pooling": "ensemble", "head": None, **({"layer": [getattr(m, "layer", None) for m in self.members]}
                                                         if any(getattr(m, "layer", None) is not None
                                                                for m in self.members) else {})}

    def parts(self) -> tuple[Rep, ...]:
        return self.members

    def combine(self, vectors: list[np.ndarray]) -> np.ndarray:
        return np.mean([normalized(v) for v in vectors], axis=0).astype(np.float32)


def normalized(v: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (a zero row stays zero)."""
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(x.dtype).unsqueeze(-1)
    return (x * m).sum(1) / m.sum(1).clamp(min=1e-9)


class Pooling(Rep):
    """A baseline over a plain sentence pass. ``pool(batch, word_embeddings)`` → (B, hidden)."""

    name: ClassVar[str] = ""
    help: ClassVar[str] = ""
    forward: ClassVar[bool] = True  # needs the model's forward pass
    hidden_states: ClassVar[bool] = False  # needs every layer's states
    attentions: ClassVar[bool] = False  # needs attention maps

    @property
    def label(self) -> str:
        return self.name

    def fields(self) -> dict:
        return {"template": None, "denoise": False, "pooling": self.name, "head": None}

    def pool(self, b: Batch, word_embeddings: torch.Tensor) -> torch.Tensor:  # pragma: no cover
        raise NotImplementedError


@dataclass(frozen=True)
class Cls(Pooling):
    name: ClassVar[str] = "cls"
    help: ClassVar[str] = "last-layer [CLS] vector"

    def pool(self, b, word_embeddings):
        return b.last_hidden[:, 0]


@dataclass(frozen=True)
class Mean(Pooling):
    name: ClassVar[str] = "mean"
    help: ClassVar[str] = 'last-layer average ("last avg")'

    def pool(self, b, word_embeddings):
        return masked_mean(b.last_hidden, b.attention_mask)


@dataclass(frozen=True)
class FirstLast(Pooling):
    name: ClassVar[str] = "first-last"
    help: ClassVar[str] = "average of embedding-layer and last-layer states"
    hidden_states: ClassVar[bool] = True

    def pool(self, b, word_embeddings):
        return masked_mean((b.hidden_states[FIRST_LAYER] + b.hidden_states[-1]) / 2, b.attention_mask)


@dataclass(frozen=True)
class Static(Pooling):
    name: ClassVar[str] = "static"
    help: ClassVar[str] = "average of static input token embeddings"
    forward: ClassVar[bool] = False

    def pool(self, b, word_embeddings):
        return masked_mean(word_embeddings[b.input_ids].float(), b.token_mask)


@dataclass(frozen=True)
class StaticDebiased(Pooling):
    """Static embeddings without the biased tokens (Appendix A.1). ``token_ids`` is the set to
    drop; ``None`` until resolved against a tokenizer and corpus (``biased_token_ids``)."""

    token_ids: frozenset[int] | None = None
    name: ClassVar[str] = "static-debiased"
    help: ClassVar[str] = "static average without top-36 frequent tokens, subwords and punctuation"
    forward: ClassVar[bool] = False

    def resolve(self, encoder) -> "StaticDebiased":
        return self if self.token_ids is not None else StaticDebiased(encoder.biased_token_ids())

    def pool(self, b, word_embeddings):
        if self.token_ids is None:
            raise PromptSearchError("static-debiased needs its token ids: resolve it with the encoder first")
        biased = _id_mask(self.token_ids, word_embeddings.shape[0], b.input_ids.device)
        keep = b.token_mask.bool() & ~biased[b.input_ids]
        # A sentence made only of biased tokens keeps all of them rather than becoming a zero vector.
        empty = keep.sum(1) == 0
        keep[empty] = b.token_mask.bool()[empty]
        return masked_mean(word_embeddings[b.input_ids].float(), keep)


@functools.lru_cache(maxsize=8)
def _id_mask(token_ids: frozenset[int], vocab_size: int, device) -> torch.Tensor:
    mask = torch.zeros(vocab_size, dtype=torch.bool)
    mask[[i for i in token_ids if i < vocab_size]] = True
    return mask.to(device)


def ditto_weights(attentions: tuple, layer: int, head: int, attention_mask: torch.Tensor) -> torch.Tensor:
    """Diagonal of head (layer, head)'s attention matrix: how much each token attends to itself."""
    a = attentions[layer][:, head]  # (B, T, T)
    return a.diagonal(dim1=-2, dim2=-1).float() * attention_mask.float()


@dataclass(frozen=True)
class Ditto(Pooling):
    """First-last states weighted by the diagonal of attention head ``head`` of layer ``layer`` (0-based)."""

    layer: int
    head: int
    name: ClassVar[str] = "ditto"
    help: ClassVar[str] = "first-last weighted by one head's attention diagonal (head=L-H)"
    hidden_states: ClassVar[bool] = True
    attentions: ClassVar[bool] = True

    @property
    def label(self) -> str:
        return f"ditto (head {self.layer}-{self.head})"

    def check(self, num_layers: int, num_heads: int) -> "Ditto":
        if not (0 <= self.layer < num_layers and 0 <= self.head < num_heads):
            raise PromptSearchError(f"head={self.layer}-{self.head} is out of range: this model has layers "
                                    f"0-{num_layers - 1} and heads 0-{num_heads - 1}")
        return self

    def resolve(self, encoder) -> "Ditto":
        return self.check(encoder.model.num_layers, encoder.model.num_heads)

    def fields(self) -> dict:
        return {**super().fields(), "head": f"{self.layer}-{self.head}"}

    def pool(self, b, word_embeddings):
        w = ditto_weights(b.attentions, self.layer, self.head, b.attention_mask)
        fl = (b.hidden_states[FIRST_LAYER] + b.hidden_states[-1]).float() / 2
        return (fl * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clamp(min=1e-9)


POOLINGS: dict[str, type[Pooling]] = {p.name: p for p in (Cls, Mean, FirstLast, Static, StaticDebiased, Ditto)}
TEMPLATE_POOLINGS = (None, "mask", "topk-static") + POOLED_READOUTS


def parse_head(text: str | tuple[int, int] | None) -> tuple[int, int]:
    """``"L-H"`` (0-based layer and head) → (L, H)."""
    if text is None:
        raise PromptSearchError("pooling 'ditto' needs head=L-H (run 'promptsearch ditto-search' to find the best)")
    if isinstance(text, tuple):
        return int(text[0]), int(text[1])
    try:
        layer, head = (int(x) for x in str(text).split("-"))
    except ValueError:
        raise PromptSearchError(f"head={text!r} is not of the form L-H, e.g. 3-7") from None
    return layer, head


def rep(template: str | Template | None = None, denoise: bool = False, pooling: str | None = None,
        head: str | tuple[int, int] | None = None, top_k: int = 200, layer: int | None = None) -> Rep:
    """The representation the words name: a template ([MASK] state, or ``pooling="topk-static"``
    for Eq. 3), or a pooling baseline (``head="L-H"`` for Ditto). One-line errors for the rest.

    :param template: a template (text or ``Template``); None for a pooling baseline.
    :param denoise: subtract the template bias (a [MASK] state only).
    :param pooling: with a template: None (its [MASK] state), ``"topk-static"`` or a pooled read-out
        (``mean``, ``sentence-mean``, ``cls`` ...); without: ``cls``, ``mean`` (the default), ``first-last``,
        ``static``, ``static-debiased`` or ``ditto``.
    :param head: Ditto's attention head, ``"L-H"`` or ``(L, H)`` (0-based).
    :param top_k: the number of tokens Eq. 3 averages.
    :param layer: the read-out layer of a [MASK] state (default: the last).
    :returns: a ``Rep`` to pass to ``PromptEncoder.encode(rep=...)`` or ``encode_reps``.
    :raises promptsearch.PromptSearchError: for settings that do not go together, an unknown pooling, or a
        missing or malformed Ditto head."""
    if template is not None:
        if pooling not in TEMPLATE_POOLINGS:
            raise PromptSearchError(f"pooling {pooling!r} does not take a template; with template=use "
                                    f"{' or '.join(p for p in TEMPLATE_POOLINGS if p)}, or drop template=")
        text = Template.parse(template).text
        if pooling in POOLED_READOUTS:
            if denoise:
                raise PromptSearchError(f"denoise=True subtracts a template's [MASK] state; the {pooling} read-out has "
                                        "no template bias to subtract: drop denoise=")
            if layer is not None:
                raise PromptSearchError(f"layer= reads a template's [MASK] state at another layer; the {pooling} "
                                        "read-out reads the last layer: drop layer=")
            return PromptPool(text, pooling)
        if pooling == "topk-static":
            return TopKStatic(text, bool(denoise), layer, k=top_k)
        return MaskState(text, bool(denoise), layer)
    if layer is not None:
        raise PromptSearchError("layer= reads a template's [MASK] state at another layer; give a template=")
    if denoise:
        raise PromptSearchError("denoise=True needs a template= (it subtracts the template's own [MASK] state)")
    name = pooling or "mean"
    if name not in POOLINGS:
        raise PromptSearchError(
            f"unknown pooling {name!r}; choose one of: {', '.join(POOLINGS)} (or give a template= for [MASK])")
    if name == "ditto":
        return Ditto(*parse_head(head))
    return POOLINGS[name]()


def rep_from_key(key: "str | Template | Representation", denoise: bool = False) -> Rep:
    """How the encoder computes a representation (given as the object, or as its key text): a template's [MASK]
    (last-token) state, minus its bias when ``denoise``, at its layer; a prompt's pass pooled (never denoised); the
    ensemble of several. The one conversion from a ``Representation``.

    :param key: a ``Representation``, its key text (``T``, ``T @layer L``, ``P[X] @mean``, ``A + B``) or a
        ``Template``.
    :param denoise: subtract the template bias from [MASK] states (pooled read-outs are never denoised).
    :returns: a ``MaskState``, ``PromptPool`` or ``Ensemble``.
    :raises promptsearch.PromptSearchError: for key text that does not parse."""
    k = key if isinstance(key, Representation) else Representation.parse(key.text if isinstance(key, Template) else key)
    members = [PromptPool(m.template, m.readout) if m.readout else MaskState(m.template, bool(denoise), m.layer)
               for m in k.parts]
    return members[0] if len(members) == 1 else Ensemble(tuple(members))


def rep_from_options(template: str | Template | list | None = None, denoise: bool = False, pooling: str | None = None,
                     head: str | None = None, layer: int | None = None, readout: str | None = None) -> Rep:
    """``rep`` from a command's options: ``--template`` with ``--pooling`` mask/topk-static, or a
    pooling (``ditto`` with ``--head``), with the one-line errors for the combinations that clash.
    Several templates (a list) are their ``Ensemble``."""
    if isinstance(template, list) and len(template) > 1:
        members = (rep_from_options(t, denoise, pooling, head, layer, readout) for t in template)
        return Ensemble(tuple(cast("MaskState | PromptPool", m) for m in members))  # Ensemble checks each
    if isinstance(template, list):
        template = template[0] if template else None
    if not is_mask(readout):
        if not template or pooling:
            raise PromptSearchError("readout= says how a template's pass becomes a vector: give a template= (and no "
                                    "pooling=)")
        return rep(template, denoise, readout, layer=layer)
    if template and pooling not in (None, "mask", "topk-static"):
        raise PromptSearchError("give either template= or pooling=, not both (with a template, pooling= takes only "
                                "mask or topk-static; readout= says how a template's pass is pooled)")
    if not template and pooling == "ditto" and not head:
        raise PromptSearchError("pooling=ditto needs head=L-H (find the best with 'promptsearch ditto-search')")
    return rep(template or None, denoise, None if pooling == "mask" else pooling,
               head=head if pooling == "ditto" else None, layer=layer)


def rep_named(template: list[str] | None = None, denoise: bool = False, pooling: str | None = None,
              head: str | None = None, layer: int | None = None, readout: str | None = None,
              demos: str | None = None) -> Rep | None:
    """The representation a command's options name, as ``eval`` reads them: templates (shipped names, text, or
    results-entry keys such as ``T @mean`` / ``A + B``, which name their read-out and layer themselves) with a
    read-out, layer and denoising, or a baseline pooling; None when nothing is named (the model's own
    representation). The one place the combinations that clash are refused.

    :param template: the templates given (several: their ensemble), or None.
    :param denoise: subtract the template bias from [MASK] states.
    :param pooling: a baseline pooling, or with a template ``mask`` / ``topk-static``.
    :param head: Ditto's attention head ``L-H`` (with ``pooling="ditto"``).
    :param layer: the layer a [MASK] state is read at (None: the last).
    :param readout: how a template's pass becomes a vector (None: its [MASK] state).
    :param demos: a demonstrations file put before each template.
    :returns: the representation, or None for the model's own.
    :raises promptsearch.PromptSearchError: for options that clash (one line naming them)."""
    if readout is not None and not template:
        raise PromptSearchError("readout= says how a template's pass becomes a vector: give a template= (and no "
                                "pooling=)")
    if template and any(is_key(t) for t in template):  # results-entry keys ('T @layer L', 'T @mean'): one parser
        if readout is not None or layer is not None or pooling:
            raise PromptSearchError("a results-entry key names its read-out (and layer) itself: drop readout=, "
                                    "layer= and pooling=, or give the template alone")
        return rep_from_key(ensemble_key(resolve_key(t, demos) if is_key(t) else resolve_template(t, demos).text
                                         for t in template), denoise)
    if template or pooling or denoise or layer is not None:
        return rep_from_options(template and [resolve_template(t, demos) for t in template], denoise, pooling, head,
                                layer, readout)
    return None


# ---- biased tokens for static-debiased (PromptBERT Appendix A.1) ----------------------------

PUNCT = set(string.punctuation) | {"``", "''", "–", "—", "…", "’", "‘", "“", "”"}


def is_subword(token: str) -> bool:
    """WordPiece continuation (``##ing``); BPE/SentencePiece tokens are words when they start a word."""
    return token.startswith("##")


def is_punctuation(token: str) -> bool:
    t = token.lstrip("Ġ▁#")
    return bool(t) and all(ch in PUNCT for ch in t)


def biased_token_ids(tokenizer, corpus: list[str], top_k: int = 36) -> set[int]:
    """Top-k frequent tokens on ``corpus`` plus every subword and punctuation token id."""
    counts: Counter = Counter()
    for ids in tokenizer(corpus, add_special_tokens=False)["input_ids"]:
        counts.update(ids)
    biased = {i for i, _ in counts.most_common(top_k)}
    vocab = tokenizer.get_vocab()
    bpe_like = any(t.startswith(("Ġ", "▁")) for t in list(vocab)[:5000])
    for tok, i in vocab.items():
        if is_punctuation(tok) or is_subword(tok) or (bpe_like and not tok.startswith(("Ġ", "▁")) and tok.isalpha()):
            biased.add(i)
    return biased
