"""STS evaluation: Spearman ×100 of cosine similarity, SentEval "all" aggregation, anisotropy.

A representation is a :class:`Rep` (a template, optionally denoised, or a pooling).
``evaluate_reps`` encodes every sentence of every requested task once per forward pass
and scores several representations from the same pass (raw and denoised [MASK] states
share one pass; all pooling baselines share another).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Sequence

import numpy as np
from scipy.stats import spearmanr

from .data import TASK_NAMES, STSData, load_corpus, load_task
from .encoder import PromptEncoder
from .pooling import get_pooling


@dataclass(frozen=True)
class Rep:
    """One sentence representation: a template ([MASK] state) or a pooling baseline."""

    template: str | None = None
    denoise: bool = False
    pooling: str | None = None  # with a template: None/"mask" ([MASK] state) or "topk-static" (Eq. 3)
    head: str | None = None

    @property
    def label(self) -> str:
        if self.template:
            kind = " [avg top-200]" if self.pooling == "topk-static" else ""
            return self.template + kind + (" (denoised)" if self.denoise else "")
        return self.pooling + (f" (head {self.head})" if self.head else "")


def cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b = b / np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    return (a * b).sum(1)


def spearman100(pred: Sequence[float], gold: Sequence[float]) -> float:
    return float(spearmanr(pred, gold).statistic * 100)


class STSEvaluator:
    """One STS task's pairs, indexed once: the single place an STS score is computed.

    ``sentences`` are the task's distinct sentences in a fixed order (subset by subset,
    first sentences then second ones); every caller encodes exactly this list, so the same
    template on the same data goes through the same batches and gives bit-identical
    numbers whether it comes from ``eval``, ``report``, the search scorer or Ditto.
    ``score(vecs)`` takes vectors in that order: Spearman ×100 of cosine per subset and
    "all" (SentEval's "all" setting: over the concatenated scores of all subsets).
    """

    def __init__(self, data: STSData):
        self.data = data
        self.name = data.name
        self.sentences: list[str] = list(dict.fromkeys(data.sentences()))
        index = {s: i for i, s in enumerate(self.sentences)}
        ia, ib, gold, self.subsets = [], [], [], {}
        for name, (a, b, y) in data.subsets.items():
            self.subsets[name] = slice(len(gold), len(gold) + len(y))
            ia += [index[s] for s in a]
            ib += [index[s] for s in b]
            gold += list(y)
        self.ia = np.asarray(ia, dtype=np.int64)
        self.ib = np.asarray(ib, dtype=np.int64)
        self.gold = np.asarray(gold, dtype=np.float64)

    @property
    def n_pairs(self) -> int:
        return len(self.gold)

    def similarities(self, vecs: np.ndarray, pairs: np.ndarray | slice = slice(None)) -> np.ndarray:
        return cosine(vecs[self.ia[pairs]], vecs[self.ib[pairs]])

    def spearman(self, vecs: np.ndarray, pairs: np.ndarray | slice = slice(None)) -> float:
        """Spearman ×100 over the given pairs (all of them by default) — the "all" number."""
        return spearman100(self.similarities(vecs, pairs), self.gold[pairs])

    def score(self, vecs: np.ndarray) -> dict:
        """{"spearman": all, "subsets": {name: spearman}, "pairs": n} for vectors of ``sentences``."""
        sims = self.similarities(vecs)
        subsets = {name: spearman100(sims[sl], self.gold[sl]) for name, sl in self.subsets.items()}
        return {"spearman": spearman100(sims, self.gold), "subsets": subsets, "pairs": self.n_pairs}


def score_task(data: STSData, lookup: dict[str, np.ndarray] | callable) -> dict:
    """:meth:`STSEvaluator.score` for vectors given by sentence (a dict or a function of a list)."""
    ev = STSEvaluator(data)
    vecs = np.stack([lookup[s] for s in ev.sentences]) if isinstance(lookup, dict) else lookup(ev.sentences)
    return ev.score(np.asarray(vecs))


def _embed_all(encoder: PromptEncoder, reps: Sequence[Rep], sentences: list[str], show=None, data_dir=None) -> dict[Rep, np.ndarray]:
    """Vectors of ``sentences`` for every rep, sharing forward passes where possible."""
    out: dict[Rep, np.ndarray] = {}
    for template in dict.fromkeys(r.template for r in reps if r.template):
        mine = [r for r in reps if r.template == template]
        st = encoder.prompt_states(sentences, template, denoise=any(r.denoise for r in mine), show_progress_bar=show)
        for r in mine:
            out[r] = st.denoised if r.denoise else st.raw
            if r.pooling == "topk-static":
                from .predict import topk_static_from_states

                out[r] = topk_static_from_states(encoder, out[r])
    pooled = [r for r in reps if not r.template]
    if pooled:
        heads = {r.head for r in pooled if r.pooling == "ditto"}
        for head in heads or {None}:  # one pass per Ditto head (usually one)
            group = [r for r in pooled if r.pooling != "ditto" or r.head == head]
            group = [r for r in group if r not in out]
            if not group:
                continue
            if head is not None:
                encoder.ditto_head = head
            ps = {r: get_pooling(r.pooling) for r in group}
            if any(p.name == "static-debiased" for p in ps.values()):
                encoder.biased_token_mask(data_dir)
            res = encoder.forward_pooled(
                sentences, {r.label: p.fn for r, p in ps.items()},
                hidden_states=any(p.hidden_states for p in ps.values()),
                attentions=any(p.attentions for p in ps.values()),
                forward=any(p.forward for p in ps.values()), show_progress_bar=show,
            )
            for r in group:
                out[r] = res[r.label]
    return out


def evaluate_reps(encoder: PromptEncoder, reps: Sequence[Rep], tasks: Sequence[str], data_dir=None,
                  show_progress_bar=None) -> dict[Rep, dict[str, dict]]:
    """{rep: {task: {"spearman", "subsets", "pairs"}}} for every rep and task.

    Each task is encoded on its own (its :class:`STSEvaluator`'s sentences), so a task's
    numbers do not depend on which other tasks were asked for."""
    evaluators = {t: STSEvaluator(load_task(t, data_dir)) for t in tasks}
    results: dict[Rep, dict[str, dict]] = {r: {} for r in reps}
    for t, ev in evaluators.items():
        vecs = _embed_all(encoder, reps, ev.sentences, show_progress_bar, data_dir)
        for r in reps:
            results[r][t] = ev.score(vecs[r])
    return results


def anisotropy(encoder: PromptEncoder, reps: Sequence[Rep], corpus: list[str] | None = None, n: int = 1000,
               seed: int = 0, data_dir=None) -> dict[Rep, float]:
    """Mean cosine similarity of random sentence pairs (all pairs among ``n`` sampled sentences)."""
    corpus = corpus if corpus is not None else load_corpus(data_dir=data_dir)
    rng = np.random.default_rng(seed)
    sample = [corpus[i] for i in rng.choice(len(corpus), size=min(n, len(corpus)), replace=False)]
    vecs = _embed_all(encoder, reps, sample, data_dir=data_dir)
    out = {}
    for r, v in vecs.items():
        u = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        sim = u @ u.T
        k = len(u)
        out[r] = float((sim.sum() - np.trace(sim)) / (k * (k - 1)))
    return out


# ---- tables ---------------------------------------------------------------------------------

def average(task_results: dict[str, dict]) -> float:
    return float(np.mean([v["spearman"] for v in task_results.values()]))


def format_table(rows: list[tuple[str, dict[str, dict]]], tasks: Sequence[str], extra: dict[str, dict[str, str]] | None = None,
                 markdown: bool = True) -> str:
    """Paper-style table: one row per representation, one column per task, plus Avg."""
    extra = extra or {}
    extra_cols = list(dict.fromkeys(c for v in extra.values() for c in v))
    cols = [TASK_NAMES.get(t, t) for t in tasks] + (["Avg."] if len(tasks) > 1 else []) + extra_cols
    body = []
    for label, res in rows:
        cells = [f"{res[t]['spearman']:.2f}" for t in tasks]
        if len(tasks) > 1:
            cells.append(f"{average(res):.2f}")
        cells += [extra.get(label, {}).get(c, "") for c in extra_cols]
        body.append([label] + cells)
    header = ["representation"] + cols
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "|".join(["---"] + ["---:"] * len(cols)) + "|"]
        lines += ["| " + " | ".join(c.replace("|", "\\|") for c in row) + " |" for row in body]
        return "\n".join(lines)
    widths = [max(len(r[i]) for r in [header] + body) for i in range(len(header))]
    fmt = lambda row: "  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(row))
    return "\n".join([fmt(header), fmt(["-" * w for w in widths])] + [fmt(r) for r in body])


def results_json(rows: list[tuple[Rep, dict[str, dict]]], model: str) -> str:
    return json.dumps({"model": model, "results": [{**asdict(r), "label": r.label, "tasks": res} for r, res in rows]}, indent=2)
