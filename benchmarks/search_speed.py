"""Search speed: greedy on the default model three ways, measured side by side in one run —
exhaustive (every candidate on the full STS-B dev, the paper's protocol), racing with fp32
screening, racing with int8 screening — each from a fresh encoder and an empty score cache.
Prints wall time, full-set-equivalent encodings, the final template and its full dev score, and
the ratios against exhaustive. Then Kendall's tau between int8 and fp32 full-set scores over
every template the exhaustive run scored (how often int8 screening would change a decision).

    python benchmarks/search_speed.py [--model default] [--device cpu|cuda] [--precision fp32] [--avx2] [--json out.json]

The reference precision is fp32 (``--precision bf16`` on a machine with fast bf16). ``--avx2``
re-runs the benchmark with oneDNN, MKL, ATen and fbgemm restricted to AVX2 kernels: a CPU
without AVX512/AMX (no fast bf16, no VNNI), the machine the int8 target is about. On a GPU
(``--device cuda``) int8 screening does not exist (it is a CPU route): those runs are skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys

from _device import add_device_flag, device_name, resolve, timed

AVX2_ENV = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2"}


def cpu_name() -> str:
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def run_greedy(model: str, precision: str, racing, screening: str, data_dir, vocabulary: str, max_steps: int, device):
    from promptsearch.data import DataOptions
    from promptsearch.encoding import PromptEncoder
    from promptsearch.search import Scorer, run_strategy
    from promptsearch.search.greedy import Greedy

    enc = PromptEncoder.from_pretrained(model, device=str(device), bf16=precision == "bf16", show_progress_bar=False)
    enc.encode(["warm up the thread pools ."] * 8, template="[X] means [MASK] .")
    enc.prompt.clear_cache()
    times = []
    with timed(device, times):
        scorer = Scorer(enc, dataset="stsb-dev", data=DataOptions(data_dir), cache=False, screening=screening)
        # the template search alone (no read-out step); the model's own representation is scored as always
        g = Greedy(vocabulary=vocabulary, max_steps=max_steps, show_progress_bar=False, racing=racing, readouts="none")
        res = run_strategy(g, scorer, None, model, validate_top=0)
    wall = times[0]
    best = res.entries[res.baseline.best]  # greedy's own answer, before the model's own is weighed
    stats = res.to_dict()["stats"]
    return {"wall_s": round(wall, 1), "encodings": stats["encodings"], "by_precision": stats["encodings_by_precision"],
            "templates_scored": stats["scored"], "final": best.template, "final_dev": best.spearman,
            "path": [(r.stage, r.template, r.spearman) for r in g.path if r.stage != "relation"],
            "scores": {e.template: e.spearman for e in res.entries.values() if not e.readout}}


def kendall(model: str, templates: dict[str, float], data_dir) -> dict:
    from scipy.stats import kendalltau

    from promptsearch.data import DataOptions
    from promptsearch.encoding import PromptEncoder
    from promptsearch.search import Scorer

    # int8 runs on the CPU only: named here, or a machine with a GPU (the default device there) refuses it
    enc = PromptEncoder.from_pretrained(model, device="cpu", bf16=False, show_progress_bar=False).with_precision("int8")
    s = Scorer(enc, dataset="stsb-dev", data=DataOptions(data_dir), cache=False)
    names = sorted(templates)
    int8 = [s.score(t).spearman for t in names]
    fp = [templates[t] for t in names]
    tau = kendalltau(fp, int8).statistic
    same_best = names[max(range(len(names)), key=lambda i: int8[i])] == names[max(range(len(names)), key=lambda i: fp[i])]
    return {"templates": len(names), "tau": round(float(tau), 3), "same_best": bool(same_best),
            "mean_abs_diff": round(float(sum(abs(a - b) for a, b in zip(fp, int8)) / len(names)), 2)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32", help="reference precision (default fp32)")
    ap.add_argument("--avx2", action="store_true", help="restrict every kernel library to AVX2 (see the docstring)")
    ap.add_argument("--vocabulary", default="greedy")
    ap.add_argument("--max-steps", type=int, default=8)
    ap.add_argument("--keep", type=float, default=None, help="racing: share of candidates kept per rung (default: Racing's)")
    ap.add_argument("--race-rungs", default=None, help="racing rungs, e.g. 0.125,0.25,0.5 (default: Racing's)")
    ap.add_argument("--skip", default="", help="comma-separated runs to skip: exhaustive,racing,int8,tau")
    ap.add_argument("--data-dir", default=None)
    add_device_flag(ap)
    ap.add_argument("--json", default=None, help="also write the numbers here")
    args = ap.parse_args()
    if args.avx2 and os.environ.get("ONEDNN_MAX_CPU_ISA") != "AVX2":
        env = {**os.environ, **AVX2_ENV}
        sys.exit(subprocess.call([sys.executable, *sys.argv], env=env))

    import torch

    from promptsearch.search.racing import Racing

    skip = set(filter(None, args.skip.split(",")))
    device = resolve(args.device)
    if device.type != "cpu":
        skip |= {"int8", "tau"}  # int8 screening is a CPU route
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores, device {device_name(device)}, torch {torch.__version__}, "
          f"kernels {'AVX2 only' if os.environ.get('ONEDNN_MAX_CPU_ISA') == 'AVX2' else 'native'}; "
          f"reference precision {args.precision}; model {args.model}", flush=True)
    runs = {}
    kw = {}
    if args.keep is not None:
        kw["keep"] = args.keep
    if args.race_rungs:
        kw["fractions"] = tuple(float(x) for x in args.race_rungs.split(","))
    racing = Racing(**kw).check()
    print(f"racing: {racing.settings()}", flush=True)
    plan = [("exhaustive", None, args.precision), ("racing", racing, args.precision), ("int8", racing, "int8")]
    for name, racing, screening in plan:
        if name in skip:
            continue
        r = runs[name] = run_greedy(args.model, args.precision, racing, screening, args.data_dir, args.vocabulary,
                                    args.max_steps, device)
        print(f"{name:>10}: {r['wall_s']:7.1f} s  {r['encodings']:6.1f} full-set encodings {r['by_precision']}  "
              f"final {r['final']!r} {r['final_dev']:.2f}", flush=True)
    if "exhaustive" in runs:
        base = runs["exhaustive"]
        print("\nagainst exhaustive greedy (same run, same machine):")
        for name, r in runs.items():
            if name == "exhaustive":
                continue
            print(f"  {name:>8}: {base['wall_s'] / r['wall_s']:.2f}x less wall time, "
                  f"{base['encodings'] / r['encodings']:.2f}x fewer encodings, final dev {r['final_dev']:.2f} "
                  f"({r['final_dev'] - base['final_dev']:+.2f}); same path: {r['path'] == base['path']}")
        if "racing" in runs and "int8" in runs:
            print(f"  int8 screening over fp32 racing: {runs['racing']['wall_s'] / runs['int8']['wall_s']:.2f}x wall time")
        if "tau" not in skip:
            k = runs["tau"] = kendall(args.model, base["scores"], args.data_dir)
            print(f"\nint8 vs {args.precision} full-set scores over the {k['templates']} templates exhaustive greedy scored: "
                  f"Kendall tau {k['tau']:.3f}, mean |diff| {k['mean_abs_diff']:.2f} points, same best: {k['same_best']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"machine": cpu_name(), "avx2_only": os.environ.get("ONEDNN_MAX_CPU_ISA") == "AVX2",
                       "precision": args.precision, **runs}, f, indent=1)


if __name__ == "__main__":
    main()
