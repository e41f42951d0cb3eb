"""Retrieval metrics as sentence-transformers' ``InformationRetrievalEvaluator`` computes them (6.2.0,
``sentence_transformer/evaluation/information_retrieval.py``), from embeddings, with the corpus scored in chunks.

The evaluator's definitions, kept here to the last bit (``tests/eval/test_ir_metrics.py`` checks equality with it):

- scores are cosine similarities (``util.cos_sim``: each side ``F.normalize``-d, then one ``torch.mm``), in float32
  (float64 when an input is float64; a float16 corpus is read as float32, as ``cos_sim`` converts it);
- each query's ranking is the top ``max k`` corpus entries under the order (-score, corpus id): equal scores are
  ranked by ascending corpus id (string order), whatever the chunk size;
- relevance is binary: a hit is a corpus id in the query's relevant set;
- ``accuracy@k``: share of queries with a hit in the top k; ``precision@k``: hits in the top k / k (k, also when
  the corpus is smaller); ``recall@k``: hits in the top k / number of relevant documents;
- ``mrr@k``: 1 / rank of the first hit within the top k (0 without one), averaged;
- ``ndcg@k``: DCG = sum over the top k of rel_i / log2(i + 2) (i from 0), divided by the DCG of
  min(number relevant, k) hits at the top;
- ``map@k``: the sum of precision@rank at each hit within the top k, divided by min(k, number relevant).

Memory is bounded: the corpus is read ``chunk_size`` rows at a time into one buffer, normalised there, scored against
every query into one score buffer, and each chunk's top ``max k`` folded into a running top-k per query, so the
(queries x corpus) score matrix never exists. The buffers are allocated once per call, not per chunk. Beyond the
caller's own arrays, one call's peak is about

    chunk_size x (4 x n_queries + 4 x dim)    the float32 rows and their float32 scores (x 8 each in float64)
  + chunk_size x 2 x dim                      the float16 rows read from a float16 CorpusStore (not for an
                                              array; a float32 store is read straight into the float32 rows)
  + n_queries x max_k x 110                   the running top-k and its merge with a chunk's
  + (matrices - 1) x n_queries               each further query matrix (``retrieval_metrics_many``): its copy
      x (12 x max_k + 4 x dim)                (normalised in place) and its running top-k (more in float64)
  + n_corpus x 60                             the corpus ids' order (a sorted Python list while it is built)

plus, where scores tie across a chunk's cut, up to ``chunk_size x n_queries x 3`` bytes while those rows are
re-ranked (an eighth of the queries at a time), and some 15 MB the first time torch runs these operations in a
process. Scores are computed on the query tensors' device. On a GPU the rows, scores, top-k and the ids' ranks
(``n_corpus x 8``) live there; the sorted ids, a float16 store's read buffer, and one host buffer of the rows
(``chunk_size x 4 x dim`` bytes, x 8 in float64) that rows not already there pass through stay on the host.
``benchmarks/retrieval_memory.py`` measures it: a 200k x 384 corpus, 500 queries, chunks of 20k, on a 2-core CPU:
120 MB measured for a float16 CorpusStore against 114 MB from the terms above; 252 MB through an ``np.memmap``;
1,004 MB for the full matrix; 146 MB for 16 query matrices in one pass over the store, against 133 MB. A
``CorpusStore`` keeps a corpus's vectors on disk (float32 as given, or float16 unit vectors for half the size) and
reads them with plain reads, so a chunk is all that is resident; an ``np.memmap`` works too, but the pages it
touches count in the process's resident memory (the whole file, by the end) until the kernel drops them.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping, Sequence, Union, overload

import numpy as np
import torch
import torch.nn.functional as F

from ..errors import DataError
from ..fileio import put_in_place, temp_beside

PRIMARY_METRIC = "ndcg@10"

_EPS = 1e-12  # F.normalize's default, as sentence-transformers' cos_sim uses it


class CorpusStore:
    """A corpus's vectors as a float32 or float16 ``(n, dim)`` array in a ``.npy`` file: written in chunks
    (``append``), read in chunks (``chunks``) as float32 tensors, or mapped whole (``array``).

    float32 rows are stored as given, unnormalised: the rows read back are the vectors appended, bit for bit, so
    cosine scores from them are the ones sentence-transformers' evaluator computes from the same embeddings
    (``cos_sim`` normalises each side itself). float16 rows are stored as unit vectors (cosine, the only score read
    from them, does not depend on the length), so every component lies in [-1, 1] and float16 keeps each within its
    relative precision of 2^-11: half the size, scores within float16 rounding of float32's. The file is
    written as a temp file beside ``PATH`` and put in place when its last row arrives (``promptsearch.fileio``), so a
    file at ``PATH`` is never a half-written one, and two processes writing the same store do not mix their rows;
    ``open`` reads it back (a cache: its path names what was encoded).

    :param path: the file to write (``.npy``; a cache folder such as ``promptsearch.paths.cache_dir()``).
    :param n: number of rows.
    :param dim: vector size.
    :param dtype: ``"float16"`` (unit rows, half the size; the default) or ``"float32"`` (rows as given).
    :raises promptsearch.DataError: for ``n`` or ``dim`` below 1, or another ``dtype``.
    """

    def __init__(self, path: str | os.PathLike, n: int, dim: int, dtype: str = "float16") -> None:
        if int(n) < 1 or int(dim) < 1:
            raise DataError(f"a CorpusStore needs n >= 1 and dim >= 1 (got n={n}, dim={dim})")
        if dtype not in _DTYPES:
            raise DataError(f"dtype={dtype!r}: a CorpusStore holds 'float32' or 'float16' rows")
        self.dtype: np.dtype = _DTYPES[dtype]
        self.path = Path(path)
        self.n, self.dim = int(n), int(dim)
        self._rows = 0
        fd, self._temp = temp_beside(self.path)
        self._file: Any = os.fdopen(fd, "wb")
        np.lib.format.write_array_header_1_0(
            self._file, {"descr": np.lib.format.dtype_to_descr(self.dtype), "fortran_order": False,
                         "shape": (self.n, self.dim)})
        self._offset = self._file.tell()

    @classmethod
    def open(cls, path: str | os.PathLike) -> CorpusStore:
        """A complete store written before.

        :param path: the ``.npy`` file a ``CorpusStore`` wrote.
        :returns: the store, ready to read.
        :raises promptsearch.DataError: when the file is missing, not a float32 or float16 2-d ``.npy`` file, or
            short."""
        path = Path(path)
        try:
            with open(path, "rb") as f:
                version = np.lib.format.read_magic(f)
                read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                               (2, 0): np.lib.format.read_array_header_2_0}.get(version)
                if read_header is None:
                    raise ValueError(f".npy format version {version} is not one a CorpusStore writes")
                shape, fortran, dtype = read_header(f)
                offset = f.tell()
        except (OSError, ValueError) as e:
            raise DataError(f"cannot read the corpus store {path}: {e}") from None
        if dtype not in _DTYPES.values() or fortran or len(shape) != 2 or min(shape) < 1:
            raise DataError(f"{path} is not a corpus store (a float32 or float16 (n, dim) array): dtype {dtype}, "
                            f"shape {shape}")
        if path.stat().st_size != offset + dtype.itemsize * shape[0] * shape[1]:
            raise DataError(f"the corpus store {path} is truncated: delete it and encode the corpus again")
        self = cls.__new__(cls)
        self.path, self.n, self.dim, self.dtype = path, int(shape[0]), int(shape[1]), np.dtype(dtype)
        self._rows, self._temp, self._file, self._offset = self.n, str(path), None, offset
        return self

    def __len__(self) -> int:
        return self.n

    @property
    def rows(self) -> int:
        """Rows written so far (``n`` once complete)."""
        return self._rows

    @property
    def complete(self) -> bool:
        """Whether every row is written (the file is then at ``path``)."""
        return self._rows == self.n

    def append(self, rows: np.ndarray | torch.Tensor) -> None:
        """Write the next rows (float32: as given; float16: as unit vectors); the last row completes the file.

        :param rows: ``(m, dim)`` vectors (any float dtype).
        :raises promptsearch.DataError: for a wrong shape, more rows than ``n``, or a value that is not finite."""
        if self._file is None:
            raise DataError(f"the corpus store {self.path} is complete (or discarded): it takes no more rows")
        x = rows.detach().cpu() if isinstance(rows, torch.Tensor) else torch.from_numpy(np.array(rows))
        if x.dim() != 2 or x.shape[1] != self.dim:
            raise DataError(f"rows for the corpus store must be (m, {self.dim}); got {tuple(x.shape)}")
        if self._rows + x.shape[0] > self.n:
            raise DataError(f"the corpus store holds {self.n} rows; {self._rows} are written and {x.shape[0]} more "
                            "were given")
        x = x.to(torch.float64 if x.dtype == torch.float64 else torch.float32)
        _check_finite(x, "rows", self._rows)
        if self.dtype == np.float16:
            x = F.normalize(x, p=2, dim=-1, eps=_EPS)
        self._file.write(x.numpy().astype(self.dtype, copy=False).tobytes())
        self._rows += x.shape[0]
        if self.complete:
            self._file.close()
            self._file = None
            put_in_place(self._temp, self.path)

    def discard(self) -> None:
        """Stop writing and delete the unfinished temp file (nothing when the store is complete)."""
        if self._file is not None:
            self._file.close()
            self._file = None
            Path(self._temp).unlink(missing_ok=True)

    def __enter__(self) -> CorpusStore:
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving the block unfinished (an error, or fewer rows than ``n``) deletes the partial file."""
        self.discard()

    def _check_complete(self) -> None:
        if not self.complete:
            raise DataError(f"the corpus store {self.path} has {self._rows} of its {self.n} rows: append the rest "
                            "before reading it")

    @property
    def array(self) -> np.memmap:
        """The whole store as a read-only ``np.memmap`` ``(n, dim)`` of its dtype.

        :raises promptsearch.DataError: while rows are missing."""
        self._check_complete()
        return np.memmap(self.path, dtype=self.dtype, mode="r", offset=self._offset, shape=(self.n, self.dim))

    def chunks(self, chunk_size: int) -> Iterator[tuple[int, torch.Tensor]]:
        """The rows in order, ``chunk_size`` at a time, read from the file (only the chunk is resident).

        :param chunk_size: rows a chunk (the last may be shorter).
        :returns: an iterator of (first row's index, float32 tensor ``(rows, dim)``, a new one each chunk).
        :raises promptsearch.DataError: while rows are missing."""
        self._check_complete()
        chunk_size = _positive(chunk_size, "chunk_size")
        buf = np.empty((min(chunk_size, self.n), self.dim), dtype=self.dtype)
        with open(self.path, "rb", buffering=0) as f:
            for start in range(0, self.n, chunk_size):
                m = self._read(f, start, buf)
                yield start, torch.from_numpy(buf[:m].astype(np.float32))  # a copy: buf is read into again

    def _read(self, f: Any, start: int, buf: np.ndarray) -> int:
        """Read rows from ``start`` into ``buf`` (the store's dtype, ``(rows, dim)``, C-contiguous) with a plain
        read: ``min(len(buf), n - start)`` rows, their number returned."""
        m = min(len(buf), self.n - start)
        size = self.dtype.itemsize
        f.seek(self._offset + size * start * self.dim)
        if f.readinto(buf[:m].data.cast("B")) != size * m * self.dim:
            raise DataError(f"the corpus store {self.path} is truncated: delete it and encode the corpus again")
        return m


