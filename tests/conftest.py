"""Shared fixtures: tiny randomly initialised BERT / RoBERTa / DistilBERT MLMs with real
tokenizers, saved to disk so the tests go through the same loading path as a real model.
No downloads: vocabularies are built from the STS-B dev sentences in the shared data."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("PROMPTSEARCH_DATA_DIR", REPO.parent / "shared" / "data" / "sts"))
# for tests that run several searching processes at once on two cores: one thread each, no oversubscription
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
os.environ.setdefault("PROMPTSEARCH_DATA_DIR", str(DATA))
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
# The commands' default precision is measured per CPU (promptsearch.encoding.precision): a suite run would then be
# bf16 on one machine and fp32 on the next, and the measurement would write the user's cache. The suite pins it, so a
# run is the same everywhere; tests of bf16 ask for it (PRECISIONS below), tests of the measurement unpin it
# (cpu_measured), and PROMPTSEARCH_PRECISION=bf16 runs the whole suite's defaults in bf16.
os.environ.setdefault("PROMPTSEARCH_PRECISION", "fp32")

# Under pytest-xdist (-n N) each worker gets its share of the cores, it and the commands it starts:
# N workers each running torch's default of one thread a core would oversubscribe the machine many
# times over (the suite crawled to a halt with -n 8 on 16 cores).
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    _threads = str(max(1, (os.cpu_count() or 1) // _WORKERS))
    os.environ["OMP_NUM_THREADS"] = os.environ["MKL_NUM_THREADS"] = _threads
    torch.set_num_threads(int(_threads))

# Tests whose numbers depend on the CPU's kernels or on the precision: .ci/run runs them a second
# time with AVX2-only kernels (scripts/test-avx2.sh), so a machine with AVX-512/AMX catches what
# would fail on a CPU without them.
KERNEL_SENSITIVE = {"test_encoder", "test_evaluate", "test_fidelity", "test_search", "test_racing", "test_train",
                    "test_promptbert_reference",
                    "test_default_model", "test_causal", "test_predict", "test_user_data", "test_head"}


# Tests that load the real default model (MiniLM): marked ``realmodel`` here (the default_enc fixture,
# these modules) or by hand (a command run with --model default).
REAL_MODEL = {"test_default_model"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        if item.module.__name__ in KERNEL_SENSITIVE or "precision" in params:
            item.add_marker(pytest.mark.kernels)
        if item.module.__name__ in REAL_MODEL or "default_enc" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.realmodel)

# ---- child processes: one way to start them, none outlives its test ---------------------------------
_CHILDREN: list[subprocess.Popen] = []


def _child_setup() -> None:
    """In the child, before Python starts: SIGINT back to its default. A suite started with SIGINT
    ignored (``nohup pytest &``: a background job of a shell) passes SIG_IGN on, Python then installs no
    KeyboardInterrupt handler, and a test's Ctrl-C would do nothing. And on Linux, SIGKILL when the
    test process dies, however it dies (killed itself, the suite stopped): no child outlives the suite."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the fixture below still ends a test's children
        pass


def spawn(cmd: list, env: dict | None = None, **kw) -> subprocess.Popen:
    """Start ``cmd`` as a child of the current test (text pipes unless told otherwise; ``env`` entries
    of None are removed). It runs in its own process group, which the autouse fixture below kills at
    the test's end if it is still running — pass, fail or timeout."""
    env = {k: v for k, v in {**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}.items() if v is not None}
    for name in ("stdout", "stderr"):
        kw.setdefault(name, subprocess.PIPE)
    kw.setdefault("text", True)
    p = subprocess.Popen([str(c) for c in cmd], env=env, preexec_fn=_child_setup, start_new_session=True, **kw)
    _CHILDREN.append(p)
    return p


def cli(argv: list, env: dict | None = None, **kw) -> subprocess.Popen:
    """``python -m promptsearch ARGV`` as a child of the current test (see :func:`spawn`)."""
    return spawn([sys.executable, "-m", "promptsearch", *argv], env, **kw)


