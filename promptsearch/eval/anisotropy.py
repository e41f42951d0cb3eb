"""Anisotropy: the mean cosine similarity of random sentence pairs."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from ..data import load_corpus
from ..encoding import PromptEncoder, Rep


def anisotropy(encoder: PromptEncoder, reps: Sequence[Rep], corpus: list[str] | None = None, n: int = 1000,
               seed: int = 0) -> dict[Rep, float]:
    """Mean cosine similarity of random sentence pairs (all pairs among ``n`` sampled sentences of
    ``corpus``; default: the Wikipedia sample of the encoder's ``data_dir``).

    :param encoder: the encoder.
    :param reps: the representations.
    :param corpus: the sentences to sample from (None: the Wikipedia sample).
    :param n: how many sentences are sampled.
    :param seed: the sample's random seed.
    :returns: each rep → the mean cosine over all pairs of distinct sampled sentences.
    :raises promptsearch.errors.DataError: where the Wikipedia sample is needed and cannot be read."""
    corpus = corpus if corpus is not None else load_corpus(data_dir=encoder.data_dir)
    rng = np.random.default_rng(seed)
    sample = [corpus[i] for i in rng.choice(len(corpus), size=min(n, len(corpus)), replace=False)]
    vecs = encoder.encode_reps(sample, reps)
    out = {}
    for r, v in vecs.items():
        u = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        sim = u @ u.T
        k = len(u)
        out[r] = float((sim.sum() - np.trace(sim)) / (k * (k - 1)))
    return out
