"""The README's search-dimensions table: representations (results-entry keys) on the dev sets and the
7 STS tasks, denoised, in one run (every template encoded once per task, shared by the ensembles).

    python scripts/search_table.py --model default \
        --row 'paper=This sentence : "[X]" means [MASK] .' --row 'ensemble=[X] is like [MASK] . + [X] means [MASK] .'

A row's key is a template, ``template @layer L``, or members joined by `` + `` (their ensemble), as a
results file's ``x_chosen`` names them; or ``pooling:NAME`` for a baseline (``pooling:mean``).
"""

from __future__ import annotations

import argparse
import time

from promptsearch import PromptEncoder
from promptsearch.data import TASKS, DataOptions
from promptsearch.encoding.reps import rep, rep_from_key
from promptsearch.eval import evaluate_reps


def representation(key: str):
    if key.startswith("pooling:"):  # a baseline, e.g. pooling:mean (the model's own pooling)
        return rep(pooling=key.split(":", 1)[1])
    return rep_from_key(key, denoise=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--dev", default="stsb-dev,sick-trial", help="dev sets shown before the 7 test tasks")
    ap.add_argument("--row", action="append", required=True, metavar="LABEL=KEY")
    ap.add_argument("--no-bf16", dest="bf16", action="store_false", default=None)
    args = ap.parse_args()
    rows = [r.split("=", 1) for r in args.row]
    reps = {label: representation(key) for label, key in rows}
    enc = PromptEncoder.from_pretrained(args.model, bf16=args.bf16)
    dev = args.dev.split(",")
    t0 = time.time()
    res = evaluate_reps(enc, list(dict.fromkeys(reps.values())), dev + TASKS, DataOptions(show_progress_bar=False))
    print(f"<!-- {args.model}, {enc.precision}, {time.time() - t0:.0f} s -->")
    print("| representation | " + " | ".join(dev + TASKS) + " | 7-task avg |")
    print("|---|" + "---:|" * (len(dev) + len(TASKS) + 1))
    for label, key in rows:
        r = res[reps[label]]
        cells = [f"{r[t]['spearman']:.2f}" for t in dev + TASKS]
        avg = sum(r[t]["spearman"] for t in TASKS) / len(TASKS)
        name = label if key.startswith("pooling:") else f"{label}: `{key}`"
        print(f"| {name} | " + " | ".join(cells) + f" | **{avg:.2f}** |")


if __name__ == "__main__":
    main()