def run_child(cmd: list, env: dict | None = None, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd`` to its end (a timeout fails the test; the child is killed with it)."""
    p = spawn(cmd, env, **kw)
    out, err = p.communicate(timeout=timeout)
    return subprocess.CompletedProcess(p.args, p.returncode, out, err)


def run_cli(argv: list, env: dict | None = None, timeout: float = 600, **kw) -> subprocess.CompletedProcess:
    """``python -m promptsearch ARGV`` run to its end (see :func:`run_child`)."""
    return run_child([sys.executable, "-m", "promptsearch", *argv], env, timeout, **kw)


def dead_process() -> str:
    """A process on this host that no longer runs, named as ``study.this_process`` names one (``host:pid``): a
    child that printed its pid and exited."""
    import socket

    pid = run_child([sys.executable, "-c", "import os; print(os.getpid())"]).stdout
    return f"{socket.gethostname()}:{pid.strip()}"


_WITHOUT_PROMPTSEARCH = """
import sys, json, importlib.abc
class NoPromptsearch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "promptsearch":
            raise ImportError("promptsearch is not installed here")
sys.meta_path.insert(0, NoPromptsearch())
import warnings; warnings.simplefilter("ignore")
from sentence_transformers import SentenceTransformer
"""


def _path_without_the_checkout() -> str | None:
    """$PYTHONPATH without this checkout (the meta-path finder keeps promptsearch out either way; the packages the
    path names, as a machine that keeps them outside site-packages does, stay found); None: no path is left."""
    keep = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
            if p and not Path(p).resolve().is_relative_to(REPO)]
    return os.pathsep.join(keep) or None


def json_without_promptsearch(body: str, cwd, timeout: float = 300):
    """Run ``body`` in a Python process that cannot import promptsearch (sentence-transformers imported, ``json``
    and ``sys`` at hand), check promptsearch stayed out of it, and return the JSON its last line of output holds
    (``body`` prints it): what a user without promptsearch gets from a folder it wrote."""
    code = (_WITHOUT_PROMPTSEARCH + body.strip("\n") + "\n"
            + 'assert not any(m.split(".")[0] == "promptsearch" for m in sys.modules)\n')
    done = run_child([sys.executable, "-c", code], {"PYTHONPATH": _path_without_the_checkout()}, timeout=timeout,
                     cwd=cwd)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(autouse=True)
def _no_process_outlives_its_test():
    """Every child a test started (and their children) is gone when the test ends."""
    start = len(_CHILDREN)
    yield
    for p in _CHILDREN[start:]:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        for f in (p.stdout, p.stderr, p.stdin):
            if f is not None:
                f.close()
    del _CHILDREN[start:]


@pytest.fixture(autouse=True)
def _score_cache_of_its_own(tmp_path, monkeypatch):
    """No test reads or writes the user's score cache (~/.cache/promptsearch/scores.jsonl): each has its own."""
    monkeypatch.setenv("PROMPTSEARCH_CACHE", str(tmp_path / "scores.jsonl"))


@pytest.fixture
def cpu_measured(tmp_path, monkeypatch):
    """``cpu_measured(ratio)``: the default precision unpinned and measured on a CPU where bf16 takes ``ratio`` of
    float32's time (a fake measurement, counted in the returned list), cached in a cache folder of the test's own."""
    from promptsearch.encoding import batching, precision

    calls: list[float] = []

    def use(ratio: float) -> list[float]:
        monkeypatch.delenv("PROMPTSEARCH_PRECISION", raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
        monkeypatch.setattr(precision, "measure_ratio", lambda: calls.append(ratio) or ratio)
        batching._cpu_choice_once.cache_clear()
        return calls

    yield use
    batching._cpu_choice_once.cache_clear()


def write_vocab(tmp_path, **kw) -> str:
    """A small greedy vocabulary file (relations, prefix tokens, wrappers; ``kw`` replaces any of them)."""
    import json

    v = {"relations": ["means", "is", "", "like"], "prefix_tokens": ["This", "sentence", ":", "a"], "wrappers": ['"'],
         **kw}
    p = Path(tmp_path) / "vocab.json"
    p.write_text(json.dumps(v), encoding="utf-8")
    return str(p)


# ---- a throwaway PostgreSQL server -----------------------------------------------------------------
@pytest.fixture(scope="session")
def postgres_cluster():
    """A PostgreSQL cluster made for this test session (:class:`promptsearch.pgcluster.Cluster`: initdb
    in a temporary folder, as the ``postgres`` user when the suite runs as root; password
    authentication; a Unix socket, no TCP port); stopped and removed at the end, pass or fail.
    Skipped, with the reason, where no server binaries or no psycopg are installed."""
    from promptsearch.pgcluster import Cluster, server_bin

    if server_bin() is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl); "
                    "bash scripts/setup.sh --dev installs them where apt exists")
    pytest.importorskip("psycopg", reason="psycopg is not installed; bash scripts/setup.sh --dev installs it")
    cluster = Cluster()
    with cluster:
        yield cluster


