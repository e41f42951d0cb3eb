"""The one base every search strategy shares (as Optuna's samplers share ``BaseSampler``): a name,
its settings, ``run(scorer, results)``, and hooks that do nothing unless a strategy needs them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .results import Results
    from .scorer import Scorer


class Strategy:
    """Subclass it and write :meth:`run`: ask the scorer for scores (cached, never computed twice)
    and add them to the results (saved after each one), so a run can be interrupted and resumed."""

    name: str = "strategy"
    # points a candidate must gain over the model's own representation to replace it ("auto": its noise)
    min_gain: float | str = "auto"

    def settings(self) -> dict:
        """What the results file records of this run (a resumed run must match it)."""
        return {}

    def check(self, scorer: "Scorer") -> None:
        """Refuse bad input before the results file is opened (one-line errors); by default nothing."""

    def run(self, scorer: "Scorer", results: "Results") -> None:
        raise NotImplementedError

    def validation_extra(self, results: "Results") -> list[str]:
        """Entry keys held-out validation scores besides the best K; by default none."""
        return []
