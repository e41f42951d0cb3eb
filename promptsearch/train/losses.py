"""Contrastive losses (SimCSE / PromptBERT), cosine similarity over a temperature."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def cos_sim(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return F.normalize(a, dim=-1) @ F.normalize(b, dim=-1).T


def info_nce(z1: torch.Tensor, z2: torch.Tensor, temperature: float = 0.05) -> torch.Tensor:
    """Unsupervised: row i of z1 and z2 are two views of sentence i; the other rows are negatives."""
    logits = cos_sim(z1, z2) / temperature
    return F.cross_entropy(logits, torch.arange(len(z1), device=z1.device))


def supervised_nce(anchor: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor,
                   temperature: float = 0.05) -> torch.Tensor:
    """Supervised (NLI): the entailment is the positive; every other entailment and every
    contradiction (hard negatives) in the batch are negatives."""
    logits = torch.cat([cos_sim(anchor, pos), cos_sim(anchor, neg)], dim=1) / temperature
    return F.cross_entropy(logits, torch.arange(len(anchor), device=anchor.device))