@pytest.fixture(scope="session")
def postgres_url(postgres_cluster):
    """``postgresql://…`` of :func:`postgres_cluster`."""
    return postgres_cluster.url


PAPER_T = 'This sentence : "[X]" means [MASK] .'
ROBERTA_T = "This sentence : '[X]' means [MASK] ."


def _sentences(n=400) -> list[str]:
    out = []
    with open(DATA / "STSBenchmark" / "sts-dev.csv", encoding="utf-8") as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            out += [p[5], p[6]]
            if len(out) >= n:
                break
    return out


def _tiny_config_kwargs():
    return dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                max_position_embeddings=64, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1)


@pytest.fixture(scope="session")
def tiny_bert_dir(tmp_path_factory) -> Path:
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    d = tmp_path_factory.mktemp("tiny-bert")
    words = sorted({w for s in _sentences() for w in s.lower().split()})
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    extra = ["this", "sentence", "means", ":", '"', "'", ".", "of", "##s", "##ing", "##ed"]
    vocab = list(dict.fromkeys(specials + extra + words))[:1500]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tok = BertTokenizer(vocab=str(d / "vocab.txt"))
    tok.save_pretrained(d)
    torch.manual_seed(0)
    model = BertForMaskedLM(BertConfig(vocab_size=len(vocab), pad_token_id=0, **_tiny_config_kwargs()))
    model.save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_bert_encoder_only_dir(tmp_path_factory, tiny_bert_dir) -> Path:
    """A checkpoint with no MLM head (like the default MiniLM)."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    d = tmp_path_factory.mktemp("tiny-bert-nohead")
    AutoTokenizer.from_pretrained(tiny_bert_dir).save_pretrained(d)
    torch.manual_seed(1)
    vocab = len((tiny_bert_dir / "vocab.txt").read_text(encoding="utf-8").split("\n")) - 1
    BertModel(BertConfig(vocab_size=vocab, pad_token_id=0, **_tiny_config_kwargs())).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_roberta_dir(tmp_path_factory) -> Path:
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaForMaskedLM, RobertaTokenizer

    d = tmp_path_factory.mktemp("tiny-roberta")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(_sentences() + ["This sentence : 'x' means y ."] * 5, vocab_size=600,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    bpe.save_model(str(d))
    tok = RobertaTokenizer(vocab=str(d / "vocab.json"), merges=str(d / "merges.txt"))
    tok.save_pretrained(d)
    torch.manual_seed(0)
    cfg = RobertaConfig(vocab_size=len(tok), pad_token_id=1, bos_token_id=0, eos_token_id=2,
                        **{**_tiny_config_kwargs(), "max_position_embeddings": 66})
    RobertaForMaskedLM(cfg).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_distilbert_dir(tmp_path_factory, tiny_bert_dir) -> Path:
    from transformers import AutoTokenizer, DistilBertConfig, DistilBertForMaskedLM

    d = tmp_path_factory.mktemp("tiny-distilbert")
    tok = AutoTokenizer.from_pretrained(tiny_bert_dir)
    tok.save_pretrained(d)
    torch.manual_seed(0)
    DistilBertForMaskedLM(DistilBertConfig(vocab_size=len(tok), dim=32, n_layers=2, n_heads=4, hidden_dim=37,
                                           max_position_embeddings=64, pad_token_id=0)).save_pretrained(d)
    return d


# Where things run. Library tests build their encoders on the CPU (they compare with forwards the
# test computes by hand there); the CLI, like any user, takes the default device: CUDA where there
# is one. A test that compares what a command printed with an encoder of its own builds that
# encoder on CLI_DEVICE, so both sides run the same arithmetic on one device.
from promptsearch.model.loading import default_device  # noqa: E402 - beside its one use

CLI_DEVICE = str(default_device())  # the library's own rule (no launcher here: cuda, else cpu)


def make_encoder(path, device="cpu", **kw):
    from promptsearch import PromptEncoder

    kw.setdefault("bf16", False)
    kw.setdefault("show_progress_bar", False)
    return PromptEncoder.from_pretrained(str(path), device=device, **kw)


@pytest.fixture(scope="session")
def bert_enc(tiny_bert_dir):
    return make_encoder(tiny_bert_dir)


# Tests that compare numbers run in both precisions, whatever the CPU (bf16 autocast works
# everywhere, slowly where there is no AMX/AVX512-BF16).
PRECISIONS = ["fp32", "bf16"]


def vec_tol(precision: str, got, fp32) -> float:
    """Absolute tolerance for states computed two ways (other batching, padding, a manual
    forward). float32 rounding differences stay ~1e-6 on these O(1) states. In bf16 each way
    is off from the exact value by some d, measured here as the distance of ``got`` from the
    same states computed in float32 (``fp32``); two bf16 results then lie within 2d of each
    other: allow 4d (the other way's d may be a little larger) plus the float32 allowance."""
    if precision == "fp32":
        return 1e-5
    return 4 * float(np.abs(np.asarray(got) - np.asarray(fp32)).max()) + 1e-5


@pytest.fixture(scope="session")
def encoders(tiny_bert_dir, tiny_roberta_dir):
    """(kind, precision) -> a tiny encoder, made once per session."""
    made = {}
    dirs = {"bert": tiny_bert_dir, "roberta": tiny_roberta_dir}

    def get(kind: str, precision: str):
        if (kind, precision) not in made:
            made[kind, precision] = make_encoder(dirs[kind], bf16=precision == "bf16")
        return made[kind, precision]
    return get


@pytest.fixture(scope="session")
def roberta_enc(tiny_roberta_dir):
    return make_encoder(tiny_roberta_dir)


@pytest.fixture(scope="session")
def default_enc():
    """The real bundled MiniLM (float32 unless a test asks otherwise)."""
    return make_encoder("default")


@pytest.fixture(scope="session")
def sentences():
    return _sentences()


# ---- tiny causal LMs (GPT-2, OPT, Llama) with real tokenizer classes -----------------------------

CAUSAL_T = 'This sentence : "[X]" means in one word:"'


def _bpe_files(d: Path, byte_level: bool = True):
    """A BPE vocabulary trained on STS-B dev sentences (byte-level for GPT-2/OPT, metaspace for Llama)."""
    import json

    from tokenizers import ByteLevelBPETokenizer, SentencePieceBPETokenizer

    texts = _sentences() + [CAUSAL_T.replace("[X]", "x") + 'y"'] * 5
    if byte_level:
        bpe = ByteLevelBPETokenizer()
        bpe.train_from_iterator(texts, vocab_size=600, special_tokens=["<|endoftext|>", "<pad>", "</s>", "<unk>"])
    else:
        bpe = SentencePieceBPETokenizer()
        bpe.train_from_iterator(texts, vocab_size=600, special_tokens=["<unk>", "<s>", "</s>"])
    bpe.save_model(str(d))
    vocab = json.loads((d / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(x.split()) for x in (d / "merges.txt").read_text(encoding="utf-8").splitlines()[1:] if x.strip()]
    return vocab, merges


def _tiny_causal_kwargs():
    return dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
                max_position_embeddings=64)


@pytest.fixture(scope="session")
def tiny_gpt2_dir(tmp_path_factory) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2Tokenizer

    d = tmp_path_factory.mktemp("tiny-gpt2")
    vocab, merges = _bpe_files(d)
    tok = GPT2Tokenizer(vocab=vocab, merges=merges)
    tok.save_pretrained(d)
    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=32, n_layer=2, n_head=4, n_positions=64,
                               bos_token_id=0, eos_token_id=0)).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_opt_dir(tmp_path_factory) -> Path:
    from transformers import GPT2Tokenizer, OPTConfig, OPTForCausalLM

    d = tmp_path_factory.mktemp("tiny-opt")
    vocab, merges = _bpe_files(d)
    tok = GPT2Tokenizer(vocab=vocab, merges=merges, bos_token="</s>",
                        eos_token="</s>", pad_token="<pad>", unk_token="<unk>", add_bos_token=True)
    tok.save_pretrained(d)
    torch.manual_seed(0)
    OPTForCausalLM(OPTConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             ffn_dim=37,
                             max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=tok.pad_token_id,
                             bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaTokenizer

    d = tmp_path_factory.mktemp("tiny-llama")
    vocab, merges = _bpe_files(d, byte_level=False)
    tok = LlamaTokenizer(vocab=vocab, merges=merges)
    tok.save_pretrained(d)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), **_tiny_causal_kwargs(), num_key_value_heads=2,
                                 bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id)).save_pretrained(d)
    return d