_DTYPES: dict[str, np.dtype] = {"float32": np.dtype("<f4"), "float16": np.dtype("<f2")}

CorpusEmbeddings = Union[np.ndarray, torch.Tensor, CorpusStore]


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise DataError(f"{name}= must be a whole number >= 1, got {value!r}")
    return int(value)


def _check_finite(x: torch.Tensor, name: str, first_row: int = 0) -> None:
    bad = ~torch.isfinite(x).all(dim=1)
    if bool(bad.any()):
        row = first_row + int(bad.nonzero()[0, 0])
        raise DataError(f"{name}= row {row} is not finite (NaN or inf): its ranking would be meaningless")


def _as_matrix(x: Any, name: str) -> torch.Tensor:
    """``x`` as a float tensor of its own (a copy: the caller's array stays untouched, a read-only one too), on the
    tensor's device (the CPU for an array): scores are computed there."""
    t = x.detach().clone() if isinstance(x, torch.Tensor) else torch.from_numpy(np.array(x))
    if t.dim() != 2 or not t.is_floating_point():
        raise DataError(f"{name}= must be a 2-d float array (rows, dim); got shape {tuple(t.shape)}, {t.dtype}")
    return t


def _corpus_layout(corpus: CorpusEmbeddings) -> tuple[int, torch.dtype]:
    """(dim, the dtype scores are computed in) of a corpus, read without loading it."""
    if isinstance(corpus, CorpusStore):
        return corpus.dim, torch.float32
    shape, dtype = tuple(corpus.shape), corpus.dtype
    floating = dtype.is_floating_point if isinstance(dtype, torch.dtype) else np.issubdtype(dtype, np.floating)
    if len(shape) != 2 or not floating:
        raise DataError(f"corpus_emb= must be a 2-d float array (rows, dim); got shape {shape}, {dtype}")
    wide = dtype == torch.float64 if isinstance(dtype, torch.dtype) else dtype == np.float64
    return int(shape[1]), torch.float64 if wide else torch.float32


