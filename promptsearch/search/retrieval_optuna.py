"""Optuna over retrieval prompts: TPE over the query prompt, the document prompt and the read-out, in any Optuna RDB
storage, so a rerun resumes the study and processes on several machines share it.

Each trial picks (``trial.suggest_categorical``):

- where its query prompt comes from (``query_from``): the library (``query``: the model's own query prompt or one of
  the shipped ones) or the library's query grammar, one option a slot (``query.instruction``, ``query.label``,
  ``query.separator``: 150 composed prompts with the shipped grammar, the shipped forms among them), so TPE learns
  which parts help;
- the document prompt (``document``: the model's own or a shipped one) and the read-out (``readout``).

The model's own candidate is the study's first trial, as it is the first candidate of every search; a new study
also starts from what its results file already holds (a greedy run into the same file), told as complete trials. A
trial is scored by the search (``RetrievalSearch.score``: the corpus encoded once per document prompt and read-out,
kept on disk) and told its nDCG@10; its metrics and per-query nDCG@10 go into the trial's user attributes, so every
process sharing the study reads the others' scores into its own results file and the verdict (the model's own unless
beaten beyond the noise) weighs the same numbers wherever it is run. A candidate scored before — by this run, an
earlier one, another process, or the greedy strategy into the same results file — is told its score without encoding.
A prompt the model cannot read (no room left for the text) is told pruned, with the reason.

**Racing** (``racing``: a ``CorpusRace``, as the greedy document step's): a trial whose document side (document prompt
and read-out) no scored candidate has yet — a new pass over the whole corpus — is first scored on the smaller corpus
(every judged document and a share of the others), its nDCG@10 there reported as the trial's intermediate value;
it is pruned there when it is not in the better half of the study's trials screened so far (Optuna's
``SuccessiveHalvingPruner``'s rule for one rung, ``better_half``), as the STS search prunes templates on a share of
its pairs. A batch's screened trials are judged at once, against each other and every process's screens so far, so
which of them go on does not depend on the order they were screened in (across processes it depends on which screens
were written first, as in any asynchronous successive halving). A pruned trial is told pruned with its screen score
and never encoded over the whole corpus; the screen's numbers are never an entry's score. A trial whose document
side is scored already costs a query pass only, and is scored at once. Not with workers (a job is a whole candidate).

``--trials N`` is the study's total of finished trials, all processes together (``ask_batch``); a killed process's
trials are failed by heartbeat and asked again (``Heartbeats``, ``fail_stale_trials``), as in the STS search.
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Container, Sequence

import numpy as np
import optuna
from optuna.trial import TrialState

from ..errors import PromptSearchError
from ..eval.retrieval import RetrievalCandidate
from .optuna_search import default_storage, resumed_sampler, slug
from .retrieval import (
    METRIC,
    CorpusRace,
    QueryGrammar,
    RetrievalEntry,
    RetrievalSearch,
    RetrievalStrategy,
    own_candidate,
)
from .study import (
    RUNNING_WAIT,
    STUDY_EXISTS,
    Heartbeats,
    _shown,
    ask_batch,
    check_storage,
    existing_study,
    fail_stale_trials,
    open_storage,
    stopped,
    this_process,
)

FROM_LIBRARY, FROM_GRAMMAR = "library", "grammar"


@dataclass
class Space:
    """The trial parameters' options: the query prompts of the library (the model's own first), the query grammar (None:
    none), the document prompts (the model's own first) and the read-outs (the model's own first)."""

    queries: list[str]
    grammar: QueryGrammar | None
    documents: list[str]
    readouts: list[str]

    def distributions(self) -> dict[str, optuna.distributions.CategoricalDistribution]:
        """Every parameter a trial may take, with its options (what a resumed study must still offer)."""
        c = optuna.distributions.CategoricalDistribution
        out = {"query": c(self.queries), "document": c(self.documents), "readout": c(self.readouts)}
        if self.grammar is not None:
            out["query_from"] = c([FROM_LIBRARY, FROM_GRAMMAR])
            out.update({f"query.{n}": c(list(o)) for n, o in self.grammar.slots.items()})
        return out

    def suggest(self, trial: optuna.Trial) -> RetrievalCandidate:
        """A trial's candidate, its parameters suggested.

        :param trial: the trial.
        :returns: the candidate."""
        source = (trial.suggest_categorical("query_from", [FROM_LIBRARY, FROM_GRAMMAR]) if self.grammar is not None
                  else FROM_LIBRARY)
        if source == FROM_LIBRARY:
            query = trial.suggest_categorical("query", self.queries)
        else:
            assert self.grammar is not None
            query = self.grammar.render({n: trial.suggest_categorical(f"query.{n}", list(o))
                                         for n, o in self.grammar.slots.items()})
        return RetrievalCandidate.of(str(query), str(trial.suggest_categorical("document", self.documents)),
                                     str(trial.suggest_categorical("readout", self.readouts)))

    def own_params(self, own: RetrievalCandidate) -> dict:
        """The parameters of the model's own candidate (the study's first trial)."""
        p = {"query": own.query, "document": own.document, "readout": own.readout}
        return {**p, "query_from": FROM_LIBRARY} if self.grammar is not None else p

    def params_of(self, c: RetrievalCandidate) -> dict | None:
        """A candidate's parameters when the space holds it with a library query prompt (None: it does not)."""
        if c.query not in self.queries or c.document not in self.documents or c.readout not in self.readouts:
            return None
        return self.own_params(c)


