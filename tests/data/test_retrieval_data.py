"""Retrieval data in its three forms (BEIR folder, 🤗 dataset in MTEB's layout, sentence-transformers'
dicts), the bad-input table, and the demo task derived from STS-B dev."""

from __future__ import annotations

import json
import re
from pathlib import Path

import datasets
import numpy as np
import pytest

from promptsearch.data.retrieval import (
    RetrievalData,
    RetrievalFormat,
    demo_task,
    from_dicts,
    load_beir,
    load_hf,
    load_retrieval,
)
from promptsearch.data.user import PairFormat
from promptsearch.errors import DataError
from tests.conftest import DATA

# One small BEIR data set: a titled document, an untitled one (no field), an empty title, a null title;
# q3 only has a qrel scored 0 (judged not relevant); q9 belongs to another split (no qrel here).
CORPUS = [{"_id": "d1", "title": "Cats", "text": "A cat sat on the mat."},
          {"_id": "d2", "text": "  Dogs bark at night. "},
          {"_id": "d3", "title": "", "text": "The sun is a star."},
          {"_id": "d4", "title": None, "text": "Rain falls in autumn."},
          {"_id": "d5", "title": "Only a title", "text": ""}]
QUERIES = [{"_id": "q1", "text": "where did the cat sit?"}, {"_id": "q9", "text": "a query of the train split"},
           {"_id": "q2", "text": "which animal barks"}, {"_id": "q3", "text": "what is the moon"}]
QRELS = [("q1", "d1", 1), ("q2", "d2", 1), ("q2", "d5", 1), ("q2", "d3", 0), ("q3", "d3", 0)]


def beir_text(doc: dict) -> str:
    """beir/retrieval/models/sentence_bert.py, SentenceBERT.encode_corpus (sep " "), with a null title as ""."""
    return (((doc["title"] or "") + " " + doc["text"]).strip() if "title" in doc else doc["text"].strip())


def write_beir(folder: Path, corpus=CORPUS, queries=QUERIES, qrels=QRELS, split="test", header=True) -> Path:
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries), encoding="utf-8")
    lines = (["query-id\tcorpus-id\tscore"] if header else []) + [f"{q}\t{d}\t{s}" for q, d, s in qrels]
    (folder / "qrels" / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


def write_mteb(folder: Path, corpus=CORPUS, queries=QUERIES, qrels=QRELS, id_column="_id") -> Path:
    """A hub clone's layout: parquet files and the README's ``configs`` that name them."""
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    rows = [{id_column: r["_id"], **{k: v for k, v in r.items() if k != "_id"}} for r in corpus]
    cols = {k: [r.get(k) for r in rows] for k in dict.fromkeys(k for r in rows for k in r)}
    datasets.Dataset.from_dict(cols).to_parquet(str(folder / "corpus.parquet"))
    datasets.Dataset.from_dict({id_column: [r["_id"] for r in queries],
                                "text": [r["text"] for r in queries]}).to_parquet(str(folder / "queries.parquet"))
    datasets.Dataset.from_dict({"query-id": [q for q, _, _ in qrels], "corpus-id": [d for _, d, _ in qrels],
                                "score": [s for _, _, s in qrels]}).to_parquet(str(folder / "qrels" / "test.parquet"))
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: qrels/test.parquet\n"
        "- config_name: corpus\n  data_files:\n  - split: corpus\n    path: corpus.parquet\n"
        "- config_name: queries\n  data_files:\n  - split: queries\n    path: queries.parquet\n---\n", encoding="utf-8")
    return folder


def expected() -> tuple[dict, dict, dict]:
    corpus = {r["_id"]: beir_text(r) for r in CORPUS}
    queries = {"q1": "where did the cat sit?", "q2": "which animal barks"}
    return queries, corpus, {"q1": frozenset({"d1"}), "q2": frozenset({"d2", "d5"})}


