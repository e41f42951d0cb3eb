"""Retrieval data: queries, a corpus and relevance judgments (qrels), in the forms users have them.

Three forms, one value (``RetrievalData``):

* **BEIR's layout** (``load_beir``): a folder with ``corpus.jsonl`` (``_id``, ``title``, ``text``;
  the title may be missing or empty), ``queries.jsonl`` (``_id``, ``text``) and ``qrels/<split>.tsv``
  (tab-separated, header ``query-id corpus-id score``), read as beir-cellar/beir's
  ``beir/datasets/data_loader.py`` (``GenericDataLoader.load``) reads it.
* **🤗 datasets in MTEB's layout** (``load_hf``): one dataset (a hub id, or a local folder such
  as ``git clone https://huggingface.co/datasets/mteb/scifact`` gives) with the configs ``corpus``
  and ``queries`` (their first split, whatever its name) and ``default`` holding the qrels of each
  split (``query-id``, ``corpus-id``, ``score``), as mteb's ``HFDataLoader``
  (``mteb/abstasks/AbsTaskRetrieval.py``) reads it. Also read: a folder whose ``corpus``,
  ``queries`` and ``default`` (or ``qrels``) sub-folders are ``save_to_disk`` outputs.
* **Python dicts** as sentence-transformers' ``InformationRetrievalEvaluator`` takes them
  (``from_dicts``): ``queries`` (id → text), ``corpus`` (id → text) and ``relevant_docs``
  (query id → set of corpus ids).

A document is its title and text joined as BEIR's sentence-transformers wrapper joins them
(``beir/retrieval/models/sentence_bert.py``, ``SentenceBERT.encode_corpus``:
``(doc["title"] + " " + doc["text"]).strip()``, or ``doc["text"].strip()`` without a title; MTEB and
sentence-transformers' own Touche-2020 example join the same way).

Relevance is binary, as sentence-transformers' metrics are. A qrel scored 0 (or below) marks a
document judged *not* relevant: BEIR's ``EvaluateRetrieval.evaluate`` hands the qrels to
``pytrec_eval``, where (as in trec_eval, relevance level 1) only a score of 1 or more counts as
relevant. Graded qrels (any score other than 0 and 1) are refused unless ``relevant_from=`` says the
lowest score that counts. A query with no relevant document is left out (sentence-transformers'
evaluator leaves it out too) and counted in ``RetrievalData.dropped_queries``.

**The demo task** (``demo_task``, ``stsb-paraphrase``), built offline from STS-B dev in
SentEval's tokenized, lowercased form (``promptsearch.data.sts.read_stsb``): every pair with a gold
score of 4 or more makes its first sentence a query and its second a relevant document; a first
sentence in several such pairs is one query with all of them. The corpus is every distinct sentence
of STS-B dev (both columns, order of first appearance) that is not a query, so a query can never
retrieve itself; the sentences that are no query's paraphrase are the distractors. A paraphrase that
is itself a query is therefore no document and its judgment is dropped; a query left with none is left
out, and its sentence is in neither set (as a document it would be an unjudged paraphrase of the
query that named it). Ids are ``q0001``, ``d0001`` ... in order of first appearance. STS-B dev gives
259 queries (3 left out that way, one of them a pair of identical sentences), 2,647 documents and
260 relevant pairs.

**The entailment task** (``entailment_task``, ``snli-entailment``), built offline from SNLI dev (SentEval's
tokenized form, ``train/snli``): each premise with at least one entailed hypothesis is a query, those hypotheses its
relevant documents. The corpus is every distinct hypothesis of SNLI dev (entailed, neutral or contradicted, order of
first appearance), so each query's own neutral and contradicted hypotheses are hard distractors: they share its
words but not its meaning. A hypothesis that is also a premise is no document (a query could retrieve itself).
SNLI dev gives 3,070 queries (249 left out: no entailed hypothesis that is a document), 9,662 documents and 3,323
relevant pairs; a search may sample the queries (``--queries``).
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import itertools
import json
import math
import numbers
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path

from ..errors import DataError, first_line
from ..paths import hub_offline_if_unreachable
from .corpora import snli_groups
from .sts import read_stsb
from .user import PairFormat, _quiet_datasets, json_error

DEFAULT_DESCRIPTION = "Given a query, retrieve relevant passages"
DEMO_NAMES = ("demo", "stsb-paraphrase")
ENTAILMENT_NAME = "snli-entailment"
ENTAILMENT_DESCRIPTION = "Given a premise, retrieve a hypothesis that it entails"
DEMO_DESCRIPTION = "Given a sentence, retrieve sentences that paraphrase it"
DEMO_THRESHOLD = 4.0
QRELS_HEADER = ("query-id", "corpus-id", "score")
FORMS = ("give 'demo' (stsb-paraphrase) or 'snli-entailment' (both built in), a BEIR folder "
         "(corpus.jsonl, queries.jsonl, "
         "qrels/<split>.tsv), or a 🤗 dataset folder or hub id in MTEB's layout (configs corpus, queries, default)")
_HUB = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


@dataclass(frozen=True)
class RetrievalData:
    """A retrieval task's data: what to encode on each side and which documents each query should find.

    Every query has at least one relevant document, every relevant id is in ``corpus``, and no text is
    empty: the loaders check it and raise a one-line ``DataError`` otherwise.

    :param name: what the data is called (a folder's name, a hub id, ``stsb-paraphrase``).
    :param queries: query id → text, in the order of the input; only queries with a relevant document.
    :param corpus: corpus id → text (a BEIR title joined to its text), in the order of the input.
    :param relevant: query id → the ids of its relevant documents.
    :param description: one sentence that says what the task is (what ``Instruct: {task}`` prompts fill in).
    :param dropped_queries: queries left out for having no relevant document (for BEIR and 🤗 data, among
        the queries the split's qrels name; queries it never names belong to other splits, uncounted)."""

    name: str
    queries: dict[str, str]
    corpus: dict[str, str]
    relevant: dict[str, frozenset[str]]
    description: str = DEFAULT_DESCRIPTION
    dropped_queries: int = field(default=0, compare=False)

    @property
    def n_relevant(self) -> int:
        """The number of (query, relevant document) pairs."""
        return sum(len(v) for v in self.relevant.values())

    @cached_property
    def duplicate_texts(self) -> int:
        """Documents whose text is an earlier document's (under another id): they tie in every ranking.

        :returns: the count (0: every text is its own)."""
        return len(self.corpus) - len(set(self.corpus.values()))

    def summary(self) -> str:
        """One line: the name and the sizes, and how many queries were left out.

        :returns: e.g. ``stsb-paraphrase: 259 queries, 2,647 documents, 260 relevant pairs (3 queries ...)``."""
        left = (f" ({self.dropped_queries:,} {'query' if self.dropped_queries == 1 else 'queries'} without a relevant "
                "document left out)") if self.dropped_queries else ""
        def n(count: int, word: str) -> str:
            return f"{count:,} {word}{'' if count == 1 else 's'}"

        return (f"{self.name}: {len(self.queries):,} {'query' if len(self.queries) == 1 else 'queries'}, "
                f"{n(len(self.corpus), 'document')}, {n(self.n_relevant, 'relevant pair')}{left}")

    def fingerprint(self) -> str:
        """A hash of the content scored (queries, corpus, judgments, each in order), not of the name or
        description: a score measured on one copy of the data is never returned for another.

        :returns: the first 16 hex digits of a sha256."""
        return self._digest

    def corpus_fingerprint(self) -> str:
        """A hash of the corpus alone (ids and texts, in order): what its encoded vectors depend on, whatever the
        queries (a sample of the queries shares the corpus's stored vectors).

        :returns: the first 16 hex digits of a sha256."""
        return self._corpus_digest

    @cached_property
    def _digest(self) -> str:
        return _hashed(("queries", self.queries.items()), ("corpus", self.corpus.items()),
                       ("relevant", ((q, str(len(self.relevant[q])), *sorted(self.relevant[q])) for q in self.queries)))

    @cached_property
    def _corpus_digest(self) -> str:
        return _hashed(("corpus", self.corpus.items()))


def _hashed(*parts: tuple[str, Iterable[Iterable[str]]]) -> str:
    """The first 16 hex digits of a sha256 over named parts, each a run of string groups, every string with its
    length in front (no two different contents hash the same text), in bounded memory."""
    h = hashlib.sha256()
    for name, groups in parts:
        h.update(f"{name}\n".encode())
        it = (x for group in groups for x in group)
        while chunk := "".join(f"{len(x)}:{x}" for x in itertools.islice(it, 8192)):
            h.update(chunk.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class RetrievalFormat:
    """How to read a retrieval data set's judgments.

    :param relevant_from: the lowest qrel score that counts as relevant (None: scores must be 0 or 1)."""

    relevant_from: float | None = None

    @classmethod
    def parse(cls, relevant_from: str | float | None = None) -> "RetrievalFormat":
        """The format as a user writes it.

        :param relevant_from: a number above 0, or None.
        :returns: the format.
        :raises promptsearch.errors.DataError: for a value that is not a number above 0."""
        return cls(_threshold(relevant_from))


def _threshold(value) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(f"relevant_from={value!r} is not a number; give the lowest qrel score that counts as "
                        "relevant, e.g. relevant_from=1") from None
    if not math.isfinite(number) or number <= 0:
        raise DataError(f"relevant_from={value!r}: give a number above 0 (a score of 0 marks a document judged not "
                        "relevant)")
    return number


# ---- checks shared by every form ------------------------------------------------------------------------------------

def _id(value, where: str, what: str) -> str:
    """An id as text: strings as they are, integers written out (MTEB casts ids to strings too)."""
    if isinstance(value, str) and value:
        return value
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):  # numpy's too (ids from pandas)
        return str(int(value))
    raise DataError(f"{where}: {what} {value!r} is not an id; give a non-empty string or an integer")


_HOW = {"json": "write it as a JSON string", "python": "give it as a str", "hf": "store the column as strings"}


def _text(value, where: str, what: str, form: str = "json") -> str:
    """A text as it is (None: ''); anything else refused, saying how to write it in its ``form``: a JSON string in
    a file (``json``), a ``str`` in Python's dicts (``python``), a column of strings in a 🤗 dataset (``hf``)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        number = isinstance(value, numbers.Number) and not isinstance(value, bool)
        example = (json.dumps(str(value)) if form == "json" else repr(str(value))) if number else ""
        raise DataError(f"{where}: {what} is {type(value).__name__} {value!r}, not text; {_HOW[form]}"
                        + (f" ({example})" if example else ""))
    return value


def _document(title, text, where: str, form: str = "json") -> str:
    """A corpus entry as BEIR's sentence-transformers wrapper joins it: ``f"{title} {text}".strip()``. A null text
    beside a title is refused, as a missing one is (its title alone is not the document; BEIR's join fails on it)."""
    if text is None and isinstance(title, str) and title.strip():
        empty = {"json": 'an empty string ""', "python": "''", "hf": "'' in the column's nulls"}[form]
        raise DataError(f"{where}: its text is null; give every document its text ({empty}, if the title alone is "
                        "the document)")
    joined = f"{_text(title, where, 'the title', form)} {_text(text, where, 'the text', form)}".strip()
    if not joined:
        raise DataError(f"{where}: a document with neither title nor text; give it a text or remove it")
    return joined


def _put(table: dict[str, str], key: str, value: str, where: str, what: str) -> None:
    if key in table:
        raise DataError(f"{where}: {what} id {key!r} appears twice; give every {what} its own id")
    table[key] = value


def _relevant(name: str, queries: dict[str, str], corpus: dict[str, str],
              judged: dict[str, dict[str, float]], relevant_from: float | None,
              qrel_where: dict[tuple[str, str], str]) -> tuple[dict[str, str], dict[str, frozenset[str]], int]:
    """The queries with a relevant document, their relevant ids, and how many judged queries had none.

    ``judged``: query id → corpus id → score (binary judgments come as 1.0). ``qrel_where``: where each
    judgment was read, for the errors."""
    if not corpus:
        raise DataError(f"{name}: the corpus is empty; give at least one document")
    if not queries:
        raise DataError(f"{name}: there are no queries; give at least one query")
    graded = None
    for q, docs in judged.items():
        for d, score in docs.items():
            where = qrel_where.get((q, d), name)
            if q not in queries:
                raise DataError(f"{where}: a qrel names query {q!r}, which is not among the queries; add the query "
                                "or remove its qrels")
            if d not in corpus:
                raise DataError(f"{where}: a qrel names document {d!r}, which is not in the corpus; add the document "
                                "or remove the qrel")
            if graded is None and score not in (0, 1):
                graded = (where, score)
    if graded is not None and relevant_from is None:
        where, score = graded
        what = (f"a negative score ({score:g})" if score < 0 else f"graded relevance (score {score:g})")
        raise DataError(f"{where}: {what}; the metrics count a document as relevant or not: say the lowest score "
                        "that counts with relevant_from=, e.g. relevant_from=1 (lower scores count as not relevant)")
    cut = 1.0 if relevant_from is None else relevant_from
    relevant: dict[str, frozenset[str]] = {}
    dropped = 0
    for q in queries:
        if q not in judged:
            continue
        found = frozenset(d for d, score in judged[q].items() if score >= cut)
        if found:
            relevant[q] = found
        else:
            dropped += 1
    if not relevant:
        why = "judged relevant" if relevant_from is None else f"with a score of {cut:g} or more"
        raise DataError(f"{name}: no query has a document {why}; check the qrels (and relevant_from=)")
    return {q: t for q, t in queries.items() if q in relevant}, relevant, dropped


def _build(name: str, queries: dict[str, str], corpus: dict[str, str], judged: dict[str, dict[str, float]],
           relevant_from: float | None, description: str | None,
           qrel_where: dict[tuple[str, str], str] | None = None) -> RetrievalData:
    kept, relevant, dropped = _relevant(name, queries, corpus, judged, relevant_from, qrel_where or {})
    return RetrievalData(name, kept, corpus, relevant, _description(description), dropped)


def _description(description: str | None) -> str:
    if description is None:
        return DEFAULT_DESCRIPTION
    if not (isinstance(description, str) and description.strip()):
        raise DataError(f"description={description!r}: give one sentence that says what the task is")
    return description.strip()


def _judge(judged: dict[str, dict[str, float]], q: str, d: str, score: float, where: str) -> None:
    """Record one judgment; the same pair twice must say the same (BEIR keeps the last silently)."""
    docs = judged.setdefault(q, {})
    if d in docs and docs[d] != score:
        raise DataError(f"{where}: query {q!r} and document {d!r} are judged twice, {docs[d]:g} and {score:g}; keep "
                        "one")
    docs[d] = score


def _score(value, where: str) -> float:
    try:
        score = float(value)
    except (TypeError, ValueError):
        raise DataError(f"{where}: score {value!r} is not a number") from None
    if not math.isfinite(score):
        raise DataError(f"{where}: score {value!r} is not a finite number; fix or remove the qrel")
    return score


# ---- Python dicts ---------------------------------------------------------------------------------------------------

def from_dicts(queries: Mapping, corpus: Mapping, relevant_docs: Mapping, name: str = "dicts",
               description: str | None = None, relevant_from: float | None = None) -> RetrievalData:
    """Retrieval data from the dicts sentence-transformers' ``InformationRetrievalEvaluator`` takes.

    :param queries: query id → text.
    :param corpus: corpus id → text, or → ``{"title": ..., "text": ...}`` as BEIR's loader gives it (joined
        as BEIR joins them).
    :param relevant_docs: query id → a set (or list) of relevant corpus ids, or → {corpus id: score} as
        BEIR's loader gives qrels (binary unless ``relevant_from`` is given).
    :param name: what to call the data.
    :param description: one sentence saying what the task is (None: ``Given a query, retrieve relevant passages``).
    :param relevant_from: with scored judgments, the lowest score that counts as relevant.
    :returns: the data; queries without a relevant document left out and counted.
    :raises promptsearch.errors.DataError: for empty or malformed dicts, ids that collide, empty texts,
        judgments naming an unknown id, graded scores without ``relevant_from``, or no relevant document."""
    cut = _threshold(relevant_from)
    for arg, value in (("queries", queries), ("corpus", corpus), ("relevant_docs", relevant_docs)):
        if not isinstance(value, Mapping):
            raise DataError(f"{arg}= must be a dict (id → ...), not {type(value).__name__}")
    q_table: dict[str, str] = {}
    for key, text in queries.items():
        qid = _id(key, name, "query")
        if not _text(text, f"{name}: query {qid!r}", "its text", "python").strip():
            raise DataError(f"{name}: query {qid!r} is empty; give it a text or remove it")
        _put(q_table, qid, text, name, "query")
    c_table: dict[str, str] = {}
    for key, doc in corpus.items():
        cid = _id(key, name, "document")
        where = f"{name}: document {cid!r}"
        if isinstance(doc, Mapping):
            if "text" not in doc:  # a misnamed key: its title alone is not the document
                raise DataError(f"{where} has no 'text' key; its keys are {', '.join(map(str, doc)) or 'none'}: give "
                                "each document its text under 'text' (as BEIR's loader gives it: title, text)")
            text = _document(doc.get("title"), doc.get("text"), where, "python")
        else:
            text = _text(doc, where, "its text", "python")
            if not text.strip():
                raise DataError(f"{where} is empty; give it a text or remove it")
        _put(c_table, cid, text, name, "document")
    judged: dict[str, dict[str, float]] = {}
    for key, docs in relevant_docs.items():
        qid = _id(key, name, "query")
        where = f"{name}: relevant_docs[{qid!r}]"
        if isinstance(docs, Mapping):
            pairs = [(_id(d, where, "document"), _score(s, where)) for d, s in docs.items()]
        elif isinstance(docs, (set, frozenset, list, tuple)):
            pairs = [(_id(d, where, "document"), 1.0) for d in docs]
        else:
            raise DataError(f"{where} is {type(docs).__name__}; give a set of corpus ids")
        judged.setdefault(qid, {})
        for d, s in pairs:
            _judge(judged, qid, d, s, where)
    # sentence-transformers' evaluator skips a query missing from relevant_docs: here it is left out and counted
    for qid in q_table:
        judged.setdefault(qid, {})
    return _build(name, q_table, c_table, judged, cut, description)


# ---- BEIR -----------------------------------------------------------------------------------------------------------

def _jsonl(path: Path) -> Iterable[tuple[int, dict]]:
    """(line number, object) of each non-blank line of a JSON Lines file."""
    try:
        f = open(path, encoding="utf-8-sig")  # -sig: a byte-order mark (some Windows editors write one) is skipped
    except FileNotFoundError:
        raise DataError(f"missing {path}{_nearby(path)}; a BEIR folder holds corpus.jsonl, queries.jsonl and "
                        "qrels/<split>.tsv") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {first_line(exc)}") from None
    with f:
        try:
            for i, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:  # without its newline: a parser's column is then on this line (one cut short: at its end)
                    row = json.loads(line.rstrip("\r\n"))
                except json.JSONDecodeError as exc:
                    raise DataError(f"{path}:{i}: not valid JSON ({json_error(exc)}); fix that line") \
                        from None
                if not isinstance(row, dict):
                    raise DataError(f"{path}:{i}: a JSON {type(row).__name__}, not an object with _id and text; write "
                                    'one object a line, e.g. {"_id": "d1", "text": "..."}')
                yield i, row
        except UnicodeDecodeError:
            raise DataError(f"{path} is not valid UTF-8; save it as UTF-8") from None


def _field(row: dict, key: str, where: str):
    if key not in row:
        raise DataError(f"{where}: no {key!r} field; its fields are {', '.join(row) or 'none'}: give every row one "
                        "(BEIR's fields: a document's _id, title, text; a query's _id, text)")
    return row[key]


def _nearby(path: Path) -> str:
    """For a missing file: '; found NAME here' for the nearest name its folder holds (another extension, a typo), or
    for a missing folder the nearest folder beside it ('' when nothing is near)."""
    where = path
    while not where.parent.is_dir() and where.parent != where:  # the first folder that exists on the way
        where = where.parent
    try:
        names = [q.name for q in where.parent.iterdir()]
    except OSError:
        return ""
    stem = [n for n in names if Path(n).stem == Path(where.name).stem and n != where.name]
    near = stem or difflib.get_close_matches(where.name, names, n=1, cutoff=0.7)
    if not near:
        return ""
    found = where.parent / near[0]
    return f"; found {found}{'/' if found.is_dir() else ''} there" + (
        ", but BEIR's qrels are tab-separated .tsv files" if path.suffix == ".tsv" and found.suffix != ".tsv"
        and found.is_file() else "")


_TREC_FIX = ("it reads as a TREC qrels line (query, 0, document, score): write query-id<TAB>corpus-id<TAB>score, "
             "under a header line")


def _is_trec(row: list[str]) -> bool:
    """Whether tab-separated fields are a TREC qrels line (query, 0 or Q0, document, score): BEIR reads three."""
    return len(row) == 4 and row[1].strip().lower() in ("0", "q0") and _is_score(row[3])


def _separator_fix(row: list[str]) -> str:
    """What to do about a qrels line of fewer than three tab-separated fields: its columns are separated otherwise
    (commas, spaces) or it is a TREC qrels line ('' when it is none of these)."""
    text = "\t".join(row)
    words = text.split()
    if len(words) == 4 and words[1].lower() in ("0", "q0"):
        return _TREC_FIX
    if any("," in c for c in row):
        return "separate the columns with tabs, not commas (BEIR's qrels are tab-separated)"
    if any(len(c.split()) > 1 for c in row):  # a field holding several words: spaces between the columns
        return "separate the columns with tabs, not spaces (BEIR's qrels are tab-separated)"
    return ""


_QUERY_COLUMN = {"query-id", "query_id", "queryid", "qid", "query", "q"}
_DOC_COLUMN = {"corpus-id", "corpus_id", "corpusid", "doc-id", "doc_id", "docid", "did", "pid", "doc", "document"}


def _header_fix(row: list[str]) -> str:
    """What is wrong with a qrels file's first line, or '' for a header BEIR reads: any three columns that are not
    a judgement (BEIR skips the first line and reads the columns by position), unless they name the query and
    document columns the other way round."""
    names = tuple(c.strip().lower() for c in row[:3])
    if names == QRELS_HEADER:
        return ""
    found = tuple(c.strip().lower() for c in row if c.strip())
    if found == QRELS_HEADER[:2]:
        return "add the score column (1 for relevant) to the header, and to every row that lacks one"
    if len(row) < 3:
        return _separator_fix(row) or "give the header query-id<TAB>corpus-id<TAB>score"
    if _is_trec(row):  # TREC, tab-separated
        return _TREC_FIX
    if _is_score(row[2]):
        return "add the header line (BEIR skips the first line)"
    if names[0] in _DOC_COLUMN and names[1] in _QUERY_COLUMN:
        return ("the columns are read in BEIR's order, query-id, corpus-id, score (by position): put the query "
                "column first")
    return ""


def _read_qrels(path: Path) -> tuple[dict[str, dict[str, float]], dict[tuple[str, str], str]]:
    """BEIR's qrels TSV: a header line, then ``query-id<TAB>corpus-id<TAB>score`` rows (read by position)."""
    try:
        f = open(path, encoding="utf-8-sig", newline="")  # -sig: a byte-order mark before the header is skipped
    except FileNotFoundError:
        splits = sorted(p.stem for p in path.parent.glob("*.tsv")) if path.parent.is_dir() else []
        hint = (f"; its splits are {', '.join(splits)} (split=)" if splits
                else f"{_nearby(path)}; a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/<split>.tsv")
        raise DataError(f"missing {path}{hint}") from None
    except OSError as exc:
        raise DataError(f"cannot read {path}: {first_line(exc)}") from None
    judged: dict[str, dict[str, float]] = {}
    where_of: dict[tuple[str, str], str] = {}
    with f:
        try:
            # read as BEIR reads it: csv.reader, tab-separated, minimal quoting, the first line a header
            for i, row in enumerate(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_MINIMAL), 1):
                if i == 1:
                    # read as BEIR reads it: the first line skipped, so any header of three columns will do
                    fix = _header_fix(row)
                    if fix:
                        raise DataError(f"{path}:1: expected the header 'query-id<TAB>corpus-id<TAB>score', found "
                                        f"{row[:3]!r}; {fix}")
                    continue
                if not row or not "".join(row).strip():
                    continue
                where = f"{path}:{i}"
                if len(row) < 3:
                    raise DataError(f"{where}: expected query-id, corpus-id and score separated by tabs, found "
                                    f"{len(row)} field(s); " + (_separator_fix(row) or "give each judgement as "
                                                                "query-id<TAB>corpus-id<TAB>score (1: relevant)"))
                if _is_trec(row):  # MS MARCO's numeric ids too: not read as a graded score
                    raise DataError(f"{where}: {_TREC_FIX}")
                q, d = _id(row[0].strip(), where, "query"), _id(row[1].strip(), where, "document")
                _judge(judged, q, d, _score(row[2].strip(), where), where)
                where_of.setdefault((q, d), where)
        except UnicodeDecodeError:
            raise DataError(f"{path} is not valid UTF-8; save it as UTF-8") from None
    if not where_of:
        raise DataError(f"{path} holds no qrels; give rows of query-id, corpus-id, score under the header")
    return judged, where_of


def _is_score(text: str) -> bool:
    """Whether ``text`` reads as a qrels row's score by ``_score``'s rule (the first line is data, not a header)."""
    try:
        _score(text.strip(), "")
    except DataError:
        return False
    return True


def load_beir(folder, split: str = "test", relevant_from: float | None = None,
              description: str | None = None) -> RetrievalData:
    """A BEIR folder: ``corpus.jsonl``, ``queries.jsonl``, ``qrels/<split>.tsv``.

    Only the queries that the split's qrels name are kept (``queries.jsonl`` often holds every split's).

    :param folder: the folder.
    :param split: which ``qrels/<split>.tsv`` to read.
    :param relevant_from: the lowest qrel score that counts as relevant (None: scores must be 0 or 1).
    :param description: one sentence saying what the task is (None: the default).
    :returns: the data, named after the folder (``name@split`` for a split other than test).
    :raises promptsearch.errors.DataError: for a missing file or field, bad JSON, duplicate ids, empty texts,
        qrels naming unknown ids, graded scores without ``relevant_from``, or no relevant document."""
    cut = _threshold(relevant_from)
    root = Path(folder).expanduser()
    if not root.is_dir():
        raise DataError(f"{root} is not a folder; {FORMS}")
    corpus: dict[str, str] = {}
    path = root / "corpus.jsonl"
    for i, row in _jsonl(path):
        where = f"{path}:{i}"
        cid = _id(_field(row, "_id", where), where, "document")
        if "text" not in row:  # a misnamed field (its title alone is not the document), not an empty document
            raise DataError(f"{where}: no 'text' field; its fields are {', '.join(row)}: give every document its "
                            "text under 'text' (BEIR's fields: _id, title, text)")
        _put(corpus, cid, _document(row.get("title"), row.get("text"), where), where, "document")
    if not corpus:  # named by its file, as every other error in the folder is
        raise DataError(f"{path}: the corpus is empty; give at least one document")
    queries: dict[str, str] = {}
    path = root / "queries.jsonl"
    for i, row in _jsonl(path):
        where = f"{path}:{i}"
        qid = _id(_field(row, "_id", where), where, "query")
        text = _text(_field(row, "text", where), where, "the text")
        if not text.strip():
            raise DataError(f"{where}: query {qid!r} is empty; give it a text or remove it")
        _put(queries, qid, text, where, "query")
    if not queries:
        raise DataError(f"{path}: there are no queries; give at least one query")
    judged, where_of = _read_qrels(root / "qrels" / f"{split}.tsv")
    name = root.resolve().name + ("" if split == "test" else f"@{split}")
    return _build(name, queries, corpus, judged, cut, description, where_of)


# ---- 🤗 datasets (MTEB's layout) ------------------------------------------------------------------------------------

def _saved(path: Path) -> bool:
    return any((path / f).exists() for f in ("dataset_dict.json", "state.json", "dataset_info.json"))


_ROW = {"corpus": "document", "queries": "query", "default": "qrel", "qrels": "qrel"}  # what a config's row is


def _hf_part(spec: str, config: str, split: str | None, configs: list[str]):
    """One config's split as a ``datasets.Dataset`` (``split`` None: its first split, as mteb takes it)."""
    import datasets  # lazy: start-up time

    p = Path(spec).expanduser()
    saved = p.is_dir() and _saved(p / config)
    with _quiet_datasets():
        try:
            ds = datasets.load_from_disk(str(p / config)) if saved else \
                datasets.load_dataset(str(p) if p.is_dir() else spec, config)
        except DataError:
            raise
        except Exception as exc:  # datasets raises many kinds (DatasetNotFoundError, ValueError, parser errors ...)
            row = _ROW.get(config, "row")
            if saved and isinstance(exc, IndexError):  # datasets cannot load its own save of no rows
                raise DataError(f"config {config!r} of {spec} holds no rows; give at least one {row}") from None
            if "corresponds to no data" in str(exc):  # datasets' words for a split of no rows
                raise DataError(f"config {config!r} of {spec} has a split with no rows, which datasets cannot load; "
                                f"give each split at least one {row}, or remove the empty one") from None
            raise DataError(f"cannot load config {config!r} of {spec}: {first_line(exc, 160)}") from None
    if isinstance(ds, datasets.DatasetDict):
        names = list(ds)
        if not names:
            raise DataError(f"config {config!r} of {spec} holds no split")
        if split is None:
            return ds[names[0]]
        if split not in ds:
            raise DataError(f"config {config!r} of {spec} has no split {split!r}; its splits are {', '.join(names)} "
                            "(split=)")
        return ds[split]
    if split is not None and getattr(ds, "split", None) not in (None, split):
        raise DataError(f"config {config!r} of {spec} is the split {ds.split!r}, not {split!r} (split=)")
    return ds


def _column(ds, names: tuple[str, ...]) -> str | None:
    return next((c for c in names if c in ds.column_names), None)


_MTEB_COLUMNS = {"corpus": "_id, title, text", "queries": "_id, text", "qrels": "query-id, corpus-id, score"}


def _need(ds, names: tuple[str, ...], spec: str, what: str) -> str:
    col = _column(ds, names)
    if col is None:
        raise DataError(f"the {what} of {spec} {'has' if what == 'corpus' else 'have'} no column {names[0]!r}; "
                        f"{'its' if what == 'corpus' else 'their'} columns are {', '.join(ds.column_names)}: rename "
                        f"the one that holds it to {names[0]!r} (MTEB's layout: {_MTEB_COLUMNS[what]})")
    return col


def _configs(spec: str) -> list[str]:
    """The configs a dataset has: sub-folders saved with ``save_to_disk``, or what ``datasets`` lists."""
    import datasets  # lazy: start-up time

    p = Path(spec).expanduser()
    if p.is_dir():
        saved = [c for c in ("corpus", "queries", "default", "qrels") if _saved(p / c)]
        if saved:
            return saved
    elif not _HUB.match(spec):
        raise DataError(f"{spec!r} is neither a folder nor a hub id (owner/name); {FORMS}")
    else:
        hub_offline_if_unreachable()  # fail at once, not after ~30 s of retries
    with _quiet_datasets():
        try:
            return list(datasets.get_dataset_config_names(str(p) if p.is_dir() else spec))
        except Exception as exc:  # datasets raises many kinds (DatasetNotFoundError, ConnectionError ...)
            if p.is_dir():
                raise DataError(f"cannot load {p} as a 🤗 dataset ({first_line(exc, 160)}); {FORMS}") from None
            raise DataError(f"no folder {spec!r} here, and cannot load it from the Hugging Face Hub "
                            f"({first_line(exc, 160)}); check the path, or where the hub is not reachable, download it "
                            "elsewhere (git clone) and pass the local folder") from None


def load_hf(spec: str, split: str = "test", relevant_from: float | None = None,
            description: str | None = None) -> RetrievalData:
    """A 🤗 dataset in MTEB's layout: configs ``corpus`` (``_id``, optional ``title``, ``text``),
    ``queries`` (``_id``, ``text``) and ``default`` (qrels per split: ``query-id``, ``corpus-id``,
    ``score``). ``id`` is read where ``_id`` is missing; a qrels config named ``qrels`` is read where
    there is no ``default``, and qrels without a ``score`` column count every row relevant.

    :param spec: a hub id (``mteb/scifact``) or a local folder: a hub clone, or ``save_to_disk`` outputs in
        sub-folders ``corpus``, ``queries`` and ``default``.
    :param split: the qrels split.
    :param relevant_from: the lowest qrel score that counts as relevant (None: scores must be 0 or 1).
    :param description: one sentence saying what the task is (None: the default).
    :returns: the data, named after the spec (``spec@split`` for a split other than test).
    :raises promptsearch.errors.DataError: for a dataset that cannot be loaded, a missing config, split or
        column, duplicate ids, empty texts, qrels naming unknown ids, graded scores without ``relevant_from``,
        or no relevant document."""
    cut = _threshold(relevant_from)
    configs = _configs(spec)
    qrels_config = "default" if "default" in configs else "qrels" if "qrels" in configs else None
    missing = [c for c in ("corpus", "queries") if c not in configs] + ([] if qrels_config else ["default"])
    if missing:
        raise DataError(f"{spec} has no config {missing[0]!r}; its configs are {', '.join(configs) or 'none'} "
                        "(MTEB's layout: corpus, queries, default)")
    corpus: dict[str, str] = {}
    ds = _hf_part(spec, "corpus", None, configs)
    id_col = _need(ds, ("_id", "id"), spec, "corpus")
    text_col, title_col = _need(ds, ("text",), spec, "corpus"), _column(ds, ("title",))  # a title alone is no text
    ids, texts = ds[id_col], ds[text_col]
    titles = ds[title_col] if title_col else [None] * len(ds)
    for i, (cid, title, text) in enumerate(zip(ids, titles, texts)):
        where = f"{spec}: corpus row {i + 1}"
        _put(corpus, _id(cid, where, "document"), _document(title, text, where, "hf"), where, "document")
    queries: dict[str, str] = {}
    ds = _hf_part(spec, "queries", None, configs)
    id_col, text_col = _need(ds, ("_id", "id"), spec, "queries"), _need(ds, ("text",), spec, "queries")
    for i, (qid, text) in enumerate(zip(ds[id_col], ds[text_col])):
        where = f"{spec}: queries row {i + 1}"
        qid = _id(qid, where, "query")
        if not _text(text, where, "the text", "hf").strip():
            raise DataError(f"{where}: query {qid!r} is empty; give it a text or remove it")
        _put(queries, qid, text, where, "query")
    assert qrels_config is not None  # checked above
    ds = _hf_part(spec, qrels_config, split, configs)
    q_col, d_col = _need(ds, ("query-id",), spec, "qrels"), _need(ds, ("corpus-id",), spec, "qrels")
    s_col = _column(ds, ("score",))
    scores = ds[s_col] if s_col else [1.0] * len(ds)
    judged: dict[str, dict[str, float]] = {}
    where_of: dict[tuple[str, str], str] = {}
    for i, (q, d, s) in enumerate(zip(ds[q_col], ds[d_col], scores)):
        where = f"{spec}: {qrels_config}@{split} row {i + 1}"
        q, d = _id(q, where, "query"), _id(d, where, "document")
        _judge(judged, q, d, _score(s, where), where)
        where_of.setdefault((q, d), where)
    if not where_of:
        raise DataError(f"the {split} qrels of {spec} are empty; give rows of query-id, corpus-id, score")
    # as given (a hub id, or a local folder's path): the name a study, a work study and several sets' record were made
    # under, so a resumed run finds them (a BEIR folder is named by its folder's name)
    name = spec + ("" if split == "test" else f"@{split}")
    return _build(name, queries, corpus, judged, cut, description, where_of)


# ---- the demo task --------------------------------------------------------------------------------------------------

def demo_task(data_dir=None) -> RetrievalData:
    """``stsb-paraphrase``: paraphrase retrieval built offline from STS-B dev (the derivation is in the
    module's docstring).

    :param data_dir: the data folder (None: the default location).
    :returns: the task (259 queries, 2,647 documents, 260 relevant pairs on the shipped STS-B dev).
    :raises promptsearch.errors.DataError: where STS-B dev cannot be read."""
    first, second, gold = read_stsb("dev", data_dir).subsets["dev"]
    paraphrases: dict[str, list[str]] = {}
    for a, b, y in zip(first, second, gold):
        if y >= DEMO_THRESHOLD:
            docs = paraphrases.setdefault(a, [])
            if b not in docs:
                docs.append(b)
    documents = [s for s in dict.fromkeys(s for pair in zip(first, second) for s in pair) if s not in paraphrases]
    return _numbered("stsb-paraphrase", paraphrases, documents, DEMO_DESCRIPTION, 4)


def _numbered(name: str, wanted: dict[str, list[str]], documents: list[str], description: str,
              digits: int) -> RetrievalData:
    """A built-in task from texts: ``documents`` numbered ``d0001`` … in order, each query of ``wanted`` (query text →
    the texts relevant to it, in order) numbered ``q0001`` … with those of its texts that are documents; a query left
    with none is left out and counted. Ids have at least ``digits`` digits."""
    width = max(digits, len(str(max(len(documents), len(wanted)))))
    doc_id = {s: f"d{i:0{width}d}" for i, s in enumerate(documents, 1)}
    kept = [(q, [doc_id[d] for d in docs if d in doc_id]) for q, docs in wanted.items()]
    queries, relevant = {}, {}
    for i, (q, ids) in enumerate([(q, ids) for q, ids in kept if ids], 1):
        queries[f"q{i:0{width}d}"] = q
        relevant[f"q{i:0{width}d}"] = frozenset(ids)
    return RetrievalData(name, queries, {i: s for s, i in doc_id.items()}, relevant, description,
                         dropped_queries=len(kept) - len(queries))


def entailment_task(data_dir=None) -> RetrievalData:
    """``snli-entailment``: entailment retrieval built offline from SNLI dev, each premise's neutral and contradicted
    hypotheses its hard distractors (the derivation is in the module's docstring).

    :param data_dir: the data folder (None: the default location).
    :returns: the task.
    :raises promptsearch.errors.DataError: where SNLI dev cannot be read."""
    groups = snli_groups(data_dir, ("dev",))
    hypotheses = [h for h in dict.fromkeys(h for g in groups.values() for hs in g.values() for h in hs)
                  if h not in groups]
    entailed = {p: g.get("entailment", []) for p, g in groups.items()}
    return _numbered(ENTAILMENT_NAME, entailed, hypotheses, ENTAILMENT_DESCRIPTION, 5)


BUILT_IN = {**{n: demo_task for n in DEMO_NAMES}, ENTAILMENT_NAME: entailment_task}  # offline tasks by name


# ---- by name --------------------------------------------------------------------------------------------------------

def load_retrieval(spec: str, data_dir=None, split: str = "test", fmt: RetrievalFormat | None = None,
                   description: str | None = None) -> RetrievalData:
    """Retrieval data named by one string.

    :param spec: ``demo`` or ``stsb-paraphrase`` (the built-in task), a BEIR folder (one holding
        ``corpus.jsonl``), or a 🤗 dataset folder or hub id in MTEB's layout.
    :param data_dir: the data folder of the built-in task (None: the default location).
    :param split: the qrels split of a BEIR or 🤗 data set.
    :param fmt: how to read the judgments (``relevant_from``); None: scores must be 0 or 1.
    :param description: one sentence saying what the task is (None: the data's default).
    :returns: the data.
    :raises promptsearch.errors.DataError: for a spec that is none of the three forms, or data that cannot be read."""
    if isinstance(fmt, PairFormat):
        raise DataError("columns= and subset_column= name the columns of sentence pairs; retrieval data has "
                        "BEIR's or MTEB's fixed columns: drop them")
    if fmt is not None and not isinstance(fmt, RetrievalFormat):
        raise TypeError(f"fmt= must be a RetrievalFormat, not {type(fmt).__name__}")
    relevant_from = fmt.relevant_from if fmt else None
    if not isinstance(spec, str) or not spec.strip():
        raise DataError(f"no retrieval data named; {FORMS}")
    if (built := BUILT_IN.get(spec.strip().lower())) is not None:
        name = spec.strip().lower()
        if split != "test":
            raise DataError(f"the built-in {name} task has one split; drop split={split!r}")
        if relevant_from is not None:
            raise DataError(f"the built-in {name} task's judgments are binary; drop relevant_from=")
        data = built(data_dir)
        return data if description is None else replace(data, description=_description(description))
    p = Path(spec).expanduser()
    if p.is_dir():
        # a hub clone (README.md with its configs) may hold BEIR files too; without a README, a folder with
        # either .jsonl file is a BEIR folder, so a missing one is named as such
        beir = ((p / "corpus.jsonl").is_file() and ((p / "qrels" / f"{split}.tsv").is_file()
                                                    or not (p / "README.md").is_file())
                or not (p / "README.md").is_file() and (p / "queries.jsonl").is_file())
        if beir:
            return load_beir(p, split, relevant_from, description)
        return load_hf(spec, split, relevant_from, description)
    if p.exists():
        raise DataError(f"{spec} is a file; {FORMS}")
    if _HUB.match(spec):
        return load_hf(spec, split, relevant_from, description)
    raise DataError(f"no retrieval data {spec!r}; {FORMS}")
