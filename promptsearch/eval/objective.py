"""A search objective over one or several dev sets: ``--dataset stsb-dev,sick-trial --objective mean``.

``Objective`` looks like one ``STSEvaluator`` to the scorer, racing and the
pruner — one list of distinct sentences, pairs indexed into it, gold scores — and adds ``groups``
(which set each pair belongs to). Its number is the mean (or the min) of each set's Spearman ×100.
Over a single set it is that set's evaluator exactly: the same sentences in the same order, the
same pairs, bit-identical numbers.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from scipy.stats import rankdata

from ..encoding import PromptEncoder, Rep
from ..errors import PromptSearchError
from .sts import IndexedPairs, STSEvaluator, spearman100

OBJECTIVES = ("mean", "min")
DEFAULT_OBJECTIVE = "mean"


def rule(objective: str):
    """The one rule of an objective over several sets' scores (along the first axis): ``np.mean`` or ``np.min``."""
    return np.mean if objective == "mean" else np.min


def combine(values: Iterable[float], objective: str = "mean") -> float:
    """The objective of per-set scores; sets without a defined score (a racing rung too small to
    hold two of its pairs) are left out, NaN if none is defined."""
    v = np.asarray([x for x in values if np.isfinite(x)], dtype=np.float64)
    if not len(v):
        return float("nan")
    return float(rule(objective)(v))


def group_spearmans(sims: np.ndarray, gold: np.ndarray, groups: np.ndarray, labels) -> list[float]:
    """Spearman ×100 of each group ``labels`` names (NaN where a group holds fewer than two pairs)."""
    return [spearman100(sims[groups == g], gold[groups == g]) if (groups == g).sum() > 1 else float("nan")
            for g in labels]


def grouped_spearman(sims: np.ndarray, gold: np.ndarray, groups: np.ndarray | None = None,
                     objective: str = "mean") -> float:
    """Spearman ×100 of ``sims`` against ``gold``; with ``groups``, the objective of each group's."""
    if groups is None:
        return spearman100(sims, gold)
    return combine(group_spearmans(sims, gold, groups, np.unique(groups)), objective)


def bootstrap_rhos(sims: dict[str, np.ndarray], gold: np.ndarray, n_boot: int, seed: int,
                   groups: np.ndarray | None = None, objective: str = "mean") -> dict[str, np.ndarray]:
    """Each candidate's Spearman (×1, Pearson of ranks) on ``n_boot`` paired resamples of the pairs —
    the same resamples for every candidate; with ``groups``, resampled within each group and
    combined by ``objective``."""
    rng = np.random.default_rng(seed)
    parts = [np.arange(len(gold))] if groups is None else [np.flatnonzero(groups == g) for g in np.unique(groups)]
    per: dict[str, list[np.ndarray]] = {t: [] for t in sims}  # each part's (n_boot,) rhos
    for pos in parts:
        m = len(pos)
        idx = pos[rng.integers(0, m, size=(n_boot, m))]
        g = rankdata(gold[idx], axis=1)
        g = (g - g.mean(1, keepdims=True)) / np.maximum(g.std(1, keepdims=True), 1e-12)
        for t, s in sims.items():
            r = rankdata(s[idx], axis=1)
            r = (r - r.mean(1, keepdims=True)) / np.maximum(r.std(1, keepdims=True), 1e-12)
            per[t].append((r * g).mean(1))
    return {t: (v[0] if len(v) == 1 else rule(objective)(v, 0)) for t, v in per.items()}


