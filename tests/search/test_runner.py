"""The runner: a strategy proposes, the runner alone records (scores, path, saves) and judges every step
with one rule. A fake scorer (scores and noise given) keeps these tests to the runner's own logic."""

from __future__ import annotations

import json
from pathlib import Path

from promptsearch.representation import Representation
from promptsearch.search import Results, Runner, Strategy
from promptsearch.search.runner import judge
from promptsearch.search.scorer import Score
from promptsearch.search.state import PathStep

SCORES = {"[X] is [MASK] .": 70.0, "[X] means [MASK] .": 71.0, "[X] says [MASK] .": 75.0}
SE = 2.0  # every gain's standard error in the fake


class FakeScorer:
    """What the runner asks of a scorer: scores of a list, a gain with its error, a score's error."""

    screening_precision = "fp32"

    def __init__(self):
        self.asked: list[list[str]] = []

    def settings_key(self):
        return "fake"

    def score(self, keys, fresh=False):
        keys = [Representation.parse(k).text for k in keys]
        self.asked.append(keys)
        return [Score(k, SCORES[k], True, 0.5) for k in keys]

    def gain(self, before, after, n_boot=1000, seed=0):
        return SCORES[Representation.parse(after).text] - SCORES[Representation.parse(before).text], SE

    def se(self, key):
        return 0.25


class Proposer(Strategy):
    """Proposes every template, then steps from the first to each of the others."""

    name = "fake"

    def __init__(self, min_gain="auto"):
        self.min_gain = min_gain
        self.taken: list[bool] = []

    def propose(self, runner: Runner) -> None:
        told = runner.score(list(SCORES), "fake")
        first, *others = told.scores
        for i, sc in enumerate(others, 1):
            row = PathStep("prefix", i, sc.template, sc.spearman, candidates=1)
            self.taken.append(runner.step(row, first.template, sc.template, seed=i, stop="stop"))
        runner.choose(Representation(first.template))


def _run(tmp_path: Path, min_gain="auto"):
    results = Results.open(tmp_path / "r.json", "m", "stsb-dev", "fake", True)
    strategy, scorer = Proposer(min_gain), FakeScorer()
    runner = Runner(strategy, scorer, results)
    strategy.propose(runner)
    return strategy, runner, results


def test_a_step_is_taken_only_when_its_gain_beats_the_noise(tmp_path):
    strategy, runner, results = _run(tmp_path)
    assert strategy.taken == [False, True]  # +1.00 is within its error 2.00; +5.00 is beyond it
    stop, step = runner.path
    assert (stop.stage, stop.gain, stop.se, stop.min_gain, stop.score_se) == ("stop", 1.0, SE, SE, 0.25)
    assert (step.stage, step.gain, step.taken) == ("prefix", 5.0, None)
    assert results.path_steps == runner.path
    # a fixed min_gain replaces the noise as the threshold: 0 takes any gain (the paper's rule), 6 none
    for sub, min_gain, taken in (("any", 0.0, [True, True]), ("none", 6.0, [False, False])):
        (tmp_path / sub).mkdir()
        assert _run(tmp_path / sub, min_gain)[0].taken == taken


def test_the_rule_refuses_the_same_representation_and_a_gain_equal_to_the_threshold():
    scorer = FakeScorer()
    t = "[X] says [MASK] ."
    assert not judge(scorer, t, Representation.parse(t), min_gain=-1.0).taken  # no gain over itself can be a step
    assert not judge(scorer, "[X] is [MASK] .", "[X] means [MASK] .", min_gain=1.0).taken  # 1.00 is not above 1.00
    j = judge(scorer, "[X] is [MASK] .", "[X] says [MASK] .")
    assert j.taken and j.noise == {"gain": 5.0, "se": SE, "min_gain": SE}


