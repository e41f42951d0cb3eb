"""Distributed scoring: what the storage costs per candidate, and what workers buy, measured in one run.

1. Storage overhead: the same candidates scored on STS-B dev directly (``Scorer.score``, one at
   a time) and through a work study on PostgreSQL with this process as the only worker (enqueue,
   claim under a row lock, heartbeat, report, fetch): the difference per candidate, in ms, beside
   the scoring time per candidate.
2. The same greedy search (relation step, racing), every process with one thread: one process; a
   driver (``--no-local``) with 1 worker, with 2 workers, ... up to ``--workers``. Wall times and the
   ratios against one process; the results are checked equal (path and scores).

    python benchmarks/distributed_speed.py [--model default] [--storage URL] [--templates 8] [--max-steps 0] [--workers 2]

Without ``--storage`` a throwaway PostgreSQL cluster is started (the installed server binaries,
``promptsearch.pgcluster``) and removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _device import scratch_dir

ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


def overhead(model: str, url: str, n: int) -> dict:
    import torch

    torch.set_num_threads(1)
    from promptsearch import PromptEncoder
    from promptsearch.search import Scorer
    from promptsearch.search.distributed import STSWork, WorkQueue
    from promptsearch.search.greedy import load_vocabulary

    relations = [r for r in load_vocabulary("greedy")["relations"] if r][:n]
    templates = [f"[X] {r} [MASK] ." for r in relations]
    enc = PromptEncoder.from_pretrained(model, bf16=False, show_progress_bar=False)
    direct = Scorer(enc, cache=False)
    direct.score(templates[0], fresh=True)  # warm
    t0 = time.perf_counter()
    scores = {t: direct.score(t, fresh=True).spearman for t in templates}
    t_direct = (time.perf_counter() - t0) / len(templates)
    queued = Scorer(enc, cache=False)
    queue = WorkQueue(url, STSWork(queued), model, name=f"bench-{os.getpid()}", local=True)
    queued.distribute(queue)
    t0 = time.perf_counter()
    via = {t: queued.score(t).spearman for t in templates}
    t_queue = (time.perf_counter() - t0) / len(templates)
    queue.close()
    assert via == scores, "scores through the storage differ"
    return {"candidates": len(templates), "scoring_ms": 1000 * t_direct, "through_storage_ms": 1000 * t_queue,
            "overhead_ms": 1000 * (t_queue - t_direct)}


def greedy_runs(model: str, url: str, max_steps: int, data_dir: str | None, max_workers: int = 2) -> dict:
    env = {**os.environ, **ONE_THREAD}
    work = Path(scratch_dir("distributed-speed-"))
    base = [sys.executable, "-m", "promptsearch", "greedy", "--model", model, "--max-steps", str(max_steps), "--readouts",
            "none", "--no-cache", "-q", "--no-bf16", "--validate-top", "0"] + (["--data-dir", data_dir] if data_dir else [])
    out = {}

    def run(label: str, workers: int) -> float:
        extra = [] if workers == 0 else ["--storage", url, "--study-name", f"bench-{label}", "--no-local"]
        procs = [subprocess.Popen([sys.executable, "-m", "promptsearch", "worker", "--storage", url, "--study-name",
                                   f"bench-{label}", "--model", model, "--no-bf16", "-q"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(workers)]
        try:
            t0 = time.perf_counter()
            r = subprocess.run(base + ["--out", str(work / f"{label}.json")] + extra, env=env, capture_output=True, text=True)
            wall = time.perf_counter() - t0
            if r.returncode != 0:
                raise SystemExit(f"{label}: {r.stderr[-2000:]}")
            for p in procs:
                p.wait(timeout=120)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
        d = json.loads((work / f"{label}.json").read_text())
        out[label] = {"wall_s": wall, "chosen": d["x_chosen"],
                      "scores": sorted((e["template"], e["spearman"]) for e in d["templates"]),
                      "path": [(r["template"], r["spearman"]) for r in d["path"]]}
        return wall

    one = run("one-process", 0)
    for n in range(1, max_workers + 1):
        run(f"{n}-worker{'s' if n > 1 else ''}", n)
    ref = out["one-process"]
    for label, r in out.items():
        r["ratio"] = r["wall_s"] / one
        r["equal"] = (r["scores"], r["path"]) == (ref["scores"], ref["path"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--storage", help="a PostgreSQL URL (default: a throwaway cluster)")
    ap.add_argument("--templates", type=int, default=8, help="candidates for the overhead measurement")
    ap.add_argument("--max-steps", type=int, default=0, help="greedy's prefix steps (0: the relation step alone)")
    ap.add_argument("--workers", type=int, default=2, help="the most workers a driver is timed with (1, 2, ... this)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--json", help="also write the numbers here")
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        url = args.storage
        if url is None:
            from promptsearch.pgcluster import Cluster

            url = stack.enter_context(Cluster())
        o = overhead(args.model, url, args.templates)
        print(f"storage overhead ({o['candidates']} candidates, STS-B dev, one thread): scoring {o['scoring_ms']:.0f} ms a "
              f"candidate directly, {o['through_storage_ms']:.0f} ms through the storage: overhead {o['overhead_ms']:.1f} ms "
              f"a candidate ({100 * o['overhead_ms'] / o['scoring_ms']:.2f} % of its scoring time)")
        g = greedy_runs(args.model, url, args.max_steps, args.data_dir, args.workers)
        print("\ngreedy (relation step, racing), every process one thread:")
        for label, r in g.items():
            print(f"  {label:12s} {r['wall_s']:7.1f} s   {r['ratio']:.2f}x one process   chosen {r['chosen']}   "
                  f"{'same path and scores' if r['equal'] else 'DIFFERENT RESULTS'}")
        if args.json:
            Path(args.json).write_text(json.dumps({"overhead": o, "greedy": g}, indent=2))
        if not all(r["equal"] for r in g.values()):
            raise SystemExit("the distributed runs' results differ from the single process's")


if __name__ == "__main__":
    main()
