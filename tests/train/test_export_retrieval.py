"""Export of a retrieval answer (issue 48): a sentence-transformers folder whose ``encode_query`` and
``encode_document`` give the query and document prompts as promptsearch scored them, read by sentence-transformers
alone (another process that cannot import promptsearch), from the library and from a retrieval results file.

The reference vectors are promptsearch's own (``encode_reps`` of ``Representation.of(prompt + "[X]", readout)``),
which go through sentence-transformers' modules on the same token ids in float32: the two sides differ only by how
the rows are batched and padded, ~1e-7 on these O(1) vectors; ``vec_tol("fp32", ...)`` (1e-5) is the suite's bar
for that."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
from conftest import _sentences, json_without_promptsearch, make_encoder, vec_tol

from promptsearch.cli import main
from promptsearch.encoding.reps import rep_from_key
from promptsearch.errors import PromptSearchError
from promptsearch.representation import Representation
from promptsearch.train.export import export_retrieval

TEXTS = _sentences(24)
TOL = vec_tol("fp32", None, None)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def ours(enc, texts, prompt: str, readout: str) -> np.ndarray:
    """promptsearch's vectors of ``prompt + "[X]"`` pooled by ``readout``: what a retrieval search scores."""
    rep = rep_from_key(Representation.of(prompt + "[X]", readout=readout))
    return enc.encode_reps(texts, [rep])[rep]


def st_model(folder):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(folder), device="cpu")  # no trust_remote_code


