"""The one protocol every search strategy follows (as Optuna's samplers share ``BaseSampler``): a
strategy proposes, the runner records (a ``StepRunner``: the STS ``Runner``, or the retrieval
``RetrievalSearch``; the same strategy code runs on either).

A strategy has a name, its settings, and ``Strategy.propose``: it asks the runner to score
candidates (``runner.score(candidates, source)``) and is told their scores, asks it whether a step is
ahead of the one before by more than its noise (``runner.step``), and names its answer
(``runner.choose``). It never writes the results itself: the runner alone adds scores, keeps the path,
saves after every record and shows progress, like Optuna's ``study.ask`` / ``study.tell`` with one loop
that records every trial. Every other hook does nothing unless a strategy needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:  # "Runner": search.runner.Runner, which imports this module (not imported here)
    from .results import Results
    from .scorer import Scorer


@dataclass
class Told:
    """What a strategy is told of the candidates it proposed (``Runner.score``): their scores as the scorer gave them
    (an STS ``Score``, a retrieval ``RetrievalEntry``: each with its ``entry_key`` and its primary metric's ``value``)
    in candidate order; of a race, the candidates dropped before a full score (``{"template", "rung"}``, or a
    retrieval candidate's fields and its screen score) and the race's record for the step's row.

    :param scores: the full scores, in candidate order.
    :param dropped: a race's candidates dropped before a full score.
    :param race: a race's record for the step's row (None: no race, or one that keeps its own, as STS racing does)."""

    scores: list[Any]
    dropped: list[dict] = field(default_factory=list)
    race: dict | None = None


class Strategy:
    """Subclass it and write ``propose``; scores are cached (never computed twice) and recorded as they
    come, so a run can be interrupted and resumed."""

    name: str = "strategy"
    # points a candidate must gain over the model's own representation to replace it ("auto" or None: its noise)
    min_gain: float | str | None = "auto"
    # the settings that say what is searched (its candidates): a resumed run with others is refused, as its file
    # would hold two searches' candidates under one answer; the rest (how steps are judged) may change on a resume
    SPACE: ClassVar[tuple[str, ...]] = ()
    # the settings of how its steps are judged: a resumed run with others is told that its path is walked again
    RULE: ClassVar[tuple[str, ...]] = ()

    def settings(self) -> dict:
        """What the results file records of this run (a resumed run must match it).

        :returns: the settings as a JSON-ready dict (empty by default).
        """
        return {}

    def check(self, scorer: "Scorer | Any") -> None:
        """Refuse bad input before the results file is opened (one-line errors); by default nothing.

        :param scorer: the scorer the run will use (its model, data and layers).
        :raises PromptSearchError: when the strategy's settings cannot run on it (a subclass's check).
        """

    def keeps_vectors(self) -> bool:
        """Whether the scorer keeps every scored representation's vectors (a strategy that averages them
        into ensembles); by default not.

        :returns: True when the scorer should keep the vectors of every representation it scores.
        """
        return False

    def propose(self, runner) -> None:
        """The search: candidates proposed to ``runner`` (``Runner.score``), steps judged by it
        (``Runner.step``), the answer named (``Runner.choose``).

        :param runner: the ``Runner`` that scores, records and judges for the strategy.
        :raises NotImplementedError: always here; a subclass writes the search.
        """
        raise NotImplementedError

    def stats(self) -> dict:
        """What the strategy adds to the run's stats (a retrieval results file's ``stats``); by default nothing.

        :returns: a JSON-ready dict.
        """
        return {}

    def validation_extra(self, results: "Results") -> list:
        """Entry keys held-out validation scores besides the best K; by default none.

        :param results: the run's results after the search and its verdict.
        :returns: entry keys (representations) to validate besides the best K.
        """
        return []
