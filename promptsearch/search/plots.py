"""Pictures of a results file (``promptsearch plot``), drawn with matplotlib.

* A greedy run: its path, step by step — the objective with its bootstrap standard error, each
  dev set's score and every held-out set's — beside the scores of each step's candidates.
* An Optuna run: the study's history, its parameter importances and (``--pareto``) its Pareto
  front, drawn by ``optuna.visualization.matplotlib`` from the study the results file names.
* Any other run (``score``, ``t5``): the distribution of its scores.
* A retrieval run (``promptsearch retrieval``): every candidate's nDCG@10 with its per-query standard error, the
  model's own and the answer marked, beside each judgement the search made (each step's gain against the lead,
  the verdict against the model's own, the check on the queries it never saw) with the gain it had to beat; an
  Optuna run's study history too, when its study can be opened.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from ..data import set_label
from ..errors import PromptSearchError, first_line, note
from ..fileio import RETRIEVAL, check_writable, results_kind
from ..representation import Representation
from .results import Results
from .state import PathStep

FORMATS = (".svg", ".png", ".pdf")


def _pyplot():
    import matplotlib  # lazy: start-up time

    matplotlib.use("Agg")  # files only: no display needed
    import matplotlib.pyplot as plt  # lazy: start-up time

    return plt


def check_out(out) -> Path:
    """The picture's path: .svg, .png or .pdf, in a writable place (checked before anything is drawn)."""
    p = Path(out)
    check_writable(p, "out", "plot.svg")
    if p.suffix.lower() not in FORMATS:
        raise PromptSearchError(f"out={p}: give a .svg, .png or .pdf file name")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)  # a missing folder is made, as results files' are
    except OSError as exc:
        raise PromptSearchError(
            f"out={p}: cannot make its folder ({exc.strerror or exc}); choose a writable path") from None
    return p


def _path_steps(path: list[PathStep],
                chosen: Representation | None = None) -> list[tuple[str, PathStep, Representation]]:
    """(x label, step, entry key) for each step the search took (``chosen``: the answer, labelled so)."""
    steps = []
    for r in path:
        st = r.stage
        if st == "relation:best":
            steps.append((f"relation: {_short(r.template)}", r, r.entry_key))
        elif st == "prefix":
            steps.append((f"prefix {r.step}: {_short(r.template)}", r, r.entry_key))
        elif st == "layer:best" and r.taken:
            steps.append((f"layer {r.layer}", r, r.entry_key))
        elif st == "readout:best":  # the best pooled read-out, taken or not (its label says which)
            verdict = (" (chosen)" if r.entry_key == chosen else "" if r.taken
                       else " (the best so far: stays)" if r.template == r.lead else " (not taken)")
            steps.append((f"read-out {r.template[:28]}{verdict}", r, r.entry_key))
        elif st == "ensemble" and r.taken:
            assert r.members is not None  # an ensemble step names its members
            steps.append((f"+{len(r.members) - 1} template", r, r.entry_key))
    return steps


def _sources(res: Results) -> dict[str, list[float]]:
    """The full-set scores of each step's single candidates, by source, in the order the search made them
    (the relation step first)."""
    by_source: dict[str, list[float]] = {}
    first: dict[str, int] = {}  # each source's first entry: its place in the search
    for e in res.entries.values():
        if not e.members and e.layer is None:
            by_source.setdefault(e.source or "?", []).append(e.spearman)
            first[e.source or "?"] = min(first.get(e.source or "?", e.order), e.order)
    return {s: by_source[s] for s in sorted(by_source, key=lambda s: (s != "relation", first[s], s))}


def _short(text: str, n: int = 26) -> str:
    """A template shortened for an axis label."""
    return text if len(text) <= n else text[: n - 1] + "…"


