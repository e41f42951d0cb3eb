"""The one runner every search goes through: strategies propose, the runner records.

As Optuna's ``study.ask`` / ``study.tell`` with the one loop of ``_optimize.py`` that records every
trial: a ``Strategy`` asks the runner to score candidates and is
told their scores (``Runner.score``), asks it to judge a step (``Runner.step``) and names its
answer (``Runner.choose``). Only the runner writes the results: it adds each score as it comes,
keeps the path, saves after every record and shows progress. The step rule — is the candidate ahead
of the one before by more than its noise? — is ``judge``, here and nowhere else.

``StepRunner.run`` is a whole search of any kind: the model's own representation scored first
(``begin``: ``baseline`` for STS), the strategy's proposals, the verdict against the model's own
representation (``settle_own``, recorded by ``settled``), held-out validation (``validate``). ``Runner`` is
it over STS templates, ``search.retrieval.RetrievalSearch`` over retrieval prompts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Mapping, Protocol, Sequence, runtime_checkable

from tqdm.auto import tqdm

from ..representation import Representation
from .baseline import record_verdict, score_own
from .results import Results, seal
from .scorer import Scorer
from .strategy import Strategy, Told
from .validate import validate


@dataclass(frozen=True)
class Judged:
    """A step judged: the gain of ``after`` over ``before`` (in the metric's own units: Spearman points ×100 for
    STS, a fraction of nDCG@10 for retrieval), its standard error, the threshold it had to beat (``min_gain``;
    auto: that error) and whether it did.

    :param gain: the gain, in the metric's units.
    :param se: its standard error (STS: paired bootstrap; retrieval: of the mean per-query difference).
    :param need: the gain it had to beat.
    :param taken: whether the step is taken."""


    gain: float
    se: float
    need: float
    taken: bool

    @classmethod
    def of(cls, gain: float, se: float, min_gain: float | str | None = "auto", differs: bool = True) -> "Judged":
        """The step rule, the one place it is written (STS steps and retrieval steps both judge by it): a step is
        taken only when ``after`` differs from ``before`` and its gain is above ``min_gain`` ("auto" or None: the
        gain's own standard error).

        :param gain: the gain of ``after`` over ``before``.
        :param se: the gain's standard error.
        :param min_gain: the gain it must exceed; "auto" or None: ``se``.
        :param differs: whether ``after`` is another candidate than ``before`` (no candidate steps to itself).
        :returns: the judgement."""
        need = se if min_gain in (None, "auto") else float(min_gain)  # type: ignore[arg-type]
        return cls(gain, se, need, bool(differs and gain > need))

    @property
    def noise(self) -> dict:
        """The gain, its error and the threshold as a results file records them.

        :returns: ``{"gain", "se", "min_gain"}``, each rounded to 4 places.
        """
        return self.rounded(4)

    def rounded(self, places: int) -> dict:
        """The gain, its error and the threshold rounded to ``places``.

        :param places: decimal places.
        :returns: ``{"gain", "se", "min_gain"}``."""
        return {"gain": round(self.gain, places), "se": round(self.se, places), "min_gain": round(self.need, places)}


def judge(scorer, before, after, min_gain="auto", seed: int = 0) -> Judged:
    """The step rule: ``after`` is taken over ``before`` only when it is another representation and its gain
    on the scorer's data is above ``min_gain`` ("auto" or None: the gain's own standard error; STS: a paired
    bootstrap over the pairs, resampled with ``seed``; retrieval: of the mean per-query difference).

    :param scorer: the scorer both representations are compared on (an STS ``Scorer``: its pairs and cached
        similarities; a retrieval ``RetrievalScorer``: its per-query nDCG@10).
    :param before: the representation (or its text) stepped from.
    :param after: the representation (or its text) stepped to.
    :param min_gain: the points ``after`` must gain; "auto" or None: the gain's standard error.
    :param seed: the paired bootstrap's seed.
    :returns: the gain, its standard error, the threshold, and whether the step is taken.
    """
    gain, se = scorer.gain(before, after, seed=seed)
    return Judged.of(gain, se, min_gain, scorer.representation(before) != scorer.representation(after))


@dataclass(frozen=True)
class Settled:
    """How a search ends, whatever the kind of task (``StepRunner.settle_own``): its ``answer``, what the model's own
    was weighed against (``challenger``; the model's own itself when nothing else was scored or named), and that
    weighing (``judged``; None when there was nothing to weigh).

    :param answer: the search's answer: the strategy's lead, or the model's own.
    :param challenger: what the model's own was weighed against.
    :param judged: the step rule's judgement of the challenger over the model's own (None: no other candidate).
    :param weighed: what the challenger is: "answer" (the strategy's answer; a strategy that names none answers with
        the highest score) or "highest" (the highest of the rest, as the strategy answered with the model's own)."""

    answer: Any
    challenger: Any
    judged: Judged | None
    weighed: str = "answer"


@runtime_checkable
class TaskScorer(Protocol):
    """What a runner asks of a scorer, whatever the kind of task (the STS ``Scorer``, retrieval's
    ``RetrievalScorer``): scores of candidates, each told as it is made, and a step's gain with its standard error."""

    def score(self, candidates: Sequence, *, on_score: Callable[[Any], None] | None = None) -> list:
        """Each candidate's score (its ``entry_key`` and primary metric's ``value``), in candidate order; each told to
        ``on_score`` as it is made."""
        ...

    def gain(self, before: Any, after: Any, *, seed: int = 0) -> tuple[float, float]:
        """``after``'s gain over ``before`` in the primary metric, and that gain's standard error."""
        ...

    def se(self, key: Any) -> float:
        """The standard error of a candidate's own score."""
        ...

    def representation(self, key: Any) -> Any:
        """What the scorer keys a candidate by (two steps to one key are no step)."""
        ...

    @property
    def name(self) -> str:
        """The data's name, as held-out validation keys a score on it."""
        ...

    def on(self, task: Any) -> Any:
        """A scorer of the same kind and encoder on another set (held-out validation)."""
        ...

    def held_out_cost(self, results: Any, helds: Any, todo: Mapping[str, list]) -> str | None:
        """What scoring ``todo`` (each held-out set's name → the keys to score there) costs, in words (None: not
        said)."""
        ...


@runtime_checkable
class TaskResults(Protocol):
    """What a runner asks of a results file, whatever the kind of task (STS ``Results``, ``RetrievalResults``)."""

    entries: Any  # entry key -> entry
    path_steps: Any  # the path's rows (``Runner.note`` sets them)
    # the steps' gains and errors, then a seal (``StepRunner.judge``), kept for a resumed run
    judged: dict[str, list[float | str]]
    UNIT: ClassVar[str]  # what an entry is called in what a command says
    PLACES: ClassVar[int]  # the decimals a score is kept to

    def add(self, score: Any, source: str = "") -> Any:
        """Record a score as an entry (saved)."""
        ...

    def choose(self, key: Any) -> None:
        """Record the strategy's answer (saved)."""
        ...

    def ranked(self) -> list:
        """The entries, best first (by the primary metric)."""
        ...

    def label(self, name: str) -> str:
        """A data set's name as this kind's lines print it."""
        ...

    def save(self) -> None:
        """Write the file."""
        ...


@runtime_checkable
class TaskRace(Protocol):
    """What a runner asks of a race, whatever the kind of task (the STS ``Racing``: candidates screened on growing
    subsets of the pairs; retrieval's ``CorpusRace``: on a smaller corpus): run it over a step's candidates, the
    finalists scored on the whole data and recorded, the dropped ones named (``Told``)."""

    def run(self, runner: Any, candidates: list, source: str, desc: str, sources: Mapping | None = None) -> Told:
        """The race as ``StepRunner.score(racing=...)`` runs it."""
        ...

    def settings(self) -> dict:
        """The race's settings, as a results file records them."""
        ...


class StepRunner:
    """What every search's strategy asks, whatever the kind of task (see the module's description): ``score``,
    ``step``, ``note``, ``choose``, ``keep``, ``say``, over an STS ``Scorer`` and ``Results`` (``Runner``) or
    retrieval's ``RetrievalScorer`` and ``RetrievalResults`` (``search.retrieval.RetrievalSearch``). Each kind adds
    its whole search as ``run``. A scorer gives scores with an ``entry_key`` and a ``value`` (its primary metric),
    tells each as it comes (``on_score``) and weighs a step (``gain``, ``se``, ``representation``); results ``add``
    a score, hold ``entries`` and ``path_steps``, ``choose`` and ``save``.

    :param strategy: what proposes the candidates (its ``min_gain`` judges steps; its ``show_progress_bar``,
        when it has one, False: no progress bars).
    :param scorer: what scores them.
    :param results: the results the run writes, saved after every record (a resumed run's path is recorded
        again).
    :param progress: told one line at a time what the search is doing (``say``); None: nothing said.
    :cvar CHUNK: candidates scored together (what an interrupt can lose)."""


    CHUNK = 16  # candidates scored together (what an interrupt can lose)

    def __init__(self, strategy: Strategy, scorer: TaskScorer, results: TaskResults,
                 progress: Callable[[str], None] | None = None):
        self.strategy, self.scorer, self.results = strategy, scorer, results
        self.path: list = []  # the path's rows this run records (a resumed run's is recorded again)
        self.show = getattr(strategy, "show_progress_bar", None)  # False: no progress bars
        self.min_gain = strategy.min_gain  # what a step must gain ("auto" or None: its noise)
        self.progress = progress
        self.lead = None  # the answer the strategy named in this run (``choose``); None: the highest score

    def say(self, line: str) -> None:
        """One line of what the search is doing, to ``progress`` (nothing without one).

        :param line: the line."""
        if self.progress is not None:
            self.progress(line)

    # ---- the whole search ----------------------------------------------------------------------
    def run(self, validate_on: Sequence = (), validate_top: int | None = None, show_progress_bar=None,
            announce=None):
        """A whole search, whatever its kind: the model's own candidate scored first (``begin``), the strategy's
        proposals, the verdict against the model's own (``settle_own``, recorded by ``settled``), then held-out
        validation (``validate``) of the best ``validate_top`` and what ``validation_extra`` names.

        :param validate_on: the held-out tasks (STS task names; ``RetrievalTask``\\ s) to validate on (empty: none).
        :param validate_top: how many of the best to validate besides the answer (None: the answer and the kind's
            few; 0: no validation).
        :param show_progress_bar: False: no validation progress bar.
        :param announce: told (one line) what validation will cost before it starts.
        :returns: the results, saved, the answer chosen."""
        own = self.begin()  # the model's own: the first candidate, always
        self.strategy.propose(self)
        self.settled(own, self.settle_own(own, self.results.ranked()[0].entry_key))  # kept unless beaten beyond noise
        if validate_on and validate_top != 0:
            extra = self.validation_extra(own, validate_top)
            validate(self.results, self.scorer, validate_on, validate_top or 0, extra,
                     show_progress_bar=show_progress_bar, announce=announce)
        return self.results

    def begin(self) -> Any:
        """Score the model's own candidate (and whatever else a kind does before its strategy proposes); its key.

        :returns: the model's own candidate's entry key."""
        raise NotImplementedError

    def settled(self, own, done: Settled) -> None:
        """Record the verdict (``settle_own``'s) in the results, saved.

        :param own: the model's own candidate's key.
        :param done: the verdict."""
        raise NotImplementedError

    def validation_extra(self, own, top: int | None) -> list:
        """The entry keys held-out validation scores besides the best ``top``.

        :param own: the model's own candidate's key.
        :param top: ``validate_top`` (None: the answer and the kind's few).
        :returns: the keys."""
        raise NotImplementedError

    # ---- what a strategy asks -----------------------------------------------------------------
    def score(self, candidates: Sequence, source: str, desc: str | None = None, racing: TaskRace | None = None,
              record: str = "all", together: bool = False, sources: Mapping | None = None) -> Told:
        """Score ``candidates`` (representations, or their text; retrieval candidates) and record them under
        ``source``: on the full set ``CHUNK`` at a time, or raced (``racing``: an STS ``Racing``, screened on growing
        subsets of the pairs, or retrieval's ``CorpusRace``, on a smaller corpus; the finalists scored on the full
        set). ``desc``: the progress bar's label (None: no bar). ``record``: "all", "new" (only the keys the results
        do not hold yet: the model's own representation keeps its source) or "none" (scores told, not recorded:
        ``record`` one later). ``together``: all in one scorer call (a template at several layers: one pass; a
        retrieval step: each corpus encoding once), not ``CHUNK`` at a time. Each score is recorded as the scorer
        tells it, so an interrupt keeps every score made.

        :param candidates: representations, or their text.
        :param source: what proposed them (the results record it with each entry).
        :param desc: the progress bar's label; None: no bar.
        :param racing: race the candidates instead of scoring each on the full set (its ``run``).
        :param record: "all", "new" or "none" (above).
        :param together: all in one scorer call rather than ``CHUNK`` at a time.
        :param sources: a source of its own for some candidates (by entry key; the rest: ``source``).
        :returns: the scores, in candidate order (a retrieval scorer's: each candidate once), and, when raced, the
            candidates dropped.
        """
        if racing is not None:
            return racing.run(self, list(candidates), source, desc or source, sources)
        scores: list = []
        with tqdm(total=len(candidates), desc=desc, leave=False, disable=desc is None or self.show is False,
                  unit="template") as bar:
            def told(sc) -> None:
                bar.update(1)
                bar.set_postfix_str(f"{sc.value:.4g} {str(sc.label)[:40]}")
                if record == "all" or (record == "new" and sc.entry_key not in self.results.entries):
                    self.record(sc, (sources or {}).get(sc.entry_key, source))

            chunk = max(len(candidates), 1) if together else self.CHUNK
            for i in range(0, len(candidates), chunk):
                # recorded as told; told back in candidate order (the order a strategy breaks ties by)
                scores.extend(self.scorer.score(list(candidates[i : i + chunk]), on_score=told))
        return Told(scores)

    def record(self, score, source: str):
        """Add one score to the results (saved).

        :param score: a score the scorer gave.
        :param source: what proposed it.
        :returns: the results entry it became.
        """
        return self.results.add(score, source)

    def judge(self, before, after, seed: int) -> Judged:
        """``judge`` with the strategy's ``min_gain``. The gain and its error are kept in the results
        (``judged``) at full precision, so a resumed run that walks the path again judges each step as before without
        the two ends' pair similarities or per-query scores, which the file does not hold (encoding them again was
        most of a finished search's rerun); the step rule itself is applied afresh (another ``min_gain`` decides
        anew). A resumed file is of the same model, data and settings (``check_resume``), so its judgements stand.

        :param before: the representation stepped from.
        :param after: the representation stepped to.
        :param seed: the paired bootstrap's seed.
        :returns: the judgement (see ``judge``).
        """
        rep = self.scorer.representation
        key = json.dumps(["gain", seed, rep(before).text, rep(after).text], ensure_ascii=False)
        known = _kept(self.results.judged.get(key), key, 2)
        if known is not None:
            return Judged.of(known[0], known[1], self.min_gain, rep(before) != rep(after))
        j = judge(self.scorer, before, after, self.min_gain, seed)
        self.results.judged[key] = _sealed(key, [j.gain, j.se])
        return j

    def se(self, key) -> float:
        """The scorer's standard error of ``key``'s score, kept in the results as ``judge`` keeps a gain.

        :param key: a representation (a retrieval candidate) scored.
        :returns: the standard error, in the metric's units."""
        name = json.dumps(["se", self.scorer.representation(key).text], ensure_ascii=False)
        known = _kept(self.results.judged.get(name), name, 1)
        if known is None:
            known = [self.scorer.se(key)]
            self.results.judged[name] = _sealed(name, known)
        return known[0]

    def step(self, row, before, after, seed: int, stop: str | None = None) -> bool:
        """A step of the path: ``after`` (``row``'s representation) judged against ``before``; ``row`` gets the
        gain, its error, the threshold and ``after``'s own standard error (``row.settle``), and is recorded.
        ``stop``: the stage ``row`` takes when the step is not taken (a prefix step's "stop"); without it
        ``row.taken`` says. Whether it was taken.

        :param row: the path's row for ``after`` (a ``PathStep``, a ``RetrievalStep``; filled in and recorded).
        :param before: the representation stepped from.
        :param after: the representation stepped to.
        :param seed: the paired bootstrap's seed.
        :param stop: the stage ``row`` takes when the step is not taken; None: ``row.taken`` says.
        :returns: whether the step was taken.
        """
        j = self.judge(before, after, seed)
        row.settle(j, self.se(after), stop)
        self.note(row)
        return j.taken

    def note(self, row) -> None:
        """A row of the path that decides nothing (a candidate's score, a stage's best), recorded.

        :param row: the path's row, appended to the path and saved.
        """
        self.path.append(row)
        self.results.path_steps = list(self.path)
        self.results.save()

    def choose(self, key) -> None:
        """The strategy's answer, when it is not simply the highest score.

        :param key: the representation (a retrieval candidate) the strategy answers with (one the results hold).
        """
        self.lead = key  # this run's: a resumed file's earlier answer is not the strategy's now
        self.results.choose(key)

    def settle_own(self, own, highest) -> Settled:
        """The verdict every kind of search ends with, written once: the model's own representation is the answer
        unless the strategy's lead (what it named in this run, ``choose``; else the ``highest`` score) is another
        candidate and is ahead of it by the step rule (``judge``, seed 0). A search never hands back something worse
        than what the user already has. When the lead is the model's own, the ``highest`` score is weighed against
        it instead, so the verdict still says how far the best of the rest is from it, though it cannot be the
        answer.

        :param own: the model's own representation (a retrieval candidate), scored.
        :param highest: the candidate scored highest.
        :returns: the answer, what the model's own was weighed against, and the judgement."""
        rep = self.scorer.representation
        lead = self.lead if self.lead is not None else highest
        challenger = lead if rep(lead) != rep(own) else highest
        if rep(challenger) == rep(own):
            return Settled(own, own, None)
        j = self.judge(own, challenger, seed=0)
        return Settled(challenger if j.taken and challenger == lead else own, challenger, j,
                       "answer" if challenger == lead else "highest")

    def keep(self, entries: Sequence = (), **records) -> None:
        """Entries another process scored (an Optuna study's other workers') and records of the run (``study``,
        ``pareto``, ``generated``, ``baseline``, ``spread``: ``Results`` fields), saved.

        :param entries: entries scored elsewhere, added to the results as they are.
        :param records: results fields to set, by name.
        :raises AttributeError: when a record names no ``Results`` field.
        """
        for e in entries:
            self.results.entries[e.entry_key] = e
        for name, value in records.items():
            if not hasattr(self.results, name):
                raise AttributeError(f"Results has no record {name!r}")
            setattr(self.results, name, value)
        self.results.save()


def _sealed(key: str, values: list[float]) -> list:
    """A judgement as the results file keeps it: its numbers at full precision, then a short digest of the key and
    the numbers (as an entry's seal in ``x_record``: it tells a hand edit apart, it is no security measure)."""
    return [*values, seal([key, values])]


def _kept(value, key: str, n: int) -> list[float] | None:
    """A kept judgement's ``n`` numbers, or None (judged again) for one that is absent, malformed or edited by hand
    (its seal no longer matches: a gain typed into the file must not decide a step)."""
    if not isinstance(value, list) or len(value) != n + 1:
        return None
    numbers = value[:n]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in numbers):
        return None
    numbers = [float(x) for x in numbers]
    return numbers if value[n] == seal([key, numbers]) else None


class Runner(StepRunner):
    """Runs one STS strategy with one ``Scorer`` into one ``Results`` file: ``StepRunner`` with the whole search as
    ``run`` (the model's own representation first, the strategy, the verdict, held-out validation)."""

    scorer: Scorer
    results: Results

    def run(self, validate_on=(), validate_top: int | None = None, show_progress_bar=None, announce=None) -> Results:
        """``StepRunner.run`` over STS templates (validation on held-out STS tasks); the results."""
        return super().run(validate_on, validate_top, show_progress_bar, announce)

    def begin(self) -> Representation:
        """The model's own representation scored first (``score_own``), the results tracking the scorer's work."""
        self.results.track(self.scorer.work)
        own = score_own(self)
        self.scorer.keep_vectors(self.strategy.keeps_vectors())
        return own

    def settled(self, own: Representation, done: Settled) -> None:
        record_verdict(self, own, done)

    def validation_extra(self, own: Representation, top: int | None) -> list:
        """The answer and the best [MASK] template (``validate_top`` None), else the model's own, the answer and what
        the strategy adds (greedy's path)."""
        results = self.results
        assert results.best is not None  # the model's own representation, at least, was scored
        if top is None:  # what the answer is and what the best template would have been: no more
            mask = results.best_mask()
            return [results.best.entry_key] + ([mask.entry_key] if mask is not None else [])
        return [own, results.best.entry_key] + list(self.strategy.validation_extra(results))
