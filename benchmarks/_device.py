"""What every benchmark shares about the device it runs on: the ``--device`` flag (the library's
default, CUDA where there is one, when not given), timing that waits for the device's queue, and
scratch folders that go when the benchmark ends."""

from __future__ import annotations

import atexit
import contextlib
import shutil
import tempfile
import time

import torch


def add_device_flag(ap) -> None:
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available, else cpu)")


def resolve(device: str | None) -> torch.device:
    """The device a benchmark runs on: the one given, else the library's default (``default_device``)."""
    from promptsearch.model.loading import resolve_device

    return resolve_device(device)


def sync(device) -> None:
    """Wait for the device's queued work (a CUDA kernel returns before it has run)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def timed(device, into: list):
    """Wall seconds of the block, the device's queued work included: appended to ``into``."""
    sync(device)
    t0 = time.perf_counter()
    yield
    sync(device)
    into.append(time.perf_counter() - t0)


def device_name(device) -> str:
    d = torch.device(device)
    return torch.cuda.get_device_name(d) if d.type == "cuda" else "CPU"


def scratch_dir(prefix: str) -> str:
    """A new temporary folder, removed when the benchmark's process exits (it leaves nothing in /tmp)."""
    d = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, d, ignore_errors=True)
    return d


def bert_base_dir(tokenizer, head: bool = True) -> str:
    """A scratch folder holding a randomly initialised BERT-base (``BertConfig()`` defaults, 12 x 768: bert-base's
    FLOPs, no trained weights needed for a speed figure) with ``tokenizer`` (the default model's is bert-base-uncased's
    vocabulary): ``BertForMaskedLM`` with ``head``, else ``BertModel`` (an encoder, as the default model is)."""
    from transformers import BertConfig, BertForMaskedLM, BertModel

    torch.manual_seed(0)
    d = scratch_dir("bert-base-random-")
    (BertForMaskedLM if head else BertModel)(BertConfig(vocab_size=tokenizer.vocab_size)).save_pretrained(d)
    tokenizer.save_pretrained(d)
    return d
