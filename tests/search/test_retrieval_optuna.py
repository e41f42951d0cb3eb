"""Optuna over retrieval prompts: the model's own is the study's first trial, every trial's score is recorded in the
study and the results file, a rerun resumes the study, another run sharing the storage reads the first one's scores
instead of encoding them, the verdict is the greedy search's rule; bad input is one line."""

import json
import threading
import time

import numpy as np
import optuna
import pytest
from conftest import FakeRetrievalTask, make_encoder

from promptsearch.errors import PromptSearchError
from promptsearch.eval.retrieval import RetrievalCandidate
from promptsearch.search import retrieval_optuna
from promptsearch.search.retrieval import QueryGrammar, RetrievalResults, RetrievalSearch, own_candidate
from promptsearch.search.retrieval_optuna import OptunaRetrieval, space_of

N = 300  # queries


@pytest.fixture(scope="module")
def enc(tiny_bert_encoder_only_dir):
    return make_encoder(tiny_bert_encoder_only_dir)


def Task(bonus=lambda c: 0.0, stop_after=None, wobble=0.002):
    return FakeRetrievalTask(bonus, stop_after, wobble=wobble, n=N)


def results(path=None, numbers=None):
    return RetrievalResults.open(path, "tiny", {"name": "fake", "fingerprint": "f" * 16, "queries": N, "corpus": 10},
                                 "fp32", numbers or {"model": "abc"})


def strategy(tmp_path, trials, name="s", **kw):
    return OptunaRetrieval(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name=name, trials=trials, seed=0,
                           batch=4, **kw)


def finished(tmp_path, name="s"):
    study = optuna.load_study(study_name=name, storage=f"sqlite:///{tmp_path / 'study.db'}")
    return [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]


def test_the_grammar_composes_query_prompts_with_the_task_filled_and_whitespace_kept():
    g = QueryGrammar.of_library("Find the paraphrase.")
    assert g is not None and g.size == 150 and set(g.slots) == {"instruction", "label", "separator"}
    assert "Instruct: Find the paraphrase\n" in g.slots["instruction"]  # {task} filled, its full stop dropped
    assert g.render({"instruction": "Instruct: Find the paraphrase\n", "label": "Query", "separator": ": "}) == \
        "Instruct: Find the paraphrase\nQuery: "  # e5-instruct's form, newline and trailing space kept
    shipped = {g.render({"instruction": i, "label": lab, "separator": s}) for i in g.slots["instruction"]
               for lab in g.slots["label"] for s in g.slots["separator"]}
    assert {"query: ", "search_query: ", "task: search result | query: "} <= shipped


def test_a_library_without_a_grammar_has_none_and_a_bad_one_is_one_line(tmp_path):
    lib = tmp_path / "lib.json"
    lib.write_text(json.dumps({"query": [], "document": []}))
    assert QueryGrammar.of_library("t", str(lib)) is None
    lib.write_text(json.dumps({"query_grammar": {"format": "{a}{b}", "slots": {"a": ["x"]}}}))
    with pytest.raises(PromptSearchError, match="slot 'b' used in the format needs a non-empty list of strings"):
        QueryGrammar.of_library("t", str(lib))


def test_the_models_own_is_the_first_trial_and_every_trial_is_recorded(enc, tmp_path):
    task, res = Task(), results(tmp_path / "r.json")
    out = RetrievalSearch(task, enc, res, strategy=strategy(tmp_path, 10)).run()
    own = own_candidate(enc)
    assert task.scored[0] == own and len(task.scored) == len(set(task.scored))  # the own first, nothing twice
    trials = finished(tmp_path)
    assert 10 <= len(trials) <= 10 + 3  # a batch in flight may pass the target
    first = min(trials, key=lambda t: t.number)
    assert RetrievalCandidate.from_json(first.user_attrs["candidate"]) == own
    for t in trials:  # each trial's score and per-query nDCG@10 are the results file's
        e = out.entries[RetrievalCandidate.from_json(t.user_attrs["candidate"])]
        assert t.value == e.score and t.user_attrs["per_query"] == [round(float(x), 6) for x in e.per_query]
    assert {p for t in trials for p in t.params} >= {"query_from", "document", "readout"}
    assert json.loads((tmp_path / "r.json").read_text())["strategy"]["name"] == "optuna"
    assert out.stats["study"]["complete"] == len(trials)


