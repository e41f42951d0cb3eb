"""An evaluation task: what a search scores candidates on, whatever its kind.

As a sentence-transformers evaluator (``InformationRetrievalEvaluator``, ``EmbeddingSimilarityEvaluator``) names its
``primary_metric`` among the metrics it returns, an evaluation task knows its texts, what it needs encoded under which
prompt, and its metrics, one of them primary: ``evaluate(encoder, candidates)`` gives each candidate its metrics,
``metrics[task.primary_metric]`` the number a search ranks and steps by. Two kinds:

================================  ===========================================  ===================================
kind                              tasks                                        primary metric
================================  ===========================================  ===================================
STS (sentence pairs)              ``STSEvaluator`` (one set), ``Objective``    ``"spearman"``: Spearman × 100 of
                                  (several: their mean or min)                 cosine
retrieval (queries, corpus)       ``RetrievalTask`` (one set),                 ``"ndcg@10"``: nDCG@10, a fraction,
                                  ``RetrievalSets`` (several)                  as sentence-transformers gives it
================================  ===========================================  ===================================

A search's scorer (``search.scorer.Scorer``, ``search.retrieval.RetrievalScorer``: ``search.runner.TaskScorer``)
scores on one, and the runner, the step rule, racing, validation, the results file, the TUI and plots take
either kind's scores by their primary metric.
"""

from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence, runtime_checkable


@runtime_checkable
class EvaluationTask(Protocol):
    """What every kind of evaluation task has (see the module's description)."""

    name: str  # the data's name (several sets: their names, comma-joined)
    primary_metric: str  # the key, in each candidate's metrics, of the number a search ranks by

    def evaluate(self, encoder: Any, candidates: Sequence[Any], /) -> Mapping[Any, dict]:
        """Each candidate's metrics (``primary_metric`` among them), the texts encoded under its prompts."""
        ...


def primary(task: EvaluationTask, metrics: Mapping[str, Any]) -> float:
    """The primary metric's value in a candidate's metrics, as ``evaluate`` gave them.

    :param task: the task that gave them.
    :param metrics: one candidate's metrics.
    :returns: the number a search ranks by."""
    return float(metrics[task.primary_metric])
