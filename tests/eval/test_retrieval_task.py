"""RetrievalTask: the corpus encoded once per document side (and stored), the queries once per query side, and
the metrics exactly those of ir_metrics on the encoder's own vectors."""

import numpy as np
import pytest
import torch
from conftest import make_encoder, small_retrieval_data

from promptsearch.encoding.reps import rep_from_key
from promptsearch.errors import DataError, TemplateError
from promptsearch.eval.ir_metrics import CorpusStore, retrieval_metrics
from promptsearch.eval.retrieval import RetrievalCandidate, RetrievalTask, hold_out, sample_queries, unseen


@pytest.fixture(scope="module")
def data():
    return small_retrieval_data()


@pytest.fixture
def enc(tiny_bert_encoder_only_dir):
    return make_encoder(tiny_bert_encoder_only_dir)


def counting(enc, corpus_texts):
    """Count the encoder's calls whose sentences are corpus texts (the corpus passes) and all calls."""
    calls = {"corpus": 0, "all": 0}
    real = enc.encode_reps
    corpus_texts = set(corpus_texts)

    def encode_reps(sentences, reps, **kw):
        calls["all"] += 1
        if set(sentences) <= corpus_texts and len(sentences) > 0 and set(sentences) & corpus_texts:
            calls["corpus"] += 1
        return real(sentences, reps, **kw)

    enc.encode_reps = encode_reps
    return calls


def test_the_corpus_is_encoded_once_per_document_side_and_read_back_by_a_later_task(enc, data, tmp_path):
    calls = counting(enc, data.corpus.values())
    task = RetrievalTask(data, cache_dir=tmp_path)
    cands = [RetrievalCandidate.of(q, "", "mean") for q in ("", "query: ", "search_query: ", "question: ")]
    cands.append(RetrievalCandidate.of("query: ", "passage: ", "mean"))
    got = task.evaluate(enc, cands)
    assert set(got) == set(cands)
    assert task.corpus_encodings == 2 and task.corpus_passes == 2 and calls["corpus"] == 2
    assert task.query_encodings == 4  # "", query:, search_query:, question: (query: shared by two candidates)
    again = task.evaluate(enc, cands[:2])  # in this process: nothing encoded again
    assert task.corpus_encodings == 2 and calls["corpus"] == 2 and task.query_encodings == 4
    assert again[cands[0]] == got[cands[0]]
    later = RetrievalTask(data, cache_dir=tmp_path)  # a later run: the stored corpus vectors are read back
    got2 = later.evaluate(enc, cands)
    assert later.corpus_encodings == 0 and later.corpus_reused == 2 and calls["corpus"] == 2
    assert got2 == got
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".npy", ".npy"]  # two stores, nothing half-written


def test_read_outs_of_one_document_prompt_share_one_pass(enc, data, tmp_path):
    calls = counting(enc, data.corpus.values())
    task = RetrievalTask(data, cache_dir=tmp_path)
    cands = [RetrievalCandidate.of("query: ", "passage: ", r) for r in ("mean", "sentence-mean", "cls", "max")]
    task.evaluate(enc, cands)
    assert task.corpus_encodings == 4 and task.corpus_passes == 1 and calls["corpus"] == 1


def own_vectors(enc, data, c):
    """The encoder's own query and corpus vectors of candidate ``c`` (float32), encoded apart from any task."""
    rq, rd = rep_from_key(c.side("query")), rep_from_key(c.side("document"))
    q = enc.encode_reps([data.queries[i] for i in data.queries], [rq])[rq]
    d = enc.encode_reps([data.corpus[i] for i in data.corpus], [rd])[rd]
    return q, d


def test_metrics_equal_ir_metrics_on_the_encoders_own_float32_vectors(enc, data, tmp_path):
    """Below the size limit the corpus is stored in float32 as encoded: the rows read back are the encoder's vectors
    bit for bit, so the metrics are those of ir_metrics on the vectors themselves, exactly (and ir_metrics equals
    sentence-transformers' evaluator on the same vectors exactly: tests/eval/test_ir_metrics.py)."""
    c = RetrievalCandidate.of("query: ", "passage: ", "sentence-mean")
    task = RetrievalTask(data, cache_dir=tmp_path)
    got = task.evaluate(enc, [c], per_query=True)[c]
    q, d = own_vectors(enc, data, c)
    (stored,) = task.corpus_vectors(enc, [c.side("document")]).values()
    assert stored.dtype == np.float32 and np.array_equal(stored.array, d)  # as encoded: not normalised, not rounded
    assert np.abs(np.linalg.norm(d, axis=1) - 1).max() > 1e-3  # (the check above could tell a normalised copy)
    want = retrieval_metrics(q, d, list(data.queries), list(data.corpus), data.relevant, per_query=True)
    assert {k: v for k, v in got.items() if k != "per_query"} == {k: v for k, v in want.items() if k != "per_query"}
    np.testing.assert_array_equal(got["per_query"]["ndcg@10"], want["per_query"]["ndcg@10"])
    assert got["ndcg@10"] == pytest.approx(float(np.mean(got["per_query"]["ndcg@10"])), abs=1e-12)


