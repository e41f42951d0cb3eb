"""Paper-style tables: one row per representation, one column per task, plus the average."""

from __future__ import annotations

import json
from typing import Sequence

import numpy as np

from ..data import TASK_NAMES
from ..encoding.reps import Rep


def average(task_results: dict[str, dict]) -> float:
    return float(np.mean([v["spearman"] for v in task_results.values()]))


def format_table(rows: list[tuple[str, dict[str, dict]]], tasks: Sequence[str], extra: dict[str, dict[str, str]] | None = None,
                 markdown: bool = True) -> str:
    """Paper-style table: one row per representation, one column per task, plus Avg."""
    extra = extra or {}
    extra_cols = list(dict.fromkeys(c for v in extra.values() for c in v))
    cols = [TASK_NAMES.get(t, t) for t in tasks] + (["Avg."] if len(tasks) > 1 else []) + extra_cols
    body = []
    for label, res in rows:
        cells = [f"{res[t]['spearman']:.2f}" for t in tasks]
        if len(tasks) > 1:
            cells.append(f"{average(res):.2f}")
        cells += [extra.get(label, {}).get(c, "") for c in extra_cols]
        body.append([label] + cells)
    return _render(["representation"] + cols, body, markdown)


def _render(header: list[str], body: list[list[str]], markdown: bool) -> str:
    """A table with a left-aligned label column and right-aligned number columns: markdown or plain."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * (len(header) - 1)) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    fmt = lambda row: "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in body])


def results_json(rows: list[tuple[Rep, dict[str, dict]]], model: str) -> str:
    return json.dumps({"model": model, "results": [{**rep_fields(r), "label": r.label, "tasks": res} for r, res in rows]},
                      indent=2)


def rep_fields(r: Rep) -> dict:
    """A representation as JSON fields: {template, denoise, pooling, head} (None where unused)."""
    return r.fields()


def mean_std(per_seed: Sequence[dict[str, dict]], tasks: Sequence[str]) -> dict[str, tuple[float, float]]:
    """{task: (mean, std)} of Spearman over runs (seeds), plus "Avg." (of each run's average);
    std is the sample standard deviation (ddof=1), 0 for a single run."""
    cols = {t: [r[t]["spearman"] for r in per_seed] for t in tasks}
    if len(tasks) > 1:
        cols["Avg."] = [float(np.mean([r[t]["spearman"] for t in tasks])) for r in per_seed]
    return {t: (float(np.mean(v)), float(np.std(v, ddof=1)) if len(v) > 1 else 0.0) for t, v in cols.items()}


def format_seed_table(rows: list[tuple[str, Sequence[dict[str, dict]]]], tasks: Sequence[str], markdown: bool = True) -> str:
    """One row per (label, runs): each cell "mean ± std" over the runs (a single run: its number)."""
    cols = [TASK_NAMES.get(t, t) for t in tasks] + (["Avg."] if len(tasks) > 1 else [])
    body = []
    for label, runs in rows:
        ms = mean_std(runs, tasks)
        body.append([label] + [f"{m:.2f} ± {s:.2f}" if len(runs) > 1 else f"{m:.2f}" for m, s in ms.values()])
    return _render(["representation"] + cols, body, markdown)
