"""Several retrieval sets as one objective: each metric the mean of the sets' (each scored as one RetrievalTask scores
it, ``{task}`` filled with that set's description), and the step rule's gain and error those of the mean of the sets'
means."""

import dataclasses

import numpy as np
import pytest
from conftest import make_encoder, small_retrieval_data

from promptsearch.errors import DataError, PromptSearchError
from promptsearch.eval.retrieval import RetrievalCandidate, RetrievalTask
from promptsearch.eval.retrieval_sets import RetrievalSets
from promptsearch.search.retrieval import judge, mean_se, set_mean


@pytest.fixture(scope="module")
def two():
    a = dataclasses.replace(small_retrieval_data(12, 60), name="a", description="Find the sentence that says the same")
    whole = small_retrieval_data(30, 120)
    later = list(whole.queries)[12:30]  # other queries, a larger corpus: another set
    b = dataclasses.replace(whole, name="b", description="Retrieve a paraphrase of the question",
                            queries={q: whole.queries[q] for q in later},
                            relevant={q: whole.relevant[q] for q in later})
    return a, b


def test_each_metric_is_the_mean_of_the_sets_each_scored_with_its_own_task(tiny_bert_encoder_only_dir, two, tmp_path):
    enc = make_encoder(tiny_bert_encoder_only_dir)
    a, b = two
    sets = RetrievalSets([RetrievalTask(a, cache_dir=tmp_path), RetrievalTask(b, cache_dir=tmp_path)])
    assert sets.sizes == [12, 18] and sets.data.name == "a,b"
    inst = RetrievalCandidate.of("Instruct: {task}\nQuery: ", "", "mean")
    plain = RetrievalCandidate.of("query: ", "", "mean")
    got = sets.evaluate(enc, [inst, plain], per_query=True)
    for c in (inst, plain):
        alone = {}
        for d in (a, b):  # each set alone, {task} written in by hand
            filled = RetrievalCandidate.of(c.query.replace("{task}", d.description.rstrip(".")), c.document, c.readout)
            alone[d.name] = RetrievalTask(d, cache_dir=tmp_path).evaluate(enc, [filled], per_query=True)[filled]
        for k in ("ndcg@10", "mrr@10", "map@100"):
            assert got[c][k] == pytest.approx((alone["a"][k] + alone["b"][k]) / 2, abs=1e-12)
        assert got[c]["a:ndcg@10"] == alone["a"]["ndcg@10"] and got[c]["b:ndcg@10"] == alone["b"]["ndcg@10"]
        assert np.array_equal(got[c]["per_query"]["ndcg@10"],
                              np.concatenate([alone["a"]["per_query"]["ndcg@10"], alone["b"]["per_query"]["ndcg@10"]]))
        assert set_mean(got[c]["per_query"]["ndcg@10"], sets.sizes) == pytest.approx(got[c]["ndcg@10"], abs=1e-12)
    # the instruction read each set's own task: the two sets' prompts differ, so their query vectors do too
    assert got[inst]["a:ndcg@10"] != got[plain]["a:ndcg@10"] or got[inst]["b:ndcg@10"] != got[plain]["b:ndcg@10"]
    rec = sets.record()
    assert [s["name"] for s in rec["sets"]] == ["a", "b"] and rec["queries"] == 30
    assert [s["description"] for s in rec["sets"]] == [a.description, b.description]
    other = RetrievalSets([RetrievalTask(dataclasses.replace(a, description="Another task"), cache_dir=tmp_path),
                           RetrievalTask(b, cache_dir=tmp_path)])
    assert other.record()["fingerprint"] != rec["fingerprint"]  # another description, other numbers: another run


def test_the_same_set_twice_is_refused(two, tmp_path):
    a, _ = two
    with pytest.raises(DataError, match="hold the same queries and corpus"):
        RetrievalSets([RetrievalTask(a, cache_dir=tmp_path), RetrievalTask(dataclasses.replace(a, name="a2"),
                                                                           cache_dir=tmp_path)])
    with pytest.raises(DataError, match="two retrieval sets are named a"):
        RetrievalSets([RetrievalTask(a, cache_dir=tmp_path),
                       RetrievalTask(dataclasses.replace(a, description="x", relevant=dict(a.relevant),
                                                         queries=dict(list(a.queries.items())[:5])),
                                     cache_dir=tmp_path)])