def test_above_the_size_limit_the_corpus_is_float16_with_a_note(enc, data, tmp_path, capsys):
    """float16_above_gib=0 puts any corpus above the limit: its vectors are stored as float16 unit vectors, the
    metrics are ir_metrics' on those rows exactly, a note says so once, and the cache keeps the two dtypes apart."""
    c = RetrievalCandidate.of("query: ", "passage: ", "sentence-mean")
    capsys.readouterr()
    task = RetrievalTask(data, cache_dir=tmp_path, float16_above_gib=0)
    got = task.evaluate(enc, [c, RetrievalCandidate.of("query: ", "passage: ", "mean")], per_query=True)[c]
    err = capsys.readouterr().err.strip().splitlines()
    gib = len(data.corpus) * 32 * 4 / 2 ** 30  # the tiny model's 32 dimensions
    assert len(err) == 1 and err[0].startswith(f"note: the corpus's float32 vectors take {gib:.3g} GiB, above "
                                               "float16_above_gib=0: they are stored in float16"), err
    assert "differ from sentence-transformers' evaluator's by float16 rounding" in err[0]
    qids, cids = list(data.queries), list(data.corpus)
    q, d = own_vectors(enc, data, c)
    stored = task.corpus_vectors(enc, [c.side("document")])[c.side("document")]
    unit = d / np.linalg.norm(d, axis=1, keepdims=True)
    assert stored.dtype == np.float16
    assert np.abs(np.asarray(stored.array, dtype=np.float32) - unit).max() <= 2 ** -11  # float16's half-ulp at 1
    with CorpusStore(tmp_path / "c.npy", len(cids), d.shape[1], dtype="float16") as w:  # the same float16 rows
        w.append(d)
    want = retrieval_metrics(q, CorpusStore.open(tmp_path / "c.npy"), qids, cids, data.relevant, per_query=True)
    assert {k: v for k, v in got.items() if k != "per_query"} == {k: v for k, v in want.items() if k != "per_query"}
    f32 = RetrievalTask(data, cache_dir=tmp_path).evaluate(enc, [c])[c]  # the float32 store: encoded, not reused
    assert f32 == retrieval_metrics(q, d, qids, cids, data.relevant) and f32 != {k: got[k] for k in f32}
    assert capsys.readouterr().err == ""  # no note below the limit
    assert len(list(tmp_path.glob("corpus-*.npy"))) == 3  # two float16 read-outs, one float32: keyed by the dtype
    again = RetrievalTask(data, cache_dir=tmp_path, float16_above_gib=0)
    assert again.evaluate(enc, [c])[c] == {k: got[k] for k in f32} and again.corpus_reused == 1
    assert "stored in float16" in capsys.readouterr().err  # read back from the cache, still noted


def test_the_dtype_follows_the_float32_size_of_the_corpus(data):
    n = len(data.corpus)
    limit = n * 384 * 4 / 2 ** 30  # exactly the float32 size of 384-dimensional vectors
    task = RetrievalTask(data, cache_dir=False, float16_above_gib=limit)
    assert task.corpus_dtype(384) == "float32" and task.corpus_dtype(385) == "float16"  # above it, not at it
    assert RetrievalTask(data, cache_dir=False).corpus_dtype(4096) == "float32"  # 2 GiB by default
    with pytest.raises(DataError, match="float16_above_gib=-1"):
        RetrievalTask(data, cache_dir=False, float16_above_gib=-1)


def test_a_candidate_checks_its_prompts_and_read_out():
    assert RetrievalCandidate.of("", "", "sentence-mean") == RetrievalCandidate.of("", "", "mean")
    assert RetrievalCandidate.of("query: ", "", "sentence-mean").readout == "sentence-mean"
    with pytest.raises(TemplateError):
        RetrievalCandidate.of("", "", "average")
    with pytest.raises(TemplateError):
        RetrievalCandidate.of("a [X] b", "", "mean")
    c = RetrievalCandidate.of("Instruct: find\nQuery: ", "", "cls")
    assert RetrievalCandidate.from_json(c.to_json()) == c and "\\n" in c.shown and "\n" not in c.shown


