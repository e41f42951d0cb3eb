"""Retrieval as an evaluation task: queries × corpus × relevance judgements, scored by nDCG@10.

A ``RetrievalCandidate`` is what a retrieval search tries: a query prompt, a document prompt (each a
sentence-transformers prompt, the text before the input; "" for none) and one pooled read-out for both sides,
so that one Pooling module serves ``encode_query`` and ``encode_document`` alike.

``RetrievalTask`` scores candidates the way sentence-transformers' ``InformationRetrievalEvaluator`` does (cosine,
``retrieval_metrics``), with the cost kept to what differs between them: the queries are encoded once per distinct
(query prompt, read-out) and the corpus once per distinct (document prompt, read-out), and the candidates that share
a document side are scored several at a pass over its vectors (``retrieval_metrics_many``, ``score_passes``), on the
model's device, as the evaluator scores a model's tensors. Corpus vectors go into a file (``CorpusStore``, read a
chunk at a time) in the cache folder, keyed by the model's weights and tokenizer, its sentence-transformers stack,
the precision, the corpus's contents, the document side and the file's dtype: a rerun reads them back instead of
encoding the corpus again, and the corpus never has to fit in memory.

The file holds the vectors in float32 as encoded, so the metrics are the numbers sentence-transformers'
``InformationRetrievalEvaluator`` gives for the exported model (the same cosines of the same vectors), unless the
corpus's float32 vectors would take more than ``float16_above_gib``: then they are stored as float16 unit vectors
(half the disk), and a note says the metrics then differ from sentence-transformers' by float16 rounding.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np
import torch

from ..encoding.reps import rep_from_key
from ..errors import DataError, PromptSearchError, note
from ..model import model_fingerprint
from ..model.loading import tokenizer_fingerprint
from ..paths import cache_dir as default_cache_root
from ..representation import Representation, pooling_of, readout_of
from .ir_metrics import PRIMARY_METRIC, CorpusStore, retrieval_metrics_many

if TYPE_CHECKING:
    from ..data.retrieval import RetrievalData
    from ..encoding import PromptEncoder

ENCODE_CHUNK = 8192  # corpus texts encoded per call (then written to the store): what bounds the float32 in memory
FLOAT16_ABOVE_GIB = 2.0  # a corpus whose float32 vectors exceed this many GiB is stored in float16
# query prompts scored in one pass over a corpus's vectors: at most this many, this many bytes of query vectors, and
# this much arithmetic per pass on the device type (2-core CPU: about a second; a GPU: a fraction of one), so that a
# pass never holds a search's scores, progress or an interrupt for long
PASS_MATRICES = 16
PASS_BYTES = 256 << 20
PASS_FLOPS = {"cpu": 5e10}  # other devices: PASS_FLOPS_ELSEWHERE
PASS_FLOPS_ELSEWHERE = 5e12


def score_passes(n_items: int, n_queries: int, n_corpus: int, dim: int, device: torch.device) -> list[range]:
    """``n_items`` query matrices (each ``n_queries x dim`` float32) cut into passes over a corpus of ``n_corpus``
    rows, within ``PASS_MATRICES``, ``PASS_BYTES`` and the device's ``PASS_FLOPS``: the ranges of items, in order.

    :returns: consecutive ranges covering ``range(n_items)``, each at least one item."""
    flops = PASS_FLOPS.get(torch.device(device).type, PASS_FLOPS_ELSEWHERE)
    each = max(1, n_queries * dim)
    per = max(1, int(min(PASS_MATRICES, PASS_BYTES // (4 * each), flops // (2 * each * max(1, n_corpus)))))
    return [range(i, min(i + per, n_items)) for i in range(0, n_items, per)]


def check_similarity(enc: "PromptEncoder") -> None:
    """Refuse a model whose own similarity would rank otherwise than cosine: the metrics are computed on cosine
    (as sentence-transformers' evaluator computes them for a cosine model), so a model that compares by dot
    product without a Normalize module, or by Manhattan distance, would be scored by another measure than its
    own. Cosine, and dot product or Euclidean distance on normalized vectors (the same ranking), pass.

    :param enc: the encoder.
    :raises promptsearch.PromptSearchError: for such a model (one line)."""
    stack = enc.model.stack()
    sim = stack.similarity
    normalized = bool(stack.modules) and type(stack.modules[-1]).__name__ == "Normalize"
    if sim == "cosine" or (sim in ("dot", "euclidean") and normalized):
        return
    how = "" if normalized else " on unnormalized vectors"
    raise PromptSearchError(f"this model compares vectors by {sim} (its similarity_fn_name){how}; "
                            "promptsearch scores retrieval by cosine, which would rank otherwise than the model does: "
                            "use a model whose similarity is cosine")


TASK_SLOT = "{task}"  # where a prompt names the task: each data set fills it with its own description


def fill_task(prompt: str, description: str) -> str:
    """``prompt`` with ``{task}`` filled with a task description (its final period dropped, as prompts end it
    themselves).

    :param prompt: a prompt, which may name ``{task}``.
    :param description: one sentence that says what the task is.
    :returns: the prompt filled."""
    return prompt.replace(TASK_SLOT, description.strip().rstrip("."))


@dataclass(frozen=True)
class RetrievalCandidate:
    """A query prompt × a document prompt × one pooled read-out (both sides pooled the same way).

    :param query: the sentence-transformers prompt put before each query ("" for none).
    :param document: the prompt put before each document ("" for none).
    :param readout: a pooled read-out (``mean``, ``sentence-mean``, ``cls`` ...: see ``POOLED_READOUTS``)."""

    query: str
    document: str
    readout: str

    @classmethod
    def of(cls, query: str, document: str, readout: str) -> "RetrievalCandidate":
        """A candidate checked: each side parses as a prompt, the read-out is a pooled one; with no prompt on
        either side a read-out that leaves the prompt out is the same as its mode (one candidate, not two).

        :param query: the query prompt.
        :param document: the document prompt.
        :param readout: a pooled read-out.
        :returns: the candidate.
        :raises promptsearch.TemplateError: for a prompt holding ``[X]`` or ``[MASK]``, or an unknown read-out."""
        mode, _ = pooling_of(readout)
        if not query and not document:
            readout = readout_of(mode, True)
        c = cls(query, document, readout)
        c.side("query"), c.side("document")  # each parses (a one-line error otherwise)
        return c

    def side(self, which: str) -> Representation:
        """One side as a representation: its prompt before ``[X]``, pooled by the read-out.

        :param which: ``"query"`` or ``"document"``.
        :returns: the representation the encoder computes for that side."""
        prompt = self.query if which == "query" else self.document
        return Representation.of(prompt + "[X]", readout=self.readout)

    def for_task(self, description: str) -> "RetrievalCandidate":
        """The candidate with ``{task}`` in either prompt filled with ``description`` (itself when neither names it).

        :param description: one sentence that says what the task is.
        :returns: the filled candidate."""
        if TASK_SLOT not in self.query and TASK_SLOT not in self.document:
            return self
        return RetrievalCandidate(fill_task(self.query, description), fill_task(self.document, description),
                                  self.readout)

    def to_json(self) -> dict:
        """``{"query", "document", "readout"}`` as a results file writes it."""
        return {"query": self.query, "document": self.document, "readout": self.readout}

    @classmethod
    def from_json(cls, d: dict) -> "RetrievalCandidate":
        """A candidate read back from ``to_json``'s dict.

        :param d: the dict.
        :returns: the candidate (checked as ``of`` checks it)."""
        return cls.of(str(d["query"]), str(d["document"]), str(d["readout"]))

    @property
    def text(self) -> str:
        """The candidate as one text that names it alone (its JSON, keys sorted): a work queue's job key, a
        judgement's key in a results file."""
        return json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False)

    @property
    def shown(self) -> str:
        """The candidate on one line: each prompt quoted with newlines escaped, and the read-out."""
        def q(p: str) -> str:
            return json.dumps(p, ensure_ascii=False)

        return f"query {q(self.query)}  document {q(self.document)}  @{self.readout}"


