"""Racing: many templates scored on growing random subsets of the dev pairs; only the ones
still in contention get a full-set score.

Every candidate sees the same pairs (one seeded permutation of the pairs; a rung is its first
``fraction`` of them), so differences between candidates are paired. At each rung the
candidates are ranked by their Spearman on the rung's pairs and two rules drop candidates:

* **clearly behind** — a paired bootstrap over the rung's pairs (the same resamples for every
  candidate) puts the rung's leader ahead of the candidate in more than ``1 - alpha`` of the
  resamples;
* **successive halving** — at most ``ceil(keep * n)`` candidates go on to the next rung (the
  defaults were chosen with ``scripts/racing_simulation.py`` and ``benchmarks/search_speed.py``:
  see the README's "Faster search").

After the last rung (or once no more than ``finalists`` are left), the best ``finalists`` survivors are scored on
the full set by ``Scorer.score``: in the reference precision, one pass over every sentence
exactly as ``eval`` does, cached. Those are the only numbers a race returns; rung scores (which
may come from a cheaper screening precision, see ``Scorer(screening=...)``) decide who is
dropped and are never recorded. Sentences encoded at one rung are reused at the next.

Work is counted in full-set-equivalent encodings: sentences encoded / distinct sentences of the
data set (one exhaustive score = 1.0).

A race's progress (which candidates are left after which rung) is kept in the results file, so an
interrupted race resumes at the rung it was in and reaches the same decisions.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from dataclasses import asdict, dataclass, field

import numpy as np
from tqdm.auto import tqdm

from ..errors import PromptSearchError
from ..eval.objective import bootstrap_rhos, grouped_spearman
from ..template import quote
from .scorer import Score, Scorer
from .state import RaceState
from .strategy import Told


@dataclass(frozen=True)
class Racing:
    fractions: tuple[float, ...] = (0.125, 0.25, 0.5)
    keep: float = 0.5
    alpha: float = 0.05
    finalists: int = 2
    seed: int = 0
    bootstrap: int = 400

    def settings(self) -> dict:
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(self).items()}

    def check(self) -> "Racing":
        if (not self.fractions or any(not 0 < f < 1 for f in self.fractions)
                or list(self.fractions) != sorted(set(self.fractions))):
            raise PromptSearchError("racing rungs must be increasing fractions between 0 and 1, e.g. 0.125,0.25,0.5")
        if not 0 < self.keep <= 1:
            raise PromptSearchError("racing keep must be in (0, 1]")
        if self.finalists < 1:
            raise PromptSearchError("racing finalists must be at least 1")
        return self

    @classmethod
    def parse(cls, rungs: str, finalists: int = 2) -> "Racing":
        """Racing from ``--race-rungs 0.125,0.25,0.5`` and ``--finalists``, checked."""
        try:
            fractions = tuple(float(x) for x in rungs.split(","))
        except ValueError:
            raise PromptSearchError(f"race_rungs={quote(rungs)}: give fractions such as 0.125,0.25,0.5") from None
        return cls(fractions=fractions, finalists=finalists).check()

    def run(self, runner, templates: list[str], source: str, desc: str, sources=None) -> Told:
        """The race as ``Runner.score(racing=...)`` runs it: its state kept in the runner's results (an interrupted
        race resumes at its rung), a progress bar labelled ``desc``, the finalists recorded under ``source``.

        :param runner: the ``Runner`` (its scorer and results).
        :param templates: the candidates (repeats raced once).
        :param source: what proposed them.
        :param desc: the progress bar's label.
        :param sources: a source of its own for some candidates (by entry key; the rest: ``source``).
        :returns: the finalists' scores and the candidates dropped."""
        texts = list(dict.fromkeys(templates))
        state = runner.results.races.setdefault(race_key(runner.scorer, texts, self), RaceState())
        with tqdm(total=len(texts), desc=desc, leave=False, disable=runner.show is False, unit="template") as bar:
            def progress(label, done, total):
                bar.set_description_str(f"{desc}, {label}")
                bar.total, bar.n = total, done
                bar.refresh()

            outcome = race(runner.scorer, texts, self, state, save=runner.results.save, progress=progress)
        runner.results.add_seconds(outcome.seconds)
        for sc in outcome.scores:
            runner.record(sc, (sources or {}).get(sc.entry_key, source))
        return Told(list(outcome.scores), list(outcome.dropped))

    def decide(self, sims: dict[str, np.ndarray], gold: np.ndarray, rung: int = 0, groups: np.ndarray | None = None,
               objective: str = "mean") -> tuple[list[str], list[str]]:
        """The racing rule at rung ``rung`` — a pure function of the candidates' similarities on the
        rung's pairs (in candidate order; ties keep it) and the pairs' gold scores, like an Optuna
        pruner: (kept, ranked by the rung's score; dropped, in that ranking). ``groups`` (the dev set
        of each pair) makes the score the ``objective`` of each set's Spearman, and the bootstrap
        resamples within each set."""
        contenders = list(sims)
        rung_score = {t: grouped_spearman(s, gold, groups, objective) for t, s in sims.items()}
        order = sorted(contenders, key=lambda t: (-np.nan_to_num(rung_score[t], nan=-200.0), contenders.index(t)))
        behind = paired_bootstrap_behind(sims, gold, order[0], self.alpha, self.bootstrap, self.seed + rung, groups,
                                         objective)
        cap = max(self.finalists, math.ceil(self.keep * len(order)))
        keep = [t for t in order if t not in behind][:cap]
        return keep, [t for t in order if t not in keep]


