"""Training once per seed, and the before/after table: with several seeds, every run's numbers
and their mean ± sample std (also written to ``OUT/seeds.json``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

from ..encoding import MaskState, PromptEncoder
from ..encoding.reps import PromptPool
from ..errors import PromptSearchError
from ..eval.tables import format_seed_table, format_table, mean_std
from ..fileio import atomic_write
from ..template import quote
from .loop import TrainRun

SEEDS_FILE = "seeds.json"


def parse_seeds(text: str | None, default: int) -> list[int]:
    """``0,1,2`` (several runs, reported as mean ± std) or ``[default]`` when ``text`` is None.

    :param text: seeds separated by commas (None: ``default`` alone).
    :param default: the seed when ``text`` is None.
    :returns: the seeds in the order given, each once.
    :raises promptsearch.PromptSearchError: for a seed that is not a whole number of 0 or more, or no seed."""
    if text is None:
        return [default]
    try:
        seeds = list(dict.fromkeys(int(x) for x in text.split(",") if x.strip()))
        if any(x < 0 for x in seeds):
            raise ValueError
    except ValueError:
        raise PromptSearchError(f"seeds={quote(text)}: give whole numbers of 0 or more separated by commas, "
                                "e.g. 0,1,2") from None
    if not seeds:
        raise PromptSearchError("seeds=: give at least one seed, e.g. 0,1,2")
    return seeds


def seed_outputs(out, seeds: Sequence[int]) -> list[Path]:
    """Where each seed's run goes: ``out`` itself for one seed, ``out/seed-N`` for several.

    :param out: the run's output folder.
    :param seeds: the seeds.
    :returns: one folder per seed, in the order of ``seeds`` (nothing is created)."""
    return [Path(out)] if len(seeds) == 1 else [Path(out) / f"seed-{s}" for s in seeds]


def seeds_report(before: Callable[[], PromptEncoder], after: Callable[[Path], PromptEncoder], r: MaskState | PromptPool,
                 tasks: Sequence[str], out, seeds: Sequence[int], labels: Sequence[str],
                 run: TrainRun = TrainRun()) -> str:
    """The before/after table of a training run of representation ``r`` (``before()`` the start
    encoder, ``after(dir)`` a trained one, each built when needed; each score found by ``run.scores``, on
    ``run.data``: through the score cache, scores already measured cost no pass); with several seeds, one row
    per seed and the mean ± std, also written to ``out/seeds.json``.

    :param before: makes the encoder training started from.
    :param after: makes the encoder trained into a folder (one of ``seed_outputs(out, seeds)``).
    :param r: the representation trained and scored.
    :param tasks: the tasks scored (as ``promptsearch.data.expand_tasks`` gives them).
    :param out: the run's output folder.
    :param seeds: the seeds trained with.
    :param labels: the two rows' labels: before, after.
    :param run: how scores are found (``run.scores``) and on which data (``run.data``).
    :returns: the table as Markdown (with several seeds, followed by a line naming the seeds and files)."""

    denoise = getattr(r, "denoise", False)

    def scores(enc):
        return run.scores(enc, r, tasks, run.data)

    outs = seed_outputs(out, seeds)
    if len(seeds) == 1:
        return format_table([(labels[0], scores(before())), (labels[1], scores(after(outs[0])))], tasks, markdown=True)
    start = scores(before())
    runs = [scores(after(o)) for o in outs]
    rows: list[tuple[str, Sequence[dict[str, dict]]]] = [(labels[0], [start])]
    rows += [(f"{labels[1]}, seed {s}", [res]) for s, res in zip(seeds, runs)]
    rows.append((f"{labels[1]}, mean ± std over {len(seeds)} seeds", runs))
    ms = mean_std(runs, tasks)
    atomic_write(Path(out) / SEEDS_FILE, json.dumps({
        "template": r.template, "denoise": denoise, "seeds": list(seeds), "std": "sample (ddof=1)",
        "tasks": {t: {"mean": round(m, 4), "std": round(sd, 4),
                      "runs": [round(res[t]["spearman"], 4) for res in runs] if t in tasks else None}
                  for t, (m, sd) in ms.items()},
        "before": {t: round(start[t]["spearman"], 4) for t in tasks}}, indent=2) + "\n")
    return (format_seed_table(rows, tasks) + f"\n(mean ± sample std over seeds {', '.join(map(str, seeds))}; per-seed "
            f"models in {out}/seed-N; numbers in {Path(out) / SEEDS_FILE})")
