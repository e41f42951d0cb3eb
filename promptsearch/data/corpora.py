"""Sentence corpora: the Wikipedia sample, WordNet glosses, SNLI sentences and triplets, NLI CSVs."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import DataError
from ..paths import train_dir
from .sts import _read_lines, _tokens
from .user import load_texts


def default_corpus_path(data_dir=None) -> Path:
    return train_dir(data_dir) / "wiki1m_sample.txt"


def load_corpus(data_dir=None, limit: int | None = None) -> list[str]:
    """The Wikipedia sample in the data folder's ``train/`` (one sentence a line, blank lines
    skipped). A user's corpus goes through ``promptsearch.data.user.load_texts``.

    :param data_dir: the data folder (None: the default location).
    :param limit: keep the first this many sentences (None: all).
    :returns: the sentences, whitespace collapsed.
    :raises promptsearch.errors.DataError: for a missing or unreadable file, or one with no sentence."""
    p = default_corpus_path(data_dir)
    lines = [s for s in (_tokens(x) for x in _read_lines(p)) if s]
    if not lines:
        raise DataError(f"{p} holds no sentences; give a file with one sentence a line")
    return lines[:limit] if limit else lines


def training_corpus(train_file: str | None = None, text_column: str | None = None, data_dir=None):
    """The sentences a training run learns from: ``train_file`` (a text file, a table with a text
    column, a dataset folder or a hub id; memory-mapped through ``datasets``), else the Wikipedia sample.

    :param train_file: the user's corpus (None: the Wikipedia sample).
    :param text_column: its text column (None: found by name).
    :param data_dir: the data folder the Wikipedia sample is read from (None: the default location).
    :returns: a ``datasets.Dataset`` with the column ``text`` (a user's corpus) or a list of sentences.
    :raises promptsearch.errors.DataError: as ``load_texts`` and ``load_corpus``."""
    return load_texts(train_file, text_column) if train_file else load_corpus(data_dir=data_dir)


# ---- WordNet glosses (definition-driven template generation) --------------------------------

WORDNET_DIR = "/usr/share/wordnet"
WORDNET_POS = ("noun", "verb", "adj", "adv")


def read_wordnet(wordnet_dir: str | os.PathLike = WORDNET_DIR,
                 pos: tuple[str, ...] = WORDNET_POS) -> list[tuple[str, str]]:
    """(word, definition) pairs from WordNet 3.0 ``data.<pos>`` files (Debian ``wordnet-base``).

    A synset line is ``offset lex_filenum ss_type w_cnt word lex_id ... | gloss``; the gloss's
    first ``;``-separated part is the definition (the rest are examples). The first lemma of
    each synset is its word; underscores become spaces.

    :param wordnet_dir: the folder of the ``data.<pos>`` files.
    :param pos: the parts of speech read.
    :returns: ``(word, definition)`` pairs in file order.
    :raises promptsearch.errors.DataError: for a missing folder or file, a malformed synset line, or no synset.
    """
    d = Path(wordnet_dir)
    if not d.is_dir():
        raise DataError(f"no WordNet at {d}; install it (apt-get install wordnet-base) or pass wordnet_dir=")
    pairs: list[tuple[str, str]] = []
    for p in pos:
        path = d / f"data.{p}"
        for i, line in enumerate(_read_lines(path), 1):
            if not line or line.startswith(" ") or " | " not in line:
                continue  # licence header
            head, gloss = line.split(" | ", 1)
            fields = head.split()
            if len(fields) < 5:
                raise DataError(f"{path}:{i}: not a WordNet synset line")
            word = fields[4].replace("_", " ")
            word = word.split("(")[0]  # adjective markers like "(a)"
            definition = gloss.split(";")[0].strip()
            if word and definition and not definition.startswith('"'):
                pairs.append((word, definition))
    if not pairs:
        raise DataError(f"{d} holds no WordNet synsets (data.noun, data.verb, ...)")
    return pairs


# ---- NLI triplets (supervised fine-tuning) ----------------------------------------------------

def snli_groups(data_dir=None, splits: tuple[str, ...] = ("dev", "test")) -> dict[str, dict[str, list[str]]]:
    """SNLI in SentEval layout grouped by premise: premise → label → its hypotheses, in file order.

    :param data_dir: the data folder (None: the default location); the files are ``train/snli/s1.<split>`` ...
    :param splits: the splits read.
    :returns: the groups, premises in order of first appearance.
    :raises promptsearch.errors.DataError: for missing or misaligned files."""
    folder = train_dir(data_dir) / "snli"
    groups: dict[str, dict[str, list[str]]] = {}
    for split in splits:
        s1, s2, lab = (_read_lines(folder / f"{n}.{split}") for n in ("s1", "s2", "labels"))
        if not (len(s1) == len(s2) == len(lab)):
            raise DataError(f"{folder}: s1/s2/labels.{split} have different line counts")
        for a, b, label in zip(s1, s2, lab):
            g = groups.setdefault(_tokens(a), {})
            g.setdefault(label.strip(), []).append(_tokens(b))
    return groups


def snli_triplets(data_dir=None, splits: tuple[str, ...] = ("dev", "test")) -> list[tuple[str, str, str]]:
    """(premise, entailment, contradiction) triplets from SNLI in SentEval layout, grouped by premise.

    :param data_dir: the data folder (None: the default location); the files are ``train/snli/s1.<split>`` ...
    :param splits: the splits read.
    :returns: one triplet per premise that has both an entailment and a contradiction.
    :raises promptsearch.errors.DataError: for missing or misaligned files, or no triplet."""
    out = [(p, g["entailment"][0], g["contradiction"][0]) for p, g in snli_groups(data_dir, splits).items()
           if g.get("entailment") and g.get("contradiction")]
    if not out:
        raise DataError(f"{train_dir(data_dir) / 'snli'} gave no (premise, entailment, contradiction) triplets")
    return out


def read_wordnet_texts(wordnet_dir: str | os.PathLike = WORDNET_DIR, pos: tuple[str, ...] = WORDNET_POS) -> list[str]:
    """Every WordNet gloss part as a text: definitions and the quoted usage examples.

    :param wordnet_dir: the folder of the ``data.<pos>`` files.
    :param pos: the parts of speech read.
    :returns: the texts of three words or more.
    :raises promptsearch.errors.DataError: for a missing folder or file, or no gloss."""
    d = Path(wordnet_dir)
    if not d.is_dir():
        raise DataError(f"no WordNet at {d}; install it (apt-get install wordnet-base) or pass wordnet_dir=")
    out: list[str] = []
    for p in pos:
        for line in _read_lines(d / f"data.{p}"):
            if not line or line.startswith(" ") or " | " not in line:
                continue
            for part in line.split(" | ", 1)[1].split(";"):
                t = _tokens(part.strip().strip('"').strip())
                if len(t.split()) >= 3:
                    out.append(t)
    if not out:
        raise DataError(f"{d} holds no WordNet glosses (data.noun, data.verb, ...)")
    return out


def read_snli_sentences(data_dir=None, splits: tuple[str, ...] = ("dev", "test")) -> list[str]:
    """Premises and hypotheses of SNLI (SentEval layout), each once.

    :param data_dir: the data folder (None: the default location).
    :param splits: the splits read.
    :returns: the sentences, in first-seen order.
    :raises promptsearch.errors.DataError: for a missing file, or no sentence."""
    folder = train_dir(data_dir) / "snli"
    seen: dict[str, None] = {}
    for split in splits:
        for n in ("s1", "s2"):
            for s in _read_lines(folder / f"{n}.{split}"):
                if s.strip():
                    seen.setdefault(_tokens(s), None)
    if not seen:
        raise DataError(f"{folder} holds no SNLI sentences (s1.dev, s2.dev, ...)")
    return list(seen)
