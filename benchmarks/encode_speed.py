"""Encode speed: PromptEncoder (dedup + length-sorted batches + inference_mode + bf16 autocast)
against a naive loop (input order, duplicates kept, float32, no_grad), one template over
STS-B dev, both measured in this run on this machine. Also prints both Spearman scores.

Then a roofline line: the linear layers' FLOPs for one template over STS-B dev (2 x tokens x
linear weights; attention scores and softmax not counted) divided by the encode time, next to
what a plain matmul of the model's FFN shape reaches in the same run, in the same precision —
for the model and for a randomly initialised BERT-base-sized ``BertForMaskedLM`` (``BertConfig()``
defaults: bert-base's FLOPs, no download).

    python benchmarks/encode_speed.py [--model default] [--device cpu|cuda] [--template T] [--batch-size 64] [--no-bert-base]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from _device import add_device_flag, device_name, resolve, sync, timed

from promptsearch import PromptEncoder
from promptsearch.data import load_task
from promptsearch.eval import score_task


def naive_encode(enc: PromptEncoder, sentences, template, batch_size):
    """What a first implementation does: every sentence, in order, padded batches, fp32."""
    r = enc.rendered(template)
    dev = enc.device
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            chunk = enc.prepare(sentences[start : start + batch_size])
            rows = [r.ids(ids) for ids in enc.sentence_ids(chunk, template)]
            n = max(len(ids) for ids, _ in rows)
            pad = enc.tokenizer.pad_token_id or 0
            ids = torch.tensor([x + [pad] * (n - len(x)) for x, _ in rows], device=dev)
            att = torch.tensor([[1] * len(x) + [0] * (n - len(x)) for x, _ in rows], device=dev)
            h = enc.encoder(input_ids=ids, attention_mask=att).last_hidden_state
            out.append(h[torch.arange(len(rows), device=dev), torch.tensor([p for _, p in rows], device=dev)].float().cpu().numpy())
    return np.concatenate(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--template", default='This sentence : "[X]" means [MASK] .')
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data-dir", default=None)
    add_device_flag(ap)
    ap.add_argument("--no-bert-base", dest="bert_base", action="store_false", help="skip the BERT-base-sized roofline")
    ap.add_argument("--no-bf16", dest="bf16", action="store_false", default=None, help="fp32 even where bf16 is fast")
    args = ap.parse_args()

    data = load_task("stsb-dev", args.data_dir)
    a, b, _ = data.subsets["dev"]
    sentences = a + b
    device = resolve(args.device)
    fast = PromptEncoder.from_pretrained(args.model, device=str(device), batch_size=args.batch_size, bf16=args.bf16,
                                         show_progress_bar=False)
    slow = PromptEncoder(fast.model, batch_size=args.batch_size, bf16=False, show_progress_bar=False)
    fast.encode(sentences[:64], template=args.template)  # warm-up (thread pools, kernels)
    naive_encode(slow, sentences[:64], args.template, args.batch_size)

    times = []
    with timed(device, times):
        v_naive = naive_encode(slow, sentences, args.template, args.batch_size)
    with timed(device, times):
        v_fast = fast.encode(sentences, template=args.template)
    t_naive, t_fast = times

    def sp(v):
        return score_task(data, lambda ss, idx={s: i for i, s in enumerate(sentences)}: v[[idx[s] for s in ss]])["spearman"]

    print(f"STS-B dev: {len(sentences)} sentences ({len(set(sentences))} distinct), template {args.template!r}, "
          f"on {device_name(device)}")
    print(f"{'':28} {'seconds':>8} {'Spearman':>9}")
    print(f"{'naive loop (fp32, in order)':28} {t_naive:8.2f} {sp(v_naive):9.2f}")
    print(f"{'PromptEncoder (' + ('bf16' if fast.bf16 else 'fp32') + ')':28} {t_fast:8.2f} {sp(v_fast):9.2f}")
    print(f"speed-up: {t_naive / t_fast:.2f}x")

    print("\nroofline (linear layers of one template over STS-B dev vs a plain matmul, both measured now):")
    roofline(fast, sentences, args.template, t_fast, args.model)
    if args.bert_base:
        roofline(bert_base(fast), sentences, args.template, None, "BERT-base size (random BertConfig())")


def linear_flops(enc: PromptEncoder, sentences, template) -> tuple[int, float]:
    """(tokens fed, FLOPs of the linear layers) for encoding the distinct sentences once."""
    rows = enc.prompt.input_rows(list(dict.fromkeys(enc.prepare(sentences))), template)
    tokens = sum(len(ids) for ids, _, _ in rows)
    per_token = 0
    for m in enc.encoder.modules():
        if isinstance(m, torch.nn.Linear):
            per_token += 2 * m.in_features * m.out_features
    return tokens, tokens * per_token


def matmul_gflops(enc: PromptEncoder, m: int = 1600) -> float:
    """GFLOP/s of a plain (m x hidden) @ (hidden x intermediate) product, in the encoder's precision."""
    cfg = enc.model.config
    h, i = cfg.hidden_size, getattr(cfg, "intermediate_size", 4 * cfg.hidden_size)
    x, w = torch.randn(m, h, device=enc.device), torch.randn(h, i, device=enc.device)
    with torch.inference_mode(), enc.autocast():
        for _ in range(3):
            x @ w
        sync(enc.device)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            for _ in range(10):
                x @ w
            sync(enc.device)
            n += 10
    return 2 * m * h * i * n / (time.perf_counter() - t0) / 1e9


def roofline(enc: PromptEncoder, sentences, template, seconds, label) -> None:
    if seconds is None:
        enc.encode(sentences[:64], template=template)  # warm-up
        times = []
        with timed(enc.device, times):
            enc.encode(sentences, template=template)
        seconds = times[0]
    tokens, flops = linear_flops(enc, sentences, template)
    reached, plain = flops / seconds / 1e9, matmul_gflops(enc)
    prec = "bf16" if enc.bf16 else "fp32"
    print(f"  {label}: {tokens:,} tokens, {flops / 1e12:.2f} TFLOP of linear layers in {seconds:.2f} s = "
          f"{reached:.0f} GFLOP/s ({prec}); a plain {prec} matmul: {plain:.0f} GFLOP/s -> {100 * reached / plain:.0f}% "
          f"of it; {len(set(sentences)) / seconds:.0f} sentences/s")


def bert_base(like: PromptEncoder) -> PromptEncoder:
    """A randomly initialised BertForMaskedLM with BertConfig() defaults (12 x 768), the default
    model's (bert-base-uncased) tokenizer, the same encoder settings."""
    import tempfile

    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    d = tempfile.mkdtemp(prefix="bert-base-random-")
    BertForMaskedLM(BertConfig(vocab_size=like.tokenizer.vocab_size)).save_pretrained(d)
    like.tokenizer.save_pretrained(d)
    return PromptEncoder.from_pretrained(d, device=str(like.device), batch_size=like.batch_size, bf16=like.bf16,
                                         show_progress_bar=False)


if __name__ == "__main__":
    main()
