"""A [MASK] prediction head learned on a frozen encoder (``promptsearch train-head``).

Checkpoints without an MLM head (the bundled MiniLM is one) cannot say which tokens a
[MASK] state stands for. This module learns that map with the encoder frozen:

1. mask 15 % of the tokens of each corpus sentence (at least one; always ``[MASK]``, the
   only token the head meets at inference), run the frozen encoder once, keep the states
   at the masked positions (cached on disk, so re-runs and resumed runs skip this);
2. train a small head on the cached states — no encoder in the loop — with a full-softmax
   cross-entropy over the vocabulary;
3. report held-out masked-token top-1 / top-5 accuracy next to a unigram model (the most
   frequent training targets) measured on the same held-out tokens.

The head and its file format live in ``promptsearch.model.mask_head``; this module is
the training job (corpus, state collection and cache, training loop, report).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file
from torch import nn
from tqdm.auto import tqdm

from ..encoding.batching import bf16_supported, pad
from ..errors import PromptSearchError, worded
from ..fileio import atomic_replace, atomic_write
from ..model import load_model
from ..model.loading import model_fingerprint, tokenizer_fingerprint
from ..model.mask_head import (  # noqa: F401
    HEAD_FORMAT,
    HeadConfig,
    MaskHead,
    load_head,
    read_head_meta,
    save_head,
    shipped_head_path,
)
from ..paths import cache_dir as cache_dir_path
from .head_corpus import CORPORA, dedupe, head_corpus, training_sentences  # noqa: F401  (the job's corpus)
from .loop import Checkpoint, Progress, Schedule, Trainee, TraineeState, TrainSettings, rng_state, train_loop

# ---- masked states ---------------------------------------------------------------------------

@dataclass
class MaskedStates:
    """Frozen-encoder states at masked positions, with their target ids and sentence index."""

    states: torch.Tensor  # (N, H) float16
    targets: torch.Tensor  # (N,) int64
    sentence: torch.Tensor  # (N,) int64 index into the sentence list


def mask_ids(ids: list[int], rate: float, rng: random.Random, maskable: Callable[[int], bool]) -> list[int]:
    """Positions to mask: ``rate`` of the maskable tokens, at least one."""
    cand = [i for i, t in enumerate(ids) if maskable(t)]
    if not cand:
        return []
    k = max(1, round(rate * len(cand)))
    return sorted(rng.sample(cand, k))


@dataclass(frozen=True)
class Masking:
    """How the states corpus is made: the share of each sentence's tokens masked (seeded), the
    length sentences are cut to, and the precision of the frozen encoder's pass."""

    rate: float = 0.15
    seed: int = 0
    max_length: int = 64
    bf16: bool = True


@torch.inference_mode()
def collect_states(model, sentences: Sequence[str], layers: Sequence[int] = (-1,), masking: Masking = Masking(),
                   batch_size: int = 128, show_progress_bar: bool = True) -> dict[int, MaskedStates]:
    """Mask each sentence once (seeded) and keep the frozen states at the masked positions."""
    rate, seed, max_length, bf16 = masking.rate, masking.seed, masking.max_length, masking.bf16
    tok = model.tokenizer
    enc = model.encoder
    device = next(enc.parameters()).device
    special = set(getattr(tok, "all_special_ids", []))

    def maskable(t: int) -> bool:
        return t not in special

    rng = random.Random(seed)
    rows = []  # (sentence index, input ids, masked positions, targets)
    for si, s in enumerate(sentences):
        body = tok(s, add_special_tokens=False, truncation=True, max_length=max_length - 2)["input_ids"]
        pos = mask_ids(body, rate, rng, maskable)
        if not pos:
            continue
        ids = list(body)
        for p in pos:
            ids[p] = tok.mask_token_id
        full = [tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id] + ids + \
               [tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id]
        rows.append((si, full, [p + 1 for p in pos], [body[p] for p in pos]))
    rows.sort(key=lambda r: len(r[1]))
    out: dict[int, list] = {layer: [] for layer in layers}
    tgts: list[int] = []
    sidx: list[int] = []
    use_bf16 = bf16 and device.type in ("cpu", "cuda")
    bar = tqdm(total=len(rows), desc="masked states", unit="sent", disable=not show_progress_bar)
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        batch_ids, att = pad([r[1] for r in chunk], tok.pad_token_id or 0, device)
        bi, pi = [], []
        for j, (si, full, pos, tg) in enumerate(chunk):
            bi += [j] * len(pos)
            pi += pos
            tgts += tg
            sidx += [si] * len(pos)
        with torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext():
            o = enc(input_ids=batch_ids, attention_mask=att, output_hidden_states=True)
        for layer in layers:
            out[layer].append(o.hidden_states[layer][bi, pi].half().cpu())
        bar.update(len(chunk))
    bar.close()
    targets = torch.tensor(tgts, dtype=torch.long)
    sentence = torch.tensor(sidx, dtype=torch.long)

    def stacked(v: list) -> torch.Tensor:
        return torch.cat(v) if v else torch.zeros(0, enc.config.hidden_size, dtype=torch.float16)

    return {layer: MaskedStates(stacked(v), targets, sentence) for layer, v in out.items()}


