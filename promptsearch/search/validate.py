"""Held-out validation of a search's winners: the top-k templates (by the scoring set) scored on
other data sets, so one can see whether a search over-fits its dev set.

Each held-out score is a ``Scorer`` score on that task (the one evaluator, the reference
precision, the same cache), so it equals what ``promptsearch eval`` prints for the template.
"""

from __future__ import annotations

import time

from tqdm.auto import tqdm

from ..data import DataOptions, expand_tasks, load_task
from ..encoding.reps import PromptPool
from ..errors import DataError, PromptSearchError
from ..representation import readout_key
from .results import Results
from .scorer import Scorer

DEFAULT_VALIDATE_ON = ("stsb", "sickr")  # the STS-B and SICK-R test sets


def validate(results: Results, scorer: Scorer, tasks, top: int = 5, extra=(), show_progress_bar=None,
             announce=None) -> None:
    """Score the best ``top`` templates of ``results`` (and ``extra`` ones it holds, e.g. the chosen one, greedy's
    path) on every task; store them in their entries' ``validation`` (and its time in the results'
    ``validation``) and save the results. ``announce(line)`` is told its size and cost before it starts.

    :param results: the search's results (updated and saved).
    :param scorer: the search's scorer; each task is scored with ``scorer.on(task)``.
    :param tasks: the held-out task names.
    :param top: how many of the best-ranked entries to validate.
    :param extra: further entry keys to validate (those ``results`` does not hold are skipped).
    :param show_progress_bar: False: no progress bar.
    :param announce: a callable told one line (size and cost) before validation starts; None: silent.
    """
    t0 = time.perf_counter()
    tasks = list(dict.fromkeys(tasks))
    chosen = [e.entry_key for e in results.ranked()[:top]]
    chosen += [k for k in extra if k in results.entries and k not in chosen]
    helds = {task: scorer.on(task) for task in tasks} if chosen else {}
    if announce is not None and chosen and tasks:
        announce(f"held-out validation: {len(chosen)} representation{'s' if len(chosen) > 1 else ''} on "
                 f"{', '.join(tasks)} ({len(chosen) * len(tasks)} scores, {cost(results, scorer, helds, len(chosen))}; "
                 "not search work, validate_top=0 skips it)")
    results.validation = {"tasks": tasks, "top": top}
    show = show_progress_bar is not False
    with tqdm(total=len(tasks) * len(chosen), desc="held-out", leave=False, disable=not show, unit="template") as bar:
        for task, held in helds.items():
            for t, sc in zip(chosen, held.score(chosen)):  # each layer's templates together, then ensembles
                e = results.entries[t]
                e.validation = {**(e.validation or {}), task: round(sc.spearman, 4)}  # not search work
                bar.update(1)
    for t in chosen:  # in the order of --validate-on
        v = results.entries[t].validation or {}
        results.entries[t].validation = {k: v[k] for k in tasks if k in v} or None
    results.validation["seconds"] = round(time.perf_counter() - t0, 1)
    results.save()


def cost(results: Results, scorer: Scorer, helds: dict[str, Scorer], n: int) -> str:
    """What held-out validation of ``n`` representations on ``helds`` costs, in words: the sentences it
    encodes, and (when this search encoded anything) about how long that takes at the search's pace."""
    sentences = sum(len(h.sentences) for h in helds.values())
    what = f"{n} × {sentences:,} sentences"
    encodings = sum(results.to_dict()["stats"]["encodings_by_precision"].values())
    if results.seconds <= 0 or encodings <= 0 or not len(scorer.sentences):
        return what
    per_sentence = results.seconds / (encodings * len(scorer.sentences))
    cache = ", less what the score cache holds" if scorer.use_cache else ""
    return f"{what}: about {_duration(per_sentence * sentences * n)} at this search's pace{cache}"


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"


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
