"""A causal LM on STS-B dev with PromptEOL: sentences/s and peak memory, for a randomly initialised
Llama-shaped model built from its config (no download: speed needs no trained weights).

    python benchmarks/causal_speed.py --preset small            # CPU-sized (12 layers x 768)
    python benchmarks/causal_speed.py --preset tiny --device cpu # a smoke run of every code path
    python benchmarks/causal_speed.py --preset 7b --device cuda # Llama-2-7B's shape, bf16, one GPU

Both the tool's encoder (deduplicated, length-sorted batches, inference mode, bf16 where fast) and
a plain loop (input order, no deduplication, float32) run in the same process, so the ratio
between them is what the numbers say; peak memory is the accelerator's (CUDA) or the process's.
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
    args = ap.parse_args()

    from promptsearch import PromptEncoder
    from promptsearch.data import load_task

    a, b, _ = load_task("stsb-dev", args.data_dir).subsets["dev"]
    sentences = a + b
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
    where = device_name(device)
    print(f"STS-B dev, {len(sentences)} sentences ({len(set(sentences))} distinct), PromptEOL, on {where}")
    print(f"{'':34} {'seconds':>8} {'sentences/s':>12}")
    print(f"{'plain loop (fp32, in order)':34} {t_naive:8.2f} {len(sentences) / t_naive:12.1f}")
    print(f"{'PromptEncoder (' + ('bf16' if fast.bf16 else 'fp32') + ', denoised)':34} {t_fast:8.2f} {len(sentences) / t_fast:12.1f}")
    print(f"speed-up {t_naive / t_fast:.2f}x; peak {'GPU memory' if device.type == 'cuda' else 'RSS'} {peak:.2f} GiB")


if __name__ == "__main__":
    main()