def corpus_key(model, sentences: Sequence[str], masking: Masking = Masking()) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([model.name, model_fingerprint(model), tokenizer_fingerprint(model.tokenizer), masking.rate,
                         masking.seed, masking.max_length, bool(masking.bf16)]).encode())
    for s in sentences:
        h.update(s.encode("utf-8", "replace") + b"\n")
    return h.hexdigest()[:16]


def cached_states(model, sentences, cache_dir: str | Path, layers=(-1,), masking: Masking = Masking(), batch_size=128,
                  show_progress_bar=True, key: str | None = None) -> dict[int, MaskedStates]:
    """``collect_states``, saved under ``cache_dir`` keyed by model, corpus and settings
    (one file holds every layer collected; a layer it lacks means collecting again)."""
    key = key or corpus_key(model, sentences, masking)
    path = Path(cache_dir) / f"states-{key}.safetensors"
    if path.is_file():
        with safe_open(str(path), framework="pt") as f:
            have = set(f.keys())
        if all(f"layer{layer}" in have for layer in layers):
            t = load_file(str(path))
            return {layer: MaskedStates(t[f"layer{layer}"], t["targets"], t["sentence"]) for layer in layers}
    got = collect_states(model, sentences, layers, masking, batch_size, show_progress_bar)
    first = got[layers[0]]
    tensors = {f"layer{layer}": v.states.contiguous() for layer, v in got.items()}
    tensors.update(targets=first.targets, sentence=first.sentence)
    atomic_replace(path, lambda tmp: save_file(tensors, tmp))
    return got


# ---- training and evaluation -----------------------------------------------------------------

@dataclass
class Accuracy:
    top1: float
    top5: float
    n: int

    def __str__(self) -> str:
        return f"top-1 {100 * self.top1:5.2f} %  top-5 {100 * self.top5:5.2f} %"


def unigram_accuracy(train_targets: torch.Tensor, test_targets: torch.Tensor, vocab_size: int) -> Accuracy:
    """The most frequent training targets, ranked by count, as a prediction for every token."""
    counts = torch.bincount(train_targets, minlength=vocab_size)
    top = counts.topk(5).indices
    hit1 = (test_targets == top[0]).float().mean().item()
    hit5 = torch.isin(test_targets, top).float().mean().item()
    return Accuracy(hit1, hit5, len(test_targets))


@torch.no_grad()
def head_accuracy(head: MaskHead, states: torch.Tensor, targets: torch.Tensor, batch_size: int = 2048,
                  exclude: Sequence[int] = ()) -> Accuracy:
    head.eval()
    dev = head.bias.device
    h1 = h5 = 0
    for s in range(0, len(states), batch_size):
        logits = head(states[s : s + batch_size].to(dev).float())
        if exclude:
            logits[:, list(exclude)] = float("-inf")
        top = logits.topk(5, dim=-1).indices
        t = targets[s : s + batch_size].to(dev)
        h1 += (top[:, 0] == t).sum().item()
        h5 += (top == t[:, None]).any(-1).sum().item()
    n = max(len(states), 1)
    return Accuracy(h1 / n, h5 / n, len(states))