def with_queries(data: "RetrievalData", ids: Sequence[str]) -> "RetrievalData":
    """The data with only the queries ``ids`` (in that order) and their judgements, the corpus whole.

    :param data: the retrieval data.
    :param ids: query ids it holds.
    :returns: the data cut to them."""
    return dataclasses.replace(data, queries={q: data.queries[q] for q in ids},
                               relevant={q: data.relevant[q] for q in ids})


def sample_queries(data: "RetrievalData", n: int | None, seed: int = 0) -> "RetrievalData":
    """``n`` of the data's queries drawn at random with ``seed`` (in file order), the corpus whole: a quicker,
    noisier score. All of them when ``n`` is None or not smaller than their number.

    :param data: the retrieval data.
    :param n: how many queries to keep.
    :param seed: the draw's seed.
    :returns: the data with the queries (and their judgements) drawn.
    :raises promptsearch.DataError: for ``n`` below 1."""
    if n is None or n >= len(data.queries):
        return data
    if n < 1:
        raise DataError(f"queries={n}: give at least 1 query to score")
    ids = list(data.queries)
    keep = sorted(np.random.default_rng(seed).choice(len(ids), size=n, replace=False).tolist())
    return with_queries(data, [ids[i] for i in keep])


def screening_corpus(data: "RetrievalData", share: float, seed: int = 0) -> "RetrievalData":
    """The data with a smaller corpus, for screening document prompts (racing): every document a query judges relevant,
    and ``share`` of the others drawn at random with ``seed`` (in corpus order). Each query still has its relevant
    documents among fewer distractors, so every candidate's nDCG@10 is higher there than on the whole corpus, but
    candidates compared on it are compared on the same documents.

    :param data: the retrieval data.
    :param share: the share of the other documents kept, from 0 (none) to 1 (all).
    :param seed: the draw's seed.
    :returns: the data with its corpus cut (``data`` itself when nothing is cut).
    :raises promptsearch.DataError: for a share outside [0, 1]."""
    if not 0 <= share <= 1:  # NaN too
        raise DataError(f"race_share={share}: give the share of the corpus racing screens on, from 0 to 1, e.g. 0.1")
    judged = {d for ds in data.relevant.values() for d in ds}
    others = [d for d in data.corpus if d not in judged]
    k = int(round(share * len(others)))
    if k >= len(others):
        return data
    drawn = set(np.random.default_rng([seed, 2]).choice(len(others), size=k, replace=False).tolist())
    keep = judged | {others[i] for i in drawn}
    return dataclasses.replace(data, corpus={d: t for d, t in data.corpus.items() if d in keep})


