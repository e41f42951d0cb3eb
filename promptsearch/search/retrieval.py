"""The retrieval search: the best query prompt × document prompt × pooled read-out for a model on retrieval data.

The model's own candidate is scored first — the prompts ``encode_query`` and ``encode_document`` use
(sentence-transformers reads ``prompts["query"]`` for queries and the first of ``document``, ``passage``,
``corpus`` for documents, else the default prompt) and the model's own pooling — then a strategy (a
``Strategy``, as the STS ones are: these greedy steps, ``GreedyRetrieval``, by default; Optuna's TPE over all three,
``search.retrieval_optuna``) proposes the rest through the runner every search uses (``RetrievalSearch`` is a
``StepRunner``: ``score``, ``step``, ``choose``), which scores with a ``RetrievalScorer`` and alone records. The
greedy search takes three steps, each over the lead so far:

1. query prompts (``templates/retrieval.json``, ``{task}`` filled with the data's description) with the lead's
   document prompt and read-out: the corpus is encoded once for the whole step;
2. document prompts with the lead's query prompt;
3. read-outs (the model's own and the other pooled ones it can give) with the lead's prompts.

**The step rule** (``judge``, as ``promptsearch.search.runner.judge`` for STS): the step's best
candidate replaces the lead only when its nDCG@10 is ahead by more than the noise — the standard error of the
mean of the per-query nDCG@10 differences (the same queries under both, so paired; the limit of the paired
bootstrap), or ``min_gain`` when one is given. **The verdict** is the same rule once more, the search's lead
against the model's own candidate: the answer is the model's own unless the lead beats it beyond its noise,
so the answer is never worse than what the model already gives.

``RetrievalResults`` is the results file (JSON, ``"kind": "retrieval"``), rewritten atomically after each
scored candidate so an interrupt keeps every score; a rerun with the same model, data and numbers resumes it
(nothing scored twice), another run's file is refused with one line.
"""

from __future__ import annotations

import hashlib
import json
import math
import string
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Callable, ClassVar, Mapping, Sequence

import numpy as np

from ..encoding.reps import rep_from_key
from ..errors import PromptSearchError, TemplateError, difference
from ..eval.objective import DEFAULT_OBJECTIVE, combine, rule
from ..eval.retrieval import RetrievalCandidate, RetrievalTask, fill_task
from ..eval.retrieval_sets import RetrievalSets, set_metric
from ..fileio import RETRIEVAL, atomic_write, check_not_read_only, hold_write_lock
from ..library import read_library
from ..representation import POOLED_READOUTS, readout_of
from .results import kept_precision
from .runner import Judged, Settled, StepRunner
from .state import Spread, weighed_words
from .strategy import Strategy, Told

if TYPE_CHECKING:
    from ..encoding import PromptEncoder

KIND = RETRIEVAL  # the results file's "kind"
VERSION = 1
METRIC = "ndcg@10"
DOCUMENT_NAMES = ("document", "passage", "corpus")  # the prompt names encode_document looks for, in its order
ENCODER_READOUTS = ("mean", "sentence-mean", "cls", "sentence-cls", "max", "lasttoken")
CAUSAL_READOUTS = ("lasttoken", "mean", "sentence-mean")


# ---- the search space -----------------------------------------------------------------------------------
def library_prompts(side: str, task: str, library: str = "retrieval") -> list[tuple[str, str]]:
    """The shipped (or given) prompts of one side, ``{task}`` filled with the data's task description.

    :param side: ``"query"`` or ``"document"``.
    :param task: the task description (one sentence).
    :param library: a shipped library's name or a ``.json`` path holding ``query`` and ``document`` lists.
    :returns: ``(prompt, source)`` pairs, in the library's order, each prompt once.
    :raises promptsearch.PromptSearchError: for a library that cannot be read or has no such list."""
    d = read_library(library)
    items = d.get(side)
    if not isinstance(items, list) or not all(isinstance(x, dict) and isinstance(x.get("prompt"), str) for x in items):
        raise PromptSearchError(f"{library}: no '{side}' list of {{\"prompt\", \"source\"}} items")
    out: dict[str, str] = {}
    for x in items:
        out.setdefault(fill_task(x["prompt"], task), str(x.get("source", "")))
    return list(out.items())


@dataclass(frozen=True)
class QueryGrammar:
    """Query prompts composed from slots: ``format`` (``"{instruction}{label}{separator}"``) with one option of each
    slot, ``{task}`` in an option filled with the data's task description (whitespace kept as written: a prompt's
    newline is part of it).

    :param format: the format string naming the slots.
    :param slots: each slot's options, in order, each once.
    :param source: where it comes from."""

    format: str
    slots: dict[str, tuple[str, ...]]
    source: str = ""

    @classmethod
    def of_library(cls, task: str, library: str = "retrieval") -> "QueryGrammar | None":
        """The library's ``query_grammar``, ``{task}`` filled (None: the library has none).

        :param task: the task description.
        :param library: a shipped library's name or a ``.json`` path.
        :returns: the grammar, or None.
        :raises promptsearch.PromptSearchError: for a grammar without a format naming slots that each hold a non-empty
            list of strings."""
        d = read_library(library).get("query_grammar")
        if d is None:
            return None
        where = f"{library}: query_grammar"
        if not isinstance(d, dict) or not isinstance(d.get("format"), str) or not isinstance(d.get("slots"), dict):
            raise PromptSearchError(f"{where} needs a 'format' string and a 'slots' object")
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(d["format"]) if f]
        except ValueError as exc:
            raise PromptSearchError(f"{where}: bad format string ({exc})") from None
        slots: dict[str, tuple[str, ...]] = {}
        for n in dict.fromkeys(names):
            opts = d["slots"].get(n)
            if not isinstance(opts, list) or not opts or not all(isinstance(o, str) for o in opts):
                raise PromptSearchError(f"{where}: slot '{n}' used in the format needs a non-empty list of strings")
            slots[n] = tuple(dict.fromkeys(fill_task(o, task) for o in opts))
        if not slots:
            raise PromptSearchError(f"{where}: the format names no slot")
        return cls(d["format"], slots, str(d.get("source", "")))

    def render(self, choice: dict[str, str]) -> str:
        """The prompt of one option a slot.

        :param choice: slot → option.
        :returns: the prompt."""
        return self.format.format(**choice)

    @property
    def size(self) -> int:
        """How many prompts it composes (with repeats)."""
        return math.prod(len(o) for o in self.slots.values())


def own_candidate(enc) -> RetrievalCandidate:
    """What ``SentenceTransformer(model).encode_query`` / ``encode_document`` compute: the query prompt
    (``prompts["query"]``), the document prompt (the first of ``document``, ``passage``, ``corpus``), either the
    default prompt when the folder names none, and the model's own pooling.

    :param enc: the encoder.
    :returns: the model's own candidate.
    :raises promptsearch.PromptSearchError: for a model whose own representation is not pooled (a folder trained
        to read the [MASK] state)."""
    stack = enc.model.stack()
    own = enc.own_representation()
    if own.st_pooling is None:
        raise PromptSearchError(f"the model's own representation ({own.shown}) is not a pooled prompt: retrieval "
                                "searches sentence-transformers' prompts and pooling, which a folder that reads the "
                                "[MASK] state does not use; give the base model")
    prompts = stack.prompts
    query = prompts["query"] if "query" in prompts else stack.default_prompt
    doc_name = next((n for n in DOCUMENT_NAMES if n in prompts), None)
    document = prompts[doc_name] if doc_name is not None else stack.default_prompt
    assert own.readout is not None  # pooled
    # the Pooling's own read-out, not own's: with no default prompt own is "[X]", whose read-out drops "sentence-"
    # (nothing to leave out), while the query and document prompts are left out as the Pooling says
    readout = own.readout if enc.folder_representation() is not None else \
        readout_of(stack.pooling.pooling_mode, stack.pooling.include_prompt)
    return RetrievalCandidate.of(query or "", document or "", readout)


def model_readouts(enc, readouts: Sequence[str] | None = None) -> list[str]:
    """The read-outs step 3 tries: the model's own first, then ``readouts`` (default: the pooled ones that fit
    the model: a causal LM's last token, mean and sentence-mean; an encoder's mean, cls, max, last token, with
    and without the prompt).

    :param enc: the encoder.
    :param readouts: pooled read-out names (None: the default for the model).
    :returns: the read-outs, each once.
    :raises promptsearch.TemplateError: for a name that is no pooled read-out."""
    own = own_candidate(enc).readout
    given = check_pooled(readouts) if readouts is not None else list(CAUSAL_READOUTS if enc.model.causal
                                                                     else ENCODER_READOUTS)
    return list(dict.fromkeys([own, *given]))