@dataclass(kw_only=True)
class HeadTrainSettings(TrainSettings):
    """The head trainer's ``TrainSettings`` (its own defaults) and what it
    adds: epochs over the cached states, AdamW's weight decay, the warmup share, bf16 autocast."""

    lr: float = 2e-3
    batch_size: int = 1024
    seed: int = 0
    epochs: int = 6
    weight_decay: float = 0.01
    warmup: float = 0.05
    # autocast the head's matmuls (AMX CPUs, GPUs: ~25 % faster steps on CPU); None: the device's default precision
    # (encoding.batching.precision_choice: measured on a CPU), decided by ``on``
    bf16: bool | None = None

    RECORD_ORDER = ("epochs", "batch_size", "lr", "weight_decay", "warmup", "seed", "bf16")

    def on(self, device) -> "HeadTrainSettings":
        """These settings with ``bf16`` decided for ``device`` (as given, or the device's default precision when
        None), so the record and a resume key name the precision the run used.

        :param device: the device the head trains on.
        :returns: settings whose ``bf16`` is True or False."""
        return self if self.bf16 is not None else replace(self, bf16=bf16_supported(torch.device(device)))

    def record(self) -> dict:
        """The settings as ``train-head.json`` and a resume checkpoint's key have always written them
        (this field order: a run written before still resumes)."""
        return {k: getattr(self, k) for k in self.RECORD_ORDER}


@dataclass
class HeadHistory:
    epochs: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    best: dict = field(default_factory=dict)


def train_head(head: MaskHead, train: MaskedStates, test: MaskedStates, settings: HeadTrainSettings,
               exclude: Sequence[int] = (), checkpoint: str | Path | None = None,
               on_epoch: Callable[[int, Accuracy, float], None] | None = None,
               show_progress_bar: bool = True) -> HeadHistory:
    """Full-softmax cross-entropy on cached states; AdamW, linear warmup then cosine decay — in the one
    training loop (``train_loop``), an evaluation at the end of each epoch.

    Keeps the weights of the epoch with the best held-out top-5. With ``checkpoint`` the
    state after every epoch is saved there and a re-run resumes from it.
    """
    settings = settings.on(head.embed.device)  # bf16=None: the device's default precision
    torch.manual_seed(settings.seed)
    n = len(train.states)
    steps_per_epoch = max(1, math.ceil(n / settings.batch_size))
    total = steps_per_epoch * settings.epochs
    warm = max(1, int(settings.warmup * total))
    decay = [p for name, p in head.named_parameters() if p.ndim >= 2]
    rest = [p for name, p in head.named_parameters() if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": settings.weight_decay},
                             {"params": rest, "weight_decay": 0.0}], lr=settings.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warm) * 0.5 * (1 + math.cos(math.pi * min(1.0, s / total))))
    trainee = _HeadTrainee(head, (opt, sched), train, test, settings, exclude, on_epoch, steps_per_epoch)
    progress = Progress()
    ck = Path(checkpoint) if checkpoint else None
    saved = _read_checkpoint(ck, steps_per_epoch) if ck else None
    state = saved and saved.resume(HeadState)
    if state:
        assert saved is not None  # the state came from it
        head.load_state_dict(state.head)
        opt.load_state_dict(state.opt)
        sched.load_state_dict(state.sched)
        trainee.best_state = state.best_state
        progress = Progress(saved.step, saved.best, saved.history)
    head.train()
    train_loop(trainee, None, _Epochs(total, settings.batch_size, settings.seed, steps_per_epoch, n), ck, progress,
               show_progress_bar)
    if trainee.best_state is not None:
        head.load_state_dict(trainee.best_state)
    head.eval()
    # the first epoch at the best top-5: the one kept
    best = max(progress.history, key=lambda r: r["top5"], default=None)
    return HeadHistory(progress.history, best["epoch"], best) if best else HeadHistory(progress.history)


def _read_checkpoint(path: Path, steps_per_epoch: int) -> Checkpoint | None:
    """The head's resume checkpoint, also as versions before the one loop wrote it (a ``hist`` record)."""
    d = torch.load(path, map_location="cpu", weights_only=False) if path.is_file() else None
    if isinstance(d, dict) and "hist" in d:
        rows = d["hist"]["epochs"]
        return Checkpoint(len(rows) * steps_per_epoch, max((r["top5"] for r in rows), default=float("-inf")), rows,
                          rng_state(), {k: d[k] for k in ("head", "opt", "sched", "best_state")})
    return Checkpoint.from_dict(d)


