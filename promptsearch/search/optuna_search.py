"""Optuna over a template grammar: TPE sampling, successive-halving pruning on growing
subsets of STS-B dev, resumable and shareable RDB storage.

Each trial picks one option per grammar slot (``trial.suggest_categorical``). It is scored
on 1/8, 1/4, 1/2 and then all of the dev pairs (a fixed random order), reporting each
partial Spearman; ``SuccessiveHalvingPruner`` stops bad templates early. A template scored
before (by any strategy) is answered from the cache.

The study lives in any Optuna RDB storage (``sqlite:///study.db``, PostgreSQL, MySQL), so
re-running the same command resumes it and several workers — processes or machines pointed
at one URL and study name — share it. ``--trials N`` is the study's total of finished
(complete or pruned) trials; trials of a killed worker are detected by heartbeat and retried.
"""

from __future__ import annotations

import contextlib
import logging
import os
import random
import re
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import TrialState

from .grammar import Grammar
from ..template import entry_key
from .results import Entry, Results
from .scorer import Score, Scorer

FINISHED = (TrialState.COMPLETE, TrialState.PRUNED)


class _Interrupts:
    """Ctrl-C and SIGTERM during a study: raised at once while a template is being encoded, held back
    while Optuna writes to its storage — an interrupt there left trials RUNNING, broke Optuna
    itself (``UnboundLocalError: updated_state``) or left a SQLite transaction open. Optuna then
    records the interrupted trial as failed and re-raises; its log of that failure (a traceback) is
    dropped, so nothing is printed but the CLI's one line.

    An interrupt stays requested until it is seen leaving the objective: a signal handler can run
    inside a garbage-collector callback, where Python swallows the exception ("Exception ignored
    in ..."), so it is raised again at the next checkpoint (after each encoded rung). Signals after
    that are ignored while the study unwinds. The handlers that were installed (the CLI's SIGTERM
    one) still run."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.scoring = False
        self.requested = None  # (signum, frame) of a signal not yet seen leaving the objective
        self.delivered = False
        self.previous: dict = {}
        self.handlers: list = []

    def __enter__(self):
        for sig in self.SIGNALS:
            try:
                self.previous[sig] = signal.signal(sig, self._handle)
            except ValueError:  # not the main thread: signals are the main thread's business
                pass
        # Optuna's records propagate from child loggers to the handlers of "optuna": filter there
        self.handlers = list(logging.getLogger("optuna").handlers)
        for h in self.handlers:
            h.addFilter(self._quiet_after_interrupt)
        self.unraisable, sys.unraisablehook = sys.unraisablehook, self._swallowed
        return self

    def _swallowed(self, unraisable) -> None:
        """Python prints an exception raised in a GC callback ("Exception ignored in ..."): not ours,
        which is raised again at the next checkpoint."""
        if not isinstance(unraisable.exc_value, KeyboardInterrupt):
            self.unraisable(unraisable)

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            signal.signal(sig, handler)
        for h in self.handlers:
            h.removeFilter(self._quiet_after_interrupt)
        sys.unraisablehook = self.unraisable
        if self.requested and not self.delivered and exc[0] is None:
            self._raise()

    def _handle(self, signum, frame):
        if self.delivered or self.requested:
            return  # already on its way out
        self.requested = (signum, frame)
        if self.scoring:
            self._raise()

    def _raise(self):
        signum, frame = self.requested
        handler = self.previous.get(signum)
        if callable(handler):
            handler(signum, frame)  # the default SIGINT handler raises KeyboardInterrupt itself
        raise KeyboardInterrupt

    def _quiet_after_interrupt(self, record: logging.LogRecord) -> bool:
        """Optuna logs the interrupted trial as failed, with a traceback: an interrupt is no failure to show."""
        return not self.requested or record.levelno >= logging.ERROR

    @contextlib.contextmanager
    def objective(self):
        """Around the whole objective: notes the interrupt leaving it."""
        try:
            yield
        except KeyboardInterrupt:
            self.delivered = True
            raise

    @contextlib.contextmanager
    def scoring_region(self):
        """Where an interrupt may land at once: encoding, no storage write. One held back, or
        swallowed on the way, is raised here, before and after."""
        if self.requested:
            self._raise()
        self.scoring = True
        try:
            yield
        finally:
            self.scoring = False
        if self.requested:
            self._raise()


def open_storage(url: str, attempts: int = 5) -> optuna.storages.BaseStorage:
    """RDB storage with heartbeats (a killed worker's trial is failed and retried once).

    Workers started together on a fresh database race to create its tables; the loser
    retries and then finds them.
    """
    import warnings

    from sqlalchemy.exc import IntegrityError, OperationalError

    kwargs = {"connect_args": {"timeout": 60}} if url.startswith("sqlite") else {}
    for attempt in range(attempts):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # heartbeat args are flagged experimental/deprecated, still supported
                return optuna.storages.RDBStorage(
                    url, engine_kwargs=kwargs, heartbeat_interval=30, grace_period=90,
                    failed_trial_callback=optuna.storages.RetryFailedTrialCallback(max_retry=1),
                )
        except (OperationalError, IntegrityError):
            if attempt == attempts - 1:
                raise
            time.sleep(0.5 + random.random())
    raise AssertionError("unreachable")


@dataclass
class OptunaSearch:
    storage: str
    study_name: str
    trials: int = 60
    grammar: str = "grammar"
    seed: int | None = None
    prune: bool = True
    pareto: bool = False  # one objective per dev set: a multi-objective study, its Pareto front in the results
    layers: str | list | None = None  # the read-out layer as a trial parameter: "all" or hidden_states indices
    show_progress_bar: bool | None = None
    name: str = "optuna"
    study: optuna.Study | None = None
    done_before: int = 0  # trials the study had finished when this run started
    started: float = 0.0
    _grammar: Grammar | None = field(default=None, repr=False)

    def settings(self) -> dict:
        return {"grammar": self.grammar, "trials": self.trials, "storage": self.storage, "study_name": self.study_name,
                "prune": self.prune and not self.pareto, "seed": self.seed, **({"pareto": True} if self.pareto else {}),
                **({"layers": self.layers} if self.layers else {})}

    def check(self, scorer: Scorer) -> None:
        """Refuse what cannot run before the results file opens."""
        self.check_datasets(scorer.dataset)
        scorer.layer_list(self.layers)

    def check_datasets(self, dataset: str) -> None:
        """The grammar, and with ``pareto`` two or more dev sets in ``dataset`` (before a model loads)."""
        from ..data import scoring_sets

        self.load_grammar()
        if self.pareto and len(scoring_sets(dataset)) < 2:
            from ..errors import PromptSearchError

            raise PromptSearchError("--pareto makes one objective per dev set: give two or more, e.g. --dataset "
                                    "stsb-dev,sick-trial")

    def describe(self) -> str:
        g = self.load_grammar()
        return (f"study {self.study_name!r} in {self.storage}: grammar {g.source} has {g.size} templates; target "
                f"{self.trials} finished trials")

    def open_study(self, n_pairs: int = 1500, n_objectives: int = 1) -> optuna.Study:
        """Rungs sit at 1/8, 1/4 and 1/2 of the pairs: the resource (step) is the number of pairs. A
        multi-objective study (``pareto``) is not pruned: Optuna prunes single-objective studies only."""
        sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=10)
        if self.pareto:
            return optuna.create_study(study_name=self.study_name, storage=open_storage(self.storage), sampler=sampler,
                                       directions=["maximize"] * n_objectives, load_if_exists=True)
        pruner = (optuna.pruners.SuccessiveHalvingPruner(min_resource=max(n_pairs // 8, 1), reduction_factor=2)
                  if self.prune else optuna.pruners.NopPruner())
        return optuna.create_study(study_name=self.study_name, storage=open_storage(self.storage), sampler=sampler,
                                   pruner=pruner, direction="maximize", load_if_exists=True)

    def run(self, scorer: Scorer, results: Results) -> None:
        try:
            self._run(scorer, results)
        except optuna.exceptions.StorageInternalError as exc:
            from ..errors import PromptSearchError

            raise PromptSearchError(f"Optuna storage {self.storage} failed ({exc}); check the --storage URL") from None

    def summary(self) -> str:
        """The study's trial counts and this run's throughput (and a multi-objective study's Pareto front)."""
        out = format_study_summary(self.study, self.done_before, time.time() - self.started)
        if self.pareto:
            front = sorted(self.study.best_trials, key=lambda t: -sum(t.values))
            out += f"\nPareto front ({len(front)} templates, no other scores higher on every set):" + "".join(
                f"\n  {' / '.join(f'{v:.2f}' for v in t.values)}  {t.user_attrs.get('template')}" for t in front)
        return out

    def load_grammar(self) -> Grammar:
        """The grammar, read once per strategy (a bad file fails here, before anything is written)."""
        if self._grammar is None:
            self._grammar = Grammar.load(self.grammar)
        return self._grammar

    def _run(self, scorer: Scorer, results: Results) -> None:
        grammar = self.load_grammar()
        layers = scorer.layer_list(self.layers)
        n = len(scorer.gold)
        study = self.study = self.open_study(n, len(scorer.datasets))
        self.done_before, self.started = finished_trials(study), time.time()
        study.set_user_attr("model", results.model)
        study.set_user_attr("dataset", scorer.dataset)
        rungs = [max(n // 8, 1), max(n // 4, 1), max(n // 2, 1), n]

        def objective(trial: optuna.Trial) -> float:
            with interrupts.objective():
                return score(trial)

        def score(trial: optuna.Trial) -> float:
            # Optuna's trial calls write to the storage: an interrupt is held back during them (one
            # landing inside a SQLite write left its transaction open, and the next write waited out
            # the lock timeout); it lands at once only while a rung is being encoded.
            choice = {name: trial.suggest_categorical(name, list(opts)) for name, opts in grammar.slots.items()}
            template = grammar.render(choice)
            sc = scorer.at_layer(trial.suggest_categorical("layer", layers)) if layers else scorer  # a view: same cache
            trial.set_user_attr("template", template)
            trial.set_user_attr("worker", os.getpid())
            if self.pareto:  # every set's full score: one objective each
                full = sc.score(template)
                results.add(full, f"optuna:trial {trial.number}")
                return tuple(full.sets[d] for d in scorer.datasets)
            if not self.prune:  # nothing to decide on a rung: the full set at once (eval's batches and number)
                full = sc.score(template)
                results.add(full, f"optuna:trial {trial.number}")
                return full.spearman
            hit = sc.cached(template)
            if hit is not None:
                results.add(Score(template, hit, scorer.denoise, 0.0, cached=True, layer=sc.layer), f"optuna:trial {trial.number}")
                return hit
            rungs_done = sc.score_progressive(template, rungs, seed=0)
            while True:
                with interrupts.scoring_region():
                    step = next(rungs_done, None)
                if step is None:
                    break
                pairs, value = step
                if pairs < n:
                    trial.report(value, pairs)
                    if trial.should_prune():
                        trial.set_user_attr("pruned_at_pairs", pairs)
                        raise optuna.TrialPruned()
            results.add(Score(template, value, scorer.denoise, sc.last_seconds, sets=sc.last_sets, layer=sc.layer),
                        f"optuna:trial {trial.number}")
            return value

        def sync(study: optuna.Study, _trial) -> None:
            # Other workers' completed trials too, so whichever writes last has them all.
            trials = study.get_trials(deepcopy=False)  # one read of the storage
            for t in trials:
                tmpl = t.user_attrs.get("template")
                key = tmpl and entry_key(tmpl, t.params.get("layer"))
                if t.state == TrialState.COMPLETE and tmpl and key not in results.entries:
                    results.entries[key] = _entry(t, scorer)
            if self.pareto:  # the non-dominated trials' templates, best objective first
                front = {entry_key(t.user_attrs["template"], t.params.get("layer")) for t in study.best_trials
                         if "template" in t.user_attrs}
                results.extras["x_pareto"] = [e.key for e in results.ranked() if e.key in front]
            results.extras["x_study"] = {"storage": self.storage, "study_name": self.study_name,
                                         "finished": sum(t.state in FINISHED for t in trials),
                                         "pruned": sum(t.state == TrialState.PRUNED for t in trials)}
            results.save()

        done = len(study.get_trials(deepcopy=False, states=FINISHED))
        remaining = max(self.trials - done, 0)
        interrupts = _Interrupts()
        with interrupts:
            if remaining:
                study.optimize(objective, n_trials=remaining,
                               callbacks=[optuna.study.MaxTrialsCallback(self.trials, states=FINISHED), sync],
                               show_progress_bar=self.show_progress_bar is not False, gc_after_trial=False)
            sync(study, None)


def _entry(t, scorer: Scorer) -> Entry:
    """Another worker's finished trial as an entry (a multi-objective trial: each set's score, and the objective)."""
    layer = t.params.get("layer")
    if len(t.values) > 1:
        sets = dict(zip(scorer.datasets, t.values))
        return Entry(t.user_attrs["template"], round(scorer.evaluator.value(sets), 4), scorer.denoise, 0.0,
                     f"optuna:trial {t.number}", t.number + 1, sets={k: round(v, 4) for k, v in sets.items()}, layer=layer)
    return Entry(t.user_attrs["template"], round(float(t.value), 4), scorer.denoise, 0.0, f"optuna:trial {t.number}",
                 t.number + 1, layer=layer)


def optuna_summary(study: optuna.Study) -> dict:
    states = [t.state for t in study.get_trials(deepcopy=False)]
    return {s.name.lower(): states.count(s) for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL, TrialState.RUNNING)}


def default_study_name(model: str, dataset: str, denoise: bool, pareto: bool = False) -> str:
    """promptsearch-<model>-<dataset>-<denoised|raw>[-pareto]: one study per (model, data, variant, kind)."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", model).strip("-")[-60:] or "model"
    return f"promptsearch-{slug}-{dataset}-{'denoised' if denoise else 'raw'}" + ("-pareto" if pareto else "")


def default_storage(out) -> str:
    """A SQLite study beside the results file (``best.json`` → ``best.db``)."""
    return f"sqlite:///{Path(out).resolve().with_suffix('.db')}"


def format_study_summary(study: optuna.Study, done_before: int, seconds: float) -> str:
    """The study's trial counts and this run's throughput, with a note on trials left running."""
    s = optuna_summary(study)
    ran = s["complete"] + s["pruned"] - done_before
    out = (f"\nstudy: {s['complete']} complete, {s['pruned']} pruned, {s['fail']} failed, {s['running']} running trials; "
           f"this run finished {ran} trials in {seconds:.0f}s ({60 * ran / max(seconds, 1e-9):.1f} trials/min)")
    if s["running"]:
        out += (f"\nnote: {s['running']} trial(s) still marked running: another worker's, or left by a worker that was "
                "killed; those are failed and retried once their heartbeat is 90 s old, when a worker of this study next "
                "starts a trial")
    return out


def finished_trials(study: optuna.Study) -> int:
    """Complete and pruned trials (what ``--trials`` counts)."""
    s = optuna_summary(study)
    return s["complete"] + s["pruned"]