def same_content(data: RetrievalData, dropped: int = 1) -> None:
    queries, corpus, relevant = expected()
    assert list(data.queries.items()) == list(queries.items())  # file order, other split's and unjudged ones gone
    assert list(data.corpus.items()) == list(corpus.items())
    assert data.relevant == relevant
    assert data.dropped_queries == dropped  # q3: judged, nothing relevant; q9 (another split) is not counted
    assert data.description == "Given a query, retrieve relevant passages"


def test_beir_folder_reads_as_beir_does(tmp_path):
    data = load_beir(write_beir(tmp_path / "mini"))
    same_content(data)
    assert data.name == "mini"
    assert data.corpus["d1"] == "Cats A cat sat on the mat." and data.corpus["d2"] == "Dogs bark at night."
    assert data.corpus["d3"] == "The sun is a star." and data.corpus["d5"] == "Only a title"
    assert data.n_relevant == 3
    assert data.summary() == ("mini: 2 queries, 5 documents, 3 relevant pairs (1 query without a relevant document "
                              "left out)")
    one = from_dicts({"q": "a cat"}, {"d": "cats"}, {"q": {"d"}}, name="one")  # counts of one in the singular
    assert one.summary() == "one: 1 query, 1 document, 1 relevant pair"
    assert re.fullmatch(r"[0-9a-f]{16}", data.fingerprint())


def test_hf_folder_in_mteb_layout_equals_the_beir_folder(tmp_path):
    beir = load_beir(write_beir(tmp_path / "b"))
    for folder in (write_mteb(tmp_path / "hf"), write_mteb(tmp_path / "hf-id", id_column="id")):
        data = load_hf(str(folder))
        same_content(data)
        assert data.name == str(folder)  # as given: the name resumed studies and records were made under
        assert data.fingerprint() == beir.fingerprint()
        assert load_retrieval(str(folder)).fingerprint() == beir.fingerprint()  # routed to load_hf


def test_save_to_disk_folders_read_too(tmp_path):
    root = tmp_path / "saved"
    datasets.DatasetDict({"corpus": datasets.Dataset.from_list(
        [{"_id": r["_id"], "title": r.get("title"), "text": r["text"]} for r in CORPUS])}).save_to_disk(
        str(root / "corpus"))
    datasets.DatasetDict({"queries": datasets.Dataset.from_list(QUERIES)}).save_to_disk(str(root / "queries"))
    datasets.DatasetDict({"test": datasets.Dataset.from_dict(
        {"query-id": [q for q, _, _ in QRELS], "corpus-id": [d for _, d, _ in QRELS],
         "score": [s for _, _, s in QRELS]})}).save_to_disk(str(root / "default"))
    same_content(load_retrieval(str(root)))
    with pytest.raises(DataError, match=r"no split 'dev'.*its splits are test \(split=\)"):
        load_hf(str(root), split="dev")


def test_dicts_as_information_retrieval_evaluator_takes_them(tmp_path):
    # here, not at the top: only this test needs sentence-transformers (slow to import)
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    queries, corpus, relevant = expected()
    all_queries = {**queries, "q3": "what is the moon"}
    sets = {q: set(d) for q, d in relevant.items()}
    data = from_dicts(all_queries, corpus, sets)
    assert list(data.queries) == InformationRetrievalEvaluator(all_queries, corpus, sets).queries_ids
    assert data.dropped_queries == 1 and data.name == "dicts"
    assert data.fingerprint() == load_beir(write_beir(tmp_path / "b")).fingerprint()
    # BEIR's loader output (title/text documents, scored qrels) is taken as it is
    beir_corpus = {r["_id"]: {"title": r.get("title") or "", "text": r["text"]} for r in CORPUS}
    qrels: dict = {}
    for q, d, s in QRELS:
        qrels.setdefault(q, {})[d] = s
    # every query of the dicts is the task's: q9, with no judgment, is left out and counted (with q3)
    same_content(from_dicts({r["_id"]: r["text"] for r in QUERIES}, beir_corpus, qrels, description=None), dropped=2)
    # integer ids as text; a collision after that is a duplicate
    assert from_dicts({1: "a"}, {2: "b"}, {1: {2}}).relevant == {"1": frozenset({"2"})}
    with pytest.raises(DataError, match="query id '1' appears twice"):
        from_dicts({1: "a", "1": "b"}, {2: "b"}, {1: {2}})
    # numpy's integers (ids from a pandas frame) as Python's
    assert from_dicts({np.int64(1): "a"}, {np.int32(2): "b"}, {np.int64(1): {np.int64(2)}}).relevant == \
        {"1": frozenset({"2"})}
    with pytest.raises(DataError, match=r"query 1.5 is not an id; give a non-empty string or an integer$"):
        from_dicts({1.5: "a"}, {2: "b"}, {1: {2}})
    # a document dict without its text is refused, not read as its title
    with pytest.raises(DataError, match=r"dicts: document 'd3' has no 'text' key; its keys are title, contents: give "
                                        r"each document its text under 'text'"):
        from_dicts({"q": "a"}, {"d3": {"title": "Dogs", "contents": "x"}}, {"q": {"d3"}})
    with pytest.raises(DataError, match=r"dicts: query 'q': its text is int 5, not text; give it as a str \('5'\)$"):
        from_dicts({"q": 5}, {"d": "b"}, {"q": {"d"}})
    with pytest.raises(DataError, match=r"dicts: document 'd': its text is float64 np.float64\(2.5\), not text; "
                                        r"give it as a str \('2.5'\)$"):
        from_dicts({"q": "a"}, {"d": np.float64(2.5)}, {"q": {"d"}})