def check_pooled(readouts: Sequence[str]) -> list[str]:
    """Pooled read-out names checked (a one-line error naming the first unknown one), before a model loads.

    :param readouts: the names.
    :returns: them, as a list.
    :raises promptsearch.TemplateError: for a name that is no pooled read-out."""
    bad = [r for r in readouts if r not in POOLED_READOUTS]
    if bad:
        raise TemplateError(f"readouts=: {bad[0]!r} is no pooled read-out; choose from {', '.join(POOLED_READOUTS)}")
    return list(readouts)


# ---- the step rule --------------------------------------------------------------------------------------
BOOTSTRAP = 1000  # resamples behind a min objective's standard errors


def mean_se(values: np.ndarray, sizes: Sequence[int] | None = None, objective: str = DEFAULT_OBJECTIVE) -> float:
    """The standard error of a candidate's score from its per-query values: of their mean, ``std(v, ddof=1) /
    sqrt(n)``; with ``sizes`` (several sets, their queries one after another), of the mean of the sets' means,
    ``sqrt(sum(se_s ** 2)) / k``, or, for the ``"min"`` objective, of their min (the spread of that min over
    ``BOOTSTRAP`` resamples of each set's queries, seeded). Infinite when a set holds fewer than two queries.

    :param values: the per-query values.
    :param sizes: each set's count of queries, in order (None: one set).
    :param objective: "mean" or "min" of the sets' means.
    :returns: the standard error."""
    v = np.asarray(values, dtype=np.float64)
    parts = _per_set(v, sizes)
    if any(len(p) < 2 for p in parts):
        return float("inf")
    if len(parts) == 1:
        return float(v.std(ddof=1) / np.sqrt(len(v)))
    if objective != DEFAULT_OBJECTIVE:
        return float(_resampled([v], sizes, objective)[0].std(ddof=1))
    return float(np.sqrt(sum(p.var(ddof=1) / len(p) for p in parts)) / len(parts))


def set_mean(values: np.ndarray, sizes: Sequence[int] | None = None, objective: str = DEFAULT_OBJECTIVE) -> float:
    """The score of per-query values: their mean; with ``sizes``, the ``objective`` (mean or min) of the sets' means,
    what the metric of several sets is (``combine``, the rule several STS dev sets are combined by).

    :param values: the per-query values.
    :param sizes: each set's count of queries, in order (None: one set).
    :param objective: "mean" or "min" of the sets' means.
    :returns: the score (0.0 for no values)."""
    v = np.asarray(values, dtype=np.float64)
    return combine([p.mean() for p in _per_set(v, sizes)], objective) if len(v) else 0.0


def _per_set(values: np.ndarray, sizes: Sequence[int] | None) -> list[np.ndarray]:
    """Per-query values cut into each set's (``sizes``: each one's count, in order; None: one set)."""
    return np.split(values, np.cumsum(sizes)[:-1]) if sizes else [values]


def _resampled(arrays: Sequence[np.ndarray], sizes: Sequence[int] | None, objective: str,
               n_boot: int = BOOTSTRAP, seed: int = 0) -> list[np.ndarray]:
    """Each array's score (``set_mean``) on ``n_boot`` resamples of each set's queries, the same resamples for every
    array (paired), seeded. Drawn ``RESAMPLES_AT_ONCE`` resamples at a time, so memory stays at that many times a
    set's queries, whatever ``n_boot``."""
    rng = np.random.default_rng(seed)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if sizes else np.array([0])
    lengths = list(sizes) if sizes else [len(arrays[0])]
    vals = [np.asarray(a, dtype=np.float64) for a in arrays]
    out: list[list[np.ndarray]] = [[] for _ in vals]
    for lo in range(0, n_boot, RESAMPLES_AT_ONCE):
        k = min(RESAMPLES_AT_ONCE, n_boot - lo)
        idx = [s + rng.integers(0, n, size=(k, n)) for s, n in zip(starts, lengths)]
        for o, v in zip(out, vals):
            o.append(rule(objective)(np.stack([v[i].mean(1) for i in idx]), 0))  # each resample's sets combined
    return [np.concatenate(o) for o in out]


RESAMPLES_AT_ONCE = 50  # resamples drawn together (memory: this many times a set's queries, in int64 indices)


def judge(before: np.ndarray, after: np.ndarray, min_gain: float | str | None = "auto",
          sizes: Sequence[int] | None = None, objective: str = DEFAULT_OBJECTIVE) -> Judged:
    """The step rule: ``after`` is taken over ``before`` only when its gain is above ``min_gain`` ("auto" or None: the
    gain's standard error). On one set the gain is the mean of the per-query differences (its nDCG@10 minus the
    lead's), its error ``std(d, ddof=1) / sqrt(n)``. Over several sets (``sizes``) the gain is that of the objective
    of the sets' means: for the mean, the error that mean's (``mean_se``); for the min, the spread of the gain over
    paired resamples of each set's queries.

    :param before: the lead's per-query nDCG@10.
    :param after: the challenger's, the same queries in the same order.
    :param min_gain: the gain (a fraction of nDCG) it must exceed; "auto" or None: the standard error.
    :param sizes: each set's count of queries, in order (None: one set).
    :param objective: "mean" or "min" of the sets' means.
    :returns: the judgement."""
    b, a = np.asarray(before, dtype=np.float64), np.asarray(after, dtype=np.float64)
    return Judged.of(*gain_se(b, a, sizes, objective), min_gain)  # the one step rule (search.runner)


def gain_se(before: np.ndarray, after: np.ndarray, sizes: Sequence[int] | None = None,
            objective: str = DEFAULT_OBJECTIVE) -> tuple[float, float]:
    """``after``'s gain over ``before`` in the score (``set_mean``) and that gain's standard error (see ``judge``).

    :returns: ``(gain, se)``."""
    if objective == DEFAULT_OBJECTIVE or not sizes or len(sizes) < 2:
        d = after - before
        return set_mean(d, sizes), mean_se(d, sizes)
    gain = set_mean(after, sizes, objective) - set_mean(before, sizes, objective)
    if any(n < 2 for n in sizes):
        return gain, float("inf")
    rb, ra = _resampled([before, after], sizes, objective)
    return gain, float((ra - rb).std(ddof=1))


# ---- the results file -----------------------------------------------------------------------------------
@dataclass
class RetrievalEntry:
    """A scored candidate as the results file holds it."""

    candidate: RetrievalCandidate
    metrics: dict[str, float]
    source: str
    seconds: float
    per_query: np.ndarray  # nDCG@10 of each query (the step rule's input)
    validation: dict[str, float] | None = None  # held-out set -> nDCG@10 there (``held_out``; not search work)

    @property
    def score(self) -> float:
        return float(self.metrics[METRIC])

    @property
    def value(self) -> float:
        """The primary metric's value (what every kind of task's score has): nDCG@10."""
        return self.score

    @property
    def entry_key(self) -> RetrievalCandidate:
        """What was scored: the results' key."""
        return self.candidate

    @property
    def label(self) -> str:
        """What a progress bar shows of it."""
        return self.candidate.shown

    def to_json(self) -> dict:
        return {**self.candidate.to_json(), "metrics": {k: round(float(v), 6) for k, v in self.metrics.items()},
                "source": self.source, "seconds": round(self.seconds, 3),
                "per_query": {METRIC: [round(float(x), 6) for x in self.per_query]},
                **({"validation": self.validation} if self.validation else {})}

    @classmethod
    def from_json(cls, d: dict) -> "RetrievalEntry":
        return cls(RetrievalCandidate.from_json(d), {k: float(v) for k, v in d["metrics"].items()}, d.get("source", ""),
                   float(d.get("seconds", 0.0)), np.asarray(d["per_query"][METRIC], dtype=np.float64),
                   {str(k): float(v) for k, v in d["validation"].items()} if d.get("validation") else None)


