"""Readers: the STS tasks (SentEval layout) and sentence corpora."""

from .corpora import load_corpus, read_snli_sentences, read_wordnet, read_wordnet_texts, snli_triplets, training_corpus
from .options import DataOptions
from .sts import (
    DEV_SET,
    TASK_GROUPS,
    TASK_NAMES,
    TASKS,
    STSData,
    data_fingerprint,
    read_sick,
    read_sts_year,
    read_stsb,
    set_label,
)
from .tasks import DevSets, check_data, expand_tasks, load_task, one_dataset, scoring_sets
from .user import PairFormat, load_pairs, load_texts, load_triplets

__all__ = ["DataOptions", "DEV_SET", "DevSets", "STSData", "data_fingerprint", "TASKS", "TASK_NAMES", "TASK_GROUPS",
           "set_label", "expand_tasks", "load_task", "check_data", "one_dataset", "scoring_sets",
           "read_sts_year", "read_stsb", "read_sick", "training_corpus", "load_corpus", "read_wordnet",
           "read_wordnet_texts", "snli_triplets",
           "read_snli_sentences", "PairFormat", "load_pairs", "load_texts", "load_triplets"]
