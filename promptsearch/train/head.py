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

The head and its file format live in :mod:`promptsearch.model.mask_head`; this module is
the training job (corpus, state collection and cache, training loop, report).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm

from ..errors import PromptSearchError, worded

from ..encoding.batching import pad
from ..fileio import atomic_replace, atomic_write
from ..model.loading import model_fingerprint
from ..paths import cache_dir as cache_dir_path
from ..model.mask_head import HEAD_FORMAT, HeadConfig, MaskHead, load_head, read_head_meta, save_head, shipped_head_path  # noqa: F401


from .head_corpus import CORPORA, dedupe, head_corpus, training_sentences  # noqa: F401  (the job's corpus)


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
    out: dict[int, list] = {l: [] for l in layers}
    tgts, sidx = [], []
    use_bf16 = bf16 and device.type in ("cpu", "cuda")
    bar = tqdm(total=len(rows), desc="masked states", unit="sent", disable=not show_progress_bar)
    for start in range(0, len(rows), batch_size):
        chunk = rows[start : start + batch_size]
        ids, att = pad([r[1] for r in chunk], tok.pad_token_id or 0, device)
        bi, pi = [], []
        for j, (si, full, pos, tg) in enumerate(chunk):
            bi += [j] * len(pos)
            pi += pos
            tgts += tg
            sidx += [si] * len(pos)
        with torch.autocast(device.type, dtype=torch.bfloat16) if use_bf16 else contextlib.nullcontext():
            o = enc(input_ids=ids, attention_mask=att, output_hidden_states=True)
        for l in layers:
            out[l].append(o.hidden_states[l][bi, pi].half().cpu())
        bar.update(len(chunk))
    bar.close()
    t = torch.tensor(tgts, dtype=torch.long)
    s = torch.tensor(sidx, dtype=torch.long)
    return {l: MaskedStates(torch.cat(v) if v else torch.zeros(0, enc.config.hidden_size, dtype=torch.float16), t, s)
            for l, v in out.items()}


def corpus_key(model, sentences: Sequence[str], masking: Masking = Masking()) -> str:
    h = hashlib.sha256()
    h.update(json.dumps([model.name, model_fingerprint(model), masking.rate, masking.seed, masking.max_length,
                         bool(masking.bf16)]).encode())
    for s in sentences:
        h.update(s.encode("utf-8", "replace") + b"\n")
    return h.hexdigest()[:16]


def cached_states(model, sentences, cache_dir: str | Path, layers=(-1,), masking: Masking = Masking(), batch_size=128,
                  show_progress_bar=True, key: str | None = None) -> dict[int, MaskedStates]:
    """:func:`collect_states`, saved under ``cache_dir`` keyed by model, corpus and settings
    (one file holds every layer collected; a layer it lacks means collecting again)."""
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    key = key or corpus_key(model, sentences, masking)
    path = Path(cache_dir) / f"states-{key}.safetensors"
    if path.is_file():
        with safe_open(str(path), framework="pt") as f:
            have = set(f.keys())
        if all(f"layer{l}" in have for l in layers):
            t = load_file(str(path))
            return {l: MaskedStates(t[f"layer{l}"], t["targets"], t["sentence"]) for l in layers}
    got = collect_states(model, sentences, layers, masking, batch_size, show_progress_bar)
    first = got[layers[0]]
    tensors = {f"layer{l}": v.states.contiguous() for l, v in got.items()}
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


@dataclass
class HeadTrainSettings:
    epochs: int = 6
    batch_size: int = 1024
    lr: float = 2e-3
    weight_decay: float = 0.01
    warmup: float = 0.05
    seed: int = 0
    bf16: bool = False  # autocast the head's matmuls (AMX CPUs, GPUs): ~25 % faster steps on CPU


@dataclass
class HeadHistory:
    epochs: list[dict] = field(default_factory=list)
    best_epoch: int = 0
    best: dict = field(default_factory=dict)