def test_the_verdict_is_the_step_rule_against_the_models_own(enc, tmp_path):
    own = own_candidate(enc)
    # every candidate but the own gains a tenth of a point: far beyond the per-query noise of the wobble
    res = RetrievalSearch(Task(lambda c: 0.0 if c == own else 0.1), enc, results(),
                          strategy=strategy(tmp_path, 8, "beats")).run()
    assert res.best != own and res.best == res.ranked()[0].candidate and res.verdict["taken"] is True
    # every other candidate a little below the own on every query: the own stays, and no step is a step to itself
    res = RetrievalSearch(Task(lambda c: 0.0 if c == own else -0.01, wobble=0.0), enc, results(),
                          strategy=strategy(tmp_path, 8, "worse")).run()
    assert res.best == own and res.verdict["kept"] is True


def test_a_rerun_resumes_the_study_and_scores_nothing_twice(enc, tmp_path):
    out = tmp_path / "r.json"
    first = Task()
    RetrievalSearch(first, enc, results(out), strategy=strategy(tmp_path, 6)).run()
    n1 = len(finished(tmp_path))
    second = Task()
    res = RetrievalSearch(second, enc, results(out), strategy=strategy(tmp_path, 12)).run()
    assert 12 <= len(finished(tmp_path)) <= 12 + 3 and n1 < 12
    assert not set(second.scored) & set(first.scored)  # what the first run scored is read back, not scored
    assert len(res.entries) == len(set(first.scored) | set(second.scored))


def test_another_run_sharing_the_study_reads_its_scores_instead_of_encoding(enc, tmp_path):
    a, b = Task(), Task()
    RetrievalSearch(a, enc, results(tmp_path / "a.json"), strategy=strategy(tmp_path, 8)).run()
    res = RetrievalSearch(b, enc, results(tmp_path / "b.json"), strategy=strategy(tmp_path, 14)).run()
    # the other run's candidates are not encoded again (the model's own each run scores first, itself)
    assert set(b.scored) & set(a.scored) == {own_candidate(enc)}
    got = {e.candidate: e for e in res.entries.values() if e.source.endswith("(another run)")}
    assert set(got) == set(a.scored) - {own_candidate(enc)}  # the own this run scores itself, first
    base = RetrievalResults.load(tmp_path / "a.json")
    for c, e in got.items():  # the same numbers, per query too
        assert e.score == pytest.approx(base.entries[c].score, abs=1e-6)
        assert np.allclose(e.per_query, base.entries[c].per_query, atol=1e-6, rtol=0)


def test_an_interrupt_leaves_no_trial_running_and_the_rerun_finishes(enc, tmp_path):
    out = tmp_path / "r.json"
    with pytest.raises(KeyboardInterrupt):
        RetrievalSearch(Task(stop_after=3), enc, results(out), strategy=strategy(tmp_path, 10)).run()
    study = optuna.load_study(study_name="s", storage=f"sqlite:///{tmp_path / 'study.db'}")
    assert not [t for t in study.trials if t.state == optuna.trial.TrialState.RUNNING]
    kept = len(RetrievalResults.load(out).entries)
    assert kept == 3  # every score made before the interrupt is in the file
    RetrievalSearch(Task(), enc, results(out), strategy=strategy(tmp_path, 10)).run()
    assert len(finished(tmp_path)) >= 10


