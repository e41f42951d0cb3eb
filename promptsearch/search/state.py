"""What a search leaves in its results file besides the scores, as typed records.

Each record is one field of the results file (``results.schema.json`` checks its shape when a file
is read), built from it by ``from_json`` and written back by ``to_json``; the code between
reads attributes, never dictionary keys:

============== ======================== ==========================================================
file field     record                   written by
============== ======================== ==========================================================
``path``       list of ``PathStep`` greedy: one record per step of its path (Table 4)
``x_baseline`` ``Verdict``         every search: the model's own representation, and whether
                                        the search's best beat it beyond its noise
``x_spread``   ``Spread``          every search: min / median / max of what was scored
``x_study``    ``StudyRef``        Optuna: where the study lives, trials finished and pruned
``x_pareto``   ``ParetoFront``     Optuna over several dev sets: the non-dominated entries
``x_generated`` ``Generated``      t5 / mlm: templates generated, pairs used, kept
``x_races``    ``RaceState`` each  racing (greedy), one per race: its rungs done, who is left, who
                                        was dropped, the finalists — so an interrupted race resumes
============== ======================== ==========================================================
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from dataclasses import field as dataclass_field
from typing import ClassVar, Sequence

import numpy as np

from ..representation import Representation


@dataclass
class _Record:
    """A results-file field as a record: the keys it was written with, ``None`` ones left out."""

    field: ClassVar[str]

    def to_json(self):
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}

    @classmethod
    def from_json(cls, d: dict):
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class PathStep(_Record):
    """One step of greedy's path as the results file records it (``"path"``): its ``stage`` ("relation",
    "relation:best", "prefix", "stop", "demos", "layer", "layer:best", "readout", "readout:best",
    "readout-prefix", "readout-stop", "ensemble"), the template and its score, and — for a step that
    had to beat the template before it — the gain, its standard error and the threshold."""

    field: ClassVar[str] = "path"
    stage: str
    step: int
    template: str
    spearman: float
    candidates: int | None = None
    score_se: float | None = None
    layer: int | None = None
    lead: str | None = None
    members: tuple[Representation, ...] | None = None  # an ensemble's (written as their keys' text)
    taken: bool | None = None
    gain: float | None = None
    se: float | None = None
    min_gain: float | None = None
    dropped: list | None = None

    def settle(self, judged, score_se: float, stop: str | None = None) -> None:
        """The step judged (``Runner.step``): the gain, its error and the threshold (4 places), the representation's
        own standard error, and ``taken`` — or, with ``stop``, the stage the row takes when the step is not taken.

        :param judged: the ``Judged`` step.
        :param score_se: the standard error of this step's representation's own score.
        :param stop: the stage the row takes when the step is not taken (None: ``taken`` says)."""
        self.gain, self.se, self.min_gain = judged.noise["gain"], judged.noise["se"], judged.noise["min_gain"]
        self.score_se = round(score_se, 4)
        if stop is None:
            self.taken = judged.taken
        elif not judged.taken:
            self.stage = stop

    @property
    def entry_key(self) -> Representation:
        """The entry this step scored: the template (a pooled read-out's key), at its layer, or the ensemble's
        members.

        :returns: the ``Representation``.
        """
        if self.members:
            return Representation.ensemble(self.members)
        k = Representation.split(self.template)  # a key this tool wrote: a read-out's suffix split off
        return k if self.layer is None else Representation(k.template, self.layer)

    @property
    def key(self) -> str:
        """Its ``entry_key`` as text.

        :returns: the key's text.
        """
        return self.entry_key.text

    def to_json(self):
        """The row as a results file writes it (an ensemble's members as text).

        :returns: a JSON-ready dict.
        """
        d = super().to_json()
        if self.members:
            d["members"] = [m.text for m in self.members]
        return d

    @classmethod
    def from_json(cls, d: dict):
        """A row read back from a results file's dict (what ``to_json`` wrote).

        :param d: the row's dict.
        :returns: the row.
        """
        step = super().from_json(d)
        if step.members:
            step.members = tuple(Representation.split(m) for m in step.members)
        return step


def weighed_words(weighed: str | None) -> str:
    """A verdict's challenger in words, by what it was (``Settled.weighed``; None in files written before it was
    recorded: "the best")."""
    return {"answer": "the search's answer", "highest": "the best of the rest"}.get(weighed or "", "the best")


@dataclass
class Verdict(_Record):
    """The model's own representation (``key``, its ``spearman``, what was ``reads`` as it) against the search's
    ``best``: the gain, its standard error, the threshold it had to clear, and whether the model's own was
    ``kept``. Before a search settles only ``key`` is known."""

    field: ClassVar[str] = "x_baseline"
    key: Representation
    spearman: float | None = None
    best: Representation | None = None
    best_spearman: float | None = None
    gain: float | None = None
    se: float | None = None
    min_gain: float | None = None
    kept: bool | None = None
    # what was read as the model's own, in words (its stack: pooling, Dense, max length, prompt)
    reads: str | None = None
    # what ``best`` is: "answer" (the strategy's answer) or "highest" (the highest score of the rest, weighed when the
    # strategy answered with the model's own); None in files written before it was recorded
    weighed: str | None = None

    @property
    def settled(self) -> bool:
        """Whether the search has settled (``kept`` is known).

        :returns: True once settled.
        """
        return self.kept is not None

    def to_json(self):
        """The verdict as a results file writes it (keys as text).

        :returns: a JSON-ready dict.
        """
        d = super().to_json()
        return {**d, "key": self.key.text, **({"best": self.best.text} if self.best is not None else {})}

    @classmethod
    def from_json(cls, d: dict):
        """A verdict read back from a results file's dict (what ``to_json`` wrote).

        :param d: the verdict's dict.
        :returns: the verdict.
        """
        v = super().from_json(d)
        v.key, v.best = Representation.parse(v.key), v.best and Representation.parse(v.best)
        return v


@dataclass
class Spread(_Record):
    """Everything scored: how many, min / median / max, and the model's own score and rank (1: best)."""

    field: ClassVar[str] = "x_spread"
    n: int
    min: float
    median: float
    max: float
    own: float | None = None
    own_rank: int | None = None

    @classmethod
    def of(cls, scores: Sequence[float], own: float | None, places: int) -> "Spread":
        """The spread of ``scores`` (every kind of task's: STS Spearman, retrieval nDCG@10), rounded to ``places``.

        :param scores: every candidate's score (one or more).
        :param own: the model's own score (one of ``scores``); None: not scored (no rank).
        :param places: decimal places kept.
        :returns: the spread; ``own_rank`` 1 when nothing scored higher than the model's own."""
        s = np.asarray(scores, dtype=float)
        return cls(n=int(len(s)), min=round(float(s.min()), places), median=round(float(np.median(s)), places),
                   max=round(float(s.max()), places), own=None if own is None else round(float(own), places),
                   own_rank=None if own is None else int((s > own).sum()) + 1)


@dataclass
class StudyRef(_Record):
    """An Optuna search's study: its storage URL and name (to open it again), trials finished and pruned."""

    field: ClassVar[str] = "x_study"
    storage: str
    study_name: str
    finished: int = 0
    pruned: int = 0


@dataclass
class ParetoFront(_Record):
    """The entries no other entry beats on every dev set (Optuna over several sets), best objective first."""

    field: ClassVar[str] = "x_pareto"
    keys: list[Representation]

    def to_json(self):
        """The front as a results file writes it.

        :returns: the keys as text, in order.
        """
        return [k.text for k in self.keys]

    @classmethod
    def from_json(cls, d):
        """A front read back from a results file's list (what ``to_json`` wrote).

        :param d: the keys as text.
        :returns: the front.
        """
        return cls([Representation.parse(k) for k in d])


@dataclass
class Generated(_Record):
    """What a generating strategy (t5, mlm) made: distinct templates, WordNet pairs used, templates kept."""

    field: ClassVar[str] = "x_generated"
    distinct: int
    pairs_used: int
    kept: int | None = None


@dataclass
class RaceState(_Record):
    """One race's resumable state (``x_races`` holds one per race, by ``race_key``):
    the ``contenders`` still racing and the ``rungs_done`` (once a rung ran), each one ``dropped``
    ({"template", "rung": pairs seen}), the ``final``-ists once it is decided, and the ``known`` candidates an
    earlier version recorded as cached (they resume as they began)."""

    field: ClassVar[str] = "x_races"
    known: list[str] = dataclass_field(default_factory=list)
    dropped: list[dict] = dataclass_field(default_factory=list)
    contenders: list[str] | None = None
    rungs_done: int | None = None
    final: list[str] | None = None