def test_a_query_sample_is_seeded_and_keeps_the_corpus(data):
    a, b = sample_queries(data, 10, seed=1), sample_queries(data, 10, seed=1)
    assert list(a.queries) == list(b.queries) and len(a.queries) == 10 and a.corpus == data.corpus
    assert set(a.relevant) == set(a.queries) and list(a.queries) == [q for q in data.queries if q in a.queries]
    assert a.fingerprint() != data.fingerprint()
    assert list(sample_queries(data, 10, seed=2).queries) != list(a.queries)
    assert sample_queries(data, 10_000) is data
    with pytest.raises(DataError, match="queries=0"):
        sample_queries(data, 0)


def test_a_model_that_ranks_by_another_similarity_is_refused(enc, data, tmp_path):
    """The metrics are cosine: a model whose own similarity (its similarity_fn_name) ranks otherwise — dot product
    on unnormalized vectors, Manhattan — would be scored by another measure than its own (found by review)."""
    from promptsearch.errors import PromptSearchError

    stack = enc.model.stack()
    c = RetrievalCandidate.of("", "", "mean")
    task = RetrievalTask(data, cache_dir=tmp_path)
    try:
        for sim in ("dot", "manhattan"):
            stack.similarity = sim
            with pytest.raises(PromptSearchError, match=f"compares vectors by {sim}"):
                task.evaluate(enc, [c])
        stack.similarity = "cosine"
        assert task.evaluate(enc, [c])[c]["ndcg@10"] > 0
    finally:
        stack.similarity = "cosine"
        task.close()


def test_a_corpus_store_that_cannot_be_written_is_one_line(enc, data, tmp_path, monkeypatch):
    from promptsearch.errors import PromptSearchError

    def full(self, rows):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(CorpusStore, "append", full)
    task = RetrievalTask(data, cache_dir=tmp_path / "cache")
    try:
        with pytest.raises(PromptSearchError, match="No space left on device") as e:
            task.evaluate(enc, [RetrievalCandidate.of("", "", "mean")])
        assert "cache_dir=" in str(e.value) and "\n" not in str(e.value)
        assert not [p for p in (tmp_path / "cache").glob("*") if p.suffix == ".npy"]  # nothing half-written kept
    finally:
        task.close()


def test_held_out_queries_are_a_seeded_share_the_search_never_sees():
    data = small_retrieval_data(30, 40)
    seen = hold_out(data, 0.2, seed=3)
    assert len(seen.queries) == 24 and seen.corpus is data.corpus  # round(0.2 * 30) = 6 held out, the corpus whole
    assert list(seen.queries) == [q for q in data.queries if q in seen.queries]  # file order kept
    assert set(seen.relevant) == set(seen.queries)
    assert list(hold_out(data, 0.2, seed=3).queries) == list(seen.queries)  # the same seed, the same draw
    assert list(hold_out(data, 0.2, seed=4).queries) != list(seen.queries)
    rest = unseen(data, seen)
    assert rest is not None and set(rest.queries) | set(seen.queries) == set(data.queries)
    assert not set(rest.queries) & set(seen.queries) and set(rest.relevant) == set(rest.queries)
    # a sample of what is searched leaves the rest of it unseen too
    sample = sample_queries(seen, 10, seed=3)
    assert len(unseen(data, sample).queries) == 20
    assert hold_out(data, 0.0) is data and unseen(data, data) is None  # nothing held out: nothing to check on
    for bad in (1.0, -0.1, float("nan"), 0.99):
        with pytest.raises(DataError, match="holdout="):
            hold_out(data, bad)


def test_score_passes_keep_each_pass_small_and_cover_every_candidate():
    """Query prompts of one document side share a pass over its corpus vectors, within a count, a size and the
    device's arithmetic, so a pass never holds a search's scores (and an interrupt) for long."""
    from promptsearch.eval.retrieval import PASS_MATRICES, score_passes

    cpu, gpu = torch.device("cpu"), torch.device("cuda")  # a device object needs no GPU
    # the benchmark's data (64 queries, 10,647 documents, 384 dimensions): 16 a pass on either
    assert [list(r) for r in score_passes(20, 64, 10_647, 384, cpu)] == [list(range(16)), list(range(16, 20))]
    assert len(score_passes(20, 64, 10_647, 384, gpu)) == 2
    # a large corpus: one prompt a pass on a CPU (its scoring alone is seconds), several on a GPU
    assert [len(r) for r in score_passes(5, 300, 1_000_000, 768, cpu)] == [1] * 5
    assert [len(r) for r in score_passes(5, 300, 1_000_000, 768, gpu)] == [5]
    # many queries: bounded by the bytes of their vectors
    assert max(len(r) for r in score_passes(40, 50_000, 1_000, 1024, gpu)) == 1
    for n in (1, 7, PASS_MATRICES, 33):
        assert [i for r in score_passes(n, 64, 1_000, 384, gpu) for i in r] == list(range(n))