@dataclass
class RetrievalResults:
    """A retrieval search's results file in memory: what was scored, the path of steps, the verdict.

    :param path: the JSON file (None: kept in memory).
    :param model: the model's name or path.
    :param data: ``{"name", "fingerprint", "queries", "corpus"}`` of the data scored.
    :param precision: the precision the vectors were computed in.
    :param numbers: everything else that changes a score (weights, tokenizer, stack); a resumed run must match."""

    path: Path | None
    model: str
    data: dict
    precision: str
    numbers: dict = field(default_factory=dict)
    entries: dict[RetrievalCandidate, RetrievalEntry] = field(default_factory=dict)
    own: RetrievalCandidate | None = None
    best: RetrievalCandidate | None = None  # the answer (what export reads): set by the verdict only
    verdict: dict | None = None
    steps: list[dict] = field(default_factory=list)
    stats: dict = field(default_factory=dict)
    strategy: dict = field(default_factory=dict)  # the strategy that proposed the candidates and its settings
    generated: list[dict] = field(default_factory=list)  # query prompts a language model wrote ({prompt, source})
    races: dict[str, dict] = field(default_factory=dict)  # each race's record, by its key: a resumed run reads it back
    validation: dict | None = None  # held-out validation: its sets, top and seconds (``held_out``)
    # the command that last ran the search, {"argv": its arguments, "cwd": its folder} (the TUI resumes with it)
    command: dict | None = None
    # the searched queries' ids, in the order of each entry's per-query scores (several sets: "set/id"), so a score
    # can be recomputed on exactly those queries (the rest were held out or left out of a sample)
    query_ids: list[str] = field(default_factory=list)
    # the model's folder when it is a local one (``paths.local_folder`` of the folder each run loaded): its name is
    # found again from another folder (an export, a resume under another spelling)
    model_folder: str | None = None
    # the model folder's weights in brief as each run found them (``model.weights.weights_sample``): an export
    # refuses a folder that no longer holds them (retrained or replaced since it was scored)
    model_weights: dict | None = None
    # what the search searched (its task's description, a digest of its prompts, its read-outs): a resumed run must
    # search the same (``RetrievalSearch.begin``)
    space: dict = field(default_factory=dict)
    judged: dict[str, list[float | str]] = field(default_factory=dict)  # judgements, each sealed (StepRunner.judge)
    PLACES: ClassVar[int] = 6  # the decimals a score is kept to (nDCG@10)
    UNIT: ClassVar[str] = "candidate"  # what an entry is called in what a command says

    @classmethod
    def open(cls, path, model: str, data: dict, precision: str, numbers: dict | None = None,
             query_ids: Sequence[str] = ()) -> "RetrievalResults":
        """A new results file, or the one at ``path`` resumed when it holds a run of the same model, data,
        precision and numbers.

        :param path: the file (None: in memory only).
        :param model: the model's name or path.
        :param data: the data's record (see the class).
        :param precision: the precision.
        :param numbers: what else changes a score.
        :param query_ids: the searched queries' ids (``query_ids``): a resumed file without them (an older one) gets
            them, as the data's fingerprint matched.
        :returns: the results (a new file is written at once, so an unwritable path fails now).
        :raises promptsearch.PromptSearchError: for another run's file, or one that cannot be written."""
        p = Path(path) if path else None
        res = cls(p, model, data, precision, dict(numbers or {}), query_ids=[str(q) for q in query_ids])
        if p is None:
            return res
        check_not_read_only(p, "out")
        hold_write_lock(p)
        if p.exists():
            old = cls.load(p)
            why = _differs(old, res)
            if why:
                raise PromptSearchError(f"{p} holds a retrieval run with {why}; pass another out= (or delete the file) "
                                        "to start a new run")
            old.steps = []  # the path is walked again (from the scores kept)
            if res.query_ids and old.query_ids != res.query_ids:
                old.query_ids = res.query_ids
                old.save()
            return old
        res.save()
        return res

    @classmethod
    def for_task(cls, path, model: str, task, enc) -> "RetrievalResults":
        """``open`` for a run of ``task`` with ``enc``: its data record, precision and numbers.

        :param path: the file (None: in memory only).
        :param model: the model's name or path as given.
        :param task: the ``RetrievalTask``.
        :param enc: the encoder.
        :returns: the results, new or resumed."""
        return cls.open(path, model, task.record(), enc.precision, task.numbers(enc), task.query_ids)

    @classmethod
    def load(cls, path) -> "RetrievalResults":
        """A retrieval results file read back.

        :param path: the file.
        :returns: the results.
        :raises promptsearch.PromptSearchError: for a file that is not one (one line)."""
        p = Path(path)
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise PromptSearchError(f"no results file {p}") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise PromptSearchError(f"{p} is not a readable results JSON ({exc}); pass a file written by "
                                    "promptsearch retrieval") from None
        if not isinstance(d, dict) or d.get("kind") != KIND:
            raise PromptSearchError(f"{p} is not a retrieval results file (no \"kind\": \"retrieval\"): pass another "
                                    "out= for a retrieval run")
        if d.get("version") != VERSION:
            raise PromptSearchError(f"{p} is a retrieval results file of version {d.get('version')!r}; this "
                                    f"promptsearch reads version {VERSION}")
        try:
            res = cls(p, str(d["model"]), dict(d["data"]), str(d["precision"]), dict(d.get("numbers") or {}))
            for e in d.get("entries", []):
                entry = RetrievalEntry.from_json(e)
                res.entries[entry.candidate] = entry
            res.own = RetrievalCandidate.from_json(d["own"]) if d.get("own") else None
            res.best = RetrievalCandidate.from_json(d["best"]) if d.get("best") else None
        except (KeyError, TypeError, ValueError) as exc:
            raise PromptSearchError(f"{p}: a retrieval results file with a missing or malformed field ({exc}); pass "
                                    "another out= (or delete the file)") from None
        res.verdict, res.steps, res.stats = d.get("verdict"), list(d.get("path") or []), dict(d.get("stats") or {})
        res.strategy = dict(d.get("strategy") or {})
        res.generated = [dict(g) for g in d.get("generated") or []]
        res.races = {str(k): dict(v) for k, v in (d.get("races") or {}).items()}
        res.validation = dict(d["validation"]) if d.get("validation") else None
        res.command = dict(d["command"]) if isinstance(d.get("command"), dict) else None
        res.query_ids = [str(q) for q in d.get("query_ids") or []]
        res.model_folder = d["model_folder"] if isinstance(d.get("model_folder"), str) else None
        res.model_weights = d["model_weights"] if isinstance(d.get("model_weights"), dict) else None
        res.space = dict(d["space"]) if isinstance(d.get("space"), dict) else {}
        res.judged = dict(d["judged"]) if isinstance(d.get("judged"), dict) else {}
        return res

    def add(self, entry: RetrievalEntry, source: str = "") -> RetrievalEntry:
        """Record one scored candidate and save (``Runner.record``).

        :param entry: the scorer's entry.
        :param source: what proposed it (empty: the entry's own).
        :returns: the entry recorded."""
        if source:
            entry = replace(entry, source=source)
        self.entries[entry.candidate] = entry
        self.save()
        return entry

    def choose(self, key: RetrievalCandidate) -> None:
        """The strategy's answer (``Runner.choose``): nothing to write. The runner holds it (``StepRunner.lead``) for
        the verdict to weigh against the model's own; ``best`` (what ``export`` reads) is the verdict's alone, so a
        run interrupted before its verdict (or its check on the unseen queries) leaves no unjudged answer in its file.

        :param key: the chosen candidate (one the results hold)."""

    @property
    def path_steps(self) -> list[dict]:
        """The path's rows as the file keeps them (``"path"``); set by ``Runner.note`` with ``RetrievalStep`` rows.

        :returns: the rows."""
        return self.steps

    @path_steps.setter
    def path_steps(self, rows: list) -> None:
        self.steps = [r if isinstance(r, dict) else r.to_json() for r in rows]

    @property
    def spread(self) -> Spread | None:
        """min / median / max nDCG@10 over the candidates scored, and the model's own score and rank (``Spread.of``,
        as an STS search's; None before any).

        :returns: the spread, 6 places."""
        if not self.entries:
            return None
        own = self.entries[self.own].score if self.own in self.entries else None
        return Spread.of([e.score for e in self.entries.values()], own, 6)

    @property
    def sizes(self) -> list[int] | None:
        """Over several sets, each one's count of queries searched, in the order of an entry's per-query values
        (None: one set).

        :returns: the counts, or None."""
        sets = self.data.get("sets")
        return [int(x["queries"]) for x in sets] if isinstance(sets, list) else None

    @property
    def objective(self) -> str:
        """Over several sets, how their scores are one: "mean" or "min" (a file written before the min: "mean")."""
        return str(self.data.get("objective", DEFAULT_OBJECTIVE))

    @staticmethod
    def label(name: str) -> str:
        """A retrieval set as lines name it: by its own name (a BEIR folder ``stsb`` is the user's, not STS-B).

        :param name: the set's name.
        :returns: it."""
        return name

    def ranked(self) -> list[RetrievalEntry]:
        """The entries, highest nDCG@10 first (as STS ``Results.ranked``)."""
        return sorted(self.entries.values(), key=lambda e: -e.score)

    def to_json(self) -> dict:
        return {"kind": KIND, "version": VERSION, "model": self.model, "data": self.data, "precision": self.precision,
                "numbers": self.numbers, "metric": METRIC,
                "entries": [e.to_json() for e in self.entries.values()],
                **({"own": self.own.to_json()} if self.own else {}),
                **({"best": self.best.to_json()} if self.best else {}),
                **({"verdict": self.verdict} if self.verdict else {}),
                "spread": self.spread.to_json() if self.spread else None, "path": self.steps, "stats": self.stats,
                **({"strategy": self.strategy} if self.strategy else {}),
                **({"generated": self.generated} if self.generated else {}),
                **({"races": self.races} if self.races else {}),
                **({"validation": self.validation} if self.validation else {}),
                **({"command": self.command} if self.command else {}),
                **({"model_folder": self.model_folder} if self.model_folder else {}),
                **({"model_weights": self.model_weights} if self.model_weights else {}),
                **({"space": self.space} if self.space else {}),
                **({"judged": self.judged} if self.judged else {}),
                **({"query_ids": self.query_ids} if self.query_ids else {})}

    def save(self) -> None:
        """Write the file atomically (no-op in memory)."""
        if self.path is not None:
            atomic_write(self.path, json.dumps(self.to_json(), indent=1, ensure_ascii=False) + "\n")


