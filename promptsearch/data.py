"""Data readers: SentEval-layout STS12–16, STS-B, SICK; sentence corpora.

The data directory comes from ``--data-dir`` or ``PROMPTSEARCH_DATA_DIR``; it may point at
the ``sts/`` folder or at its parent (which also holds ``train/``). Without either, a
``../shared/data`` or ``./data`` beside the working directory is used if present.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from .errors import DataError

ENV_VAR = "PROMPTSEARCH_DATA_DIR"
STS_YEARS = {"sts12": "STS12-en-test", "sts13": "STS13-en-test", "sts14": "STS14-en-test",
             "sts15": "STS15-en-test", "sts16": "STS16-en-test"}
TASKS = ["sts12", "sts13", "sts14", "sts15", "sts16", "stsb", "sickr"]
TASK_NAMES = {"sts12": "STS12", "sts13": "STS13", "sts14": "STS14", "sts15": "STS15", "sts16": "STS16",
              "stsb": "STS-B", "sickr": "SICK-R", "stsb-dev": "STS-B dev", "stsb-train": "STS-B train",
              "sickr-dev": "SICK-R dev"}
TASK_GROUPS = {"sts-all": TASKS}


@dataclass
class STSData:
    """Pairs of one task, grouped by subset (one subset for STS-B and SICK)."""

    name: str
    subsets: dict[str, tuple[list[str], list[str], list[float]]] = field(default_factory=dict)

    @property
    def n_pairs(self) -> int:
        return sum(len(v[2]) for v in self.subsets.values())

    def sentences(self) -> list[str]:
        out: list[str] = []
        for a, b, _ in self.subsets.values():
            out += a + b
        return out


def _candidates() -> list[Path]:
    here = Path.cwd()
    return [here / "../shared/data", here / "data", here / "../data"]


def data_dirs(data_dir: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(sts folder, train folder) from the flag, the env var or the defaults.

    The given folder may be the ``sts/`` folder itself or its parent holding ``sts/`` and
    ``train/``; ``train/`` is looked for beside ``sts/``.
    """
    given = data_dir or os.environ.get(ENV_VAR)
    if given:
        p = Path(given).expanduser()
        src = "--data-dir" if data_dir else ENV_VAR
        if not p.is_dir():
            raise DataError(f"data directory {p} ({src}) does not exist; point it at the STS data (e.g. ../shared/data/sts)")
        if (p / "sts").is_dir():
            return p / "sts", p / "train"
        if (p / "STSBenchmark").is_dir() or any((p / d).is_dir() for d in STS_YEARS.values()):
            return p, p.parent / "train"
        raise DataError(f"data directory {p} ({src}) holds no STSBenchmark/ or sts/ folder; point it at the SentEval-layout STS data")
    for c in _candidates():
        if (c / "sts" / "STSBenchmark").is_dir():
            return (c / "sts").resolve(), (c / "train").resolve()
    raise DataError(f"no data directory: pass --data-dir or set {ENV_VAR} (e.g. ../shared/data/sts)")


def sts_dir(data_dir=None) -> Path:
    return data_dirs(data_dir)[0]


def train_dir(data_dir=None) -> Path:
    return data_dirs(data_dir)[1]


