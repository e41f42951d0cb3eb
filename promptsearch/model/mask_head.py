"""The [MASK] prediction head that ``train-head`` learns for a checkpoint without one, and its
file format (safetensors + JSON metadata; the word embeddings are not stored, they come from
the model at load time). Torch only: loading a model needs this, never the training job.

The head is BERT's (dense + GELU + LayerNorm, ``depth`` times) followed by a decoder that
starts as the word embeddings: ``tied`` keeps it tied (the classic head), ``full`` unties
all of it (V×H parameters), and ``rank=r`` adds a trainable low-rank correction
``U·V`` (V×r + r×H) to the frozen word embeddings.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn

from ..errors import ModelError, PromptSearchError
from ..fileio import atomic_replace

HEAD_FORMAT = "promptsearch-mask-head/1"


@dataclass
class HeadConfig:
    hidden_size: int
    vocab_size: int
    decoder: str = "rank"  # "tied" | "rank" | "full"
    rank: int = 64
    depth: int = 1
    layer: int = -1  # hidden_states index the head reads (-1 = last layer)

    def validate(self) -> "HeadConfig":
        if self.decoder not in ("tied", "rank", "full"):
            raise PromptSearchError(f"decoder {self.decoder!r}: choose tied, rank or full")
        if self.decoder == "rank" and self.rank < 1:
            raise PromptSearchError(f"rank={self.rank}: give a rank of at least 1 (or decoder='tied' or 'full')")
        if self.depth < 1:
            raise PromptSearchError(f"depth={self.depth}: give at least 1 transform layer")
        return self


class MaskHead(nn.Module):
    """hidden (…, H) → vocabulary logits (…, V)."""

    embed: torch.Tensor  # a buffer: the model's word embeddings (the tied decoder)
    meta: dict  # what train-head recorded (load_head sets it)

    def __init__(self, cfg: HeadConfig, word_embeddings: torch.Tensor):
        super().__init__()
        self.cfg = cfg.validate()
        h, v = cfg.hidden_size, cfg.vocab_size
        if tuple(word_embeddings.shape) != (v, h):
            raise ModelError(f"head for a {v}×{h} vocabulary, model has {tuple(word_embeddings.shape)}")
        layers: list[nn.Module] = []
        for _ in range(cfg.depth):
            layers += [nn.Linear(h, h), nn.GELU(), nn.LayerNorm(h, eps=1e-12)]
        self.transform = nn.Sequential(*layers)
        self.register_buffer("embed", word_embeddings.detach().float().clone(), persistent=False)
        self.bias = nn.Parameter(torch.zeros(v))
        self.scale = nn.Parameter(torch.ones(()))
        if cfg.decoder == "full":
            self.decoder = nn.Parameter(self.embed.clone())
        elif cfg.decoder == "rank":
            self.u = nn.Parameter(torch.zeros(v, cfg.rank))  # zero: training starts from the tied head
            self.v = nn.Parameter(torch.randn(cfg.rank, h) * (1.0 / math.sqrt(h)))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        g = self.transform(hidden.float())
        if self.cfg.decoder == "full":
            logits = g @ self.decoder.T
        else:
            logits = self.scale * (g @ self.embed.T)
            if self.cfg.decoder == "rank":
                logits = logits + (g @ self.v.T) @ self.u.T
        return logits + self.bias

    def init_bias(self, counts: torch.Tensor) -> None:
        """Start from the unigram model: bias = log frequency (add-one smoothed)."""
        with torch.no_grad():
            p = (counts.float() + 1.0) / (counts.sum() + len(counts))
            self.bias.copy_(p.log())

    def n_stored(self) -> int:
        return sum(p.numel() for p in self.parameters())


def save_head(head: MaskHead, path: str | Path, meta: dict | None = None, dtype=torch.float16) -> Path:
    """safetensors (weights in ``dtype``) with ``format``, ``config`` and ``meta`` metadata."""
    tensors = {k: v.detach().to(dtype).contiguous().cpu() for k, v in head.state_dict().items()}
    md = {"format": HEAD_FORMAT, "config": json.dumps(asdict(head.cfg)), "meta": json.dumps(meta or {})}
    # 0644 whatever the umask: a head is meant to be shared and shipped
    return atomic_replace(path, lambda tmp: save_file(tensors, tmp, metadata=md), mode=0o644)


def read_head_meta(path: str | Path) -> tuple[HeadConfig, dict]:
    try:
        with safe_open(str(path), framework="pt") as f:
            md = f.metadata() or {}
    except Exception as exc:  # safetensors raises its own error types
        raise ModelError(f"{path} is not a head file ({exc}); pass a head.safetensors written by train-head") from None
    if md.get("format") != HEAD_FORMAT:
        raise ModelError(f"{path} is not a promptsearch head; pass a head.safetensors written by train-head")
    return HeadConfig(**json.loads(md["config"])), json.loads(md.get("meta", "{}"))


def load_head(path: str | Path, word_embeddings: torch.Tensor) -> MaskHead:
    """Load a head for a model (its word embeddings fill the tied part of the decoder)."""
    path = Path(path)
    if path.is_dir():
        raise ModelError(f"head file {path} is a folder; pass the head.safetensors inside it (written by train-head)")
    if not path.is_file():
        raise ModelError(f"head file {path} does not exist; train one with promptsearch train-head")
    cfg, meta = read_head_meta(path)
    head = MaskHead(cfg, word_embeddings.detach().cpu())
    head.load_state_dict({k: v.float() for k, v in load_file(str(path)).items()})
    head.meta = meta
    return head.to(word_embeddings.device).eval()


def shipped_head_path() -> Path:
    """The head trained for ``default`` that ships in the package."""
    return Path(__file__).resolve().parents[1] / "heads" / "default.safetensors"
