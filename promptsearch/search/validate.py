"""Held-out validation of a search's winners: the top-k templates (by the scoring set) scored on
other data sets, so one can see whether a search over-fits its dev set.

Each held-out score is a ``Scorer`` score on that task (the one evaluator, the reference
precision, the same cache), so it equals what ``promptsearch eval`` prints for the template.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping

from tqdm.auto import tqdm

from ..data import DataOptions, expand_tasks, load_task
from ..encoding.reps import PromptPool
from ..errors import DataError, PromptSearchError
from ..representation import readout_key
from .scorer import Scorer

DEFAULT_VALIDATE_ON = ("stsb", "sickr")  # the STS-B and SICK-R test sets


def validate(results, scorer, tasks, top: int = 5, extra=(), show_progress_bar=None, announce=None) -> None:
    """Held-out validation for any kind of search: the best ``top`` of ``results`` (and ``extra`` ones it holds, e.g.
    the chosen one, greedy's path) scored on every task by ``scorer.on(task)``, a scorer of the same kind on it (its
    ``name`` keys the scores); stored in the entries' ``validation`` (and its time in the results' ``validation``), and
    saved (``held_out``). ``announce(line)`` is told its size and cost (``scorer.held_out_cost``) before it starts.

    :param results: the search's results (updated and saved).
    :param scorer: the search's scorer (``on``, ``held_out_cost``: the STS ``Scorer``, a ``RetrievalScorer``).
    :param tasks: the held-out tasks (STS task names; ``RetrievalTask``\\ s).
    :param top: how many of the best-ranked entries to validate.
    :param extra: further entry keys to validate (those ``results`` does not hold are skipped).
    :param show_progress_bar: False: no progress bar.
    :param announce: a callable told one line (size and cost) before validation starts; None: silent.
    """
    helds: dict[str, Any] = {}
    for task in tasks:  # each set once
        held = scorer.on(task)
        helds.setdefault(held.name, held)
    held_out(results, helds, top, extra, show_progress_bar, announce,
             cost=lambda todo: scorer.held_out_cost(results, helds, todo))


def picked(results, top: int, extra=()) -> list:
    """The entry keys held-out validation scores: the best ``top`` by the search, then ``extra`` ones the results hold.

    :param results: the search's results (any kind's: ``ranked`` and ``entries``).
    :param top: how many of the best.
    :param extra: further keys.
    :returns: the keys, each once."""
    chosen = [e.entry_key for e in results.ranked()[:top]]
    return chosen + [k for k in dict.fromkeys(extra) if k in results.entries and k not in chosen]


def held_out(results, helds: Mapping[str, Any], top: int = 5, extra=(), show_progress_bar=None, announce=None,
             cost: Callable[[dict[str, list]], str | None] | None = None) -> None:
    """Held-out validation for every kind of search (STS templates on held-out sets, retrieval prompts on other
    retrieval sets): the best ``top`` of ``results`` and the ``extra`` it holds, each scored by every held-out scorer;
    each score (its primary metric, the results' ``PLACES``) stored in its entry's ``validation`` under the set's name,
    the sets, ``top`` and the time in the results' ``validation``, and saved. Not search work: nothing here chooses.

    :param results: the search's results (``ranked``, ``entries`` with a ``validation`` each, ``validation``,
        ``PLACES``, ``save``, ``UNIT``: what an entry is called in the announced line, ``label``: a set's name there).
    :param helds: held-out set name → a scorer on it (``TaskScorer``: ``score(keys)`` in order, each with a ``value``).
    :param top: how many of the best-ranked entries to validate.
    :param extra: further entry keys to validate.
    :param show_progress_bar: False: no progress bar.
    :param announce: told one line (size and cost) before validation starts; None: silent.
    :param cost: the cost of scoring the keys to score on each held-out set (its name → them), in words (None, or it
        says None: not said)."""
    t0 = time.perf_counter()
    names = list(helds)
    unit = results.UNIT
    shown = ", ".join(map(results.label, names))  # each set as its kind names it (STS-B, SICK-R; a file: as given)
    chosen = picked(results, top, extra)
    # a resumed file's held-out scores are read back (it is of the same model, data and settings), not scored again;
    # an entry edited by hand is scored again
    suspect: set = getattr(results, "suspect", set())
    todo = {name: [k for k in chosen if k in suspect or name not in (results.entries[k].validation or {})]
            for name in names}
    if announce is not None and chosen and names:
        n, scores = len({k for ks in todo.values() for k in ks}), sum(map(len, todo.values()))
        said = cost(todo) if cost is not None and n else None
        kept = len(chosen) * len(names) - scores
        back = f"{kept} score{'s' if kept > 1 else ''} read back from the results file" if kept else ""
        if scores:
            announce(f"held-out validation: {n} {unit}{'s' if n > 1 else ''} on {shown} ({scores} "
                     f"score{'s' if scores > 1 else ''}{', ' + said if said else ''}{'; ' + back if back else ''}; "
                     "not search work, validate_top=0 skips it)")
        else:
            announce(f"held-out validation: its {back} (on {shown}), not scored again")
    was = float((results.validation or {}).get("seconds", 0.0))  # the time earlier runs spent on it
    results.validation = {"tasks": names, "top": top}
    show = show_progress_bar is not False
    total = sum(map(len, todo.values()))
    with tqdm(total=total, desc="held-out", leave=False, disable=not show or not total, unit="score") as bar:
        for name, held in helds.items():
            keys = todo[name]
            for key, sc in zip(keys, held.score(keys) if keys else ()):  # in one call (a pass per layer / side)
                e = results.entries[key]
                e.validation = {**(e.validation or {}), name: round(float(sc.value), results.PLACES)}
                bar.update(1)
    for key in chosen:  # in the order the sets were given
        v = results.entries[key].validation or {}
        results.entries[key].validation = {k: v[k] for k in names if k in v} or None
    results.validation["seconds"] = round(was + time.perf_counter() - t0, 1)  # in all its runs, as the other stats
    results.save()


def held_out_tasks(spec: str, top: int | None, data: DataOptions = DataOptions()) -> list[str]:
    """The held-out tasks ``spec`` names (none when ``top`` is 0; None: the default validation), each read now —
    not after the search."""
    try:
        tasks = expand_tasks(spec) if top != 0 and spec.strip() else []
        for t in tasks:
            load_task(t, data.data_dir, data.fmt)
    except DataError as exc:
        raise PromptSearchError(f"held-out validation: {exc}; pass validate_on=TASKS, or validate_top=0 to skip "
                                "it") from None
    return tasks


def known_scores(enc, r, tasks, data: DataOptions = DataOptions()) -> dict[str, dict]:
    """``{task: {"spearman"}}`` of representation ``r`` (a ``MaskState`` or ``PromptPool``) on each task, each a
    ``Scorer`` score (what ``eval`` prints): a score any earlier run measured with the same weights, data and
    settings — the search's held-out validation, an earlier seed's or run's start row — comes from the score cache
    instead of another pass. A trainer's ``TrainRun(scores=known_scores)``
    (``promptsearch.train.loop.TaskScores``).

    :param enc: the encoder (model) to score with.
    :param r: the representation: a ``MaskState`` or a ``PromptPool``.
    :param tasks: the task names.
    :param data: where and how tasks are read (and whether progress bars show).
    :returns: ``{task: {"spearman": score}}`` for each task.
    """
    pooled = isinstance(r, PromptPool)
    key = readout_key(r.template, r.readout) if pooled else r.template
    out, first = {}, None
    for task in tqdm(tasks, desc="scoring", leave=False, disable=data.show_progress_bar is False, unit="task"):
        sc = first.on(task) if first else Scorer(enc, dataset=task, denoise=False if pooled else r.denoise, data=data)
        first = first or sc  # the score cache read once
        out[task] = {"spearman": (sc if pooled else sc.at_layer(r.layer)).score(key).spearman}
    return out
