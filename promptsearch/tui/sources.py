"""What the leaderboard shows, read from a results JSON or an Optuna study (polled)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Board:
    strategy: str = "-"
    model: str = "-"
    dataset: str = "stsb-dev"
    denoise: bool = True
    trials: int = 0
    rows: list[tuple[float, str]] = field(default_factory=list)  # (spearman, template), best first
    history: list[float] = field(default_factory=list)  # scores in the order they were produced
    error: str = ""

    @property
    def best(self) -> float | None:
        return self.rows[0][0] if self.rows else None


class ResultsFileSource:
    """A results JSON; ``changed()`` is true when the file's mtime moved."""

    def __init__(self, path):
        self.path = Path(path)
        self._stamp = None

    def changed(self) -> bool:
        try:
            st = self.path.stat()
            stamp = (st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            return True
        return False

    def load(self) -> Board:
        try:
            d = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return Board(error=f"waiting for {self.path} ...")
        except (OSError, json.JSONDecodeError) as exc:
            return Board(error=f"cannot read {self.path}: {exc}")
        entries = d.get("templates", [])
        rows = sorted(((float(e["spearman"]), e["template"]) for e in entries), key=lambda r: -r[0])
        timeline = [float(e["spearman"]) for e in sorted(entries, key=lambda e: e.get("order", 0))]
        stats = d.get("stats", {})
        trials = d.get("x_study", {}).get("finished") or (stats.get("scored", 0) + stats.get("cached", 0)) or len(entries)
        return Board(d.get("strategy", "-"), d.get("model", "-"), d.get("dataset", "-"), bool(d.get("denoise", True)),
                     int(trials), rows, timeline)


class OptunaSource:
    """An Optuna study in any RDB storage; changes when its trial count or states change."""

    def __init__(self, storage: str, study_name: str):
        self.storage, self.study_name = storage, study_name
        self._stamp = None

    def _trials(self):
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        study = optuna.load_study(study_name=self.study_name, storage=self.storage)
        return study, study.get_trials(deepcopy=False)

    def changed(self) -> bool:
        try:
            _, trials = self._trials()
            stamp = tuple((t.number, t.state.name) for t in trials)
        except Exception:  # the study may not exist yet
            stamp = None
        if stamp != self._stamp:
            self._stamp = stamp
            return True
        return False

    def load(self) -> Board:
        from optuna.trial import TrialState

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
        return Board("optuna", study.user_attrs.get("model", "-"), study.user_attrs.get("dataset", "stsb-dev"), True,
                     len(finished), rows, [float(t.value) for t in sorted(done, key=lambda t: t.number)])
