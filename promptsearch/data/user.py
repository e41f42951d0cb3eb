"""Your own data through 🤗 ``datasets``: sentence-pair sets to score on, text corpora to train on.

A data set is named by one string:

* a local file: ``.csv``, ``.tsv``, ``.json``, ``.jsonl``, ``.parquet``;
* a local folder: a ``Dataset.save_to_disk`` output, or a folder of data files;
* a Hugging Face Hub id with optional config and split, ``owner/name[:config][@split]``
  (``sentence-transformers/stsb@validation``, ``PhilipMay/stsb_multi_mt:de@dev``), used where
  the hub is reachable; a folder at that path is read instead (``datasets`` does the same).

Pair columns default to the first of ``PAIR_COLUMNS`` the data has; ``columns=(a, b, score)``
overrides. Scores may be on any scale (Spearman ignores it). ``subset_column`` groups the pairs
into subsets for SentEval's "all" aggregation.
"""

from __future__ import annotations

import contextlib
import csv
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from ..errors import DataError, first_line
from ..paths import hub_offline_if_unreachable
from .sts import STSData, _tokens

PAIR_COLUMNS = [("sentence1", "sentence2", "score"), ("sentence_A", "sentence_B", "relatedness_score"),
                ("text1", "text2", "label"), ("s1", "s2", "similarity"), ("sentence1", "sentence2", "label"),
                ("sentence1", "sentence2", "similarity_score")]
TEXT_COLUMNS = ("text", "sentence", "sent0", "sentence1")
FILE_BUILDERS: dict[str, tuple[str, dict]] = {".csv": ("csv", {}), ".tsv": ("csv", {"delimiter": "\t"}),
                                              ".json": ("json", {}), ".jsonl": ("json", {}),
                                              ".parquet": ("parquet", {}), ".txt": ("text", {})}
MIN_PAIRS = 10
_QUOTED_FIELD = re.compile(r'^"(?:[^"]|"")*"$')


def tsv_quoting(path: Path) -> int:
    """How a .tsv file quotes (a ``csv`` module constant). A plain TSV has no quoting: a tab never
    occurs in a sentence, a quote character often does, and reading it with CSV quoting strips
    quotes and merges rows. pandas' ``to_csv(sep="\t")`` does quote, CSV-style: every field that
    holds a quote is wrapped in quotes with the inner ones doubled. So: CSV quoting if every field
    holding a quote is such a field (and one is), no quoting otherwise."""
    quoted = False
    with open(path, encoding="utf-8-sig", errors="replace") as f:
        for line in f:
            if '"' not in line:
                continue
            for field in line.rstrip("\r\n").split("\t"):
                if '"' in field:
                    if not _QUOTED_FIELD.match(field):
                        return csv.QUOTE_NONE
                    quoted = True
    return csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE
_HUB = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+(:[\w.-]+)?(@[\w.\[\]:%+-]+)?$")


@dataclass(frozen=True)
class PairFormat:
    """How to read pairs from a user data set (built-in tasks ignore it).

    :param columns: the (sentence1, sentence2, score) column names (None: found by their usual names).
    :param subset_column: a column whose values group the pairs into subsets, each scored apart (None: one set)."""

    columns: tuple[str, str, str] | None = None
    subset_column: str | None = None

    @classmethod
    def parse(cls, columns: str | None = None, subset_column: str | None = None) -> "PairFormat":
        """The format as a user writes it.

        :param columns: ``"sentence1,sentence2,score"`` (three different names), or None.
        :param subset_column: a column that groups the pairs, or None.
        :returns: the format.
        :raises promptsearch.errors.DataError: for other than three different columns, or a subset column that is
            one of them."""
        cols = None
        if columns:
            cols = tuple(c.strip() for c in columns.split(","))
            if len(cols) != 3 or not all(cols):
                raise DataError(f"columns={columns!r}: give three names, sentence1,sentence2,score")
            twice = next((c for c in cols if cols.count(c) > 1), None)
            if twice:
                raise DataError(f"columns={columns!r} names {twice!r} twice; give three different columns, "
                                "sentence1,sentence2,score")
        if subset_column and subset_column in (cols or ()):
            raise DataError(f"subset_column={subset_column!r} is one of the pair columns; give a column that groups "
                            "the pairs (a genre, a source)")
        # three names (checked above)
        return cls(cast("tuple[str, str, str] | None", cols), subset_column or None)


