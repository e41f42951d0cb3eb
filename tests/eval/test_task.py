"""Every kind of evaluation task is an ``EvaluationTask``: ``evaluate(encoder, candidates)`` gives each candidate its
metrics, and the primary one is the number the search's scorer records for that candidate on that data."""

import dataclasses

import pytest
from conftest import make_encoder, small_retrieval_data

from promptsearch.data import load_task
from promptsearch.encoding.reps import rep_from_key
from promptsearch.eval import EvaluationTask, STSEvaluator, primary
from promptsearch.eval.retrieval import RetrievalCandidate, RetrievalTask
from promptsearch.eval.retrieval_sets import RetrievalSets
from promptsearch.search.retrieval import RetrievalResults, RetrievalScorer
from promptsearch.search.scorer import Scorer


@pytest.mark.parametrize("dataset", ["sts16", "sts16,sick-trial"])
def test_sts_tasks_give_the_search_scorers_number_as_their_primary_metric(bert_enc, dataset):
    scorer = Scorer(bert_enc, dataset=dataset, cache=False)
    task = scorer.evaluator  # the sets as one objective (one set: itself)
    alone = STSEvaluator(load_task("sts16"))
    assert isinstance(task, EvaluationTask) and isinstance(alone, EvaluationTask)
    assert task.name == dataset and task.primary_metric == alone.primary_metric == "spearman"
    for key in ("This sentence : \" [X] \" means [MASK] .", "[X] @mean"):
        rep = rep_from_key(key, denoise=True)
        got = task.evaluate(bert_enc, [rep])[rep]
        assert primary(task, got) == scorer.score(key).spearman  # the very number a search records
        assert list(got["sets"]) == dataset.split(",")
        if dataset == "sts16":  # one set: its own sentences and batches, so eval's very number
            assert got["sets"]["sts16"] == primary(alone, alone.evaluate(bert_enc, [rep])[rep])
        else:  # the objective: the mean of the sets' Spearmans
            assert primary(task, got) == pytest.approx(sum(got["sets"].values()) / 2, abs=1e-12)


def test_retrieval_tasks_give_the_search_scorers_number_as_their_primary_metric(tiny_bert_encoder_only_dir, tmp_path):
    enc = make_encoder(tiny_bert_encoder_only_dir)
    data = small_retrieval_data(12, 60)
    task = RetrievalTask(data, cache_dir=tmp_path)
    other = dataclasses.replace(small_retrieval_data(20, 40), name="other")
    sets = RetrievalSets([task, RetrievalTask(other, cache_dir=tmp_path)])
    for t in (task, sets):
        assert isinstance(t, EvaluationTask) and t.primary_metric == "ndcg@10"
        c = RetrievalCandidate.of("query: ", "", "mean")
        got = t.evaluate(enc, [c])[c]
        entry = RetrievalScorer(t, enc, RetrievalResults(None, "tiny", t.record(), enc.precision)).score([c])[0]
        assert entry.value == round(primary(t, got), 6)  # the number a retrieval search records (6 places)
    assert task.name == data.name and sets.name == f"{data.name},other"


def test_what_is_not_a_task_is_not_one():
    assert not isinstance(object(), EvaluationTask)
    assert not isinstance(load_task("sts16"), EvaluationTask)  # the pairs alone: no metric, no evaluate