def plot_greedy(res: Results, out: Path) -> list[Path]:
    plt = _pyplot()
    best = res.best
    steps = _path_steps(res.path_steps, best.entry_key if best is not None else None)
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.8), gridspec_kw={"width_ratios": [3, 2]})
    xs = range(len(steps))
    objective = "objective (" + res.objective + ")" if len(res.set_names) > 1 else set_label(res.dataset)
    ax.errorbar(xs, [r.spearman for _, r, _ in steps], yerr=[r.score_se or 0.0 for _, r, _ in steps],
                marker="o", capsize=4, lw=2, label=f"{objective} ± bootstrap s.e.")
    lines: dict[str, dict[int, float]] = {}  # a set's name -> {step: score}
    for i, (_, _, key) in enumerate(steps):
        e = res.entries.get(key)
        for name, v in {**((e.sets or {}) if e else {}), **((e.validation or {}) if e else {})}.items():
            lines.setdefault(name, {})[i] = v
    held = set((res.validation or {}).get("tasks", []))
    for name, pts in lines.items():
        ax.plot(list(pts), list(pts.values()), marker="s" if name in held else "^", ls="--" if name in held else ":",
                label=f"{set_label(name)} ({'held out' if name in held else 'dev'})")
    own = _own(res)
    if own is not None:  # the model's own representation: what every step is measured against
        ax.axhline(own.spearman, color="tab:red", ls="-.", lw=1.2, label=f"the model's own ({own.key}) "
                                                                         f"{own.spearman:.2f}")
    ax.set_xticks(list(xs), [s for s, _, _ in steps], rotation=20, ha="right")
    ax.set_ylabel("Spearman × 100")
    ax.set_title(f"greedy path: {res.model}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    by_source = _sources(res)
    names = list(by_source)
    stopped = {f"prefix step {r.step}" for r in res.path_steps if r.stage == "stop"}  # a rejected step's candidates
    bx.boxplot([by_source[n] for n in names], showfliers=False)
    for i, n in enumerate(names, 1):
        bx.scatter([i] * len(by_source[n]), by_source[n], s=10, alpha=0.6)
    bx.set_xticks(range(1, len(names) + 1), [f"{n} (rejected)" if n in stopped else n for n in names], rotation=20,
                  ha="right")
    bx.set_ylabel("Spearman × 100 (full set)")
    if own is not None:
        bx.axhline(own.spearman, color="tab:red", ls="-.", lw=1.2)
    bx.set_title("full-set scores of each step's candidates")
    bx.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return [out]


def _study_storage(recorded: str, given: str | None, path) -> str:
    """Where a results file's Optuna study is opened: ``given``, else the URL the file records (a password kept out of
    it as ``***``: refused in one line that says to give it)."""
    if given:
        return given
    if "***" in recorded:
        raise PromptSearchError(f"{path} records its study's storage {recorded} without its password; give the URL "
                                "with it: storage=URL")
    return recorded


def plot_optuna(res: Results, out: Path, storage: str | None = None) -> list[Path]:
    import optuna  # lazy: start-up time
    from optuna.visualization import matplotlib as ovm  # lazy: start-up time

    from .optuna_search import open_storage  # lazy: start-up time

    assert res.study is not None  # an Optuna run's results name their study
    url = _study_storage(res.study.storage, storage, res.path)
    try:
        study = optuna.load_study(study_name=res.study.study_name, storage=open_storage(url))
    except optuna.exceptions.OptunaError as exc:
        raise PromptSearchError(f"{res.path}: cannot open its Optuna study ({exc}); the study's storage must be "
                                "where the run left it") from None
    plt = _pyplot()
    made = []
    multi = len(study.directions) > 1
    names = res.set_names
    pictures = [("history", lambda: ovm.plot_optimization_history(
        study, target=(lambda t: sum(t.values) / len(t.values)) if multi else None,
        target_name="mean of the sets" if multi else "Spearman × 100"))]
    if len({t.params.get(k) for t in study.trials for k in t.params}) > 1:
        pictures.append(("importances", lambda: ovm.plot_param_importances(
            study, target=(lambda t: sum(t.values) / len(t.values)) if multi else None)))
    if multi:
        pictures.append(("pareto", lambda: ovm.plot_pareto_front(study, target_names=names[: len(study.directions)])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna's matplotlib plots are marked experimental
        for i, (what, draw) in enumerate(pictures):
            ax: Any = draw()  # an Axes, or an array of them (one per parameter or set)
            fig = ax.figure if hasattr(ax, "figure") else ax.flat[0].figure
            fig.set_size_inches(7, 4.5)
            fig.tight_layout()
            path = out if i == 0 else out.with_name(f"{out.stem}-{what}{out.suffix}")
            fig.savefig(path)
            plt.close(fig)
            made.append(path)
    return made


def plot_scores(res: Results, out: Path) -> list[Path]:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.hist([e.spearman for e in res.entries.values()], bins=min(30, max(len(res.entries), 1)), edgecolor="white")
    best, own = res.best, _own(res)
    if best is not None:
        ax.axvline(best.spearman, color="k", ls="--", label=f"chosen {best.key[:40]} {best.spearman:.2f}")
    if own is not None and own is not best:
        ax.axvline(own.spearman, color="tab:red", ls="-.", label=f"the model's own ({own.key}) {own.spearman:.2f}")
    if best is not None:
        ax.legend(fontsize=8, framealpha=0.8)  # a bar it covers still shows through
    from matplotlib.ticker import MaxNLocator  # lazy: start-up time

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # a count of templates: whole numbers
    ax.set_xlabel(f"Spearman × 100 on {set_label(res.dataset)}")
    ax.set_ylabel("templates")
    s = res.spread
    spread = f"; min {s.min:.2f}, median {s.median:.2f}, max {s.max:.2f}" if s else ""
    ax.set_title(f"{res.strategy}: {len(res.entries)} templates, {res.model}{spread}")
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return [out]


def _own(res: Results):
    """The entry of the model's own representation, when the search scored it."""
    return res.entries.get(res.own_key) if res.own_key is not None else None


def plot_results(path, out=None, storage: str | None = None) -> list[Path]:
    """Draw the pictures of the results file ``path`` (into ``out``, default beside it as .svg); the
    files written. An Optuna run's study is opened where the file says, or at ``storage`` (a database's URL with its
    password: the file records it without)."""
    if results_kind(path) == RETRIEVAL:
        return plot_retrieval(path, check_out(out or Path(path).with_suffix(".svg")), storage)
    res = Results.load(path)
    out = check_out(out or Path(path).with_suffix(".svg"))
    if res.path_steps:
        return plot_greedy(res, out)
    if res.study is not None:
        return plot_optuna(res, out, storage)
    if not res.entries:
        raise PromptSearchError(f"{path} holds no scored template yet; nothing to plot")
    return plot_scores(res, out)


TOP = 30  # candidates a retrieval picture lists (the model's own and the answer always among them)


def _candidate_label(c, query: int = 36, document: int = 20) -> str:
    """A retrieval candidate for an axis label: each prompt quoted (newlines escaped) and, when long, shortened in
    its middle, so that prompts differing only at their end stay apart; the read-out always shown."""
    import json  # lazy: only here

    def q(p: str, n: int) -> str:
        p = json.dumps(p, ensure_ascii=False)[1:-1]
        return f'"{p}"' if len(p) <= n else f'"{p[: n // 2]}…{p[len(p) - (n - n // 2 - 1):]}"'

    return f"query {q(c.query, query)}  document {q(c.document, document)}  @{c.readout}"


def plot_retrieval(path, out: Path, storage: str | None = None) -> list[Path]:
    """A retrieval run's picture (see the module's description), and an Optuna run's study history beside it
    (``-history``) when its study's storage opens.

    :param path: the retrieval results file.
    :param out: the picture's path.
    :param storage: the Optuna study's storage URL, where the file's lacks its password (None: the file's).
    :returns: the files written.
    :raises PromptSearchError: for a file with no scored candidate yet."""
    import numpy as np  # lazy: start-up time
    from matplotlib.ticker import MaxNLocator  # lazy: start-up time

    from .retrieval import METRIC, RetrievalResults, mean_se  # lazy: only a retrieval file needs it

    res = RetrievalResults.load(path)
    if not res.entries:
        raise PromptSearchError(f"{path} holds no scored candidate yet; nothing to plot")
    shown = res.ranked()[:TOP]
    for c in (res.own, res.best):
        if c is not None and c in res.entries and res.entries[c] not in shown:
            shown.append(res.entries[c])
    plt = _pyplot()
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(14, 2 + 0.28 * len(shown)), gridspec_kw={"width_ratios": [3, 2]})
    ys = np.arange(len(shown))[::-1]
    se = [x if np.isfinite(x) else 0.0 for x in (mean_se(e.per_query, res.sizes, res.objective) for e in shown)]
    colours = ["tab:red" if e.candidate == res.own else "k" if e.candidate == res.best else "tab:blue" for e in shown]
    ax.errorbar([e.score for e in shown], ys, xerr=se, fmt="none", ecolor="0.6", capsize=2)
    ax.scatter([e.score for e in shown], ys, c=colours, zorder=3, s=18)
    labels = [_candidate_label(e.candidate) + _tags(e.candidate == res.own, e.candidate == res.best) for e in shown]
    ax.set_yticks(ys, labels, fontsize=7)
    sets = f"the {res.objective} of {len(res.sizes)} sets' " if res.sizes else ""
    ax.set_xlabel(f"{sets}{METRIC} on the {res.data.get('queries')} queries searched ± per-query s.e."
                  + (f" of that {res.objective}" if sets else ""))
    s = res.spread
    spread = f"; min {s.min:.4f}, median {s.median:.4f}, max {s.max:.4f}" if s else ""
    ax.set_title(f"{res.strategy.get('name', 'greedy')} on {res.data.get('name')}: {len(res.entries)} candidates, "
                 f"{res.model}{spread}", fontsize=9)
    ax.grid(alpha=0.3)
    rows = _judgements(res)
    yy = np.arange(len(rows))[::-1]
    judged = [(y, r) for y, r in zip(yy, rows) if r[4] is not None]
    bx.errorbar([r[1] for _, r in judged], [y for y, _ in judged], xerr=[r[2] for _, r in judged], fmt="o",
                capsize=4, color="k", ecolor="0.4")
    bx.scatter([r[3] for _, r in judged], [y for y, _ in judged], marker="|", s=300, color="tab:red", zorder=3,
               label="the gain it had to beat")
    for y, r in zip(yy, rows):
        if r[4] is None:  # a step whose best was the lead itself: no step to judge
            bx.scatter([0.0], [y], marker="o", facecolors="none", edgecolors="0.4", zorder=3)
            bx.annotate("the lead scored best: no step", (r[1], y), textcoords="offset points", xytext=(0, 8),
                        fontsize=7, ha="center")
        else:
            bx.annotate("taken" if r[4] else "not taken", (r[1], y), textcoords="offset points", xytext=(6, 6),
                        fontsize=7)
    bx.axvline(0, color="0.5", lw=1)
    bx.xaxis.set_major_locator(MaxNLocator(5))  # few ticks: the panel is narrow
    bx.tick_params(axis="x", labelsize=8)
    bx.set_yticks(yy, [r[0] for r in rows], fontsize=8)
    bx.set_ylim(-0.8, len(rows) - 0.2)
    bx.set_xlabel(f"gain in {METRIC} ± its standard error")
    bx.set_title("the search's judgements: gain ± s.e.", fontsize=9)
    if judged:  # the red marks drawn: say what they are
        bx.legend(fontsize=7)
    bx.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    made = [out]
    history = _retrieval_history(res, out.with_name(f"{out.stem}-history{out.suffix}"), storage)
    return made + ([history] if history is not None else [])


def _tags(own: bool, answer: bool) -> str:
    """What a candidate's label says it is: " (the model's own, the answer)", either alone, or ''."""
    tags = [t for t, on in (("the model's own", own), ("the answer", answer)) if on]
    return f" ({', '.join(tags)})" if tags else ""


def _judgements(res) -> list[tuple[str, float, float, float, bool | None]]:
    """(label, gain, standard error, the gain to beat, taken) of each step of the path (taken None, gain 0: its best
    was the lead itself, nothing judged), then of the verdict and the check on unseen queries."""
    rows: list[tuple[str, float, float, float, bool | None]] = [
        (f"step {s['stage']}", s["gain"], s["se"], s["min_gain"], bool(s["taken"])) if "gain" in s
        else (f"step {s['stage']}", 0.0, 0.0, 0.0, None) for s in res.steps]
    v = res.verdict or {}
    if "gain" in v:
        rows.append(("verdict: vs the model's own", v["gain"], v["se"], v["min_gain"], bool(v.get("taken"))))
    u = v.get("unseen")
    if u is not None:
        rows.append((f"check: {u['queries']} unseen queries", u["gain"], u["se"], u["min_gain"], bool(u["taken"])))
    return rows or [("nothing judged: the model's own scored best", 0.0, 0.0, 0.0, None)]


def _retrieval_history(res, out: Path, storage: str | None = None) -> Path | None:
    """An Optuna retrieval run's study history (None: not an Optuna run, or its study cannot be opened here: said in
    a note)."""
    st = res.strategy or {}
    if st.get("name") != "optuna":
        return None
    import optuna  # lazy: start-up time
    from optuna.visualization import matplotlib as ovm  # lazy: start-up time

    from .study import open_storage  # lazy: start-up time

    try:
        url = _study_storage(str(st.get("storage", "")), storage, res.path)
        study = optuna.load_study(study_name=st["study_name"], storage=open_storage(url))
    except (optuna.exceptions.OptunaError, KeyError, PromptSearchError) as exc:
        note(f"note: the study's history is not drawn ({first_line(exc)})")
        return None
    plt = _pyplot()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optuna's matplotlib plots are marked experimental
        ax: Any = ovm.plot_optimization_history(study, target_name="nDCG@10")
    from matplotlib.ticker import MaxNLocator  # lazy: start-up time

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # trial numbers
    fig = ax.figure
    fig.set_size_inches(7, 4.5)
    fig.tight_layout()
    fig.savefig(out)
    plt.close(fig)
    return out