def _split_spec(spec: str) -> tuple[str, str | None, str | None]:
    """``name[:config][@split]`` → (name, config, split); a path that exists is taken whole."""
    name, split = spec, None
    if "@" in spec and not Path(spec).exists():
        name, split = spec.rsplit("@", 1)
    config = None
    if ":" in name and not Path(name).exists() and not re.match(r"^[A-Za-z]:[\\/]", name):
        name, config = name.split(":", 1)
    return name, config, split or None


def is_user_dataset(spec: str) -> bool:
    """A file or folder that exists, or something shaped like a hub id."""
    name, _, _ = _split_spec(spec)
    return Path(name).exists() or bool(_HUB.match(spec))


@contextlib.contextmanager
def _quiet_datasets():
    import datasets  # lazy: start-up time

    level = datasets.logging.get_verbosity()
    bars = datasets.utils.logging.is_progress_bar_enabled()
    datasets.logging.set_verbosity(datasets.logging.CRITICAL)  # builders log a failed read at ERROR, then raise
    datasets.utils.logging.disable_progress_bar()
    try:
        yield
    finally:
        datasets.logging.set_verbosity(level)
        if bars:
            datasets.utils.logging.enable_progress_bar()


def load_table(spec: str, text_file_builder: str | None = None):
    """The ``datasets.Dataset`` a spec names (one split). Memory-mapped Arrow, never a Python list."""
    import datasets  # lazy: start-up time

    name, config, split = _split_spec(spec)
    p = Path(name).expanduser()
    with _quiet_datasets():
        try:
            if p.is_file():
                builder, kw = FILE_BUILDERS.get(p.suffix.lower(), (None, {}))
                if p.suffix.lower() == ".tsv":
                    kw = {**kw, "quoting": tsv_quoting(p)}
                if builder is None:
                    raise DataError(f"{p}: unknown file type {p.suffix!r}; give .csv, .tsv, .json, .jsonl, .parquet "
                                    "or .txt, a dataset folder, or a hub id")
                if builder == "text" and text_file_builder:
                    builder = text_file_builder
                if p.stat().st_size == 0:
                    raise DataError(f"{p} is empty; give a file with data rows")
                if builder == "json" and (records := _json_records(p)) is not None:
                    return datasets.Dataset.from_list(records)
                return datasets.load_dataset(builder, data_files=str(p), split="train", **kw)
            if p.is_dir() and any((p / f).exists() for f in ("dataset_info.json", "state.json", "dataset_dict.json")):
                ds = datasets.load_from_disk(str(p))
            else:
                if not p.is_dir():
                    hub_offline_if_unreachable()  # fail at once, not after ~30 s of retries
                ds = datasets.load_dataset(name if not p.is_dir() else str(p), config)
        except DataError:
            raise
        except (FileNotFoundError, ConnectionError, OSError) as exc:
            if p.exists():
                raise DataError(f"cannot read {p}: {first_line(exc, 160)}") from None
            raise DataError(f"no file or folder {name!r} here, and cannot load it from the Hugging Face Hub "
                            f"({first_line(exc, 160)}); check the path, or where the hub is not reachable, download it "
                            "elsewhere and pass the local folder or file") from None
        except Exception as exc:  # datasets raises many kinds (DatasetNotFoundError, parser errors, ...)
            if p.is_file() and "corresponds to no data" in str(exc):
                raise DataError(f"{p} holds no data rows (a header only?); give a file with data rows") from None
            if p.is_file():
                raise DataError(diagnose_file(p, exc)) from None
            where = str(p) if p.exists() else repr(name)
            raise DataError(f"cannot load {where}: {type(exc).__name__}: {first_line(exc, 160)}") from None
    return _pick_split(ds, spec, split)


def _json_records(p: Path) -> list[dict] | None:
    """A ``.json`` file holding one list of records, read with Python's exact float parser (the
    ``json`` builder reads such a list through pandas, whose fast parser rounds floats to about 15
    significant digits and so creates ties a ``.jsonl`` of the same records does not have); None
    for anything else (JSON Lines, an object of columns), which the builder reads."""
    with open(p, "rb") as f:
        head = f.read(64).lstrip()
    if not head.startswith(b"["):
        return None
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None  # the builder's read says what is wrong
    return data if isinstance(data, list) and data and all(isinstance(r, dict) for r in data) else None