def train_head(head: MaskHead, train: MaskedStates, test: MaskedStates, settings: HeadTrainSettings,
               exclude: Sequence[int] = (), checkpoint: str | Path | None = None,
               on_epoch: Callable[[int, Accuracy, float], None] | None = None,
               show_progress_bar: bool = True) -> HeadHistory:
    """Full-softmax cross-entropy on cached states; AdamW, linear warmup then cosine decay.

    Keeps the weights of the epoch with the best held-out top-5. With ``checkpoint`` the
    state after every epoch is saved there and a re-run resumes from it.
    """
    torch.manual_seed(settings.seed)
    dev = head.bias.device
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
    hist = HeadHistory()
    best_state = None
    start_epoch = 0
    ck = Path(checkpoint) if checkpoint else None
    if ck and ck.is_file():
        saved = torch.load(ck, map_location=dev, weights_only=False)
        head.load_state_dict(saved["head"])
        opt.load_state_dict(saved["opt"])
        sched.load_state_dict(saved["sched"])
        hist = HeadHistory(**saved["hist"])
        best_state = saved["best_state"]
        start_epoch = len(hist.epochs)
    mask_out = torch.tensor(sorted(set(exclude)), dtype=torch.long, device=dev) if exclude else None
    g = torch.Generator().manual_seed(settings.seed)
    for _ in range(start_epoch):  # replay the permutations so a resumed run sees the same batches
        torch.randperm(n, generator=g)
    for epoch in range(start_epoch, settings.epochs):
        head.train()
        perm = torch.randperm(n, generator=g)
        total_loss = 0.0
        bar = tqdm(range(steps_per_epoch), desc=f"head epoch {epoch + 1}/{settings.epochs}", disable=not show_progress_bar)
        for step in bar:
            ix = perm[step * settings.batch_size : (step + 1) * settings.batch_size]
            x = train.states[ix].to(dev).float()
            y = train.targets[ix].to(dev)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=settings.bf16):
                logits = head(x).float()
            if mask_out is not None:
                logits = logits.index_fill(1, mask_out, float("-inf"))
            loss = nn.functional.cross_entropy(logits, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            total_loss += loss.item()
            bar.set_postfix(loss=f"{loss.item():.3f}")
        acc = head_accuracy(head, test.states, test.targets, exclude=exclude)
        row = {"epoch": epoch + 1, "loss": total_loss / steps_per_epoch, "top1": acc.top1, "top5": acc.top5}
        hist.epochs.append(row)
        if not hist.best or acc.top5 > hist.best["top5"]:
            hist.best, hist.best_epoch = row, epoch + 1
            best_state = {k: v.detach().clone() for k, v in head.state_dict().items()}
        if ck:
            state = {"head": head.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(),
                     "hist": asdict(hist), "best_state": best_state}
            atomic_replace(ck, lambda tmp: torch.save(state, tmp))
        if on_epoch:
            on_epoch(epoch + 1, acc, row["loss"])
    if best_state is not None:
        head.load_state_dict(best_state)
    head.eval()
    return hist


def split_heldout(states: MaskedStates, n_sentences: int, heldout: int, seed: int = 0) -> tuple[MaskedStates, MaskedStates]:
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
    masking = Masking(rate, settings.seed, 64, settings.bf16)
    key = corpus_key(model, sentences, masking)  # names the states file and the checkpoint
    states = cached_states(model, sentences, cache, layers=(cfg.layer,), masking=masking,
                           show_progress_bar=show_progress_bar, key=key)[cfg.layer]
    train, test = split_heldout(states, len(sentences), heldout, seed=settings.seed)
    log(f"{len(sentences):,} sentences → {len(train.targets):,} training / {len(test.targets):,} held-out masked tokens")
    uni = unigram_accuracy(train.targets, test.targets, cfg.vocab_size)
    log(f"unigram baseline on the held-out tokens: {uni}")
    torch.manual_seed(settings.seed)  # the head's initialisation, so a resumed run equals an uninterrupted one
    head = MaskHead(cfg, model.word_embeddings.detach().cpu()).to(model.word_embeddings.device)
    head.init_bias(torch.bincount(train.targets, minlength=cfg.vocab_size))
    ck = out / "checkpoint.pt"
    run_key = json.dumps([key,
                          asdict(cfg), asdict(settings), heldout])
    key_file = out / "checkpoint.key"
    if ck.is_file() and (not key_file.is_file() or key_file.read_text() != run_key):
        log(f"note: {ck} is from other settings; starting over")
        ck.unlink()
    key_file.write_text(run_key)
    special = sorted(set(getattr(model.tokenizer, "all_special_ids", [])))
    hist = train_head(head, train, test, settings, exclude=special, checkpoint=ck,
                      on_epoch=lambda e, acc, loss: log(f"epoch {e}/{settings.epochs}: loss {loss:.3f}  held-out {acc}"),
                      show_progress_bar=show_progress_bar)
    acc = head_accuracy(head, test.states, test.targets, exclude=special)
    info = {"model": model.name, "sentences": len(sentences), "train_tokens": len(train.targets),
            "heldout_tokens": len(test.targets), "mask_rate": rate, "best_epoch": hist.best_epoch,
            "heldout_top1": acc.top1, "heldout_top5": acc.top5, "unigram_top1": uni.top1, "unigram_top5": uni.top5,
            "settings": asdict(settings), "history": hist.epochs, **data.describe}
    path = save_head(head, out / "head.safetensors", info)
    atomic_write(out / "train-head.json", json.dumps(info, indent=2) + "\n")
    return HeadReport(head, path, acc, uni, hist, len(sentences), len(train.targets))


def head_model(name: str, device=None, log: Callable[[str], None] = print):
    """The model a [MASK] head is trained on (its own MLM head left out); one-line error if its
    tokenizer has no mask token."""
    from ..model import load_model

    model = load_model(name, device=device, mask_head="none")
    if model.tokenizer.mask_token is None:
        raise PromptSearchError(f"{name}'s tokenizer has no mask token; a [MASK] head needs one")
    if model.mlm is not None:
        log(worded(f"note: {name} has its own MLM head; the trained one is used only when passed as mask_head="))
    return model
