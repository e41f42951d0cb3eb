"""Peak memory of OptiPrompt training from a 1M-line corpus (the size of SimCSE's wiki1m_for_simcse.txt):
``--train-file`` through 🤗 datasets (memory-mapped Arrow) against reading the file into a Python list.

Each variant runs in a fresh process (load the model, load the corpus, train a few steps) and reports
its peak RSS; what the corpus costs is the difference to the same run on a 1,000-line corpus, whose
peak is the model's and the training's own.

    python benchmarks/corpus_memory.py --lines 1000000 --steps 5 [--device cpu|cuda]

Peak RSS is host memory: on a GPU the corpus still lives on the host, so the comparison holds there too.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def worker(variant: str, path: str, steps: int, model: str, device: str | None) -> None:
    from promptsearch import PromptEncoder
    from promptsearch.data import DataOptions, load_texts
    from promptsearch.train.loop import TrainRun
    from promptsearch.train.optiprompt import OptiPromptConfig, train_optiprompt

    template = 'This sentence : "[X]" means [MASK] .'
    enc = PromptEncoder.from_pretrained(model, device=device, show_progress_bar=False)
    t0 = time.time()
    if variant == "datasets":
        corpus = load_texts(path)
    elif variant == "small":
        corpus = load_texts(path).select(range(1000))
    else:
        with open(path, encoding="utf-8") as f:
            corpus = [line.strip() for line in f if line.strip()]
    load_s = time.time() - t0
    cfg = OptiPromptConfig(template=template, steps=steps, batch_size=64, eval_steps=steps)
    with tempfile.TemporaryDirectory() as out:
        train_optiprompt(enc, corpus, cfg, out, model, TrainRun(data=DataOptions(show_progress_bar=False), resume=False))
    print(json.dumps({"variant": variant, "sentences": len(corpus), "peak_mb": round(_peak_mb()),
                      "load_s": round(load_s, 1), "total_s": round(time.time() - t0, 1)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--model", default="default")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available, else cpu)")
    ap.add_argument("--worker", nargs=2, metavar=("VARIANT", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.steps, args.model, args.device)
        return
    from promptsearch.data import load_corpus

    sample = load_corpus(data_dir=args.data_dir)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "corpus.txt"
        rng = random.Random(0)
        with open(path, "w", encoding="utf-8") as f:
            for i in range(args.lines):
                f.write(f"{rng.choice(sample)} ({i})\n")
        print(f"{args.lines:,} lines, {path.stat().st_size / 2**20:.0f} MiB; model {args.model}; {args.steps} OptiPrompt steps x 64")
        env = {**os.environ, "HF_DATASETS_CACHE": str(Path(tmp) / "hf-cache")}
        rows = []
        for variant in ("small", "datasets", "list"):
            out = subprocess.run([sys.executable, __file__, "--worker", variant, str(path), "--steps", str(args.steps),
                                  "--model", args.model, *(["--device", args.device] if args.device else [])],
                                 capture_output=True, text=True, env=env)
            if out.returncode != 0:
                sys.exit(out.stderr)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    small = rows[0]["peak_mb"]
    print(f"{'corpus':<24} {'peak RSS':>9} {'over 1k lines':>14} {'load s':>7} {'total s':>8}")
    for r in rows:
        name = {"small": "1,000 lines (reference)", "datasets": "datasets (memory-mapped)", "list": "Python list"}[r["variant"]]
        print(f"{name:<24} {r['peak_mb']:>6} MB {r['peak_mb'] - small:>11} MB {r['load_s']:>7} {r['total_s']:>8}")


if __name__ == "__main__":
    main()