def space_of(search: RetrievalSearch, own: RetrievalCandidate) -> Space:
    """The search's options: its library's prompts and grammar, the model's own first on each side, its read-outs.

    :param search: the search (its library prompts, task description, read-outs and strategy's library).
    :param own: the model's own candidate.
    :returns: the space."""
    return Space(list(dict.fromkeys([own.query, *(q for q, _ in search.queries)])),
                 QueryGrammar.of_library(search.description, search.library),
                 list(dict.fromkeys([own.document, *(d for d, _ in search.documents)])),
                 list(dict.fromkeys([own.readout, *search.readouts])))


def default_study_name(model: str, data: dict) -> str:
    """promptsearch-retrieval-<model>-<data name>-<data fingerprint>: one study per model and data."""
    return (f"promptsearch-retrieval-{slug(model, 60, 'model')}-{slug(str(data.get('name', 'data')), 40, 'data')}-"
            f"{str(data.get('fingerprint', ''))[:8]}")


def trial_attrs(e: RetrievalEntry) -> dict:
    """What a trial keeps of its scored candidate (its user attributes), from which every process sharing the study
    rebuilds the entry (``OptunaRetrieval._absorb``): the candidate, its metrics and per-query nDCG@10 at six
    decimals, as the results file keeps them, and its seconds."""
    return {"candidate": e.candidate.to_json(), "metrics": {k: round(float(v), 6) for k, v in e.metrics.items()},
            "per_query": [round(float(x), 6) for x in e.per_query], "seconds": round(e.seconds, 3)}