class Objective(IndexedPairs):
    """Several dev sets scored as one: ``spearman(vecs)`` is the ``objective`` of their Spearmans.

    :param evaluators: set name → its evaluator (one or more).
    :param objective: ``"mean"`` or ``"min"`` of the sets' Spearmans.
    :raises promptsearch.PromptSearchError: for an unknown objective, or no set."""

    primary_metric = "spearman"  # the objective of the sets' Spearmans ×100

    def __init__(self, evaluators: dict[str, STSEvaluator], objective: str = "mean"):
        if objective not in OBJECTIVES:
            raise PromptSearchError(f"objective={objective!r}: choose mean or min")
        if not evaluators:
            raise PromptSearchError("no dev set to score on; give dataset=, e.g. stsb-dev")
        self.sets, self.objective = dict(evaluators), objective
        self.names = list(self.sets)
        self.name = ",".join(self.names)
        self.sentences: list[str] = list(dict.fromkeys(s for ev in self.sets.values() for s in ev.sentences))
        index = {s: i for i, s in enumerate(self.sentences)}
        ia, ib, gold, groups = [], [], [], []
        for g, ev in enumerate(self.sets.values()):
            remap = np.asarray([index[s] for s in ev.sentences], dtype=np.int64)
            ia.append(remap[ev.ia])
            ib.append(remap[ev.ib])
            gold.append(ev.gold)
            groups.append(np.full(ev.n_pairs, g, dtype=np.int64))
        self.ia, self.ib = np.concatenate(ia), np.concatenate(ib)
        self.gold, self.groups = np.concatenate(gold), np.concatenate(groups)

    @property
    def n_pairs(self) -> int:
        return len(self.gold)

    def per_set(self, vecs: np.ndarray, pairs: np.ndarray | slice = slice(None)) -> dict[str, float]:
        """Each set's Spearman over the given pairs (NaN where a set has fewer than two of them).

        :param vecs: vectors of ``sentences``, in that order.
        :param pairs: the pairs to score (indices or a slice; default all).
        :returns: set name → Spearman ×100."""
        sims = self.similarities(vecs, pairs)
        return dict(zip(self.names,
                        group_spearmans(sims, self.gold[pairs], self.groups[pairs], range(len(self.names)))))

    def spearman(self, vecs: np.ndarray, pairs: np.ndarray | slice = slice(None)) -> float:
        """The objective over the given pairs (all of them by default; there every set's score must
        be defined, as ``STSEvaluator.spearman`` requires).

        :param vecs: vectors of ``sentences``, in that order.
        :param pairs: the pairs to score (indices or a slice; default all).
        :returns: the objective, ×100.
        :raises promptsearch.PromptSearchError: on all pairs, where a set's score is undefined."""
        if len(self.sets) == 1:
            return next(iter(self.sets.values())).spearman(vecs, pairs)
        if isinstance(pairs, slice) and pairs == slice(None):
            return self.value(self.scores(vecs))
        return combine(self.per_set(vecs, pairs).values(), self.objective)

    def scores(self, vecs: np.ndarray) -> dict[str, float]:
        """Every set's full-set Spearman (each checked: a NaN is an error, as in ``eval``).

        :param vecs: vectors of ``sentences``, in that order.
        :returns: set name → Spearman ×100.
        :raises promptsearch.PromptSearchError: where a set's score is undefined."""
        sims = self.similarities(vecs)
        masks = [self.groups == g for g in range(len(self.sets))]
        return {name: ev._defined(spearman100(sims[m], self.gold[m]), sims=sims[m], dim=vecs.shape[1],
                                  exact=self.exact(vecs, m))
                for m, (name, ev) in zip(masks, self.sets.items())}

    def value(self, scores: dict[str, float]) -> float:
        """The objective of full-set per-set scores (a single set's score is itself).

        :param scores: set name → Spearman ×100, as ``scores`` gives them.
        :returns: the objective, ×100."""
        return scores[self.names[0]] if len(self.sets) == 1 else combine([scores[n] for n in self.names],
                                                                         self.objective)

    def encode(self, encoder: PromptEncoder, reps: Sequence[Rep], show_progress_bar=None) -> dict[Rep, np.ndarray]:
        """Vectors of every set's distinct ``sentences`` for every rep, from shared passes.

        :param encoder: the encoder.
        :param reps: the representations.
        :param show_progress_bar: show a progress bar (None: the encoder's setting).
        :returns: each rep → float32 vectors of ``sentences``."""
        return encoder.encode_reps(self.sentences, reps, show_progress_bar=show_progress_bar)

    def evaluate(self, encoder: PromptEncoder, reps: Sequence[Rep], show_progress_bar=None) -> dict[Rep, dict]:
        """Encode, then score (``eval.task.EvaluationTask``): {rep: {"spearman": the objective, "sets": each set's
        Spearman}}, the numbers the search's ``Scorer`` gives the rep on these sets.

        :param encoder: the encoder.
        :param reps: the representations.
        :param show_progress_bar: show a progress bar (None: the encoder's setting).
        :returns: each rep → ``{"spearman", "sets"}``, ×100.
        :raises promptsearch.PromptSearchError: where a set's score is undefined."""
        vecs = self.encode(encoder, reps, show_progress_bar=show_progress_bar)
        out = {}
        for r in reps:
            per = self.scores(vecs[r])
            out[r] = {"spearman": self.value(per), "sets": per}
        return out

    def gain(self, before: np.ndarray, after: np.ndarray, n_boot: int = 1000, seed: int = 0) -> tuple[float, float]:
        """(gain, its bootstrap standard error), ×100: the objective of the pairs' similarities
        ``after`` minus that of ``before`` on all pairs, and the standard deviation of that
        difference over paired resamples of the pairs (the same resamples for both; within each set).

        :param before: the pairs' similarities under one representation.
        :param after: the same pairs' similarities under another.
        :param n_boot: the number of bootstrap resamples.
        :param seed: the resamples' random seed.
        :returns: ``(gain, standard error)``, both ×100."""
        groups = self.groups if len(self.sets) > 1 else None
        rho = bootstrap_rhos({"before": before, "after": after}, self.gold, n_boot, seed, groups, self.objective)
        full = (grouped_spearman(after, self.gold, groups, self.objective)
                - grouped_spearman(before, self.gold, groups, self.objective))
        return float(full), float(100 * np.std(rho["after"] - rho["before"], ddof=1))

    def se(self, sims: np.ndarray, n_boot: int = 1000, seed: int = 0) -> float:
        """The paired-bootstrap standard error (×100) of the objective of these pair similarities.

        :param sims: the pairs' similarities.
        :param n_boot: the number of bootstrap resamples.
        :param seed: the resamples' random seed.
        :returns: the standard error, ×100."""
        groups = self.groups if len(self.sets) > 1 else None
        return float(100 * np.std(bootstrap_rhos({"t": sims}, self.gold, n_boot, seed, groups, self.objective)["t"],
                                  ddof=1))