def _root_cause(exc: BaseException) -> BaseException:
    """The error under ``datasets``' wrappers (DatasetGenerationError says only "An error occurred")."""
    seen = set()
    while (under := exc.__cause__ or exc.__context__) is not None and id(exc) not in seen:
        seen.add(id(exc))
        exc = under
    return exc


def _utf8_problem(p: Path) -> str | None:
    """Why a text file is not UTF-8 (a UTF-16/32 byte order mark, or the first line with a bad byte)."""
    with open(p, "rb") as f:
        head = f.read(4)
    if head[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):
        return f"{p} is UTF-32 encoded; save it as UTF-8"
    if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return f"{p} is UTF-16 encoded; save it as UTF-8"
    with open(p, "rb") as f:
        for i, line in enumerate(f, 1):
            try:
                line.decode("utf-8")
            except UnicodeDecodeError as exc:
                return f"{p}:{i}: not valid UTF-8 (byte {line[exc.start]:#04x}); save the file as UTF-8"
    return None


def _open_quote_line(p: Path) -> int | None:
    """The line where a CSV quoted field opens and never closes (quotes stay open to the end of the
    file): count quote characters line by line; a doubled quote inside a field counts twice."""
    opened, parity = None, 0
    with open(p, encoding="utf-8-sig") as f:
        for i, line in enumerate(f, 1):
            n = line.count('"')
            if n % 2:
                parity ^= 1
                opened = i if parity else None
    return opened if parity else None


def _json_problem(p: Path) -> str | None:
    """Where a .json / .jsonl file stops being JSON: line by line for JSON Lines (a .jsonl, or a .json
    whose first line is a whole JSON value), else the position in the one document."""
    text = p.read_text(encoding="utf-8-sig")
    lines = text.splitlines()
    first = next((x for x in lines if x.strip()), "")
    try:
        json.loads(first)
        per_line = True
    except json.JSONDecodeError:
        per_line = p.suffix.lower() == ".jsonl"
    if per_line:
        for i, line in enumerate(lines, 1):
            if line.strip():
                try:
                    json.loads(line)
                except json.JSONDecodeError as exc:
                    return f"{p}:{i}: not valid JSON ({json_error(exc)}); fix that line"
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f"{p}:{exc.lineno}: not valid JSON ({json_error(exc)}); fix the file there"
    return None


def _other_separator(p: Path) -> str | None:
    """A .csv whose first line is separated by tabs or semicolons, not commas, named as such (a user's trial: a
    tab-separated file, STS-B's own among them, was said to open a quote it never closes, or pandas' 'Expected 1
    fields' came through), with the fix; None otherwise."""
    try:
        with open(p, encoding="utf-8-sig", errors="replace") as f:
            first = f.readline()
    except OSError:
        return None
    for sep, name, fix in (("\t", "tab", "name it .tsv (STS-B's own files are built in: stsb-dev, stsb-test)"),
                           (";", "semicolon", "separate its columns with commas, or with tabs in a .tsv")):
        if first.count(sep) >= 1 and first.count(sep) > first.count(","):
            return (f"{p} looks {name}-separated (its first line has {first.count(sep)} {name}s, "
                    f"{first.count(',')} commas); a .csv is read with commas: {fix}")
    return None


def diagnose_file(p: Path, exc: BaseException) -> str:
    """One line that says what is wrong with a data file ``datasets`` could not read, and the fix."""
    suffix = p.suffix.lower()
    cause = _root_cause(exc)
    if suffix == ".parquet":
        return (f"{p} is not a readable parquet file ({first_line(cause, 120)}); write it again, "
                "e.g. with pandas DataFrame.to_parquet")
    if suffix in (".csv", ".tsv", ".json", ".jsonl", ".txt"):
        bad = _utf8_problem(p)
        if bad:
            return bad
    if suffix == ".csv":
        if other := _other_separator(p):
            return other
        line = _open_quote_line(p)
        if line:
            return (f"{p}:{line}: a quoted field opens here and never closes; balance its quote characters "
                    "(\"\" for a quote inside one)")
    if suffix in (".json", ".jsonl"):
        bad = _json_problem(p)
        if bad:
            return bad
    return f"cannot read {p}: {type(cause).__name__}: {first_line(cause, 160)}"


