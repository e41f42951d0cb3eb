"""The pieces every encoding loop shares: sentence preparation, deduplication, padding, precision."""

from __future__ import annotations

import contextlib
import functools
import itertools
from typing import Iterable, Sequence

import numpy as np
import torch

from .precision import ENV_VAR, cpu_choice, forced

SENTENCE_ENDINGS = ".?\"'"


def add_final_period(sentence: str) -> str:
    """The reference evaluation's convention: a sentence not ending in . ? " ' gets a '.'."""
    s = sentence.strip()
    if s and s[-1] not in SENTENCE_ENDINGS:
        s += "."
    return s


def prepare(sentences: Iterable[str], add_period: bool = True) -> list[str]:
    """Whitespace collapsed (as the reference evaluation's SentEval tokens are joined), then the
    final period added unless ``add_period`` is off."""
    out = [" ".join(s.split()) for s in sentences]
    return [add_final_period(s) for s in out] if add_period else out


def unique(items: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """(distinct items in first-seen order, index of each item in that list)."""
    index: dict[str, int] = {}
    inverse = np.fromiter((index.setdefault(s, len(index)) for s in items), dtype=np.int64, count=len(items))
    return list(index), inverse


def length_order(seqs: Sequence[Sequence[int]]) -> np.ndarray:
    """Longest first (stable), so a batch pads to similar lengths."""
    return np.argsort([-len(s) for s in seqs], kind="stable")


def padding(lens: np.ndarray, side: str = "right") -> tuple[np.ndarray, np.ndarray]:
    """(attention mask, shift) of rows of ``lens`` tokens padded to the longest of them: padding on
    the right, or on the ``"left"``, where each row's tokens move right by its shift."""
    width = int(lens.max()) if len(lens) else 0
    shift = width - lens if side == "left" else np.zeros_like(lens)
    col = np.arange(width)[None, :] - shift[:, None]  # each cell's place within its row
    return (col >= 0) & (col < lens[:, None]), shift


def pad(seqs: Sequence[Sequence[int]], pad_id: int, device, side: str = "right") -> tuple[torch.Tensor, torch.Tensor]:
    """Padded ids (on the right, or on the ``"left"``) and their attention mask, built in numpy at once."""
    lens = np.fromiter((len(s) for s in seqs), dtype=np.int64, count=len(seqs))
    att, _ = padding(lens, side)
    ids = np.full(att.shape, pad_id, dtype=np.int64)
    ids[att] = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int64, count=int(lens.sum()))
    return torch.from_numpy(ids).to(device), torch.from_numpy(att.astype(np.int64)).to(device)


MAX_TOKENS = {"cpu": 2048, "cuda": 65536}  # padded tokens per batch by device type (see benchmarks/encode_speed.py)


def default_max_tokens(device) -> int:
    return MAX_TOKENS.get(torch.device(device).type, 4096)


def budget_batches(lengths: Sequence[int] | np.ndarray, max_tokens: int,
                   max_rows: int | None = None) -> list[np.ndarray]:
    """Row indices in batches, longest first (stable): each batch holds as many rows as fit
    ``max_tokens`` padded tokens (rows × its longest row; a row longer than the budget goes alone),
    and at most ``max_rows`` when given (text-embeddings-inference's token-budget batching)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    order = np.argsort(-lengths, kind="stable")
    out, i = [], 0
    while i < len(order):
        k = max(1, int(max_tokens) // max(int(lengths[order[i]]), 1))
        k = min(k, max_rows) if max_rows else k
        out.append(order[i : i + k])
        i += k
    return out


def bf16_supported(device: torch.device) -> bool:
    """Whether bf16 autocast is the faster precision on ``device`` (see ``precision_choice``)."""
    return precision_choice(device)[0]


def precision_choice(device: torch.device) -> tuple[bool, str]:
    """(bf16?, why) — the default precision for ``device``: ``$PROMPTSEARCH_PRECISION`` when it names one; on a GPU,
    bf16 where it has bf16 tensor cores (compute capability 8.0 and newer); on a CPU, the precision measured faster
    there (``cpu_choice``: timed once, cached per CPU and torch version)."""
    device = torch.device(device)
    pinned = forced()
    if pinned:
        return pinned == "bf16", f"{pinned} ({ENV_VAR}={pinned})"
    if device.type == "cuda":
        try:
            major, _ = torch.cuda.get_device_capability(device)
        except Exception:  # noqa: BLE001 - no driver: the encoder will say so itself
            return False, "fp32 (CUDA device not readable)"
        if major >= 8:
            return True, f"bf16 (a GPU with bf16 tensor cores, compute capability {major}.x)"
        return False, f"fp32 (this GPU, compute capability {major}.x, has no bf16 tensor cores)"
    if device.type != "cpu":
        return False, f"fp32 (bf16 autocast is not used on {device.type})"
    return _cpu_choice_once()


@functools.lru_cache(maxsize=1)
def _cpu_choice_once() -> tuple[bool, str]:
    """The CPU's measured choice, read (or measured) once per process."""
    return cpu_choice()


def autocast(device: torch.device, bf16: bool):
    """bf16 autocast on ``device`` when ``bf16``, else nothing."""
    if not bf16:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)
