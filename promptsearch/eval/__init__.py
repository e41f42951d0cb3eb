"""Evaluation: the evaluation task every kind of data is (``EvaluationTask``: STS pairs, retrieval), the one STS
evaluator, anisotropy, tables, Ditto's head search, [MASK] predictions."""

from .anisotropy import anisotropy
from .sts import STSEvaluator, cosine, evaluate_reps, evaluators, score_task, spearman100
from .tables import average, format_table, results_json
from .task import EvaluationTask, primary

__all__ = ["EvaluationTask", "primary", "STSEvaluator", "evaluators", "cosine", "spearman100", "score_task",
           "evaluate_reps", "anisotropy", "average", "format_table", "results_json"]
