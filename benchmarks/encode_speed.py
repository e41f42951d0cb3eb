"""Encode speed: PromptEncoder (dedup + length-sorted batches + inference_mode + bf16 autocast)
against a naive loop (input order, duplicates kept, float32, no_grad), one template over
STS-B dev, both measured in this run on this machine. Also prints both Spearman scores.

    python benchmarks/encode_speed.py [--model default] [--template T] [--batch-size 64]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from promptsearch import PromptEncoder
from promptsearch.data import load_task
from promptsearch.eval import score_task


def naive_encode(enc: PromptEncoder, sentences, template, batch_size):
    """What a first implementation does: every sentence, in order, padded batches, fp32."""
    r = enc.rendered(template)
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            chunk = enc.prepare(sentences[start : start + batch_size])
            rows = [r.ids(ids) for ids in enc.sentence_ids(chunk, template)]
            n = max(len(ids) for ids, _ in rows)
            pad = enc.tokenizer.pad_token_id or 0
            ids = torch.tensor([x + [pad] * (n - len(x)) for x, _ in rows])
            att = torch.tensor([[1] * len(x) + [0] * (n - len(x)) for x, _ in rows])
            h = enc.encoder(input_ids=ids, attention_mask=att).last_hidden_state
            out.append(h[torch.arange(len(rows)), torch.tensor([p for _, p in rows])].numpy())
    return np.concatenate(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--template", default='This sentence : "[X]" means [MASK] .')
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    data = load_task("stsb-dev", args.data_dir)
    a, b, _ = data.subsets["dev"]
    sentences = a + b
    fast = PromptEncoder.from_pretrained(args.model, batch_size=args.batch_size, show_progress_bar=False)
    slow = PromptEncoder(fast.model, batch_size=args.batch_size, bf16=False, show_progress_bar=False)
    fast.encode(sentences[:64], template=args.template)  # warm-up (thread pools, kernels)

    t0 = time.perf_counter()
    v_naive = naive_encode(slow, sentences, args.template, args.batch_size)
    t_naive = time.perf_counter() - t0
    t0 = time.perf_counter()
    v_fast = fast.encode(sentences, template=args.template)
    t_fast = time.perf_counter() - t0

    def sp(v):
        return score_task(data, lambda ss, idx={s: i for i, s in enumerate(sentences)}: v[[idx[s] for s in ss]])["spearman"]

    print(f"STS-B dev: {len(sentences)} sentences ({len(set(sentences))} distinct), template {args.template!r}")
    print(f"{'':28} {'seconds':>8} {'Spearman':>9}")
    print(f"{'naive loop (fp32, in order)':28} {t_naive:8.2f} {sp(v_naive):9.2f}")
    print(f"{'PromptEncoder (' + ('bf16' if fast.bf16 else 'fp32') + ')':28} {t_fast:8.2f} {sp(v_fast):9.2f}")
    print(f"speed-up: {t_naive / t_fast:.2f}x")


if __name__ == "__main__":
    main()
