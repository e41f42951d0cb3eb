"""Optuna's trial throughput, one trial at a time against batches of trials, measured side by side in
one run: the same study (grammar, seed, ``--no-prune`` so every trial is one full-set score) with
``batch=1`` and ``batch=N``, each from a fresh encoder, an empty score cache and a fresh SQLite study.
Prints wall time, templates encoded and seconds per encoded template of each, and their ratio.

    python benchmarks/optuna_speed.py [--model default] [--dataset sick-trial] [--trials 16] [--batch 8] [--device cpu|cuda]

A batch encodes its templates in one call (tokenized once, one copy back, per-template batches) and
syncs the results file and the study once; on a CPU the forward passes dominate, on a GPU the host
work a batch saves is most of a template's time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from _device import add_device_flag, device_name, resolve, timed


def run(model: str, dataset: str, trials: int, batch: int, device, seed: int, bf16: bool) -> dict:
    import optuna

    from promptsearch.encoding import PromptEncoder
    from promptsearch.search import Scorer, run_strategy
    from promptsearch.search.optuna_search import OptunaSearch

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    enc = PromptEncoder.from_pretrained(model, device=str(device), bf16=bf16, show_progress_bar=False)
    enc.encode(["warm up the thread pools ."] * 8, template="[X] means [MASK] .")
    enc.prompt.clear_cache()
    with tempfile.TemporaryDirectory() as tmp:
        times: list = []
        with timed(device, times):
            scorer = Scorer(enc, dataset=dataset, cache=False)
            s = OptunaSearch(storage=f"sqlite:///{Path(tmp) / 's.db'}", study_name="bench", trials=trials, seed=seed,
                             prune=False, batch=batch, show_progress_bar=False)
            res = run_strategy(s, scorer, None, model, validate_top=0)
    return {"wall_s": times[0], "encoded": scorer.n_scored, "best": res.best.spearman}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--dataset", default="sick-trial")
    ap.add_argument("--trials", type=int, default=16)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bf16", action="store_true", help="bf16 autocast (default fp32)")
    add_device_flag(ap)
    a = ap.parse_args(argv)
    device = resolve(a.device)
    print(f"optuna --no-prune, {a.trials} trials on {a.dataset}, model {a.model}, on {device_name(device)} "
          f"({'bf16' if a.bf16 else 'fp32'})")
    got = {}
    for b in (1, a.batch):
        r = got[b] = run(a.model, a.dataset, a.trials, b, device, a.seed, a.bf16)
        per = r["wall_s"] / max(r["encoded"], 1)
        print(f"  batch {b:>3}: {r['wall_s']:7.2f} s wall, {r['encoded']:3d} templates encoded, {per:6.3f} s per encoded "
              f"template, best {r['best']:.2f}")
    one, many = (got[b]["wall_s"] / max(got[b]["encoded"], 1) for b in (1, a.batch))
    print(f"per encoded template, batch {a.batch} against batch 1: {one / many:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
