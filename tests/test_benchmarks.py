"""Every benchmark runs, on the CPU and (where there is one) on a GPU: a smoke run of each on a tiny
model, in a subprocess as a user runs it, checking the lines it must print. Speed itself is never
asserted here (benchmarks print ratios measured in one run)."""

import getpass
import json
import os
import re
import sys
import tempfile

import pytest
import torch
from conftest import DATA, REPO, run_child

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
# torch's compile cache: importing torch._dynamo (transformers' model modules do) makes it in the temporary folder
# unless this is set, and sets it in the importing process's environment. Pinned to torch's own default here, so a
# benchmark's child finds it set whether or not this process imported torch._dynamo before.
INDUCTOR = (os.environ.get("TORCHINDUCTOR_CACHE_DIR")
            or os.path.join(tempfile.gettempdir(), f"torchinductor_{getpass.getuser()}"))


def bench(name, *args, timeout=300):
    """Run a benchmark as a user does; it must leave nothing in the temporary folder (its own, here)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = run_child([sys.executable, REPO / "benchmarks" / name, *args],
                        {"PROMPTSEARCH_DATA_DIR": str(DATA), "TMPDIR": tmp, "TORCHINDUCTOR_CACHE_DIR": INDUCTOR},
                        timeout)
        assert out.returncode == 0, out.stderr[-2000:]
        assert "Traceback" not in out.stderr
        assert not os.listdir(tmp), f"{name} left {os.listdir(tmp)} in the temporary folder"
    return out.stdout


@pytest.mark.parametrize("device", DEVICES)
def test_encode_speed(device, tiny_bert_dir):
    out = bench("encode_speed.py", "--model", tiny_bert_dir, "--device", device, "--no-bert-base", "--templates", "3")
    where = "CPU" if device == "cpu" else torch.cuda.get_device_name()
    assert f"on {where}" in out and "naive loop" in out and "speed-up:" in out and "of linear layers" in out
    assert "encode_templates" in out and "host overhead" in out and "sentence-transformers encode" in out
    assert "inside the model forward calls" in out and "the host work proper is the rest" in out
    host = bench("encode_speed.py", "--model", tiny_bert_dir, "--device", device, "--templates", "2", "--host-only",
                 "--repeats", "2")
    assert host.count("host overhead (1-layer 32-wide BERT)") == 2 and "naive loop" not in host
    assert host.count("host work alone (forward: zeros of its shape)") == 2
    prec = bench("encode_speed.py", "--model", tiny_bert_dir, "--device", device, "--precisions", "--no-bert-base")
    assert "the default here: " in prec and "bf16/fp32 = " in prec and "the faster one's" in prec


@pytest.mark.parametrize("device", DEVICES)
def test_train_speed(device, tiny_bert_dir):
    out = bench("train_speed.py", "--model", tiny_bert_dir, "--device", device, "--steps", "1", "--batch-size", "16",
                "--micro-batch", "4")
    assert "micro-batches of 4 rows" in out and "micro-batches of 128 tokens" in out and "x the sentences/s" in out


@pytest.mark.parametrize("device", DEVICES)
def test_causal_speed(device):
    out = bench("causal_speed.py", "--preset", "tiny", "--device", device)
    assert "PromptEncoder" in out and "speed-up" in out and ("RSS" if device == "cpu" else "GPU memory") in out
    assert "suffixes branched from one prefix" in out


@pytest.mark.parametrize("device", DEVICES)
def test_search_speed(device, tiny_bert_dir, tmp_path):
    vocab = tmp_path / "v.json"
    vocab.write_text(json.dumps({"relations": ["means", "is"], "prefix_tokens": ["this", "a"], "wrappers": ['"']}))
    out = bench("search_speed.py", "--model", tiny_bert_dir, "--device", device, "--vocabulary", vocab, "--max-steps",
                1, "--json", tmp_path / "s.json")
    got = json.loads((tmp_path / "s.json").read_text())
    assert {"exhaustive", "racing"} <= set(got) and "against exhaustive greedy" in out
    assert ("int8" in got) == (device == "cpu")  # int8 screening is a CPU route


@pytest.mark.slow  # three fresh processes, ~40 s; its code paths (OptiPrompt, load_texts) are tested elsewhere
def test_corpus_memory(tiny_bert_dir):
    out = bench("corpus_memory.py", "--lines", 3000, "--steps", 1, "--model", tiny_bert_dir, "--device", "cpu")
    assert "datasets (memory-mapped)" in out and "Python list" in out


def test_optuna_speed(tiny_bert_dir):
    out = bench("optuna_speed.py", "--model", tiny_bert_dir, "--dataset", "sts16", "--trials", "4", "--batch", "4",
                "--device", "cpu")
    assert "batch   1:" in out and "batch   4:" in out and "against batch 1:" in out


def test_distributed_speed(tiny_bert_dir, postgres_url):
    # one worker: several workers giving the single process's results is test_postgres's to check
    out = bench("distributed_speed.py", "--model", tiny_bert_dir, "--storage", postgres_url, "--templates", "2",
                "--workers", "1", timeout=600)
    assert "storage overhead (2 candidates" in out and "ms a candidate" in out
    assert "one-process" in out and "1-worker" in out and "2-workers" not in out
    assert out.count("same path and scores") == 2 and "DIFFERENT" not in out


def test_retrieval_speed(tiny_bert_encoder_only_dir, tmp_path):
    out = bench("retrieval_speed.py", "--model", tiny_bert_encoder_only_dir, "--device", "cpu", "--queries", "8",
                "--distractors", "100", "--prompts", "4", "--repeats", "1", "--threads", "1,2",
                "--json", tmp_path / "r.json")
    got = json.loads((tmp_path / "r.json").read_text())
    assert "one pair (the corpus's texts in 2 threads)" in out
    assert "4 query prompts over one document prompt (the corpus's texts in 2 threads)" in out
    assert "with 1 thread: one pair " in out and "in 1 thread, the library default;" in out
    assert got["prompts"] == 4 and got["queries"] == 8 and got["corpus_encodings"] == [1, 1]
    # the ratio by tokens alone: the one pair's query pass against the four prompts' passes, over the corpus
    qp = got["prompted_query_tokens"]
    assert len(qp) == 4 and qp[0] == got["query_tokens"] and min(qp[1:]) > qp[0]  # a prompt adds tokens to a query
    by_tokens = (got["corpus_tokens"] + sum(qp)) / (got["corpus_tokens"] + qp[0])
    assert got["by_tokens"] == pytest.approx(by_tokens, abs=5e-4) and f"prompts cost {by_tokens:.2f}x one pair" in out
    assert sorted(got["by_threads"]) == ["1", "2"] and got["threads"] == 1
    assert all(len(v["one_pair_s"]) == len(v["many_s"]) == 1 for v in got["by_threads"].values())


@pytest.mark.parametrize("device", DEVICES)
def test_tokenize_ahead(device):
    out = bench("tokenize_ahead.py", "--model", "tiny", "--device", device, "--queries", "8", "--prompts", "3",
                "--repeats", "1", "--split-cores", "--ahead", "1,2")
    assert "3 query prompts x 8 queries, model tiny (" in out and "torch 1 thread, tokenizer 1 thread" in out
    assert "tokenized in turn:" in out and "tokenized 1 ahead: " in out and "tokenized 2 ahead: " in out
    assert "tokenized 4 ahead" not in out and "the vectors are identical every way" in out
    diff = float(re.search(r"largest difference from the prompts' own batches (\S+)", out).group(1))
    assert diff < 0.1  # rounding (bf16 at worst) only: a row put under another prompt would differ by its whole size
    out = bench("tokenize_ahead.py", "--model", "tiny", "--device", device, "--corpus", "--repeats", "1",
                "--ahead", "2")
    assert "1 document prompt x 2647 documents, model tiny (" in out and "shared among 2 threads: " in out
    assert "the vectors are identical every way" in out and "shared batches" not in out


def test_retrieval_memory():
    out = bench("retrieval_memory.py", "--corpus", 3000, "--queries", 40, "--dim", 16, "--chunk-size", 700)
    assert "CorpusStore (float16), chunked" in out and "np.memmap (float16), chunked" in out
    assert "full matrix (float32 corpus)" in out and "estimate for the CorpusStore run:" in out
    assert "full matrix / CorpusStore:" in out and "store and memmap give the same metrics: yes" in out
    assert "CorpusStore, 16 query matrices" in out and "the first matrix's metrics equal one's alone: yes" in out
