"""Greedy search, the PromptBERT Table 4 protocol automated.

Stage 1 (relation): score ``[X] <relation> [MASK] .`` for every relation in the vocabulary
and keep the best. Stage 2 (prefix): repeatedly try appending each prefix token just before
[X] (or before its opening quote), or wrapping [X] in quotes; keep the best candidate if it
beats the current template by more than ``min_gain`` points, stop when none does.

``min_gain="auto"`` (the default) is the step's own noise: the standard error of the gain over
paired bootstrap resamples of the dev pairs (within each set when there are several), so a step
is taken only when it is more than one standard error ahead; ``min_gain=0`` is the paper's rule
(any gain). Each step records its gain, that error and the threshold in the path.

By default each step is a race (``racing``): candidates are screened on growing subsets of
the dev pairs and only the finalists get a full-set score; ``racing=None`` scores every
candidate on the full set (the paper's protocol). Either way the step's winner and every number
in the path are full-set scores in the reference precision.
"""

from __future__ import annotations

import shutil
import textwrap
from dataclasses import dataclass, field
from typing import ClassVar

from ..data import DEV_SET, set_label
from ..errors import PromptSearchError, TemplateError, did_you_mean
from ..library import demo_template, load_json, read_demos
from ..representation import POOLED_READOUTS, Representation, pooled_ways, uses_first_token
from .racing import Racing
from .results import Results
from .runner import Runner
from .scorer import Scorer
from .state import PathStep
from .strategy import Strategy

# Prompts the read-out step pools (besides the template greedy chose): instruction-style prefixes as
# sentence-transformers models take them, quoting, and PromptBERT's templates read as a whole.
READOUT_PROMPTS = ("[X]", '"[X]"', "query: [X]", "passage: [X]", "Represent this sentence: [X]",
                   "Represent the meaning of this sentence: [X]", "The sentence: [X]", "[X] means [MASK] .",
                   'This sentence : "[X]" means [MASK] .')


MAX_DEMOS = 128  # demonstrations a --demos-pool may hold: each is a racing candidate (then pairs of the best 4)


def parse_readouts(spec) -> list[str]:
    """``--readouts`` as a list of pooled read-outs ("none" or empty: none)."""
    items = [x.strip() for x in (spec.split(",") if isinstance(spec, str) else (spec or [])) if x.strip()]
    if items in (["none"], []):
        return []
    bad = [x for x in items if x not in POOLED_READOUTS]
    if bad:
        raise PromptSearchError(f"readouts=: unknown read-out {bad[0]!r}{did_you_mean(bad[0], POOLED_READOUTS)}; "
                                f"choose from {', '.join(POOLED_READOUTS)}, or none")
    return list(dict.fromkeys(items))


@dataclass(frozen=True)
class GreedyState:
    prefix: tuple[str, ...] = ()
    quote: str = ""
    relation: str = "means"
    suffix: str = "."
    mask: bool = True  # False: a causal LM's template, read at its last token

    @property
    def template(self) -> str:
        parts = [*self.prefix, f"{self.quote}[X]{self.quote}", self.relation, "[MASK]" if self.mask else "",
                 self.suffix]
        return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class Given:
    """A candidate that is a template as it is (a demonstration step's)."""

    template: str


def load_vocabulary(path: str = "greedy") -> dict:
    v = load_json(path)
    where = path if path.endswith(".json") else f"templates/{path}.json"
    if not isinstance(v, dict):
        raise PromptSearchError(f"{where}: expected a JSON object with 'relations' and 'prefix_tokens'")
    for key in ("relations", "prefix_tokens"):
        items = v.get(key)
        if not isinstance(items, list) or not items or not all(isinstance(x, str) for x in items):
            raise PromptSearchError(f"{where}: '{key}' must be a non-empty list of strings")
        if any("[X]" in x or "[MASK]" in x for x in items):
            raise PromptSearchError(f"{where}: '{key}' entries must not contain [X] or [MASK]")
    prompts = v.setdefault("readout_prompts", list(READOUT_PROMPTS))
    if not isinstance(prompts, list) or not all(isinstance(x, str) and x.count("[X]") == 1 for x in prompts):
        raise PromptSearchError(f"{where}: 'readout_prompts' must be a list of prompts, each with one [X]")
    v.setdefault("wrappers", ['"', "'"])
    v.setdefault("mask", True)
    v.setdefault("suffix", "." if v["mask"] else "")
    for key in ("relations", "prefix_tokens", "readout_prompts", "suffix"):
        for x in [v[key]] if isinstance(v[key], str) else v[key]:
            if "+" in x.split():  # a lone '+' in a template joins an ensemble's members in a results key
                raise PromptSearchError(f"{where}: '{key}' entry {x!r} has a '+' standing alone, which a results key "
                                        "reads as joining an ensemble's members; write it without spaces around it, "
                                        "or as a word")
    return v