def test_the_step_rule_weighs_each_set_as_the_mean_of_means_does():
    rng = np.random.default_rng(0)
    sizes = [40, 400]  # a small noisy set and a large quiet one
    before = np.concatenate([rng.uniform(0, 1, 40), rng.uniform(0.4, 0.6, 400)])
    after = before + np.concatenate([rng.normal(0.05, 0.3, 40), rng.normal(0.0, 0.02, 400)])
    j = judge(before, after, sizes=sizes)
    d = after - before
    assert j.gain == pytest.approx((d[:40].mean() + d[40:].mean()) / 2, abs=1e-15)
    # the error is that of the mean of the two sets' means: what a paired bootstrap within each set gives
    boot = [(rng.choice(d[:40], 40).mean() + rng.choice(d[40:], 400).mean()) / 2 for _ in range(4000)]
    # the bootstrap's s.e. has its own sampling error (about 1/sqrt(2 x 4000) ~ 1.1 %), and divides by n, not n - 1
    assert j.se == pytest.approx(float(np.std(boot)), rel=0.06)
    # pooled as one set, the small set's noise would be diluted by the large one's queries: a smaller, wrong error
    assert mean_se(d) < 0.6 * j.se
    assert judge(before, after, sizes=[440]) == judge(before, after)  # one set: the rule as before
    assert mean_se(d, [1, 439]) == float("inf")  # a set of one query has no error estimate


def test_the_min_objective_is_the_worst_sets_score_and_its_step_rule_weighs_that_min(tiny_bert_encoder_only_dir, two,
                                                                                      tmp_path):
    """``objective="min"``: each metric the lower of the sets' (STS's ``combine``, the one rule), recorded, and a
    file of it another run than the mean's; the step rule's gain is the gain of the min of the sets' means, its
    error that of the min over paired resamples of each set's queries."""
    enc = make_encoder(tiny_bert_encoder_only_dir)
    a, b = two
    tasks = [RetrievalTask(a, cache_dir=tmp_path), RetrievalTask(b, cache_dir=tmp_path)]
    mean, worst = RetrievalSets(tasks), RetrievalSets(tasks, "min")
    plain = RetrievalCandidate.of("query: ", "", "mean")
    m, w = mean.evaluate(enc, [plain])[plain], worst.evaluate(enc, [plain])[plain]
    for k in ("ndcg@10", "mrr@10", "map@100"):
        each = [t.evaluate(enc, [plain])[plain][k] for t in tasks]
        assert w[k] == min(each)
    assert w["ndcg@10"] <= m["ndcg@10"] and w["a:ndcg@10"] == m["a:ndcg@10"]
    assert worst.record()["objective"] == "min" and mean.record()["objective"] == "mean"
    assert worst.record()["fingerprint"] != mean.record()["fingerprint"]
    assert worst.screen(0.1).objective == "min"
    with pytest.raises(PromptSearchError, match="objective='max': choose mean or min"):
        RetrievalSets(tasks, "max")

    rng = np.random.default_rng(1)
    sizes = [60, 300]
    before = np.concatenate([rng.uniform(0.2, 0.4, 60), rng.uniform(0.7, 0.9, 300)])  # set a is the worst
    after = before + np.concatenate([rng.normal(0.05, 0.1, 60), rng.normal(-0.1, 0.02, 300)])
    j = judge(before, after, sizes=sizes, objective="min")
    assert j.gain == pytest.approx(after[:60].mean() - before[:60].mean(), abs=1e-12)  # the min is set a's, both sides
    assert set_mean(after, sizes, "min") == pytest.approx(min(after[:60].mean(), after[60:].mean()), abs=1e-12)
    # set a decides the min here, so its error is about that of set a's mean difference alone (its own s.e.), not
    # the mean-of-means error, which halves it
    alone = float((after[:60] - before[:60]).std(ddof=1) / np.sqrt(60))
    assert j.se == pytest.approx(alone, rel=0.15) and judge(before, after, sizes=sizes).se < 0.6 * j.se
    assert j.taken is (j.gain > j.se) and judge(before, after, sizes=sizes).gain < 0 < j.gain  # the mean refuses it
    assert mean_se(after, sizes, "min") == pytest.approx(float(after[:60].std(ddof=1) / np.sqrt(60)), rel=0.15)
    assert judge(before, after, sizes=[360], objective="min") == judge(before, after)  # one set: min is the mean