def test_a_trial_proposing_a_candidate_scored_already_is_told_its_score_and_counted(enc, tmp_path):
    """TPE may propose a candidate again (Optuna does not dedupe; a user's trial saw 30 trials give 27 candidates):
    such a trial is told the candidate's score, nothing is encoded twice, and the run counts the repeats. A space of
    two candidates (the own, and "query: ") makes most of 8 trials repeats."""
    lib = tmp_path / "lib.json"
    lib.write_text(json.dumps({"query": [{"prompt": "", "source": "none"}, {"prompt": "query: ", "source": "e5"}],
                               "document": [{"prompt": "", "source": "none"}]}))
    task = Task()
    s = strategy(tmp_path, 8, library=str(lib), readouts=[])
    out = RetrievalSearch(task, enc, results(), s).run()
    trials = finished(tmp_path)
    distinct = {json.dumps(t.user_attrs["candidate"], sort_keys=True) for t in trials}
    assert len(distinct) == 2 and len(task.scored) == len(set(task.scored)) == 2  # each encoded once
    for t in trials:  # a repeat's value is the candidate's score
        assert t.value == out.entries[RetrievalCandidate.from_json(t.user_attrs["candidate"])].score
    # every trial but the first (the own, told before the loop) was asked by this run: all but 2 are repeats
    assert s.repeats == out.stats["study"]["repeats"] == len(trials) - 2 >= 6


def test_a_prompt_the_model_cannot_read_is_pruned_with_the_reason(enc, tmp_path):
    lib = tmp_path / "lib.json"
    long = "word " * 600
    lib.write_text(json.dumps({"query": [{"prompt": long, "source": "long"}],
                               "document": [{"prompt": "", "source": "none"}]}))
    RetrievalSearch(Task(), enc, results(), strategy(tmp_path, 6, library=str(lib), readouts=[])).run()
    pruned = [t for t in finished(tmp_path) if t.state == optuna.trial.TrialState.PRUNED]
    assert pruned and all("no room" in t.user_attrs["why"] for t in pruned)
    assert all(t.user_attrs["candidate"]["query"] == long for t in pruned)


def test_a_study_of_other_numbers_or_options_is_refused_in_one_line(enc, tmp_path):
    RetrievalSearch(Task(), enc, results(), strategy=strategy(tmp_path, 4)).run()
    with pytest.raises(PromptSearchError, match=r"holds scores of other model weights, tokenizer or settings; .*"
                                                r"give another study_name="):
        RetrievalSearch(Task(), enc, results(numbers={"model": "other"}), strategy=strategy(tmp_path, 8)).run()
    lib = tmp_path / "lib.json"
    lib.write_text(json.dumps({"query": [{"prompt": "query: ", "source": "e5"}],
                               "document": [{"prompt": "", "source": "none"}]}))
    with pytest.raises(PromptSearchError, match="offers other options for"):
        RetrievalSearch(Task(), enc, results(), strategy(tmp_path, 8, library=str(lib))).run()


def test_the_space_puts_the_models_own_first_on_each_side(enc):
    search = RetrievalSearch(Task(), enc, results())
    own = RetrievalCandidate.of("mine: ", "doc: ", "cls")
    s = space_of(search, own)
    assert s.queries[0] == "mine: " and s.documents[0] == "doc: " and s.readouts[0] == "cls"
    assert len(s.queries) == len(set(s.queries)) and s.own_params(own)["query_from"] == "library"


def test_a_resumed_seeded_study_draws_new_candidates_not_the_first_runs_again(enc, tmp_path):
    first, second = Task(), Task()
    RetrievalSearch(first, enc, results(tmp_path / "r.json"), strategy=strategy(tmp_path, 5)).run()
    RetrievalSearch(second, enc, results(tmp_path / "r.json"), strategy=strategy(tmp_path, 10)).run()
    trials = sorted(finished(tmp_path), key=lambda t: t.number)
    later = [json.dumps(t.user_attrs["candidate"], sort_keys=True) for t in trials[5:]]
    earlier = {json.dumps(t.user_attrs["candidate"], sort_keys=True) for t in trials[:5]}
    assert len(set(later) - earlier) >= 4  # the same seed restarted would have proposed the first five again


def test_a_study_that_cannot_be_joined_is_refused_before_anything_is_scored(enc, tmp_path):
    RetrievalSearch(Task(), enc, results(), strategy=strategy(tmp_path, 4)).run()
    task = Task()
    with pytest.raises(PromptSearchError, match="holds scores of other model weights"):
        RetrievalSearch(task, enc, results(numbers={"model": "other"}), strategy=strategy(tmp_path, 8)).run()
    assert task.scored == []  # not even the model's own: a refusal costs no corpus encoding


