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


def score_task(data: STSData, lookup: dict[str, np.ndarray] | callable) -> dict:
    """Spearman per subset and "all" (over the concatenated scores of all subsets)."""
    sims_all, gold_all, subsets = [], [], {}
    for name, (a, b, y) in data.subsets.items():
        va = np.stack([lookup[s] for s in a]) if isinstance(lookup, dict) else lookup(a)
        vb = np.stack([lookup[s] for s in b]) if isinstance(lookup, dict) else lookup(b)
        sims = cosine(va, vb)
        subsets[name] = spearman100(sims, y)
        sims_all.append(sims)
        gold_all += y
    return {"spearman": spearman100(np.concatenate(sims_all), gold_all), "subsets": subsets, "pairs": data.n_pairs}


def _embed_all(encoder: PromptEncoder, reps: Sequence[Rep], sentences: list[str], show=None) -> dict[Rep, np.ndarray]:
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
                encoder.biased_token_mask()
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
    """{rep: {task: {"spearman", "subsets", "pairs"}}} for every rep and task."""
    datas = {t: load_task(t, data_dir) for t in tasks}
    sentences = list(dict.fromkeys(s for d in datas.values() for s in d.sentences()))
    vecs = _embed_all(encoder, reps, sentences, show_progress_bar)
    index = {s: i for i, s in enumerate(sentences)}
    results = {}
    for r in reps:
        v = vecs[r]
        lookup = lambda ss, v=v: v[[index[s] for s in ss]]
        results[r] = {t: score_task(d, lookup) for t, d in datas.items()}
    return results


def anisotropy(encoder: PromptEncoder, reps: Sequence[Rep], corpus: list[str] | None = None, n: int = 1000,
               seed: int = 0, data_dir=None) -> dict[Rep, float]:
    """Mean cosine similarity of random sentence pairs (all pairs among ``n`` sampled sentences)."""
    corpus = corpus if corpus is not None else load_corpus(data_dir=data_dir)
    rng = np.random.default_rng(seed)
    sample = [corpus[i] for i in rng.choice(len(corpus), size=min(n, len(corpus)), replace=False)]
    vecs = _embed_all(encoder, reps, sample)
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
