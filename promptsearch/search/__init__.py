"""Template search: strategies propose templates, one :class:`Scorer` scores them, one
:class:`Results` file records them.

A strategy is anything with a ``name``, a ``settings()`` dict and ``run(scorer, results)``;
it asks the scorer for scores (cached, never computed twice) and adds them to the results
(saved atomically after each one), so a run can be interrupted and resumed.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .results import Results
from .scorer import Scorer, Score
from .validate import DEFAULT_VALIDATE_ON, validate


@runtime_checkable
class Strategy(Protocol):
    name: str

    def settings(self) -> dict: ...

    def run(self, scorer: Scorer, results: Results) -> None: ...


def run_strategy(strategy: Strategy, scorer: Scorer, out=None, model_name: str = "default",
                 validate_on=DEFAULT_VALIDATE_ON, validate_top: int = 5, show_progress_bar=None) -> Results:
    """Open (or resume) the results file, run the strategy, validate its best ``validate_top``
    templates on the held-out ``validate_on`` tasks (:mod:`.validate`), return the results."""
    results = Results.open(out, model_name, scorer.dataset, strategy.name, scorer.denoise, strategy.settings())
    results.track(scorer.work)
    strategy.run(scorer, results)
    results.save()
    if validate_top > 0 and validate_on:
        extra = [r["template"] for r in results.extras.get("path", []) if r.get("stage") in ("relation:best", "prefix")]
        validate(results, scorer, validate_on, validate_top, extra=extra, show_progress_bar=show_progress_bar)
    return results


__all__ = ["Strategy", "Scorer", "Score", "Results", "run_strategy", "validate", "DEFAULT_VALIDATE_ON"]