def _fill_chunks(corpus: CorpusEmbeddings, work: torch.Tensor) -> Iterator[tuple[int, int]]:
    """Copy the corpus into ``work`` (``(chunk_size, dim)``, the scoring dtype, on the scoring device), one chunk at a
    time: (start, rows) for each, the rows in ``work[:rows]``. One buffer for every chunk: memory is allocated once,
    not per chunk (a freed chunk-sized block that the allocator keeps would add to the peak), and the caller's array
    is never changed (the rows are normalised in ``work``). On a GPU, rows that are not already there pass through
    one host buffer of the same size."""
    chunk_size = len(work)
    if work.device.type != "cpu" and not isinstance(corpus, torch.Tensor):
        host = torch.empty(tuple(work.shape), dtype=work.dtype)
        for start, m in _fill_chunks(corpus, host):
            work[:m].copy_(host[:m])
            yield start, m
        return
    if isinstance(corpus, CorpusStore):
        corpus._check_complete()
        direct = corpus.dtype == np.float32 and work.dtype == torch.float32  # read straight into the work rows
        buf = work.numpy() if direct else np.empty((chunk_size, corpus.dim), dtype=corpus.dtype)
        with open(corpus.path, "rb", buffering=0) as f:
            for start in range(0, corpus.n, chunk_size):
                m = corpus._read(f, start, buf)
                if not direct:
                    work[:m].copy_(torch.from_numpy(buf[:m]))
                yield start, m
        return
    for start in range(0, len(corpus), chunk_size):
        part = corpus[start:start + chunk_size]
        m = len(part)
        if isinstance(part, torch.Tensor):
            work[:m].copy_(part.detach())
        else:  # numpy casts float16 (a memmap's pages read here) into the buffer
            np.copyto(work.numpy()[:m], part, casting="same_kind")  # work is on the CPU here (a view: no copy)
        yield start, m


