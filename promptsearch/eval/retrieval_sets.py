"""Several retrieval data sets scored as one (``promptsearch retrieval --data scifact,nfcorpus``), as MTEB averages
its retrieval tasks: a candidate's metrics are the mean over the sets of each set's metrics — or their min
(``--objective min``, the worst set's), by the one rule several STS dev sets are combined with
(``promptsearch.eval.objective.combine``).

``RetrievalSets`` looks like one ``RetrievalTask`` to the search (``evaluate``, ``record``, ``numbers``, the
encoding counts), so the steps, Optuna, the held-out check, the worker queue and the results file take it as they
take one set. A prompt keeps ``{task}`` as written: each set fills it with its own description before encoding
(``RetrievalCandidate.for_task``), so "Instruct: {task}\\nQuery: " is one candidate that reads each set's task, and
the answer is a prompt to fill with the user's own task when it is exported.

The per-query nDCG@10 of a candidate is the sets' per-query values one after another (``sizes`` says where each
set's begin); the step rule weighs each set's queries so that the gain is the gain of the objective of the sets'
means (``promptsearch.search.retrieval.judge``), and so is its standard error.
"""

from __future__ import annotations

import hashlib
import json
from types import SimpleNamespace
from typing import TYPE_CHECKING, Callable, Sequence

import numpy as np

from ..errors import DataError, PromptSearchError
from .objective import DEFAULT_OBJECTIVE, OBJECTIVES, combine
from .retrieval import TASK_SLOT, RetrievalCandidate, RetrievalTask

if TYPE_CHECKING:
    from ..encoding import PromptEncoder


def set_metric(name: str, metric: str) -> str:
    """The key one set's ``metric`` has among a candidate's metrics (``"scifact:ndcg@10"``).

    :param name: the set's name.
    :param metric: the metric.
    :returns: the key."""
    return f"{name}:{metric}"