# ---- tiny SentencePiece models (XLM-R, T5 encoder, DeBERTa-v2) with real tokenizer classes -------------------

def _sentencepiece_vocab(**ids) -> list[tuple[str, float]]:
    """A unigram SentencePiece vocabulary trained on STS-B dev sentences ((piece, score) pairs, ids as given)."""
    import io

    import sentencepiece as spm

    buf = io.BytesIO()
    texts = _sentences() + ["query: passage: This sentence : means in one word"] * 5
    spm.SentencePieceTrainer.train(sentence_iterator=iter(texts), model_writer=buf, vocab_size=400,
                                   model_type="unigram",
                                   character_coverage=1.0, minloglevel=2, hard_vocab_limit=False, **ids)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    return [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]


@pytest.fixture(scope="session")
def tiny_xlmr_dir(tmp_path_factory) -> Path:
    from transformers import XLMRobertaConfig, XLMRobertaForMaskedLM, XLMRobertaTokenizer

    d = tmp_path_factory.mktemp("tiny-xlmr")
    tok = XLMRobertaTokenizer(vocab=_sentencepiece_vocab(bos_id=0, pad_id=1, eos_id=2, unk_id=3))
    tok.save_pretrained(d)
    torch.manual_seed(0)
    XLMRobertaForMaskedLM(XLMRobertaConfig(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                           bos_token_id=tok.bos_token_id,
                                           eos_token_id=tok.eos_token_id,
                                           **{**_tiny_config_kwargs(),
                                              "max_position_embeddings": 66})).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_t5_encoder_dir(tmp_path_factory) -> Path:
    """A T5 encoder alone (no decoder, no mask token), as sentence-t5 / GTR-style folders hold."""
    from transformers import T5Config, T5EncoderModel, T5Tokenizer

    d = tmp_path_factory.mktemp("tiny-t5-encoder")
    tok = T5Tokenizer(vocab=_sentencepiece_vocab(pad_id=0, eos_id=1, unk_id=2, bos_id=-1), extra_ids=10)
    tok.save_pretrained(d)
    torch.manual_seed(0)
    T5EncoderModel(T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, pad_token_id=0,
                            eos_token_id=1, decoder_start_token_id=0)).save_pretrained(d)
    return d