@pytest.mark.parametrize("head, advice", [
    ("query-id\tcorpus-id\nq1\td1\n", r"\['query-id', 'corpus-id'\]; add the score column \(1 for relevant\) to the "
                                         "header, and to every row that lacks one$"),
    ("qid\tdocid\nq1\td1\n", r"\['qid', 'docid'\]; give the header query-id<TAB>corpus-id<TAB>score$"),
    ("query-id\tcorpus-id\t\nq1\td1\t\n", r"\['query-id', 'corpus-id', ''\]; add the score column"),
    ("q1\td1\t1\nq2\td2\t1\n", r"\['q1', 'd1', '1'\]; add the header line \(BEIR skips the first line\)$"),
    ("query-id,corpus-id,score\nq1,d1,1\n", r"\['query-id,corpus-id,score'\]; separate the columns with tabs, not "
                                              r"commas \(BEIR's qrels are tab-separated\)$"),
    ("query-id corpus-id score\nq1 d1 1\n", r"separate the columns with tabs, not spaces"),
    ("q1 0 d1 1\nq2 0 d2 1\n", r"it reads as a TREC qrels line \(query, 0, document, score\): write "
                               r"query-id<TAB>corpus-id<TAB>score, under a header line$"),
    ("q1\t0\td1\t1\nq2\t0\td2\t1\n", r"it reads as a TREC qrels line"),
    ("corpus-id\tquery-id\tscore\nd1\tq1\t1\n", r"read in BEIR's order, query-id, corpus-id, score \(by position\): "
                                                "put the query column first$"),
], ids=["no score column", "two other names", "an empty score column", "no header", "commas", "spaces", "TREC",
        "TREC with tabs", "swapped"])
def test_a_qrels_header_gets_the_advice_that_fits_what_it_holds(head, advice, tmp_path):
    folder = write_beir(tmp_path / "s")
    (folder / "qrels" / "test.tsv").write_text(head, encoding="utf-8")
    with pytest.raises(DataError, match=r"test.tsv:1: expected the header .*found .*" + advice):
        load_beir(folder)


def test_a_qrels_header_of_other_names_is_skipped_as_beir_skips_it(tmp_path):
    folder = write_beir(tmp_path / "s")
    want = load_beir(folder)
    path = folder / "qrels" / "test.tsv"
    path.write_text(path.read_text(encoding="utf-8").replace("query-id\tcorpus-id\tscore", "qid\tdocid\trel", 1),
                    encoding="utf-8")
    got = load_beir(folder)
    assert got.relevant == want.relevant and got.queries == want.queries and got.corpus == want.corpus