@dataclass
class Greedy(Strategy):
    vocabulary: str = "greedy"
    max_steps: int = 8
    min_gain: float | str | None = "auto"  # points a step must gain; "auto"/None: its paired-bootstrap standard error
    show_progress_bar: bool | None = None
    racing: Racing | None = field(default_factory=Racing)
    # a last step over read-out layers: "all" (1 … the last), or hidden_states indices
    layers: str | list[int] | None = None
    ensemble: int = 1  # at most this many templates averaged (grown from the best scored ones while it pays)
    # a 'sentence<TAB>word' file: the best demonstration (or pair) put before the template
    demos_pool: str | None = None
    ensemble_pool: int = 8  # the best scored entries an ensemble draws from
    readouts: str | list | None = "mean,sentence-mean"  # a read-out step: prompts pooled these ways ("none": no step)
    readout_steps: int = 0  # then prefix steps on the best pooled prompt (the vocabulary's prefix tokens, quotes)
    name: str = "greedy"
    SPACE: ClassVar[tuple[str, ...]] = ("vocabulary", "readouts", "layers", "ensemble", "demos_pool", "readout_steps")
    RULE: ClassVar[tuple[str, ...]] = ("min_gain", "max_steps", "racing", "screening")
    path: list = field(default_factory=list)

    def __post_init__(self):
        if self.min_gain is None or self.min_gain == "auto":
            self.min_gain = "auto"
            return
        try:
            self.min_gain = float(self.min_gain)
        except (TypeError, ValueError):
            self.min_gain = float("nan")
        if not 0 <= self.min_gain < float("inf"):
            raise PromptSearchError("min_gain= must be auto or a number of points ≥ 0 (0: take any gain, the paper's "
                                    "rule)")

    def settings(self) -> dict:
        return {"vocabulary": self.vocabulary, "max_steps": self.max_steps, "min_gain": self.min_gain,
                "racing": self.racing.settings() if self.racing else None,
                **({"layers": self.layers} if self.layers else {}),
                **({"ensemble": self.ensemble} if self.ensemble > 1 else {}),
                **({"demos_pool": self.demos_pool} if self.demos_pool else {}),
                "readouts": parse_readouts(self.readouts),
                **({"readout_steps": self.readout_steps} if self.readout_steps else {})}

    def check(self, scorer: Scorer) -> None:
        """Refuse what cannot run before the results file opens: the vocabulary, the layers."""
        load_vocabulary(self.vocabulary)
        self.layer_list(scorer)
        if self.demos_pool and (n := len(read_demos(self.demos_pool, "demos_pool"))) > MAX_DEMOS:
            raise PromptSearchError(f"demos_pool={self.demos_pool} holds {n:,} demonstrations; greedy tries each one "
                                    "as a candidate (a full encoding each, its states held while it races), so give at "
                                    f"most {MAX_DEMOS} (e.g. shuf -n {MAX_DEMOS} {self.demos_pool})")
        if not isinstance(self.ensemble, int) or self.ensemble < 1:
            raise PromptSearchError(f"ensemble={self.ensemble!r}: give the most templates to average, 1 or more (1: "
                                    "none)")
        if self.readout_steps and not parse_readouts(self.readouts):
            raise PromptSearchError(f"readout_steps={self.readout_steps} takes prefix steps on the best pooled prompt, "
                                    f"and readouts={self.readouts or 'none'} pools none: give "
                                    "readouts=mean,sentence-mean (or drop readout_steps=)")
        if any(map(uses_first_token, parse_readouts(self.readouts))) and scorer.encoder.model.causal:
            raise PromptSearchError("readouts=cls reads a [CLS] token a causal LM does not have; use mean or "
                                    "sentence-mean")

    def layer_list(self, scorer: Scorer) -> list[int]:
        """``layers`` as ``hidden_states`` indices of the scorer's model ("all": 1 … the last)."""
        return scorer.layer_list(self.layers)

    def validation_extra(self, results: Results) -> list[Representation]:
        """Besides the best K, the path's templates get held-out scores (the relation step's best, each prefix step,
        the best layer, each ensemble taken)."""
        return [r.entry_key for r in results.path_steps
                if r.stage in ("relation:best", "prefix", "layer:best") or (r.stage == "ensemble" and r.taken)]

    def keeps_vectors(self) -> bool:
        return self.ensemble > 1  # an ensemble is built from the scored templates' vectors

    def _score_all(self, runner: Runner, states: list, source: str):
        """([(full-set score, state)] of the candidates that got one, [the ones a race dropped])."""
        told = runner.score([s.template for s in states], source, desc=source, racing=self.racing)
        if self.racing is None:
            return [(sc.spearman, s) for sc, s in zip(told.scores, states)], []
        by_text = {s.template: s for s in states}
        return [(sc.spearman, by_text[sc.template]) for sc in told.scores], told.dropped

    def _dropped(self, dropped: list[dict]) -> list[dict] | None:
        """The candidates a race dropped, as a path row records them (no race: None)."""
        return list(dropped) if self.racing is not None else None

    def propose(self, runner: Runner) -> None:
        results = runner.results
        v = load_vocabulary(self.vocabulary)
        self.path = runner.path
        suffix = v["suffix"]
        rel_states = [GreedyState(relation=r, suffix=suffix, mask=v["mask"]) for r in dict.fromkeys(v["relations"])]
        scored, dropped = self._score_all(runner, rel_states, "relation")
        for sc, st in scored:
            runner.note(PathStep(stage="relation", step=0, template=st.template, spearman=round(sc, 4), candidates=1))
        best_score, best = max(scored, key=lambda x: x[0])
        runner.note(PathStep("relation:best", 0, best.template, round(best_score, 4), len(rel_states),
                             score_se=round(runner.se(best.template), 4), dropped=self._dropped(dropped)))
        for step in range(1, self.max_steps + 1):
            cands = [GreedyState(best.prefix + (tok,), best.quote, best.relation, best.suffix,
                                 best.mask) for tok in v["prefix_tokens"]]
            if not best.quote:
                cands += [GreedyState(best.prefix, q, best.relation, best.suffix, best.mask) for q in v["wrappers"]]
            scored, dropped = self._score_all(runner, cands, f"prefix step {step}")
            cand_score, cand = max(scored, key=lambda x: x[0])
            row = PathStep("prefix", step, cand.template, round(cand_score, 4), len(cands),
                           dropped=self._dropped(dropped))
            if not runner.step(row, best.template, cand.template, seed=step, stop="stop"):
                break
            best_score, best = cand_score, cand
        if self.demos_pool:
            best_score, template = self._demos_step(runner, best.template, best_score)
        else:
            template = best.template
        chosen = self._layer_step(runner, template) if self.layers else Representation.of(template)
        if parse_readouts(self.readouts):
            chosen = self._readout_step(runner, v["readout_prompts"], chosen, template, v)
        runner.choose(self._ensemble_step(runner, self._leader(results, chosen)) if self.ensemble > 1 else chosen)

    @staticmethod
    def _leader(results: Results, chosen: Representation) -> Representation:
        """Where an ensemble starts: the chosen template, or the model's own representation when it scored higher."""
        own = results.own_key
        if own in results.entries and results.entries[own].spearman > results.entries[chosen].spearman:
            return own
        return chosen

    def _readout_step(self, runner: Runner, prompts: list[str], chosen: Representation, template: str,
                      vocabulary: dict | None = None) -> Representation:
        """Prompts (the vocabulary's and greedy's template) pooled each of ``readouts`` ways; the best is
        taken over ``chosen`` only above its noise. Every one scored on the full set (no race)."""
        scorer, results = runner.scorer, runner.results
        keys = list(dict.fromkeys(k for p in list(prompts) + [template] for k in pooled_ways(p,
                                                                                             parse_readouts(self.readouts))))
        keys = [k for k in keys if k in results.entries or _fits(scorer, k)]
        # the model's own representation keeps its source
        told = runner.score(keys, "greedy:readout", desc="read-outs", record="new")
        scored = [(sc.spearman, k) for k, sc in zip(keys, told.scores)]
        for sc, k in scored:
            runner.note(PathStep(stage="readout", step=len(self.path), template=k.text, spearman=round(sc, 4),
                                 candidates=1))
        if not scored:
            return chosen
        cand_score, cand = max(scored, key=lambda x: x[0])
        if self.readout_steps and vocabulary:
            cand_score, cand = self._pooled_prefix_steps(runner, cand, cand_score, vocabulary)
        lead = self._leader(results, chosen)  # the best so far: the chosen template or the model's own representation
        row = PathStep(stage="readout:best", step=len(self.path), template=cand.text, lead=lead.text,
                       spearman=round(cand_score, 4), candidates=len(keys))
        return cand if runner.step(row, lead, cand, seed=len(self.path)) else chosen

    def _demos_step(self, runner: Runner, template: str, score: float) -> tuple[float, str]:
        """PromptEOL's choice of demonstration, automated: each one of the pool before the template, then
        pairs of the best four; the best is taken only above its noise. (score, template) after it."""
        scorer = runner.scorer
        assert self.demos_pool is not None  # this step runs only with a pool
        pool = read_demos(self.demos_pool, "demos_pool")
        singles = {t: d for d in pool if _fits(scorer, t := demo_template(template, [d]))}
        scored, dropped = self._score_all(runner, [Given(t) for t in singles], "demos")
        ranked = sorted(((sc, st.template) for sc, st in scored), key=lambda x: -x[0])
        top = [singles[t] for _, t in ranked[:4] if t in singles]
        pairs = [t for i, a in enumerate(top) for b in top[i + 1:] if _fits(scorer,
                                                                            t := demo_template(template, [a, b]))]
        if pairs:
            more, dropped2 = self._score_all(runner, [Given(t) for t in pairs], "demo pairs")
            ranked = sorted(ranked + [(sc, st.template) for sc, st in more], key=lambda x: -x[0])
            dropped = dropped + dropped2
        if not ranked:
            return score, template  # no demonstration leaves room for a sentence
        cand_score, cand = ranked[0]
        row = PathStep(stage="demos", step=len(self.path), template=cand, spearman=round(cand_score, 4),
                       candidates=len(singles) + len(pairs), dropped=self._dropped(dropped))
        return (cand_score, cand) if runner.step(row, template, cand, seed=len(self.path)) else (score, template)

    def _ensemble_step(self, runner: Runner, chosen: Representation) -> Representation:
        """Grow an ensemble from ``chosen``: add the best-scored entry that raises the objective most, while
        that gain is above its noise, up to ``ensemble`` members (from kept vectors: no new encodes)."""
        results = runner.results
        first = results.entries[chosen]
        keys = [first.entry_key] + [e.entry_key for e in results.ranked() if not e.members]
        pool = list(dict.fromkeys(keys))[: self.ensemble_pool]
        members = [first.entry_key]
        while len(members) < self.ensemble and len(members) < len(pool):
            others = [c for c in pool if c not in members]
            told = runner.score([_averaged(members + [c]) for c in others], "greedy:ensemble", record="none")
            tries = dict(zip(others, told.scores))
            c = max(tries, key=lambda c: (tries[c].spearman, -pool.index(c)))
            row = PathStep(stage="ensemble", step=len(self.path), template=c.text, members=(*members, c),
                           spearman=round(tries[c].spearman, 4), candidates=len(tries))
            if not runner.step(row, _averaged(members), _averaged(members + [c]), seed=len(self.path)):
                break
            members = members + [c]
            runner.record(tries[c], "greedy:ensemble")
        return Representation.ensemble(members) if len(members) > 1 else chosen

    def _pooled_prefix_steps(self, runner: Runner, k: Representation, score: float,
                             v: dict) -> tuple[float, Representation]:
        """Greedy prefix steps on a pooled prompt (``readout_steps`` at most): each prefix token before it, or
        [X] quoted, kept while it beats the prompt by more than its noise. (score, key) after them."""
        scorer = runner.scorer
        for step in range(1, self.readout_steps + 1):
            t, r = k.template, k.readout
            cands = [c for tok in v["prefix_tokens"] for c in pooled_ways(f"{tok} {t}", [r])]
            if not any(f"{q}[X]{q}" in t.replace(" ", "") for q in v["wrappers"]):  # not quoted yet
                cands += [c for q in v["wrappers"] for c in pooled_ways(t.replace("[X]", f"{q}[X]{q}"), [r])]
            cands = [c for c in dict.fromkeys(cands) if _fits(scorer, c)]
            told = runner.score(cands, "greedy:readout-prefix", desc=f"read-out prefix {step}", record="new")
            scored = [(sc.spearman, c) for c, sc in zip(cands, told.scores)]
            if not scored:
                break
            cand_score, cand = max(scored, key=lambda x: x[0])
            row = PathStep(stage="readout-prefix", step=step, template=cand.text, spearman=round(cand_score, 4),
                           candidates=len(cands))
            if not runner.step(row, k, cand, seed=len(self.path), stop="readout-stop"):
                break
            score, k = cand_score, cand
        return score, k

    def _layer_step(self, runner: Runner, template: str) -> Representation:
        """The chosen template read at each layer (one pass); a layer is taken only above its noise."""
        layers = self.layer_list(runner.scorer)
        key = Representation.of(template)
        told = runner.score([Representation(key.template, k) for k in layers], "greedy:layer", record="none",
                            together=True)
        scores = dict(zip(layers, told.scores))
        for k, sc in scores.items():
            if sc.layer is not None:  # the last layer is the template itself: in the results already, once
                runner.record(sc, "greedy:layer")
            runner.note(PathStep(stage="layer", step=len(self.path), template=template, layer=sc.layer,
                                 spearman=round(sc.spearman, 4), candidates=1))
        k = max(layers, key=lambda k: (scores[k].spearman, k))
        row = PathStep(stage="layer:best", step=len(self.path), template=template, layer=k,
                       spearman=round(scores[k].spearman, 4), candidates=len(layers))
        taken = runner.step(row, key, Representation(key.template, k), seed=len(self.path))
        return Representation(key.template, scores[k].layer) if taken else key