@pytest.fixture(scope="session")
def tiny_deberta_dir(tmp_path_factory) -> Path:
    from transformers import DebertaV2Config, DebertaV2ForMaskedLM, DebertaV2Tokenizer

    d = tmp_path_factory.mktemp("tiny-deberta")
    tok = DebertaV2Tokenizer(vocab=_sentencepiece_vocab(pad_id=0, bos_id=1, eos_id=2, unk_id=3,
                                                        user_defined_symbols=["[MASK]"]))
    tok.save_pretrained(d)
    torch.manual_seed(0)
    DebertaV2ForMaskedLM(DebertaV2Config(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
                                         **_tiny_config_kwargs())).save_pretrained(d)
    return d


def stsb_dev_csv(path, lo, hi):
    """STS-B dev pairs lo..hi of the shared data as a ``sentence1,sentence2,score`` CSV (a user's own pair set)."""
    import csv

    rows = (DATA / "STSBenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[lo:hi]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["sentence1", "sentence2", "score"])
        for r in rows:
            p = r.split("\t")
            w.writerow([p[5], p[6], p[4]])
    return path


def small_retrieval_data(n_queries=30, n_other=200):
    """The built-in retrieval demo (paraphrase retrieval from STS-B dev) cut down: its first queries, their relevant
    documents and the first ``n_other`` documents."""
    from promptsearch.data.retrieval import demo_task, from_dicts

    d = demo_task()
    qids = list(d.queries)[:n_queries]
    keep = {c for q in qids for c in d.relevant[q]} | set(list(d.corpus)[:n_other])
    return from_dicts({q: d.queries[q] for q in qids}, {c: t for c, t in d.corpus.items() if c in keep},
                      {q: set(d.relevant[q]) for q in qids}, name="small")


def beir_folder(folder, data):
    """``data`` as a BEIR folder: corpus.jsonl, queries.jsonl, qrels/test.tsv."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "corpus.jsonl", "w", encoding="utf-8") as f:
        for cid, text in data.corpus.items():
            f.write(json.dumps({"_id": cid, "title": "", "text": text}) + "\n")
    with open(folder / "queries.jsonl", "w", encoding="utf-8") as f:
        for qid, text in data.queries.items():
            f.write(json.dumps({"_id": qid, "text": text}) + "\n")
    (folder / "qrels").mkdir(exist_ok=True)
    lines = ["query-id\tcorpus-id\tscore"] + [f"{q}\t{c}\t1" for q, cs in data.relevant.items() for c in sorted(cs)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder


class FakeRetrievalTask:
    """A retrieval task whose per-query nDCG@10 the test sets, for the search's rules without a model: a base for
    every candidate (seeded, uniform in [0.3, 0.7) over ``n`` queries) plus ``bonus`` (a dict candidate -> a number
    or a per-query array, or a function of the candidate) plus, with ``wobble``, a small per-candidate noise (that
    standard deviation, seeded by the candidate's text, so scores differ as real prompts' do); counts what it scores
    (``scored``); ``stop_after``: a KeyboardInterrupt once that many are scored."""

    def __init__(self, bonus=None, stop_after=None, wobble=0.0, n=400, description="Find the paraphrase"):
        from types import SimpleNamespace

        self.name = "fake"  # an EvaluationTask's name
        self.data = SimpleNamespace(description=description, name=self.name)
        self.base = np.random.default_rng(0).uniform(0.3, 0.7, n)
        given = bonus or {}
        self.bonus = given if callable(given) else (lambda c: given.get(c, 0.0))
        self.stop_after, self.sd, self.n = stop_after, wobble, n
        self.scored: list = []
        self.corpus_encodings = 0
        self.query_ids = [f"q{i}" for i in range(n)]
        self.corpus_ids = [f"d{i}" for i in range(100)]
        self.screens: list = []  # the tasks ``screen`` made

    def screen(self, share, seed=0):
        """Racing's smaller corpus: the same per-query values (10 documents), its scores counted apart."""
        t = FakeRetrievalTask(self.bonus, n=self.n, wobble=self.sd, description=self.data.description)
        t.corpus_ids = self.corpus_ids[:10]
        self.screens.append(t)
        return t

    def per_query(self, c):
        import hashlib

        seed = int(hashlib.sha256(c.shown.encode("utf-8")).hexdigest()[:8], 16)
        wobble = np.random.default_rng(seed).normal(0, self.sd, self.n) if self.sd else 0.0
        return np.clip(self.base + self.bonus(c) + wobble, 0, 1)

    def evaluate(self, enc, candidates, per_query=False, on_score=None):
        out = {}
        for c in candidates:
            if self.stop_after is not None and len(self.scored) >= self.stop_after:
                raise KeyboardInterrupt
            pq = self.per_query(c)
            m = {"ndcg@10": float(pq.mean()), "mrr@10": 0.5, "per_query": {"ndcg@10": pq}}
            self.scored.append(c)
            out[c] = m
            if on_score is not None:
                on_score(c, m, 0.01)
        return out