@dataclass(frozen=True)
class _Epochs(Schedule):
    """The head's order: every training state once an epoch, in a permutation from one torch generator
    (replayed on resume), the last batch of an epoch short; ``eval_steps`` is the steps of an epoch."""

    n: int = 0

    def batches(self, data, start: int):
        g = torch.Generator().manual_seed(self.seed)
        for _ in range(start // self.eval_steps):  # replay the permutations so a resumed run sees the same batches
            torch.randperm(self.n, generator=g)
        step = start
        while True:
            perm = torch.randperm(self.n, generator=g)
            for k in range(step % self.eval_steps, self.eval_steps):
                yield step, perm[k * self.batch_size : (k + 1) * self.batch_size]
                step += 1


@dataclass
class HeadState(TraineeState):
    """The head trainer's part of the resume checkpoint: the head, optimizer and schedule now, and the
    best epoch's weights."""

    head: dict
    opt: dict
    sched: dict
    best_state: dict | None


class _HeadTrainee(Trainee):
    """The [MASK] head in the one loop: a step is a batch of cached states, an evaluation the held-out
    top-5 at the end of an epoch (its row: the epoch's mean loss, top-1, top-5)."""

    desc = "head"

    def __init__(self, head: MaskHead, parts: tuple, train: MaskedStates, test: MaskedStates,
                 settings: HeadTrainSettings, exclude: Sequence[int], on_epoch, steps_per_epoch: int):
        self.head, (self.opt, self.sched), self.train, self.test = head, parts, train, test
        self.settings, self.exclude, self.on_epoch, self.per_epoch = settings, exclude, on_epoch, steps_per_epoch
        self.device: torch.device = head.bias.device  # where the head and its batches are
        self.mask_out = torch.tensor(sorted(set(exclude)), dtype=torch.long, device=self.device) if exclude else None
        self.best_state: dict | None = None
        self.total_loss = 0.0
        self.acc: Accuracy | None = None  # the last evaluation's
        self.row: dict = {}  # the last evaluation's history row

    def step(self, ix) -> torch.Tensor:
        x = self.train.states[ix].to(self.device).float()
        y = self.train.targets[ix].to(self.device)
        with torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=bool(self.settings.bf16)):
            logits = self.head(x).float()
        if self.mask_out is not None:
            logits = logits.index_fill(1, self.mask_out, float("-inf"))
        loss = nn.functional.cross_entropy(logits, y)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.sched.step()
        self.total_loss += loss.item()
        return loss.detach()

    def evaluate(self) -> float:
        self.acc = head_accuracy(self.head, self.test.states, self.test.targets, exclude=self.exclude)
        return self.acc.top5

    def record(self, done: int, loss, score: float) -> dict:
        assert self.acc is not None  # evaluate() ran
        self.row = {"epoch": done // self.per_epoch, "loss": self.total_loss / self.per_epoch, "top1": self.acc.top1,
                    "top5": self.acc.top5}
        self.total_loss = 0.0
        return self.row

    def keep(self, done: int, score: float) -> None:
        self.best_state = {k: v.detach().clone() for k, v in self.head.state_dict().items()}

    def state(self) -> HeadState:
        return HeadState(self.head.state_dict(), self.opt.state_dict(), self.sched.state_dict(), self.best_state)

    def after_eval(self) -> None:
        if self.on_epoch:
            assert self.acc is not None  # evaluate() ran
            self.on_epoch(self.row["epoch"], self.acc, self.row["loss"])
        self.head.train()


def split_heldout(states: MaskedStates, n_sentences: int, heldout: int,
                  seed: int = 0) -> tuple[MaskedStates, MaskedStates]:
    """Hold out the masked tokens of ``heldout`` randomly chosen sentences."""
    if heldout >= n_sentences:
        raise PromptSearchError(f"heldout={heldout} leaves no training sentences out of {n_sentences}")
    rng = np.random.default_rng(seed)
    test_s = torch.from_numpy(rng.choice(n_sentences, size=heldout, replace=False))
    is_test = torch.isin(states.sentence, test_s)

    def pick(m):
        return MaskedStates(states.states[m], states.targets[m], states.sentence[m])

    return pick(~is_test), pick(is_test)


# ---- the whole job (what `promptsearch train-head` runs) --------------------------------------

@dataclass
class HeadReport:
    head: MaskHead
    path: Path
    accuracy: Accuracy
    unigram: Accuracy
    history: HeadHistory
    n_sentences: int
    n_train_tokens: int

    def summary(self) -> str:
        a, u = self.accuracy, self.unigram
        return (f"held-out masked tokens ({a.n:,}): head top-1 {100 * a.top1:.2f} % / top-5 {100 * a.top5:.2f} %   "
                f"unigram top-1 {100 * u.top1:.2f} % / top-5 {100 * u.top5:.2f} %   "
                f"(+{100 * (a.top5 - u.top5):.2f} top-5 points)")