@pytest.fixture(scope="module")
def prompted_source(tiny_bert_dir, tmp_path_factory):
    """A sentence-transformers folder of the tiny BERT with a stack of its own (CLS pooling, Dense, Normalize,
    20 tokens) and a default prompt 'own: ', which the export must keep out of encode_query / encode_document."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Dense, Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    tr = Transformer(str(tiny_bert_dir), max_seq_length=20)
    torch.manual_seed(3)
    mods = [tr, Pooling(32, pooling_mode="cls"), Dense(32, 16, activation_function=torch.nn.Tanh()), Normalize()]
    out = tmp_path_factory.mktemp("src") / "st"
    SentenceTransformer(modules=mods, prompts={"query": "own: "}, default_prompt_name="query",
                        device="cpu").save(str(out))
    return out


@pytest.mark.parametrize("query, document, readout, include_prompt", [
    ("this sentence : ", "means : ", "sentence-mean", False),  # words of the tiny vocabulary ('query' is [UNK])
    ("", "means : ", "sentence-cls", False),  # no query prompt: [X] @cls, one Pooling (include_prompt=False) for both
    ("Instruct: find the sentence\nQuery: ", "", "mean", True),
    ("", "", "max", True),
])
def test_encode_query_and_encode_document_give_what_was_scored(prompted_source, tmp_path, query, document, readout,
                                                              include_prompt):
    out = tmp_path / "out"
    said = export_retrieval(str(prompted_source), query, document, readout, out)
    cfg = json.loads((out / "config_sentence_transformers.json").read_text())
    assert cfg["prompts"] == {"query": query, "document": document} and cfg["default_prompt_name"] is None
    pool = json.loads((out / "1_Pooling" / "config.json").read_text())
    mode = readout.removeprefix("sentence-")
    assert pool[f"pooling_mode_{mode}_token" if mode == "cls" else f"pooling_mode_{mode}_tokens"] is True
    assert pool.get("include_prompt", True) is include_prompt
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Dense", "Normalize"]
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 20  # the source's
    enc = make_encoder(prompted_source)
    st = st_model(out)
    want_q, want_d = ours(enc, TEXTS, query, readout), ours(enc, TEXTS, document, readout)
    np.testing.assert_allclose(st.encode_query(TEXTS), want_q, rtol=0, atol=TOL)
    np.testing.assert_allclose(st.encode_document(TEXTS), want_d, rtol=0, atol=TOL)
    np.testing.assert_allclose(st.encode(TEXTS), ours(enc, TEXTS, "", readout), rtol=0, atol=TOL)  # no prompt
    if query != document:  # the two sides really differ (the check above could not pass with one prompt for both)
        assert np.abs(want_q - want_d).max() > 100 * TOL
    lines = said.splitlines()
    assert lines[1] == f"  .encode_query(queries) gives {Representation.of(query + '[X]', readout=readout).shown}"
    assert lines[2] == f"  .encode_document(documents) gives " \
                       f"{Representation.of(document + '[X]', readout=readout).shown}"
    assert all("\n" not in line for line in lines)  # a prompt's newline shown escaped: one line each


def test_sides_read_out_two_ways_that_one_pooling_computes_are_exported(tiny_bert_dir, tmp_path):
    """A hand-written answer may give the sides two read-outs: mean for a query with no prompt and sentence-mean for
    a prompted document are one Pooling (include_prompt=False changes nothing where there is no prompt)."""
    out = tmp_path / "out"
    export_retrieval(str(tiny_bert_dir), "", "this sentence : ", "mean", out, document_readout="sentence-mean")
    enc, st = make_encoder(tiny_bert_dir), st_model(out)
    np.testing.assert_allclose(st.encode_query(TEXTS), ours(enc, TEXTS, "", "mean"), rtol=0, atol=TOL)
    np.testing.assert_allclose(st.encode_document(TEXTS), ours(enc, TEXTS, "this sentence : ", "sentence-mean"), rtol=0,
                               atol=TOL)


@pytest.mark.parametrize("query, document, readout, document_readout, message", [
    ("q: ", "d: ", "mean", "cls", "Router"),
    ("q: ", "d: ", "mean", "sentence-mean", "Router"),  # both prompted: include_prompt differs
    ("q: ", "d: ", "mask", None, "reads the [MASK] state"),
    ("q: ", "d [MASK] : ", "sentence-mean", None, "the document side"),
    ("q: ", "d: ", "maxi", None, "unknown read-out 'maxi'"),
])
def test_what_one_folder_cannot_compute_is_refused_before_anything_is_written(tiny_bert_dir, tmp_path, query,
                                                                              document, readout, document_readout,
                                                                              message):
    with pytest.raises(PromptSearchError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        export_retrieval(str(tiny_bert_dir), query, document, readout, tmp_path / "out",
                         document_readout=document_readout)
    assert "\n" not in str(err.value)
    assert list(tmp_path.iterdir()) == []  # no folder, no half-written temporary one


def _results(path, best, model="default", **extra) -> str:
    """A retrieval results file as the retrieval search writes it (interface 3), by hand."""
    d = {"kind": "retrieval", "version": 1, "model": model,
         "data": {"name": "hand", "fingerprint": "0" * 16, "queries": 2, "corpus": 3}, "precision": "fp32",
         "entries": [], "own": {"query": "", "document": "", "readout": "mean"}, **extra}
    if best is not None:
        d["best"] = best
    path.write_text(json.dumps(d), encoding="utf-8")
    return str(path)


def test_a_retrieval_results_file_exports_for_encode_query_and_encode_document_without_promptsearch(
        default_enc, tmp_path, capsys):
    """`promptsearch export RESULTS --out DIR` on a retrieval results file of the default model: the folder's
    encode_query / encode_document, in a process that cannot import promptsearch, give the vectors promptsearch
    computes for the file's best prompts."""
    query, document = "Instruct: Given a query, retrieve relevant passages\nQuery: ", "passage: "
    res = _results(tmp_path / "r.json", {"query": query, "document": document, "readout": "sentence-mean"})
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["export", res, "--out", str(out)]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"wrote {out}: SentenceTransformer({str(out)!r}), the retrieval prompts of default:"
    assert printed[1:4] == ["  .encode_query(queries) gives Instruct: Given a query, retrieve relevant passages\\n"
                            "Query: [X] @sentence-mean",
                            "  .encode_document(documents) gives passage: [X] @sentence-mean",
                            "  .encode(texts) adds no prompt"]
    assert printed[4].startswith("  mean pooling without the prompt + Normalize, 256 tokens, query prompt ")
    want_q, want_d = ours(default_enc, TEXTS, query, "sentence-mean"), ours(default_enc, TEXTS, document,
                                                                            "sentence-mean")
    got = json_without_promptsearch(f"""
st = SentenceTransformer({str(out)!r}, device="cpu")
texts = {TEXTS!r}
q, d, e = st.encode_query(texts), st.encode_document(texts), st.encode(texts)
print(json.dumps([q.tolist(), d.tolist(), e.tolist()]))
""", tmp_path)
    q, d, e = (np.array(v) for v in got)
    np.testing.assert_allclose(q, want_q, rtol=0, atol=TOL)
    np.testing.assert_allclose(d, want_d, rtol=0, atol=TOL)
    np.testing.assert_allclose(e, ours(default_enc, TEXTS, "", "mean"), rtol=0, atol=TOL)
    assert np.abs(want_q - want_d).max() > 100 * TOL  # the sides differ: a swapped or shared prompt would fail


