"""Compare [MASK] head variants on the frozen default model (issue 5's research log).

Every variant trains on the same cached masked states (the corpus of ``train-head``) with
the same budget and is scored on the same held-out tokens; the unigram model is the floor.

    python scripts/head_variants.py --epochs 1            # prints a markdown table
"""

from __future__ import annotations

import argparse
import time

import torch

from promptsearch.train.head import (HeadConfig, HeadTrainSettings, MaskHead, cached_states, dedupe, head_corpus,
                               split_heldout, train_head, unigram_accuracy)
from promptsearch.model.loading import load_model
from promptsearch.paths import default_cache_path

VARIANTS = {
    "tied (BERT head)": dict(decoder="tied"),
    "rank 64": dict(decoder="rank", rank=64),
    "rank 256": dict(decoder="rank", rank=256),
    "full untied": dict(decoder="full"),
    "rank 64, depth 2": dict(decoder="rank", rank=64, depth=2),
    "rank 64, layer 4": dict(decoder="rank", rank=64, layer=4),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--heldout", type=int, default=2000)
    ap.add_argument("--only", nargs="*", help="variant names to run (default: all)")
    args = ap.parse_args()
    model = load_model("default")
    sents = dedupe([s for v in head_corpus().values() for s in v])
    cache = default_cache_path().parent / "head"
    layers = sorted({v.get("layer", -1) for v in VARIANTS.values()}, reverse=True)
    states = cached_states(model, sents, cache, layers=tuple(layers))
    special = list(model.tokenizer.all_special_ids)
    rows = []
    for name, kw in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        layer = kw.get("layer", -1)
        train, test = split_heldout(states[layer], len(sents), args.heldout)
        uni = unigram_accuracy(train.targets, test.targets, model.config.vocab_size)
        head = MaskHead(HeadConfig(model.config.hidden_size, model.config.vocab_size, **kw), model.word_embeddings)
        head.init_bias(torch.bincount(train.targets, minlength=model.config.vocab_size))
        t = time.time()
        hist = train_head(head, train, test, HeadTrainSettings(epochs=args.epochs, bf16=True), exclude=special)
        b = hist.best
        rows.append((name, head.n_stored(), b["top1"], b["top5"], uni, time.time() - t, len(train.targets), len(test.targets)))
        print(f"{name}: top-1 {100*b['top1']:.2f} top-5 {100*b['top5']:.2f} (unigram {100*uni.top1:.2f}/{100*uni.top5:.2f})", flush=True)
    print(f"\n{rows[0][6]:,} training / {rows[0][7]:,} held-out masked tokens, {args.epochs} epoch(s) each\n")
    print("| variant | parameters | top-1 % | top-5 % | unigram top-1 / top-5 % | train s |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, n, t1, t5, uni, sec, _, _ in rows:
        print(f"| {name} | {n/1e6:.2f} M | {100*t1:.2f} | {100*t5:.2f} | {100*uni.top1:.2f} / {100*uni.top5:.2f} | {sec:.0f} |")


if __name__ == "__main__":
    main()
