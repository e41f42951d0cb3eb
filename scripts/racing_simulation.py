"""How often racing keeps greedy's exhaustive winner, and at what cost: a simulation on real vectors.

Every candidate of every step of an exhaustive greedy path (a results file written with
``--no-racing``) is encoded once on the full STS-B dev; then each step is raced again and again
with other random pair orders (``Racing.seed``), the rungs reading those vectors, and compared with
the exhaustive winner. Reports, per racing setting: how often the step's winner is kept, the mean
regret (full-set points lost), and the mean full-set-equivalent encodings per step (rungs + one
per finalist) against exhaustive's (one per candidate).

    python scripts/racing_simulation.py docs/results/greedy-default.json [--orders 100]
"""

from __future__ import annotations

import argparse
import json

import numpy as np

from promptsearch.encoding import PromptEncoder
from promptsearch.encoding.encoder import PromptStates
from promptsearch.search import Score, Scorer
from promptsearch.search.greedy import GreedyState, load_vocabulary
from promptsearch.search.racing import Racing, race


class Replay:
    precision = "replay"

    def __init__(self, scorer, vecs):
        self.index = {s: i for i, s in enumerate(scorer.sentences)}
        self.vecs = vecs

    def prompt_states(self, sentences, template, denoise=True, show_progress_bar=None):
        v = self.vecs[template][[self.index[s] for s in sentences]]
        return PromptStates(raw=v, bias=np.zeros_like(v))


def steps_of(path: list[dict], vocabulary: str) -> list[list[str]]:
    """The candidate lists greedy scored at each step of ``path``."""
    v = load_vocabulary(vocabulary)
    rel = [GreedyState(relation=r, suffix=v["suffix"], mask=v["mask"]) for r in dict.fromkeys(v["relations"])]
    steps = [[s.template for s in rel]]
    best = {s.template: s for s in rel}[[r for r in path if r["stage"] == "relation:best"][0]["template"]]
    for r in path:
        if r["stage"] not in ("prefix", "stop"):
            continue
        cands = [GreedyState(best.prefix + (tok,), best.quote, best.relation, best.suffix, best.mask) for tok in v["prefix_tokens"]]
        if not best.quote:
            cands += [GreedyState(best.prefix, q, best.relation, best.suffix, best.mask) for q in v["wrappers"]]
        steps.append([c.template for c in cands])
        best = {c.template: c for c in cands}.get(r["template"], best)
    return steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", help="an exhaustive greedy results file")
    ap.add_argument("--orders", type=int, default=100, help="random pair orders per setting")
    ap.add_argument("--model", default="default")
    args = ap.parse_args()
    d = json.load(open(args.results, encoding="utf-8"))
    steps = steps_of(d["path"], d["settings"].get("vocabulary", "greedy"))
    enc = PromptEncoder.from_pretrained(args.model, show_progress_bar=False)
    scorer = Scorer(enc, dataset="stsb-dev", cache=False, denoise=d["denoise"])
    vecs, full = {}, {}
    for cands in steps:
        for t in cands:
            if t not in vecs:
                st = enc.prompt_states(scorer.sentences, t, denoise=True)
                vecs[t] = st.denoised if d["denoise"] else st.raw
                full[t] = scorer.evaluator.spearman(vecs[t])
    print(f"{len(vecs)} templates encoded ({enc.precision}); steps of {[len(c) for c in steps]} candidates")
    scorer._screening = Replay(scorer, vecs)
    scorer.score = lambda t: Score(t, full[t], True, 0.0)
    settings = {
        "halving, 2 finalists, rungs 1/8..1/2 (no bootstrap)": Racing(fractions=(0.125, 0.25, 0.5), alpha=0.0),
        "halving + bootstrap 0.05, 2 finalists, rungs 1/8..1/2 (default)": Racing(),
        "halving + bootstrap 0.05, 1 finalist, rungs 1/8..1/2": Racing(fractions=(0.125, 0.25, 0.5), finalists=1),
        "halving + bootstrap 0.2, 2 finalists, rungs 1/8..1/2": Racing(fractions=(0.125, 0.25, 0.5), alpha=0.2),
        "halving + bootstrap 0.05, 2 finalists, rungs 1/16..1/2": Racing(fractions=(0.0625, 0.125, 0.25, 0.5), keep=0.5),
        "keep 1/3 + bootstrap 0.05, 2 finalists, rungs 1/8..1/2": Racing(keep=1 / 3),
    }
    print(f"{'setting':66} {'winner kept':>11} {'regret':>7} {'encodings':>9} {'vs exhaustive':>13}")
    exhaustive = sum(len(c) for c in steps)
    for name, base in settings.items():
        kept, regret, work = [], [], []
        for seed in range(args.orders):
            r = Racing(**{**base.__dict__, "seed": seed})
            total = 0.0
            for cands in steps:
                out = race(scorer, cands, r)
                got = max(s.spearman for s in out.scores)
                want = max(full[t] for t in cands)
                kept.append(got == want)
                regret.append(want - got)
                total += out.encodings + len(out.scores)
            work.append(total)
        print(f"{name:66} {100 * np.mean(kept):10.1f}% {np.mean(regret):7.3f} {np.mean(work):9.1f} "
              f"{exhaustive / np.mean(work):12.2f}x")


if __name__ == "__main__":
    main()
