"""The one results schema every strategy writes (``--out best.json``).

::

    {
      "schema": "promptsearch.results/2",
      "model": "default", "dataset": "stsb-dev", "strategy": "greedy", "denoise": true,
      "settings": {...},                       # the strategy's flags
      "created": "...", "updated": "...",
      "stats": {"scored": 42, "cached": 3, "seconds": 201.7, "templates_per_minute": 12.5,
                "encodings": 20.6,              # full-set-equivalent sentence encodings, all precisions
                "encodings_by_precision": {"fp32": 14.0, "int8": 6.6}},
      "templates": [                           # ranked, best first
        {"template": "...", "spearman": 73.4, "denoise": true, "seconds": 4.8, "source": "greedy:relation",
         "validation": {"stsb": 70.1, "sickr": 66.2}}   # held-out scores (top-k only)
      ],
      "validation": {"tasks": ["stsb", "sickr"], "top": 5},
      "path": [...]                            # strategy-specific extras (greedy: the Table 4 path)
    }

Schema history: ``/1`` had no ``encodings`` stats and no validation; a ``/1`` file still loads
(and resumes: it is rewritten as ``/2``).

The JSON Schema is ``promptsearch/search/results.schema.json``. Every write is atomic,
and the file is rewritten after every scored template, so Ctrl-C loses nothing; a run
given an existing file with the same model, dataset, strategy and denoise setting resumes
from it.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Callable, ClassVar

import jsonschema

from ..data import set_label
from ..errors import PromptSearchError, TemplateError
from ..eval.objective import DEFAULT_OBJECTIVE
from ..fileio import RETRIEVAL, atomic_write, check_not_read_only, hold_write_lock, recorded_place
from ..paths import same_model
from ..representation import Representation
from .scorer import Score, Scored
from .state import Generated, ParetoFront, PathStep, RaceState, Spread, StudyRef, Verdict, weighed_words

SCHEMA_ID = "promptsearch.results/2"
_RECORDS: dict[str, type[Verdict] | type[Spread] | type[StudyRef] | type[ParetoFront] | type[Generated]] = {
    "baseline": Verdict, "spread": Spread, "study": StudyRef, "pareto": ParetoFront, "generated": Generated}
_OWN_FIELDS = {"x_chosen", "x_races", "x_judged", "x_record", *(r.field for r in _RECORDS.values())}
READABLE = ("promptsearch.results/1", SCHEMA_ID)


def schema() -> dict:
    file = resources.files("promptsearch.search").joinpath("results.schema.json")
    return json.loads(file.read_text(encoding="utf-8"))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class Entry(Scored):
    """A results file's entry: a ``Scored`` (for an ensemble ``template`` is
    its members' keys joined by " + "), with where it came from, when it was first scored (1-based) and its
    held-out scores (the top-k after a search)."""

    source: str = ""
    order: int = 0
    validation: dict | None = None  # held-out task -> Spearman

    FIELDS = ("template", "spearman", "denoise", "seconds", "source", "order", "validation", "sets", "layer", "members",
              "readout")  # as a results file lists them; the last five only when set

    def to_json(self) -> dict:
        """The entry as a results file writes it (``FIELDS``; unset optional ones left out).

        :returns: a JSON-ready dict.
        """
        return {k: [m.text for m in v] if k == "members" and v else v for k in self.FIELDS
                if (v := getattr(self, k)) is not None or k not in ("validation", "sets", "layer", "members",
                                                                    "readout")}

    @classmethod
    def from_json(cls, e: dict) -> "Entry":
        """An entry read back from a results file's dict (what ``to_json`` wrote).

        :param e: the entry's dict.
        :returns: the entry.
        """
        members = tuple(Representation.split(m) for m in e["members"]) if e.get("members") else None
        return cls(e["template"], e["spearman"], e["denoise"], e["seconds"], e.get("source", ""), e.get("order", 0),
                   e.get("validation"), sets=e.get("sets"), layer=e.get("layer"), members=members,
                   readout=e.get("readout"))


@dataclass
class Results:
    """A search's results file in memory: its scored entries, what the strategy recorded, the stats.

    ``open`` makes or resumes one, ``load`` reads one; each ``add`` saves it (atomically).
    """
    PLACES: ClassVar[int] = 4  # the decimals a score is kept to (Spearman x100)
    UNIT: ClassVar[str] = "representation"  # what an entry is called in what a command says
    path: Path | None
    model: str
    dataset: str
    strategy: str
    denoise: bool
    settings: dict = field(default_factory=dict)
    entries: dict[Representation, Entry] = field(default_factory=dict)  # by what each scored (the file writes its text)
    # what the strategies leave besides scores (see .state): typed records, each one field of the file
    chosen: Representation | None = None  # the search's answer (x_chosen), when it named one
    baseline: Verdict | None = None  # x_baseline
    spread: Spread | None = None  # x_spread
    path_steps: list[PathStep] = field(default_factory=list)  # greedy's path ("path")
    study: StudyRef | None = None  # x_study (Optuna)
    pareto: ParetoFront | None = None  # x_pareto (Optuna, several dev sets)
    generated: Generated | None = None  # x_generated (t5, mlm)
    races: dict[str, RaceState] = field(default_factory=dict)  # x_races: each race's resumable state, by race
    # x_judged: the steps' judgements (StepRunner.judge): each one's numbers, then its seal
    judged: dict[str, list[float | str]] = field(default_factory=dict)
    extras: dict = field(default_factory=dict)  # any other x_ field a file holds, kept as it was
    created: str = field(default_factory=_now)
    scored: int = 0
    cached: int = 0
    seconds: float = 0.0
    work_before: dict = field(default_factory=dict)  # encodings by precision in earlier runs of this file
    work: dict = field(default_factory=dict)  # ... in this run (the scorer's live tally, see track())
    resumed_from: int | None = None  # a resumed run: the entries its file held before it (None: a new run)
    validation: dict | None = None
    numbers: dict | None = None  # what changes a score (Scorer.numbers): checked when a run resumes
    # loaded with a score this tool did not write (until re-scored)
    suspect: set[Representation] = field(default_factory=set)

    # ---- load / save -------------------------------------------------------------------------
    @property
    def set_names(self) -> list[str]:
        """The dev sets scored, by name (``dataset`` holds them comma-joined, as ``--dataset`` gave them).

        :returns: the dev sets' names, in order.
        """
        return self.dataset.split(",")

    @property
    def objective(self) -> str:
        """How several dev sets' scores became one (mean or min; files written before it was a setting: mean).

        :returns: "mean" or "min".
        """
        return self.settings.get("objective", DEFAULT_OBJECTIVE)

    @classmethod
    def check_resume(cls, path, model: str, dataset: str, strategy: str, denoise: bool, settings: dict | None = None,
                     numbers: dict | None = None) -> "Results | None":
        """Refuse, in one line, what ``open`` would refuse of an existing file at ``path``, writing nothing (a
        command checks it before it makes anything else, e.g. a work study's database). The parameters are
        ``open``'s; a ``path`` that is None or names no file has nothing to check.

        :returns: the file as read (None: no file).

        :raises PromptSearchError: when the file holds another run or scores computed another way.
        """
        p = Path(path) if path else None
        if p is not None and p.exists():
            return cls._resumable(p, cls(p, model, dataset, strategy, denoise, dict(settings or {}), numbers=numbers))
        return None

    @classmethod
    def _resumable(cls, p: Path, res: "Results") -> "Results":
        """The file at ``p``, when a run like ``res`` may resume it; a one-line error otherwise."""
        old = cls.load(p)
        mismatch = [(k, getattr(old, k), getattr(res, k)) for k in ("model", "dataset", "strategy", "denoise")
                    if getattr(old, k) != getattr(res, k)]
        if old.objective != res.objective:
            mismatch.append(("objective", old.objective, res.objective))
        if mismatch:
            k, was, now = mismatch[0]
            if k == "denoise":  # said as the study's check says it
                raise PromptSearchError(
                    f"{p} holds {'denoised' if was else 'raw'} scores, this run {'denoised' if now else 'raw'} ones; "
                    f"resume it {'without' if was else 'with'} denoise=False, or pass another out= (or delete the "
                    "file) to start a new run")
            def a(word) -> str:
                return f"{'an' if str(word)[:1] in 'aeiou' else 'a'} {word}"

            held = (f"{a(was)} search, not {a(now)} one" if k == "strategy" else f"a run with {k}={was!r}, not {now!r}")
            raise PromptSearchError(f"{p} holds {held}; pass another out= (or delete the file) to start a new run")
        if res.numbers is not None and old.numbers is not None and (why := _numbers_differ(old.numbers, res.numbers)):
            raise PromptSearchError(f"{p} holds scores computed with {why}; its numbers would not compare with this "
                                    "run's: pass another out= (or delete the file) to start a new run")
        return old

    @classmethod
    def open(cls, path, model: str, dataset: str, strategy: str, denoise: bool, settings: dict | None = None,
             numbers: dict | None = None) -> "Results":
        """A new results file, or the existing one at ``path`` to resume: same model, dataset, strategy,
        and the same ``numbers`` (weights, the sets' contents, every setting that changes a score).

        :param path: the results file (JSON); None: kept in memory only.
        :param model: the model's name or path.
        :param dataset: the dev sets, comma-joined.
        :param strategy: the strategy's name.
        :param denoise: whether scores use the template-denoised variant.
        :param settings: the strategy's settings (``Strategy.settings``).
        :param numbers: everything that changes a score (``Scorer.numbers``); None: not checked.
        :returns: the results, new or resumed (a new file is written at once).
        :raises PromptSearchError: when the file holds another run or scores computed another way,
            or is read-only, or another process writes it.
        """
        p = Path(path) if path else None
        res = cls(p, model, dataset, strategy, denoise, dict(settings or {}), numbers=numbers)
        if p is not None:
            check_not_read_only(p)
            hold_write_lock(p)  # a second process on the same file is refused, not a silent last-writer-wins
        if p is not None and p.exists():
            old = cls._resumable(p, res)
            old.settings = res.settings
            old.numbers = numbers or old.numbers
            old.resumed_from = len(old.entries)
            res = old
        if p is not None and not p.exists():
            res.save()  # fail now, not after an hour of scoring, if --out is not writable (an existing file is
            # rewritten at the first score, so a run that stops before scoring leaves it byte for byte)
        return res

    @classmethod
    def load(cls, path) -> "Results":
        """A results file read back (schema checked; one-line error if it is not one), to read —
        ``open`` is the way to write to one.

        :param path: the results file.
        :returns: the results (to read).
        :raises PromptSearchError: when the file is not a results file this tool reads.
        """
        d = load(path)
        st = d.get("stats", {})
        res = cls(Path(path), d["model"], d["dataset"], d["strategy"], bool(d["denoise"]),
                  dict(d.get("settings") or {}),
                  created=d.get("created", _now()), scored=int(st.get("scored", 0)), cached=int(st.get("cached", 0)),
                  seconds=float(st.get("seconds", 0.0)), work_before=dict(st.get("encodings_by_precision", {})),
                  validation=d.get("validation"), numbers=d.get("numbers"),
                  races={k: RaceState.from_json(v) for k, v in d.get("x_races", {}).items()},
                  judged=dict(d.get("x_judged") or {}),
                  path_steps=[PathStep.from_json(r) for r in d.get(PathStep.field, [])],
                  extras={k: v for k, v in d.items() if k.startswith("x_") and k not in _OWN_FIELDS})
        for name, record in _RECORDS.items():
            if record.field in d:
                try:
                    setattr(res, name, record.from_json(d[record.field]))
                except TemplateError as exc:  # a key edited by hand into one that does not read
                    raise PromptSearchError(f"{path}: {record.field} names a key that does not read ({exc}); fix that "
                                            "field, or pass another out= (or delete the file) to start a new "
                                            "run") from None
        for e in d.get("templates", []):
            entry = Entry.from_json(e)
            res.entries[entry.entry_key] = entry
        if "x_chosen" in d:  # the key of one of its entries, as text
            res.chosen = next((k for k in res.entries if k.text == d["x_chosen"]), None)
        if "x_record" in d:  # checked as loaded: an edited score stays unverified until it is re-scored
            record = d["x_record"]
            res.suspect = {k for k, e in res.entries.items() if record.get(e.key) != _seal(e)}
        return res

    @property
    def finished_trials(self) -> int:
        """Trials (Optuna) or templates the run has finished.

        :returns: the count.
        """
        return int((self.study and self.study.finished) or (self.scored + self.cached) or len(self.entries))

    @property
    def own_key(self) -> Representation | None:
        """The key of the model's own representation, once the search has scored it.

        :returns: the key, or None before it is scored.
        """
        return self.baseline.key if self.baseline else None

    def track(self, work: dict) -> None:
        """Count the encodings a scorer does from now on (its live ``work`` tally) in the stats.

        :param work: the scorer's ``work`` tally (encodings by precision), read at each save.
        """
        self.work = work

    def add_seconds(self, seconds: float) -> None:
        """Time spent on work that recorded no score (a race's screening rungs).

        :param seconds: the time to add to the run's.
        """
        self.seconds += seconds

    def add(self, score: Score, source: str = "") -> Entry:
        """Record one score as an entry and save (a key scored before keeps its order and held-out scores).

        :param score: the scorer's score.
        :param source: what proposed it (empty: the old entry's).
        :returns: the entry.
        """
        key = score.entry_key
        self.suspect.discard(key)  # scored now: its number is this tool's
        old = self.entries.get(key)
        if old is None:  # the stats count what the file holds: each template once, however often resumed
            if score.cached:
                self.cached += 1
            else:
                self.scored += 1
        if not score.cached:
            self.seconds += score.seconds
        e = Entry(score.template, round(score.spearman, 4), score.denoise,
                  round(score.seconds if not old else max(old.seconds, score.seconds), 3),
                  source or (old.source if old else ""),
                  old.order if old else len(self.entries) + 1, old.validation if old else None,
                  sets={k: round(v, 4) for k, v in score.sets.items()} if score.sets else (old.sets if old else None),
                  layer=score.layer, members=score.members, readout=score.readout)
        self.entries[key] = e
        self.save()
        return e

    def ranked(self) -> list[Entry]:
        """Every entry, highest score first (ties by key).

        :returns: the entries.
        """
        return sorted(self.entries.values(), key=lambda e: (-e.spearman, e.key))

    def best_mask(self) -> Entry | None:
        """The best-scored entry that reads [MASK] (or a causal LM's last token) states only: a single
        template, no pooled read-out (None when there is none).

        :returns: the entry, or None.
        """
        return next((e for e in self.ranked() if not e.members and _reads_mask(e)), None)

    def answer_first(self) -> list[Entry]:
        """``ranked``, with the chosen entry (``x_chosen``) moved to the front.

        :returns: the entries.
        """
        r = self.ranked()
        chosen = self.entries.get(self.chosen) if self.chosen is not None else None
        return r if chosen is None else [chosen] + [e for e in r if e is not chosen]

    def choose(self, key: Representation) -> None:
        """The strategy's product, when it is not simply the highest score (greedy with a minimum gain
        stops before a candidate that scored higher by less than its noise).

        :param key: the chosen entry's key.
        """
        self.chosen = key
        self.save()

    def top_templates(self, k: int = 2) -> list[Entry]:
        """The best ``k`` [MASK]-read entries (what the fine-tuner trains): the chosen one first when it is
        one (a pooled read-out, such as the model's own mean pooling, is not trained here).

        :param k: how many.
        :returns: at most ``k`` entries.
        """
        best = self.best
        ranked = [e for e in sorted(self.entries.values(), key=lambda e: -e.spearman) if _reads_mask(e)]
        if best is not None and _reads_mask(best):
            ranked = [best] + [e for e in ranked if e is not best]
        return ranked[:k]

    @property
    def best(self) -> Entry | None:
        """The strategy's chosen template if it named one, else the highest-scoring.

        :returns: the entry, or None when nothing was scored.
        """
        chosen = self.entries.get(self.chosen) if self.chosen is not None else None
        r = self.ranked()
        return chosen or (r[0] if r else None)

    def to_dict(self) -> dict:
        """The results file's JSON content (entries, records, stats).

        :returns: a JSON-ready dict.
        """
        tpm = 60.0 * self.scored / self.seconds if self.seconds > 0 else None
        work = dict(self.work_before)
        for k, v in self.work.items():
            work[k] = work.get(k, 0.0) + v
        chosen = self.chosen
        d = {
            "schema": SCHEMA_ID,
            "model": self.model,
            "dataset": self.dataset,
            "strategy": self.strategy,
            "denoise": self.denoise,
            "settings": self.settings,
            "created": self.created,
            "updated": _now(),
            "stats": {"scored": self.scored, "cached": self.cached, "seconds": round(self.seconds, 2),
                      "templates_per_minute": round(tpm, 2) if tpm else None,
                      "encodings": round(sum(work.values()), 3),
                      "encodings_by_precision": {k: round(v, 3) for k, v in sorted(work.items())}},
            # the chosen representation first (marked), then the rest ranked: the file's first entry is its answer
            "templates": [{**e.to_json(), **({"chosen": True} if e.entry_key == chosen else {})}
                          for e in self.answer_first()],
        }
        if self.validation is not None:
            d["validation"] = self.validation
        if self.numbers is not None:
            d["numbers"] = self.numbers
        # what this tool wrote (see unverified); an entry loaded edited keeps no seal until it is re-scored
        d["x_record"] = {e.key: "unverified" if k in self.suspect else _seal(e) for k, e in self.entries.items()}
        if self.path_steps:
            d[PathStep.field] = [r.to_json() for r in self.path_steps]
        if self.chosen is not None:
            d["x_chosen"] = self.chosen.text
        for name, record in _RECORDS.items():
            if getattr(self, name) is not None:
                d[record.field] = getattr(self, name).to_json()
        if self.races:
            d["x_races"] = {k: r.to_json() for k, r in self.races.items()}
        if self.judged:
            d["x_judged"] = self.judged
        d.update(self.extras)
        return d

    def unverified(self) -> list[Representation]:
        """Keys whose score this tool did not write as it stands (an entry edited or added by hand; a file
        from before the record has none).

        :returns: the keys.
        """
        return [k for k in self.entries if k in self.suspect]

    def trust_notes(self, model: str | None = None) -> list[str]:
        """What a reader should know before using this file's answer: scores not written by a search, another model.

        :param model: the model the reader will use it with; None: not compared.
        :returns: one line a note (none: nothing to know).
        """
        notes = []
        ranked = self.ranked()
        # chosen, 1st
        for key in dict.fromkeys(x.entry_key for x in (self.best, ranked[0] if ranked else None) if x is not None):
            e = self.entries[key]
            if key in self.suspect:
                notes.append(f"{self.path}: the score of {e.key} ({e.spearman:.2f}) is not the one a promptsearch "
                             "search wrote (edited by hand?); re-score it with 'promptsearch score' before trusting it")
        if model is not None and not same_model(self.model, model, *recorded_place(self.extras)):
            notes.append(f"{self.path} was searched on model {self.model!r}, not {model!r}: its ranking says nothing "
                         f"about {model!r}")
        return notes

    def save(self) -> None:
        """Write the file (atomically); nothing without a ``path``."""
        if self.path is not None:
            atomic_write(self.path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    # ---- what a command prints ---------------------------------------------------------------
    @staticmethod
    def label(name: str) -> str:
        """A data set as this kind's tables and lines name it (``set_label``: a built-in one by its table name).

        :param name: the set's name as the run was given it.
        :returns: the name shown."""
        return set_label(name)

    def format_ranking(self, top: int | None = None) -> str:
        """The best ``top`` templates with their score and any held-out scores.

        :param top: how many; None: all.
        :returns: the table as text.
        """
        ranked = self.ranked()[:top] if top else self.ranked()
        w = max([len(e.entry_key.shown) for e in ranked] + [8])
        kind = "denoised" if self.denoise else "raw"  # what it says of a [MASK] state: nothing of a pooled read-out
        masks = [_reads_mask(e) for e in ranked]
        kind = kind if all(masks) else "pooled" if not any(masks) else f"[MASK] rows {kind}"
        held = (self.validation or {}).get("tasks", []) if any(e.validation for e in ranked) else []
        sets = self.set_names if any(e.sets for e in ranked) else []
        objective = self.objective + " " if sets else ""
        head = objective + ('' if sets else set_label(self.dataset) + ' ') + '(' + kind + ')'
        hw = max(20, len(head))
        cols = [(t, max(10, len(set_label(t)))) for t in sets + held]  # each set as tables name it (STS-B dev)
        lines = [f"\n{'rank':>4}  {'template'.ljust(w)}  {head:>{hw}}"
                 + "".join(f"  {set_label(t):>{cw}}" for t, cw in cols)]
        for i, e in enumerate(ranked, 1):
            v = {**(e.sets or {}), **(e.validation or {})}
            lines.append(f"{i:>4}  {e.entry_key.shown.ljust(w)}  {e.spearman:{hw}.2f}"
                         + "".join(f"  {v[t]:{cw}.2f}" if t in v else f"  {'':>{cw}}" for t, cw in cols))
        if held:
            assert self.validation is not None  # held-out tasks come from it
            which = (f"the best {self.validation['top']} by {set_label(self.dataset)}" if self.validation.get("top")
                     else "the chosen representation and the best [MASK] template")
            lines.append(f"(held-out: {which}, scored on {', '.join(map(set_label, held))})")
        return "\n".join(lines)

    def format_stats(self) -> str:
        """The stats line a search prints: templates scored, time, encodings, the cache, the file.

        :returns: the line (with a leading newline).
        """
        d = self.to_dict()["stats"]
        work = ", ".join(f"{v:.1f} {k}" for k, v in d["encodings_by_precision"].items())
        work = f"; {d['encodings']:.1f} full-set encodings ({work})" if d["encodings"] else ""
        work += (f"; held-out validation {self.validation['seconds']:.0f}s more"
                 if self.validation and "seconds" in self.validation else "")
        if self.resumed_from is not None:  # the file's totals are its runs'; what this one did, said apart
            work += (f" in all its runs; this run (resumed): {len(self.entries) - self.resumed_from} new, "
                     f"{sum(self.work.values()):.1f} full-set encodings")
        if d["scored"]:  # the cache's count with the file's totals, before this run's figures
            return (f"\nscored {d['scored']} template{'s' if d['scored'] != 1 else ''} in {d['seconds']:.0f}s "
                    f"({d['templates_per_minute']:.1f} templates/min; {d['cached']} came from the cache){work}; "
                    f"results: {self.path}")
        # every score read from the cache: the time went to races screening the rest on parts of the data
        # (add_seconds), the only time a run records without a score
        secs = f"{d['seconds']:.0f}s" if d["seconds"] >= 10 else f"{d['seconds']:.1f}s"
        race = f" and {secs} racing the rest on parts of the data" if d["seconds"] > 0 else ""
        return (f"\nscored no template in full: {d['cached']} came from the cache{race}{work}; results: "
                f"{self.path}")

    def summary(self, top: int | None = None, compare=None, stats: bool = True) -> str:
        """What a search prints at the end: its best ``top`` (if given), its stats, and how its best
        compares with the results file ``compare``'s.

        :param top: how many of the best to list; None: no ranking.
        :param compare: another results file's path to compare with; None: no comparison.
        :param stats: print the stats line.
        :returns: the text.
        """
        parts = (([self.format_ranking(top)] if top else []) + verdict_lines(self)
                 + ([self.format_stats()] if stats else []))
        parts += [f"note: {n}" for n in self.trust_notes()]
        line = self.compare(Results.load(compare)) if compare else ""
        return "\n".join(parts + ([line] if line else []))

    def compare(self, other: "Results") -> str:
        """One line: this run's best against another run's (empty if the other holds none).

        :param other: the other run's results.
        :returns: the line.
        """
        ob, b = other.best, self.best
        if ob is None or b is None:
            return ""
        diff = b.spearman - ob.spearman
        verdict = "is at least as good as" if diff >= 0 else f"falls short by {-diff:.2f} points of"
        return (f"\n{self.strategy} best {b.spearman:.2f} {verdict} the {other.strategy} best "
                f"{ob.spearman:.2f} ({ob.key})")


def verdict_lines(results: Results) -> list[str]:
    """What a search prints about the model's own representation and the spread (none if not scored)."""
    v, s = results.baseline, results.spread
    if v is None or not v.settled:
        return []
    obj = "the objective" if len(results.set_names) > 1 else set_label(results.dataset)
    lines = [f"the model's own: {v.reads}"] if v.reads else []
    if v.best == v.key:
        lines += [f"the model's own representation, {v.key.shown} ({v.spearman:.2f}), scored best: it is the answer"]
    elif v.kept and v.gain is not None and v.min_gain is not None and v.gain > v.min_gain:
        assert v.best is not None  # the strategy's answer was the model's own: the highest score was weighed against it
        lines += [f"{v.best.shown} scores {v.gain:+.2f} ± {v.se:.2f} above the model's own representation "
                 f"({v.key.shown}, {v.spearman:.2f}) on {obj}, but the strategy did not choose it; the answer is the "
                 "model's own representation"]
    elif v.kept:
        assert v.best is not None  # a settled verdict names the search's best
        lines += [f"no template beats the model's own representation ({v.key.shown}, {v.spearman:.2f}): "
                 f"{weighed_words(v.weighed)}, "
                 f"{v.best.shown}, is {v.gain:+.2f} ± {v.se:.2f} on {obj}, not above the min gain {v.min_gain:.2f}; "
                 f"the answer is the model's own representation"]
    else:
        assert v.best is not None  # a settled verdict names the search's best
        lines += [f"{v.best.shown} beats the model's own representation ({v.key.shown}, {v.spearman:.2f}) by "
                 f"{v.gain:+.2f} ± {v.se:.2f} on {obj}"]
    if s:
        lines.append(f"spread of the {s.n} scored: min {s.min:.2f}, median {s.median:.2f}, max {s.max:.2f}; "
                     f"the model's own representation ({s.own:.2f}) ranks {s.own_rank} of {s.n}")
    return lines


def _seal(e: Entry) -> str:
    """A short digest of an entry's key and score as written (not a security measure: it tells an edit apart)."""
    return seal([e.key, e.spearman, e.sets])


def seal(value) -> str:
    """A short digest of what a results file writes (its JSON), so that a hand edit of it is told apart from what
    this tool wrote (no security measure): an entry's score (``x_record``), a step's judgement (``x_judged``)."""
    return hashlib.sha1(json.dumps(value, sort_keys=True).encode("utf-8")).hexdigest()[:10]


def _numbers_differ(was: dict, now: dict) -> str:
    """What differs between two ``Scorer.numbers`` records, in words ('' when nothing does)."""
    # the precision first: it explains "batches"
    for k in sorted(set(was) | set(now), key=lambda k: (k != "precision", k)):
        a, b = was.get(k), now.get(k)
        # a file from before the tokenizer was recorded: its weights say
        if a == b or (k == "tokenizer" and k not in was):
            continue
        if k == "data":
            changed = [d for d in sorted(set(a or {}) | set(b or {})) if (a or {}).get(d) != (b or {}).get(d)]
            return f"other contents of {changed[0]} (it has changed since)"
        if k == "model":
            return "other model weights (the checkpoint has changed since)"
        if k == "tokenizer":
            return "another tokenizer (its files or settings have changed since)"
        if k == "precision":  # the encoder's arithmetic (bf16=), not the screening precision racing uses
            return f"{a} arithmetic, not {b} as now (bf16={a == 'bf16'} computes as the file did)"
        if k == "pooled":
            return ("another sentence-transformers stack or pooled computation (its modules, max length or tokenizer; "
                    "or a promptsearch that pooled prompts its own way)")
        return f"{k}={a!r}, not {b!r} as now"
    return ""


def load(path) -> dict:
    """Read a results file, checking the schema; one-line error if it is not one."""
    p = Path(path)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise PromptSearchError(f"no results file {p}") from None
    except UnicodeDecodeError as exc:
        raise PromptSearchError(f"{p} is not UTF-8 text (byte {exc.start}); pass a results file written by a "
                                "promptsearch search") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise PromptSearchError(f"{p} is not a readable results JSON ({exc}); pass a file written by a promptsearch "
                                "search") from None
    if isinstance(d, dict) and d.get("kind") == RETRIEVAL:
        raise PromptSearchError(f"{p} holds a retrieval search (promptsearch retrieval), not template scores: "
                                "pass another file (a retrieval answer exports with promptsearch export)")
    if not isinstance(d, dict) or d.get("schema") not in READABLE:
        raise PromptSearchError(f"{p} is not a promptsearch results file (schema {SCHEMA_ID})")
    err = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema()).iter_errors(d))
    if err is not None:
        where = "".join(f"[{k}]" if isinstance(k,
                                               int) else f".{k}" for k in err.absolute_path).lstrip(".") or "top level"
        msg = err.message if len(err.message) <= 120 else err.message[:119] + "…"
        raise PromptSearchError(f"{p} does not match the results schema at {where}: {msg}; fix that field, or pass "
                                "another out= (or delete the file) to start a new run")
    return d


def _reads_mask(e: Entry) -> bool:
    """Whether an entry reads [MASK] (last-token) states only: no pooled read-out, no pooled member."""
    return not e.readout and not any(m.readout for m in e.members or ())


def top_templates(path, k: int = 2) -> list[Entry]:
    """``Results.top_templates`` of the results file at ``path``."""
    return Results.load(path).top_templates(k)


def kept_precision(out, bf16: bool | None, precision_of: Callable[[str], str | None] | None = None,
                   ) -> tuple[bool | None, str | None]:
    """The precision a run into the results file ``out`` computes in, as ``(bf16, pinned)``: ``bf16`` when it is
    given (the file then refuses a mismatch); else, when ``out`` holds scores computed in fp32 or bf16, that
    precision, with ``pinned`` the file (a resumed file keeps its precision: a CPU's default may differ from the one
    that began it); else ``(None, None)``: the device's default. ``precision_of`` reads the precision a file
    records (None: a template search's results file; the retrieval search passes its own reader), raising
    ``PromptSearchError`` for a file it cannot read (opening it then says what is wrong, in one line)."""
    if bf16 is not None or not out or not Path(out).is_file():
        return bf16, None
    try:
        precision = (precision_of(str(out)) if precision_of is not None
                     else (load(out).get("numbers") or {}).get("precision"))
    except PromptSearchError:
        return bf16, None  # opening it says what is wrong, in one line
    if precision in ("bf16", "fp32"):
        return precision == "bf16", str(out)
    return bf16, None


def scored_settings(numbers: dict, bf16: bool | None = None, add_period: bool | None = None,
                    max_length: int | None = None) -> dict:
    """The encoder settings that compute scores as ``numbers`` (``Scorer.numbers``, what a results file or a
    work study records) says they were computed: its precision and period unless given, its compat setting (what a
    worker of a distributed search scores with), and the ``max_length`` option unless given. The numbers record that
    option only through its effects: the [MASK] inputs' limit (``max_length``: the option within the model's
    positions, else the positions) and the pooled read-outs' (``pooled_max_length``: the option within the
    positions, else the model's own max length). The two differ only where no option was given and the model's own
    max length is not its positions (the default MiniLM: 256 of 512); the [MASK] limit given as the option would
    then cut pooled inputs at 512, not 256: other numbers. Where they agree, the [MASK] limit as the option gives
    both (no option given: the model's own max length is its positions)."""
    limit = numbers["max_length"]
    pooled = numbers.get("pooled_max_length", limit)  # a study made before pooled read-outs had their own limit
    return {"bf16": numbers["precision"] == "bf16" if bf16 is None else bf16,
            "add_period": numbers["add_period"] if add_period is None else add_period,
            "max_length": max_length or (limit if pooled == limit else None), "compat": numbers["compat"]}
