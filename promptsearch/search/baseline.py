"""The model's own representation as every search's first candidate, and the rule that keeps it.

Before a strategy runs, the model's own representation
(``own_representation``:
what ``SentenceTransformer(model).encode`` computes, read from the model's sentence-transformers
stack; a folder promptsearch trained: what it was trained with) is scored and put in the results.
After it, the strategy's answer replaces it only when it is ahead by more than its
noise (``min_gain``; ``"auto"``: the paired-bootstrap standard error of the difference): a search
never hands back something worse than using no prompt at all, and says plainly when nothing beat it.
The spread of everything scored (min / median / max, and where the model's own representation
sits) is recorded beside the verdict.
"""

from __future__ import annotations

from ..representation import Representation
from .results import Results, verdict_lines  # noqa: F401 - verdict_lines: what a search prints of the verdict
from .state import Spread, Verdict

# ``runner``: a ``Runner`` (not imported: the runner imports this module)


def score_own(runner) -> Representation:
    """Propose the model's own representation (cached like any candidate) and record it as the baseline; its key.

    :param runner: the ``Runner`` of the search.
    :returns: the entry key of the model's own representation.
    """
    enc = runner.scorer.encoder
    own = enc.own_representation()  # a trained folder's may read another layer
    key = runner.score([own], "baseline").scores[0].entry_key
    runner.keep(baseline=Verdict(key, reads=enc.describe_own(runner.scorer.denoise)))
    return key


def settle(runner) -> None:
    """Choose between the strategy's answer and the model's own representation (``StepRunner.settle_own``: kept
    unless the step rule takes the answer), and record the verdict and the spread (``record_verdict``).

    :param runner: the ``Runner`` of the search, after its strategy proposed.
    """
    results = runner.results
    base = results.own_key
    if base is None or base not in results.entries:
        return
    # weighs the strategy's answer in this run (``runner.lead``); not the file's ``x_chosen``, which a resumed file
    # holds from its last verdict
    record_verdict(runner, base, runner.settle_own(base, results.ranked()[0].entry_key))


def record_verdict(runner, base: Representation, done) -> None:
    """Record the verdict ``settle_own`` gave (the answer chosen, the model's own weighed against the challenger) and
    the spread of everything scored, saved.

    :param runner: the ``Runner`` of the search.
    :param base: the model's own representation's entry key (one the results hold).
    :param done: ``settle_own``'s ``Settled``."""
    results = runner.results
    own = results.entries[base]
    reads = results.baseline.reads if results.baseline is not None else None
    if done.judged is not None:
        j, rival = done.judged, results.entries[done.challenger]
        verdict = Verdict(base, own.spearman, best=rival.entry_key, best_spearman=rival.spearman,
                          gain=j.noise["gain"], se=j.noise["se"], min_gain=j.noise["min_gain"],
                          kept=done.answer == base, reads=reads, weighed=done.weighed)
    else:
        verdict = Verdict(base, own.spearman, best=base, kept=True, reads=reads)
    runner.choose(done.answer)
    runner.keep(baseline=verdict, spread=spread(results, base))


def spread(results: Results, base: Representation) -> Spread:
    """min / median / max of the candidates scored, and the rank of the model's own representation
    (``Spread.of``, as a retrieval search's).

    :param results: the results holding every scored candidate.
    :param base: the entry key of the model's own representation (one ``results`` holds).
    :returns: the spread, scores rounded to 4 places.
    """
    return Spread.of([e.spearman for e in results.entries.values()], results.entries[base].spearman, 4)
