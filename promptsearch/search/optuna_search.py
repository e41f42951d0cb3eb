"""Optuna over a template grammar: TPE sampling, successive-halving pruning on growing
subsets of STS-B dev, resumable and shareable RDB storage.

Each trial picks one option per grammar slot (``trial.suggest_categorical``). It is scored
on 1/8, 1/4, 1/2 and then all of the dev pairs (a fixed random order), reporting each
partial Spearman; ``SuccessiveHalvingPruner`` stops bad templates early. A template scored
before (by any strategy) is answered from the cache. Trials are asked ``batch`` at a time
(``study``) and each rung of a batch's trials still in is one encoding call (``progressive``).

The study lives in any Optuna RDB storage (``sqlite:///study.db``, PostgreSQL, MySQL), so
re-running the same command resumes it and several workers — processes or machines pointed
at one URL and study name — share it. ``--trials N`` is the study's total of finished
(complete or pruned) trials; trials of a killed worker are detected by heartbeat and retried.
"""

from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, ClassVar

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState
from tqdm.auto import tqdm

from ..data import DevSets
from ..errors import PromptSearchError
from ..representation import TEMPLATE_READOUTS, Representation, is_mask, readout_key, uses_first_token
from ..template import Template
from .grammar import Grammar
from .greedy import parse_readouts
from .progressive import Progressive
from .results import Entry, _numbers_differ
from .runner import Runner
from .scorer import Score, Scorer
from .state import ParetoFront, StudyRef
from .strategy import Strategy
from .study import (
    FINISHED,
    RUNNING_WAIT,
    STUDY_EXISTS,
    Heartbeats,
    StudyInterrupts,
    _shown,
    ask_batch,
    check_storage,
    existing_study,
    fail_stale_trials,
    open_storage,
)


