"""STS evaluation: Spearman ×100 of cosine similarity, SentEval's "all" aggregation.

``STSEvaluator`` is the one place an STS number is computed: ``eval``, ``report``, the
search scorer (with progressive subsets for the pruner), Ditto's head search and training's
dev evaluation all go through it.
"""

from __future__ import annotations

import contextlib
import warnings
from typing import Callable, Sequence

import numpy as np
from scipy.stats import ConstantInputWarning, spearmanr

from ..data import DataOptions, STSData, load_task
from ..encoding import PromptEncoder, Rep
from ..errors import PromptSearchError


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity.

    :param a: vectors ``(n, d)``.
    :param b: vectors ``(n, d)``.
    :returns: ``(n,)`` cosines (a zero vector's cosine is 0)."""
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(1)


def rounding_spread(sims: np.ndarray, dim: int) -> float:
    """How far apart cosines of equal value can come out by rounding alone: a cosine of ``dim``-component
    vectors is computed within (2 dim + 4) units of roundoff u of its exact value (the two norms, about
    (dim / 2 + 1) u each, the divisions, and a dot product of unit vectors, dim u), so two differ by at most
    2 (2 dim + 4) u = (2 dim + 4) eps in ``sims``' dtype."""
    return (2 * dim + 4) * float(np.finfo(np.asarray(sims).dtype if np.issubdtype(np.asarray(sims).dtype, np.floating)
                                      else np.float64).eps)


def constant_up_to_rounding(sims: np.ndarray, dim: int, exact=None) -> bool:
    """Whether similarities vary no more than their own rounding: their order, and a Spearman of it, is noise.
    A spread above ``rounding_spread`` is real; below it, ``exact()`` (the same cosines in float64) decides:
    rounding alone made the spread when the exact cosines span no more than twice the largest rounding error
    of ``sims`` (``sims`` - exact), or than float64 rounding itself ((2 dim + 4) eps64)."""
    sims = np.asarray(sims)
    if not len(sims) or float(np.ptp(sims)) > rounding_spread(sims, dim):
        return False
    if exact is None:
        return True
    ex = np.asarray(exact(), dtype=np.float64)
    err = float(np.abs(sims.astype(np.float64) - ex).max())
    return float(np.ptp(ex)) <= max(2 * err, rounding_spread(ex, dim))


def spearman100(pred: Sequence[float] | np.ndarray, gold: Sequence[float] | np.ndarray) -> float:
    """Spearman ×100; NaN where one side is constant (the evaluator says what that means).

    :param pred: predicted similarities.
    :param gold: gold scores, aligned with ``pred``.
    :returns: Spearman's rank correlation × 100."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConstantInputWarning)
        return float(spearmanr(pred, gold).statistic * 100)


class IndexedPairs:
    """Sentence pairs as rows ``ia``/``ib`` of one list of vectors, with their ``gold`` scores (an
    ``STSEvaluator``'s, or several sets' together in an ``Objective``)."""

    ia: np.ndarray
    ib: np.ndarray
    gold: np.ndarray

    def similarities(self, vecs: np.ndarray, pairs: np.ndarray | slice = slice(None)) -> np.ndarray:
        return cosine(vecs[self.ia[pairs]], vecs[self.ib[pairs]])

    def exact(self, vecs: np.ndarray, pairs: np.ndarray | slice = slice(None)) -> Callable[[], np.ndarray]:
        """The pairs' cosines in float64, when asked for (``constant_up_to_rounding``)."""
        return lambda: cosine(vecs[self.ia[pairs]].astype(np.float64), vecs[self.ib[pairs]].astype(np.float64))


class STSEvaluator(IndexedPairs):
    """One STS task's pairs, indexed once: the single place an STS score is computed.

    ``sentences`` are the task's distinct sentences in a fixed order (subset by subset,
    first sentences then second ones); every caller encodes exactly this list, so the same
    template on the same data goes through the same batches and gives bit-identical
    numbers whether it comes from ``eval``, ``report``, the search scorer or Ditto.
    ``score(vecs)`` takes vectors in that order: Spearman ×100 of cosine per subset and
    "all" (SentEval's "all" setting: over the concatenated scores of all subsets).

    :param data: the task's pairs (checked: a Spearman correlation must be defined on them).
    :raises promptsearch.errors.DataError: where every gold score of the set, or of a subset, is the same.
    """

    primary_metric = "spearman"  # the key of the number ``score`` and ``evaluate`` give (Spearman ×100 of cosine)

    def __init__(self, data: STSData):
        self.data = data.check()
        self.name = data.name
        self.sentences: list[str] = list(dict.fromkeys(data.sentences()))
        index = {s: i for i, s in enumerate(self.sentences)}
        gold: list[float]
        ia, ib, gold, self.subsets = [], [], [], {}
        for name, (a, b, y) in data.subsets.items():
            self.subsets[name] = slice(len(gold), len(gold) + len(y))
            ia += [index[s] for s in a]
            ib += [index[s] for s in b]
            gold += list(y)
        self.ia = np.asarray(ia, dtype=np.int64)
        self.ib = np.asarray(ib, dtype=np.int64)
        self.gold = np.asarray(gold, dtype=np.float64)

    @property
    def n_pairs(self) -> int:
        return len(self.gold)

    def spearman(self, vecs: np.ndarray, pairs: np.ndarray | slice = slice(None)) -> float:
        """Spearman ×100 over the given pairs (all of them by default) — the "all" number. On a
        subset of the pairs (a racing rung) it may be NaN; on all of them it is a number or an error.

        :param vecs: vectors of ``sentences``, in that order.
        :param pairs: the pairs to score (indices or a slice; default all).
        :returns: Spearman ×100.
        :raises promptsearch.PromptSearchError: on all pairs, where every pair got the same similarity (up to
            float rounding)."""
        sims = self.similarities(vecs, pairs)
        value = spearman100(sims, self.gold[pairs])
        full = isinstance(pairs, slice) and pairs == slice(None)
        return self._defined(value, sims=sims, dim=vecs.shape[1], exact=self.exact(vecs)) if full else value

    def score(self, vecs: np.ndarray, subsets: bool = True) -> dict:
        """{"spearman": all, "subsets": {name: spearman}, "pairs": n} for vectors of ``sentences``
        (``subsets=False``: the "all" number only, as a search or a dev evaluation uses it).

        :param vecs: vectors of ``sentences``, in that order.
        :param subsets: also score each subset.
        :returns: ``{"spearman": float, "subsets": {name: float}, "pairs": int}``.
        :raises promptsearch.PromptSearchError: where every pair (of the set or a subset) got the same
            similarity."""
        sims = self.similarities(vecs)
        d = vecs.shape[1]
        per = ({name: self._defined(spearman100(sims[sl], self.gold[sl]), name, sims[sl], d, self.exact(vecs, sl))
                for name, sl in self.subsets.items()} if subsets else {})
        return {"spearman": self._defined(spearman100(sims, self.gold), sims=sims, dim=d, exact=self.exact(vecs)),
                "subsets": per, "pairs": self.n_pairs}

    def encode(self, encoder: PromptEncoder, reps: Sequence[Rep], show_progress_bar=None) -> dict[Rep, np.ndarray]:
        """Vectors of this task's ``sentences`` for every rep (shared passes, the same batches everywhere); a
        progress bar names the task.

        :param encoder: the encoder.
        :param reps: the representations.
        :param show_progress_bar: show a progress bar (None: the encoder's setting).
        :returns: each rep → float32 vectors of ``sentences``."""
        named = getattr(encoder, "progress_named", None)  # a stand-in encoder may have no bars to name
        with named(self.name) if named else contextlib.nullcontext():
            return encoder.encode_reps(self.sentences, reps, show_progress_bar=show_progress_bar)

    def evaluate(self, encoder: PromptEncoder, reps: Sequence[Rep], show_progress_bar=None,
                 subsets: bool = True) -> dict[Rep, dict]:
        """Encode, then score: {rep: ``score``} — the one evaluation call of ``eval``, ``report``,
        the search scorer and training's dev evaluation.

        :param encoder: the encoder.
        :param reps: the representations.
        :param show_progress_bar: show a progress bar (None: the encoder's setting).
        :param subsets: also score each subset.
        :returns: each rep → ``{"spearman", "subsets", "pairs"}``.
        :raises promptsearch.PromptSearchError: for a representation the model cannot compute, or a score that
            is undefined."""
        vecs = self.encode(encoder, reps, show_progress_bar=show_progress_bar)
        return {r: self.score(vecs[r], subsets=subsets) for r in reps}

    def _defined(self, value: float, subset: str | None = None, sims: np.ndarray | None = None, dim: int = 0,
                 exact=None) -> float:
        """The gold scores vary (checked on loading), so NaN means the similarities do not: never a
        number to record or rank. Nor is a number whose similarities ``sims`` (of ``dim``-component vectors;
        ``exact``: the same in float64) differ by their rounding alone (``constant_up_to_rounding``): it
        ranks float noise."""
        where = f"subset {subset!r} of {self.name}" if subset and len(self.subsets) > 1 else self.name
        if not np.isfinite(value):
            raise PromptSearchError(f"Spearman on {where} is undefined: every pair got the same similarity (the "
                                    "representation does not depend on the sentence); try another template or pooling")
        if sims is not None and constant_up_to_rounding(sims, dim, exact):
            raise PromptSearchError(f"Spearman on {where} is undefined: every pair got the same similarity up to float "
                                    f"rounding (they span {float(np.ptp(sims)):.1e}); a set whose pairs are each a "
                                    "sentence and itself, or a representation that does not depend on the sentence, "
                                    "ranks noise: check the data set, or try another template or pooling")
        return value


def score_task(data: STSData, lookup: dict[str, np.ndarray] | Callable[[list[str]], np.ndarray]) -> dict:
    """``STSEvaluator.score`` for vectors given by sentence (a dict or a function of a list).

    :param data: the task's pairs.
    :param lookup: sentence → vector, or a function from a list of sentences to their vectors.
    :returns: ``{"spearman", "subsets", "pairs"}``."""
    ev = STSEvaluator(data)
    vecs = np.stack([lookup[s] for s in ev.sentences]) if isinstance(lookup, dict) else lookup(ev.sentences)
    return ev.score(np.asarray(vecs))


def evaluators(tasks: Sequence[str], data: DataOptions = DataOptions()) -> dict[str, STSEvaluator]:
    """Task names resolved once into evaluators (each data set read from ``data`` and checked here).

    :param tasks: task names (as ``promptsearch.data.expand_tasks`` gives them).
    :param data: where the data is read from, and a user file's columns.
    :returns: task name → evaluator, in the order given.
    :raises promptsearch.errors.DataError: for a task that cannot be read, or whose gold scores leave a
        Spearman correlation undefined."""
    return {t: STSEvaluator(load_task(t, data.data_dir, data.fmt)) for t in tasks}


def evaluate_reps(encoder: PromptEncoder, reps: Sequence[Rep], tasks: Sequence[str] | dict[str, STSEvaluator],
                  data: DataOptions = DataOptions()) -> dict[Rep, dict[str, dict]]:
    """{rep: {task: {"spearman", "subsets", "pairs"}}} for every rep and task (names, or
    evaluators from ``evaluators``).

    Each task is encoded on its own (its ``STSEvaluator``'s sentences), so a task's
    numbers do not depend on which other tasks were asked for.

    :param encoder: the encoder.
    :param reps: the representations.
    :param tasks: task names, or evaluators by name.
    :param data: where the data is read from (with task names), and whether progress shows.
    :returns: rep → task → ``{"spearman", "subsets", "pairs"}``.
    :raises promptsearch.PromptSearchError: as ``STSEvaluator.evaluate``, and
        ``promptsearch.errors.DataError`` for data that cannot be read."""
    evs = tasks if isinstance(tasks, dict) else evaluators(tasks, data)
    results: dict[Rep, dict[str, dict]] = {r: {} for r in reps}
    for t, ev in evs.items():
        for r, res in ev.evaluate(encoder, reps, show_progress_bar=data.show_progress_bar).items():
            results[r][t] = res
    return results
