"""The runner: a strategy proposes, the runner alone records (scores, path, saves) and judges every step
with one rule. A fake scorer (scores and noise given) keeps these tests to the runner's own logic."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from promptsearch.representation import Representation
from promptsearch.search import Results, Runner, Strategy
from promptsearch.search.runner import judge
from promptsearch.search.scorer import Score
from promptsearch.search.state import PathStep

SCORES = {"[X] is [MASK] .": 70.0, "[X] means [MASK] .": 71.0, "[X] says [MASK] .": 75.0}
SE = 2.0  # every gain's standard error in the fake


class FakeScorer:
    """What the runner asks of a scorer: scores of a list (each told as it comes), a gain with its error, a score's
    error, what a key reads as."""

    screening_precision = "fp32"

    def __init__(self):
        self.asked: list[list[str]] = []

    def settings_key(self):
        return "fake"

    def score(self, keys, fresh=False, on_score=None):
        keys = [Representation.parse(k).text for k in keys]
        self.asked.append(keys)
        out = [Score(k, SCORES[k], True, 0.5) for k in keys]
        for sc in out:
            if on_score is not None:
                on_score(sc)
        return out

    representation = staticmethod(Representation.parse)

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
    """The strategies propose: none adds to, chooses in or saves the results, nor weighs a gain against its noise —
    the STS ones and the retrieval ones (greedy's class, Optuna's module) alike."""
    import inspect

    from promptsearch.search import retrieval

    search = Path(__file__).resolve().parents[2] / "promptsearch" / "search"
    texts = {name: (search / name).read_text(encoding="utf-8")
             for name in ("greedy.py", "optuna_search.py", "generate.py", "baseline.py", "__init__.py",
                          "retrieval_optuna.py")}
    texts.update({c.__name__: inspect.getsource(c) for c in (retrieval.RetrievalStrategy, retrieval.GreedyRetrieval)})
    for name, text in texts.items():
        for written in ("results.add(", "results.choose(", "results.save(", ".gain(", "> need", "path_steps =",
                        "results.best ="):
            assert written not in text, f"{name} still does {written!r} itself"
        assert not re.search(r"(?<![.\w])judge\(", text), f"{name} judges a step itself, not by runner.judge"


class FirstOrBest(Strategy):
    """A strategy written once for every kind of task: it asks the runner to score what it is given, to judge the
    best against the first by the step rule, and answers with whichever the rule keeps."""

    name = "first-or-best"

    def __init__(self, candidates):
        self.candidates = candidates

    def propose(self, runner) -> None:
        told = runner.score(self.candidates, "generic", together=True, record="new")
        first, best = told.scores[0], max(told.scores, key=lambda s: s.value)
        taken = runner.judge(first.entry_key, best.entry_key, seed=0).taken
        runner.choose(best.entry_key if taken else first.entry_key)


def test_one_strategy_runs_through_the_same_runner_on_sts_and_on_retrieval(tmp_path, tiny_bert_encoder_only_dir):
    """The protocol is one: the same strategy's code proposes STS templates to ``Runner`` and retrieval candidates to
    ``RetrievalSearch`` (a ``StepRunner`` both), each scorer telling scores with a ``value`` and weighing steps by the
    one rule; the results record what it chose."""
    from conftest import FakeRetrievalTask, make_encoder

    from promptsearch.eval.retrieval import RetrievalCandidate
    from promptsearch.search.racing import Racing
    from promptsearch.search.retrieval import CorpusRace, RetrievalResults, RetrievalSearch, own_candidate, summary
    from promptsearch.search.runner import StepRunner, TaskRace, TaskResults, TaskScorer

    assert isinstance(Racing(), TaskRace) and isinstance(CorpusRace(), TaskRace)  # one racing parameter, any kind
    assert not isinstance(object(), TaskRace)
    sts = Results(None, "m", "stsb-dev", "fake", True)
    runner = Runner(FirstOrBest(list(SCORES)), FakeScorer(), sts)
    runner.strategy.propose(runner)
    assert sts.chosen == Representation("[X] says [MASK] .")  # +5.00 beyond its error 2.00

    enc = make_encoder(tiny_bert_encoder_only_dir)
    own = own_candidate(enc)
    better, within = RetrievalCandidate.of("query: ", "", own.readout), RetrievalCandidate.of("q: ", "", own.readout)
    # +0.05 on every query: beyond any noise; +0.0005 on average, ±0.02 query by query: its error, 0.02 / sqrt(400)
    # = 0.001, is above the gain
    for bonus, want in (({better: 0.05}, better), ({within: 0.0005 + 0.02 * (-1) ** np.arange(400)}, own)):
        res = RetrievalResults.open(None, "tiny", {"name": "fake", "fingerprint": "f" * 16, "queries": 400,
                                                   "corpus": 100}, "fp32", {"model": "abc"})
        search = RetrievalSearch(FakeRetrievalTask(bonus), enc, res, FirstOrBest([own, better, within]))
        assert isinstance(search, StepRunner) and isinstance(runner, StepRunner)
        assert isinstance(search.scorer, TaskScorer) and isinstance(res, TaskResults) and isinstance(sts, TaskResults)
        assert search.run().best == want  # a gain within the noise is not taken: the model's own stays
        if want == own:  # the strategy answered with the model's own: the highest of the rest weighed, named so
            assert res.verdict["weighed"] == "highest"
            assert any(x.startswith("nothing beats the model's own beyond its noise: the best of the rest, ")
                       for x in summary(res)), summary(res)
        assert res.strategy == {"name": "first-or-best"} and {e.source for e in res.entries.values()} == {
            "own", "generic"}


def test_a_race_is_recorded_by_the_runner(tmp_path):
    from promptsearch.search.racing import RaceOutcome

    calls = []

    def fake_race(scorer, texts, racing, state, save=None, progress=None):
        calls.append(texts)
        return RaceOutcome([Score(texts[-1], SCORES[texts[-1]], True, 0.5)], [{"template": texts[0], "rung": 3}], 1.0,
                           2.0)

    import promptsearch.search.racing as racing_module

    results = Results(None, "m", "stsb-dev", "fake", True)
    runner = Runner(Proposer(), FakeScorer(), results)
    orig = racing_module.race
    racing_module.race = fake_race
    try:
        told = runner.score(list(SCORES), "raced", racing=_Racing())
    finally:
        racing_module.race = orig
    assert calls == [list(SCORES)] and [s.template for s in told.scores] == ["[X] says [MASK] ."]
    # screening time, and the finalist's
    assert told.dropped == [{"template": "[X] is [MASK] .", "rung": 3}] and results.seconds == 2.0 + 0.5
    assert list(results.entries) == [Representation("[X] says [MASK] .")]


class _Racing:
    """Stands for racing settings (the fake race reads none); runs as ``Racing`` does."""

    from promptsearch.search.racing import Racing

    run = Racing.run

    def settings(self):
        return {}


def test_scores_are_recorded_as_told_and_told_back_in_candidate_order(tmp_path):
    """A scorer may tell its scores in another order than asked (retrieval's: those held first, then grouped by
    document side); each is recorded as it is told, and the strategy gets them in candidate order, the order it
    breaks ties by."""

    class Reversed(FakeScorer):
        def score(self, keys, fresh=False, on_score=None):
            out = super().score(keys, fresh)
            for sc in reversed(out):
                if on_score is not None:
                    on_score(sc)
            return out

    results = Results(None, "m", "stsb-dev", "fake", True)
    told = Runner(Proposer(), Reversed(), results).score(list(SCORES), "x", together=True)
    assert [s.template for s in told.scores] == list(SCORES)
    assert [e.template for e in sorted(results.entries.values(), key=lambda e: e.order)] == list(SCORES)[::-1]


class First(Strategy):
    """Answers with the first candidate it is given, whatever the others score."""

    name = "first"

    def __init__(self, candidates):
        self.candidates = candidates

    def propose(self, runner) -> None:
        runner.choose(runner.score(self.candidates, "first", together=True, record="new").scores[0].entry_key)


def test_every_kind_of_search_ends_with_one_verdict_which_never_answers_what_the_strategy_did_not_choose(
        tiny_bert_encoder_only_dir):
    """``StepRunner.settle_own`` is the verdict of STS and retrieval searches alike. A strategy that answers with the
    model's own while another candidate scores far above it keeps the model's own as the answer, and the verdict
    says how far the highest is and that it was not chosen; the spread ranks the model's own, on both kinds."""
    from conftest import FakeRetrievalTask, make_encoder

    from promptsearch.eval.retrieval import RetrievalCandidate
    from promptsearch.search.baseline import settle, verdict_lines
    from promptsearch.search.retrieval import RetrievalResults, RetrievalSearch, own_candidate, summary
    from promptsearch.search.state import Verdict

    sts = Results(None, "m", "stsb-dev", "fake", True)
    runner = Runner(First(list(SCORES)), FakeScorer(), sts)
    runner.strategy.propose(runner)
    own, top = Representation("[X] is [MASK] ."), Representation("[X] says [MASK] .")
    runner.keep(baseline=Verdict(own))
    settle(runner)
    v = sts.baseline
    assert sts.best.entry_key == own and v.kept and v.best == top and v.gain == 5.0 > v.min_gain == SE
    assert "scores +5.00 ± 2.00 above the model's own" in verdict_lines(sts)[0]
    assert v.weighed == "highest"  # the strategy answered with the model's own: the highest of the rest was weighed
    assert (sts.spread.own, sts.spread.own_rank, sts.spread.n) == (70.0, 3, 3)
    # a strategy whose answer is within the noise of the model's own: the verdict names it as the search's answer,
    # not "the best" (a new user read that as the highest score, which the table above it contradicted)
    sts2 = Results(None, "m", "stsb-dev", "fake", True)
    runner2 = Runner(First(list(SCORES)), FakeScorer(), sts2)
    runner2.strategy.propose(runner2)
    runner2.choose(Representation("[X] means [MASK] ."))  # +1.00 ± 2.00 over the model's own: not taken
    runner2.keep(baseline=Verdict(own))
    settle(runner2)
    assert sts2.baseline.weighed == "answer" and sts2.baseline.kept
    assert ("no template beats the model's own representation ([X] is [MASK] ., 70.00): the search's answer, [X] "
            "means [MASK] ., is +1.00 ± 2.00 on STS-B dev, not above the min gain 2.00") in verdict_lines(sts2)[0]
    assert Verdict.from_json(sts2.baseline.to_json()).weighed == "answer"  # kept in the file

    enc = make_encoder(tiny_bert_encoder_only_dir)
    mine = own_candidate(enc)
    better = RetrievalCandidate.of("query: ", "", mine.readout)
    res = RetrievalResults.open(None, "tiny", {"name": "fake", "fingerprint": "f" * 16, "queries": 400, "corpus": 100},
                                "fp32", {"model": "abc"})
    RetrievalSearch(FakeRetrievalTask({better: 0.05}), enc, res, First([mine, better])).run()
    assert res.best == mine and res.verdict["kept"] and res.verdict["taken"]
    assert RetrievalCandidate.from_json(res.verdict["challenger"]) == better
    assert any("above the model's own, but the strategy did not choose it" in line for line in summary(res))
    assert (res.spread.own_rank, res.spread.n) == (2, 2) and res.verdict["weighed"] == "highest"