@dataclass
class OptunaSearch(Strategy):
    storage: str
    study_name: str
    trials: int = 60
    grammar: str = "grammar"
    seed: int | None = None
    prune: bool = True
    pareto: bool = False  # one objective per dev set: a multi-objective study, its Pareto front in the results
    layers: str | list[int] | None = None  # the read-out layer as a trial parameter: "all" or hidden_states indices
    batch: int = 8  # trials asked at once and encoded together (1: one at a time, as study.optimize runs them)
    # the read-out as a trial parameter: "mask" or these pooled ones (full-set scored)
    readouts: str | list | None = None
    show_progress_bar: bool | None = None
    # told the study's description once it is checked
    announce: Callable[[str], None] | None = field(default=None, repr=False)
    name: str = "optuna"
    SPACE: ClassVar[tuple[str, ...]] = ("grammar", "layers", "readouts")  # pareto: the study refuses it, and says more
    study: optuna.Study | None = None
    opened: optuna.storages.BaseStorage | None = field(default=None, repr=False)  # the study's storage (its heartbeats)
    done_before: int = 0  # trials the study had finished when this run started
    started: float = 0.0
    _grammar: Grammar | None = field(default=None, repr=False)

    @classmethod
    def beside(cls, out, model: str, dataset: str, denoise: bool, storage: str | None = None,
               study_name: str | None = None, **settings) -> "OptunaSearch":
        """An Optuna search whose study is ``storage`` / ``study_name`` when given, else a SQLite study beside the
        results file (``default_storage``) named after the model, data and variant (``default_study_name``):
        the same run then resumes the same study.

        :param out: the results file the run writes (its ``.db`` sibling holds the default study).
        :param model: the model as the user named it.
        :param dataset: the dev set(s) the study scores on.
        :param denoise: whether the templates are scored denoised.
        :param storage: an Optuna RDB URL (None: the default beside ``out``).
        :param study_name: the study's name (None: the default for this model, data and variant).
        :param settings: the search's other fields (``trials``, ``grammar``, ``seed``, ``pareto`` ...).
        :returns: the search."""
        pareto = bool(settings.get("pareto", False))
        return cls(storage=storage or default_storage(out),
                   study_name=study_name or default_study_name(model, dataset, denoise, pareto), **settings)

    def settings(self) -> dict:
        return {"grammar": self.grammar, "trials": self.trials, "storage": _shown(self.storage),
                "study_name": self.study_name,
                "prune": self.prune and not self.pareto, "seed": self.seed, "batch": self.batch,
                **({"pareto": True} if self.pareto else {}),
                **({"layers": self.layers} if self.layers else {}),
                **({"readouts": self._readouts()} if self._readouts() else {})}

    def _pooled_only(self, scorer: Scorer) -> bool:
        """Whether the grammar's templates have no [MASK] on a masked LM (then every trial is pooled)."""
        g = self.load_grammar()
        first = g.render({n: o[0] for n, o in g.slots.items()})
        return Template.parse(first).readout == "last" and not scorer.encoder.model.causal

    def _readouts(self) -> list[str]:
        return parse_readouts(self.readouts)

    def check(self, scorer: Scorer) -> None:
        """Refuse what cannot run before the results file opens."""
        self.check_datasets(scorer.dataset)
        scorer.layer_list(self.layers)

        if other := [r for r in self._readouts() if r not in TEMPLATE_READOUTS]:
            raise PromptSearchError(f"readouts={other[0]} pools a prompt before [X] only, and a grammar's templates "
                                    f"may have text after it: use {', '.join(TEMPLATE_READOUTS)}")
        if any(map(uses_first_token, self._readouts())) and scorer.encoder.model.causal:
            raise PromptSearchError("readouts=cls reads a [CLS] token a causal LM does not have; use mean or "
                                    "sentence-mean")
        if self._pooled_only(scorer) and not self._readouts():
            raise PromptSearchError(f"grammar {self.load_grammar().source} makes templates without [MASK]: read them "
                                    "pooled, e.g. readouts=mean,sentence-mean")
        self.check_study(scorer)
        if self.announce:  # after every check: a refused run says one line, not a study it will not run
            self.announce(self.describe())

    def check_datasets(self, dataset: str | DevSets) -> None:
        """The grammar, with ``pareto`` two or more dev sets in ``dataset``, and the storage (a database
        URL, reachable, its driver installed) — before a model loads, and creating nothing: a new SQLite
        file is made when the search starts."""
        self.load_grammar()
        if self.pareto and len(DevSets.parse(dataset)) < 2:
            raise PromptSearchError("pareto=True makes one objective per dev set: give two or more, e.g. dataset="
                                    "stsb-dev,sick-trial")
        check_storage(self.storage)

    def check_study(self, scorer: Scorer) -> None:
        """A study of this name already in the storage is resumed only if its trials' numbers compare with
        this run's: the same model weights, data contents and scoring settings (what a results file checks),
        the same objectives, and the same options for each trial parameter (Optuna refuses a changed
        categorical in the middle of a trial, which it then leaves running). Reads the storage, writes nothing."""
        found = existing_study(self.storage, self.study_name)
        if found is None:
            return
        storage, sid, where = found
        fresh = STUDY_EXISTS
        n_objectives = len(scorer.datasets) if self.pareto else 1
        if (had := len(storage.get_study_directions(sid))) != n_objectives:
            how = (f"a pareto=True study of {had} objectives (one per dev set); resume it with pareto=True and its "
                   f"{had} sets"
                   if had > 1 else "a single-objective study; resume it without pareto=True")
            raise PromptSearchError(f"{where} is {how}, or {fresh}")
        was, mine = storage.get_study_user_attrs(sid).get("numbers"), self.study_numbers(scorer)
        if was is not None and was.get("denoise", mine["denoise"]) != mine["denoise"]:
            raise PromptSearchError(f"{where} holds denoised scores, this run raw ones (denoise=False); resume it "
                                    "without "
                                    f"that, or {fresh}" if was["denoise"] else f"{where} holds raw scores "
                                                                               "(denoise=False), this run "
                                    f"denoised ones; resume it with denoise=False, or {fresh}")
        if was is not None and (why := _numbers_differ({**was, "denoise": None}, {**mine, "denoise": None})):
            raise PromptSearchError(f"{where} holds scores computed with {why}; its numbers would not compare with "
                                    f"this run's: {fresh}")
        layers, pooled_only = scorer.layer_list(self.layers), self._pooled_only(scorer)
        now = self.distributions(layers, pooled_only)
        for t in storage.get_all_trials(sid, deepcopy=False):
            for name, old in t.distributions.items():
                if name in now:
                    try:
                        optuna.distributions.check_distribution_compatibility(old, now[name])
                    except ValueError:
                        def shown(d) -> str:  # a parameter's options as its flag gives them
                            return ",".join(str(c) for c in getattr(d, "choices",
                                                                    ()) if not (name == "readout" and c == "mask"))

                        what = {"readout": "readouts", "layer": "layers"}.get(name)
                        said = (f"readouts={shown(old)}, not {shown(now[name])} as now" if what == "readouts" else
                                f"layers={shown(old)}, not {shown(now[name])} as now" if what == "layers" else
                                f"another grammar (slot {name!r}'s options differ)")
                        raise PromptSearchError(
                            f"{where} was run with {said}; resume it with the same, or {fresh}") from None

    def study_numbers(self, scorer: Scorer) -> dict:
        """What the study's values were computed with (a results file's numbers, and denoising)."""
        return {**scorer.numbers(), "denoise": scorer.denoise}

    def distributions(self, layers: list[int], pooled_only: bool = False) -> dict:
        """Each trial parameter's options as ``_suggest`` asks them."""
        out = {name: CategoricalDistribution(list(opts)) for name, opts in self.load_grammar().slots.items()}
        if self._readouts():
            out["readout"] = CategoricalDistribution(self._readouts() if pooled_only else ["mask"] + self._readouts())
        if layers:
            out["layer"] = CategoricalDistribution(layers)
        return out

    def describe(self) -> str:
        g = self.load_grammar()

        return (f"study {self.study_name!r} in {_shown(self.storage)}: grammar {g.source} has {g.size} templates; "
                f"target {self.trials} finished trials")

    def open_study(self, n_pairs: int = 1500, n_objectives: int = 1) -> optuna.Study:
        """Rungs sit at 1/8, 1/4 and 1/2 of the pairs: the resource (step) is the number of pairs. A
        multi-objective study (``pareto``) is not pruned: Optuna prunes single-objective studies only."""
        sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=10)
        self.opened = open_storage(self.storage)
        if self.pareto:
            return optuna.create_study(study_name=self.study_name, storage=self.opened, sampler=sampler,
                                       directions=["maximize"] * n_objectives, load_if_exists=True)
        pruner = (optuna.pruners.SuccessiveHalvingPruner(min_resource=max(n_pairs // 8, 1), reduction_factor=2)
                  if self.prune else optuna.pruners.NopPruner())
        return optuna.create_study(study_name=self.study_name, storage=self.opened, sampler=sampler,
                                   pruner=pruner, direction="maximize", load_if_exists=True)

    def propose(self, runner: Runner) -> None:
        try:
            self._run(runner)
        except optuna.exceptions.StorageInternalError as exc:
            raise PromptSearchError(f"Optuna storage {self.storage} failed ({exc}); check the storage= URL") from None

    def summary(self) -> str:
        """The study's trial counts and this run's throughput (and a multi-objective study's Pareto front)."""
        assert self.study is not None  # summed up after a run opened it
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

    def _run(self, runner: Runner) -> None:
        scorer, results = runner.scorer, runner.results
        layers = scorer.layer_list(self.layers)
        n = len(scorer.gold)
        study = self.study = self.open_study(n, len(scorer.datasets))
        opened = self.opened
        assert opened is not None  # open_study opened it
        self.done_before, self.started = finished_trials(study), time.time()
        if self.seed is not None and self.done_before:  # a resumed study: the seed's first draws were made before
            study.sampler = resumed_sampler(self.seed, self.done_before)
        study.set_user_attr("numbers", self.study_numbers(scorer))  # checked when the study is resumed (check_study)
        study.set_user_attr("model", results.model)
        study.set_user_attr("dataset", scorer.dataset)
        interrupts = StudyInterrupts()
        pooled_only = self._pooled_only(scorer)  # a grammar of prompts without [MASK]: every trial pooled
        with interrupts, tqdm(total=max(self.trials - self.done_before, 0), desc="optuna", unit="trial", leave=False,
                              disable=self.show_progress_bar is False) as bar:
            while True:
                interrupts.check()
                fail_stale_trials(study)
                # Optuna's storage writes (ask, suggest, tell) hold an interrupt back: one landing inside a
                # SQLite write left its transaction open. It lands at once only while templates are encoded.
                trials = ask_batch(study, self.batch, self.trials,
                                   lambda trial: self._suggest(trial, layers, pooled_only), RUNNING_WAIT,
                                   interrupts.check)
                if not trials:
                    break
                told: set[int] = set()

                def tell(trial, value=None, state=None) -> None:
                    if state is None:  # a complete trial's value: the full set's (a pruned one says its rung)
                        trial.set_user_attr("value_pairs", len(scorer.gold))
                    study.tell(trial, value, state=state)
                    told.add(trial.number)
                    bar.update(1)

                with interrupts.objective(), Heartbeats(opened, study, trials):
                    try:
                        self._score_batch(trials, runner, interrupts, tell)
                    except BaseException:
                        for t in trials:
                            if t.number not in told:
                                study.tell(t, state=TrialState.FAIL)
                        raise
                self._sync(study, runner)
                with contextlib.suppress(ValueError):  # no complete trial yet
                    bar.set_postfix_str(f"best {study.best_value:.2f}" if not self.pareto else "")
            self._sync(study, runner)

    def _suggest(self, trial: optuna.Trial, layers: list[int], pooled_only: bool = False) -> None:
        """A trial's template (one option per grammar slot) and read-out layer, kept as its attributes."""
        grammar = self.load_grammar()
        choice = {name: trial.suggest_categorical(name, list(opts)) for name, opts in grammar.slots.items()}
        options = self._readouts() if pooled_only else ["mask"] + self._readouts()
        readout = trial.suggest_categorical("readout", options) if self._readouts() else "mask"
        if layers and is_mask(readout):  # a pooled read-out reads the last layer
            trial.suggest_categorical("layer", layers)
        trial.set_user_attr("template", readout_key(grammar.render(choice), readout))

    def _score_batch(self, trials: list[optuna.Trial], runner: Runner, interrupts, tell) -> None:
        """Score a batch's templates together, per read-out layer: on the full set (``pareto``, ``--no-prune``),
        else rung by rung, each rung's new sentences of every template still in one encoding pass, pruned
        trials told at their rung and the rest at the full set."""
        scorer = runner.scorer
        n = len(scorer.gold)
        rungs = sorted({max(n // 8, 1), max(n // 4, 1), max(n // 2, 1)} - {n})
        pooled = {t: t.user_attrs["template"] for t in trials if Representation.split(t.user_attrs["template"]).readout}
        if pooled:  # a pooled read-out's trial: its full-set score at once (the rungs encode [MASK] states)
            with interrupts.scoring_region():
                full = dict(zip(pooled.values(), scorer.score(list(pooled.values()))))
            for t, key in pooled.items():
                runner.record(full[key], f"optuna:trial {t.number}")
                tell(t, tuple(full[key].sets[d] for d in scorer.datasets) if self.pareto else full[key].spearman)
        views: dict = {}
        for t in (t for t in trials if t not in pooled):  # a view per layer: same cache
            views.setdefault(t.params.get("layer"), []).append(t)
        for layer, group in views.items():
            sc = scorer.at_layer(layer)  # None: the scorer itself
            live = {t: t.user_attrs["template"] for t in group}
            if self.pareto or not self.prune:  # nothing to decide on a rung: the full set at once (eval's number)
                with interrupts.scoring_region():
                    full = dict(zip(live.values(), sc.score(list(live.values()))))
                for t, tmpl in live.items():
                    runner.record(full[tmpl], f"optuna:trial {t.number}")
                    tell(t, tuple(full[tmpl].sets[d] for d in scorer.datasets) if self.pareto else full[tmpl].spearman)
                continue
            for t, tmpl in list(live.items()):
                hit = sc.cached(tmpl)
                if hit is not None:
                    runner.record(Score(tmpl, hit, scorer.denoise, 0.0, cached=True, layer=sc.layer), "optuna:trial "
                                                                                                      f"{t.number}")
                    tell(t, hit)
                    del live[t]
            race = Progressive(sc, seed=0)
            for pairs in rungs:
                if not live:
                    break
                with interrupts.scoring_region():
                    values = race.rung(list(live.values()), pairs)
                for t, tmpl in list(live.items()):
                    t.report(values[tmpl], pairs)
                    if t.should_prune():
                        t.set_user_attr("pruned_at_pairs", pairs)
                        # Optuna keeps a pruned trial's last rung score as its value: say it is not the full set's
                        t.set_user_attr("value_pairs", pairs)
                        t.set_user_attr("partial", f"pruned: its value is the Spearman of the first {pairs} of {n} "
                                        "pairs, not comparable with complete trials' full-set values")
                        tell(t, state=TrialState.PRUNED)
                        del live[t]
                for tmpl in set(values) - set(live.values()):
                    race.drop(tmpl)
            if live:
                with interrupts.scoring_region():
                    full = race.finish(list(live.values()))
                for t, tmpl in live.items():
                    runner.record(full[tmpl], f"optuna:trial {t.number}")
                    tell(t, full[tmpl].spearman)

    def _sync(self, study: optuna.Study, runner: Runner) -> None:
        """Other workers' completed trials too, so whichever writes last has them all."""
        scorer, results = runner.scorer, runner.results
        trials = study.get_trials(deepcopy=False)  # one read of the storage
        new: dict[Representation, Entry] = {}
        for t in trials:
            tmpl = t.user_attrs.get("template")
            key = _trial_key(t, scorer) if tmpl else None
            if t.state == TrialState.COMPLETE and key is not None and key not in results.entries and key not in new:
                new[key] = _entry(t, scorer)
        runner.keep(list(new.values()))
        pareto = None
        if self.pareto:  # the non-dominated trials' templates, best objective first
            front = {_trial_key(t, scorer) for t in study.best_trials if "template" in t.user_attrs}
            own = results.own_key
            if own in results.entries and results.entries[own].sets:  # the model's own representation is on the front
                o = results.entries[own].sets
                sets = {k: results.entries[k].sets or {} for k in front if k in results.entries}

                def dominates(a, b):
                    return all(a.get(k, float("-inf")) >= v for k, v in b.items()) and a != b

                front = {k for k in front if not dominates(o, sets.get(k, {}))}
                if not any(dominates(sets[k], o) for k in front if k in sets):
                    front.add(own)
            pareto = ParetoFront([e.entry_key for e in results.ranked() if e.entry_key in front])
        study_ref = StudyRef(_shown(self.storage), self.study_name,  # a password kept out of the file
                             finished=sum(t.state in FINISHED for t in trials),
                             pruned=sum(t.state == TrialState.PRUNED for t in trials))
        if self.pareto:
            runner.keep(study=study_ref, pareto=pareto)
        else:
            runner.keep(study=study_ref)


def _trial_key(t, scorer: Scorer) -> Representation:
    """The results-entry key of a trial: its template (a pooled read-out's key), at the trial's layer (the last
    layer is the template's own read-out: no layer in the key)."""
    k = Representation.split(t.user_attrs["template"])
    return k if k.readout else Representation(k.template, scorer.at_layer(t.params.get("layer")).layer)


def _entry(t, scorer: Scorer) -> Entry:
    """Another worker's finished trial as an entry (a multi-objective trial: each set's score, and the objective)."""
    layer = scorer.at_layer(t.params.get("layer")).layer
    k = Representation.split(t.user_attrs["template"])
    template, readout = k.template, k.readout
    denoise = scorer.denoise and readout is None
    if len(t.values) > 1:
        sets = dict(zip(scorer.datasets, t.values))
        return Entry(template, round(scorer.evaluator.value(sets), 4), denoise, 0.0, f"optuna:trial {t.number}",
                     t.number + 1,
                     sets={k: round(v, 4) for k, v in sets.items()}, layer=layer, readout=readout)
    return Entry(template, round(float(t.value), 4), denoise, 0.0, f"optuna:trial {t.number}",
                 t.number + 1, layer=layer, readout=readout)


def optuna_summary(study: optuna.Study) -> dict:
    states = [t.state for t in study.get_trials(deepcopy=False)]
    return {s.name.lower(): states.count(s) for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL,
                                                      TrialState.RUNNING)}


def slug(text: str, n: int, empty: str) -> str:
    """``text`` as a study name's part: runs of other characters than letters, digits, ``_.-`` as one ``-``, its last
    ``n`` characters (``empty`` when nothing is left)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[-n:] or empty


def default_study_name(model: str, dataset: str, denoise: bool, pareto: bool = False) -> str:
    """promptsearch-<model>-<dataset>-<denoised|raw>[-pareto]: one study per (model, data, variant, kind)."""
    return (f"promptsearch-{slug(model, 60, 'model')}-{dataset}-{'denoised' if denoise else 'raw'}"
            + ("-pareto" if pareto else ""))


def resumed_sampler(seed: int, done_before: int, n_startup_trials: int = 10) -> optuna.samplers.TPESampler:
    """A seeded sampler for a study resumed with ``done_before`` finished trials: seeded with ``seed + done_before``,
    so its random start-up draws are not the ones the first run drew (the same seed would propose the same
    candidates again, each a wasted trial), and a rerun from the same state still draws the same.

    :param seed: the seed asked for.
    :param done_before: the study's finished trials when this run started.
    :param n_startup_trials: the sampler's random start-up trials (the study's own count).
    :returns: the sampler to use."""
    return optuna.samplers.TPESampler(seed=seed + done_before, n_startup_trials=n_startup_trials)


def default_storage(out) -> str:
    """A SQLite study beside the results file (``best.json`` → ``best.db``)."""
    return f"sqlite:///{Path(out).resolve().with_suffix('.db')}"


def format_study_summary(study: optuna.Study, done_before: int, seconds: float) -> str:
    """The study's trial counts and this run's throughput, with a note on trials left running."""
    s = optuna_summary(study)
    ran = s["complete"] + s["pruned"] - done_before
    out = (f"\nstudy: {s['complete']} complete, {s['pruned']} pruned, {s['fail']} failed, {s['running']} running "
           f"trials; this run finished {ran} trials in {seconds:.0f}s ({60 * ran / max(seconds, 1e-9):.1f} trials/min)")
    if s["running"]:
        out += (f"\nnote: {s['running']} trial(s) still marked running: another worker's, or left by a worker that was "
                "killed; those are failed and retried once their heartbeat is 90 s old, when a worker of this study "
                "next starts a trial")
    return out


def finished_trials(study: optuna.Study) -> int:
    """Complete and pruned trials (what ``--trials`` counts)."""
    s = optuna_summary(study)
    return s["complete"] + s["pruned"]
