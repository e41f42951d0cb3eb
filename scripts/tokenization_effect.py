"""How much SentEval's tokenization and lowercasing of STS-B changes scores and template rankings.

Scores the same representations on STS-B dev/test as SentEval ships them (tokenized, lowercased)
and as released upstream (``STSBenchmark/original/``, cased, untokenized), and compares the
ranking of templates between the two dev sets.

    python scripts/tokenization_effect.py --model default --results docs/results/greedy-default.json --top 25
"""

from __future__ import annotations

import argparse
import json
import time

from scipy.stats import kendalltau, spearmanr

from promptsearch import PromptEncoder
from promptsearch.data import DataOptions
from promptsearch.encoding import rep
from promptsearch.eval import evaluate_reps
from promptsearch.library import paper_templates

TASKS = ["stsb-dev", "stsb-original-dev", "stsb", "stsb-original-test"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--results", default="docs/results/greedy-default.json", help="a search's results: its templates are ranked")
    ap.add_argument("--top", type=int, default=25, help="templates taken from the results file (best first)")
    ap.add_argument("--data-dir", default=None)
    args = ap.parse_args()

    enc = PromptEncoder.from_pretrained(args.model, show_progress_bar=False)
    ranked = [e["template"] for e in json.load(open(args.results, encoding="utf-8"))["templates"][: args.top]]
    fixed = [rep(pooling="mean"), rep(pooling="cls")] + [rep(t, denoise=True) for t in paper_templates(enc.model.config.model_type)]
    searched = [rep(t, denoise=True) for t in ranked if rep(t, denoise=True) not in fixed]
    t0 = time.time()
    res = evaluate_reps(enc, fixed + searched, TASKS, DataOptions(args.data_dir))
    print(f"model {args.model}; {len(fixed) + len(searched)} representations x {len(TASKS)} sets in {time.time() - t0:.0f}s\n")
    print("| representation | STS-B dev (SentEval) | STS-B dev (original) | diff | STS-B test (SentEval) | STS-B test (original) | diff |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in fixed + searched[:5]:
        s = [res[r][t]["spearman"] for t in TASKS]
        print(f"| {r.label} | {s[0]:.2f} | {s[1]:.2f} | {s[1] - s[0]:+.2f} | {s[2]:.2f} | {s[3]:.2f} | {s[3] - s[2]:+.2f} |")
    dev = [res[r]["stsb-dev"]["spearman"] for r in searched]
    orig = [res[r]["stsb-original-dev"]["spearman"] for r in searched]
    best_dev = max(range(len(searched)), key=lambda i: dev[i])
    best_orig = max(range(len(searched)), key=lambda i: orig[i])
    rank_of = sorted(range(len(searched)), key=lambda i: -orig[i]).index(best_dev) + 1
    diffs = [o - d for d, o in zip(dev, orig)]
    print(f"\n{len(searched)} searched templates (denoised): original - SentEval on dev = {min(diffs):+.2f} .. {max(diffs):+.2f} "
          f"(mean {sum(diffs) / len(diffs):+.2f}); ranking agreement Kendall tau {kendalltau(dev, orig).statistic:.3f}, "
          f"Spearman {spearmanr(dev, orig).statistic:.3f}")
    print(f"best on SentEval dev: {searched[best_dev].template} ({dev[best_dev]:.2f}; rank {rank_of} on original dev)")
    print(f"best on original dev: {searched[best_orig].template} ({orig[best_orig]:.2f}; {dev[best_orig]:.2f} on SentEval dev)")


if __name__ == "__main__":
    main()