HOLDOUT = 0.2  # the share of the queries a search does not see by default (an answer is checked on them)


def hold_out(data: "RetrievalData", fraction: float = HOLDOUT, seed: int = 0) -> "RetrievalData":
    """The queries a search sees: all but ``round(fraction × n)`` drawn at random with ``seed`` (in file order), the
    corpus whole. The ones left out (``unseen``) are where an answer other than the model's own is checked: the best of
    many prompts on the queries searched is chosen for how it scored there, so only queries it was not chosen on say
    whether it beats the model's own.

    :param data: the retrieval data.
    :param fraction: the share held out, from 0 (none) to below 1.
    :param seed: the draw's seed.
    :returns: the data the search sees (``data`` itself when none is held out).
    :raises promptsearch.DataError: for a fraction outside [0, 1), or one that would leave no query to search."""
    if not 0 <= fraction < 1:  # NaN too
        raise DataError(f"holdout={fraction}: give the share of the queries to hold out, from 0 (none) to below 1, "
                        "e.g. 0.2")
    n = len(data.queries)
    k = int(round(fraction * n))
    if k == 0:
        return data
    if k >= n:
        raise DataError(f"holdout={fraction}: {n} queries leave none to search; give a smaller share, or 0")
    ids = list(data.queries)
    held = set(np.random.default_rng([seed, 1]).choice(n, size=k, replace=False).tolist())  # not sample_queries' draw
    return with_queries(data, [q for i, q in enumerate(ids) if i not in held])


