"""A causal LM on STS-B dev with PromptEOL: sentences/s and peak memory, for a randomly initialised
Llama-shaped model built from its config (no download: speed needs no trained weights).

    python benchmarks/causal_speed.py --preset small            # CPU-sized (12 layers x 768)
    python benchmarks/causal_speed.py --preset tiny --device cpu # a smoke run of every code path
    python benchmarks/causal_speed.py --preset 7b --device cuda # Llama-2-7B's shape, bf16, one GPU

Both the tool's encoder (deduplicated, length-sorted batches, inference mode, bf16 where fast) and
a plain loop (input order, no deduplication, float32) run in the same process, so the ratio
between them is what the numbers say; peak memory is the accelerator's (CUDA) or the process's.

Then the branch line: ``--suffixes`` templates equal up to and including [X] (``This sentence :
"[X]"`` + 16 endings, as greedy's relation step makes them) scored by one ``encode_templates``
call — the prefix cached, the sentences encoded once, each suffix branched off — against one
template's ``encode`` (raw, both); ``--unbranched`` also times them as separate full encodes.
"""

from __future__ import annotations

import argparse
import json
import resource
import tempfile
from pathlib import Path

import torch
from _device import add_device_flag, device_name, resolve, timed

PRESETS = {
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                 intermediate_size=128),  # a smoke run: every code path, seconds on any machine
    "small": dict(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, num_key_value_heads=12,
                  intermediate_size=2048),
    "7b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
               intermediate_size=11008),
}
TEMPLATE = 'This sentence : "[X]" means in one word:"'
ENDINGS = [' means in one word:"', ' means in a word:"', ' is like:"', ' is about:"', ' means:"', ' is:"', ' in one word:"',
           ' can be summarized as:"', ' is similar to:"', ' means, in one word:"', ' refers to:"', ' is best described as:"',
           ' is a:"', ' talks about:"', ' boils down to:"', ' in short:"']


def build(preset: str, out: Path, sentences: list[str]) -> None:
    from tokenizers import SentencePieceBPETokenizer
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaTokenizer

    bpe = SentencePieceBPETokenizer()
    bpe.train_from_iterator(sentences, vocab_size=8000, special_tokens=["<unk>", "<s>", "</s>"])
    bpe.save_model(str(out))
    vocab = json.loads((out / "vocab.json").read_text(encoding="utf-8"))
    merges = [tuple(x.split()) for x in (out / "merges.txt").read_text(encoding="utf-8").splitlines()[1:] if x.strip()]
    tok = LlamaTokenizer(vocab=vocab, merges=merges)
    tok.save_pretrained(out)
    cfg = LlamaConfig(vocab_size=len(tok), max_position_embeddings=512, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, **PRESETS[preset])
    with torch.device("meta"):
        n = sum(p.numel() for p in LlamaForCausalLM(cfg).parameters())
    print(f"Llama-shaped model, preset {preset}: {n / 1e9:.2f} B parameters", flush=True)
    torch.manual_seed(0)
    LlamaForCausalLM(cfg).save_pretrained(out)


def naive(enc, sentences: list[str], batch_size: int) -> None:
    """Input order, duplicates encoded again, no inference mode, float32."""
    with torch.no_grad():
        for i in range(0, len(sentences), batch_size):
            ids = enc.sentence_ids(enc.prepare(sentences[i : i + batch_size]), TEMPLATE)
            enc.prompt(ids, TEMPLATE)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=list(PRESETS), default="small")
    add_device_flag(ap)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--suffixes", type=int, default=16, help="templates branched from one prefix (at most 16)")
    ap.add_argument("--unbranched", action="store_true", help="also time the suffixes as separate full encodes")
    ap.add_argument("--sentences", type=int, default=None, help="the first N STS-B dev sentences only (a quicker CPU run)")
    args = ap.parse_args()

    from promptsearch import PromptEncoder
    from promptsearch.data import load_task

    a, b, _ = load_task("stsb-dev", args.data_dir).subsets["dev"]
    sentences = (a + b)[: args.sentences]
    with tempfile.TemporaryDirectory() as tmp:
        build(args.preset, Path(tmp), sentences)
        device = resolve(args.device)
        fast = PromptEncoder.from_pretrained(tmp, device=str(device), batch_size=args.batch_size, show_progress_bar=False)
        slow = PromptEncoder(fast.model, batch_size=args.batch_size, bf16=False, show_progress_bar=False)
        fast.encode(sentences[:64], template=TEMPLATE)  # warm-up
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        times = []
        with timed(device, times):
            fast.encode(sentences, template=TEMPLATE, denoise=True)
        peak = (torch.cuda.max_memory_allocated() / 2**30 if device.type == "cuda"
                else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
        with timed(device, times):
            naive(slow, sentences, args.batch_size)
        t_fast, t_naive = times
        branch = branch_lines(fast, sentences, ['This sentence : "[X]"' + e for e in ENDINGS[: args.suffixes]], args.unbranched)
    where = device_name(device)
    print(f"STS-B dev{' (first ' + str(args.sentences) + ')' if args.sentences else ''}, {len(sentences)} sentences ({len(set(sentences))} distinct), PromptEOL, on {where}")
    print(f"{'':34} {'seconds':>8} {'sentences/s':>12}")
    print(f"{'plain loop (fp32, in order)':34} {t_naive:8.2f} {len(sentences) / t_naive:12.1f}")
    print(f"{'PromptEncoder (' + ('bf16' if fast.bf16 else 'fp32') + ', denoised)':34} {t_fast:8.2f} {len(sentences) / t_fast:12.1f}")
    print(f"speed-up {t_naive / t_fast:.2f}x; peak {'GPU memory' if device.type == 'cuda' else 'RSS'} {peak:.2f} GiB")
    one, many, separate = branch
    k = args.suffixes
    print(f"{k} suffixes branched from one prefix (encode_templates, raw): {many:.2f} s = {many / one:.2f}x one template's "
          f"encode ({one:.2f} s)" + (f"; as {k} separate encodes: {separate:.2f} s ({separate / many:.2f}x slower)"
                                     if separate else ""))


def branch_lines(enc, sentences, templates, unbranched: bool):
    """Seconds of: one template's encode, all templates' encode_templates (branched), and (``unbranched``)
    the same with branching off."""
    times = []
    with timed(enc.device, times):
        enc.encode(sentences, template=templates[0])
    with timed(enc.device, times):
        enc.encode_templates(sentences, templates, denoise=False)
    if unbranched:
        enc.prompt.share_prefix = False
        with timed(enc.device, times):
            enc.encode_templates(sentences, templates, denoise=False)
        enc.prompt.share_prefix = True
    return times[0], times[1], times[2] if unbranched else None


if __name__ == "__main__":
    main()