def better_half(values: Sequence[float]) -> float:
    """The lowest screen score that goes on, of all screened so far (racing's one rung): the better half of them, at
    least one, as Optuna's ``SuccessiveHalvingPruner`` promotes (reduction factor 2) — but of a whole batch at once,
    so which of a batch's trials go on does not depend on the order they are screened in. A value that is no number
    (NaN) is left out.

    :param values: every screen score so far, the batch's among them.
    :returns: the bar: a trial scoring below it is pruned (infinite when no value is a number)."""
    ranked = sorted((v for v in values if not math.isnan(v)), reverse=True)
    return ranked[max(len(ranked) // 2, 1) - 1] if ranked else math.inf


def screens_before(study: optuna.Study, batch: Container[int]) -> list[float]:
    """The screen scores of the study's trials outside ``batch`` (every process's, as their trials keep them).

    :param study: the study.
    :param batch: the numbers of the batch's trials.
    :returns: the scores."""
    return [float(t.user_attrs["screen"][METRIC]) for t in study.get_trials(deepcopy=False)
            if t.number not in batch and isinstance(t.user_attrs.get("screen"), dict)
            and isinstance(t.user_attrs["screen"].get(METRIC), (int, float))]


SETUP_WAIT = 60.0  # seconds a study may go without a sign from the process making it before it counts as left
SAY_AFTER = 2.0  # seconds of waiting for a study another process makes before the wait is said


def study_state(storage: optuna.storages.BaseStorage, sid: int) -> str:
    """Where a study of a retrieval search's name stands: ``"ready"`` (it holds its ``retrieval`` record, which its
    maker sets last), ``"making"`` (another process created it and is seeding it: its ``making`` mark, renewed with
    each seed, or no user attribute yet and no trial but the seeds), ``"left"`` (half made by a process on this host
    that no longer runs; one elsewhere is judged by its mark not being renewed, ``_await_record``), ``"other"``
    (another kind of study, or one with trials of its own but no record: refused by ``OptunaRetrieval.check``) or
    ``"gone"`` (deleted).

    :param storage: the storage.
    :param sid: the study's id in it.
    :returns: the state."""
    try:
        attrs = storage.get_study_user_attrs(sid)
        if "retrieval" in attrs:
            return "ready"
        trials = storage.get_all_trials(sid, deepcopy=False)
    except KeyError:  # deleted meanwhile
        return "gone"
    if set(attrs) - {"making"} or any(t.user_attrs.get("from") != "the results file" for t in trials):
        return "other"
    mark = attrs.get("making")
    if isinstance(mark, dict) and stopped(mark.get("process")):
        return "left"
    return "making"


@dataclass
class OptunaRetrieval(RetrievalStrategy):
    """TPE over query prompt × document prompt × read-out (see the module's description).

    :param storage: an Optuna RDB URL (``sqlite:///retrieval.db``, ``postgresql://user:password@host/db``).
    :param study_name: the study's name (share it, with the storage, to run several processes on one study).
    :param trials: the study's total of finished trials, all processes together.
    :param seed: the TPE sampler's seed (None: random).
    :param batch: trials asked at once and scored together (their query prompts encoded in one pass).
    :param library: the prompt library (its prompts and its query grammar).
    :param readouts: the pooled read-outs a trial may take (None: the model's defaults, see ``model_readouts``).
    :param racing: screen a trial with a new document side on a smaller corpus first and prune it there (``CorpusRace``;
        None: every trial scored on the whole corpus)."""

    storage: str
    study_name: str
    trials: int = 40
    seed: int | None = None
    batch: int = 8
    library: str = "retrieval"
    readouts: list[str] | None = None
    racing: CorpusRace | None = None
    name = "optuna"  # type: ignore[misc]  # the strategy's name (a class attribute, not a field)
    done_before: int = field(default=0, init=False)
    finished_now: int = field(default=0, init=False)
    absorbed: int = field(default=0, init=False)  # entries read from the study's trials of other runs
    repeats: int = field(default=0, init=False)  # this process's trials that proposed a candidate scored already
    summary: dict = field(default_factory=dict, init=False)

    @classmethod
    def beside(cls, out, model: str, data: dict, storage: str | None = None, study_name: str | None = None,
               **settings) -> "OptunaRetrieval":
        """The strategy with its study in ``storage`` / ``study_name`` when given, else a SQLite file beside the
        results file named after the model and the data: the same command resumes the same study.

        :param out: the results file (its ``.db`` sibling holds the default study).
        :param model: the model as named.
        :param data: the data's record (``RetrievalTask.record``: its name and fingerprint).
        :param storage: an RDB URL (None: beside ``out``).
        :param study_name: the study's name (None: the default for this model and data).
        :param settings: the other fields (``trials``, ``seed``, ``batch``, ``library``).
        :returns: the strategy."""
        return cls(storage=storage or default_storage(out), study_name=study_name or default_study_name(model, data),
                   **settings)

    def settings(self) -> dict:
        return {"name": self.name, "storage": _shown(self.storage), "study_name": self.study_name,
                "trials": self.trials, "seed": self.seed, "batch": self.batch,
                **({"racing": self.racing.settings()} if self.racing is not None else {})}

    def stats(self) -> dict:
        return {"study": self.summary} if self.summary else {}

    # ---- the study ------------------------------------------------------------------------------------
    def record(self, search: RetrievalSearch) -> dict:
        """What the study's scores depend on (a process joining it must match): the model's numbers, the data,
        the precision."""
        res = search.results
        return {"model": res.model, "data": res.data.get("fingerprint"), "precision": res.precision,
                "numbers": res.numbers}

    def check(self, scorer) -> None:
        """A study of this name already in the storage is joined only if its scores compare with this run's (the same
        model numbers, data and precision) and it offers the same options for each parameter. Reads, writes nothing;
        run before the model's own is scored, so a refusal costs no encoding.

        :param scorer: the ``RetrievalSearch`` (its space, results and the model's own candidate).
        :raises promptsearch.PromptSearchError: otherwise (one line)."""
        search: RetrievalSearch = scorer
        space = space_of(search, own_candidate(search.enc))
        check_storage(self.storage)
        found = existing_study(self.storage, self.study_name)
        if found is None:
            return
        storage, sid, where = found
        fresh = STUDY_EXISTS
        was, mine = storage.get_study_user_attrs(sid).get("retrieval"), self.record(search)
        if was is None:
            if study_state(storage, sid) in ("making", "left", "gone"):  # propose waits for it, or makes it afresh
                return
            raise PromptSearchError(f"{where} is not a retrieval study; {fresh}")
        for k in ("model", "data", "precision", "numbers"):
            if was.get(k) != mine[k]:
                what = {"model": "another model", "data": "other data", "precision": f"precision {was.get(k)!r}",
                        "numbers": "other model weights, tokenizer or settings"}[k]
                raise PromptSearchError(f"{where} holds scores of {what}; its numbers would not compare with this "
                                        f"run's: {fresh}")
        now = space.distributions()
        for t in storage.get_all_trials(sid, deepcopy=False):
            for name, old in t.distributions.items():
                if name in now and old != now[name]:
                    raise PromptSearchError(f"{where} offers other options for {name} than this run (another prompt "
                                            "library, task description or read-outs): run with the study's, or "
                                            f"{fresh}")

    def _absorb(self, study: optuna.Study, search: RetrievalSearch) -> dict[RetrievalCandidate, float]:
        """Every complete trial's candidate and score; those the results do not hold (another process's, an earlier
        run's) are kept in them (``Runner.keep``) from the trial's user attributes."""
        seen: dict[RetrievalCandidate, float] = {}
        new: dict[RetrievalCandidate, RetrievalEntry] = {}
        for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            a = t.user_attrs
            if "candidate" not in a or "per_query" not in a:
                continue
            c = RetrievalCandidate.from_json(a["candidate"])
            seen[c] = float(t.value) if t.value is not None else float("nan")
            if c not in search.results.entries and c not in new:
                self.absorbed += 1
                new[c] = RetrievalEntry(c, {k: float(v) for k, v in a.get("metrics", {}).items()},
                                        f"optuna: trial {t.number} (another run)", float(a.get("seconds", 0.0)),
                                        np.asarray(a["per_query"], dtype=np.float64))
        if new:
            search.keep(list(new.values()))
        return seen

    def _screen(self, trials: list, cands: dict, search: RetrievalSearch,
                history: Callable[[], Sequence[float]] = tuple) -> dict:
        """Racing a batch: each trial whose document side no scored candidate has (a new pass over the whole corpus) is
        scored on the smaller corpus, its nDCG@10 there reported (step 1) and kept (its ``screen``), and the batch
        judged at once (``better_half``) against ``history()`` (the screen scores of the study's other trials, every
        process's, read once the batch is screened: ``screens_before``); a trial whose document side another trial of
        the batch goes on with is not pruned (it costs a query pass). The screened trials → (their screen score,
        whether pruned); none without a race or with workers."""
        if self.racing is None or search.scorer.queue is not None or not self.racing.pays(search):
            return {}
        sides = {c.side("document") for c in search.results.entries}
        new = [t for t in trials if cands[t.number].side("document") not in sides]
        if not new:
            return {}
        screen = self.racing.screening(search.scorer)
        got = screen.evaluate(search.enc, list(dict.fromkeys(cands[t.number] for t in new)))
        values = {t: float(got[cands[t.number]][METRIC]) for t in new}
        for t, v in values.items():
            t.report(v, 1)
            t.set_user_attr("screen", {"documents": len(screen.corpus_ids), METRIC: round(v, 6)})
        bar = better_half([*history(), *values.values()])
        out = {t: (v, not v >= bar) for t, v in values.items()}  # a screen that gave no number (NaN) goes no further
        # a document side one trial goes on with is encoded over the whole corpus anyway: the batch's other trials with
        # it cost a query pass there, so none of them is pruned
        going = {cands[t.number].side("document") for t, (_, p) in out.items() if not p}
        out = {t: (v, p and cands[t.number].side("document") not in going) for t, (v, p) in out.items()}
        search.scorer.screened_out += sum(p for _, p in out.values())
        return out

    def _seed_study(self, study: optuna.Study, search: RetrievalSearch, space: Space, own: RetrievalEntry,
                    renew=None) -> None:
        """A new study's first trials: the candidates the results file already holds (the model's own first, then what
        an earlier run — the greedy steps into the same file — scored), told as complete trials with their scores, so
        TPE starts from them (a trial that proposes one again is told its score, not encoded: ``repeats``). Candidates
        the space cannot express are left out."""
        dists = space.distributions()
        entries = [own] + [e for e in search.results.entries.values() if e.candidate != own.candidate]
        for e in entries:
            params = space.params_of(e.candidate)
            if params is None:
                continue
            study.add_trial(optuna.trial.create_trial(
                params=params, distributions={k: dists[k] for k in params}, value=e.score,
                user_attrs={**trial_attrs(e), "from": "the results file"}))
            if renew is not None:  # a sign of life to a process waiting for the study
                renew()

    def _open_study(self, search: RetrievalSearch, storage, sampler, pruner, space: Space,
                    own: RetrievalEntry) -> tuple[optuna.Study, bool]:
        """The study, and whether this process made it. One process creates it (the storage refuses a second of the
        same name), marks it ``making``, seeds it with what the results file holds (the model's own first; the mark
        renewed with each seed) and records it last (``retrieval``): a process started with it waits for that record
        and joins (``study_state``). A study half made by a process that stopped is removed and made afresh (it held
        nothing but seeds from that process's results file); one made here and stopped while it was made is removed
        too."""
        where = f"study {self.study_name!r} in {_shown(self.storage)}"
        for _ in range(5):  # a study removed meanwhile (left, or its maker stopped) is made again
            try:
                study = optuna.create_study(storage=storage, study_name=self.study_name, direction="maximize",
                                            sampler=sampler, pruner=pruner)
            except optuna.exceptions.DuplicatedStudyError:  # made before, or a moment ago by a process started with
                state = self._await_record(storage, where, search.say)  # this one
                if state == "left":
                    with contextlib.suppress(KeyError):  # another process removed it first
                        optuna.delete_study(study_name=self.study_name, storage=storage)
                    search.say(f"optuna: removed {where}, left half made by a run that stopped; making it afresh")
                if state in ("left", "gone"):
                    continue
                try:
                    return optuna.load_study(storage=storage, study_name=self.study_name, sampler=sampler,
                                             pruner=pruner), False
                except KeyError:  # removed meanwhile
                    continue

            def renew(made=study):  # the making mark: this process, and when it last gave a sign
                made.set_user_attr("making", {"process": this_process(), "at": time.time()})

            try:
                renew()
                self._seed_study(study, search, space, own, renew)
                study.set_user_attr("retrieval", self.record(search))  # set last: the study is ready
            except BaseException:  # stopped half made (an interrupt, the storage): no study a rerun would wait for
                with contextlib.suppress(Exception):
                    optuna.delete_study(study_name=self.study_name, storage=storage)
                raise
            return study, True
        raise PromptSearchError(f"{where} was removed again and again while this run made or joined it: run it once "
                                f"more, or {STUDY_EXISTS}")

    def _await_record(self, storage, where: str, say=None) -> str:
        """Wait while another process makes the study (``study_state`` ``"making"``): its state once it is not, or
        ``"left"`` when its ``making`` mark (none, before the maker sets it) has not changed for ``SETUP_WAIT`` seconds
        of this process's clock (its maker stopped; a maker renews it with each seed). ``say`` is told once, when the
        wait has lasted ``SAY_AFTER`` seconds."""
        last, since, began, said = object(), time.monotonic(), time.monotonic(), say is None
        while True:
            if not said and time.monotonic() - began > SAY_AFTER:
                said = True
                say(f"optuna: {where} is being made by another process: waiting for it (a study whose maker gives "
                    f"no sign for {SETUP_WAIT:g} s is removed and made afresh)")
            try:
                sid = storage.get_study_id_from_name(self.study_name)
                state = study_state(storage, sid)
                mark = storage.get_study_user_attrs(sid).get("making")
            except KeyError:
                return "gone"
            if state != "making":
                return state
            if mark != last:
                last, since = mark, time.monotonic()
            elif time.monotonic() - since > SETUP_WAIT:
                return "left"
            time.sleep(0.2)

    def propose(self, runner) -> None:
        search: RetrievalSearch = runner
        own = search.own
        assert own is not None  # scored first
        space = space_of(search, own.candidate)
        storage = open_storage(self.storage)
        sampler = optuna.samplers.TPESampler(seed=self.seed, n_startup_trials=10)
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        # racing's one rung is judged a batch at once (_screen), not by an Optuna pruner, whose answer would depend on
        # the order the batch's trials report in
        pruner = optuna.pruners.NopPruner()
        study, made = self._open_study(search, storage, sampler, pruner, space, own)
        self.check(search)  # again: the study may be another process's
        self.done_before = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in study.trials)
        if self.seed is not None and self.done_before:  # resumed: not the first run's draws again
            study.sampler = resumed_sampler(self.seed, self.done_before)
        from_file = sum(t.user_attrs.get("from") == "the results file" for t in study.trials)
        if made:  # its first trials: not run, told from the results file
            n = from_file
            before = (f"a new study of {self.trials} trials, its first {'score' if n == 1 else f'{n} scores'} this run "
                      "already has (the model's "
                      "own, scored first" + (", and what the results file held" if n > 1 else "")
                      + "), not scored again"
                      + (": none to run" if self.done_before >= self.trials else ""))
        else:
            before = (f"{self.done_before} of {self.trials} trials finished before" if self.done_before < self.trials
                      else f"{self.done_before} trials finished before, trials={self.trials}: none to run")
            if from_file:  # the study's first trials: not run, told from the results file of the run that made it
                before += f" ({from_file} of them told from a results file: the model's own and what it held)"
        search.say(f"optuna: study {self.study_name!r} in {_shown(self.storage)}, {before}; query prompts from the "
                    f"library ({len(space.queries)})"
                    + (f" or composed by its grammar ({space.grammar.size})" if space.grammar else "")
                    + f", {len(space.documents)} document prompts, {len(space.readouts)} read-outs")
        while True:
            fail_stale_trials(study)
            known = self._absorb(study, search)
            cands: dict[int, RetrievalCandidate] = {}
            trials = ask_batch(study, self.batch, self.trials, lambda t: cands.__setitem__(t.number, space.suggest(t)),
                               wait=RUNNING_WAIT, say=search.say)
            if not trials:
                break
            told: set[int] = set()
            scored: set[RetrievalCandidate] = set()  # the batch's candidates told a score so far
            try:
                with Heartbeats(storage, study, trials):
                    why = {t.number: search.scorer.unreadable(cands[t.number]) for t in trials}
                    todo = [cands[t.number] for t in trials if why[t.number] is None
                            and cands[t.number] not in known]
                    batch = {t.number for t in trials}
                    screened = self._screen([t for t in trials if cands[t.number] in todo], cands, search,
                                            lambda: screens_before(study, batch))
                    pruned = {t.number for t, (_, out) in screened.items() if out}
                    # a candidate two trials share goes on when either does
                    go = {cands[t.number] for t in trials if t.number not in pruned}
                    search.score([c for c in todo if c in go], "optuna", record="new", together=True)
                for t in trials:
                    c = cands[t.number]
                    t.set_user_attr("candidate", c.to_json())
                    if why[t.number] is not None:
                        t.set_user_attr("why", why[t.number])
                        study.tell(t, state=TrialState.PRUNED)
                    elif t.number in pruned:
                        t.set_user_attr("why", f"pruned by racing: {METRIC} {screened[t][0]:.4f} on the smaller "
                                               "corpus, not in the better half of the trials screened there")
                        study.tell(t, state=TrialState.PRUNED)
                    else:
                        e = search.results.entries[c]
                        for k, v in trial_attrs(e).items():
                            t.set_user_attr(k, v)
                        study.tell(t, e.score)
                        # TPE may propose a candidate again (Optuna does not dedupe): told its score, not encoded
                        self.repeats += c in known or c in scored
                        scored.add(c)
                    told.add(t.number)
                    self.finished_now += 1
            except BaseException:  # an interrupt or an error: no trial of the batch is left running
                for t in trials:
                    if t.number not in told:
                        try:
                            study.tell(t, state=TrialState.FAIL)
                        except Exception:  # noqa: BLE001 - already told, or the storage is gone: nothing to do
                            pass
                raise
            self._absorb(study, search)  # what other processes finished meanwhile: the best of the study's so far
            best = max(search.results.entries.values(), key=lambda e: e.score)
            done = sum(t.state in (TrialState.COMPLETE, TrialState.PRUNED) for t in study.get_trials(deepcopy=False))
            search.say(f"optuna: {done}/{self.trials} trials, best {METRIC} {best.score:.4f}  {best.candidate.shown}")
        self._absorb(study, search)
        all_trials = study.get_trials(deepcopy=False)
        states = [t.state for t in all_trials]
        self.summary = {"name": self.study_name, "complete": states.count(TrialState.COMPLETE),
                        "pruned": states.count(TrialState.PRUNED), "failed": states.count(TrialState.FAIL),
                        "running": states.count(TrialState.RUNNING), "finished_now": self.finished_now,
                        "from_other_runs": self.absorbed, "repeats": self.repeats,
                        # pruned after a screen (a trial the model cannot read is pruned unscreened)
                        "raced_out": sum(t.state == TrialState.PRUNED and "screen" in t.user_attrs
                                         for t in all_trials)}
        search.choose(search.results.ranked()[0].candidate)