def _differs(old: RetrievalResults, new: RetrievalResults) -> str:
    """What differs between a file's run and this one, in words ('' when nothing)."""
    if old.model != new.model:
        return f"model={old.model!r}, not {new.model!r}"
    if old.data.get("fingerprint") != new.data.get("fingerprint"):
        was_obj, now_obj = (d.get("objective", DEFAULT_OBJECTIVE) for d in (old.data, new.data))
        if was_obj != now_obj:
            return f"the {was_obj} of its sets' scores, not their {now_obj} (objective=)"
        if (all(old.data.get(k) == new.data.get(k) for k in ("name", "corpus")) and not old.data.get("sets")
                and old.data.get("queries") != new.data.get("queries")):
            return (f"other queries searched ({old.data.get('queries')}, not {new.data.get('queries')} as now: "
                    "holdout=, queries= and seed= choose them)")
        shown = ("name", "queries", "corpus")
        if all(old.data.get(k) == new.data.get(k) for k in shown):  # the same name and sizes: say what else differs
            was = {s.get("name"): s.get("description") for s in old.data.get("sets") or []}
            for s in new.data.get("sets") or []:
                if s.get("name") in was and was[s["name"]] != s.get("description"):
                    return (f"another description for {s['name']} ({was[s['name']]!r}, not {s.get('description')!r} "
                            "as now)")
            if old.query_ids and new.query_ids and old.query_ids != new.query_ids:  # the same number, others drawn
                return (f"other queries searched (as many, {new.data.get('queries')}, but others: holdout=, queries= "
                        "and seed= choose them; or the data changed)")
            return (f"other data of the same name and size ({new.data.get('name')!r}, {new.data.get('queries')} "
                    f"queries, {new.data.get('corpus')} documents): other queries, documents or judgements")
        return (f"other data ({old.data.get('name')!r}, {old.data.get('queries')} queries, {old.data.get('corpus')} "
                f"documents; not {new.data.get('name')!r}, {new.data.get('queries')} queries, "
                f"{new.data.get('corpus')} documents)")
    if old.precision != new.precision:
        return f"scores in {old.precision}, not {new.precision} (the precision bf16=True / bf16=False set)"
    for k in sorted(set(old.numbers) | set(new.numbers)):
        if old.numbers.get(k) != new.numbers.get(k):
            return f"another {k} ({old.numbers.get(k)!r}, not {new.numbers.get(k)!r} as now)"
    return ""


def resumed_precision(path, bf16: bool | None) -> tuple[bool | None, str | None]:
    """The precision a run resuming ``path`` keeps: ``kept_precision`` with the retrieval file's reader.

    :param path: the results file (may not exist).
    :param bf16: the precision asked for (None: not asked).
    :returns: ``(bf16, pinned)``: the file's precision and its name when ``bf16`` is None and ``path`` is a
        retrieval results file; ``(bf16, None)`` otherwise."""
    return kept_precision(path, bf16, lambda p: RetrievalResults.load(p).precision)


# ---- scoring on workers -----------------------------------------------------------------------------------
def job_key(c: RetrievalCandidate) -> str:
    """A candidate as a work-queue job's key (its JSON, keys sorted).

    :param c: the candidate.
    :returns: the key."""
    return c.text


@dataclass
class RetrievalWork:
    """A retrieval search's scoring as ``promptsearch worker`` jobs (``search.distributed``): what a worker must
    rebuild (``spec``) and one job done (``measure_job``: a candidate's metrics and per-query nDCG@10, the numbers
    the driver would compute: the same data, model, precision and settings, checked by the worker against the spec).

    :param task: the ``RetrievalTask`` (the queries searched).
    :param enc: the encoder.
    :param source: how a worker rebuilds the data: ``load_retrieval``'s arguments, the hold-out and sample draws, the
        float16 limit and the max length (JSON-ready)."""

    task: "RetrievalTask"
    enc: "PromptEncoder"
    source: dict

    def spec(self, model: str) -> dict:
        """What a worker must reproduce (the driver's work study records it).

        :param model: the model as named.
        :returns: ``{"kind": "retrieval", "model", "dataset", "source", "data", "precision", "numbers"}``."""
        task, enc = self.task, self.enc
        return {"kind": KIND, "model": model, "dataset": task.data.name, "source": self.source,
                "data": task.record(), "precision": enc.precision, "numbers": task.numbers(enc)}

    def check(self, spec: dict, model: str) -> None:
        """Refuse (one line naming the first difference) a study whose ``spec`` this work would not reproduce: another
        kind of search, other data, precision, model weights, tokenizer or settings.

        :param spec: the study's.
        :param model: the model as named."""
        mine = self.spec(model)
        for key, what in (("kind", "kind of search"), ("precision", "precision")):
            if mine.get(key) != spec.get(key):
                raise PromptSearchError(f"this worker's {what} is {mine.get(key)!r}, the study's "
                                        f"{spec.get(key)!r}: start it with the search's settings")
        if mine["data"] != spec["data"]:
            raise PromptSearchError(f"this worker's retrieval data differ from the study's "
                                    f"({difference(mine['data'], spec['data'])}): the study reads its data as the "
                                    f"search was given it, {spec['source']['data']!r}; run the worker where those "
                                    "paths hold the search's files")
        if mine["numbers"] != spec["numbers"]:
            raise PromptSearchError(f"this worker's model weights, tokenizer or settings differ from the study's "
                                    f"({difference(mine['numbers'], spec['numbers'])}; the study's model is "
                                    f"{spec['model']!r}, a worker's unless model= names another): give it the "
                                    "search's model and settings")

    def do(self, job) -> dict:
        """One job (``search.distributed.Job``): the candidate its key names, scored (``measure_job``)."""
        return self.measure_job(job.key)

    def measure_job(self, key: str) -> dict:
        """One job: the candidate ``key`` names scored here (its corpus vectors from this machine's cache, or encoded).

        :param key: ``job_key`` of a candidate.
        :returns: ``{"metrics", "per_query", "seconds"}`` (the per-query nDCG@10 as floats, exact in JSON)."""
        c = RetrievalCandidate.from_json(json.loads(key))
        t0 = time.perf_counter()
        m = self.task.evaluate(self.enc, [c], per_query=True)[c]
        pq = [float(x) for x in m["per_query"][METRIC]]
        return {"metrics": {k: float(v) for k, v in m.items() if k != "per_query"}, "per_query": pq,
                "seconds": time.perf_counter() - t0}


