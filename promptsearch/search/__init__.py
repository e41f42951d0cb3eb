"""Template search: strategies propose templates, one ``Scorer`` scores them, one
``Runner`` records them in one ``Results`` file.

A strategy subclasses ``Strategy`` (a ``name``, a ``settings()`` dict,
``propose(runner)`` and no-op hooks); it asks the runner to score candidates (cached, never computed
twice) and is told their scores; the runner adds them to the results (saved atomically after each
one), so a run can be interrupted and resumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..data import DEV_SET
from ..errors import PromptSearchError, note
from ..fileio import check_not_read_only, hold_write_lock
from ..representation import Representation
from ..template import Template
from .greedy import Greedy
from .results import Results
from .runner import Runner
from .scorer import Score, Scorer
from .strategy import Strategy
from .validate import DEFAULT_VALIDATE_ON, validate


def run_settings(strategy: Strategy, scorer: Scorer) -> dict:
    """The settings a results file records of a run: the strategy's, and the objective over several dev sets."""
    settings = strategy.settings()
    if len(scorer.datasets) > 1:
        settings["objective"] = scorer.objective
    if scorer.screening_precision != scorer.encoder.precision:  # racing screens in another precision: its races
        settings["screening"] = scorer.screening_precision  # are other races (a resume with another races again)
    return settings


def check_resume(strategy: Strategy, scorer: Scorer, out, model_name: str = "default") -> list:
    """Refuse, writing nothing, a results file ``out`` that ``run_strategy`` would refuse to resume: another model,
    data, strategy or numbers (``Results.check_resume``), or another search space (the strategy's ``SPACE``
    settings: a rerun with other read-outs would have put a second search's candidates beside the first's and
    replaced its answer without a word; a user's trial).

    :returns: the other settings this run changes from the file's last run, ``(key, was, now)`` (none: no file)."""
    settings = run_settings(strategy, scorer)
    old = Results.check_resume(out, model_name, scorer.dataset, strategy.name, scorer.denoise, settings,
                               numbers=scorer.numbers())
    changed = _changed(old.settings, settings) if old is not None else []
    if space := [c for c in changed if c[0] in strategy.SPACE]:
        k, was, now = space[0]
        raise PromptSearchError(f"{out} holds a search of another space ({k}={_v(was)}, not {_v(now)}); resume it with "
                                f"the same {k}=, or pass another out= (or delete the file) to start a new run")
    return changed


def _v(value, key: str = "") -> str:
    """A setting as a command line gives it: a list comma-joined (empty: none), None as unset (a screening
    precision left out: auto, the run's own)."""
    if isinstance(value, (list, tuple)):
        return ",".join(map(str, value)) or "none"
    return ("auto" if key == "screening" else "unset") if value is None else str(value)


def _changed(old: dict, settings: dict) -> list[tuple[str, object, object]]:
    """The settings a run changes from a results file's last run (``old``): ``(key, was, now)``, a key left out
    of either being unset; where the search runs (its storage, study) is not a change of the search."""
    return [(k, old.get(k), settings.get(k)) for k in sorted(set(old) | set(settings))
            if old.get(k) != settings.get(k) and k not in ("storage", "study_name")]


def run_strategy(strategy: Strategy, scorer: Scorer, out=None, model_name: str = "default",
                 validate_on=DEFAULT_VALIDATE_ON, validate_top: int | None = None, show_progress_bar=None,
                 announce=None) -> Results:
    """Open (or resume) the results file (``out``: its path, or the ``Results`` that ``open_results`` gave), run the
    strategy, validate on the held-out ``validate_on`` tasks
    (``validate``) the chosen representation and the best [MASK] template (``validate_top=None``), or
    besides them the best ``validate_top`` templates, the model's own and the strategy's extras (a greedy
    path), or nothing (``validate_top=0``); return the results."""
    if not isinstance(strategy, Strategy):
        raise TypeError(f"{type(strategy).__name__} is not a promptsearch.search.Strategy: subclass it")
    results = out if isinstance(out, Results) else open_results(strategy, scorer, out, model_name)
    return Runner(strategy, scorer, results).run(validate_on, validate_top, show_progress_bar, announce)


def open_results(strategy: Strategy, scorer: Scorer, out=None, model_name: str = "default") -> Results:
    """The results file ``run_strategy`` runs ``strategy`` into (new, or resumed), bad input refused before it is
    opened; a caller that adds to it first (the command line: the command that ran it) passes it as ``out``.

    :param strategy: the strategy.
    :param scorer: the scorer.
    :param out: the file (None: in memory).
    :param model_name: the model's name or path as given.
    :returns: the results."""
    if out is not None and Path(out).is_file():  # a file it would not resume: refused before the strategy says a word
        check_not_read_only(out)  # refused before its lock is taken: nothing left behind
        hold_write_lock(out)  # (another run writing it is named as such, not misread mid-write)
        if changed := [c for c in check_resume(strategy, scorer, out, model_name) if c[0] in strategy.RULE]:
            note(f"note: {out}'s last run had " + ", ".join(f"{k}={_v(was, k)}" for k, was, _ in changed)
                 + "; this run walks its path again with " + ", ".join(f"{k}={_v(now, k)}" for k, _, now in changed))
    strategy.check(scorer)  # refuse bad input before the results file is opened
    results = Results.open(out, model_name, scorer.dataset, strategy.name, scorer.denoise,
                           run_settings(strategy, scorer), numbers=scorer.numbers())
    # a resumed file's scores read back, the score cache off too; one it did not write (edited by hand) scored again
    scorer.know(e for k, e in results.entries.items() if k not in results.suspect)
    return results


@dataclass
class GivenTemplates(Strategy):
    """The strategy of ``promptsearch score``: the templates given, each scored once, in order."""

    templates: list
    name: str = "score"

    def settings(self) -> dict:
        return {"templates": len(self.templates)}

    def _by_layer(self) -> dict:
        """The templates (keys: ``T``, ``T @mean``, ``T @layer L``) by the layer they read, in order."""
        out: dict = {}
        for t in self.templates:
            k = t if isinstance(t, Representation) else Representation.split(t.text if isinstance(t, Template) else t)
            out.setdefault(k.layer, []).append(t)
        return out

    def check(self, scorer: Scorer) -> None:
        for ts in self._by_layer().values():  # every template usable with this tokenizer before anything is written
            for t in ts:
                scorer.check(t)

    def propose(self, runner: Runner) -> None:
        for layer, ts in self._by_layer().items():
            runner.score(ts, "score")


def greedy_search(encoder, out, model_name: str = "default", dataset: str = DEV_SET, show_progress_bar=False,
                  **greedy) -> Results:
    """A greedy search with the command's defaults (racing, held-out validation on STS-B and SICK-R
    test) into the results file ``out`` (resumed if it exists): what ``promptsearch greedy`` runs."""
    strategy = Greedy(show_progress_bar=show_progress_bar, **greedy)
    return run_strategy(strategy, Scorer(encoder, dataset=dataset), out, model_name,
                        show_progress_bar=show_progress_bar)


__all__ = ["greedy_search", "GivenTemplates", "Strategy", "Runner", "Scorer", "Score", "Results", "run_strategy",
           "check_resume", "open_results", "validate", "DEFAULT_VALIDATE_ON"]