@pytest.mark.parametrize("move, found", [
    (("qrels/test.tsv", "qrels/test.csv"), r"missing \S+qrels/test.tsv; found \S+qrels/test.csv there, but BEIR's "
                                           r"qrels are tab-separated .tsv files; a BEIR folder"),
    (("qrels", "qrel"), r"missing \S+qrels/test.tsv; found \S+/qrel/ there; a BEIR folder"),
    (("corpus.jsonl", "corpus.json"), r"missing \S+corpus.jsonl; found \S+corpus.json there; a BEIR folder"),
    (("queries.jsonl", "querys.jsonl"), r"missing \S+queries.jsonl; found \S+querys.jsonl there; a BEIR folder"),
], ids=["a .csv qrels file", "a qrel folder", "corpus.json", "a typo"])
def test_a_missing_beir_file_names_the_nearest_one_the_folder_holds(move, found, tmp_path):
    folder = write_beir(tmp_path / "s")
    (folder / move[0]).rename(folder / move[1])
    with pytest.raises(DataError, match=found):
        load_beir(folder)


def test_graded_scores_need_relevant_from(tmp_path):
    graded = QRELS + [("q1", "d4", 2), ("q3", "d2", 2)]
    folder = write_beir(tmp_path / "g", qrels=graded)
    with pytest.raises(DataError, match=r"test.tsv:7: graded relevance \(score 2\).*relevant_from="):
        load_beir(folder)
    with pytest.raises(DataError, match="graded relevance.*relevant_from="):
        load_hf(str(write_mteb(tmp_path / "h", qrels=graded)))
    data = load_retrieval(str(folder), fmt=RetrievalFormat.parse("2"))
    assert data.relevant == {"q1": frozenset({"d4"}), "q3": frozenset({"d2"})} and data.dropped_queries == 1
    low = load_beir(folder, relevant_from=1)
    assert low.relevant == {"q1": frozenset({"d1", "d4"}), "q2": frozenset({"d2", "d5"}), "q3": frozenset({"d2"})}
    assert low.fingerprint() != data.fingerprint()
    assert load_hf(str(write_mteb(tmp_path / "h2", qrels=graded)), relevant_from=2).relevant == data.relevant
    for bad in ("0", "-1", "nan", "x"):
        with pytest.raises(DataError, match="relevant_from="):
            RetrievalFormat.parse(bad)


def test_fingerprint_follows_the_content_not_the_name(tmp_path):
    base = load_beir(write_beir(tmp_path / "a"))
    assert load_beir(write_beir(tmp_path / "a"), description="Find it").fingerprint() == base.fingerprint()
    assert from_dicts(base.queries, base.corpus, base.relevant, name="other").fingerprint() == base.fingerprint()
    moved = [dict(r, text=r["text"] + "!") if r["_id"] == "d4" else r for r in CORPUS]
    assert load_beir(write_beir(tmp_path / "b", corpus=moved)).fingerprint() != base.fingerprint()
    more = QRELS + [("q1", "d3", 1)]
    assert load_beir(write_beir(tmp_path / "c", qrels=more)).fingerprint() != base.fingerprint()


def _drop(rows, key):
    return [r for r in rows if r.get("_id") != key]