def test_a_new_study_starts_from_what_the_results_file_holds(enc, tmp_path):
    """Greedy first, then Optuna into the same file: the greedy run's candidates are the study's first trials, told
    their scores, so TPE starts from them and none is scored again."""
    out = tmp_path / "r.json"
    greedy = Task()
    RetrievalSearch(greedy, enc, results(out)).run()
    held = RetrievalResults.load(out).entries
    opt = Task()
    RetrievalSearch(opt, enc, results(out), strategy=strategy(tmp_path, len(held) + 6)).run()
    assert not set(opt.scored) & set(held)  # nothing the greedy steps scored is scored again
    trials = sorted(finished(tmp_path), key=lambda t: t.number)
    first = [RetrievalCandidate.from_json(t.user_attrs["candidate"]) for t in trials[: len(held)]]
    assert first[0] == own_candidate(enc) and set(first) == set(held)  # the own first, then the file's
    assert all(t.value == held[c].score for t, c in zip(trials, first))
    assert len(set(opt.scored)) >= 4  # and then trials of its own


def test_racing_prunes_trials_with_a_new_document_prompt_on_the_smaller_corpus(enc, tmp_path):
    """A trial whose document side no scored candidate has is screened first; the pruner stops the worse half of the
    screened there, told pruned with its screen score and never encoded over the whole corpus; a trial whose
    document side is scored already is not screened."""
    from promptsearch.search.retrieval import CorpusRace

    def bonus(c):  # the document prompt decides: passage: far behind, the others within a little of each other
        return {"passage: ": -0.2, "search_document: ": 0.02}.get(c.document, 0.0)

    task = Task(bonus, wobble=0.01)
    res = RetrievalSearch(task, enc, results(), strategy(tmp_path, 24, racing=CorpusRace(), readouts=["cls"])).run()
    trials = finished(tmp_path)
    raced = [t for t in trials if str(t.user_attrs.get("why", "")).startswith("pruned by racing")]
    screened = [t for t in trials if "screen" in t.user_attrs]
    assert raced and len(raced) < len(screened)  # some go on, some are stopped
    assert {t.state for t in raced} == {optuna.trial.TrialState.PRUNED}
    assert all(t.user_attrs["screen"]["documents"] == 10 for t in screened)  # the smaller corpus (the fake's 10)
    full = set(task.scored)  # scored over the whole corpus
    completed = {RetrievalCandidate.from_json(t.user_attrs["candidate"]) for t in trials
                 if t.state == optuna.trial.TrialState.COMPLETE}
    for t in raced:  # never encoded over the whole corpus, unless another trial went on with it
        c = RetrievalCandidate.from_json(t.user_attrs["candidate"])
        assert c not in full or c in completed
        assert f"{t.user_attrs['screen']['ndcg@10']:.4f}" in t.user_attrs["why"]
    assert set(res.entries) == full | {c for c in completed if c in res.entries}  # no screen score is an entry
    assert res.stats["screened_out"] == len(raced) == res.stats["study"]["raced_out"]
    assert res.strategy["racing"] == CorpusRace().settings()
    # without a race nothing is screened
    plain = Task(bonus, wobble=0.01)
    RetrievalSearch(plain, enc, results(), strategy(tmp_path, 12, name="plain", readouts=["cls"])).run()
    assert not plain.screens and not [t for t in finished(tmp_path, "plain") if "screen" in t.user_attrs]


class ScreenedTrial:
    """What _screen asks of an Optuna trial: its number, report and user attributes."""

    def __init__(self, number):
        self.number, self.reported, self.user_attrs = number, None, {}

    def report(self, v, step):
        self.reported = (v, step)

    def set_user_attr(self, k, v):
        self.user_attrs[k] = v