def _ids(ids: Sequence[str], rows: int, name: str, emb: str) -> list[str]:
    ids = list(ids)
    if len(ids) != rows:
        raise DataError(f"{name}= has {len(ids)} ids but {emb}= has {rows} rows: they must match one to one")
    if len(set(ids)) != len(ids):
        dup = next(i for i, count in Counter(ids).items() if count > 1)
        raise DataError(f"{name}= holds the id {dup!r} more than once: ids must be unique")
    return ids


def retrieval_top_k(query_emb: np.ndarray | torch.Tensor, corpus_emb: CorpusEmbeddings, corpus_ids: Sequence[str],
                    k: int, *, chunk_size: int = 50_000) -> tuple[np.ndarray, np.ndarray]:
    """Each query's top ``k`` corpus rows by cosine, ranked as ``InformationRetrievalEvaluator`` ranks them
    (descending score, equal scores by ascending corpus id), with the corpus scored ``chunk_size`` rows at a time.

    :param query_emb: query vectors ``(n_queries, dim)``.
    :param corpus_emb: corpus vectors ``(n_corpus, dim)``: an array (a float16 ``np.memmap`` too), a tensor, or a
        ``CorpusStore``.
    :param corpus_ids: the corpus rows' ids (the tie order).
    :param k: how many to keep (at most ``n_corpus`` come back).
    :param chunk_size: corpus rows scored at once.
    :returns: (scores ``(n_queries, min(k, n_corpus))``, corpus row indices of the same shape), best first.
    :raises promptsearch.DataError: for mismatched shapes or ids, duplicate ids, or vectors that are not finite."""
    q = _as_matrix(query_emb, "query_emb")
    corpus_ids = _ids(corpus_ids, len(corpus_emb), "corpus_ids", "corpus_emb")
    return _top_ks([q], corpus_emb, corpus_ids, _positive(k, "k"), _positive(chunk_size, "chunk_size"))[0]


