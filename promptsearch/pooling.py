"""Sentence representations without a template: one small function per pooling.

Each pooling takes a :class:`Batch` (model outputs for a padded batch of plain
sentences, ``[CLS] sentence [SEP]``) and returns a ``(batch, hidden)`` float tensor.
``POOLINGS`` names them; the encoder asks each for what it needs (hidden states of
every layer, attention maps, or no forward pass at all).

The template representation ([MASK] hidden state, optionally denoised) lives in
:mod:`promptsearch.encoder` because it needs the template machinery.
"""

from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass
from typing import Callable

import torch

from .errors import PromptSearchError

# "first-last" averages the embedding-layer output (hidden_states[0]) and the last layer,
# as the PromptBERT / Ditto evaluation code does.
FIRST_LAYER = 0


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, T) 1 for real tokens
    token_mask: torch.Tensor  # (B, T) 1 for real non-special tokens
    last_hidden: torch.Tensor | None = None
    hidden_states: tuple | None = None
    attentions: tuple | None = None


@dataclass(frozen=True)
class Pooling:
    name: str
    fn: Callable  # (Batch, PoolingContext) -> Tensor
    forward: bool = True
    hidden_states: bool = False
    attentions: bool = False
    help: str = ""


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    m = mask.to(x.dtype).unsqueeze(-1)
    return (x * m).sum(1) / m.sum(1).clamp(min=1e-9)


def _cls(b: Batch, ctx) -> torch.Tensor:
    return b.last_hidden[:, 0]


def _mean(b: Batch, ctx) -> torch.Tensor:
    return masked_mean(b.last_hidden, b.attention_mask)


def _first_last(b: Batch, ctx) -> torch.Tensor:
    return masked_mean((b.hidden_states[FIRST_LAYER] + b.hidden_states[-1]) / 2, b.attention_mask)


def _static(b: Batch, ctx) -> torch.Tensor:
    emb = ctx.word_embeddings[b.input_ids].float()
    return masked_mean(emb, b.token_mask)


def _static_debiased(b: Batch, ctx) -> torch.Tensor:
    keep = b.token_mask.bool() & ~ctx.biased_token_mask()[b.input_ids]
    # A sentence made only of biased tokens keeps all of them rather than becoming a zero vector.
    empty = keep.sum(1) == 0
    keep[empty] = b.token_mask.bool()[empty]
    emb = ctx.word_embeddings[b.input_ids].float()
    return masked_mean(emb, keep)


def ditto_weights(attentions: tuple, layer: int, head: int, attention_mask: torch.Tensor) -> torch.Tensor:
    """Diagonal of head (layer, head)'s attention matrix: how much each token attends to itself."""
    a = attentions[layer][:, head]  # (B, T, T)
    return a.diagonal(dim1=-2, dim2=-1).float() * attention_mask.float()


def _ditto(b: Batch, ctx) -> torch.Tensor:
    layer, head = ctx.ditto_head_tuple
    w = ditto_weights(b.attentions, layer, head, b.attention_mask)
    fl = (b.hidden_states[FIRST_LAYER] + b.hidden_states[-1]).float() / 2
    return (fl * w.unsqueeze(-1)).sum(1) / w.sum(1, keepdim=True).clamp(min=1e-9)


POOLINGS: dict[str, Pooling] = {
    p.name: p
    for p in [
        Pooling("cls", _cls, help="last-layer [CLS] vector"),
        Pooling("mean", _mean, help="last-layer average (\"last avg\")"),
        Pooling("first-last", _first_last, hidden_states=True, help="average of embedding-layer and last-layer states"),
        Pooling("static", _static, forward=False, help="average of static input token embeddings"),
        Pooling(
            "static-debiased",
            _static_debiased,
            forward=False,
            help="static average without top-36 frequent tokens, subwords and punctuation",
        ),
        Pooling("ditto", _ditto, hidden_states=True, attentions=True, help="first-last weighted by one head's attention diagonal (--head L-H)"),
    ]
}


def get_pooling(name: str) -> Pooling:
    try:
        return POOLINGS[name]
    except KeyError:
        raise PromptSearchError(
            f"unknown pooling {name!r}; choose one of: {', '.join(POOLINGS)} (or give a --template for [MASK])"
        ) from None


def parse_head(text: str | tuple[int, int] | None, num_layers: int, num_heads: int) -> tuple[int, int]:
    """``"L-H"`` (0-based layer and head) → (L, H), checked against the model's shape."""
    if text is None:
        raise PromptSearchError("pooling 'ditto' needs --head L-H (run 'promptsearch ditto-search' to find the best)")
    if isinstance(text, tuple):
        layer, head = text
    else:
        try:
            layer, head = (int(x) for x in str(text).split("-"))
        except ValueError:
            raise PromptSearchError(f"--head {text!r} is not of the form L-H, e.g. 3-7") from None
    if not (0 <= layer < num_layers and 0 <= head < num_heads):
        raise PromptSearchError(
            f"--head {layer}-{head} is out of range: this model has layers 0-{num_layers - 1} and heads 0-{num_heads - 1}"
        )
    return layer, head


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