def test_a_trial_sharing_its_document_side_with_one_that_goes_on_is_not_pruned(enc):
    """Two trials of a batch with the same new document side: if one goes on, that side is encoded over the whole
    corpus anyway, so the other (a query pass there) is not pruned either; a side no trial goes on with is."""
    from promptsearch.search.retrieval import CorpusRace

    a, b = RetrievalCandidate.of("query: ", "passage: ", "mean"), RetrievalCandidate.of("q: ", "passage: ", "mean")
    c = RetrievalCandidate.of("query: ", "title: ", "mean")
    s = OptunaRetrieval(storage="sqlite://", study_name="x", racing=CorpusRace())
    search = RetrievalSearch(Task({a: 0.1, b: -0.1, c: -0.1}, wobble=0.0), enc, results(), s)
    trials = [ScreenedTrial(0), ScreenedTrial(1), ScreenedTrial(2)]
    out = s._screen(trials, {0: a, 1: b, 2: c}, search)  # of three, the best goes on (b: with it, a's side)
    assert {t.number: p for t, (_, p) in out.items()} == {0: False, 1: False, 2: True}
    assert all(t.reported[1] == 1 and "screen" in t.user_attrs for t in trials)
    assert search.scorer.screened_out == 1


def test_a_batch_is_raced_at_once_whatever_the_order_its_trials_were_screened_in(enc):
    """A trial's trial: Optuna's pruner, asked trial by trial, let the first of a batch go on against nothing and a
    worse one go on while a better one was pruned (screens 0.6, 0.9, 0.7, 0.8 in that order: 0.6 and 0.9 and 0.8 went
    on, 0.7 was pruned). The batch is now judged at once: its better half goes on (0.9, 0.8) in any order, and
    against the study's earlier screens (history) the bar rises."""
    import itertools

    from promptsearch.search.retrieval import CorpusRace
    from promptsearch.search.retrieval_optuna import better_half

    offsets = {"p6: ": -0.3, "p9: ": 0.0, "p7: ": -0.2, "p8: ": -0.1}  # the screen scores' order: 0.6, 0.9, 0.7, 0.8
    cands = {i: RetrievalCandidate.of("", d, "mean") for i, d in enumerate(offsets)}  # each a new document side
    s = OptunaRetrieval(storage="sqlite://", study_name="x", racing=CorpusRace())
    search = RetrievalSearch(Task(lambda c: offsets.get(c.document, 0.0), wobble=0.0), enc, results(), s)
    for order in itertools.permutations(range(4)):
        out = s._screen([ScreenedTrial(i) for i in order], cands, search)
        assert {t.number for t, (_, p) in out.items() if not p} == {1, 3}, order  # p9 and p8, the better half
    top = max(v for v, _ in out.values())
    out = s._screen([ScreenedTrial(i) for i in range(4)], cands, search, history=lambda: [top + 0.05, top + 0.01])
    assert {t.number for t, (_, p) in out.items() if not p} == {1}  # 6 screened: the best 3, two of them earlier
    assert better_half([0.5]) == 0.5 and better_half([0.5, 0.7, 0.6]) == 0.7 and better_half([4, 3, 2, 1]) == 3
    nan = float("nan")  # a screen that gave no number: left out of the bar, and pruned itself
    assert better_half([nan, 0.5, 0.7, 0.6]) == 0.7 and better_half([nan]) == float("inf")


def test_the_history_a_batch_is_raced_against_is_every_other_trials_screen():
    """What a batch is judged against: the screens other trials keep (another process's too), not the batch's own,
    nor a trial with no screen (one the model cannot read, one not raced)."""
    from promptsearch.search.retrieval_optuna import screens_before

    study = optuna.create_study(direction="maximize")
    for i, attrs in enumerate([{"screen": {"documents": 10, "ndcg@10": 0.4}}, {}, {"screen": {"documents": 10,
                               "ndcg@10": 0.6}}, {"why": "no room"}, {"screen": {"documents": 10, "ndcg@10": 0.9}}]):
        t = study.ask()
        for k, v in attrs.items():
            t.set_user_attr(k, v)
        if i < 4:
            study.tell(t, 0.5)
    assert screens_before(study, {4}) == [0.4, 0.6]  # trial 4: the batch's own (still running)
    assert sorted(screens_before(study, set())) == [0.4, 0.6, 0.9]