@pytest.mark.parametrize("best, argv, message", [
    (None, [], 'holds no chosen retrieval prompts yet (no "best")'),
    ({"query": "q: ", "readout": "mean"}, [], 'its "best" gives no document as text'),
    ({"query": "q: ", "document": "d: ", "readout": {"query": "mean", "document": "cls"}}, [], "Router"),
    ({"query": "q: ", "document": "d: ", "readout": "mask"}, [], "reads the [MASK] state"),
    ({"query": "q: ", "document": "d: ", "readout": "mean"}, ["--model", "other"], "drop --model"),
    ({"query": "q: ", "document": "d: ", "readout": "mean"}, ["--template", "[X] @mean"], "one of the two"),
])
def test_a_bad_retrieval_results_file_is_one_line(tiny_bert_dir, tmp_path, capsys, best, argv, message):
    res = _results(tmp_path / "r.json", best, model=str(tiny_bert_dir))
    out = tmp_path / "out"
    capsys.readouterr()
    code = main(["export", res, "--out", str(out), *argv])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]  # nothing written


def test_a_retrieval_results_file_of_a_tiny_model_exports_through_the_command(tiny_bert_dir, tmp_path, capsys):
    """The file's model is the one exported (here a folder, not the default), and --model naming it is accepted."""
    res = _results(tmp_path / "r.json", {"query": "this : ", "document": "", "readout": "cls"},
                   model=str(tiny_bert_dir))
    out = tmp_path / "out"
    assert main(["export", res, "--out", str(out), "--model", str(tiny_bert_dir)]) == 0
    enc, st = make_encoder(tiny_bert_dir), st_model(out)
    np.testing.assert_allclose(st.encode_query(TEXTS), ours(enc, TEXTS, "this : ", "cls"), rtol=0, atol=TOL)
    np.testing.assert_allclose(st.encode_document(TEXTS), ours(enc, TEXTS, "", "cls"), rtol=0, atol=TOL)


def evaluator_on_folder(folder, data) -> dict:
    """sentence-transformers' own numbers for an exported folder: ``InformationRetrievalEvaluator`` with its
    defaults (the model's similarity, cosine; encode_query / encode_document with the folder's prompts)."""
    # lazy: sentence-transformers takes seconds to import, and only these comparisons need the evaluator
    from sentence_transformers.sentence_transformer.evaluation import InformationRetrievalEvaluator

    st = st_model(folder)
    assert st.similarity_fn_name == "cosine"
    got = InformationRetrievalEvaluator(data.queries, data.corpus, data.relevant, name="t")(st)
    return {k.removeprefix("t_cosine_"): v for k, v in got.items()}


def recorded_equals_the_evaluator(model, enc, data, candidates, tmp_path) -> list[float]:
    """Score ``candidates`` with a RetrievalTask (the corpus stored in float32, as below the size limit), export
    each, run the evaluator on the folder: every metric equal, exactly. Both sides take the cosine of float32
    vectors computed by the same sentence-transformers modules, with the same normalise-then-``torch.mm`` in chunks
    of the same size, and form each metric with the same float64 operations (tests/eval/test_ir_metrics.py): the
    only difference left is how the two encoders batch and pad rows (measured: <= 3e-7 on a score), which can reorder
    only documents whose scores lie that close. That is not always so: on the tiny model and these 20 queries,
    ``this sentence : ``/``means : `` read at ``cls`` swaps one pair deep in a top 100 (map@100 off by 3e-5, every
    metric at k <= 10 equal); the candidates here have no such pair. Returns the nDCG@10s."""
    from promptsearch.eval.retrieval import RetrievalTask

    task = RetrievalTask(data, cache_dir=tmp_path / "cache")
    got = task.evaluate(enc, candidates)
    assert all(s.dtype == np.float32 for s in task._corpus.values())
    out = []
    for i, c in enumerate(candidates):
        folder = tmp_path / f"m{i}"
        export_retrieval(model, c.query, c.document, c.readout, folder)
        want = evaluator_on_folder(folder, data)
        assert set(want) == set(got[c]) and got[c] == want, c.shown
        out.append(got[c]["ndcg@10"])
    return out