def _averaged(members: list[Representation]) -> Representation:
    """Members averaged, as the scorer scores an ensemble (one member too: its normalized vectors)."""
    return Representation(members=tuple(members))


def format_path(path: list[PathStep], results: Results | None = None, width: int | None = None) -> str:
    """The search path as a Table 4-style table (with held-out columns where the results have them), within
    ``width`` columns (default: the terminal's, at least 80; see ``_layout``)."""
    dataset = results.dataset if results is not None else DEV_SET
    sets = results.set_names if results is not None and len(results.set_names) > 1 else []  # each set's column
    val = sets + ((results.validation or {}).get("tasks", []) if results is not None else [])
    held = {e.key: {**(e.sets or {}),
                    **(e.validation or {})} for e in results.entries.values()} if results is not None else {}

    def row(template, score, label=None):
        v = held.get(template, {})
        return (label or template, f"{score:.2f}", *(f"{v[t]:.2f}" if t in v else "" for t in val))

    blank = ("",) * len(val)
    head = results.objective if sets and results is not None else set_label(dataset)
    rows = [("Template", head, *map(set_label, val))]  # each set as tables name it (STS-B, SICK-R)
    rows.append(("Searching for relationship tokens", "", *blank))
    rel = [r for r in path if r.stage == "relation"]
    rows += [row(r.template, r.spearman) for r in rel]
    best = [r for r in path if r.stage == "relation:best"]
    if best and best[-1].dropped:
        rows.append((f"({len(best[-1].dropped)} more raced out on subsets)", "", *blank))
    rows.append(("Searching for prefix tokens", "", *blank))
    rows += [row(r.template, r.spearman, f"{r.template}{_gain(r)}") for r in path if r.stage == "prefix"]
    stop = [r for r in path if r.stage == "stop"]
    steps = sum(r.stage == "prefix" for r in path)
    most = (results.settings or {}).get("max_steps") if results is not None else None
    if stop:
        s = stop[-1]
        why = f" gains {s.gain:+.2f} ± {s.se:.2f}, not above the min gain {s.min_gain:.2f}" if s.se is not None else ""
        rows.append(row(s.template, s.spearman, f"(stopped: best next candidate {s.template}{why})"))
    elif isinstance(most, int) and steps >= most:  # every step taken: the search's own limit, not the noise
        rows.append((f"(stopped: {steps} prefix step{'s' if steps != 1 else ''}, the most this search takes)", "",
                     *blank))
    for r in (r for r in path if r.stage == "demos"):
        rows.append(("Choosing demonstrations", "", *blank))
        verdict = "taken" if r.taken else f"not above the min gain {r.min_gain:.2f}: none"
        rows.append(row(r.template, r.spearman, f"{r.template}{_gain(r)}  ({r.candidates} tried, {verdict})"))
    layer_rows = [r for r in path if r.stage == "layer"]
    if layer_rows:
        rows.append(("Searching for the read-out layer", "", *blank))
        rows += [row(r.key, r.spearman) for r in layer_rows]
        lb = [r for r in path if r.stage == "layer:best"][-1]
        verdict = "taken" if lb.taken else f"not above the min gain {lb.min_gain:.2f}: the last layer stays"
        rows.append((f"(best layer {lb.layer}: {lb.gain:+.2f} ± {lb.se:.2f} over the last, {verdict})", "", *blank))
    ro = [r for r in path if r.stage == "readout"]
    if ro:
        rows.append(("Searching for the read-out (prompts pooled)", "", *blank))
        rows += [row(r.template, r.spearman) for r in ro]
        rows += [row(r.template, r.spearman, f"{r.template}{_gain(r)}") for r in path if r.stage == "readout-prefix"]
        rs = [r for r in path if r.stage == "readout-stop"]
        if rs:
            rows.append(row(rs[-1].template, rs[-1].spearman, "(read-out prefix stopped: "
                                                              f"{rs[-1].template}{_gain(rs[-1])})"))
        rb = [r for r in path if r.stage == "readout:best"]
        if rb and rb[-1].template == rb[-1].lead:
            rows.append((f"(the best so far, {rb[-1].template}, is itself the best read-out: it stays)", "", *blank))
        elif rb:
            verdict = "taken" if rb[-1].taken else f"not above the min gain {rb[-1].min_gain:.2f}: {rb[-1].lead} stays"
            rows.append((f"(best read-out {rb[-1].template}: {rb[-1].gain:+.2f} ± {rb[-1].se:.2f} over "
                         f"{rb[-1].lead}, {verdict})", "", *blank))
    ens = [r for r in path if r.stage == "ensemble"]
    if ens:
        rows.append(("Averaging templates (ensemble)", "", *blank))
        for r in ens:
            label = f"+ {r.template}{_gain(r)}" + ("" if r.taken else f"  (not above the min gain {r.min_gain:.2f})")
            rows.append(row(r.key, r.spearman, label))
    return _layout(rows, width)