def test_a_study_another_process_has_just_created_is_joined_once_it_is_recorded(enc, tmp_path, monkeypatch):
    """Two workers started at once on a new study name: the one whose create_study lost finds the study before its
    maker has seeded and recorded it, waits for the record and joins, instead of refusing it as not a retrieval
    study; it seeds nothing itself (the maker does, once)."""
    url = f"sqlite:///{tmp_path / 'study.db'}"
    made = optuna.create_study(storage=url, study_name="s", direction="maximize")  # the other worker, mid-way
    search = RetrievalSearch(Task(), enc, results(), strategy=strategy(tmp_path, 4))
    record = search.strategy.record(search)
    waited = []
    wait = OptunaRetrieval._await_record

    def waiting(self, *a):  # the record comes 1 s after the wait began: the wait is what is tested
        waited.append(time.monotonic())
        threading.Timer(1.0, lambda: made.set_user_attr("retrieval", record)).start()
        return wait(self, *a)

    monkeypatch.setattr(OptunaRetrieval, "_await_record", waiting)
    monkeypatch.setattr(retrieval_optuna, "SAY_AFTER", 0.2)
    said: list[str] = []
    search.progress = said.append
    search.run()
    assert sum("optuna: study 's' in " in x and "is being made by another process: waiting for it" in x
               for x in said) == 1, said
    assert len(waited) == 1 and time.monotonic() - waited[0] >= 1.0  # it waited for the record
    study = optuna.load_study(study_name="s", storage=url)
    assert study.user_attrs["retrieval"] == record
    assert not [t for t in study.trials if t.user_attrs.get("from") == "the results file"]  # the joiner seeds nothing
    assert len(finished(tmp_path)) >= 4


def test_a_study_its_maker_left_half_made_is_removed_and_made_afresh(enc, tmp_path, monkeypatch, capsys):
    """Its maker stopped before it was recorded: one on another host whose mark is not renewed for SETUP_WAIT, or one
    on this host that no longer runs (at once). It held only seeds from that run's file: removed, made again here."""
    from conftest import dead_process

    monkeypatch.setattr(retrieval_optuna, "SETUP_WAIT", 0.5)
    url = f"sqlite:///{tmp_path / 'study.db'}"
    for mark in ({"process": "elsewhere:1", "at": 0}, {"process": dead_process()}):
        optuna.create_study(storage=url, study_name="s", direction="maximize").set_user_attr("making", mark)
        said: list[str] = []
        started = time.monotonic()
        RetrievalSearch(Task(), enc, results(), strategy=strategy(tmp_path, 4), progress=said.append).run()
        assert any("left half made by a run that stopped; making it afresh" in x for x in said), said
        assert not any("is being made by another process" in x for x in said)  # 0.5 s: under SAY_AFTER
        study = optuna.load_study(study_name="s", storage=url)
        assert "retrieval" in study.user_attrs and study.trials[0].user_attrs["from"] == "the results file"
        assert len(finished(tmp_path)) >= 4
        optuna.delete_study(study_name="s", storage=url)
    assert time.monotonic() - started < 30  # the stopped local maker: no wait (the other waited 0.5 s)


def test_a_study_stopped_while_it_is_made_is_deleted_so_the_rerun_makes_it_afresh(enc, tmp_path, monkeypatch):
    def stop(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(OptunaRetrieval, "_seed_study", stop)
    with pytest.raises(KeyboardInterrupt):
        RetrievalSearch(Task(), enc, results(), strategy=strategy(tmp_path, 4)).run()
    assert optuna.get_all_study_names(f"sqlite:///{tmp_path / 'study.db'}") == []
    monkeypatch.undo()
    RetrievalSearch(Task(), enc, results(), strategy=strategy(tmp_path, 4)).run()
    assert len(finished(tmp_path)) >= 4


def test_a_study_of_another_kind_is_refused_at_once_not_waited_for(enc, tmp_path):
    study = optuna.create_study(storage=f"sqlite:///{tmp_path / 'study.db'}", study_name="s", direction="maximize")
    study.set_user_attr("numbers", {"model": "abc"})  # an STS search's
    started = time.monotonic()
    with pytest.raises(PromptSearchError, match="is not a retrieval study"):
        RetrievalSearch(Task(), enc, results(), strategy=strategy(tmp_path, 4)).run()
    assert time.monotonic() - started < retrieval_optuna.SETUP_WAIT