# (what is wrong, how to write the folder, a pattern of the one-line error)
BAD_BEIR = [
    ("qrel names a missing query", dict(qrels=QRELS + [("q7", "d1", 1)]), r"test.tsv:7: .*query 'q7'.*not among"),
    ("qrel names a missing document", dict(qrels=QRELS + [("q1", "d7", 1)]), r"test.tsv:7: .*document 'd7'.*not in "
                                                                              "the corpus"),
    ("empty corpus", dict(corpus=[]), r"/bad/corpus.jsonl: the corpus is empty; give at least one document$"),
    ("no queries", dict(queries=[]), r"/bad/queries.jsonl: there are no queries; give at least one query$"),
    ("nothing relevant", dict(qrels=[("q1", "d1", 0), ("q2", "d2", 0)]), r"no query has a document judged relevant"),
    ("duplicate document id", dict(corpus=CORPUS + [CORPUS[0]]), r"corpus.jsonl:6: document id 'd1' appears twice"),
    ("duplicate query id", dict(queries=QUERIES + [QUERIES[0]]), r"queries.jsonl:5: query id 'q1' appears twice"),
    ("graded", dict(qrels=QRELS + [("q1", "d2", 3)]), r"graded relevance \(score 3\).*relevant_from="),
    ("negative", dict(qrels=QRELS + [("q1", "d2", -1)]), r"a negative score \(-1\).*relevant_from=1 \(lower scores "
                                                        "count as not relevant"),
    ("no header", dict(header=False), r"test.tsv:1: expected the header.*add the header line"),
    ("no title nor text", dict(corpus=CORPUS + [{"_id": "d9", "title": None, "text": None}]), r"corpus.jsonl:6: "
                                                                                                 ".*neither title nor "
                                                                                                 "text"),
    ("a misnamed text field", dict(corpus=CORPUS + [{"_id": "d9", "body": "x"}]),
     r"corpus.jsonl:6: no 'text' field; its fields are _id, body: give every document its text under 'text'"),
    # Pyserini's field name beside a title: the title alone is not the document (it was once scored as one)
    ("a title but no text field", dict(corpus=CORPUS + [{"_id": "d9", "title": "Dogs", "contents": "dogs bark"}]),
     r"corpus.jsonl:6: no 'text' field; its fields are _id, title, contents: give every document its text under "
     r"'text' \(BEIR's fields: _id, title, text\)$"),
    # a null text beside a title, as a missing one: its title alone is not the document (from a user's trial)
    ("a title and a null text", dict(corpus=CORPUS + [{"_id": "d9", "title": "Dogs", "text": None}]),
     r"corpus.jsonl:6: its text is null; give every document its text \(an empty string \"\", if the title alone is "
     r"the document\)$"),
    ("blank title and text", dict(corpus=CORPUS + [{"_id": "d9", "title": " ", "text": ""}]), r"neither title nor "
                                                                                               "text"),
    ("document without _id", dict(corpus=CORPUS + [{"text": "x"}]), r"corpus.jsonl:6: no '_id' field; its fields are "
                                                                    "text: give every row one"),
    ("query without text", dict(queries=QUERIES + [{"_id": "q8"}]), r"queries.jsonl:5: no 'text' field"),
    ("empty query", dict(queries=QUERIES + [{"_id": "q8", "text": "  "}]), r"query 'q8' is empty"),
    ("text not a string", dict(corpus=CORPUS + [{"_id": "d9", "text": 42}]), r"the text is int 42, not text; write "
                                                                             r'it as a JSON string \("42"\)$'),
    ("a JSON list as a line", dict(corpus=CORPUS + [["d9", "x"]]), r"corpus.jsonl:6: a JSON list, not an object with "
                                                                   r"_id and text; write one object a line, e\.g\. "),
    ("score not a number", dict(qrels=QRELS + [("q1", "d2", "high")]), r"test.tsv:7: score 'high' is not a number"),
    ("the same pair judged twice, differently", dict(qrels=QRELS + [("q1", "d1", 0)]), r"judged twice, 1 and 0"),
    ("no qrels", dict(qrels=[]), r"holds no qrels"),
]


@pytest.mark.parametrize("what, kw, pattern", BAD_BEIR, ids=[b[0] for b in BAD_BEIR])
def test_bad_beir_input_is_one_line(tmp_path, what, kw, pattern):
    folder = write_beir(tmp_path / "bad", **kw)
    with pytest.raises(DataError, match=pattern) as err:
        load_retrieval(str(folder))
    assert "\n" not in str(err.value)


