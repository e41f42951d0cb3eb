"""Scoring on growing random subsets of the pairs, several templates together (Optuna's pruning rungs).

Each rung encodes, for every template still in, only the sentences new to it — the templates that
need the same sentences in one ``template_states`` call — and gives each its Spearman on the
rung's pairs. The last rung is the full set: scored, recorded and cached as ``Scorer.score``
does. With a screening precision other than the reference one, the partial rungs run in it and
the full set is ``Scorer.score``'s.
"""

from __future__ import annotations

import time
from typing import Iterator, cast

import numpy as np

from ..template import Template
from .scorer import Score, Scorer


class Progressive:
    """Templates scored rung by rung on one fixed random order of ``scorer``'s pairs (``seed``)."""

    def __init__(self, scorer: Scorer, seed: int = 0):
        self.scorer = scorer
        self.n = len(scorer.gold)
        self.order = np.random.default_rng(seed).permutation(self.n)
        self.enc = scorer.screening_encoder
        self.reuse = self.enc is scorer.encoder  # the rungs' vectors are the reference's: the full set completes them
        self.vecs: dict[str, dict[bool, np.ndarray | None]] = {}
        self.done: dict[str, np.ndarray] = {}
        self.seconds: dict[str, float] = {}  # each template's share of the encoding time so far

    def _encode(self, templates: list[str], pairs: np.ndarray) -> None:
        for t in templates:
            if t not in self.vecs:
                self.vecs[t] = {dn: None for dn in ((False, True) if self.reuse else (self.scorer.denoise,))}
                self.done[t] = np.zeros(len(self.scorer.sentences), bool)
                self.seconds[t] = 0.0
        t0 = time.perf_counter()
        self.scorer.encode_pairs(self.enc, templates, pairs, {t: self.vecs[t] for t in templates},
                                 {t: self.done[t] for t in templates})
        for t in templates:
            self.seconds[t] += (time.perf_counter() - t0) / len(templates)

    def rung(self, templates: list[str | Template], pairs: int) -> dict[str, float]:
        """Each template's objective on the first ``pairs`` pairs of the order (fewer than all)."""
        ts = list(dict.fromkeys(Template.parse(t).text for t in templates))
        sub = self.order[:pairs]
        self._encode(ts, sub)
        out = {}
        for t in ts:
            v = self.vecs[t][self.scorer.denoise]
            assert v is not None  # encoded above
            out[t] = self.scorer.evaluator.spearman(v, sub)
        return out

    def drop(self, template: str | Template) -> None:
        """A template out of the race (pruned): its vectors freed, its time counted as scoring time."""
        t = Template.parse(template).text
        self.vecs.pop(t, None)
        self.done.pop(t, None)
        self.scorer.count_time(self.seconds.pop(t, 0.0))

    def finish(self, templates: list[str | Template]) -> dict[str, Score]:
        """Each template's full-set score (recorded and cached as ``Scorer.score`` does)."""
        ts = list(dict.fromkeys(Template.parse(t).text for t in templates))
        sc = self.scorer
        if not self.reuse:
            for t in ts:
                sc.count_time(self.seconds.pop(t, 0.0))
            return dict(zip(ts, sc.score(ts)))
        self._encode(ts, self.order)
        out = {}
        for t in ts:
            self.done.pop(t)
            # every variant filled: encoded over the whole order just above
            out[t] = sc.record(t, cast("dict[bool, np.ndarray]", self.vecs.pop(t)), self.seconds.pop(t))
        return out


def score_progressive(scorer: Scorer, template: str | Template, rungs: list[int],
                      seed: int = 0) -> Iterator[tuple[int, float]]:
    """One template's Spearman on growing random subsets of the pairs: yields (n_pairs, score), the
    last the full set's (cached like ``Scorer.score``)."""
    run = Progressive(scorer, seed)
    t = Template.parse(template).text
    for r in sorted({min(r, run.n) for r in rungs} - {run.n}):
        yield r, run.rung([t], r)[t]
    yield run.n, run.finish([t])[t].spearman