@dataclass(frozen=True)
class CorpusRace:
    """Racing for retrieval: a step's document prompts are screened on a smaller corpus before any of them is
    encoded over the whole one, since a retrieval candidate's cost is mostly its corpus encoding. The smaller corpus
    (``RetrievalTask.screen``) holds every document a query judges relevant and ``share`` of the others; the lead and
    every candidate with another document prompt are scored there on the same queries. Two rules then drop
    candidates, as STS racing's do on a subset of the pairs:

    * **clearly behind**: the screen's leader is ahead of it by more than ``z`` standard errors of the per-query
      difference (``z`` 1.645: one-sided 5 %);
    * **halving**: at most ``ceil(keep × n)`` of the ``n`` screened go on.

    Only the rest are scored on the whole corpus; the screen's numbers decide who is dropped and are never an entry's
    score (each step row keeps them). The lead, and candidates with its document prompt, are never dropped. Only a
    step with two or more document prompts other than the lead's races (the greedy document step): one is one corpus
    pass either way, and a prompt's read-outs share its pass.

    A race needs a smaller corpus that is small: one holding more than ``most`` of the documents (a small corpus, few
    documents but the judged ones) costs about what it saves, so there is no race (``pays``).

    :param share: the share of the not-judged documents the screen keeps.
    :param keep: the share of the screened candidates that may go on.
    :param z: how many standard errors behind the screen's leader drops a candidate.
    :param seed: the screen's draw.
    :param most: the largest share of the corpus a screen may hold and still race."""

    share: float = 0.1
    keep: float = 0.5
    z: float = 1.645
    seed: int = 0
    most: float = 0.25

    def pays(self, runner) -> bool:
        """Whether screening can save corpus encoding: the smaller corpus holds at most ``most`` of the documents.
        Screening ``n`` document prompts and the lead costs ``(n + 1) × S`` documents encoded and saves at most
        ``(n - ceil(keep × n)) × D``; at ``keep`` 0.5 and three prompts (the library's) that is a saving only below
        ``S = D / 4``. Said once a run when it does not.

        :param runner: the ``RetrievalSearch``.
        :returns: whether to race."""
        scorer = runner.scorer
        screen, whole = len(self.screening(scorer).corpus_ids), len(scorer.task.corpus_ids)
        if screen <= self.most * whole:
            return True
        if not scorer.said_no_race:
            scorer.said_no_race = True
            runner.say(f"  racing: none, its smaller corpus would hold {screen:,} of the {whole:,} documents, more "
                       f"than {self.most:.0%} (the judged ones and race_share= of the rest): a screen would cost "
                       "about what it saves")
        return False

    def __post_init__(self):
        if not 0 < self.share < 1:  # NaN too
            raise PromptSearchError(f"race_share={self.share}: give the share of the corpus racing screens on, above 0 "
                                    "and below 1, e.g. 0.1")
        if not 0 < self.keep <= 1:
            raise PromptSearchError(f"keep={self.keep}: give the share of the screened that go on, above 0 up to 1")

    def settings(self) -> dict:
        """The race as the results file records it."""
        return {"share": self.share, "keep": self.keep, "z": self.z, "seed": self.seed}

    def run(self, runner, candidates: list, source: str, desc: str, sources: Mapping | None = None) -> Told:
        """The race as ``Runner.score(racing=...)`` runs it: the step's candidates, the lead first, screened; those
        left scored on the whole corpus (``Runner.score``: recorded as they come).

        :param runner: the ``RetrievalSearch`` (its scorer, results and progress line).
        :param candidates: the step's candidates, the lead first.
        :param source: what proposed them.
        :param desc: the step's name (unused: the race says its own line).
        :param sources: a source of its own for some candidates.
        :returns: the scores of those left, in candidate order; the dropped; the race's record (None: no race)."""
        go, record = self.screen(runner, candidates)
        told = runner.score(go, source, record="new", together=True, sources=sources)
        return Told(told.scores, list(record["dropped"]) if record else [], record)

    def screening(self, scorer: "RetrievalScorer"):
        """The smaller corpus a run screens on (``RetrievalTask.screen``): made once a run, kept on the scorer (its
        corpus passes are counted apart).

        :param scorer: the run's scorer.
        :returns: the screening task."""
        if scorer.screen is None:
            scorer.screen = scorer.task.screen(self.share, self.seed)
        return scorer.screen

    def screen(self, runner, candidates: list) -> tuple[list, dict | None]:
        """The candidates a step scores on the whole corpus after the screen, and the screen's record (None: no race:
        fewer than two document prompts other than the lead's).

        :param runner: the ``RetrievalSearch``.
        :param candidates: the step's candidates, the lead first.
        :returns: ``(those left, in candidate order; the record)``."""
        scorer = runner.scorer
        lead = candidates[0]
        # another document prompt than the lead's is another pass over the corpus (a prompt's read-outs share one);
        # decided from the lead alone, so a resumed run (some of them scored already) races the same candidates
        new = [c for c in dict.fromkeys(candidates) if c.document != lead.document]
        if len({c.document for c in new}) < 2:
            return candidates, None
        key = hashlib.sha1(json.dumps([[c.to_json() for c in [lead, *new]], self.settings()],
                                      sort_keys=True).encode("utf-8")).hexdigest()[:16]
        record = runner.results.races.get(key)
        if record is not None:  # a resumed run: the same race, decided already (no screen encoded again)
            scorer.races_read += 1
            runner.say(f"  racing: {len(new)} document prompts, screened on {record['documents']:,} documents by the "
                       "run this file resumes")
        elif not self.pays(runner):  # a small corpus: every document prompt on the whole of it
            return candidates, None
        else:
            record = self._screened(runner, lead, new)
            runner.keep(races={**runner.results.races, key: record})  # kept before any is scored: an interrupt keeps it
        dropped = [RetrievalCandidate.from_json(d) for d in record["dropped"]]
        scorer.screened_out += len(dropped)
        # one scored on the whole corpus already (a file a run without racing wrote) costs nothing: it stays
        return [c for c in candidates if c not in dropped or c in runner.results.entries], record

    def _screened(self, runner, lead: RetrievalCandidate, new: list[RetrievalCandidate]) -> dict:
        """The screen itself: ``lead`` and ``new`` scored on the smaller corpus, the two rules applied; the race's
        record (its settings, the screen's size, the lead's screen score, the dropped with theirs and why)."""
        scorer = runner.scorer
        screen = self.screening(scorer)
        runner.say(f"  racing: {len(new)} document prompts screened on {len(screen.corpus_ids):,} of "
                   f"{len(scorer.task.corpus_ids):,} documents")
        got = screen.evaluate(scorer.enc, [lead, *new], per_query=True)
        pq = {c: np.asarray(m["per_query"][METRIC], dtype=np.float64) for c, m in got.items()}
        leader = max([lead, *new], key=lambda c: got[c][METRIC])
        behind = set()
        for c in new:
            j = judge(pq[c], pq[leader], 0.0, scorer.sizes, scorer.objective)
            if c != leader and j.gain > self.z * j.se:
                behind.add(c)
        rest = sorted((c for c in new if c not in behind), key=lambda c: -got[c][METRIC])
        kept = set(rest[:math.ceil(self.keep * len(new))])
        return {**self.settings(), "documents": len(screen.corpus_ids), "screened": len(new),
                "lead_ndcg": round(float(got[lead][METRIC]), 6),
                "dropped": [{**c.to_json(), "ndcg": round(float(got[c][METRIC]), 6),
                             "why": "behind" if c in behind else "halving"} for c in new if c not in kept]}