@dataclass(frozen=True)
class HeadData:
    """What a head is trained and measured on, apart from the sentences: ``heldout`` sentences kept
    out for the accuracy, the mask ``rate``, the states cache folder (None: the user cache's ``head/``),
    and a description recorded in ``train-head.json`` (e.g. the corpus parts)."""

    heldout: int = 2000
    rate: float = 0.15
    cache_dir: str | Path | None = None
    describe: dict = field(default_factory=dict)


def run_train_head(model, sentences: Sequence[str], out_dir: str | Path, cfg: HeadConfig,
                   settings: HeadTrainSettings, data: HeadData = HeadData(), log: Callable[[str], None] = print,
                   show_progress_bar: bool = True) -> HeadReport:
    """Masked states (cached) → held-out split → unigram baseline → train → ``out_dir/head.safetensors``.

    Interrupt it at any point and run it again: the states come from the cache and training
    resumes from ``out_dir/checkpoint.pt`` (when the settings are the same).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cache = Path(data.cache_dir) if data.cache_dir else cache_dir_path() / "head"
    heldout, rate = data.heldout, data.rate
    sentences = dedupe(sentences)
    settings = settings.on(model.word_embeddings.device)  # bf16=None: the device's default precision, decided once
    masking = Masking(rate, settings.seed, 64, bool(settings.bf16))
    key = corpus_key(model, sentences, masking)  # names the states file and the checkpoint
    states = cached_states(model, sentences, cache, layers=(cfg.layer,), masking=masking,
                           show_progress_bar=show_progress_bar, key=key)[cfg.layer]
    train, test = split_heldout(states, len(sentences), heldout, seed=settings.seed)
    log(f"{len(sentences):,} sentences → {len(train.targets):,} training / {len(test.targets):,} held-out masked "
        "tokens")
    uni = unigram_accuracy(train.targets, test.targets, cfg.vocab_size)
    log(f"unigram baseline on the held-out tokens: {uni}")
    torch.manual_seed(settings.seed)  # the head's initialisation, so a resumed run equals an uninterrupted one
    head = MaskHead(cfg, model.word_embeddings.detach().cpu()).to(model.word_embeddings.device)
    head.init_bias(torch.bincount(train.targets, minlength=cfg.vocab_size))
    ck = out / "checkpoint.pt"
    run_key = json.dumps([key,
                          asdict(cfg), settings.record(), heldout])
    key_file = out / "checkpoint.key"
    if ck.is_file() and (not key_file.is_file() or key_file.read_text() != run_key):
        log(f"note: {ck} is from other settings; starting over")
        ck.unlink()
    key_file.write_text(run_key)
    special = sorted(set(getattr(model.tokenizer, "all_special_ids", [])))
    hist = train_head(head, train, test, settings, exclude=special, checkpoint=ck,
                      on_epoch=lambda e, acc, loss: log(f"epoch {e}/{settings.epochs}: loss {loss:.3f}  "
                                                        f"held-out {acc}"),
                      show_progress_bar=show_progress_bar)
    acc = head_accuracy(head, test.states, test.targets, exclude=special)
    info = {"model": model.name, "sentences": len(sentences), "train_tokens": len(train.targets),
            "heldout_tokens": len(test.targets), "mask_rate": rate, "best_epoch": hist.best_epoch,
            "heldout_top1": acc.top1, "heldout_top5": acc.top5, "unigram_top1": uni.top1, "unigram_top5": uni.top5,
            "settings": settings.record(), "history": hist.epochs, **data.describe}
    path = save_head(head, out / "head.safetensors", info)
    atomic_write(out / "train-head.json", json.dumps(info, indent=2) + "\n")
    return HeadReport(head, path, acc, uni, hist, len(sentences), len(train.targets))


def head_model(name: str, device=None, log: Callable[[str], None] = print):
    """The model a [MASK] head is trained on (its own MLM head left out); one-line error if its
    tokenizer has no mask token."""
    model = load_model(name, device=device, mask_head="none")
    if model.tokenizer.mask_token is None:
        raise PromptSearchError(f"{name}'s tokenizer has no mask token; a [MASK] head needs one")
    if model.mlm is not None:
        log(worded(f"note: {name} has its own MLM head; the trained one is used only when passed as mask_head="))
    return model
