"""The model's own representation as every search's first candidate, and the rule that keeps it.

Before a strategy runs, the model's own representation (:meth:`~promptsearch.encoding.encoder.PromptEncoder.own_representation`:
what ``SentenceTransformer(model).encode`` computes, read from the model's sentence-transformers
stack; a folder promptsearch trained: what it was trained with) is scored and put in the results. After it, the strategy's answer replaces it only when it is ahead by more than its
noise (``min_gain``; ``"auto"``: the paired-bootstrap standard error of the difference): a search
never hands back something worse than using no prompt at all, and says plainly when nothing beat it.
The spread of everything scored (min / median / max, and where the model's own representation
sits) is recorded beside the verdict.
"""

from __future__ import annotations

import numpy as np

from ..representation import Representation
from .results import Results, verdict_lines  # noqa: F401 - verdict_lines: what a search prints of the verdict
from .scorer import Scorer
from .state import Spread, Verdict


def score_own(scorer: Scorer, results: Results) -> Representation:
    """Score the model's own representation into ``results`` (cached like any candidate); its key."""
    enc = scorer.encoder
    own = enc.own_representation()  # a trained folder's may read another layer
    key = results.add(scorer.at_layer(own.layer).score(own.without_layer), "baseline").entry_key
    results.baseline = Verdict(key, reads=enc.describe_own(scorer.denoise))
    results.save()
    return key


def similarities(scorer: Scorer, k: Representation) -> np.ndarray:
    """The pair similarities of a results entry's key (a template, a layer, a pooled read-out, an ensemble)."""
    if k.members:
        return scorer.member_similarities(k.members)
    return scorer.at_layer(k.layer).similarities(k.without_layer)


def settle(scorer: Scorer, results: Results, min_gain="auto") -> None:
    """Choose between the strategy's answer and the model's own representation (kept unless beaten
    beyond ``min_gain``), and record the verdict and the spread in ``results``."""
    base = results.own_key
    if base is None or base not in results.entries:
        return
    best = results.best
    own = results.entries[base]
    reads = results.baseline.reads if results.baseline is not None else None
    verdict = Verdict(base, own.spearman, reads=reads)
    if best is not None and best.entry_key != base:
        gain, se = scorer.evaluator.gain(similarities(scorer, base), similarities(scorer, best.entry_key), seed=0)
        need = se if min_gain in (None, "auto") else float(min_gain)
        beats = gain > need
        verdict = Verdict(base, own.spearman, best=best.entry_key, best_spearman=best.spearman, gain=round(gain, 4),
                          se=round(se, 4), min_gain=round(need, 4), kept=not beats, reads=reads)
        results.choose(best.entry_key if beats else base)
    else:
        verdict = Verdict(base, own.spearman, best=base, kept=True, reads=reads)
        results.choose(base)
    results.baseline = verdict
    results.spread = spread(results, base)
    results.save()


def spread(results: Results, base: Representation) -> Spread:
    """min / median / max of the candidates scored, and the rank of the model's own representation."""
    scores = np.array([e.spearman for e in results.entries.values()], dtype=float)
    own = results.entries[base].spearman
    return Spread(n=int(len(scores)), min=round(float(scores.min()), 4), median=round(float(np.median(scores)), 4),
                  max=round(float(scores.max()), 4), own=own, own_rank=int((scores > own).sum()) + 1)