# ---- the scorer and the path's rows -------------------------------------------------------------------------
class RetrievalScorer:
    """What scores retrieval candidates for the ``Runner`` (the STS ``Scorer``'s part, for retrieval): each candidate's
    metrics and per-query nDCG@10 from the task (the corpus encoded once per document prompt and read-out), or from
    ``promptsearch worker`` jobs (``queue``); a candidate the results hold (a resumed file's, another process's) is told
    as it is, not scored again. It judges a step as the step rule wants (``gain``: the mean per-query difference and its
    standard error).

    :param task: the ``RetrievalTask`` (or ``RetrievalSets``, or any object with its ``evaluate``).
    :param enc: the encoder.
    :param results: the results (what they hold is not scored again).
    :param queue: a ``WorkQueue`` made with a ``RetrievalWork``: each candidate a job (None: scored here)."""

    def __init__(self, task, enc, results: "RetrievalResults", queue=None):
        self.task, self.enc, self.results, self.queue = task, enc, results, queue
        self.sizes = getattr(task, "sizes", None)  # several sets: each one's count of queries (weighed by the rule)
        self.objective = getattr(task, "objective", DEFAULT_OBJECTIVE)  # several sets: the mean or min of theirs
        self.made: dict[RetrievalCandidate, RetrievalEntry] = {}  # scored by this process
        self.scored_now = 0  # candidates scored by this process (not read back from the file)
        self.screened_out = 0  # candidates a race dropped (never encoded over the whole corpus)
        self.races_read = 0  # races whose decision a resumed run read back from the results file
        self.screen = None  # the task racing screened on (its corpus passes are counted apart)
        self.said_no_race = False  # whether the run said that racing does not pay on its corpus (said once)

    @property
    def name(self) -> str:
        """The retrieval set's name (several: comma-joined), as held-out validation keys a score on it."""
        return str(self.task.name)

    def on(self, task) -> "RetrievalScorer":
        """A scorer of the same encoder on another retrieval set (held-out validation), with results of its own that
        hold nothing. A candidate is scored as it would be exported: a search over one set filled ``{task}`` with that
        set's description when it made its candidates, and that text is what is scored; over several sets the
        candidates keep ``{task}``, and the held-out set fills it with its own description.

        :param task: the ``RetrievalTask``.
        :returns: the scorer."""
        wrapped = RetrievalSets([task])  # one set: its description fills a candidate's {task}
        return RetrievalScorer(wrapped, self.enc, RetrievalResults(None, self.results.model, wrapped.record(),
                                                                   self.enc.precision))

    @staticmethod
    def held_out_cost(results, helds, todo) -> None:
        """What held-out validation costs, in words: not said for retrieval (None)."""
        return None

    @staticmethod
    def representation(c: RetrievalCandidate) -> RetrievalCandidate:
        """What a candidate is keyed by: itself (``judge`` compares two).

        :param c: the candidate.
        :returns: it."""
        return c

    def entry(self, c: RetrievalCandidate) -> RetrievalEntry:
        """A scored candidate's entry (this process's, or the results').

        :param c: the candidate.
        :returns: its entry.
        :raises KeyError: for one not scored."""
        return self.made[c] if c in self.made else self.results.entries[c]

    def score(self, candidates: Sequence[RetrievalCandidate],
              on_score: Callable[[RetrievalEntry], None] | None = None) -> list[RetrievalEntry]:
        """Entries of the candidates: those the results hold told first, the rest scored in one task call, each told
        (``on_score``: the runner records it, saved) as it comes, so an interrupt keeps every score made.

        :param candidates: the candidates.
        :param on_score: told each entry.
        :returns: their entries, in the order given, each candidate once."""
        cands = list(dict.fromkeys(candidates))
        todo = [c for c in cands if c not in self.made and c not in self.results.entries]
        for c in cands:
            if c not in todo and on_score is not None:
                on_score(self.entry(c))

        def made(c: RetrievalCandidate, m: dict, seconds: float) -> None:
            pq = m.get("per_query", {})
            # kept as the file keeps them (6 places), so a resumed run judges from the numbers this one judges from
            metrics = {k: round(float(v), 6) for k, v in m.items() if k != "per_query"}
            e = self.made[c] = RetrievalEntry(c, metrics, "", seconds,
                                              np.round(np.asarray(pq[METRIC], dtype=np.float64), 6))
            self.scored_now += 1
            if on_score is not None:
                on_score(e)

        if todo and self.queue is not None:  # jobs: whichever process does one, its numbers are the same
            got = self.queue.retrieval([job_key(c) for c in todo])
            for c in todo:
                r = got[job_key(c)]
                made(c, {**r["metrics"], "per_query": {METRIC: r["per_query"]}}, float(r["seconds"]))
        elif todo:
            self.task.evaluate(self.enc, todo, per_query=True, on_score=made)
        return [self.entry(c) for c in cands]

    def gain(self, before: RetrievalCandidate, after: RetrievalCandidate, seed: int = 0) -> tuple[float, float]:
        """The gain of ``after`` over ``before`` (the mean of their per-query nDCG@10 differences; over several sets,
        of the objective of the sets' means) and its standard error (``gain_se``): what the step rule weighs. Both
        scored.

        :param before: the candidate stepped from.
        :param after: the candidate stepped to.
        :param seed: unused (the error is analytic, or a bootstrap of its own fixed seed for a min objective).
        :returns: ``(gain, se)``, fractions of nDCG@10."""
        return gain_se(self.entry(before).per_query, self.entry(after).per_query, self.sizes, self.objective)

    def se(self, c: RetrievalCandidate) -> float:
        """The standard error of a candidate's nDCG@10 (of its per-query values' mean).

        :param c: a scored candidate.
        :returns: the error."""
        return mean_se(self.entry(c).per_query, self.sizes, self.objective)

    def unreadable(self, c: RetrievalCandidate) -> str | None:
        """Why this model cannot read a candidate (a prompt that leaves no room for the text within its max length),
        or None.

        :param c: the candidate.
        :returns: the reason in one line, or None."""
        try:
            for side in ("query", "document"):
                self.enc.check_rep(rep_from_key(c.side(side)))
        except PromptSearchError as exc:
            return str(exc)
        return None


@dataclass
class RetrievalStep:
    """One row of a retrieval search's path (``"path"`` in its file): a step's best against the lead it met, with the
    gain, its error and the threshold when it was judged (``settle``, by ``Runner.step``), the candidates skipped
    (unreadable) and the race's record.

    :param stage: ``"query"``, ``"document"`` or ``"readout"``.
    :param candidates: how many were scored on the whole corpus.
    :param lead: the lead's entry.
    :param best: the step's best entry.
    :param skipped: ``{candidate fields, "why"}`` of those the model cannot read (None: none).
    :param race: the screen's record (None: no race)."""

    stage: str
    candidates: int
    lead: RetrievalEntry
    best: RetrievalEntry
    skipped: list[dict] | None = None
    race: dict | None = None
    judged: dict | None = None  # {"gain", "se", "min_gain"} at 6 places (None: the lead stayed best)
    taken: bool = False

    def settle(self, judged: Judged, score_se: float, stop: str | None = None) -> None:
        """The step judged (``Runner.step``): its gain, error and threshold at 6 places, and whether it is taken.

        :param judged: the ``Judged`` step.
        :param score_se: the best's own standard error (not recorded).
        :param stop: unused (a retrieval step has no stop stage)."""
        self.judged, self.taken = judged.rounded(6), judged.taken

    def to_json(self) -> dict:
        row = {"stage": self.stage, "candidates": self.candidates, "lead": self.lead.candidate.to_json(),
               "lead_ndcg": round(self.lead.score, 6), "best": self.best.candidate.to_json(),
               "best_ndcg": round(self.best.score, 6)}  # as the entries keep them
        if self.skipped:
            row["skipped"] = self.skipped
        if self.race is not None:
            row["race"] = self.race
        return {**row, **(self.judged or {}), "taken": self.taken}


# ---- the strategies ---------------------------------------------------------------------------------------
class RetrievalStrategy(Strategy):
    """A ``Strategy`` over retrieval candidates: ``propose`` asks the runner (a ``RetrievalSearch``) to score
    candidates (``Runner.score``), judges steps (``Runner.step``) and names its lead (``Runner.choose``), which the
    verdict weighs against the model's own (``runner.own``, scored first). ``library`` (the prompt library: a shipped
    name or a ``.json`` path) and ``readouts`` (the pooled read-outs tried; None: the model's defaults, see
    ``model_readouts``) are its search space, which the search reads."""

    name = "strategy"
    library: str = "retrieval"
    readouts: Sequence[str] | None = None

    def settings(self) -> dict:
        """The strategy as the results file records it.

        :returns: a JSON-ready dict, ``{"name": ...}`` and its settings."""
        return {"name": self.name}

    def check(self, scorer) -> None:
        """Refuse what cannot run before anything is scored (one line); by default nothing.

        :param scorer: here the ``RetrievalSearch`` (its space and encoder; the model's own not scored yet).
        :raises promptsearch.PromptSearchError: when the strategy cannot run (a subclass's check)."""


@dataclass
class GreedyRetrieval(RetrievalStrategy):
    """The greedy steps: query prompts with the lead's document prompt and read-out (the corpus encoded once for the
    whole step), then document prompts, then read-outs, each step's best taken only by the step rule.

    :param readouts: the read-outs step 3 tries (None: the model's defaults, see ``model_readouts``).
    :param library: the prompt library (a shipped name or a ``.json`` path).
    :param racing: screen the document step's prompts on a smaller corpus first (``CorpusRace``; None: every one
        scored on the whole corpus; not with workers, where a job is a whole candidate)."""

    readouts: Sequence[str] | None = None
    library: str = "retrieval"
    racing: CorpusRace | None = None
    name = "greedy"

    def settings(self) -> dict:
        return {"name": self.name, **({"racing": self.racing.settings()} if self.racing is not None else {})}

    def propose(self, runner) -> None:
        own = runner.own
        lead = own
        q_src = {RetrievalCandidate.of(q, lead.candidate.document, lead.candidate.readout): f"library: {s}"
                 for q, s in runner.queries}
        lead = self._step(runner, "query", lead, [own.candidate, *q_src], q_src)
        d_src = {RetrievalCandidate.of(lead.candidate.query, d, lead.candidate.readout): f"library: {s}"
                 for d, s in runner.documents}
        lead = self._step(runner, "document", lead, [lead.candidate, *d_src], d_src)
        r_cands = [RetrievalCandidate.of(lead.candidate.query, lead.candidate.document, r) for r in runner.readouts]
        runner.choose(self._step(runner, "readout", lead, [lead.candidate, *r_cands], {}).candidate)

    def _step(self, runner, stage: str, lead: RetrievalEntry, candidates: list[RetrievalCandidate],
              sources: dict[RetrievalCandidate, str]) -> RetrievalEntry:
        """Score a step's candidates (the lead first); its best replaces ``lead`` only by the step rule. The lead
        after it."""
        readable: list[RetrievalCandidate] = []
        skipped: list[dict] = []
        for c in dict.fromkeys(candidates):
            why = runner.scorer.unreadable(c)
            if why:
                skipped.append({**c.to_json(), "why": why})
            else:
                readable.append(c)
        n = len(readable)
        runner.say(f"step {stage}: {n} candidate{'' if n == 1 else 's'}"
                   + (f" ({len(skipped)} this model cannot read{', the first' if len(skipped) > 1 else ''}: "
                      f"{skipped[0]['why']})" if skipped else ""))
        race = self.racing if runner.scorer.queue is None else None  # a worker's job is a whole candidate: no race
        told = runner.score(readable, stage, racing=race, record="new", together=True, sources=sources)
        # the first best in candidate order (Runner.score tells the scores back in it), so a tie is broken alike
        # whatever the file held (a resumed run's path is an uninterrupted one's)
        best = max(told.scores, key=lambda e: e.score)
        row = RetrievalStep(stage, len(told.scores), lead, best, skipped or None, told.race)
        if best.candidate == lead.candidate:
            runner.note(row)
            return lead
        return best if runner.step(row, lead.candidate, best.candidate, seed=0) else lead