def _pick_split(ds, spec: str, split: str | None):
    import datasets  # lazy: start-up time

    if isinstance(ds, datasets.DatasetDict):
        splits = list(ds)
        if split is None:
            if len(splits) == 1:
                return ds[splits[0]]
            raise DataError(f"{spec} has the splits {', '.join(splits)}; name one, e.g. {spec}@{splits[0]}")
        if split not in ds:
            raise DataError(f"{spec} has no split {split!r}; its splits are {', '.join(splits)}")
        return ds[split]
    if split is not None and split != getattr(ds, "split", split):
        raise DataError(f"{spec} is a single data set (split {ds.split!r}); drop @{split}")
    return ds


def _row_ref(spec: str, i: int) -> str:
    """Where row ``i`` (0-based) sits: a line number for csv/tsv (after the header), a row otherwise."""
    suffix = Path(_split_spec(spec)[0]).suffix.lower()
    return f"{spec}:{i + 2}" if suffix in (".csv", ".tsv") else f"{spec}: row {i + 1}"


def pair_columns(names: list[str], spec: str, fmt: PairFormat) -> tuple[str, str, str]:
    if fmt.columns:
        missing = [c for c in fmt.columns if c not in names]
        if missing:
            raise DataError(f"{spec} has no column {missing[0]!r}; its columns are {', '.join(names)} "
                            "(columns=a,b,score)")
        return fmt.columns
    for cols in PAIR_COLUMNS:
        if all(c in names for c in cols):
            return cols
    file = Path(_split_spec(spec)[0])
    if file.suffix.lower() == ".csv" and file.is_file() and (other := _other_separator(file)):
        raise DataError(other)  # its header read as one or two columns: the separator is the fix, not the names
    raise DataError(f"{spec}: no sentence-pair columns among {', '.join(names)}; name them with columns="
                    "sentence1,sentence2,score")


def _check_column_types(ds, spec: str, text_cols, score_col: str, subset_col: str | None) -> None:
    """Sentences must be text and scores numbers (or text holding numbers); a column of lists,
    say, would otherwise be scored as the text of the list."""
    import datasets  # lazy: start-up time

    def kind(col):
        f = ds.features[col]
        return f.dtype if isinstance(f, datasets.Value) else type(f).__name__

    for col in text_cols:
        if kind(col) not in ("string", "large_string"):
            raise DataError(f"column {col!r} of {spec} holds {kind(col)} values, not text; give a column of sentences "
                            "(columns=a,b,score)")
    k = kind(score_col)
    if not (k in ("string", "large_string", "bool") or k.startswith(("int", "uint", "float", "double", "decimal"))):
        raise DataError(f"column {score_col!r} of {spec} holds {k} values, not scores; give a column of numbers "
                        "(columns=a,b,score)")
    if subset_col and not isinstance(ds.features[subset_col], datasets.Value):
        raise DataError(f"subset_column={subset_col!r} of {spec} holds {kind(subset_col)} values; give a column of "
                        "names or numbers")