def test_a_qrel_with_too_few_fields_says_how_to_write_one(tmp_path):
    folder = write_beir(tmp_path / "f")
    with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("q1 d2 1\n")  # spaces, not tabs
    with pytest.raises(DataError, match=r"test.tsv:7: expected query-id, corpus-id and score separated by tabs, found "
                                        r"1 field\(s\); separate the columns with tabs, not spaces"):
        load_retrieval(str(folder))
    folder = write_beir(tmp_path / "g")
    with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("q1\td2\n")  # tabs, but no score: not told to use tabs
    with pytest.raises(DataError, match=r"test.tsv:7: .* found 2 field\(s\); give each judgement as "
                                        r"query-id<TAB>corpus-id<TAB>score \(1: relevant\)$"):
        load_retrieval(str(folder))
    folder = write_beir(tmp_path / "t")
    with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("q1\t0\td2\t1\n")  # a TREC line, tab-separated, under BEIR's header: not "score 'd2' is not a number"
    with pytest.raises(DataError, match=r"test.tsv:7: it reads as a TREC qrels line \(query, 0, document, score\): "
                                        r"write query-id<TAB>corpus-id<TAB>score, under a header line$"):
        load_retrieval(str(folder))
    for line in ("1102432\t0\t2026790\t1\n", "1102432\tQ0\t2026790\t1\n"):  # MS MARCO's numeric ids, 0 or Q0
        folder = write_beir(tmp_path / f"t{len(line)}{line[8]}")
        with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
            f.write(line)
        with pytest.raises(DataError, match=r"test.tsv:7: it reads as a TREC qrels line"):
            load_retrieval(str(folder))


def test_bad_files_and_splits(tmp_path):
    folder = write_beir(tmp_path / "f")
    with pytest.raises(DataError, match=r"missing .*dev.tsv; its splits are test \(split=\)"):
        load_beir(folder, split="dev")
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"}\n{"_id": \n', encoding="utf-8")
    with pytest.raises(DataError, match=r"corpus.jsonl:2: not valid JSON \(Expecting value at column 9\)"):
        load_beir(folder)  # the line's end (a user's trial: 'column 1', the newline counted as a second line)
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a"\n', encoding="utf-8")  # its brace cut off
    with pytest.raises(DataError, match=r"corpus.jsonl:1: not valid JSON \(Expecting ',' delimiter at column 26\)"):
        load_beir(folder)
    # a raw tab inside a string: the parser's message ends in 'at', which its own text fills with the place
    (folder / "corpus.jsonl").write_text('{"_id": "d1", "text": "a\tb"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"corpus.jsonl:1: not valid JSON \(Invalid control character at column 25\); "
                                        "fix that line$"):
        load_beir(folder)
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(DataError, match=r"missing .*corpus.jsonl; a BEIR folder holds"):
        load_beir(folder)
    # identical repeated qrels are harmless (BEIR keeps the last); a blank line is skipped
    folder = write_beir(tmp_path / "g", qrels=QRELS + [("q1", "d1", 1)])
    with open(folder / "qrels" / "test.tsv", "a", encoding="utf-8") as f:
        f.write("\n")
    same_content(load_beir(folder))


def test_a_beir_folder_missing_a_file_is_named_as_one(tmp_path):
    """A BEIR folder without qrels/ or without corpus.jsonl is told what a BEIR folder holds (it was once read as a
    🤗 dataset: "has no config 'corpus'"), and a byte-order mark before the first line is read past."""
    folder = write_beir(tmp_path / "noqrels")
    (folder / "qrels" / "test.tsv").unlink()
    (folder / "qrels").rmdir()
    with pytest.raises(DataError, match=r"missing .*test.tsv; a BEIR folder holds corpus.jsonl, queries.jsonl and "
                                        r"qrels/<split>.tsv$"):
        load_retrieval(str(folder))
    folder = write_beir(tmp_path / "nocorpus")
    (folder / "corpus.jsonl").unlink()
    with pytest.raises(DataError, match=r"missing .*corpus.jsonl; a BEIR folder holds"):
        load_retrieval(str(folder))
    folder = write_beir(tmp_path / "bom")
    for name in ("corpus.jsonl", "queries.jsonl", "qrels/test.tsv"):
        (folder / name).write_bytes(b"\xef\xbb\xbf" + (folder / name).read_bytes())
    same_content(load_retrieval(str(folder)))