# ---- the search -----------------------------------------------------------------------------------------
class RetrievalSearch(StepRunner):
    """The retrieval search (see the module's description): the ``StepRunner`` every search goes through, with a
    ``RetrievalScorer``, ``RetrievalResults`` and retrieval's search space (the library's query and document prompts,
    ``{task}`` filled; the model's read-outs), its ``run`` the model's own candidate, the strategy, the verdict.

    :param task: the ``RetrievalTask`` (or any object with its ``evaluate``).
    :param enc: the encoder.
    :param results: where scores are recorded (resumed entries are not scored again).
    :param strategy: what proposes the candidates after the model's own (any ``Strategy``: a ``RetrievalStrategy``,
        or one written for every kind of task; None: the greedy steps, ``GreedyRetrieval()``); its ``library`` and
        ``readouts``, when it has them, are the search's prompts and read-outs (else the shipped library and the
        model's read-outs).
    :param min_gain: the gain a step must exceed ("auto": its standard error).
    :param progress: told (one line) what each step is about to score; None: nothing said.
    :param confirm: a task on the queries the search does not see (held out, or left out of a sample): an answer other
        than the model's own is checked there (None: not checked).
    :param queue: a ``WorkQueue`` made with a ``RetrievalWork``: each candidate a job for ``promptsearch worker``
        processes (and this one) to score (None: scored here)."""

    scorer: RetrievalScorer
    results: RetrievalResults

    def __init__(self, task, enc, results: RetrievalResults, strategy: Strategy | None = None,
                 min_gain: float | str | None = "auto", progress: Callable[[str], None] | None = None, confirm=None,
                 queue=None):
        strategy = strategy if strategy is not None else GreedyRetrieval()
        super().__init__(strategy, RetrievalScorer(task, enc, results, queue), results, progress)
        self.min_gain = min_gain
        self.task, self.enc, self.queue, self.confirm = task, enc, queue, confirm  # confirm: the queries not searched
        self.description = getattr(task.data, "description", "") or "Given a query, retrieve relevant passages"
        self.library: str = getattr(strategy, "library", "retrieval")
        self.queries = library_prompts("query", self.description, self.library)
        self.documents = library_prompts("document", self.description, self.library)
        self.readouts = model_readouts(enc, getattr(strategy, "readouts", None))
        self.own: RetrievalEntry | None = None  # the model's own candidate's entry, scored first
        self.started = 0.0  # when the run began (``begin``): the run's seconds

    @property
    def scored_now(self) -> int:
        """Candidates scored by this process (not read back from the file)."""
        return self.scorer.scored_now

    @property
    def screened_out(self) -> int:
        """Candidates a race dropped (never encoded over the whole corpus)."""
        return self.scorer.screened_out

    def add_queries(self, prompts: Sequence[tuple[str, str]]) -> None:
        """More query prompts for the search (generated ones): ``(prompt, source)`` pairs after the library's, each
        prompt once.

        :param prompts: the pairs."""
        known = {q for q, _ in self.queries}
        for q, src in prompts:
            if q not in known:
                known.add(q)
                self.queries.append((q, src))

    def _confirm(self, res: RetrievalResults, own_c: RetrievalCandidate) -> None:
        """An answer other than the model's own is weighed against it once more on the queries the search did not see
        (held out, or left out of its sample): it was chosen as the best of many on the queries searched, so its gain
        there is optimistic, and only other queries say whether it beats the model's own. By the same step rule, or the
        model's own is the answer. The corpus vectors of both are read back from the cache, or encoded once more
        without one.

        :param res: the results, their answer (not the model's own) chosen on the queries searched.
        :param own_c: the model's own candidate."""
        chosen = res.best
        assert chosen is not None and self.confirm is not None
        n = len(self.confirm.query_ids)
        self.say(f"checking the answer against the model's own on the {n:,} queries the search did not see")
        got = self.confirm.evaluate(self.enc, [own_c, chosen], per_query=True)
        pq = {c: np.asarray(m["per_query"][METRIC], dtype=np.float64) for c, m in got.items()}
        j = judge(pq[own_c], pq[chosen], self.min_gain, getattr(self.confirm, "sizes", None),
                  getattr(self.confirm, "objective", DEFAULT_OBJECTIVE))
        res.verdict = {**(res.verdict or {}), "unseen": {
            "queries": n, "own": round(float(got[own_c][METRIC]), 6),
            "chosen": round(float(got[chosen][METRIC]), 6), **j.rounded(6), "taken": j.taken}}
        if not j.taken:
            res.best = own_c
            res.verdict["kept"] = True  # the model's own is the answer after all

    def run(self, validate_on: Sequence = (), validate_top: int | None = None, show_progress_bar=None,
            announce=None) -> RetrievalResults:
        """The whole search (``StepRunner.run``): the model's own candidate, the strategy's steps, the verdict (recorded
        and saved), then held-out validation on other retrieval sets (``RetrievalTask``\\ s), as an STS search
        validates on held-out sets: the answer, the model's own and the search's best besides the ``validate_top``
        best (None: just those; 0: no validation). Returns the results, ``best`` the answer."""
        return super().run(validate_on, validate_top, show_progress_bar, announce)

    def begin(self) -> RetrievalCandidate:
        """The strategy's check (before the model's own is scored: a refusal costs no corpus encoding), then the model's
        own candidate scored first and the strategy recorded."""
        self.started = time.perf_counter()
        res = self.results
        own_c = own_candidate(self.enc)
        space = self.check_space()
        self.strategy.check(self)
        res.own = own_c
        self.own = self.score([own_c], "own", record="new", together=True).scores[0]
        res.strategy = {"name": self.strategy.name, **self.strategy.settings()}
        res.space = space
        return own_c

    def space(self) -> dict:
        """What this search searches, as its results file records it: its task's description, a digest of its query and
        document prompts (the library's, ``{task}`` filled, and generated ones: however its file is named) and its
        read-outs (in any order)."""
        prompts = json.dumps([[q for q, _ in self.queries], [d for d, _ in self.documents]], ensure_ascii=False)
        return {"description": self.description, "prompts": hashlib.sha256(prompts.encode("utf-8")).hexdigest()[:16],
                "readouts": sorted(self.readouts)}

    def check_space(self) -> dict:
        """A resumed file's space must be this run's: its candidates, spread and path are a search of one space (a file
        written before spaces were recorded: none to check). A command calls it before it says it resumes the file.

        :returns: this search's space (``space``).
        :raises promptsearch.PromptSearchError: for a file of another space (one line naming what differs)."""
        was, now = self.results.space, self.space()
        said = {"description": "another task description (description=)",
                "prompts": "other prompts (library=, or another version of its file)",
                "readouts": "other read-outs (readouts=)"}
        for k, what in said.items():
            if k in was and was[k] != now[k]:
                shown = "" if k == "prompts" else f": {was[k]!r}, not {now[k]!r} as now"
                raise PromptSearchError(f"{self.results.path} holds a search of {what}{shown}; run it with the same "
                                        "settings to resume it, or pass another out= (or delete the file) to start a "
                                        "new run")
        return now

    def settled(self, own: RetrievalCandidate, done: Settled) -> None:
        """The verdict recorded; an answer other than the model's own checked on the queries the search did not see
        (``confirm``); the run's counts; saved."""
        res = self.results
        res.verdict = {"kept": done.answer == own, "challenger": done.challenger.to_json(),
                       "weighed": done.weighed,  # the strategy's answer, or the highest of the rest (Settled)
                       **({**done.judged.rounded(6), "taken": done.judged.taken} if done.judged else {})}
        res.best = done.answer
        if self.confirm is not None and res.best != own:
            self._confirm(res, own)
        # this run's counts; its time and runs added to the file's earlier ones (a rerun with nothing to do kept only
        # its own, the real run's gone: a user's trial)
        earlier = res.stats or {}
        seconds = round(time.perf_counter() - self.started, 3)
        runs = {"runs": int(earlier.get("runs", 1 if earlier else 0)) + 1,
                "seconds_all_runs": round(float(earlier.get("seconds_all_runs", earlier.get("seconds", 0.0))) + seconds,
                                          3)}
        res.stats = {"scored": len(res.entries), "scored_now": self.scored_now,
                     "corpus_encodings": getattr(self.task, "corpus_encodings", None),
                     "corpus_passes": getattr(self.task, "corpus_passes", None),
                     "corpus_reused": getattr(self.task, "corpus_reused", None),
                     "screened_out": self.screened_out, "races_read": self.scorer.races_read,
                     "screen_passes": getattr(self.scorer.screen, "corpus_passes", 0),
                     "screen_reused": getattr(self.scorer.screen, "corpus_reused", 0),
                     "seconds": seconds, **runs, **self.strategy.stats()}
        res.save()

    def validation_extra(self, own: RetrievalCandidate, top: int | None) -> list:
        """The answer, the model's own and the search's best."""
        res = self.results
        return [c for c in (res.best, own, res.ranked()[0].candidate) if c is not None]


