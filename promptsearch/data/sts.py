"""STS readers: SentEval-layout STS12–16, STS-B, SICK.

The data directory comes from ``--data-dir`` or ``PROMPTSEARCH_DATA_DIR`` (see
``promptsearch.paths``).
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import DataError
from ..paths import DEV_SET, sts_dir  # noqa: F401 (DEV_SET: re-exported by promptsearch.data)

STS_YEARS = {"sts12": "STS12-en-test", "sts13": "STS13-en-test", "sts14": "STS14-en-test",
             "sts15": "STS15-en-test", "sts16": "STS16-en-test"}
TASKS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
TASK_NAMES = {"sts12": "STS12", "sts13": "STS13", "sts14": "STS14", "sts15": "STS15", "sts16": "STS16",
              "stsb": "STS-B", "sickr": "SICK-R", "stsb-dev": "STS-B dev", "stsb-train": "STS-B train",
              "sick-trial": "SICK-R trial", "sick-train": "SICK-R train", "stsb-original-dev": "STS-B dev (original)",
              "stsb-original-test": "STS-B test (original)"}
TASK_GROUPS = {"sts-all": TASKS}


def set_label(name: str) -> str:
    """A data set as tables and lines name it: a built-in one by its table name (``stsb-dev`` → STS-B dev, ``sickr`` →
    SICK-R), as every command prints it; the user's own (a file, a folder, a hub id) as given.

    :param name: the set's name as the run was given it (several: comma-joined, each named so).
    :returns: the name shown."""
    return ",".join(TASK_NAMES.get(n, n) for n in name.split(","))

# Other names of built-in splits: SICK's files are SICK_trial / SICK_train / SICK_test_annotated.
SPLIT_ALIASES = {"sickr-dev": "sick-trial", "sickr-train": "sick-train", "sick-test": "sickr", "sickr-test": "sickr",
                 "stsb-test": "stsb"}
# The names tables print (STS-B, SICK-R) and MTEB's (STSBenchmark) too, where no file or folder has that name (a
# SentEval folder STSBenchmark is the user's data); "_" is read as "-" (stsb_test) likewise.
TASK_ALIASES = {**SPLIT_ALIASES, "sts-b": "stsb", "stsbenchmark": "stsb", "sick-r": "sickr"}


@dataclass
class STSData:
    """Pairs of one task, grouped by subset (one subset for STS-B and SICK).

    :param name: the task's name (``stsb-dev``, a user file's spec ...).
    :param subsets: subset name → (first sentences, second sentences, gold scores), aligned."""

    name: str
    subsets: dict[str, tuple[list[str], list[str], list[float]]] = field(default_factory=dict)

    @property
    def n_pairs(self) -> int:
        return sum(len(v[2]) for v in self.subsets.values())

    def check(self) -> "STSData":
        """A Spearman correlation needs two pairs with different gold scores: on the whole set and
        on every subset (SentEval reports each). Raise a one-line error where it is undefined.

        :returns: itself.
        :raises promptsearch.errors.DataError: where every gold score of the set, or of a subset, is the same."""
        ys = [v for _, _, y in self.subsets.values() for v in y]
        if len(set(ys)) < 2:
            raise DataError(f"every gold score of {self.name} is {ys[0] if ys else 'missing'}: a Spearman correlation "
                            "is undefined; give pairs with different scores")
        if len(self.subsets) > 1:
            for name, (_, _, y) in self.subsets.items():
                if len(set(y)) < 2:
                    raise DataError(f"subset {name!r} of {self.name} has {len(y)} pair(s), all scored {y[0]}: its "
                                    "Spearman correlation is undefined; group the pairs by another column "
                                    "(subset_column=) or by none")
        return self

    def sentences(self) -> list[str]:
        out: list[str] = []
        for a, b, _ in self.subsets.values():
            out += a + b
        return out


def data_fingerprint(data: STSData) -> str:
    """A short hash of the pairs actually scored (subsets, sentences, gold scores): a score
    measured on one copy of a data set is never returned for another (the score cache's and a
    fine-tuning checkpoint's record of the dev set)."""
    h = hashlib.sha1()
    for name, (a, b, y) in data.subsets.items():
        h.update(json.dumps([name, a, b, [float(v) for v in y]], ensure_ascii=False).encode("utf-8"))
    return h.hexdigest()[:12]


def _read_lines(path: Path) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f]
    except FileNotFoundError:
        raise DataError(f"missing data file {path}; check data_dir=") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path}: {exc}") from None


def _score(text: str, path, line: int, what: str) -> float:
    """A gold score: a finite number, or a one-line error naming file and line."""
    try:
        score = float(text)
    except ValueError:
        raise DataError(f"{path}:{line}: {what} {text!r} is not a number") from None
    if not math.isfinite(score):
        raise DataError(f"{path}:{line}: {what} {text!r} is not a finite number; fix or remove the row")
    return score