@dataclass
class RaceOutcome:
    scores: list[Score]                      # the finalists' full-set scores, in candidate order
    dropped: list[dict] = field(default_factory=list)  # {"template", "rung": pairs seen when dropped}
    encodings: float = 0.0                   # screening work of this race, full-set equivalents
    seconds: float = 0.0                     # screening time (the finalists' scores carry their own)


def paired_bootstrap_behind(sims: dict[str, np.ndarray], gold: np.ndarray, leader: str, alpha: float, n_boot: int,
                            seed: int, groups: np.ndarray | None = None, objective: str = "mean") -> set[str]:
    """Candidates the leader beats in more than 1 - alpha of paired bootstrap resamples of the pairs."""
    rho = bootstrap_rhos(sims, gold, n_boot, seed, groups, objective)
    return {t for t in sims if t != leader and np.mean(rho[leader] > rho[t]) > 1 - alpha}


def rung_similarities(scorer: Scorer, enc, templates: list[str], perm: np.ndarray, rungs: list[int],
                      vecs: dict, have: dict, progress=None) -> tuple[dict[str, np.ndarray], int]:
    """Each template's pair similarities on the last rung's pairs (``perm[:rungs[-1]]``; ``rungs``: the
    pair counts of the rungs up to it) and the sentences encoded for them: each rung's new sentences of
    every template in one call, also when catching up after a resume (or on a worker that saw no
    earlier rung) — the same batches as an uninterrupted race."""
    encoded = 0
    for rr in rungs:
        encoded += scorer.encode_pairs(enc, templates, perm[:rr], vecs, have,
                                       progress=progress if rr == rungs[-1] else None)
    pairs = perm[: rungs[-1]]
    return {t: scorer.evaluator.similarities(vecs[t][scorer.denoise], pairs) for t in templates}, encoded


def race_key(scorer: Scorer, templates: list[str], racing: Racing) -> str:
    """Identifies one race: candidates, scoring set, precisions and racing settings."""
    blob = json.dumps([templates, scorer.settings_key(), scorer.screening_precision, racing.settings()])
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


def race(scorer: Scorer, templates: list[str], racing: Racing, state: RaceState | None = None, save=None,
         progress=None) -> RaceOutcome:
    """Race ``templates`` (distinct, parsed). ``state`` is kept in the results file; it records the
    rungs done and the finalists, and ``save()`` is called after each rung, so an interrupted race
    resumes where it was and reaches the same decisions.
    ``progress(label, done, total)`` is called as candidates are encoded."""
    state = state if state is not None else RaceState()
    n_pairs = scorer.evaluator.n_pairs
    perm = np.random.default_rng(racing.seed).permutation(n_pairs)
    rungs = [r for r in dict.fromkeys(max(3, int(round(f * n_pairs))) for f in racing.fractions) if r < n_pairs]
    enc = scorer.screening_encoder
    n_sent = len(scorer.sentences)
    t0 = time.perf_counter()
    encoded = 0
    if state.final is None:
        # Every candidate races, whatever the score cache holds: a decision never depends on what happens
        # to be cached (a cached full-set score only spares a finalist's last encoding). ``known`` is
        # read only from races an earlier version recorded, so that they resume as they began.
        known = set(state.known)
        contenders: list[str] = (state.contenders if state.contenders is not None
                                 else [t for t in templates if t not in known])
        dropped = state.dropped
        vecs: dict[str, dict[bool, np.ndarray | None]] = {}  # template -> {denoise: vectors of the sentences encoded}
        have: dict[str, np.ndarray] = {}
        for k, r in enumerate(rungs):
            if k < (state.rungs_done or 0) or len(contenders) <= racing.finalists:
                continue
            pairs = perm[:r]
            if progress:
                progress(f"rung {k + 1}/{len(rungs)}: {r} pairs", 0, len(contenders))
            for t in contenders:
                if t not in vecs:
                    vecs[t] = {scorer.denoise: None}  # filled as sentences are encoded
                    have[t] = np.zeros(n_sent, bool)
            # workers encode, as below, and send similarities
            remote = scorer.remote_rung(contenders, k, rungs, racing.seed)
            if remote is not None:
                sims, n = remote
                encoded += n
            else:
                label = f"rung {k + 1}/{len(rungs)}: {r} pairs"
                sims, n = rung_similarities(scorer, enc, contenders, perm, rungs[: k + 1], vecs, have,
                                            (lambda n,
                                             label=label: progress(label, n, len(contenders))) if progress else None)
                encoded += n
            ev = scorer.evaluator
            groups = ev.groups[pairs] if len(ev.names) > 1 else None
            keep, out = racing.decide(sims, ev.gold[pairs], k, groups, ev.objective)
            dropped += [{"template": t, "rung": int(r)} for t in out]
            contenders = keep  # ranked by this rung
            for t in [t for t in vecs if t not in keep]:
                del vecs[t], have[t]
            state.contenders, state.rungs_done = contenders, k + 1
            if save:
                save()
        last = rungs[min(state.rungs_done, len(rungs)) - 1] if state.rungs_done else 0
        dropped += [{"template": t, "rung": int(last)} for t in contenders[racing.finalists:]]
        state.final = [t for t in templates if t in known or t in contenders[: racing.finalists]]
        state.contenders = None
        if save:
            save()
    seconds = time.perf_counter() - t0
    scorer.count_time(seconds)
    scores = scorer.score(state.final)  # the finalists together (each scored as if alone)
    return RaceOutcome(scores, list(state.dropped), encoded / max(n_sent, 1), seconds)
