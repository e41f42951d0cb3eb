"""The one scorer every strategy shares: template → STS-B dev Spearman ×100.

One forward pass gives both the raw and the denoised [MASK] states, so every score
records both variants. Scores are cached in a JSONL file keyed by model (name + a
fingerprint of its weights) + template + denoise + dataset (+ the settings that change
numbers: sentence period, precision, max length) and a fingerprint of the pairs scored,
so no template is ever scored twice, across runs and strategies. Appending one line per score makes the cache safe to
interrupt.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence, cast

import numpy as np

# STSData: importable from here as before
from ..data import DEV_SET, DataOptions, DevSets, STSData, data_fingerprint, load_task  # noqa: F401
from ..encoding import PromptEncoder, PromptStates
from ..encoding.reps import normalized, rep_from_key
from ..errors import DataError, PromptSearchError
from ..eval.objective import Objective
from ..eval.sts import STSEvaluator
from ..model import model_fingerprint
from ..model.loading import tokenizer_fingerprint
from ..paths import default_cache_path, local_folder
from ..representation import Representation
from ..template import Template
from .score_cache import append_scores, load_scores


@dataclass
class Scored:
    """What was scored and how it scored — what a fresh ``Score`` and a results file's entry
    (``Entry``) both are: the template, its read-out (a layer, a pooled
    read-out, or an ensemble's members), the objective's Spearman × 100, each dev set's when there are
    several, denoised or not, seconds.

    :param template: the template text (an ensemble's: its members' keys joined by " + ").
    :param spearman: the objective's Spearman ×100.
    :param denoise: whether the [MASK] states were denoised (False for a pooled read-out).
    :param seconds: the encoding time it took (0.0 when it came from the cache, or is an ensemble's).
    :param sets: each dev set's Spearman ×100, when the objective spans several (None: one set).
    :param layer: the [MASK] state's layer (None: the last hidden state).
    :param members: an ensemble's members (None: not an ensemble).
    :param readout: a pooled read-out (None: the [MASK] or last-token state)."""

    template: str
    spearman: float
    denoise: bool
    seconds: float
    # each dev set's score, when the objective spans several
    sets: dict[str, float] | None = field(default=None, kw_only=True)
    layer: int | None = field(default=None, kw_only=True)  # the read-out layer (None: the last hidden state)
    members: tuple[Representation, ...] | None = field(default=None, kw_only=True)  # an ensemble's members
    readout: str | None = field(default=None, kw_only=True)  # a pooled read-out (None: the [MASK]/last-token state)

    @property
    def entry_key(self) -> Representation:
        """What was scored, as an object.

        :returns: the ``Representation`` scored.
        """
        if self.members:
            return Representation.ensemble(self.members)
        return Representation(self.template, None if self.readout else self.layer, self.readout)

    @property
    def value(self) -> float:
        """The primary metric's value (what every kind of task's score has): the objective's Spearman ×100."""
        return self.spearman

    @property
    def label(self) -> str:
        """What a progress bar shows of it: the template."""
        return self.template

    @property
    def key(self) -> str:
        """Its results-entry key: an ensemble's members joined, ``T @readout``, ``T @layer L`` or ``T``.

        :returns: the entry key as text.
        """
        return self.entry_key.text


@dataclass
class Score(Scored):
    """A score as a scorer returns it: also whether it came from the cache, and in which precision.

    :param cached: whether it came from the score cache.
    :param precision: the precision it was computed in (the scorer's reference precision)."""

    cached: bool = False
    precision: str = ""  # the precision it was computed in (the scorer's reference precision)


class Scorer:
    """Scores representations on a dataset (default STS-B dev), or several (``"stsb-dev,sick-trial"``: the
    ``objective``, mean or min, of their Spearmans), with a persistent cache of each set's score.

    Its surface: ``score`` (one representation or a list: a template, at a layer, pooled, an ensemble —
    the one way to score), ``similarities``, ``gain`` and ``se`` (a step's noise), ``cached``,
    ``check``, ``numbers`` (what changes a score) and ``on`` (another data set); for screening
    (racing, pruning rungs) ``at_layer``, ``encode_pairs``, ``record`` and ``count_time``;
    for distributed work ``distribute``, ``measure``, ``record_measured`` and ``remote_rung``.

    :param encoder: the encoder whose representations are scored.
    :param dataset: the dev set, several joined by commas (``"stsb-dev,sick-trial"``), or a ``DevSets``.
    :param denoise: which variant a [MASK] state's score is: denoised or raw (one pass computes, and the cache
        keeps, both; a pooled read-out is never denoised).
    :param data: where the sets are read from and in which columns.
    :param cache: the score cache file (None or True: the default, ``$PROMPTSEARCH_CACHE`` or
        ``$XDG_CACHE_HOME/promptsearch/scores.jsonl``, by default ~/.cache/promptsearch/scores.jsonl; False: no
        cache). A file that cannot be read is said once, and scoring goes on without it.
    :param screening: the precision screening (racing and pruning rungs) encodes in: "auto" (the encoder's
        own), "fp32", "bf16" or "int8".
    :param objective: several dev sets' score: the "mean" or the "min" of their Spearmans.
    :raises promptsearch.PromptSearchError: for an unknown ``screening`` precision or ``objective``, a
        ``dataset`` that is empty, names a group of test sets or names one set twice, or a ``cache`` that is a
        folder or not a score cache.
    :raises promptsearch.errors.DataError: for a set that cannot be read, or two sets holding the same pairs."""

    def __init__(self, encoder: PromptEncoder, dataset: str | DevSets = DEV_SET, denoise: bool = True,
                 data: DataOptions = DataOptions(), cache: str | os.PathLike | bool | None = None,
                 screening: str = "auto", objective: str = "mean"):
        self.encoder = encoder

        if screening not in ("auto",) + PromptEncoder.PRECISIONS:
            raise PromptSearchError(f"unknown precision {screening!r}; choose auto, fp32, bf16 or int8")
        self.screening_precision = encoder.precision if screening == "auto" else screening
        self._screening: PromptEncoder | None = None
        self.sets = DevSets.parse(dataset)  # the dev set(s), parsed once (here, or by the caller)
        self.datasets, self.dataset = list(self.sets.names), self.sets.text
        self.denoise = denoise
        self.data = data
        sets = {d: STSEvaluator(load_task(d, data.data_dir, data.fmt)) for d in self.datasets}
        self.data_fingerprints = {d: data_fingerprint(ev.data) for d, ev in sets.items()}
        seen: dict[str, str] = {}
        for d, fp in self.data_fingerprints.items():  # the same pairs twice would be counted twice by the objective
            if seen.setdefault(fp, d) != d:
                raise DataError(f"dataset={self.dataset}: {seen[fp]} and {d} hold the same pairs; give each set once")
        # Over one set, exactly that set's evaluator (the same sentence order and batches as ``eval``).
        self.evaluator = Objective(sets, objective)
        self.objective = objective
        self.sentences, self.gold = self.evaluator.sentences, self.evaluator.gold
        self.ia, self.ib = self.evaluator.ia, self.evaluator.ib
        self.fingerprint = model_fingerprint(encoder.model)
        self.tokenizer_fingerprint = tokenizer_fingerprint(encoder.tokenizer)
        use_cache = cache is not False
        # a path when it is none of None, False, True
        self.cache_path = (Path(cast("str | os.PathLike", cache)) if cache not in (None, False, True)
                           else default_cache_path())
        loaded = load_scores(self.cache_path) if use_cache else {}
        self.use_cache, self._cache = use_cache and loaded is not None, loaded or {}
        self.n_scored = 0  # templates actually encoded in this process
        self.seconds = 0.0
        self.last_seconds = 0.0
        self.work: dict[str, float] = {}  # precision -> full-set-equivalent encodings done in this process
        self._last_sets: dict[str, float] | None = None
        # a candidate's pair similarities (the run's variant), this process
        self._sims: dict[Representation, np.ndarray] = {}
        self.layer: int | None = None  # the read-out layer scored (None: the last hidden state); see at_layer
        self._views: dict[int | None, Scorer] = {None: self}  # this scorer at each layer asked for (shared by all)
        self._keep_vectors = False  # keep every scored template's normalized vectors (for ensembles)
        self._remote = None  # a distributed.WorkQueue: full-set scores and racing rungs done by workers too
        self._vecs: dict[Representation, np.ndarray] = {}

    @property
    def name(self) -> str:
        """The data set's name (several: comma-joined), as held-out validation keys a score on it."""
        return self.dataset

    def held_out_cost(self, results, helds: dict[str, "Scorer"], todo: Mapping[str, list[Representation]]) -> str:
        """What held-out validation costs, in words: the sentences it encodes for the keys the score cache does not
        hold (``todo``: each held-out set's name → the keys to score there), and (when this search encoded anything)
        about how long that takes at the search's pace; or that the cache holds every score.

        :param results: the search's results (its time and encodings).
        :param helds: the held-out scorers (``on``'s), by name.
        :param todo: each held-out set's name → the keys scored there.
        :returns: the cost, said."""
        # an ensemble is never cached
        fresh = {name: [k for k in keys if k.members or helds[name].cached(k) is None]
                 if helds[name].use_cache else list(keys) for name, keys in todo.items()}
        n_cached = sum(map(len, todo.values())) - sum(map(len, fresh.values()))
        cached = f"{n_cached} from the score cache" if n_cached else ""
        if not any(fresh.values()):
            return f"all {n_cached} from the score cache"
        # an ensemble's members are each encoded again there (a held-out scorer keeps no vectors), cached or not
        passes = {name: sum(len(k.members or ()) or 1 for k in keys) for name, keys in fresh.items()}
        sentences = sum(len(helds[name].sentences) * p for name, p in passes.items())
        n = len({k for keys in fresh.values() for k in keys})
        single = not any(k.members for keys in fresh.values() for k in keys)
        what = (f"{n} × {sentences // n:,} sentences" if single and all(len(keys) in (0, n) for keys in fresh.values())
                else f"{sentences:,} sentences")
        encodings = sum(results.to_dict()["stats"]["encodings_by_precision"].values())
        if results.seconds <= 0 or encodings <= 0 or not len(self.sentences):
            return what + (f", {cached}" if cached else "")
        seconds = results.seconds / (encodings * len(self.sentences)) * sentences
        took = f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.0f} min"
        return f"{what}: about {took} at this search's pace" + (f"; {cached}" if cached else "")

    def on(self, dataset: str) -> "Scorer":
        """A scorer of the same encoder, settings and cache on another data set (held-out validation): the
        cache already read is shared, not read again.

        :param dataset: the data set (task name or file) to score on.
        :returns: the new scorer.
        """
        other = Scorer(self.encoder, dataset=dataset, denoise=self.denoise, data=self.data, cache=False,
                       screening=self.screening_precision, objective=self.objective)
        other.cache_path = self.cache_path
        other.use_cache, other._cache = self.use_cache, self._cache
        return other

    def at_layer(self, layer: int | None) -> "Scorer":
        """This scorer reading ``layer`` (as ``hidden_states`` counts them; None: the last hidden state):
        the same encoder, data, cache and work tally. The last layer is the template's own read-out: this
        scorer itself (one key, one score; ``T @layer L`` for the last L would be ``T`` scored twice).
        ``score`` reads a key's layer itself; a view is for screening at a layer (racing, pruning rungs).

        :param layer: the hidden-state index to read; None: the last hidden state.
        :returns: the scorer reading that layer (this one for the last layer).
        """
        layer = None if layer is None else self.encoder.prompt.layer_index(layer)
        if layer == self.encoder.prompt.n_layers:
            layer = None
        if layer not in self._views:
            view = self._views[layer] = copy.copy(self._views[None])
            view.layer, view._sims, view._vecs = layer, {}, {}
        return self._views[layer]

    def layer_list(self, layers: str | Sequence[int] | None) -> list[int]:
        """``layers`` as ``hidden_states`` indices of this model: "all" (1 … the last) or layer numbers
        ([3, 4, 5]; negative counts from the end). Layer 0 is refused: at [MASK] it is the same for
        every sentence.

        :param layers: "all", layer numbers, or None (no layers).
        :returns: the layers as ``hidden_states`` indices, in the order given, each once.
        :raises PromptSearchError: when ``layers`` is neither "all" nor layer numbers, or names layer 0.
        """
        n = self.encoder.prompt.n_layers
        if layers is None or (not isinstance(layers, str) and len(layers) == 0):
            return []
        if layers == "all":
            return list(range(1, n + 1))
        if isinstance(layers, str) or not all(isinstance(k, int) and not isinstance(k, bool) for k in layers):
            raise PromptSearchError(f"layers={layers!r}: give 'all', or a list of layer numbers such as [3, 4, 5, 6]")
        out = list(dict.fromkeys(self.encoder.prompt.layer_index(k) for k in layers))
        if 0 in out:
            raise PromptSearchError("layers=: layer 0 (the embeddings) reads the same vector for every sentence; "
                                    f"choose from 1 to {n}, or all")
        return out

    def _score_layers(self, t: Representation, layers: list[int | None]) -> dict[int | None, Score]:
        """A template (not pooled) read at each of ``layers``: every layer's states come from one pass (each
        layer's scores cached like one score's)."""
        views = {k: self.at_layer(k) for k in layers}
        out = {k: v.score(t) for k, v in views.items() if v._cached_sets(t) is not None}
        todo = [k for k in layers if k not in out]
        if todo:
            t0 = time.perf_counter()
            reps = {(k, dn): views[k]._rep(t, dn) for k in todo for dn in (False, True)}
            vecs = self.evaluator.encode(self.encoder, list(reps.values()), show_progress_bar=False)
            secs = (time.perf_counter() - t0) / len(todo)
            for k in todo:
                v = views[k]
                v._keep(t, vecs[reps[(k, self.denoise)]])
                scores = {dn: self.evaluator.scores(vecs[reps[(k, dn)]]) for dn in (False, True)}
                v._remember(t, scores, secs)
                out[k] = v._score(t, self.evaluator.value(scores[self.denoise]), secs, self._sets(scores[self.denoise]))
            self.n_scored += len(todo)
            self.seconds += secs * len(todo)
            self._count_work(self.reference_precision, 1.0)
        return {k: out[k] for k in layers}

    @property
    def reference_precision(self) -> str:
        """The precision of every score the scorer returns, records or caches.

        :returns: the precision's name (e.g. "fp32").
        """
        return self.encoder.precision

    @property
    def screening_encoder(self) -> PromptEncoder:
        """The encoder racing and pruning rungs run on (``screening``): the reference encoder
        itself unless another precision was asked for (int8: a quantized copy, made once).
        Anything with ``template_states`` and ``precision`` may be set in its place.

        :returns: the screening encoder."""

        if self._screening is None:
            self._screening = self.encoder.with_precision(self.screening_precision)
        return self._screening

    @screening_encoder.setter
    def screening_encoder(self, encoder) -> None:
        self._screening = encoder

    def count_time(self, seconds: float) -> None:
        """Add screening time (racing's rungs) to the scoring time this scorer reports.

        :param seconds: the screening time to add.
        """
        self.seconds += seconds

    def settings_key(self) -> str:
        """What every cache key of this scorer shares: model, data, denoise and the settings that
        change numbers (a race's identity is built on it).

        :returns: the shared part of the cache keys, as text.
        """
        if len(self.datasets) == 1:
            return self._cache_key("", self.denoise)
        return json.dumps([self._cache_key("", self.denoise, d) for d in self.datasets] + [self.objective])

    def _count_work(self, precision: str, encodings: float) -> None:
        self.work[precision] = self.work.get(precision, 0.0) + encodings

    def numbers(self) -> dict:
        """Everything that changes a score, as a results file records it: a resumed run with another
        value is refused (``Results.open``), so one file never ranks numbers computed two ways.

        :returns: the settings as a JSON-ready dict.
        """
        e = self.encoder
        return {"model": self.fingerprint, "tokenizer": self.tokenizer_fingerprint,
                "data": dict(self.data_fingerprints),
                "precision": e.precision,
                "max_length": e.max_length, "add_period": e.add_period, "compat": e.compat,
                "pooled": e.pooled_signature(),
                "pooled_max_length": e.pooled_max_length,
                "objective": self.objective if len(self.datasets) > 1 else None,
                **({"batches": e.batching} if e.precision != "fp32" else {})}

    # ---- cache -------------------------------------------------------------------------------
    def _cache_key(self, template: str, denoise: bool, dataset: str | None = None) -> str:
        """The cache key of one set's score (the first set's by default)."""
        dataset = dataset or self.datasets[0]
        e = self.encoder
        name = local_folder(e.model.name) or e.model.name  # a folder however it is spelt (its fingerprints decide)
        if (st := Representation.split(template)).readout and Representation(st.template, None,
                                                                             st.readout).prompt is not None:
            # a prompt pooled through the sentence-transformers stack: its numbers hang on the stack, not the
            # [MASK] settings (period, max length, compat)
            return json.dumps([name, f"{self.fingerprint}:{self.tokenizer_fingerprint}", template,
                               f"{dataset}:{self.data_fingerprints[dataset]}",
                               e.precision, f"st={e.pooled_signature()}"]
                              + ([f"batches={e.batching}"] if e.precision != "fp32" else []), ensure_ascii=False)
        soft = e.soft_prompts.get(template)
        soft_id = (hashlib.sha1(soft.detach().float().cpu().numpy().tobytes()).hexdigest()[:12]
                   if soft is not None else None)
        return json.dumps([name, f"{self.fingerprint}:{self.tokenizer_fingerprint}", template, bool(denoise),
                           f"{dataset}:{self.data_fingerprints[dataset]}",
                           e.add_period, e.precision, e.max_length] + ([soft_id] if soft_id else [])
                          + ([f"batches={e.batching}"] if e.precision != "fp32" else [])
                          + (["compat=" + e.compat] if e.compat != "promptsearch" else [])
                          + ([f"layer={self.layer}"] if self.layer is not None else []),
                          ensure_ascii=False)

    def _remember(self, k: Representation, scores: dict[bool, dict[str, float]], seconds: float) -> None:
        records = {self._cache_key(k.text, dn, d): s for dn, per_set in scores.items() for d, s in per_set.items()}
        self._cache.update(records)
        if self.use_cache:
            self.use_cache = append_scores(self.cache_path, records, seconds)

    @staticmethod
    def _canonical(template: str | Template | Representation) -> Representation:
        """What a layer view keys a candidate by: the template parsed, with its pooled read-out when it has one
        (its layer is the view's own; an ensemble is scored from its members)."""
        if isinstance(template, Template):
            return Representation(template.text)
        k = template if isinstance(template, Representation) else Representation.split(template)
        if k.members or k.layer is not None:
            raise PromptSearchError(f"{k.text!r}: a layer view scores one template at its own layer; give the key to "
                                    "Scorer.score, which reads layers and ensembles itself")
        return Representation.of(k.template, readout=k.readout)

    @staticmethod
    def representation(key: str | Template | Representation) -> Representation:
        """What ``score`` reads ``key`` as: a template, ``T @layer L``, ``T @mean`` or an ensemble's members
        joined by `` + `` (text), a ``Template``, or a
        ``Representation`` as it is.

        :param key: a representation: text, a ``Template`` or a ``Representation``.
        :returns: the ``Representation`` it reads as.
        """
        if isinstance(key, Template):
            return Representation(key.text)
        return key if isinstance(key, Representation) else Representation.parse(key)

    def _view(self, k: Representation) -> tuple["Scorer", Representation]:
        """The layer view that scores a single representation (one naming no layer: this scorer, at its own
        layer), and the key it scores there."""
        if k.layer is None:
            return self, self._canonical(k)
        view = self.at_layer(k.layer)
        return view, view._canonical(k.without_layer)

    def _rep(self, k: Representation, denoise: bool):
        """How the encoder computes a candidate here: a pooled read-out (never denoised), or the template's [MASK]
        (last-token) state at this scorer's layer."""
        return rep_from_key(k if k.readout else Representation(k.template, self.layer), denoise)

    def check(self, key: str | Template | Representation) -> None:
        """Refuse a representation the model cannot read (one ``TemplateError``: a
        template that leaves no room for a sentence, a read-out the model lacks), encoding nothing.

        :param key: a representation: text, a ``Template`` or a ``Representation``.
        :raises TemplateError: when the model cannot read it.
        """
        for m in self.representation(key).parts:
            view, k = self._view(m)
            self.encoder.check_rep(view._rep(k, self.denoise))

    def _score(self, k: Representation, value: float, seconds: float, sets: dict[str, float] | None,
               cached: bool = False) -> Score:
        """A score of ``k`` at this scorer's layer, in the reference precision (a pooled read-out is never
        denoised)."""
        return Score(k.template, value, False if k.readout else self.denoise, seconds, cached=cached,
                     precision=self.reference_precision, sets=sets, layer=self.layer, readout=k.readout)

    def _cached_sets(self, template: str | Template | Representation,
                     denoise: bool | None = None) -> dict[str, float] | None:
        """Every set's cached score of a single representation, or None unless all of them are cached."""
        view, k = self._view(self.representation(template))
        dn = self.denoise if denoise is None else denoise
        out = {d: view._cache.get(view._cache_key(k.text, dn, d)) for d in self.datasets}
        return None if any(v is None for v in out.values()) else {d: v for d, v in out.items() if v is not None}

    def know(self, entries) -> int:
        """Take a resumed results file's scores as this process's own (not written to the cache file): each single
        representation's score, per set, for the variant it was scored in, so that a resumed search reads them
        back instead of encoding them again, with the score cache off too (``use_cache=False``). Its pair
        similarities are not in the file; a step's judgement is (``StepRunner.judge``). An ensemble's score is not
        taken: it is scored again (ensembles are not cached).

        :param entries: the file's entries (``Results.entries``' values): an ensemble's, or one of other sets, is
            left out (its members' scores are entries of their own).
        :returns: how many were taken."""
        n = 0
        for e in entries:
            per_set = e.sets if e.sets else {self.datasets[0]: e.spearman} if len(self.datasets) == 1 else None
            if e.members or not per_set or set(per_set) != set(self.datasets):
                continue
            view, k = self._view(self.representation(e.entry_key))
            for dn in (False, True) if k.readout else (bool(e.denoise),):  # a pooled one has no denoised variant
                for d, v in per_set.items():
                    view._cache.setdefault(view._cache_key(k.text, dn, d), float(v))
            n += 1
        return n

    def cached(self, template: str | Template | Representation, denoise: bool | None = None) -> float | None:
        """The cached objective of a single representation (every set's score cached), or None.

        :param template: a single representation: text, a ``Template`` or a ``Representation``.
        :param denoise: the variant to look up; None: the scorer's setting.
        :returns: the cached objective, or None when not cached.
        """
        per = self._cached_sets(template, denoise)
        return None if per is None else self.evaluator.value(per)

    def _sets(self, per_set: dict[str, float] | None) -> dict[str, float] | None:
        return dict(per_set) if per_set and len(self.datasets) > 1 else None

    # ---- scoring -----------------------------------------------------------------------------
    def score(self, representations, fresh: bool = False, on_score: Callable[[Score], None] | None = None):
        """Full-set scores: the one way to score. ``representations``: one (a template, ``T @layer L``,
        ``T @mean``, an ensemble; text, a ``Template`` or a
        ``Representation``) gives its ``Score``; a list gives theirs,
        in order.

        A single representation is scored for the scorer's denoise setting (both variants cached); the
        ones not cached are encoded together, each layer's in one call and a template asked at several
        layers in one pass (its states at every layer), each scored as if alone. An ensemble is the mean of
        its members' normalized vectors (kept from their scores with ``keep_vectors``, else encoded),
        scored like a template but not cached. ``fresh`` skips the cache lookup (training evaluates the same
        template as weights change).

        :param representations: one representation: text, a ``Template`` or a ``Representation``; or a list of them.
        :param fresh: skip the cache lookup (the scores are still cached).
        :param on_score: told each score, in order, once all are made (what the ``Runner`` records; a score
            made is already in the score cache, so an interrupt loses none).
        :returns: a ``Score`` for one representation, a list of them for a list.
        :raises TemplateError: when the model cannot read a representation.
        """
        single = isinstance(representations, (str, Template, Representation))
        keys = [self.representation(r) for r in ([representations] if single else representations)]
        out = self._score_all(keys, fresh)
        if on_score is not None:
            for k in keys:
                on_score(out[k])
        return out[keys[0]] if single else [out[k] for k in keys]

    def _score_all(self, keys: list[Representation], fresh: bool) -> dict[Representation, Score]:
        """Each distinct key's score: singles grouped by layer view (a template at several layers: one pass),
        then ensembles."""
        out: dict[Representation, Score] = {}
        by_view: dict[int | None, tuple[Scorer, list[tuple[Representation, Representation]]]] = {}
        for key in dict.fromkeys(k for k in keys if not k.members):
            view, k = self._view(key)
            by_view.setdefault(view.layer, (view, []))[1].append((key, k))
        layered: dict[Representation, list[int | None]] = {}  # a template at two layers or more, not cached: one pass
        if not fresh:
            for layer, (view, ks) in by_view.items():
                for _, k in ks:
                    if not k.readout and view._cached_sets(k) is None and layer not in layered.get(k, []):
                        layered.setdefault(k, []).append(layer)  # T and T @layer <last> are one key at one layer
        for k, layers in layered.items():
            if len(layers) > 1:
                for layer, sc in self._score_layers(k, layers).items():
                    out[next(key for key, kk in by_view[layer][1] if kk == k)] = sc
        for view, ks in by_view.values():
            rest = [(key, k) for key, k in ks if key not in out]
            if rest:
                for (key, _), sc in zip(rest, view._score_many([k for _, k in rest], fresh)):
                    out[key] = sc
        for key in dict.fromkeys(k for k in keys if k.members):
            out[key] = self._score_members(key.members)
        return out

    def _score_many(self, ts: list[Representation], fresh: bool = False) -> list[Score]:
        """Scores of this view's keys, in order; the ones not cached are encoded in one call
        (``PromptEncoder.encode_templates``: tokenized once, one copy back), each scored as if alone."""
        hits = {t: None if fresh else self._cached_sets(t) for t in ts}
        todo = list(dict.fromkeys(t for t in ts if hits[t] is None))
        out = {t: self._score(t, self.evaluator.value(h), 0.0, self._sets(h), cached=True) for t, h in hits.items()
               if h is not None}
        if todo and self._remote is not None and not self._keep_vectors:  # workers (and this process) score them
            out.update(self._remote.full(self, todo))
            self._count_work(self.reference_precision, float(len(todo)))
        elif todo:
            t0 = time.perf_counter()
            reps = {(t, dn): self._rep(t, dn) for t in todo for dn in (False, True)}  # one pass gives both
            vecs = self.evaluator.encode(self.encoder, list(dict.fromkeys(reps.values())), show_progress_bar=False)
            secs = (time.perf_counter() - t0) / len(todo)
            for t in todo:
                out[t] = self.record(t, {dn: vecs[reps[(t, dn)]] for dn in (False, True)}, secs)
            self._count_work(self.reference_precision, float(len(todo)))
        return [out[t] for t in ts]

    def similarities(self, key: str | Template | Representation) -> np.ndarray:
        """The cosine similarity of every pair (the objective's pairs, the run's variant) under a
        representation (at its layer, pooled, or an ensemble's mean vectors) in the reference precision:
        kept from its full-set score in this process, else encoded (a score read from the cache file has none).

        :param key: a representation: text, a ``Template`` or a ``Representation``.
        :returns: one cosine similarity a pair, in the pairs' order.
        """
        k = self.representation(key)
        if k.members:
            return self.evaluator.similarities(self._ensemble(k.members))
        view, k = self._view(k)
        if k not in view._sims:
            view._encode_one(k, view._keep_vectors)
        return view._sims[k]

    def _encode_one(self, k: Representation, vectors: bool) -> None:
        """Encode the scorer's sentences with one template (the run's variant, this layer) and keep its
        pair similarities, and its normalized vectors if ``vectors``."""
        rep = self._rep(k, self.denoise)
        self._keep(k, self.evaluator.encode(self.encoder, [rep], show_progress_bar=False)[rep], vectors)
        self._count_work(self.reference_precision, 1.0)

    def _ensemble(self, members: Sequence[Representation]) -> np.ndarray:
        return np.mean([self._vectors(k) for k in members], axis=0)

    def _keep(self, k: Representation, vecs: np.ndarray, vectors: bool | None = None) -> None:
        """Keep a template's pair similarities (and its normalized vectors: ``vectors``, by default
        whether ``keep_vectors`` is on)."""
        self._sims[k] = self.evaluator.similarities(vecs)
        if self._keep_vectors if vectors is None else vectors:
            self._vecs[k] = normalized(vecs)

    def _vectors(self, key: Representation) -> np.ndarray:
        """A member's L2-normalized vectors of the scorer's sentences (the run's variant, its layer): kept
        from its score when ``keep_vectors`` is on, else encoded."""
        view, k = self._view(key)
        if k not in view._vecs:
            view._encode_one(k, vectors=True)
        return view._vecs[k]

    def keep_vectors(self, on: bool = True) -> None:
        """Keep every scored representation's normalized vectors in this process (at every layer), so an
        ensemble of them is scored without encoding again (a search that averages templates turns it on).

        :param on: keep them (True) or stop keeping them (False), in every layer's view.
        """
        for view in self._views.values():
            view._keep_vectors = on

    def _score_members(self, members: Sequence[Representation]) -> Score:
        """An ensemble of entry keys (a template, at a layer, or pooled): the mean of the members'
        normalized vectors, scored like a template (from kept vectors; not cached)."""
        scores = self.evaluator.scores(self._ensemble(members))
        return Score(Representation.ensemble(m.without_layer for m in members).text, self.evaluator.value(scores),
                     self.denoise,
                     0.0, precision=self.reference_precision, sets=self._sets(scores), members=tuple(members))

    def gain(self, before: str | Template | Representation, after: str | Template | Representation, n_boot: int = 1000,
             seed: int = 0) -> tuple[float, float]:
        """(objective of ``after`` − objective of ``before``, the paired-bootstrap standard error of that
        difference), ×100, on the scorer's pairs: how much of a gain is noise. Either may be any
        representation (``similarities``).

        :param before: the representation: text, a ``Template`` or a ``Representation`` compared from.
        :param after: the representation: text, a ``Template`` or a ``Representation`` compared to.
        :param n_boot: the bootstrap's resamples.
        :param seed: the bootstrap's seed.
        :returns: ``(gain, se)`` in points (×100).
        """
        return self.evaluator.gain(self.similarities(before), self.similarities(after), n_boot, seed)

    def se(self, key: str | Template | Representation) -> float:
        """The paired-bootstrap standard error (×100) of a representation's objective on the scorer's pairs.

        :param key: a representation: text, a ``Template`` or a ``Representation``.
        :returns: the standard error in points (×100).
        """
        return self.evaluator.se(self.similarities(key))

    def record(self, template: str | Template | Representation, vecs: dict[bool, np.ndarray], seconds: float) -> Score:
        """A template's vectors of every sentence at this view's layer (raw at False, denoised at True: both, or
        the run's variant) scored on the full set: kept, timed, counted and cached like ``score``'s
        (progressive scoring completes its rungs' vectors into a full-set score with it).

        :param template: the template (single representation) the vectors are of.
        :param vecs: the normalized vectors of every sentence, by variant (False: raw, True: denoised).
        :param seconds: the encoding time to count for it.
        :returns: its full-set ``Score``.
        """
        k = self._canonical(template)
        self._keep(k, vecs[self.denoise])
        value = self._record(k, {dn: self.evaluator.scores(v) for dn, v in vecs.items()}, seconds)
        return self._score(k, value, seconds, self._last_sets)

    def _record(self, k: Representation, scores: dict[bool, dict[str, float]], seconds: float) -> float:
        """Full-set scores of both variants, set by set: time them, count them, cache them; the run's
        variant's objective back (its sets' scores in ``_last_sets``)."""
        self.last_seconds = seconds
        self.n_scored += 1
        self.seconds += seconds
        self._remember(k, scores, seconds)
        self._last_sets = self._sets(scores[self.denoise])
        return self.evaluator.value(scores[self.denoise])

    # ---- distributed work (search/distributed.py) -------------------------------------------
    def distribute(self, queue) -> None:
        """Hand full-set scores and racing rungs to a ``WorkQueue``'s
        workers (and this process), at every layer (None: score here again).

        :param queue: a ``WorkQueue``, or None to score in this process again.
        """
        for view in self._views.values():
            view._remote = queue
        self._remote = queue

    def measure(self, key: str | Representation) -> tuple[dict[bool, dict[str, float]], np.ndarray, float]:
        """A worker's full-set job: one single representation's scores of both variants, set by set, the
        run's variant's pair similarities and the seconds it took, neither kept nor cached here (the
        driver records them with ``record_measured``).

        :param key: a single representation (text or ``Representation``).
        :returns: ``(scores by variant then set, the run's variant's pair similarities, seconds)``.
        """
        view, k = self._view(self.representation(key))
        t0 = time.perf_counter()
        reps = {dn: view._rep(k, dn) for dn in (False, True)}  # one pass gives both
        vecs = self.evaluator.encode(self.encoder, list(dict.fromkeys(reps.values())), show_progress_bar=False)
        scores = {dn: {d: float(v) for d, v in self.evaluator.scores(vecs[reps[dn]]).items()} for dn in (False, True)}
        return scores, self.evaluator.similarities(vecs[reps[self.denoise]]), time.perf_counter() - t0

    def record_measured(self, key: Representation, scores: dict[bool, dict[str, float]], sims: np.ndarray,
                        seconds: float) -> Score:
        """A ``measure`` done elsewhere (a worker) recorded at this view's layer as a score computed here
        is: its similarities kept, timed, counted, cached.

        :param key: the representation measured.
        :param scores: its scores by variant (False: raw, True: denoised), then by set.
        :param sims: the run's variant's pair similarities.
        :param seconds: the time the measurement took.
        :returns: its full-set ``Score``.
        """
        k = self._canonical(key)
        self._sims[k] = sims
        value = self._record(k, scores, seconds)
        return self._score(k, value, seconds, self._last_sets)

    def remote_rung(self, templates: list[str], k: int, rungs: list[int],
                    seed: int) -> tuple[dict[str, np.ndarray], int] | None:
        """Racing's rung ``k`` done by the work queue's workers: each template's similarities on its pairs and the
        sentences encoded (counted as screening work here); None without a queue (racing encodes here).

        :param templates: the templates screened at the rung.
        :param k: the rung's index in ``rungs``.
        :param rungs: the sizes of racing's growing pair subsets.
        :param seed: the seed of the subsets' sampling.
        :returns: ``(similarities by template, sentences encoded)``, or None without a queue.
        """
        if self._remote is None:
            return None
        sims, encoded = self._remote.rung(self, templates, k, rungs, seed)
        self._count_work(self.screening_precision, encoded / len(self.sentences))
        return sims, encoded

    PROGRESS_CHUNK = 4  # templates a call when encode_pairs reports progress (a racing rung's bar moves within it)

    def encode_pairs(self, enc: PromptEncoder, templates: list[str], pairs: np.ndarray,
                     vecs: dict[str, dict[bool, np.ndarray | None]], done: dict[str, np.ndarray],
                     progress=None) -> int:
        """Encode with ``enc`` the sentences of ``pairs`` each template has not ``done`` yet into
        ``vecs[template]`` (raw at False, denoised at True: the variants it holds; a ``None`` value
        becomes an array over every sentence at the first call) — the templates that need the same
        sentences in one ``template_states`` call. The count encoded (sentences × templates), also
        added to the work tally in ``enc``'s precision. Racing and progressive scoring grow subsets with it.

        :param enc: the encoder to encode with (the reference or the screening one).
        :param templates: the templates to encode.
        :param pairs: indices of the pairs whose sentences are needed.
        :param vecs: each template's vectors by variant, filled in place.
        :param done: each template's mask over the sentences: those already encoded (updated).
        :param progress: a callable told the count of templates finished after each call; None: silent.
        :returns: the count encoded (sentences × templates).
        """
        want = np.unique(np.concatenate([self.ia[pairs], self.ib[pairs]]))
        groups: dict[bytes, list[str]] = {}
        for t in templates:
            need = want[~done[t][want]]
            if len(need):
                groups.setdefault(need.tobytes(), []).append(t)
        count, finished = 0, 0
        step = self.PROGRESS_CHUNK if progress is not None else None
        work = [(key, ts[i : i + (step or len(ts))]) for key, ts in groups.items() for i in range(0, len(ts),
                                                                                                  step or len(ts))]
        for key, ts in work:  # with ``progress``, a few templates a call (a batch holds one template's rows either way)
            need = np.frombuffer(key, dtype=want.dtype)
            # ``layers`` passed only when a layer is asked for (a screening encoder may not take it)
            at: dict[str, Any] = {} if self.layer is None else {"layers": [self.layer]}
            sts = enc.template_states([self.sentences[i] for i in need], ts, denoise=True in vecs[ts[0]],
                                      show_progress_bar=False, **at)
            finished += len(ts)
            if progress is not None:
                progress(finished)
            for t, got in zip(ts, sts):
                st = got if self.layer is None or isinstance(got, PromptStates) else got[self.layer]
                assert isinstance(st, PromptStates)  # one layer's states: ``layers`` asked for one at most
                for dn in vecs[t]:
                    new = st.denoised if dn else st.raw
                    into = vecs[t][dn]
                    if into is None:
                        into = vecs[t][dn] = np.zeros((len(self.sentences), new.shape[1]), np.float32)
                    into[need] = new
                done[t][need] = True
            count += len(need) * len(ts)
            self._count_work(enc.precision, len(need) * len(ts) / len(self.sentences))
        return count