def test_bad_hf_input(tmp_path):
    folder = write_mteb(tmp_path / "h")
    with pytest.raises(DataError, match=r"no split 'dev'; its splits are test \(split=\)"):
        load_hf(str(folder), split="dev")
    bad = write_mteb(tmp_path / "noid", corpus=[{"doc": r["_id"], "text": r["text"]} | {"_id": "x"} for r in CORPUS])
    with pytest.raises(DataError, match="document id 'x' appears twice"):
        load_hf(str(bad))
    (folder / "README.md").write_text((folder / "README.md").read_text().replace("config_name: queries",
                                                                                 "config_name: questions"))
    with pytest.raises(DataError, match=r"has no config 'queries'; its configs are .*questions"):
        load_hf(str(folder))
    with pytest.raises(DataError, match="qrel names query 'q7'"):
        load_hf(str(write_mteb(tmp_path / "m", qrels=QRELS + [("q7", "d1", 1)])))
    nocol = tmp_path / "nocol"
    datasets.DatasetDict({"corpus": datasets.Dataset.from_dict({"_id": ["d1"], "body": ["x"]})}).save_to_disk(
        str(nocol / "corpus"))
    datasets.DatasetDict({"queries": datasets.Dataset.from_list(QUERIES)}).save_to_disk(str(nocol / "queries"))
    datasets.DatasetDict({"test": datasets.Dataset.from_dict({"query-id": ["q1"], "corpus-id": ["d1"]})}).save_to_disk(
        str(nocol / "default"))
    with pytest.raises(DataError, match=r"corpus of .* has no column 'text'; its columns are _id, body: rename the "
                                        r"one that holds it to 'text' \(MTEB's layout: _id, title, text\)$"):
        load_hf(str(nocol))
    # a title beside a misnamed text column is not the document: refused, not scored on the titles
    datasets.DatasetDict({"corpus": datasets.Dataset.from_dict({"_id": ["d1"], "title": ["Dogs"], "contents": ["x"]})}
                         ).save_to_disk(str(nocol / "corpus"))
    with pytest.raises(DataError, match=r"has no column 'text'; its columns are _id, title, contents: rename"):
        load_hf(str(nocol))
    # qrels columns spelt otherwise: told the name MTEB's layout gives them
    other = tmp_path / "under"
    datasets.DatasetDict({"test": datasets.Dataset.from_dict({"query_id": ["q1"], "corpus_id": ["d1"], "score": [1]})}
                         ).save_to_disk(str(other / "default"))
    for config, rows in (("corpus", CORPUS), ("queries", QUERIES)):
        datasets.DatasetDict({config: datasets.Dataset.from_list(rows)}).save_to_disk(str(other / config))
    with pytest.raises(DataError, match=r"the qrels of .* have no column 'query-id'; their columns are query_id, "
                                        r"corpus_id, score: rename the one that holds it to 'query-id' \(MTEB's "
                                        r"layout: query-id, corpus-id, score\)$"):
        load_hf(str(other))
    # an empty corpus: datasets cannot load its own empty save (IndexError), nor a config of no rows: said as empty
    datasets.Dataset.from_dict({"_id": [], "text": []}).save_to_disk(str(other / "corpus"))
    with pytest.raises(DataError, match=r"config 'corpus' of .* holds no rows; give at least one document$"):
        load_hf(str(other))


