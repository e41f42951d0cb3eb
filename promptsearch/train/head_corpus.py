"""The corpus ``train-head`` learns from: named sources, user files, deduplicated, sampled."""

from __future__ import annotations

import random
from typing import Sequence

from ..data import load_corpus, load_task, load_texts, read_snli_sentences, read_wordnet_texts
from ..data.corpora import WORDNET_DIR
from ..data.user import is_user_dataset
from ..errors import PromptSearchError

CORPORA = ("wiki", "wordnet", "snli", "sts")


def head_corpus(parts: Sequence[str] = CORPORA, data_dir=None, wordnet_dir=None) -> dict[str, list[str]]:
    """Sentences per source: the Wikipedia sample, WordNet glosses and examples, SNLI dev+test
    sentences, the *training* splits of STS-B and SICK (evaluation splits stay unseen), or a
    user corpus (a file or data set with a text column)."""
    out: dict[str, list[str]] = {}
    for part in parts:
        if part == "wiki":
            out[part] = load_corpus(data_dir=data_dir)
        elif part == "wordnet":
            out[part] = read_wordnet_texts(wordnet_dir or WORDNET_DIR)
        elif part == "snli":
            out[part] = read_snli_sentences(data_dir)
        elif part == "sts":
            s: list[str] = []
            for task in ("stsb-train", "sick-train"):
                s += load_task(task, data_dir).sentences()
            out[part] = s
        elif is_user_dataset(part):  # a text file, a table with a text column, a hub id
            out[part] = list(load_texts(part)["text"])
        else:
            raise PromptSearchError(f"unknown corpus {part!r}; choose from {', '.join(CORPORA)} or give a text file")
    return out


def dedupe(sentences: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for s in sentences:
        k = s.lower()
        if k not in seen:
            seen.add(k)
            out.append(s)
    return out




def corpus_parts(spec: str) -> list[str]:
    """``wiki,wordnet,...`` (or text files / data sets) → the parts, checked."""
    parts = [p.strip() for p in spec.split(",") if p.strip()]
    bad = [p for p in parts if p not in CORPORA and not is_user_dataset(p)]
    if bad or not parts:
        raise PromptSearchError(f"corpus={spec!r}: give a comma list of {', '.join(CORPORA)} or text files")
    return parts


def training_sentences(spec: str, data_dir=None, wordnet_dir=None, max_sentences: int | None = None,
                       seed: int = 0) -> tuple[list[str], dict[str, int]]:
    """The deduplicated sentences of the corpus ``spec`` names (a seeded random ``max_sentences``
    of them if given) and each source's count."""
    corpora = head_corpus(corpus_parts(spec), data_dir, wordnet_dir)
    sentences = dedupe([s for v in corpora.values() for s in v])
    if max_sentences:
        random.Random(seed).shuffle(sentences)
        sentences = sentences[:max_sentences]
    return sentences, {k: len(v) for k, v in corpora.items()}
