"""Retrieval metrics (issue 48, item 3): ``retrieval_metrics`` gives the numbers sentence-transformers'
``InformationRetrievalEvaluator`` gives on the same vectors (random, tied, a tiny model's), whatever the chunk size;
a hand-computed case pins each definition; a float32 ``CorpusStore`` gives its rows back bit for bit (the evaluator's
numbers exactly), a float16 one stays within float16 rounding.

Tolerance against the evaluator: none (``==``). Both sides compute each chunk's scores with the same ``torch.mm`` on
the same normalised float32 rows (equal shapes: the same chunk size), rank them under the same order, and form each
metric with the same float64 operations in the same order (sequential sums where the evaluator loops, ``np.mean``
where it calls it), so the numbers agree to the last bit; any difference is a real divergence. Where the data makes
every score exact (components of +-1/4), the chunk size cannot change a score either, and results are compared across
chunk sizes. The hand-computed case sums in another order than the code: 1e-12 there (a few float64 roundings of
numbers <= 1, each 2^-53)."""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import pytest
import torch

from promptsearch.errors import DataError, PromptSearchError
from promptsearch.eval.ir_metrics import (
    PRIMARY_METRIC,
    CorpusStore,
    Cutoffs,
    retrieval_metrics,
    retrieval_metrics_many,
    retrieval_top_k,
)

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

# more cut-offs than the defaults, so every metric is checked at a k below and above the relevant-set sizes
KS = dict(mrr_at_k=(1, 3, 10), ndcg_at_k=(1, 5, 10, 20), accuracy_at_k=(1, 3, 5, 10),
          precision_recall_at_k=(1, 3, 5, 10, 50), map_at_k=(5, 100))
CUT = Cutoffs(**KS)


class _FixedVectors:
    """The one method the evaluator calls when given corpus embeddings: a query's text is its id -> its vector."""

    def __init__(self, query_ids, query_emb):
        t = query_emb if isinstance(query_emb, torch.Tensor) else torch.as_tensor(np.asarray(query_emb))
        self.vectors = dict(zip(query_ids, t))  # a tensor stays on its device

    def encode_query(self, texts, **kwargs):
        return torch.stack([self.vectors[t] for t in texts])


