import numpy as np
import pytest
from conftest import DATA, PAPER_T, PRECISIONS, make_encoder, vec_tol
from scipy.stats import spearmanr

from promptsearch.data import STSData, load_task
from promptsearch.encoding import rep as Rep
from promptsearch.eval import STSEvaluator, anisotropy, evaluate_reps, format_table, score_task


def test_all_is_spearman_over_concatenated_subsets_not_the_mean():
    rng = np.random.default_rng(0)
    vec = {f"s{i}": rng.normal(size=4) for i in range(40)}
    subsets = {}
    for k in ("a", "b"):
        ids = [f"s{i}" for i in (range(0, 20) if k == "a" else range(20, 40))]
        subsets[k] = (ids[:10], ids[10:], list(rng.uniform(0, 5, 10)))
    res = score_task(STSData("t", subsets), vec)

    def cos(x, y):
        return vec[x] @ vec[y] / np.linalg.norm(vec[x]) / np.linalg.norm(vec[y])

    sims = [cos(x, y) for k in "ab" for x, y in zip(subsets[k][0], subsets[k][1])]
    gold = subsets["a"][2] + subsets["b"][2]
    assert res["spearman"] == pytest.approx(spearmanr(sims, gold).statistic * 100)
    assert res["spearman"] != pytest.approx(np.mean(list(res["subsets"].values())))
    assert res["pairs"] == 20


def test_anisotropy_is_mean_pairwise_cosine(bert_enc):
    rep = Rep(pooling="static")
    assert anisotropy(bert_enc, [rep], corpus=["a man ."] * 5, n=5)[rep] == pytest.approx(1.0, abs=1e-5)
    corpus = ["a man .", "an onion .", "the cat sat ."]
    v = bert_enc.encode(corpus, pooling="static")
    u = v / np.linalg.norm(v, axis=1, keepdims=True)
    expected = np.mean([u[i] @ u[j] for i in range(3) for j in range(3) if i != j])
    assert anisotropy(bert_enc, [rep], corpus=corpus, n=3)[rep] == pytest.approx(expected, abs=1e-5)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_shared_pass_equals_separate_evaluation(precision, encoders):
    enc = encoders("bert", precision)
    mean = Rep(pooling="mean")
    reps = [Rep(template=PAPER_T), Rep(template=PAPER_T, denoise=True), mean, Rep(pooling="ditto", head="0-1")]
    together = evaluate_reps(enc, reps, ["sts16"])
    for r in reps:
        if r != mean:  # the same forward passes, alone or together: the same numbers
            assert together[r]["sts16"]["spearman"] == evaluate_reps(enc, [r], ["sts16"])[r]["sts16"]["spearman"]
    # Ditto needs attention maps, so the shared pooling pass runs eager attention where "mean"
    # alone runs SDPA: the kernels round differently; the vectors agree within rounding.
    sents = STSEvaluator(load_task("sts16")).sentences
    shared, alone = enc.encode_reps(sents, reps)[mean], enc.encode_reps(sents, [mean])[mean]
    fp32 = encoders("bert", "fp32").encode_reps(sents, [mean])[mean]
    np.testing.assert_allclose(shared, alone, atol=vec_tol(precision, alone, fp32))
    table = format_table([(r.label, together[r]) for r in reps], ["sts16"])
    assert PAPER_T.replace("|", "\\|") in table and "(denoised)" in table


def test_the_encoders_data_dir_is_where_static_debiased_and_anisotropy_read_wikipedia(tiny_bert_dir, tmp_path):
    """The Wikipedia sample belongs to the encoder (its ``data_dir``), counted once: no call names another."""
    root = tmp_path / "data"
    (root / "train").mkdir(parents=True)
    (root / "sts").symlink_to(DATA)
    (root / "train" / "wiki1m_sample.txt").write_text("guitar guitar guitar .\n" * 4, encoding="utf-8")
    own, default = make_encoder(tiny_bert_dir, data_dir=root), make_encoder(tiny_bert_dir)
    guitar = own.tokenizer.convert_tokens_to_ids("guitar")
    assert guitar in own.biased_token_ids() and guitar not in default.biased_token_ids()
    rep = Rep(pooling="mean")
    assert anisotropy(own, [rep], n=4)[rep] == pytest.approx(1.0, abs=1e-5)  # four copies of one sentence
    assert anisotropy(default, [rep], n=4)[rep] < 1.0 - 1e-4  # four sentences of the shared sample


def test_every_kind_of_task_names_its_primary_metric_and_evaluate_gives_it(bert_enc, tmp_path):
    """An evaluation task is an object with one ``primary_metric``, as sentence-transformers' evaluators have: STS
    pairs (Spearman ×100 of cosine), several STS sets as one objective, retrieval (nDCG@10); ``evaluate`` gives each
    candidate's metrics under that key."""
    from conftest import small_retrieval_data

    from promptsearch.eval.objective import Objective
    from promptsearch.eval.retrieval import RetrievalCandidate, RetrievalTask

    sts = STSEvaluator(load_task("stsb-dev", data_dir=DATA))
    rep = Rep(pooling="mean")
    assert sts.primary_metric == Objective({"stsb-dev": sts}).primary_metric == "spearman"
    got = sts.evaluate(bert_enc, [rep])[rep][sts.primary_metric]
    assert got == Objective({"stsb-dev": sts}).spearman(sts.encode(bert_enc, [rep])[rep])  # the same number
    task = RetrievalTask(small_retrieval_data(12, 40), cache_dir=tmp_path)
    c = RetrievalCandidate.of("query: ", "", "mean")
    assert task.primary_metric == "ndcg@10" and 0 <= task.evaluate(bert_enc, [c])[c][task.primary_metric] <= 1
    task.close()