@pytest.mark.parametrize("model", ["tiny_bert_encoder_only_dir", "tiny_roberta_dir", "tiny_xlmr_dir", "tiny_gpt2_dir"])
def test_recorded_metrics_are_the_evaluators_on_the_exported_folder(model, request, tmp_path):
    """WordPiece, byte-level BPE, SentencePiece and a causal LM's BPE: the prompt joined to the text as
    sentence-transformers joins it, tokenized by each; the recorded metrics equal its evaluator's on each export."""
    from conftest import small_retrieval_data

    from promptsearch.eval.retrieval import RetrievalCandidate

    folder = request.getfixturevalue(model)
    data = small_retrieval_data(20, 300)
    cands = [RetrievalCandidate.of("", "", "mean"),
             RetrievalCandidate.of("this sentence : ", "means : ", "sentence-mean")]
    ndcg = recorded_equals_the_evaluator(str(folder), make_encoder(folder), data, cands, tmp_path)
    assert ndcg[0] != ndcg[1] and all(0 < x < 1 for x in ndcg)  # the two candidates rank differently, mid-range


@pytest.mark.parametrize("layout, mode", [("today", "mean"), ("today", "cls"), ("legacy", "mean")])
def test_the_models_own_leaves_its_prompts_out_where_its_pooling_does(layout, mode, tiny_bert_dir, tmp_path):
    """A folder whose Pooling leaves the prompt out (include_prompt=False), with query and document prompts but no
    default prompt: encode_query pools the query's own tokens. The model's own candidate is that (it was once read
    at the Pooling's mode with the prompt pooled: its number was not sentence-transformers', and an export of it
    pooled the prompt); its recorded metrics are the evaluator's on the folder itself, and its export encodes as
    the folder does."""
    from conftest import small_retrieval_data

    from promptsearch.eval.retrieval import RetrievalCandidate, RetrievalTask
    from promptsearch.search.retrieval import own_candidate
    from tests.encoding.test_fidelity import st_folder

    folder = st_folder(tiny_bert_dir, tmp_path / "st", mode=mode, include_prompt=False, layout=layout)
    config = folder / "config_sentence_transformers.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "default_prompt_name": None,
                                  "prompts": {"query": "this sentence : ", "document": "means : "}}))
    enc = make_encoder(folder)
    own = own_candidate(enc)
    assert own == RetrievalCandidate.of("this sentence : ", "means : ", f"sentence-{mode}")
    data = small_retrieval_data(20, 300)
    got = RetrievalTask(data, cache_dir=tmp_path / "cache").evaluate(enc, [own])[own]
    want = evaluator_on_folder(folder, data)
    assert set(got) == set(want) and got == pytest.approx(want, rel=0, abs=1e-6)
    export_retrieval(str(folder), own.query, own.document, own.readout, tmp_path / "m")
    original, exported = st_model(folder), st_model(tmp_path / "m")
    for side in ("encode_query", "encode_document"):
        np.testing.assert_allclose(getattr(exported, side)(TEXTS), getattr(original, side)(TEXTS), rtol=0, atol=TOL)


@pytest.mark.slow  # the default model over the demo corpus (2,647 sentences) twice here and twice in the evaluator
@pytest.mark.realmodel
def test_recorded_metrics_are_the_evaluators_on_the_default_models_export(default_enc, tmp_path):
    from promptsearch.data.retrieval import demo_task
    from promptsearch.eval.retrieval import RetrievalCandidate, sample_queries

    data = sample_queries(demo_task(), 40, seed=0)
    cands = [RetrievalCandidate.of("", "", "mean"), RetrievalCandidate.of("query: ", "passage: ", "sentence-mean")]
    ndcg = recorded_equals_the_evaluator("default", default_enc, data, cands, tmp_path)
    assert 0.5 < ndcg[0] < 1


def test_the_export_keeps_the_max_length_the_search_scored_with(tiny_bert_dir, tmp_path, capsys):
    """A search run with --max-length N scored inputs cut at N: its folder cuts them there too (found by review:
    the export used the model's own length), and another --max-length is refused."""
    best = {"query": "q: ", "document": "", "readout": "mean"}
    res = _results(tmp_path / "r.json", best, model=str(tiny_bert_dir), numbers={"pooled_max_length": 12})
    assert main(["export", res, "--out", str(tmp_path / "m")]) == 0
    assert st_model(tmp_path / "m").max_seq_length == 12
    capsys.readouterr()
    assert main(["export", res, "--out", str(tmp_path / "m2"), "--max-length", "16"]) == 2
    err = capsys.readouterr().err
    assert "scored with --max-length 12" in err and len(err.strip().splitlines()) == 1, err
