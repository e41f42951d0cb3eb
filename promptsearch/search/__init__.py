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


@runtime_checkable
class Strategy(Protocol):
    name: str

    def settings(self) -> dict: ...

    def run(self, scorer: Scorer, results: Results) -> None: ...


def run_strategy(strategy: Strategy, scorer: Scorer, out=None, model_name: str = "default") -> Results:
    """Open (or resume) the results file, run the strategy, return the results."""
    results = Results.open(out, model_name, scorer.dataset, strategy.name, scorer.denoise, strategy.settings())
    strategy.run(scorer, results)
    results.save()
    return results


__all__ = ["Strategy", "Scorer", "Score", "Results", "run_strategy"]
