"""Where a retrieval evaluation's host time goes: cProfile of one fresh task scoring the model's own pair, then of
one scoring 16 query prompts over that document prompt (benchmarks/retrieval_speed.py's default data), each after
a warm-up; the top functions by their own time. For a GPU loan, where the host's share is what a query prompt costs.

    python scripts/profile_retrieval.py [--device cuda] [--top 25]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args()
    from _device import sync
    from retrieval_speed import build_data

    from promptsearch.encoding import PromptEncoder
    from promptsearch.eval.retrieval import RetrievalCandidate, RetrievalTask
    from promptsearch.search.retrieval import library_prompts, own_candidate

    enc = PromptEncoder.from_pretrained("default", device=args.device, bf16=False, show_progress_bar=False)
    data = build_data(64, 8000, None)
    own = own_candidate(enc)
    prompts = list(dict.fromkeys([own.query, *(p for p, _ in library_prompts("query", data.description))]))[:16]
    many = [RetrievalCandidate.of(q, own.document, own.readout) for q in prompts]
    for name, cands in (("one pair", [own]), ("16 query prompts", many)):
        for profiled in (False, True):  # a warm-up, then the profile
            task = RetrievalTask(data, cache_dir=False, show_progress_bar=False)
            prof = cProfile.Profile()
            sync(enc.device)
            t0 = time.perf_counter()
            if profiled:
                prof.enable()
            task.evaluate(enc, cands)
            sync(enc.device)
            prof.disable()
            took = time.perf_counter() - t0
            task.close()
        out = io.StringIO()
        pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(args.top)
        print(f"== {name}: {took:.3f} s profiled")
        print("\n".join(line for line in out.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
