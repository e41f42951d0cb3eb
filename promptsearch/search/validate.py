"""Held-out validation of a search's winners: the top-k templates (by the scoring set) scored on
other data sets, so one can see whether a search over-fits its dev set.

Each held-out score is a :class:`Scorer` score on that task (the one evaluator, the reference
precision, the same cache), so it equals what ``promptsearch eval`` prints for the template.
"""

from __future__ import annotations

from tqdm.auto import tqdm

from ..data import DataOptions
from .results import Results
from .scorer import Scorer

DEFAULT_VALIDATE_ON = ("stsb", "sickr")  # the STS-B and SICK-R test sets


def validate(results: Results, scorer: Scorer, tasks, top: int = 5, extra=(), show_progress_bar=None, announce=None) -> None:
    """Score the best ``top`` templates of ``results`` (and ``extra`` ones it holds, e.g. greedy's
    path) on every task; store them in their entries' ``validation`` (and its time in the results'
    ``validation``) and save the results. ``announce(line)`` is told its size before it starts."""
    import time

    t0 = time.perf_counter()
    tasks = list(dict.fromkeys(tasks))
    chosen = [e.entry_key for e in results.ranked()[:top]]
    chosen += [k for k in extra if k in results.entries and k not in chosen]
    if announce is not None and chosen and tasks:
        announce(f"held-out validation: {len(chosen)} representations on {', '.join(tasks)} ({len(chosen) * len(tasks)} "
                 "scores, not search work; validate_top=0 skips it)")
    results.validation = {"tasks": tasks, "top": top}
    show = not (show_progress_bar is False)
    with tqdm(total=len(tasks) * len(chosen), desc="held-out", leave=False, disable=not show, unit="template") as bar:
        for task in tasks:
            held = scorer.on(task)
            by_layer: dict = {}  # the single templates of each read-out layer: scored together
            for t in chosen:
                e = results.entries[t]
                if not e.members:
                    by_layer.setdefault(e.layer, []).append(e)
            values = {e.entry_key: sc.spearman for layer, es in by_layer.items()
                      for e, sc in zip(es, held.at_layer(layer).score_many([e.entry_key.without_layer for e in es]))}
            for t in chosen:
                e = results.entries[t]
                value = values[t] if t in values else held.score_members(e.members).spearman
                e.validation = {**(e.validation or {}), task: round(value, 4)}  # not search work
                bar.update(1)
    for t in chosen:  # in the order of --validate-on
        v = results.entries[t].validation or {}
        results.entries[t].validation = {k: v[k] for k in tasks if k in v} or None
    results.validation["seconds"] = round(time.perf_counter() - t0, 1)
    results.save()


def held_out_tasks(spec: str, top: int, data: DataOptions = DataOptions()) -> list[str]:
    """The held-out tasks ``spec`` names (none when ``top`` is 0), each read now — not after the search."""
    from ..data import expand_tasks, load_task
    from ..errors import DataError, PromptSearchError

    try:
        tasks = expand_tasks(spec) if top and spec.strip() else []
        for t in tasks:
            load_task(t, data.data_dir, data.fmt)
    except DataError as exc:
        raise PromptSearchError(f"held-out validation: {exc}; pass validate_on=TASKS, or validate_top=0 to skip "
                                "it") from None
    return tasks