def evaluator_metrics(query_emb, corpus_emb, query_ids, corpus_ids, relevant, chunk_size, **ks):
    """sentence-transformers' own numbers: its evaluator with cosine, given the corpus vectors (a float16 array is
    converted to float32 by its cos_sim, as ours is)."""
    # lazy: sentence-transformers takes seconds to import, and only the comparisons need it
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator
    from sentence_transformers.util import cos_sim

    ev = InformationRetrievalEvaluator(dict(zip(query_ids, query_ids)), dict(zip(corpus_ids, corpus_ids)),
                                       {q: set(d) for q, d in relevant.items()}, corpus_chunk_size=chunk_size,
                                       score_functions={"cosine": cos_sim}, **{k: list(v) for k, v in ks.items()})
    corpus = (corpus_emb if isinstance(corpus_emb, (np.memmap, torch.Tensor))
              else torch.as_tensor(np.asarray(corpus_emb)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = ev.compute_all_metrics(_FixedVectors(query_ids, query_emb), corpus_embeddings=corpus)["cosine"]
    return {name.replace("@k", f"@{k}"): value for name, by_k in got.items() for k, value in by_k.items()}


def random_task(seed, n_queries=37, n_corpus=503, dim=24, max_relevant=15):
    """Gaussian corpus; each query is near the mean of its relevant documents (so metrics land mid-range), its
    relevant-set size 1..max_relevant; corpus ids shuffled strings whose order is not the row order."""
    rng = np.random.default_rng(seed)
    corpus = rng.standard_normal((n_corpus, dim)).astype(np.float32)
    corpus_ids = [f"doc{j}" for j in rng.permutation(n_corpus)]
    query_ids = [f"q{i}" for i in range(n_queries)]
    relevant, queries = {}, []
    for qid in query_ids:
        rows = rng.choice(n_corpus, size=int(rng.integers(1, max_relevant + 1)), replace=False)
        relevant[qid] = frozenset(corpus_ids[j] for j in rows)
        queries.append(corpus[rows].mean(0) + 0.6 * rng.standard_normal(dim))
    return np.asarray(queries, dtype=np.float32), corpus, query_ids, corpus_ids, relevant


def test_primary_metric_and_keys():
    q, c, qids, cids, rel = random_task(0)
    got = retrieval_metrics(q, c, qids, cids, rel)
    assert PRIMARY_METRIC == "ndcg@10" and PRIMARY_METRIC in got
    assert list(got) == ["accuracy@1", "accuracy@3", "accuracy@5", "accuracy@10", "precision@1", "precision@3",
                         "precision@5", "precision@10", "recall@1", "recall@3", "recall@5", "recall@10", "ndcg@10",
                         "mrr@10", "map@100"]
    assert all(isinstance(v, float) and 0 <= v <= 1 for v in got.values())
    assert 0.2 < got["ndcg@10"] < 0.95  # mid-range: a wrong rank would move it


# 503 rows: one chunk, chunks of 64 (503 is no multiple of it), and of 7 (fewer rows a chunk than k = 10 or 100)
@pytest.mark.parametrize("chunk_size", [50_000, 64, 7])
def test_equals_the_evaluator_on_random_vectors(chunk_size):
    q, c, qids, cids, rel = random_task(1)
    want = evaluator_metrics(q, c, qids, cids, rel, chunk_size, **KS)
    got = retrieval_metrics(q, c, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)
    assert got == want


def test_equals_the_evaluator_with_defaults_and_tensors():
    q, c, qids, cids, rel = random_task(2, n_queries=20, n_corpus=300)
    want = evaluator_metrics(q, c, qids, cids, rel, 50_000)
    assert retrieval_metrics(torch.from_numpy(q), torch.from_numpy(c), qids, cids, rel) == want
    assert retrieval_metrics(q, c, qids, cids, {k: list(v) for k, v in rel.items()}) == want  # lists as sets


def test_equals_the_evaluator_in_float64():
    """float64 vectors are scored in float64, as the evaluator's cos_sim keeps them."""
    q, c, qids, cids, rel = random_task(10, n_queries=20, n_corpus=300)
    q, c = q.astype(np.float64) + 1e-9, c.astype(np.float64)  # values float32 cannot hold
    got = retrieval_metrics(q, c, qids, cids, rel, chunk_size=64, cutoffs=CUT)
    assert got == evaluator_metrics(q, c, qids, cids, rel, 64, **KS)
    s64, _ = retrieval_top_k(q, c, cids, 5)
    assert s64.dtype == np.float64


def exact_task(seed, n_queries=40, n_corpus=300, dim=16):
    """Vectors of +-1/4 (unit length, every dot product a multiple of 1/16, exact in any order): many exact ties."""
    rng = np.random.default_rng(seed)
    corpus = (rng.integers(0, 2, (n_corpus, dim)) * 0.5 - 0.25).astype(np.float32)
    queries = (rng.integers(0, 2, (n_queries, dim)) * 0.5 - 0.25).astype(np.float32)
    corpus_ids = [f"d{j}" for j in rng.permutation(n_corpus)]  # "d10" < "d2": id order is not row order
    query_ids = [f"q{i}" for i in range(n_queries)]
    relevant = {qid: frozenset(rng.choice(corpus_ids, size=int(rng.integers(1, 12)), replace=False).tolist())
                for qid in query_ids}
    return queries, corpus, query_ids, corpus_ids, relevant


def test_exact_ties_rank_by_corpus_id_whatever_the_chunk_size():
    q, c, qids, cids, rel = exact_task(3)
    scores = q @ c.T
    assert all(np.sort(row)[-101] == np.sort(row)[-100] for row in scores)  # every query has a tie across the cut
    results, tops = [], []
    for chunk_size in (300, 64, 7):
        got = retrieval_metrics(q, c, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)
        assert got == evaluator_metrics(q, c, qids, cids, rel, chunk_size, **KS), chunk_size
        results.append(got)
        tops.append(retrieval_top_k(q, c, cids, 100, chunk_size=chunk_size))
    assert all(r == results[0] for r in results)
    assert all((s == tops[0][0]).all() and (i == tops[0][1]).all() for s, i in tops)
    # the ranking itself: descending score, equal scores by ascending id
    s, i = tops[0]
    for row_s, row_i, want_row in zip(s, i, scores):
        keys = [(-float(v), cids[j]) for v, j in zip(row_s, row_i)]
        assert keys == sorted(keys)
        assert np.array_equal(row_s, np.sort(want_row)[::-1][:100])


@pytest.mark.parametrize("chunk_size", [3, 2, 1])
def test_a_tie_is_won_by_the_smaller_id_not_the_earlier_row(chunk_size):
    # rows: "b" (relevant), "c", "a": "b" and "a" equal the query; "a" < "b", so "a" ranks first
    q = np.array([[1.0, 0.0]], dtype=np.float32)
    c = np.array([[1.0, 0.0], [0.6, 0.8], [2.0, 0.0]], dtype=np.float32)
    ks = dict(mrr_at_k=(1, 2), accuracy_at_k=(1, 2), ndcg_at_k=(2,), precision_recall_at_k=(1,), map_at_k=(2,))
    got = retrieval_metrics(q, c, ["q"], ["b", "c", "a"], {"q": {"b"}}, chunk_size=chunk_size, cutoffs=Cutoffs(**ks))
    assert got["accuracy@1"] == 0 and got["accuracy@2"] == 1 and got["mrr@1"] == 0 and got["mrr@2"] == 0.5
    assert got == evaluator_metrics(q, c, ["q"], ["b", "c", "a"], {"q": {"b"}}, chunk_size, **ks)


def test_hand_computed_definitions():
    """One query direction, 30 documents at growing angles: document j ranks j+1. Four queries (all that direction)
    with relevant documents at chosen ranks; the expected numbers are written out from the definitions."""
    angles = 0.05 * np.arange(1, 31)
    c = np.stack([np.cos(angles), np.sin(angles)], 1).astype(np.float32)
    cids = [f"d{j:02d}" for j in range(30)]
    at = {r: cids[r - 1] for r in range(1, 31)}  # rank -> id
    rel = {"A": {at[3], at[11]}, "B": {at[10]}, "C": {at[r] for r in range(1, 13)}, "D": {at[11]}}
    q = np.tile(np.array([[1.0, 0.0]], dtype=np.float32), (4, 1))
    got = retrieval_metrics(q, c, list(rel), cids, rel, chunk_size=7, cutoffs=CUT)

    def dcg(ranks, k):
        return sum(1 / math.log2(r + 1) for r in ranks if r <= k)

    def ideal(n, k):
        return sum(1 / math.log2(i + 2) for i in range(min(n, k)))

    ranks = {"A": [3, 11], "B": [10], "C": list(range(1, 13)), "D": [11]}
    want = {}
    for k in KS["accuracy_at_k"]:
        want[f"accuracy@{k}"] = sum(min(r) <= k for r in ranks.values()) / 4
    for k in KS["precision_recall_at_k"]:
        want[f"precision@{k}"] = sum(sum(x <= k for x in r) / k for r in ranks.values()) / 4
        want[f"recall@{k}"] = sum(sum(x <= k for x in r) / len(r) for r in ranks.values()) / 4
    for k in KS["ndcg_at_k"]:
        want[f"ndcg@{k}"] = sum(dcg(r, k) / ideal(len(r), k) for r in ranks.values()) / 4
    for k in KS["mrr_at_k"]:
        want[f"mrr@{k}"] = sum(1 / min(r) if min(r) <= k else 0 for r in ranks.values()) / 4
    for k in KS["map_at_k"]:
        want[f"map@{k}"] = sum(sum((n + 1) / x for n, x in enumerate(sorted(r)) if x <= k) / min(k, len(r))
                               for r in ranks.values()) / 4
    assert set(got) == set(want)
    for name in want:
        assert got[name] == pytest.approx(want[name], rel=0, abs=1e-12), name
    # the numbers the cut-offs decide, spelled out: D's document at rank 11 counts for no @10 metric
    assert got["mrr@10"] == pytest.approx((1 / 3 + 1 / 10 + 1 + 0) / 4, abs=1e-12)
    assert got["ndcg@10"] == pytest.approx((0.5 / (1 + 1 / math.log2(3)) + 1 / math.log2(11) + 1 + 0) / 4, abs=1e-12)
    assert got["map@5"] == pytest.approx((1 / 3 / 2 + 0 + 1 + 0) / 4, abs=1e-12)  # C: 5 hits / min(5, 12)
    assert got == evaluator_metrics(q, c, list(rel), cids, rel, 7, **KS)


def test_per_query_follows_query_order():
    q, c, qids, cids, rel = random_task(4, n_queries=25, n_corpus=200)
    got = retrieval_metrics(q, c, qids, cids, rel, chunk_size=64, per_query=True, cutoffs=CUT)
    each = got.pop("per_query")
    assert set(each) == set(got)
    for name, values in each.items():
        assert values.shape == (25,) and values.dtype == np.float64
        assert values.mean() == pytest.approx(got[name], rel=0, abs=1e-12), name
    assert set(np.unique(each["accuracy@10"])) <= {0.0, 1.0}
    # the same queries in reverse order: the arrays reverse, the means do not change
    back = retrieval_metrics(q[::-1], c, qids[::-1], cids, rel, chunk_size=64, per_query=True, cutoffs=CUT)["per_query"]
    for name in each:
        assert np.array_equal(back[name], each[name][::-1]), name
    # one query's values are its own: that query alone gives them
    alone = retrieval_metrics(q[3:4], c, qids[3:4], cids, rel, chunk_size=64, cutoffs=CUT)
    assert {n: float(v[3]) for n, v in each.items()} == pytest.approx(alone, abs=1e-15)
    assert len({round(float(v), 9) for v in each["ndcg@10"]}) > 5  # queries differ: the test can tell them apart


def test_equals_the_evaluator_on_a_tiny_models_vectors(bert_enc, sentences):
    """Real vectors (anisotropic, close together): STS-B dev pairs, the first sentence of 60 pairs as queries, all
    second sentences as the corpus, each query's partner relevant."""
    rep = bert_enc.own_rep()
    firsts, seconds = sentences[0::2], sentences[1::2]
    corpus_text = list(dict.fromkeys(seconds))
    vec = bert_enc.encode_reps(firsts[:60] + corpus_text, [rep])[rep]
    q, c = vec[:60], vec[60:]
    cids = [f"s{j}" for j in range(len(corpus_text))]
    qids = [f"p{i}" for i in range(60)]
    rel = {f"p{i}": {cids[corpus_text.index(seconds[i])]} for i in range(60)}
    for chunk_size in (len(cids), 64, 9):
        got = retrieval_metrics(q, c, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)
        assert got == evaluator_metrics(q, c, qids, cids, rel, chunk_size, **KS), chunk_size
    assert 0 < got["mrr@10"] < 1


# ---- the float16 store ------------------------------------------------------------------------------------------


def written_store(path, corpus, pieces):
    store = CorpusStore(path, len(corpus), corpus.shape[1])
    start = 0
    for size in pieces:
        assert not store.complete and not path.exists() and store.rows == start
        assert len(list(path.parent.glob(f".{path.name}.*"))) == 1  # a temp file beside it, until the last row
        store.append(corpus[start:start + size])
        start += size
    assert start == len(corpus)
    return store


def test_store_writes_in_chunks_and_reads_back(tmp_path):
    _, c, _, _, _ = random_task(5, n_corpus=503)
    path = tmp_path / "corpus.npy"
    store = written_store(path, c, [100, 1, 302, 100])
    assert store.complete and [p.name for p in tmp_path.iterdir()] == ["corpus.npy"]  # the temp file became it
    umask = os.umask(0)
    os.umask(umask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~umask  # the usual permissions, not mkstemp's 0600
    unit = c / np.linalg.norm(c, axis=1, keepdims=True)
    stored = np.load(path, mmap_mode="r")  # a plain .npy file: numpy reads it without promptsearch
    assert stored.dtype == np.float16 and stored.shape == (503, 24)
    # float16 rounds to nearest: 2^-11 relative (plus 2^-25 absolute below its normal range); the float32 unit vector
    # is itself within a few 2^-24 of ``unit``
    assert (np.abs(stored.astype(np.float64) - unit) <= 2.0 ** -11 * np.abs(unit) + 2.0 ** -22).all()
    again = CorpusStore.open(path)
    assert (again.n, again.dim, len(again)) == (503, 24, 503) and np.array_equal(again.array, stored)
    parts = list(again.chunks(64))
    assert [s for s, _ in parts] == list(range(0, 503, 64)) and all(t.dtype == torch.float32 for _, t in parts)
    assert np.array_equal(torch.cat([t for _, t in parts]).numpy(), stored.astype(np.float32))


@pytest.mark.parametrize("chunk_size", [503, 64, 7])
def test_store_equals_the_evaluator_on_its_float16_rows(tmp_path, chunk_size):
    q, c, qids, cids, rel = random_task(6, n_corpus=503)
    store = written_store(tmp_path / "c.npy", c, [250, 253])
    got = retrieval_metrics(q, store, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)
    assert got == evaluator_metrics(q, store.array, qids, cids, rel, chunk_size, **KS)
    assert got == retrieval_metrics(q, store.array, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)  # the memmap


def test_store_scores_within_float16_rounding_of_float32(tmp_path):
    """A stored row is the unit vector u rounded to float16: ||stored - u|| <= 2^-11 + sqrt(d) 2^-25. Normalising it
    again at most doubles that, and the cosine with a unit query moves by at most the distance (Cauchy-Schwarz):
    2^-10 + sqrt(d) 2^-24. Both cosines are computed in float32, each within (d + 2) float32 eps of exact. The k-th
    largest score moves no more than the largest score does, so each position of the top-k list stays within it."""
    q, c, qids, cids, rel = random_task(7, n_corpus=503)
    store = written_store(tmp_path / "c.npy", c, [503])
    d = c.shape[1]
    tol = 2.0 ** -10 + math.sqrt(d) * 2.0 ** -24 + (2 * d + 4) * float(np.finfo(np.float32).eps)
    s16, _ = retrieval_top_k(q, store, cids, 100, chunk_size=64)
    s32, _ = retrieval_top_k(q, c, cids, 100, chunk_size=64)
    diff = np.abs(s16.astype(np.float64) - s32)
    assert diff.max() <= tol and diff.max() > 0  # within the bound, and the store did round
    assert diff.max() > tol / 100  # the bound is not loose by orders of magnitude


@pytest.mark.parametrize("chunk_size", [503, 64, 7])
def test_a_float32_store_holds_the_rows_as_given_and_equals_the_evaluator_on_them(tmp_path, chunk_size):
    """float32 rows are stored unnormalised, bit for bit: read back (whole, in chunks, or scored a chunk at a time
    straight from the file) they give exactly the evaluator's numbers on the caller's array."""
    q, c, qids, cids, rel = random_task(6, n_corpus=503)
    c = c * np.linspace(0.5, 3, len(c), dtype=np.float32)[:, None]  # lengths far from 1: a normalised copy would show
    path = tmp_path / "c.npy"
    with CorpusStore(path, len(c), c.shape[1], dtype="float32") as store:
        store.append(c[:250])
        store.append(torch.from_numpy(c[250:]))
    again = CorpusStore.open(path)
    assert again.dtype == np.float32 and np.load(path).dtype == np.float32
    assert np.array_equal(again.array, c) and np.array_equal(torch.cat([t for _, t in again.chunks(64)]).numpy(), c)
    got = retrieval_metrics(q, again, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)
    assert got == evaluator_metrics(q, c, qids, cids, rel, chunk_size, **KS)
    assert got == retrieval_metrics(q, c, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)
    # float64 queries score in float64, the float32 rows converted (not read straight into the float64 buffer)
    q64 = q.astype(np.float64)
    assert retrieval_metrics(q64, again, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT) == \
        retrieval_metrics(q64, c.astype(np.float64), qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT)
    with pytest.raises(DataError, match="dtype='float64': a CorpusStore holds 'float32' or 'float16' rows"):
        CorpusStore(tmp_path / "d.npy", 3, 2, dtype="float64")


def test_store_refuses_what_it_cannot_hold(tmp_path):
    with pytest.raises(PromptSearchError, match="cannot write /proc/no-such/c.npy: .*; choose a writable output path"):
        CorpusStore("/proc/no-such/c.npy", 4, 3)
    with pytest.raises(DataError, match="needs n >= 1 and dim >= 1"):
        CorpusStore(tmp_path / "c.npy", 0, 3)
    store = CorpusStore(tmp_path / "c.npy", 4, 3)
    with pytest.raises(DataError, match=r"must be \(m, 3\)"):
        store.append(np.ones((2, 5)))
    with pytest.raises(DataError, match="holds 4 rows; 0 are written and 5 more"):
        store.append(np.ones((5, 3)))
    with pytest.raises(DataError, match="row 1 is not finite"):
        store.append(np.array([[1, 0, 0], [np.nan, 0, 0]], dtype=np.float32))
    store.append(np.ones((2, 3)))
    with pytest.raises(DataError, match="has 2 of its 4 rows"):
        next(store.chunks(2))
    with pytest.raises(DataError, match="has 2 of its 4 rows"):
        retrieval_metrics(np.ones((1, 3)), store, ["q"], list("abcd"), {"q": {"a"}})
    store.discard()
    assert not list(tmp_path.iterdir())  # the partial file went


def test_store_left_unfinished_leaves_nothing(tmp_path):
    with pytest.raises(RuntimeError):
        with CorpusStore(tmp_path / "c.npy", 4, 3) as store:
            store.append(np.ones((2, 3)))
            raise RuntimeError("encoding failed")
    assert not list(tmp_path.iterdir())


def test_store_open_refuses_other_files(tmp_path):
    np.save(tmp_path / "f64.npy", np.ones((3, 2), dtype=np.float64))
    with pytest.raises(DataError, match="is not a corpus store"):
        CorpusStore.open(tmp_path / "f64.npy")
    with pytest.raises(DataError, match="cannot read the corpus store"):
        CorpusStore.open(tmp_path / "missing.npy")
    written_store(tmp_path / "c.npy", np.ones((3, 2), dtype=np.float32), [3])
    (tmp_path / "c.npy").write_bytes((tmp_path / "c.npy").read_bytes()[:-2])
    with pytest.raises(DataError, match="is truncated"):
        CorpusStore.open(tmp_path / "c.npy")


# ---- bad input: one line, the keyword named ---------------------------------------------------------------------

Q2 = np.eye(2, 3, dtype=np.float32)
C3 = np.eye(3, dtype=np.float32)
GOOD = dict(query_ids=["q1", "q2"], corpus_ids=["a", "b", "c"], relevant={"q1": {"a"}, "q2": {"b"}})


@pytest.mark.parametrize("change, message", [
    (dict(query_emb=np.ones((2, 4), dtype=np.float32)), "query_emb= has 4 dimensions but corpus_emb= has 3"),
    (dict(query_emb=np.ones(3, dtype=np.float32)), "query_emb= must be a 2-d float array"),
    (dict(corpus_emb=np.ones((3, 3), dtype=np.int64)), "corpus_emb= must be a 2-d float array"),
    (dict(query_ids=["q1"]), "query_ids= has 1 ids but query_emb= has 2 rows"),
    (dict(corpus_ids=["a", "b", "a"]), "corpus_ids= holds the id 'a' more than once"),
    (dict(relevant={"q1": {"a"}}), "query 'q2' has no relevant document in relevant="),
    (dict(relevant={"q1": {"a"}, "q2": set()}), "query 'q2' has no relevant document in relevant="),
    (dict(relevant={"q1": {"a"}, "q2": {"z"}}), "relevant= names corpus id 'z' for query 'q2'"),
    (dict(corpus_emb=np.zeros((0, 3), dtype=np.float32), corpus_ids=[]), "corpus_emb= is empty"),
    (dict(query_emb=np.array([[1, 0, 0], [0, np.inf, 0]], dtype=np.float32)), "query_emb= row 1 is not finite"),
    (dict(corpus_emb=np.array([[1, 0, 0], [0, 1, 0], [np.nan, 0, 0]], dtype=np.float32)),
     "corpus_emb= row 2 is not finite"),
    (dict(chunk_size=0), "chunk_size= must be a whole number >= 1, got 0"),
])
def test_bad_input_is_one_line(change, message):
    args = dict(query_emb=Q2, corpus_emb=C3, **GOOD)
    args.update(change)
    pos = [args.pop(n) for n in ("query_emb", "corpus_emb", "query_ids", "corpus_ids", "relevant")]
    with pytest.raises(DataError) as e:
        retrieval_metrics(*pos, **args)
    assert message in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("ks, message", [
    (dict(ndcg_at_k=(10, 0)), "ndcg_at_k= must be a whole number >= 1, got 0"),
    (dict(map_at_k=100), "map_at_k= must be a sequence of whole numbers, e.g. (100,)"),
    (dict(mrr_at_k=(), ndcg_at_k=(), accuracy_at_k=(), precision_recall_at_k=(), map_at_k=()), "no cut-off given"),
])
def test_bad_cutoffs_are_one_line(ks, message):
    with pytest.raises(DataError) as e:
        Cutoffs(**ks)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_cutoffs_keep_the_evaluators_defaults_and_drop_repeats():
    assert Cutoffs() == Cutoffs(mrr_at_k=[10], ndcg_at_k=(10,), accuracy_at_k=(1, 3, 5, 10),
                                precision_recall_at_k=(1, 3, 5, 10), map_at_k=(100,))
    assert Cutoffs().max_k == 100 and Cutoffs(ndcg_at_k=(10, 10, 5), map_at_k=()).ndcg_at_k == (10, 5)
    q, c, qids, cids, rel = random_task(9, n_queries=5, n_corpus=50)
    got = retrieval_metrics(q, c, qids, cids, rel, cutoffs=Cutoffs(mrr_at_k=(), ndcg_at_k=(3,), accuracy_at_k=(),
                                                                   precision_recall_at_k=(), map_at_k=()))
    assert list(got) == ["ndcg@3"]


def test_the_corpus_is_scored_only_in_chunks(monkeypatch):
    """No score matrix wider than chunk_size columns is ever made (the bound the module docstring states)."""
    q, c, qids, cids, rel = random_task(8, n_corpus=503)
    widths, mm = [], torch.mm

    def recording_mm(a, b, **kw):
        out = mm(a, b, **kw)
        widths.append(out.shape[1])
        return out

    monkeypatch.setattr(torch, "mm", recording_mm)
    retrieval_metrics(q, c, qids, cids, rel, chunk_size=64)
    assert widths == [64] * 7 + [503 - 7 * 64]


def _same(a: dict, b: dict) -> bool:
    """Equal metrics dicts, per-query arrays compared element for element (bit for bit)."""
    pa, pb = a.get("per_query", {}), b.get("per_query", {})
    return ({k: v for k, v in a.items() if k != "per_query"} == {k: v for k, v in b.items() if k != "per_query"}
            and pa.keys() == pb.keys() and all(np.array_equal(pa[k], pb[k]) for k in pa))


@pytest.mark.parametrize("chunk_size", [300, 64, 7])
def test_many_matrices_in_one_pass_equal_each_scored_alone(chunk_size):
    """Several query prompts' matrices over one corpus pass give each one's own numbers, to the last bit: exact ties
    across the chunk cuts, a float64 matrix (scored in float64, its own pass), fewer rows than k in a chunk."""
    q, c, qids, cids, rel = exact_task(3)
    rng = np.random.default_rng(0)
    matrices = [q, q[::-1].copy(), (q + 0.1 * rng.standard_normal(q.shape)).astype(np.float32),
                q.astype(np.float64) + 1e-9, torch.from_numpy(q)]
    got = retrieval_metrics_many(matrices, c, qids, cids, rel, cutoffs=CUT, chunk_size=chunk_size)
    assert len(got) == len(matrices)
    for m, g in zip(matrices, got):
        assert _same(g, retrieval_metrics(m, c, qids, cids, rel, cutoffs=CUT, chunk_size=chunk_size, per_query=True))
    assert not _same(got[0], got[1])  # the matrices differ, and so do their numbers: the comparison can fail


def test_many_matrices_read_the_corpus_once(tmp_path, monkeypatch):
    q, c, qids, cids, rel = random_task(4, n_corpus=503)
    with CorpusStore(tmp_path / "c.npy", len(c), c.shape[1], dtype="float32") as store:
        store.append(c)
    store = CorpusStore.open(tmp_path / "c.npy")
    reads, read = [], CorpusStore._read

    def recording_read(self, f, start, buf):
        reads.append(start)
        return read(self, f, start, buf)

    monkeypatch.setattr(CorpusStore, "_read", recording_read)
    got = retrieval_metrics_many([q, q * 2, -q], store, qids, cids, rel, chunk_size=100)
    assert reads == [0, 100, 200, 300, 400, 500]  # one pass (503 rows) for three matrices
    assert _same(got[0], got[1]) and not _same(got[0], got[2])  # a scaled matrix has the same cosines


def test_many_refuses_mismatched_matrices():
    q, c, qids, cids, rel = random_task(5, n_queries=6, n_corpus=40)
    with pytest.raises(DataError, match="a matrix in query_embs= has 5 rows"):
        retrieval_metrics_many([q, q[:5]], c, qids, cids, rel)
    with pytest.raises(DataError, match="query_embs= is empty"):
        retrieval_metrics_many([], c, qids, cids, rel)
    stacked = retrieval_metrics_many(np.stack([q, 2 * q]), c, qids, cids, rel)  # a 3-d array: one matrix a prompt
    assert len(stacked) == 2 and _same(stacked[0], retrieval_metrics(q, c, qids, cids, rel, per_query=True))


@pytest.mark.parametrize("device", DEVICES)
def test_scored_where_the_vectors_are_equal_to_the_evaluator_there(device):
    """Tensors on a GPU are scored on the GPU, as the evaluator scores a model's tensors there: the same numbers as
    the evaluator given the same tensors (on the CPU, the arrays' numbers too)."""
    q, c, qids, cids, rel = random_task(1)
    qt, ct = torch.from_numpy(q).to(device), torch.from_numpy(c).to(device)
    for chunk_size in (50_000, 64):
        want = evaluator_metrics(qt, ct, qids, cids, rel, chunk_size, **KS)
        assert retrieval_metrics(qt, ct, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT) == want
        assert retrieval_metrics(qt, c, qids, cids, rel, chunk_size=chunk_size, cutoffs=CUT) == want  # array corpus