def _tokens(s: str) -> str:
    return " ".join(s.split())


def read_sts_year(task: str, data_dir=None) -> STSData:
    """STS12–16: ``STS.input.<subset>.txt`` + ``STS.gs.<subset>.txt``; unscored pairs skipped.

    :param task: ``sts12`` ... ``sts16``.
    :param data_dir: the data folder (None: the default location).
    :returns: the task's pairs, one subset per input file.
    :raises promptsearch.errors.DataError: for a missing folder or file, files that do not align, a malformed
        line or score, or no scored pair."""
    folder = sts_dir(data_dir) / STS_YEARS[task]
    if not folder.is_dir():
        raise DataError(f"missing {folder}; check data_dir=")
    data = STSData(task)
    for inp in sorted(folder.glob("STS.input.*.txt")):
        subset = inp.name[len("STS.input.") : -len(".txt")]
        gs = folder / f"STS.gs.{subset}.txt"
        lines, golds = _read_lines(inp), _read_lines(gs)
        if len(lines) != len(golds):
            raise DataError(f"{inp} has {len(lines)} lines but {gs.name} has {len(golds)}; the files must align line "
                            "by line")
        a, b, y = [], [], []
        for i, (line, g) in enumerate(zip(lines, golds), 1):
            if not g.strip():
                continue  # unscored pair (STS15/16), as SentEval does
            parts = line.split("\t")
            if len(parts) < 2:
                raise DataError(f"{inp}:{i}: expected 'sentence1<TAB>sentence2', found {len(parts)} field(s)")
            score = _score(g, gs, i, "gold score")
            a.append(_tokens(parts[0]))
            b.append(_tokens(parts[1]))
            y.append(score)
        data.subsets[subset] = (a, b, y)
    if not data.subsets:
        raise DataError(f"{folder} holds no STS.input.*.txt files; check data_dir=")
    if not data.n_pairs:
        raise DataError(f"{folder} holds no scored sentence pairs; check its STS.gs.*.txt files")
    return data


def _read_pair_table(path: Path, columns: tuple[int, int, int], header: bool, what: str) -> tuple[list, list, list]:
    """Tab-separated pairs with a gold score: ``columns`` = (sentence1, sentence2, score) indices."""
    ia, ib, iy = columns
    need = max(columns) + 1
    a, b, y = [], [], []
    for i, line in enumerate(_read_lines(path), 1):
        line = line.strip()
        if (header and i == 1) or not line:
            continue
        parts = line.split("\t")
        if len(parts) < need:
            raise DataError(f"{path}:{i}: expected {what}, found {len(parts)} field(s)")
        score = _score(parts[iy], path, i, "score")
        a.append(_tokens(parts[ia]))
        b.append(_tokens(parts[ib]))
        y.append(score)
    if not y:
        raise DataError(f"{path} holds no sentence pairs; give a file with {what} a line")
    return a, b, y


def read_stsb(split: str = "test", data_dir=None, original: bool = False) -> STSData:
    """STS-B in SentEval's tokenized, lowercased form, or (``original``) the cased, untokenized
    upstream files in ``STSBenchmark/original/`` (lines may carry trailing attribution fields).

    :param split: ``train``, ``dev`` or ``test``.
    :param data_dir: the data folder (None: the default location).
    :param original: read the cased, untokenized files.
    :returns: the split's pairs (named ``stsb``, ``stsb-dev``, ``stsb-original-dev`` ...).
    :raises promptsearch.errors.DataError: for a missing file, a malformed line or score, or no pair."""
    folder = sts_dir(data_dir) / "STSBenchmark" / ("original" if original else "")
    rows = _read_pair_table(folder / f"sts-{split}.csv", (5, 6, 4), header=False, what="7 tab-separated fields")
    name = ("stsb-original-" + split) if original else ("stsb" if split == "test" else f"stsb-{split}")
    return STSData(name, {split: rows})


SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def read_sick(split: str = "test", data_dir=None) -> STSData:
    """SICK-R relatedness pairs (``SICK/SICK_train.txt``, ``SICK_trial.txt``, ``SICK_test_annotated.txt``).

    :param split: ``train``, ``dev`` (the trial file) or ``test``.
    :param data_dir: the data folder (None: the default location).
    :returns: the split's pairs (named ``sickr``, ``sick-trial`` or ``sick-train``).
    :raises promptsearch.errors.DataError: for a missing file, a malformed line or score, or no pair."""
    path = sts_dir(data_dir) / "SICK" / SICK_FILES[split]
    rows = _read_pair_table(path, (1, 2, 3), header=True, what="pair_ID, sentence_A, sentence_B, relatedness_score")
    return STSData({"test": "sickr", "dev": "sick-trial", "train": "sick-train"}[split], {split: rows})