def _read_lines(path: Path) -> list[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return [line.rstrip("\r\n") for line in f]
    except FileNotFoundError:
        raise DataError(f"missing data file {path}; check --data-dir") from None
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
    """STS12–16: ``STS.input.<subset>.txt`` + ``STS.gs.<subset>.txt``; unscored pairs skipped."""
    folder = sts_dir(data_dir) / STS_YEARS[task]
    if not folder.is_dir():
        raise DataError(f"missing {folder}; check --data-dir")
    data = STSData(task)
    for inp in sorted(folder.glob("STS.input.*.txt")):
        subset = inp.name[len("STS.input.") : -len(".txt")]
        gs = folder / f"STS.gs.{subset}.txt"
        lines, golds = _read_lines(inp), _read_lines(gs)
        if len(lines) != len(golds):
            raise DataError(f"{inp} has {len(lines)} lines but {gs.name} has {len(golds)}; the files must align line by line")
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
        raise DataError(f"{folder} holds no STS.input.*.txt files; check --data-dir")
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


def read_stsb(split: str = "test", data_dir=None) -> STSData:
    path = sts_dir(data_dir) / "STSBenchmark" / f"sts-{split}.csv"
    rows = _read_pair_table(path, (5, 6, 4), header=False, what="7 tab-separated fields")
    return STSData("stsb" if split == "test" else f"stsb-{split}", {split: rows})


SICK_FILES = {"train": "SICK_train.txt", "dev": "SICK_trial.txt", "test": "SICK_test_annotated.txt"}


def read_sick(split: str = "test", data_dir=None) -> STSData:
    path = sts_dir(data_dir) / "SICK" / SICK_FILES[split]
    rows = _read_pair_table(path, (1, 2, 3), header=True, what="pair_ID, sentence_A, sentence_B, relatedness_score")
    return STSData("sickr" if split == "test" else f"sickr-{split}", {split: rows})


def expand_tasks(spec: str | list[str]) -> list[str]:
    """``"sts-all"`` → the 7 tasks; ``"stsb-dev,sickr"`` → both; unknown names → DataError."""
    names = spec.split(",") if isinstance(spec, str) else list(spec)
    out: list[str] = []
    for n in (x.strip().lower() for x in names if x.strip()):
        group = TASK_GROUPS.get(n, [n])
        for t in group:
            if t not in TASK_NAMES:
                raise DataError(f"unknown task {n!r}; choose from sts-all, {', '.join(TASK_NAMES)}")
            if t not in out:
                out.append(t)
    if not out:
        raise DataError("no task given; use e.g. --tasks stsb-dev or --tasks sts-all")
    return out


def load_task(task: str, data_dir=None) -> STSData:
    if task in STS_YEARS:
        return read_sts_year(task, data_dir)
    if task.startswith("stsb"):
        return read_stsb(task.split("-", 1)[1] if "-" in task else "test", data_dir)
    if task.startswith("sickr"):
        return read_sick(task.split("-", 1)[1] if "-" in task else "test", data_dir)
    raise DataError(f"unknown task {task!r}")


def default_corpus_path(data_dir=None) -> Path:
    return train_dir(data_dir) / "wiki1m_sample.txt"


def load_corpus(path: str | os.PathLike | None = None, data_dir=None, limit: int | None = None) -> list[str]:
    """One sentence a line (blank lines skipped); default: the Wikipedia sample in ``train/``."""
    p = Path(path) if path else default_corpus_path(data_dir)
    lines = [s for s in (_tokens(x) for x in _read_lines(p)) if s]
    if not lines:
        raise DataError(f"{p} holds no sentences; give a file with one sentence a line")
    return lines[:limit] if limit else lines


# ---- WordNet glosses (definition-driven template generation) --------------------------------

WORDNET_DIR = "/usr/share/wordnet"
WORDNET_POS = ("noun", "verb", "adj", "adv")


def read_wordnet(wordnet_dir: str | os.PathLike = WORDNET_DIR, pos: tuple[str, ...] = WORDNET_POS) -> list[tuple[str, str]]:
    """(word, definition) pairs from WordNet 3.0 ``data.<pos>`` files (Debian ``wordnet-base``).

    A synset line is ``offset lex_filenum ss_type w_cnt word lex_id ... | gloss``; the gloss's
    first ``;``-separated part is the definition (the rest are examples). The first lemma of
    each synset is its word; underscores become spaces.
    """
    d = Path(wordnet_dir)
    if not d.is_dir():
        raise DataError(f"no WordNet at {d}; install it (apt-get install wordnet-base) or pass --wordnet-dir")
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

def read_nli_csv(path: str | os.PathLike) -> list[tuple[str, str, str]]:
    """SimCSE's ``nli_for_simcse.csv``: a header ``sent0,sent1,hard_neg`` then one triplet a row."""
    import csv

    p = Path(path)
    try:
        with open(p, encoding="utf-8", newline="") as f:
            rows = list(csv.reader(f))
    except OSError as exc:
        raise DataError(f"cannot read {p}: {exc.strerror or exc}") from None
    if not rows or [c.strip() for c in rows[0][:3]] != ["sent0", "sent1", "hard_neg"]:
        raise DataError(f"{p}: expected a header 'sent0,sent1,hard_neg' (SimCSE's nli_for_simcse.csv format)")
    out = []
    for i, r in enumerate(rows[1:], 2):
        if len(r) < 3:
            raise DataError(f"{p}:{i}: expected 3 columns sent0,sent1,hard_neg, found {len(r)}")
        out.append((_tokens(r[0]), _tokens(r[1]), _tokens(r[2])))
    return out


def snli_triplets(data_dir=None, splits: tuple[str, ...] = ("dev", "test")) -> list[tuple[str, str, str]]:
    """(premise, entailment, contradiction) triplets from SNLI in SentEval layout, grouped by premise."""
    folder = train_dir(data_dir) / "snli"
    groups: dict[str, dict[str, list[str]]] = {}
    for split in splits:
        s1, s2, lab = (_read_lines(folder / f"{n}.{split}") for n in ("s1", "s2", "labels"))
        if not (len(s1) == len(s2) == len(lab)):
            raise DataError(f"{folder}: s1/s2/labels.{split} have different line counts")
        for a, b, l in zip(s1, s2, lab):
            g = groups.setdefault(_tokens(a), {})
            g.setdefault(l.strip(), []).append(_tokens(b))
    out = [(p, g["entailment"][0], g["contradiction"][0]) for p, g in groups.items()
           if g.get("entailment") and g.get("contradiction")]
    if not out:
        raise DataError(f"{folder} gave no (premise, entailment, contradiction) triplets")
    return out


def read_wordnet_texts(wordnet_dir: str | os.PathLike = WORDNET_DIR, pos: tuple[str, ...] = WORDNET_POS) -> list[str]:
    """Every WordNet gloss part as a text: definitions and the quoted usage examples."""
    d = Path(wordnet_dir)
    if not d.is_dir():
        raise DataError(f"no WordNet at {d}; install it (apt-get install wordnet-base) or pass --wordnet-dir")
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
    """Premises and hypotheses of SNLI (SentEval layout), each once."""
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
