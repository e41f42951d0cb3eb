"""Fine-tuning throughput, measured in one run: the same unsupervised steps (same sentences, same
starting weights, AdamW) with micro-batches of ``--micro-batch`` rows in item order against
micro-batches filled to ``--micro-tokens`` sentence tokens in length order (``finetune
--micro-tokens``); training sentences per second of each and their ratio. Dev evaluations are
not part of it (``finetune``'s summary leaves them out of its figure too).

    python benchmarks/train_speed.py [--model default] [--device cpu|cuda] [--steps 4] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import itertools

import torch
from _device import add_device_flag, device_name, resolve, timed

from promptsearch import PromptEncoder
from promptsearch.data import load_corpus
from promptsearch.train.finetune import FinetuneConfig
from promptsearch.train.loop import batches
from promptsearch.train.step import micro_batches, train_step

TEMPLATES = ['This sentence : "[X]" means [MASK] .', 'This sentence of "[X]" means [MASK] .']


def run(args, device, corpus, label, **micro) -> float:
    """Seconds per step of ``args.steps`` steps after one warm-up step, from the model's own weights."""
    enc = PromptEncoder.from_pretrained(args.model, device=str(device), bf16=args.bf16, show_progress_bar=False)
    cfg = FinetuneConfig(mode="unsup", templates=TEMPLATES, batch_size=args.batch_size, **micro)
    prompt = enc.prompt
    for p in prompt.encoder.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(prompt.encoder.parameters(), lr=cfg.lr, weight_decay=0.0)
    prompt.train()
    steps = list(itertools.islice(batches(corpus, cfg.batch_size, cfg.seed, 0), args.steps + 1))
    times, sizes = [], []
    for k, (_, items) in enumerate(steps):
        sizes.append(len(micro_batches(enc, cfg.step, items)))
        with timed(device, times):
            train_step(enc, cfg.step, items, lambda loss: loss.backward())
            opt.step()
            opt.zero_grad()
    per_step = sum(times[1:]) / len(times[1:])
    print(f"  {label:44} {per_step:7.2f} s/step  {cfg.batch_size / per_step:8.1f} sentences/s  "
          f"({sum(sizes[1:]) / len(sizes[1:]):.1f} micro-batches a step)")
    return per_step


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--steps", type=int, default=4, help="timed steps (after one warm-up step)")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--micro-batch", type=int, default=64, help="rows of the item-order micro-batches")
    ap.add_argument("--micro-tokens", type=int, default=None,
                    help="sentence tokens of the length-order micro-batches (default: --micro-batch x 32)")
    ap.add_argument("--data-dir", default=None)
    add_device_flag(ap)
    ap.add_argument("--no-bf16", dest="bf16", action="store_false", default=None, help="fp32 even where bf16 is fast")
    args = ap.parse_args()
    device = resolve(args.device)
    corpus = load_corpus(args.data_dir, limit=args.batch_size * (args.steps + 1) * 4)
    tokens = args.micro_tokens or args.micro_batch * 32
    print(f"finetune unsup, batch {args.batch_size}, sentences cut at 32 tokens, {args.steps} timed steps, on {device_name(device)}")
    rows = run(args, device, corpus, f"micro-batches of {args.micro_batch} rows", micro_batch=args.micro_batch)
    budget = run(args, device, corpus, f"micro-batches of {tokens} tokens (--micro-tokens)", micro_batch=0, micro_tokens=tokens)
    print(f"--micro-tokens {tokens}: {rows / budget:.2f}x the sentences/s of --micro-batch {args.micro_batch}")


if __name__ == "__main__":
    main()