def _layout(rows: list[tuple], width: int | None = None) -> str:
    """``rows`` (a label, then its numbers' columns; the first row the header) as lines of at most ``width``
    characters (default: the terminal's width, at least 80). A template too long for the label column is
    shortened in its middle (its read-out suffix kept); a longer note is wrapped on lines of its own, its
    numbers on the line after it, labelled "its scores"."""
    width = width or max(80, shutil.get_terminal_size((80, 24)).columns)
    cw = [max(5, *(len(r[i]) for r in rows)) for i in range(1, len(rows[0]))]
    label_w = max(20, width - sum(x + 2 for x in cw))
    label_w = min(label_w, max(len(r[0]) for r in rows if any(r[1:]) and (len(r[0]) <= label_w or _bare(r[0]))))

    def line(label, nums):
        return "  ".join([label.ljust(label_w), *(c.rjust(x) for c, x in zip(nums, cw))]).rstrip()

    out = []
    for r in rows:
        label, nums = r[0], r[1:]
        if len(label) <= label_w or (not any(nums) and len(label) <= width):
            out.append(line(label, nums))
        elif _bare(label) and any(nums):
            out.append(line(_shorten(label, label_w), nums))
        else:
            out += textwrap.wrap(label, width, subsequent_indent="  ", break_on_hyphens=False)
            if any(nums):  # the note's candidate's scores, labelled as such on their own line
                out.append(line("  its scores", nums))
    return "\n".join(out)


def _bare(label: str) -> bool:
    """Whether a row's label is a template (a key) alone, not a note about it."""
    return not label.startswith(("(", "+ ")) and "   (" not in label


def _shorten(text: str, n: int) -> str:
    """``text`` (longer than ``n``) in ``n`` characters: its middle left out (…), a read-out or layer suffix
    (`` @…``) kept whole."""
    tail = text[text.rfind(" @"):] if " @" in text else ""
    if tail and len(tail) < n // 2:
        return text[: n - len(tail) - 1] + "…" + tail
    back = (n - 1) // 2
    return text[: n - 1 - back] + "…" + text[len(text) - back:]


def _fits(scorer: Scorer, key: str | Representation) -> bool:
    """Whether a candidate (a template, or a pooled read-out's key) leaves the model room for a sentence
    (a long demonstration may not)."""
    try:
        scorer.check(key)
    except TemplateError:
        return False
    return True


def _gain(row: PathStep) -> str:
    """A step's gain over the template before it, ± its paired-bootstrap standard error."""
    return f"   ({row.gain:+.2f} ± {row.se:.2f})" if row.se is not None else ""