def _top_ks(qs: list[torch.Tensor], corpus_emb: CorpusEmbeddings, corpus_ids: list[str], k: int,
            chunk_size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``retrieval_top_k`` of each query matrix in ``qs`` over one pass through the corpus per scoring dtype (each
    chunk read and normalised once, then scored against each matrix in turn), on the first matrix's device: each
    result is the one a call of its own gives, bit for bit, since each matrix meets the same normalised rows in the
    same chunks."""
    n = len(corpus_ids)
    if n == 0:
        raise DataError("corpus_emb= is empty: there is nothing to retrieve")
    dim, corpus_dtype = _corpus_layout(corpus_emb)
    for q in qs:
        if dim != q.shape[1]:
            raise DataError(f"query_emb= has {q.shape[1]} dimensions but corpus_emb= has {dim}: they must match")
        if q.shape[0] == 0:
            raise DataError("query_emb= has no rows: there is nothing to score")
        _check_finite(q, "query_emb")
    # each corpus row's place in ascending id order: the evaluator ranks equal scores by corpus id
    rank = torch.empty(n, dtype=torch.long)
    rank[torch.tensor(sorted(range(n), key=corpus_ids.__getitem__), dtype=torch.long)] = torch.arange(n)
    rank = rank.to(qs[0].device)
    out: list[tuple[np.ndarray, np.ndarray]] = [(np.empty(0), np.empty(0))] * len(qs)
    by_dtype: dict[torch.dtype, list[int]] = {}
    for j, q in enumerate(qs):  # float64 where either side is, as the evaluator's cos_sim keeps it
        by_dtype.setdefault(torch.float64 if torch.float64 in (q.dtype, corpus_dtype) else torch.float32, []).append(j)
    for dtype, which in by_dtype.items():
        tops = _one_pass([qs[j] for j in which], corpus_emb, rank, k, chunk_size, dtype)
        for j, (v, i) in zip(which, tops):
            out[j] = v.cpu().numpy(), i.cpu().numpy()
    return out


def _one_pass(qs: list[torch.Tensor], corpus_emb: CorpusEmbeddings, rank: torch.Tensor, k: int, chunk_size: int,
              dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The running top ``k`` of each query matrix (float ``dtype``) over one pass through the corpus, on ``rank``'s
    device."""
    n, device = len(rank), rank.device
    # F.normalize's arithmetic, in place where the matrix is already ours in this dtype on this device (the callers'
    # copies: no second copy of each kept for the pass)
    qs = [_normalized(q.to(device=device, dtype=dtype)) for q in qs]
    best = [(torch.empty((q.shape[0], 0), dtype=dtype, device=device),
             torch.empty((q.shape[0], 0), dtype=torch.long, device=device)) for q in qs]
    work = torch.empty((min(chunk_size, n), _corpus_layout(corpus_emb)[0]), dtype=dtype, device=device)
    score_buf = torch.empty(max(q.shape[0] for q in qs) * len(work), dtype=dtype, device=device)
    for start, m in _fill_chunks(corpus_emb, work):
        rows = work[:m]
        norms = rows.norm(2, dim=-1, keepdim=True)
        if not bool(torch.isfinite(norms).all()):
            _check_finite(rows, "corpus_emb", start)
        rows.div_(norms.clamp_min(_EPS))  # F.normalize's arithmetic, in place
        for j, q in enumerate(qs):
            scores = torch.mm(q, rows.T, out=score_buf[:q.shape[0] * m].view(q.shape[0], m))
            v, i = _chunk_top(scores, rank[start:start + m], k, n)
            # fold into the running top-k under (-score, id): sort by id, then (stably) by score
            cat_v, cat_i = torch.cat([best[j][0], v], dim=1), torch.cat([best[j][1], i + start], dim=1)
            order = rank[cat_i].argsort(dim=1)
            cat_v, cat_i = cat_v.gather(1, order), cat_i.gather(1, order)
            order = cat_v.argsort(dim=1, descending=True, stable=True)[:, :k]
            best[j] = cat_v.gather(1, order), cat_i.gather(1, order)
    return best


def _normalized(q: torch.Tensor) -> torch.Tensor:
    return q.div_(q.norm(2, dim=-1, keepdim=True).clamp_min(_EPS))


def _chunk_top(scores: torch.Tensor, chunk_rank: torch.Tensor, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One chunk's top ``k`` columns of each row of ``scores`` (queries x chunk rows), ties across the cut taken by
    the lowest corpus id (``chunk_rank``: each column's place in id order, out of ``n``): (values, columns)."""
    m = scores.shape[1]
    kk = min(k, m)
    if kk == m:  # the whole chunk is kept (the caller's torch.cat copies the scores before their buffer is reused)
        return scores, torch.arange(kk, device=scores.device).expand_as(scores)
    # one more than kept: a tie across the cut shows as the (kk+1)-th score equal to the kk-th
    v, i = torch.topk(scores, kk + 1, dim=1, largest=True, sorted=True)
    tied = v[:, kk] == v[:, kk - 1]
    v, i = v[:, :kk], i[:, :kk]
    if bool(tied.any()):
        # torch.topk breaks ties arbitrarily: those rows take their tied entries with the lowest ids, as the
        # evaluator does (scores above the cut first, then the ties by id, then the rest); an eighth of the queries
        # at a time, so their int64 keys stay small
        for r in tied.nonzero().squeeze(1).split(max(1, scores.shape[0] // 8)):
            sub, cut = scores[r], v[r, kk - 1:kk]
            keys = torch.where(sub > cut, chunk_rank, 2 * n)
            keys = torch.where(sub == cut, chunk_rank + n, keys)
            pick = keys.topk(kk, dim=1, largest=False).indices
            i[r], v[r] = pick, sub.gather(1, pick)
    return v, i


@dataclass(frozen=True)
class Cutoffs:
    """The k of each metric, named and defaulted as ``InformationRetrievalEvaluator``'s arguments are (an empty
    tuple leaves that metric out; duplicates are dropped).

    :raises promptsearch.DataError: for a k below 1, or no k at all."""

    mrr_at_k: Sequence[int] = (10,)
    ndcg_at_k: Sequence[int] = (10,)
    accuracy_at_k: Sequence[int] = (1, 3, 5, 10)
    precision_recall_at_k: Sequence[int] = (1, 3, 5, 10)
    map_at_k: Sequence[int] = (100,)

    def __post_init__(self) -> None:
        for f in fields(self):
            ks = getattr(self, f.name)
            if isinstance(ks, (int, np.integer)):
                raise DataError(f"{f.name}= must be a sequence of whole numbers, e.g. ({ks},), got {ks!r}")
            object.__setattr__(self, f.name, tuple(dict.fromkeys(_positive(k, f.name) for k in ks)))
        if self.max_k == 0:
            raise DataError("no cut-off given: pass at least one k in ndcg_at_k=, mrr_at_k=, map_at_k=, ...")

    @property
    def max_k(self) -> int:
        """The largest k of any metric: how many documents each query's ranking keeps."""
        return max((k for f in fields(self) for k in getattr(self, f.name)), default=0)


def _sequential_sum(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Sums added left to right, as the evaluator's Python loops add (numpy's sum adds pairwise)."""
    if x.shape[axis] == 0:
        return np.zeros(np.delete(x.shape, axis if axis >= 0 else x.ndim + axis))
    return np.take(np.cumsum(x, axis=axis), -1, axis=axis)


@overload
def retrieval_metrics(query_emb: np.ndarray | torch.Tensor, corpus_emb: CorpusEmbeddings, query_ids: Sequence[str],
                      corpus_ids: Sequence[str], relevant: Mapping[str, Any], *, cutoffs: Cutoffs | None = ...,
                      chunk_size: int = ..., per_query: Literal[False] = ...) -> dict[str, float]: ...


@overload
def retrieval_metrics(query_emb: np.ndarray | torch.Tensor, corpus_emb: CorpusEmbeddings, query_ids: Sequence[str],
                      corpus_ids: Sequence[str], relevant: Mapping[str, Any], *, cutoffs: Cutoffs | None = ...,
                      chunk_size: int = ..., per_query: Literal[True]) -> dict[str, Any]: ...


def retrieval_metrics(query_emb: np.ndarray | torch.Tensor, corpus_emb: CorpusEmbeddings, query_ids: Sequence[str],
                      corpus_ids: Sequence[str], relevant: Mapping[str, Any], *, cutoffs: Cutoffs | None = None,
                      chunk_size: int = 50_000, per_query: bool = False) -> dict[str, Any]:
    """nDCG, MRR, MAP, recall, precision and accuracy at k of cosine retrieval, the numbers
    ``InformationRetrievalEvaluator`` gives for the same vectors (see the module docstring for the definitions).

    :param query_emb: query vectors ``(n_queries, dim)``, row i for ``query_ids[i]``.
    :param corpus_emb: corpus vectors ``(n_corpus, dim)``, row j for ``corpus_ids[j]``: an array (a float16
        ``np.memmap`` too), a tensor, or a ``CorpusStore``.
    :param query_ids: the queries' ids; each must have a non-empty set in ``relevant`` (the evaluator drops queries
        without one: drop them before, as ``promptsearch.data.retrieval`` does).
    :param corpus_ids: the corpus rows' ids (equal scores rank by ascending id, as in the evaluator).
    :param relevant: query id -> the relevant corpus ids (binary relevance; entries for other queries are ignored).
    :param cutoffs: the k of each metric (default: the evaluator's, ``Cutoffs()``).
    :param chunk_size: corpus rows scored at once: memory depends on it, the result only by float rounding where
        the matrix kernels differ by shape (equal to the evaluator's with the same chunk size, as by default).
    :param per_query: also return ``"per_query"``: metric name -> float64 array over the queries in ``query_ids``
        order (what a query contributes to the mean; ``accuracy@k`` 0 or 1).

    Scores are computed where the query vectors are: a tensor on a GPU is scored there (the corpus is copied there a
    chunk at a time), as the evaluator scores a model's tensors on the model's device; an array on the CPU.

    :returns: metric name (``"ndcg@10"``, ``"mrr@10"``, ``"map@100"``, ``"recall@10"``, ``"precision@1"``,
        ``"accuracy@1"`` ...) -> value in [0, 1]; ``PRIMARY_METRIC`` is ``"ndcg@10"``.
    :raises promptsearch.DataError: for mismatched shapes or ids, duplicate ids, a query without relevant documents,
        a relevant id not in ``corpus_ids``, an empty corpus, vectors that are not finite, or a cut-off below 1."""
    got = retrieval_metrics_many([query_emb], corpus_emb, query_ids, corpus_ids, relevant, cutoffs=cutoffs,
                                 chunk_size=chunk_size)[0]
    if not per_query:
        del got["per_query"]
    return got


def retrieval_metrics_many(query_embs: Sequence[np.ndarray | torch.Tensor], corpus_emb: CorpusEmbeddings,
                           query_ids: Sequence[str], corpus_ids: Sequence[str], relevant: Mapping[str, Any], *,
                           cutoffs: Cutoffs | None = None, chunk_size: int = 50_000) -> list[dict[str, Any]]:
    """``retrieval_metrics(..., per_query=True)`` of several query matrices (the same queries under several query
    prompts, say) against one corpus, in one pass through it per scoring dtype (float64 where a side is): each
    chunk is read and normalised once and scored against every matrix, so a further matrix costs its scoring, not
    another read of the corpus. All are scored on the first matrix's device, and each result is the one
    ``retrieval_metrics`` gives for its matrix there, to the last bit (the same rows in the same chunks).

    :param query_embs: one ``(n_queries, dim)`` matrix per query prompt, rows in ``query_ids`` order.
    :returns: one metrics dict per matrix, in order, each with ``"per_query"``.
    :raises promptsearch.DataError: as ``retrieval_metrics``, and for no matrix."""
    chunk_size = _positive(chunk_size, "chunk_size")
    cutoffs = Cutoffs() if cutoffs is None else cutoffs
    max_k = cutoffs.max_k
    if len(query_embs) == 0:  # len: a stacked array has no truth value
        raise DataError("query_embs= is empty: give at least one query matrix")
    qs = [_as_matrix(x, "query_emb") for x in query_embs]  # each moved to the first's device by _one_pass
    query_ids = _ids(query_ids, qs[0].shape[0], "query_ids", "query_emb")
    for q in qs[1:]:
        if q.shape[0] != len(query_ids):
            raise DataError(f"query_ids= has {len(query_ids)} ids but a matrix in query_embs= has {q.shape[0]} rows: "
                            "each must have one row per query")
    corpus_ids = _ids(corpus_ids, len(corpus_emb), "corpus_ids", "corpus_emb")
    if not corpus_ids:
        raise DataError("corpus_emb= is empty: there is nothing to retrieve")
    wanted: dict[str, set[str]] = {}
    for qid in query_ids:
        docs = relevant.get(qid)
        if not docs:
            raise DataError(f"query {qid!r} has no relevant document in relevant=: drop it from query_ids= (the "
                            "evaluator leaves such queries out)")
        wanted[qid] = set(docs)
    # the relevant documents' rows, found in one pass (no id -> row map of the whole corpus)
    needed = set().union(*wanted.values())
    row_of = {cid: j for j, cid in enumerate(corpus_ids) if cid in needed}
    n_rel = np.array([len(docs) for docs in wanted.values()], dtype=np.int64)
    rel_codes: list[int] = []
    for qi, (qid, docs) in enumerate(wanted.items()):
        missing = sorted(docs - row_of.keys())
        if missing:
            raise DataError(f"relevant= names corpus id {missing[0]!r} for query {qid!r}, but corpus_ids= has no such "
                            "id")
        rel_codes.extend(qi * len(corpus_ids) + row_of[d] for d in docs)
    tops = _top_ks(qs, corpus_emb, corpus_ids, max_k, chunk_size)
    rel = np.asarray(rel_codes, dtype=np.int64)
    first = np.arange(len(query_ids), dtype=np.int64)[:, None] * len(corpus_ids)
    return [_metrics(np.isin(first + top, rel), n_rel, cutoffs) for _, top in tops]


def _metrics(is_hit: np.ndarray, n_rel: np.ndarray, cutoffs: Cutoffs) -> dict[str, Any]:
    """Every metric from the hits of each query's ranking (``is_hit``: bool, queries x ranks kept) and its number of
    relevant documents, with ``"per_query"``."""
    max_k = cutoffs.max_k
    hits = np.zeros((len(is_hit), max_k), dtype=np.float64)  # fewer than max_k columns when the corpus is small
    hits[:, :is_hit.shape[1]] = is_hit
    n_q = len(hits)
    out: dict[str, Any] = {}
    each: dict[str, Any] = {}  # metric -> float64 (n_queries,)
    for k in cutoffs.accuracy_at_k:
        found = hits[:, :k].any(axis=1)
        out[f"accuracy@{k}"] = int(found.sum()) / n_q
        each[f"accuracy@{k}"] = found.astype(np.float64)
    for k in cutoffs.precision_recall_at_k:
        correct = hits[:, :k].sum(axis=1)  # whole numbers: exact in any order
        each[f"precision@{k}"] = correct / k
        each[f"recall@{k}"] = correct / n_rel
    for k in cutoffs.precision_recall_at_k:
        out[f"precision@{k}"] = float(np.mean(each[f"precision@{k}"]))
    for k in cutoffs.precision_recall_at_k:
        out[f"recall@{k}"] = float(np.mean(each[f"recall@{k}"]))
    discount = 1.0 / np.log2(np.arange(max_k, dtype=np.float64) + 2)
    for k in cutoffs.ndcg_at_k:
        dcg = _sequential_sum(hits[:, :k] * discount[:k])
        ideal = np.cumsum(discount[:k])[np.minimum(n_rel, k) - 1]
        each[f"ndcg@{k}"] = dcg / ideal
        out[f"ndcg@{k}"] = float(np.mean(each[f"ndcg@{k}"]))
    for k in cutoffs.mrr_at_k:
        window = hits[:, :k]
        first = window.argmax(axis=1)
        rr = np.where(window.any(axis=1), 1.0 / (first + 1), 0.0)
        each[f"mrr@{k}"] = rr
        out[f"mrr@{k}"] = float(_sequential_sum(rr)) / n_q
    for k in cutoffs.map_at_k:
        window = hits[:, :k]
        precision_at_rank = np.cumsum(window, axis=1) / np.arange(1, k + 1)
        ap = _sequential_sum(np.where(window > 0, precision_at_rank, 0.0)) / np.minimum(k, n_rel)
        each[f"map@{k}"] = ap
        out[f"map@{k}"] = float(np.mean(ap))
    out["per_query"] = {name: np.ascontiguousarray(values) for name, values in each.items()}
    return out