def summary(res: RetrievalResults, top: int = 5) -> list[str]:
    """What a retrieval search prints at the end: the best few, the model's own, the chosen and the spread.

    :param res: the finished results.
    :param top: how many of the ranking to list.
    :returns: the lines."""
    lines = [f"top {min(top, len(res.entries))} of {len(res.entries)} by {METRIC}:"]
    for e in res.ranked()[:top]:
        lines.append(f"  {e.score:.4f}  {e.candidate.shown}")
    lines += _path(res.steps)
    own = res.entries[res.own] if res.own in res.entries else None
    best = res.entries[res.best] if res.best in res.entries else None
    if own is not None:
        lines.append(f"the model's own: {own.candidate.shown}   {METRIC} {own.score:.4f}")
    v = res.verdict or {}
    if (a := v.get("unseen")) is not None:  # the choice named, with its gain where it was chosen (any strategy's)
        chose = (f", {_shown(v['challenger'])} ({v['gain']:+.4f} ± {v['se']:.4f} over the model's own on the queries "
                 "searched)," if v.get("challenger") and "gain" in v else "")
        lines.append(f"checked on the {a['queries']:,} queries the search did not see: its choice{chose} scores "
                     f"{a['chosen']:.4f} {METRIC}, the model's own {a['own']:.4f} ({a['gain']:+.4f} ± {a['se']:.4f}): "
                     + ("the choice stands" if a["taken"] else "the answer is the model's own"))
    said = a is not None and not a["taken"]  # the check on unseen queries gave the model's own: said above
    if best is not None and res.best == res.own and not said:
        if v.get("taken"):  # the strategy's answer was the model's own: the highest was weighed against it
            lines.append(f"{_shown(v['challenger'])} scores {v['gain']:+.4f} ± {v['se']:.4f} {METRIC} above the "
                         "model's own, but the strategy did not choose it: the answer is the model's own")
        elif "gain" in v:
            lines.append(f"nothing beats the model's own beyond its noise: {weighed_words(v.get('weighed'))}, "
                         f"{_shown(v['challenger'])}, is "
                         f"{v['gain']:+.4f} ± {v['se']:.4f} {METRIC} (per-query standard error) over it, not above "
                         f"{v['min_gain']:.4f}: the answer is the model's own")
        else:
            lines.append("the model's own scored best: it is the answer")
    elif best is not None and own is not None and res.best != res.own and a is None:  # (checked: said above)
        lines.append(f"the chosen beats the model's own by {v['gain']:+.4f} ± {v['se']:.4f} {METRIC} (per-query "
                     "standard error) on the queries it was chosen on, none held out: the best of many, its gain is "
                     "optimistic")
    if res.sizes and best is not None and own is not None:  # several sets: how the answer and the own fare on each
        names = [x["name"] for x in res.data["sets"]]
        # the own the answer after all: the search's best against it (the chosen / the own would be one number twice)
        rival = RetrievalCandidate.from_json(v["challenger"]) if v.get("challenger") else None
        other = res.entries[rival] if res.best == res.own and rival in res.entries and rival != res.own else None
        lines.append(f"per set ({METRIC}, " + (f"the search's best, {other.candidate.shown} / the model's own, the "
                                               "answer): " if other is not None else "the chosen / the model's own): ")
                     + ", ".join(f"{n} {(other or best).metrics.get(set_metric(n, METRIC), float('nan')):.4f} / "
                                 f"{own.metrics.get(set_metric(n, METRIC), float('nan')):.4f}" for n in names))
    lines += _held(res)
    s = res.spread
    if s:
        rank = f"; the model's own ({s.own:.4f}) ranks {s.own_rank} of {s.n}" if s.own_rank is not None else ""
        lines.append(f"spread of the {s.n} scored ({METRIC}): min {s.min:.4f}, median {s.median:.4f}, "
                     f"max {s.max:.4f}{rank}")
    if best is not None:
        lines.append(f"chosen: query prompt {json.dumps(best.candidate.query, ensure_ascii=False)}, document prompt "
                     f"{json.dumps(best.candidate.document, ensure_ascii=False)}, read-out {best.candidate.readout}   "
                     f"{METRIC} {best.score:.4f}" + _searched(res))
    return lines


def _searched(res: RetrievalResults) -> str:
    """Which queries a score in the file is on: the ones searched (the rest, held out or left out of a sample, are
    not in it; their ids are the file's ``query_ids``), so the evaluator on every query gives another number."""
    n = res.data.get("queries")
    return f" on the {n:,} {'query' if n == 1 else 'queries'} searched" if isinstance(n, int) else ""


def _held(res: RetrievalResults) -> list[str]:
    """The held-out validation's lines: each validated candidate's nDCG@10 on every held-out set of the file's last
    validation (none without)."""
    sets = (res.validation or {}).get("tasks") or []
    done = [e for e in res.ranked() if set(e.validation or ()) & set(sets)]  # not an earlier validation's other sets
    if not done:
        return []
    first = [e for e in done if e.candidate == res.best] + [e for e in done if e.candidate != res.best]
    named = []
    for e in first:
        marks = [m for m, c in (("the answer", res.best), ("the model's own", res.own)) if e.candidate == c]
        named.append(e.candidate.shown + (f" ({', '.join(marks)})" if marks else ""))
    w = max(len(n) for n in named)
    lines = [f"held-out sets ({METRIC} on {', '.join(sets)}: data the search did not search; not search work):"]
    for e, n in zip(first, named):
        v = e.validation or {}
        lines.append(f"  {n.ljust(w)}  " + ", ".join(f"{s} {v[s]:.4f}" if s in v else f"{s} -" for s in sets))
    return lines


def _path(steps: list[dict]) -> list[str]:
    """Each step's best against the lead it met, and whether it was taken: why a higher score in the ranking above
    may not be the answer (a step's gain within its noise is not taken)."""
    if not steps:
        return []
    lines = ["steps (each one's best against the lead so far, taken only when its gain is above the noise):"]
    for s in steps:
        race = s.get("race")
        raced = (f" ({len(race['dropped'])} of {race['screened']} document prompts dropped by racing on "
                 f"{race['documents']:,} documents)" if race else "")
        if "gain" not in s:
            lines.append(f"  {s['stage']}: the lead stayed best, {METRIC} {s['lead_ndcg']:.4f}{raced}")
            continue
        need = "" if s["min_gain"] == s["se"] else f", needed above {s['min_gain']:.4f}"
        lines.append(f"  {s['stage']}: {_shown(s['best'])}  {s['best_ndcg']:.4f}, {s['gain']:+.4f} ± {s['se']:.4f} "
                     f"over the lead{need}: {'taken' if s['taken'] else 'not taken'}{raced}")
    return lines


def _shown(d: dict) -> str:
    return RetrievalCandidate.from_json(d).shown


