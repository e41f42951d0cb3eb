"""Paper-style tables: one row per representation, one column per task, plus the average."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from ..data import DataOptions, set_label
from ..encoding import MaskState, TopKStatic
from ..encoding.reps import Ditto, Rep, rep, rep_from_key
from ..errors import PromptSearchError
from ..fileio import atomic_write, check_writable
from ..library import causal_templates, paper_templates, resolve_key, resolve_template
from ..representation import is_mask, readout_key
from .anisotropy import anisotropy
from .ditto import search_heads
from .sts import evaluate_reps


def average(task_results: dict[str, dict]) -> float:
    """The mean of the tasks' Spearmans (a table's Avg. column).

    :param task_results: task → ``{"spearman", ...}``, as ``evaluate_reps`` gives them for one rep.
    :returns: the mean, ×100."""
    return float(np.mean([v["spearman"] for v in task_results.values()]))


def format_table(rows: list[tuple[str, dict[str, dict]]], tasks: Sequence[str],
                 extra: dict[str, dict[str, str]] | None = None, markdown: bool = True) -> str:
    """Paper-style table: one row per representation, one column per task, plus Avg.

    :param rows: ``(label, task → {"spearman", ...})`` per representation.
    :param tasks: the task columns, in order.
    :param extra: label → column → cell, for columns after the tasks (None: none).
    :param markdown: a markdown table, else plain aligned text.
    :returns: the table."""
    extra = extra or {}
    extra_cols = list(dict.fromkeys(c for v in extra.values() for c in v))
    cols = [set_label(t) for t in tasks] + (["Avg."] if len(tasks) > 1 else []) + extra_cols
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

    def fmt(row: list[str]) -> str:
        return "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row))

    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in body])


def results_json(rows: list[tuple[Rep, dict[str, dict]]], model: str) -> str:
    """An evaluation's results as JSON text (what ``eval --json`` writes).

    :param rows: ``(rep, task → {"spearman", "subsets", "pairs"})`` per representation.
    :param model: the model's name.
    :returns: ``{"model", "results": [{template, denoise, pooling, head, label, tasks}, ...]}`` as indented JSON."""
    return json.dumps({"model": model,
                       "results": [{**rep_fields(r), "label": r.label, "tasks": res} for r, res in rows]},
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


def format_seed_table(rows: list[tuple[str, Sequence[dict[str, dict]]]], tasks: Sequence[str],
                      markdown: bool = True) -> str:
    """One row per (label, runs): each cell "mean ± std" over the runs (a single run: its number)."""
    cols = [set_label(t) for t in tasks] + (["Avg."] if len(tasks) > 1 else [])
    body = []
    for label, runs in rows:
        ms = mean_std(runs, tasks)
        body.append([label] + [f"{m:.2f} ± {s:.2f}" if len(runs) > 1 else f"{m:.2f}" for m, s in ms.values()])
    return _render(["representation"] + cols, body, markdown)


# ---- the report (every baseline, the paper's templates raw and denoised, the best Ditto head) ----

REPORT_POOLINGS = ("cls", "mean", "first-last", "static", "static-debiased")


def report_reps(enc, templates=None, demos: str | None = None, data: DataOptions = DataOptions()):
    """The report's rows: the baselines, the best Ditto head on STS-B dev, and each template raw
    and denoised (default: the paper's three, or the shipped causal-LM ones with ``demos``);
    returns (reps, (layer, head, STS-B dev))."""
    # given as text: a template (a shipped name, with ``demos``) or a results-entry key (a layer, an ensemble)
    templates = templates and [resolve_key(t, demos) if isinstance(t, str) else t for t in templates]
    if templates is None and enc.model.causal:
        templates = [resolve_template(t, demos) for t in causal_templates()]
    elif templates is None:
        templates = paper_templates(enc.model.config.model_type, compat=enc.compat)
    keyed = []
    for t in templates:  # a template, or a results-entry key (a layer, an ensemble): checked before any pass
        keyed += [enc.resolve(rep_from_key(t)), enc.resolve(rep_from_key(t, denoise=True))]
        enc.check_rep(keyed[-1])
    keyed = list(dict.fromkeys(keyed))  # a pooled read-out has no denoised twin
    best = search_heads(enc, data=data)[0]
    return [rep(pooling=p) for p in REPORT_POOLINGS] + [Ditto(best[0], best[1])] + keyed, best


def report_templates(enc, templates=None, readout: str | None = None):
    """The templates a report scores read out by ``readout``: as given (None: the paper's) for the [MASK] state
    (``readout`` None or mask); for a pooled read-out, each of them (or of the paper's) as its results-entry key."""
    if is_mask(readout):
        return templates
    templates = templates or paper_templates(enc.model.config.model_type, compat=enc.compat)
    return [readout_key(t, readout) for t in templates]


def report(enc, tasks, model: str, templates=None, demos=None, data: DataOptions = DataOptions(), json_path=None,
           log=print) -> str:
    """``promptsearch report``: ``report_reps`` (the Ditto head found is ``log``-ged) scored by
    ``report_table``."""
    reps, (layer, h, s) = report_reps(enc, templates, demos, data)
    log(f"best Ditto head on STS-B dev: {layer}-{h} ({s:.2f})")
    return report_table(enc, reps, tasks, model, data, json_path)


def report_table(enc, reps, tasks, model: str, data: DataOptions = DataOptions(), json_path=None) -> str:
    """The report's Markdown table (with anisotropy); every number also to ``json_path`` if given."""
    res = evaluate_reps(enc, reps, tasks, data)
    aniso = anisotropy(enc, reps)
    extra = {r.label: {"anisotropy": f"{aniso[r]:.3f}"} for r in reps}
    if json_path:
        atomic_write(json_path, results_json([(r, res[r]) for r in reps], model))
    return format_table([(r.label, res[r]) for r in reps], tasks, extra, markdown=True)


def check_report_file(path) -> None:
    """report --json overwrites FILE: only a report of its own, or a new file (never, say, a results file)."""
    p = Path(path)
    check_writable(p, "json", "report.json")
    if p.exists():
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            ok = isinstance(d, dict) and set(d) == {"model", "results"}
        except (OSError, ValueError):
            ok = False
        if not ok:
            raise PromptSearchError(f"json={p} exists and is not a report written by promptsearch report; give a new "
                                    "file name")


def scores_json(res: dict[str, dict], extra: dict | None = None) -> dict:
    """``eval --json``: {task: Spearman} to 4 decimals, "avg" over several tasks, then ``extra``."""
    out = {t: round(v["spearman"], 4) for t, v in res.items()}
    if len(res) > 1:
        out["avg"] = round(sum(v["spearman"] for v in res.values()) / len(res), 4)
    return {**out, **(extra or {})}


def table9(enc, template: str, tasks, data: DataOptions = DataOptions()) -> str:
    """PromptBERT Table 9: the [MASK] state against Eq. 3 (the average of the top-200 tokens' static
    embeddings), each raw and denoised."""
    reps = {f"{name}{' (denoised)' if d else ''}": cls(template, d)
            for name, cls in (("[MASK] token", MaskState), ("avg. top-200 tokens", TopKStatic)) for d in (False, True)}
    res = evaluate_reps(enc, list(reps.values()), tasks, data)
    return format_table([(label, res[r]) for label, r in reps.items()], tasks, markdown=True)


def eval_output(rep, res: dict[str, dict], tasks, anisotropy: float | None = None, as_json: bool = False,
                markdown: bool = False, subsets: bool = False) -> str:
    """What ``promptsearch eval`` prints for one representation: JSON (``scores_json``), or the
    table (with anisotropy) and, if asked, each task's per-subset Spearman."""
    if as_json:
        return json.dumps(scores_json(res, {} if anisotropy is None else {"anisotropy": round(anisotropy, 3)}),
                          indent=2)
    extra = {rep.label: {"anisotropy": f"{anisotropy:.3f}"}} if anisotropy is not None else {}
    lines = [format_table([(rep.label, res)], tasks, extra, markdown=markdown)]
    if subsets:
        lines += [f"\n{t}: " + ", ".join(f"{k} {s:.2f}" for k, s in v["subsets"].items()) for t, v in res.items()]
    return "\n".join(lines)
