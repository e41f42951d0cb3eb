"""Ditto (Chen et al. 2023): grid-search the attention head whose diagonal best weights
first-last hidden states, scored by STS-B dev Spearman."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from ..data import DEV_SET, DataOptions, load_task
from ..encoding import PromptEncoder
from ..encoding.reps import FIRST_LAYER, Batch, Pooling
from .sts import STSEvaluator


@dataclass(frozen=True)
class EveryDittoHead(Pooling):
    """Every attention head's Ditto vector from one pass, flattened: (B, layers · heads · hidden)."""

    name: ClassVar[str] = "ditto (every head)"
    hidden_states: ClassVar[bool] = True
    attentions: ClassVar[bool] = True

    def pool(self, b: Batch, word_embeddings) -> torch.Tensor:
        assert b.attentions is not None and b.hidden_states is not None  # asked for (the class variables)
        w = torch.stack([a.diagonal(dim1=-2, dim2=-1) for a in b.attentions], 1).float()  # (B, L, H, T)
        w = w * b.attention_mask[:, None, None, :].float()
        fl = (b.hidden_states[FIRST_LAYER] + b.hidden_states[-1]).float() / 2  # (B, T, D)
        pooled = torch.einsum("blht,btd->blhd", w, fl) / w.sum(-1, keepdim=True).clamp(min=1e-9)
        return pooled.reshape(len(w), -1)


def search_heads(encoder: PromptEncoder, task: str = DEV_SET,
                 data: DataOptions = DataOptions()) -> list[tuple[int, int, float]]:
    """[(layer, head, spearman)] for every head, best first — one forward pass for all heads."""
    ev = STSEvaluator(load_task(task, data.data_dir, data.fmt))
    sentences = ev.sentences
    L, H = encoder.model.num_layers, encoder.model.num_heads

    every = EveryDittoHead()
    flat = ev.encode(encoder, [every], show_progress_bar=data.show_progress_bar)[every]
    per_head = flat.reshape(len(sentences), L, H, -1)
    scores = [(layer, head, ev.spearman(per_head[:, layer, head])) for layer in range(L) for head in range(H)]
    return sorted(scores, key=lambda x: -x[2])


def format_heads(scores: list[tuple[int, int, float]], top: int = 10) -> str:
    lines = ["head   STS-B dev"] + [f"{layer}-{h:<4} {s:8.2f}" for layer, h, s in scores[:top]]
    grid = {}
    for layer, h, s in scores:
        grid[(layer, h)] = s
    L = max(layer for layer, _, _ in scores) + 1
    H = max(h for _, h, _ in scores) + 1
    lines += ["", "layer\\head " + " ".join(f"{h:>6}" for h in range(H))]
    lines += [f"{layer:>10} " + " ".join(f"{grid[(layer, h)]:6.1f}" for h in range(H)) for layer in range(L)]
    return "\n".join(lines)


def best_head_line(scores: list[tuple[int, int, float]]) -> str:
    layer, h, s = scores[0]
    return f"\nbest head: {layer}-{h} (STS-B dev {s:.2f}); use it with pooling=ditto head={layer}-{h}"