def unseen(whole: "RetrievalData", seen: "RetrievalData") -> "RetrievalData | None":
    """The queries of ``whole`` a search on ``seen`` did not see (held out, or left out of its sample), the corpus
    whole; None when it saw them all.

    :param whole: all the data.
    :param seen: the data the search scored on (a subset of ``whole``'s queries).
    :returns: the rest, or None."""
    rest = [q for q in whole.queries if q not in seen.queries]
    if not rest:
        return None
    return with_queries(whole, rest)


class RetrievalTask:
    """Candidates scored on one retrieval data set, the corpus encoded once per document side.

    :param data: the retrieval data (``promptsearch.data.retrieval.RetrievalData``).
    :param cache_dir: where corpus vectors are stored (None: ``<cache dir>/retrieval``; False: a temporary folder
        removed with this task, so nothing outlives the run).
    :param chunk_size: corpus rows scored against the queries at a time (``retrieval_metrics``'s).
    :param show_progress_bar: show encoding progress (None: the encoder's setting).
    :param float16_above_gib: store a corpus's vectors in float16 when their float32 size (documents x dimensions
        x 4 bytes) is above this many GiB (0: always float16); float32 otherwise, where the metrics equal
        sentence-transformers' evaluator's.
    :raises promptsearch.DataError: for no queries, an empty corpus, or a negative ``float16_above_gib``.

    ``corpus_encodings`` counts the corpus encodings this task computed (one per distinct document prompt and
    read-out), ``corpus_passes`` the passes over the corpus they took (one per distinct document prompt: its
    read-outs share it), ``corpus_reused`` the encodings read back from the cache, ``query_encodings`` the query
    encodings."""

    primary_metric = PRIMARY_METRIC

    def __init__(self, data: "RetrievalData", cache_dir: str | os.PathLike | bool | None = None,
                 chunk_size: int = 50_000, show_progress_bar: bool | None = None,
                 float16_above_gib: float = FLOAT16_ABOVE_GIB):
        if not data.queries or not data.corpus:
            raise DataError(f"{data.name}: {'no queries' if not data.queries else 'an empty corpus'} to score")
        if not float16_above_gib >= 0:  # NaN too
            raise DataError(f"float16_above_gib={float16_above_gib}: give a size in GiB >= 0")
        self.float16_above_gib = float(float16_above_gib)
        self._noted_float16 = False
        self.data = data
        self.query_ids = list(data.queries)
        self.corpus_ids = list(data.corpus)
        self.corpus_fingerprint = data.corpus_fingerprint()
        self._tmp: str | None = None
        if cache_dir is False:
            self._tmp = tempfile.mkdtemp(prefix="promptsearch-corpus-")
            self.cache_dir = Path(self._tmp)
        else:
            given = cache_dir if isinstance(cache_dir, (str, os.PathLike)) else None
            self.cache_dir = Path(given) if given is not None else default_cache_root() / "retrieval"
        self.chunk_size = chunk_size
        self.show_progress_bar = show_progress_bar
        self.corpus_encodings = 0
        self.corpus_passes = 0
        self.corpus_reused = 0
        self.query_encodings = 0
        self._queries: dict[tuple[str, Representation], np.ndarray] = {}
        self._corpus: dict[tuple[str, Representation], CorpusStore] = {}
        # per encoder, held weakly: a freed encoder's id reused by another never finds its record
        self._encoder_records: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._screens: dict[tuple[float, int], RetrievalTask] = {}  # this task on smaller corpora (racing)

    @property
    def name(self) -> str:
        """The data's name (``eval.task.EvaluationTask``)."""
        return self.data.name

    def screen(self, share: float, seed: int = 0) -> "RetrievalTask":
        """This task on a smaller corpus (``screening_corpus``): where racing screens document prompts. Its corpus
        vectors are stored in this task's cache folder, temporary or not (named by their own corpus's fingerprint),
        and its query vectors are this task's (the same queries); made once per share and seed.

        :param share: the share of the documents no query judges relevant that is kept.
        :param seed: the draw's seed.
        :returns: the screening task (closed with this one)."""
        key = (float(share), int(seed))
        if key not in self._screens:
            self._screens[key] = RetrievalTask(screening_corpus(self.data, share, seed),
                                               cache_dir=self.cache_dir,  # a temporary one: removed with this task
                                               chunk_size=self.chunk_size, show_progress_bar=self.show_progress_bar,
                                               float16_above_gib=self.float16_above_gib)
            self._screens[key]._noted_float16 = True  # a float16 store is said once a run, by this task
            # the same queries: their vectors, keyed by encoder and query side, shared both ways (a candidate screened
            # and then scored on the whole corpus encodes its queries once)
            self._screens[key]._queries = self._queries
        return self._screens[key]

    def close(self) -> None:
        """Drop the vectors held and, for a task without a cache folder, its temporary folder."""
        self._queries.clear()
        self._corpus.clear()
        for t in self._screens.values():
            t.close()
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __del__(self):
        if getattr(self, "_tmp", None) is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)

    # ---- what the numbers depend on -----------------------------------------------------------------
    def _encoder_record(self, enc: "PromptEncoder") -> dict:
        """What a pooled vector depends on besides the text and the precision: the model's weights and tokenizer,
        its sentence-transformers stack and max length (``pooled_signature``, ``pooled_max_length``) and, outside
        float32, how rows are batched. Computed once per encoder (the tokenizer's fingerprint reads its whole
        definition).

        :param enc: the encoder.
        :returns: a JSON-ready dict."""
        rec = self._encoder_records.get(enc)
        if rec is None:
            rec = {"model": model_fingerprint(enc.model), "tokenizer": tokenizer_fingerprint(enc.tokenizer),
                   "pooled": enc.pooled_signature(), "pooled_max_length": enc.pooled_max_length}
            if enc.precision != "fp32":
                rec["batches"] = enc.batching
            self._encoder_records[enc] = rec
        return rec

    def encoder_key(self, enc: "PromptEncoder") -> str:
        """What a pooled vector depends on besides the text (``_encoder_record``'s values and the precision), as
        the stored corpus vectors are named by it.

        :param enc: the encoder.
        :returns: a short text key."""
        rec = self._encoder_record(enc)
        return ":".join([rec["model"], rec["tokenizer"], rec["pooled"], enc.precision]
                        + ([rec["batches"]] if "batches" in rec else []))

    def numbers(self, enc: "PromptEncoder") -> dict:
        """Everything that changes a score besides the data, as a results file records it (a resumed run must
        match): the model's weights, its tokenizer, its sentence-transformers stack, the longest input, the dtype
        the corpus's vectors are stored in, and outside float32 the batching.

        :param enc: the encoder.
        :returns: a JSON-ready dict."""
        out = {k: v for k, v in self._encoder_record(enc).items() if k != "batches"}
        stack = enc.model.stack()  # the vectors' size after its Dense modules decides the corpus's dtype
        dense = [int(getattr(m, "out_features")) for m in stack.after_pooling() if hasattr(m, "out_features")]
        dim = dense[-1] if dense else stack.dimension
        out["corpus_dtype"] = self.corpus_dtype(dim)  # float16 and float32 scores never mix in one file
        if enc.precision != "fp32":
            out["batches"] = enc.batching
        return out

    def record(self) -> dict:
        """The data as a results file names it: ``{"name", "fingerprint", "queries", "corpus"}``."""
        return {"name": self.data.name, "fingerprint": self.data.fingerprint(), "queries": len(self.query_ids),
                "corpus": len(self.corpus_ids)}

    def corpus_dtype(self, dim: int) -> str:
        """The dtype the corpus's vectors of ``dim`` dimensions are stored in: ``"float32"`` unless their float32 size
        is above ``float16_above_gib``.

        :param dim: the vectors' size.
        :returns: ``"float32"`` or ``"float16"``."""
        return "float16" if len(self.corpus_ids) * int(dim) * 4 > self.float16_above_gib * 2 ** 30 else "float32"

    def _note_float16(self, dim: int) -> None:
        if not self._noted_float16:
            self._noted_float16 = True
            gib = len(self.corpus_ids) * dim * 4 / 2 ** 30
            note(f"note: the corpus's float32 vectors take {gib:.3g} GiB, above float16_above_gib="
                 f"{self.float16_above_gib:g}: they are stored in float16, so the metrics differ from "
                 "sentence-transformers' evaluator's by float16 rounding")

    def _store_path(self, enc_key: str, side: Representation, dtype: str) -> Path:
        name = hashlib.sha256(json.dumps([enc_key, self.corpus_fingerprint, side.text, dtype],
                                         ensure_ascii=False).encode("utf-8")).hexdigest()[:24]
        return self.cache_dir / f"corpus-{name}.npy"

    def _cached(self, enc_key: str, side: Representation) -> CorpusStore | None:
        """The stored vectors of ``side`` in the dtype this task stores them in, if a complete store is there."""
        for dtype in ("float32", "float16"):
            store = _stored(self._store_path(enc_key, side, dtype), len(self.corpus_ids))
            if store is not None and store.dtype == np.dtype(dtype) and self.corpus_dtype(store.dim) == dtype:
                return store
        return None

    # ---- encoding -------------------------------------------------------------------------------------
    def query_vectors(self, enc: "PromptEncoder", sides: Sequence[Representation]) -> dict[Representation, np.ndarray]:
        """The queries' vectors under each query side (float32 ``(n_queries, d)``), each encoded once: the
        missing ones together (prompts that share a pass share it).

        :param enc: the encoder.
        :param sides: query-side representations.
        :returns: each side → its vectors."""
        ek = self.encoder_key(enc)
        todo = [s for s in dict.fromkeys(sides) if (ek, s) not in self._queries]
        if todo:
            reps = {s: rep_from_key(s) for s in todo}
            texts = [self.data.queries[q] for q in self.query_ids]
            with enc.progress_named("queries"):
                got = enc.encode_reps(texts, list(reps.values()), show_progress_bar=self.show_progress_bar)
            for s, r in reps.items():
                self._queries[(ek, s)] = got[r]
                self.query_encodings += 1
        return {s: self._queries[(ek, s)] for s in sides}

    def corpus_vectors(self, enc: "PromptEncoder",
                       sides: Sequence[Representation]) -> dict[Representation, CorpusStore]:
        """The corpus's vectors under each document side, as a ``CorpusStore`` in the cache folder (float32, or
        float16 above ``float16_above_gib``, with a note):
        read back when an earlier call or run stored them, else encoded and written ``ENCODE_CHUNK`` texts at a
        time (at most that many float32 vectors in memory per side); sides with the same prompt share one pass
        over the corpus (their read-outs pooled from it).

        :param enc: the encoder.
        :param sides: document-side representations.
        :returns: each side → its complete store (``retrieval_metrics`` reads it a chunk at a time)."""
        ek = self.encoder_key(enc)
        todo: dict[str | None, list[Representation]] = {}
        for side in dict.fromkeys(sides):
            if (ek, side) in self._corpus:
                continue
            store = self._cached(ek, side)
            if store is not None:
                if store.dtype == np.float16:
                    self._note_float16(store.dim)
                self._corpus[(ek, side)] = store
                self.corpus_reused += 1
            else:
                todo.setdefault(side.prompt, []).append(side)
        texts = [self.data.corpus[c] for c in self.corpus_ids]
        for group in todo.values():
            reps = {side: rep_from_key(side) for side in group}
            writers: dict[Representation, CorpusStore] = {}
            try:
                with enc.progress_named("corpus"):
                    for start in range(0, len(texts), ENCODE_CHUNK):
                        got = enc.encode_reps(texts[start : start + ENCODE_CHUNK], list(reps.values()),
                                              show_progress_bar=self.show_progress_bar)
                        for side, r in reps.items():
                            if side not in writers:
                                dim = got[r].shape[1]
                                dtype = self.corpus_dtype(dim)
                                if dtype == "float16":
                                    self._note_float16(dim)
                                writers[side] = CorpusStore(self._store_path(ek, side, dtype), len(texts), dim,
                                                            dtype=dtype)
                            writers[side].append(got[r])
            except OSError as exc:  # a full disk, a folder turned read-only: one line, nothing half-written kept
                raise PromptSearchError(f"the corpus vectors could not be written in {self.cache_dir} "
                                        f"({exc.strerror or exc}); free space there, give another cache_dir=, or "
                                        "cache_dir=False") from None
            finally:
                for w in writers.values():
                    w.discard()  # an interrupted write leaves no partial file (a complete one is kept)
            self.corpus_passes += 1
            for side in group:
                self._corpus[(ek, side)] = CorpusStore.open(writers[side].path)
                self.corpus_encodings += 1
        return {side: self._corpus[(ek, side)] for side in sides}

    # ---- scoring --------------------------------------------------------------------------------------
    def evaluate(self, enc: "PromptEncoder", candidates: Sequence[RetrievalCandidate], per_query: bool = False,
                 on_score: Callable[[RetrievalCandidate, dict, float], None] | None = None,
                 ) -> dict[RetrievalCandidate, dict]:
        """Score each candidate: its queries' vectors against its corpus vectors, cosine, every metric of
        ``retrieval_metrics`` (``ndcg@10`` the primary one). The queries of all candidates are encoded first (once
        per distinct query side), then candidates are taken grouped by document side, so each corpus encoding is
        made (or read back) once, and scored in passes over its corpus vectors on the model's device, several query
        prompts a pass (``score_passes``: a pass's scores are reported when it ends).

        :param enc: the encoder (its precision and batching are the task's numbers).
        :param candidates: the candidates.
        :param per_query: also return ``"per_query"``: {metric: one value per query, in ``query_ids`` order}.
        :param on_score: called with (candidate, metrics, seconds) as each candidate is scored, the candidates of one
            pass together as it ends (a search saves there, so an interrupt keeps every score made but those of the
            pass under way).
        :returns: each candidate → its metrics (fractions 0..1, as sentence-transformers reports them).
        :raises promptsearch.TemplateError: for a prompt this model cannot read (one line).
        :raises promptsearch.PromptSearchError: for a model that compares vectors otherwise than by cosine (see
            ``check_similarity``)."""
        check_similarity(enc)
        cands = list(dict.fromkeys(candidates))
        t0 = time.perf_counter()
        queries = self.query_vectors(enc, [c.side("query") for c in cands])
        query_seconds = (time.perf_counter() - t0) / max(len(cands), 1)
        out: dict[RetrievalCandidate, dict] = {}
        by_doc: dict[Representation, list[RetrievalCandidate]] = {}
        for c in cands:
            by_doc.setdefault(c.side("document"), []).append(c)
        t1 = time.perf_counter()
        self.corpus_vectors(enc, list(by_doc))  # every side needed, a prompt's read-outs from one pass
        corpus_seconds = (time.perf_counter() - t1) / max(len(by_doc), 1)
        for side, group in by_doc.items():
            corpus = self.corpus_vectors(enc, [side])[side]
            dim = queries[group[0].side("query")].shape[1]
            for part in score_passes(len(group), len(self.query_ids), len(self.corpus_ids), dim, enc.device):
                t2 = time.perf_counter()
                # one pass over the corpus for these query prompts, scored where the model is
                got = retrieval_metrics_many(
                    [torch.from_numpy(queries[group[i].side("query")]).to(enc.device) for i in part], corpus,
                    self.query_ids, self.corpus_ids, self.data.relevant, chunk_size=self.chunk_size)
                scoring_seconds = (time.perf_counter() - t2) / len(part)
                for i, m in zip(part, got):
                    if not per_query:
                        del m["per_query"]
                    out[group[i]] = m
                    if on_score is not None:
                        on_score(group[i], m, query_seconds + scoring_seconds + (corpus_seconds if i == 0 else 0.0))
        return out


def _stored(path: Path, n: int) -> CorpusStore | None:
    """The complete store at ``path`` when it holds ``n`` rows; None when there is none (or an unreadable one,
    encoded again)."""
    if not path.is_file():
        return None
    try:
        store = CorpusStore.open(path)
    except DataError:
        return None
    return store if len(store) == n else None
