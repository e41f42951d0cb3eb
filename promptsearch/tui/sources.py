"""What the leaderboard shows, read from a results JSON or an Optuna study (polled)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..data import DEV_SET
from ..errors import PromptSearchError, did_you_mean
from ..fileio import RETRIEVAL, results_kind
from ..search.results import Results


@dataclass
class Board:
    strategy: str = "-"
    model: str = "-"
    dataset: str = DEV_SET
    denoise: bool = True
    trials: int = 0
    rows: list[tuple[float, str]] = field(default_factory=list)  # (spearman, template), best first
    history: list[float] = field(default_factory=list)  # scores in the order they were produced
    error: str = ""
    held_out: dict[str, dict[str, float]] = field(default_factory=dict)  # template -> {task: Spearman} (top-k)
    chosen: str | None = None  # the search's answer (a results file's x_chosen), listed first
    unit: str = "trials"  # what ``trials`` counts: Optuna's trials, or the templates a strategy scored
    metric: str = "STS-B dev"  # the score column's name: the dev set's Spearman × 100, or a retrieval run's nDCG@10
    places: int = 2  # the score's decimals (Spearman × 100: 2; nDCG@10, a fraction: 4)
    item: str = "template"  # what a row is: a template (STS), a candidate (query prompt × document prompt × read-out)
    variant: str | None = None  # shown beside the data set (None: denoised or raw, as ``denoise`` says)
    no_predictions: str | None = None  # why a row has no [MASK] predictions to show (None: it has)
    search: str = "greedy"  # the command that runs a search of this kind (named when the file's own is not known)
    command: dict | None = None  # the command that ran the file's search (the TUI's "s" runs it again: resumes it)

    def held_out_text(self, template: str) -> str:
        v = self.held_out.get(template) or {}
        return " · ".join(f"{task} {score:.{self.places}f}" for task, score in v.items())

    @property
    def best(self) -> float | None:
        """The highest score on the board (the chosen answer may be another: see ``chosen``)."""
        return max(r[0] for r in self.rows) if self.rows else None


class _Polled:
    """``changed()`` is true when the source's stamp moved since the last call."""

    _stamp = object()  # never equal to a real stamp: the first poll always counts as a change

    def stamp(self):
        raise NotImplementedError

    def changed(self) -> bool:
        now = self.stamp()
        if now != self._stamp:
            self._stamp = now
            return True
        return False


class ResultsFileSource(_Polled):
    """A results JSON, stamped by its mtime and size."""

    def __init__(self, path):
        self.path = Path(path)

    def stamp(self):
        try:
            st = self.path.stat()
            return (st.st_mtime_ns, st.st_size)
        except OSError:
            return None

    def load(self) -> Board:
        if not self.path.exists():  # a search to come writes it; or a mistyped name, said as one
            try:
                near = did_you_mean(self.path.name, [f.name for f in self.path.parent.iterdir() if f.suffix == ".json"])
            except OSError:
                near = ""
            return Board(error=f"waiting for {self.path} ..." + (f" (no such file yet; {near.strip()[1:-1]})"
                                                                  if near else ""))
        if results_kind(self.path) == RETRIEVAL:
            return retrieval_board(self.path)
        try:
            res = Results.load(self.path)  # the schema checked: a file of another kind says so
        except PromptSearchError as exc:
            return Board(error=str(exc))
        chosen = res.chosen.text if res.chosen in res.entries else None
        # the answer first, then the rest ranked (as the file lists them)
        # a template, "T @layer L", "T @mean" or an ensemble "A + B"
        rows = [(float(e.spearman), e.key) for e in res.answer_first()]
        timeline = [float(e.spearman) for e in sorted(res.entries.values(), key=lambda e: e.order)]
        held = {e.key: e.validation for e in res.entries.values() if e.validation}
        return Board(res.strategy, res.model, res.dataset, res.denoise, res.finished_trials, rows, timeline,
                     held_out=held, chosen=chosen, unit="trials" if res.strategy == "optuna" else "scored",
                     command=_command(res.extras.get("x_command")))


def _command(value) -> dict | None:
    """A results file's recorded command as the board keeps it (a dict), or None."""
    return dict(value) if isinstance(value, dict) else None


def retrieval_board(path: Path) -> Board:
    """A retrieval search's results file on the board: its candidates by nDCG@10, the answer first, the check on the
    queries the search never saw beside the answer."""
    from ..search.retrieval import METRIC, RetrievalResults  # lazy: only a retrieval file needs it

    try:
        res = RetrievalResults.load(path)
    except PromptSearchError as exc:
        return Board(error=str(exc))
    ranked = res.ranked()
    if res.best in res.entries:
        ranked = [res.entries[res.best]] + [e for e in ranked if e.candidate != res.best]
    rows = [(e.score, e.candidate.shown) for e in ranked]
    chosen = res.entries[res.best].candidate.shown if res.best in res.entries else None
    unseen = (res.verdict or {}).get("unseen")
    held = {}
    if unseen is not None and res.verdict is not None:
        challenger = res.verdict.get("challenger")
        from ..eval.retrieval import RetrievalCandidate  # lazy: only a retrieval file needs it

        if challenger:
            held[RetrievalCandidate.from_json(challenger).shown] = {f"unseen {unseen['queries']}": unseen["chosen"]}
        if res.own is not None:
            held[res.own.shown] = {f"unseen {unseen['queries']}": unseen["own"]}
    metric = f"{METRIC}, mean of {len(res.sizes)} sets" if res.sizes else METRIC
    return Board(res.strategy.get("name", "greedy"), res.model, str(res.data.get("name", "-")), True,
                 len(res.entries), rows, [e.score for e in res.entries.values()], held_out=held, chosen=chosen,
                 unit="scored", metric=metric, places=4, item="candidate", variant=metric, search="retrieval",
                 command=res.command,
                 no_predictions="predictions show a [MASK] template's top tokens; a retrieval candidate is a pair of "
                                "prompts: export it (promptsearch export) and use encode_query / encode_document")


class OptunaSource(_Polled):
    """An Optuna study in any RDB storage, stamped by its trials' numbers and states."""

    def __init__(self, storage: str, study_name: str):
        self.storage, self.study_name = storage, study_name

    def _trials(self):
        import optuna  # lazy: start-up time

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.load_study(study_name=self.study_name, storage=self.storage)
        return study, study.get_trials(deepcopy=False)

    def stamp(self):
        try:
            _, trials = self._trials()
            return tuple((t.number, t.state.name) for t in trials)
        except Exception:  # the study may not exist yet
            return None

    def load(self) -> Board:
        from optuna.trial import TrialState  # lazy: start-up time

        try:
            study, trials = self._trials()
        except Exception as exc:
            return Board(error=f"waiting for study {self.study_name!r} in {self.storage} ({type(exc).__name__})")
        done = [t for t in trials if t.state == TrialState.COMPLETE and "template" in t.user_attrs]
        best: dict[str, float] = {}
        for t in done:
            best[t.user_attrs["template"]] = max(best.get(t.user_attrs["template"], -1e9), float(t.value))
        rows = sorted(((v, k) for k, v in best.items()), key=lambda r: -r[0])
        finished = [t for t in trials if t.state in (TrialState.COMPLETE, TrialState.PRUNED)]
        return Board("optuna", study.user_attrs.get("model", "-"), study.user_attrs.get("dataset", DEV_SET), True,
                     len(finished), rows, [float(t.value) for t in sorted(done, key=lambda t: t.number)])