def test_spec_forms_and_their_errors(tmp_path):
    assert load_retrieval("demo").name == load_retrieval("stsb-paraphrase").name == "stsb-paraphrase"
    assert load_retrieval("demo", description="Find paraphrases").description == "Find paraphrases"
    with pytest.raises(DataError, match="one split.*drop split='dev'"):
        load_retrieval("demo", split="dev")
    with pytest.raises(DataError, match="drop relevant_from="):
        load_retrieval("demo", fmt=RetrievalFormat(2.0))
    with pytest.raises(DataError, match="columns= and subset_column= name the columns of sentence pairs"):
        load_retrieval("demo", fmt=PairFormat.parse("a,b,c"))
    # both built-in names quoted alike, each a name to give
    three = (r"give 'demo' \(stsb-paraphrase\) or 'snli-entailment' \(both built in\), a BEIR folder "
             r".*a 🤗 dataset folder or hub id")
    with pytest.raises(DataError, match="no retrieval data 'no such thing'; " + three):
        load_retrieval("no such thing")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DataError, match="is a file; " + three):
        load_retrieval(str(tmp_path / "x.csv"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"cannot load .*empty.* as a 🤗 dataset .*" + three):
        load_retrieval(str(tmp_path / "empty"))
    with pytest.raises(DataError, match=r"no folder 'no-such-owner/no-such-set' here, and cannot load it from the "
                                        r"Hugging Face Hub .*check the path.*local folder"):
        load_retrieval("no-such-owner/no-such-set")  # the suite runs with HF_HUB_OFFLINE=1
    with pytest.raises(DataError, match=r"description=' ': give one sentence"):
        load_beir(write_beir(tmp_path / "d"), description=" ")


def _stsb_dev_pairs() -> list[tuple[str, str, float]]:
    """STS-B dev read straight from its file (SentEval's columns 5, 6 and the score in column 4)."""
    rows = []
    for line in (DATA / "STSBenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines():
        if line.strip():
            f = line.split("\t")
            rows.append((" ".join(f[5].split()), " ".join(f[6].split()), float(f[4])))
    return rows


def test_the_entailment_task_is_premise_to_entailed_hypothesis_from_snli_dev_with_hard_distractors():
    from promptsearch.data.retrieval import load_retrieval

    folder = DATA.parent / "train" / "snli"  # read here straight from the files, as SentEval lays them out
    s1, s2, lab = ([x.strip() for x in (folder / f"{n}.dev").read_text(encoding="utf-8").splitlines()]
                   for n in ("s1", "s2", "labels"))
    rows = list(zip(s1, s2, lab))
    assert len(rows) == 9842
    premises = set(s1)
    entailed = {p: {h for a, h, y in rows if a == p and y == "entailment"} - premises for p in premises}
    data = load_retrieval("snli-entailment")
    assert data.name == "snli-entailment" and "entails" in data.description
    assert set(data.corpus.values()) == set(s2) - premises  # every hypothesis, whatever its label, not a premise
    assert set(data.queries.values()) == {p for p, e in entailed.items() if e}
    assert data.dropped_queries == len(premises) - len(data.queries)
    for qid, q in data.queries.items():
        assert {data.corpus[d] for d in data.relevant[qid]} == entailed[q]
    # each query's own neutral and contradicted hypotheses are in the corpus and not relevant: hard distractors
    q0 = data.queries["q00001"]
    others = {h for a, h, y in rows if a == q0 and y != "entailment"}
    assert others and others <= set(data.corpus.values())
    assert not others & {data.corpus[d] for d in data.relevant["q00001"]}
    assert (len(data.queries), len(data.corpus), data.n_relevant) == (3070, 9662, 3323)


def test_demo_task_is_paraphrase_retrieval_from_stsb_dev():
    data = demo_task()
    rows = _stsb_dev_pairs()
    assert len(rows) == 1500
    firsts = {a for a, _, y in rows if y >= 4}
    sentences = {s for a, b, _ in rows for s in (a, b)}
    partners = {q: {b for a, b, y in rows if a == q and y >= 4} - firsts for q in firsts}
    assert set(data.corpus.values()) == sentences - firsts and len(data.corpus) == len(sentences - firsts) == 2647
    assert set(data.queries.values()) == {q for q, p in partners.items() if p}
    assert len(data.queries) == 259 and data.dropped_queries == len(firsts) - 259 == 3
    text_of = data.corpus
    for qid, q in data.queries.items():
        assert {text_of[d] for d in data.relevant[qid]} == partners[q]
    assert data.n_relevant == sum(len(p) for p in partners.values()) == 260
    assert not set(data.queries.values()) & set(data.corpus.values())  # a query never retrieves itself
    assert list(data.queries)[:2] == ["q0001", "q0002"] and list(data.corpus)[-1] == "d2647"
    assert data.queries["q0001"] == rows[next(i for i, r in enumerate(rows) if r[2] >= 4)][0]  # first appearance
    assert data.description == "Given a sentence, retrieve sentences that paraphrase it"
    assert demo_task().fingerprint() == data.fingerprint()  # stable