def test_the_runner_records_and_saves_after_each_record(tmp_path, monkeypatch):
    saved: list[tuple[int, int]] = []  # (entries, path rows) at each save
    real = Results.save

    def save(self):
        real(self)
        saved.append((len(self.entries), len(self.path_steps)))

    monkeypatch.setattr(Results, "save", save)
    _, runner, results = _run(tmp_path)
    assert saved[:4] == [(0, 0), (1, 0), (2, 0), (3, 0)]  # the new file, then each score saved as it is recorded
    assert (3, 1) in saved and (3, 2) in saved  # each path row too
    d = json.loads((tmp_path / "r.json").read_text())
    assert [e["template"] for e in d["templates"]][0] == "[X] is [MASK] ." and d["x_chosen"] == "[X] is [MASK] ."
    assert [(r["stage"], r["template"]) for r in d["path"]] == [("stop", "[X] means [MASK] ."),
                                                                ("prefix", "[X] says [MASK] .")]
    assert {e["template"]: e["source"] for e in d["templates"]} == {k: "fake" for k in SCORES}


def test_record_new_keeps_a_known_entry_and_none_records_nothing(tmp_path):
    results = Results.open(tmp_path / "r.json", "m", "stsb-dev", "fake", True)
    runner = Runner(Proposer(), FakeScorer(), results)
    runner.score(["[X] is [MASK] ."], "baseline")
    runner.score(list(SCORES), "later", record="new")
    assert {e.template: e.source for e in results.entries.values()} == {
        "[X] is [MASK] .": "baseline", "[X] means [MASK] .": "later", "[X] says [MASK] .": "later"}
    told = Runner(Proposer(), FakeScorer(), Results(None, "m", "stsb-dev", "fake", True))
    assert [s.spearman for s in told.score(list(SCORES), "x", record="none").scores] == list(SCORES.values())
    assert not told.results.entries


def test_candidates_are_scored_a_chunk_at_a_time(tmp_path, monkeypatch):
    monkeypatch.setattr(Runner, "CHUNK", 2)
    scorer = FakeScorer()
    runner = Runner(Proposer(), scorer, Results(None, "m", "stsb-dev", "fake", True))
    runner.score(list(SCORES), "x")
    runner.score(list(SCORES), "x", together=True)
    assert [len(a) for a in scorer.asked] == [2, 1, 3]


def test_only_the_runner_writes_results_and_judges_steps():
    """The strategies propose: none adds to, chooses in or saves the results, nor weighs a gain against its noise."""
    search = Path(__file__).resolve().parents[2] / "promptsearch" / "search"
    for name in ("greedy.py", "optuna_search.py", "generate.py", "baseline.py", "__init__.py"):
        text = (search / name).read_text(encoding="utf-8")
        for written in ("results.add(", "results.choose(", "results.save(", ".gain(", "> need", "path_steps ="):
            assert written not in text, f"{name} still does {written!r} itself"


def test_a_race_is_recorded_by_the_runner(tmp_path):
    from promptsearch.search.racing import RaceOutcome

    calls = []

    def fake_race(scorer, texts, racing, state, save=None, progress=None):
        calls.append(texts)
        return RaceOutcome([Score(texts[-1], SCORES[texts[-1]], True, 0.5)], [{"template": texts[0], "rung": 3}], 1.0,
                           2.0)

    import promptsearch.search.runner as runner_module

    results = Results(None, "m", "stsb-dev", "fake", True)
    runner = Runner(Proposer(), FakeScorer(), results)
    orig = runner_module.race
    runner_module.race = fake_race
    try:
        told = runner.score(list(SCORES), "raced", racing=_Racing())
    finally:
        runner_module.race = orig
    assert calls == [list(SCORES)] and [s.template for s in told.scores] == ["[X] says [MASK] ."]
    # screening time, and the finalist's
    assert told.dropped == [{"template": "[X] is [MASK] .", "rung": 3}] and results.seconds == 2.0 + 0.5
    assert list(results.entries) == [Representation("[X] says [MASK] .")]


class _Racing:
    """Stands for racing settings (the fake race reads none)."""

    def settings(self):
        return {}