def test_a_resumed_run_settles_on_what_its_strategy_chooses_now_not_on_the_files_last_answer(tmp_path):
    """A finished run kept the model's own (its file's x_chosen); the resumed run scores a template far above it and
    names no answer: the verdict weighs the highest and takes it, as a fresh run over the same scores does — the
    file's earlier answer is not this run's strategy's."""
    from promptsearch.search.baseline import settle, verdict_lines
    from promptsearch.search.state import Verdict

    own, top = Representation("[X] is [MASK] ."), Representation("[X] says [MASK] .")

    class Scores(Strategy):
        name = "given"

        def __init__(self, keys):
            self.keys = keys

        def propose(self, runner) -> None:
            runner.score(self.keys, "score", record="new")

    def run(keys):
        res = Results.open(tmp_path / "r.json", "m", "stsb-dev", "score", True)
        runner = Runner(Scores(keys), FakeScorer(), res)
        runner.score([own.text], "baseline", record="new")
        runner.keep(baseline=Verdict(own))
        runner.strategy.propose(runner)
        settle(runner)
        return res

    first = run([own.text, "[X] means [MASK] ."])  # +1.00 within its error 2.00: the own kept, and chosen
    assert first.best.entry_key == own and first.chosen == own
    again = run(list(SCORES))
    assert again.best.entry_key == top and again.baseline.kept is False  # +5.00 beyond 2.00
    assert "beats the model's own representation" in verdict_lines(again)[0]