def load_pairs(spec: str, fmt: PairFormat | None = None) -> STSData:
    """Labelled sentence pairs from a user data set, as ``STSData`` (scored like the built-ins).

    A repeated pair is kept, with a warning on stderr.

    :param spec: a ``.csv``/``.tsv``/``.json``/``.jsonl``/``.parquet`` file, a saved dataset folder, or a hub id
        (``owner/name[:config][@split]``).
    :param fmt: the columns and subset column (None: found by name).
    :returns: the pairs, grouped by subset.
    :raises promptsearch.errors.DataError: for data that cannot be read, missing or non-numeric scores, empty
        sentences, too few pairs, or gold scores that leave a Spearman correlation undefined."""
    fmt = fmt or PairFormat()
    ds = load_table(spec)
    names = list(ds.column_names)
    a_col, b_col, y_col = pair_columns(names, spec, fmt)
    if fmt.subset_column in (a_col, b_col, y_col):
        raise DataError(f"subset_column={fmt.subset_column!r} is one of the pair columns of {spec}; give a column that "
                        "groups the pairs (a genre, a source)")
    if fmt.subset_column and fmt.subset_column not in names:
        raise DataError(f"{spec} has no column {fmt.subset_column!r} for subset_column=; its columns are "
                        f"{', '.join(names)}")
    _check_column_types(ds, spec, (a_col, b_col), y_col, fmt.subset_column)
    cols = ds.select_columns([c for c in (a_col, b_col, y_col, fmt.subset_column) if c])
    a, b, raw = cols[a_col], cols[b_col], cols[y_col]
    subsets_of = cols[fmt.subset_column] if fmt.subset_column else None
    bad: list[int] = []
    empty: list[int] = []
    subsets: dict[str, tuple[list, list, list]] = {}
    for i, (sa, sb, y) in enumerate(zip(a, b, raw)):
        try:
            score = float(y)
        except (TypeError, ValueError):
            score = math.nan
        if not math.isfinite(score) or sa is None or sb is None:
            bad.append(i)
            continue
        if not str(sa).strip() or not str(sb).strip():
            empty.append(i)
            continue
        key = str(subsets_of[i]) if subsets_of is not None else "all"
        sub = subsets.setdefault(key, ([], [], []))
        sub[0].append(_tokens(str(sa)))
        sub[1].append(_tokens(str(sb)))
        sub[2].append(score)
    if bad:
        raise DataError(f"{len(bad)} row(s) of {spec} have a missing or non-numeric {y_col!r} or sentence, the first "
                        f"at {_row_ref(spec, bad[0])}; fix or remove them")
    if empty:
        raise DataError(f"{len(empty)} row(s) of {spec} have an empty sentence, the first at "
                        f"{_row_ref(spec, empty[0])}; fix or remove them")
    data = STSData(spec, subsets)
    if data.n_pairs == 0:
        raise DataError(f"{spec} holds no sentence pairs; give a data set with rows of {a_col},{b_col},{y_col}")
    if data.n_pairs < MIN_PAIRS:
        raise DataError(f"{spec} holds {data.n_pairs} scored pair(s); a Spearman correlation needs at least "
                        f"{MIN_PAIRS}")
    data.check()  # a Spearman correlation is defined on the whole set and on every subset
    seen: set = set()
    dups = 0
    for sa, sb, _ in subsets.values():
        for pair in zip(sa, sb):
            dups += pair in seen
            seen.add(pair)
    if dups:
        print(f"warning: {spec} repeats {dups} sentence pair(s); they are kept and scored as given", file=sys.stderr)
    return data


def load_texts(spec: str, text_column: str | None = None):
    """A training corpus: a ``.txt`` (one sentence a line), a table file or dataset with a text
    column (``text_column`` or the first of ``TEXT_COLUMNS``), or a hub id. Returned as a
    memory-mapped ``datasets.Dataset`` with one column ``text`` and no blank rows.

    :param spec: a file, a saved dataset folder or a hub id.
    :param text_column: the column to read (None: the first of ``TEXT_COLUMNS`` present).
    :returns: a ``datasets.Dataset`` with the column ``text``.
    :raises promptsearch.errors.DataError: for data that cannot be read, no text column, or no sentence."""
    ds = load_table(spec)
    names = list(ds.column_names)
    col = text_column or next((c for c in TEXT_COLUMNS if c in names), None)
    if col is None or col not in names:
        raise DataError(f"{spec} has no text column {text_column or ''!r}; its columns are {', '.join(names)} "
                        "(text_column=NAME)".replace(" ''", ""))
    ds = ds.select_columns([col])
    if col != "text":
        ds = ds.rename_column(col, "text")
    with _quiet_datasets():
        ds = ds.filter(lambda batch: [bool(t and t.strip()) for t in batch["text"]], batched=True, batch_size=10_000)
    if len(ds) == 0:
        raise DataError(f"{spec} holds no sentences; give a file with one sentence a line")
    return ds


def load_triplets(spec: str):
    """NLI triplets (``sent0,sent1,hard_neg``, SimCSE's ``nli_for_simcse.csv`` layout) as a Dataset.

    :param spec: a file, a saved dataset folder or a hub id.
    :returns: a ``datasets.Dataset`` with the columns ``sent0``, ``sent1``, ``hard_neg``.
    :raises promptsearch.errors.DataError: for data that cannot be read, a missing column, or no row."""
    ds = load_table(spec)
    need = ["sent0", "sent1", "hard_neg"]
    missing = [c for c in need if c not in ds.column_names]
    if missing:
        raise DataError(f"{spec} has no column {missing[0]!r}; NLI triplets need sent0,sent1,hard_neg "
                        f"(its columns are {', '.join(ds.column_names)})")
    ds = ds.select_columns(need)
    if len(ds) == 0:
        raise DataError(f"{spec} holds no triplets")
    return ds


def json_error(exc: json.JSONDecodeError) -> str:
    """What a JSON parser said, and where on the line: 'Invalid control character at column 31' (the message alone
    can end in 'at', which its text fills with the place)."""
    return f"{exc.msg.removesuffix(' at')} at column {exc.colno}"