class RetrievalSets:
    """Several ``RetrievalTask``\\ s scored as one: each metric is the ``objective`` over the sets, their mean or min
    (each set's nDCG@10 also kept, as ``"<set>:ndcg@10"``).

    :param tasks: the sets, each a ``RetrievalTask`` of its own data (one or more, each holding other data; one: its
        candidates' ``{task}`` filled, as on the held-out queries of the one set that has some).
    :param objective: "mean" or "min" of the sets' metrics.
    :raises promptsearch.DataError: for no set, two sets of one name, or two holding the same data.
    :raises promptsearch.PromptSearchError: for another objective."""

    def __init__(self, tasks: Sequence[RetrievalTask], objective: str = DEFAULT_OBJECTIVE):
        if objective not in OBJECTIVES:
            raise PromptSearchError(f"objective={objective!r}: choose mean or min")
        self.objective = objective
        tasks = list(tasks)
        if not tasks:
            raise DataError("no retrieval set to score: give one or more")
        seen: dict[str, str] = {}
        for t in tasks:
            name, fp = t.data.name, t.data.fingerprint()
            if name in seen.values():
                raise DataError(f"two retrieval sets are named {name}; give each set once (two folders of one name: "
                                "rename one)")
            if fp in seen:
                raise DataError(f"data={seen[fp]} and {name} hold the same queries and corpus; give each set once")
            seen[fp] = name
        self.tasks = tasks
        self.names = [t.data.name for t in tasks]
        self.sizes = [len(t.query_ids) for t in tasks]  # where each set's per-query values begin and end
        # what the search reads of ``data``: its name, and a description that leaves {task} for each set to fill
        self.data = SimpleNamespace(name=",".join(self.names), description=TASK_SLOT)
        self.query_ids = [f"{t.data.name}/{q}" for t in tasks for q in t.query_ids]
        self.corpus_ids = [f"{t.data.name}/{d}" for t in tasks for d in t.corpus_ids]
        self.float16_above_gib = tasks[0].float16_above_gib
        self.primary_metric = tasks[0].primary_metric

    # the encoding counts: the sets' together
    @property
    def name(self) -> str:
        """The sets' names, comma-joined (``eval.task.EvaluationTask``)."""
        return self.data.name

    @property
    def corpus_encodings(self) -> int:
        return sum(t.corpus_encodings for t in self.tasks)

    @property
    def corpus_passes(self) -> int:
        return sum(t.corpus_passes for t in self.tasks)

    @property
    def corpus_reused(self) -> int:
        return sum(t.corpus_reused for t in self.tasks)

    @property
    def query_encodings(self) -> int:
        return sum(t.query_encodings for t in self.tasks)

    def screen(self, share: float, seed: int = 0) -> "RetrievalSets":
        """Every set on a smaller corpus (``RetrievalTask.screen``): where racing screens document prompts.

        :param share: the share of each set's documents no query judges relevant that is kept.
        :param seed: the draw's seed.
        :returns: the sets on their screening corpora."""
        return RetrievalSets([t.screen(share, seed) for t in self.tasks], self.objective)

    def close(self) -> None:
        """Close every set's task."""
        for t in self.tasks:
            t.close()

    def record(self) -> dict:
        """The data as a results file names it: the sets' names joined, one fingerprint of them all (names,
        contents, descriptions, and the objective when it is not the mean: a file of the mean's fingerprints as
        before), the counts summed, and each set's own record under ``"sets"``."""
        sets = [{**t.record(), "description": t.data.description} for t in self.tasks]
        hashed = sets if self.objective == DEFAULT_OBJECTIVE else {"sets": sets, "objective": self.objective}
        fp = hashlib.sha1(json.dumps(hashed, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]
        return {"name": self.data.name, "fingerprint": fp, "queries": len(self.query_ids),
                "corpus": len(self.corpus_ids), "objective": self.objective, "sets": sets}

    def numbers(self, enc: "PromptEncoder") -> dict:
        """What changes a score besides the data (``RetrievalTask.numbers``), each set's corpus dtype named.

        :param enc: the encoder.
        :returns: a JSON-ready dict."""
        out = self.tasks[0].numbers(enc)
        out["corpus_dtype"] = {t.data.name: t.numbers(enc)["corpus_dtype"] for t in self.tasks}
        return out

    def evaluate(self, enc: "PromptEncoder", candidates: Sequence[RetrievalCandidate], per_query: bool = False,
                 on_score: Callable[[RetrievalCandidate, dict, float], None] | None = None,
                 ) -> dict[RetrievalCandidate, dict]:
        """Score each candidate on every set (``{task}`` filled with that set's description; each set's corpus
        encoded once per document side, as ``RetrievalTask.evaluate`` does): each metric the objective (mean or min)
        over the sets, each set's primary metric kept as ``"<set>:ndcg@10"``.

        :param enc: the encoder.
        :param candidates: the candidates (their prompts may name ``{task}``).
        :param per_query: also return ``"per_query"``: {metric: the sets' per-query values one after another}.
        :param on_score: called with (candidate, metrics, seconds) once a candidate is scored on every set.
        :returns: each candidate → its metrics."""
        cands = list(dict.fromkeys(candidates))
        got: list[dict[RetrievalCandidate, dict]] = []
        seconds = {c: 0.0 for c in cands}
        for t in self.tasks:
            filled = {c: c.for_task(t.data.description) for c in cands}

            def timed(fc: RetrievalCandidate, m: dict, s: float, filled=filled) -> None:
                for c, f in filled.items():  # a filled candidate two candidates share: its time counted once
                    if f == fc:
                        seconds[c] += s
                        break

            got.append(t.evaluate(enc, list(dict.fromkeys(filled.values())), per_query=True, on_score=timed))
            got[-1] = {c: got[-1][filled[c]] for c in cands}
        out: dict[RetrievalCandidate, dict] = {}
        for c in cands:
            ms = [g[c] for g in got]
            m: dict = {k: combine([x[k] for x in ms], self.objective) for k in ms[0] if k != "per_query"}
            for name, x in zip(self.names, ms):
                m[set_metric(name, self.primary_metric)] = float(x[self.primary_metric])
            if per_query:
                m["per_query"] = {k: np.concatenate([np.asarray(x["per_query"][k], dtype=np.float64) for x in ms])
                                  for k in ms[0]["per_query"]}
            out[c] = m
            if on_score is not None:
                on_score(c, m, seconds[c])
        return out
