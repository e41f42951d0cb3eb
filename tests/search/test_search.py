"""Scorer, results schema, greedy and the grammar — on tiny models and real STS16 data."""

import json

import jsonschema
import pytest
from conftest import PAPER_T, PRECISIONS, make_encoder, write_vocab

from promptsearch.errors import PromptSearchError
from promptsearch.representation import Representation
from promptsearch.search import Results, Scorer, run_strategy
from promptsearch.search.grammar import Grammar
from promptsearch.search.greedy import Greedy, format_path
from promptsearch.search.progressive import score_progressive
from promptsearch.search.results import load, schema
from promptsearch.search.scorer import Score

DATASET = "sts16"  # 1,186 real pairs: quick on a tiny model


@pytest.fixture
def scorer(bert_enc, tmp_path):
    return Scorer(bert_enc, dataset=DATASET, cache=tmp_path / "cache.jsonl")


@pytest.mark.parametrize("precision", PRECISIONS)
def test_scorer_caches_both_variants_persistently(precision, tiny_bert_dir, tmp_path):
    enc = make_encoder(tiny_bert_dir, bf16=precision == "bf16")
    scorer = Scorer(enc, dataset=DATASET, cache=tmp_path / "cache.jsonl")
    s1 = scorer.score(PAPER_T)
    assert not s1.cached and scorer.n_scored == 1
    s2 = scorer.score(PAPER_T)
    assert s2.cached and s2.spearman == s1.spearman and scorer.n_scored == 1
    # one pass recorded the raw variant too
    raw = Scorer(enc, dataset=DATASET, denoise=False, cache=tmp_path / "cache.jsonl")
    assert raw.cached(PAPER_T) is not None and raw.cached(PAPER_T) != s1.spearman
    # The value is the real evaluation, bit for bit: one STSEvaluator, the same sentences in the
    # same batches — also from another encoder whose template-bias cache was filled in another
    # order, and with another task evaluated in the same call.
    from promptsearch.encoding import rep as Rep
    from promptsearch.eval import evaluate_reps
    other = make_encoder(tiny_bert_dir, bf16=precision == "bf16")
    other.encode(["a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h ."], template=PAPER_T,
                 denoise=True)
    rep = Rep(template=PAPER_T, denoise=True)
    expected = evaluate_reps(other, [rep], ["sts13", DATASET])[rep][DATASET]["spearman"]
    assert s1.spearman == pytest.approx(expected, abs=1e-9)
    assert raw.cached(PAPER_T) == pytest.approx(evaluate_reps(other, [Rep(template=PAPER_T)],
                                                              [DATASET])[Rep(template=PAPER_T)][DATASET]["spearman"],
                                                              abs=1e-9)


def test_cache_is_keyed_by_weights_not_just_name(scorer, tiny_bert_dir, tmp_path):
    scorer.score(PAPER_T)
    other = make_encoder(tiny_bert_dir)
    with __import__("torch").no_grad():
        for p in other.encoder.parameters():
            p.add_(0.01)
    s = Scorer(other, dataset=DATASET, cache=tmp_path / "cache.jsonl")
    assert s.cached(PAPER_T) is None


def test_progressive_scoring_ends_at_the_full_score(scorer, bert_enc, tmp_path):
    full = Scorer(bert_enc, dataset=DATASET, cache=False).score("[X] means [MASK] .").spearman
    steps = list(score_progressive(scorer, "[X] means [MASK] .", [100, 300, 600]))
    assert [n for n, _ in steps] == [100, 300, 600, 1186]
    # Sentences are batched differently (subset by subset), so padding changes float rounding
    # (~1e-6 per vector); on a random model's near-tied cosines that moves Spearman by < 0.01.
    assert steps[-1][1] == pytest.approx(full, abs=0.05)
    assert scorer.cached("[X] means [MASK] .") == steps[-1][1]


def _vocab(tmp_path, **kw):
    return write_vocab(tmp_path, **{"relations": ["means", "is", ""], "prefix_tokens": ["This", "sentence", ":"], **kw})


def test_greedy_path_schema_and_resume(scorer, bert_enc, tmp_path):
    out = tmp_path / "best.json"
    g = Greedy(vocabulary=_vocab(tmp_path), max_steps=3, show_progress_bar=False, racing=None)  # exhaustive
    res = run_strategy(g, scorer, out, "tiny")
    d = json.loads(out.read_text())
    jsonschema.validate(d, schema())
    rel = [r for r in d["path"] if r["stage"] == "relation"]
    assert [r["template"] for r in rel] == ["[X] means [MASK] .", "[X] is [MASK] .", "[X] [MASK] ."]
    best_rel = max(rel, key=lambda r: r["spearman"])
    prefix = [r for r in d["path"] if r["stage"] == "prefix"]
    scores = [best_rel["spearman"]] + [r["spearman"] for r in prefix]
    assert scores == sorted(scores) and len(set(scores)) == len(scores)  # each accepted step improves
    for r in prefix:
        assert r["template"].endswith(best_rel["template"].split("[X]", 1)[1])  # the relation is kept
    first, rest = d["templates"][0], d["templates"][1:]  # the answer first, marked; then the rest ranked
    assert first["chosen"] is True and not any(e.get("chosen") for e in rest)
    assert first["template"] + (" @" + first["readout"] if first.get("readout") else "") == d["x_chosen"]
    assert rest == sorted(rest, key=lambda e: -e["spearman"])
    assert "Searching for prefix tokens" in format_path(g.path)
    n = res.scored
    # re-running reuses every cached score
    scorer2 = Scorer(bert_enc, dataset=DATASET, cache=scorer.cache_path)
    res2 = run_strategy(Greedy(vocabulary=_vocab(tmp_path), max_steps=3, show_progress_bar=False, racing=None), scorer2,
                        out, "tiny")
    assert scorer2.n_scored == 0  # every score came from the cache
    # the stats count what the file holds, each template once, however often the run resumes
    assert (res2.scored, res2.cached) == (n, 0) and len(res2.entries) == n
    assert res2.best.template == res.best.template


def test_interrupted_run_keeps_scored_templates(scorer, bert_enc, tmp_path, monkeypatch):
    out = tmp_path / "best.json"
    from promptsearch.search.runner import Runner

    real = scorer.score
    calls = []

    # the model's own first, then a step's templates two at a time: stop in the second pair
    def flaky(ts, fresh=False, on_score=None):
        if len(calls) == 3:
            raise KeyboardInterrupt
        calls.extend(ts)
        return real(ts, fresh, on_score)

    monkeypatch.setattr(Runner, "CHUNK", 2)
    monkeypatch.setattr(scorer, "score", flaky)
    with pytest.raises(KeyboardInterrupt):
        run_strategy(Greedy(vocabulary=_vocab(tmp_path), show_progress_bar=False, racing=None), scorer, out, "tiny",
                     validate_top=0)
    d = load(out)
    assert {e["template"] + (" @" + e["readout"] if e.get("readout") else "") for e in d["templates"]} == {
        getattr(t, "text", t) for t in calls}
    s2 = Scorer(bert_enc, dataset=DATASET, cache=scorer.cache_path)
    assert all(s2.cached(t) is not None for t in calls)


def test_results_refuses_to_mix_runs_and_unwritable_out(tmp_path):
    out = tmp_path / "r.json"
    Results.open(out, "m", DATASET, "greedy", True).save()
    with pytest.raises(PromptSearchError, match="model='m'"):
        Results.open(out, "other", DATASET, "greedy", True)
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(PromptSearchError, match="cannot write .*a-file/x.json"):
        Results.open(tmp_path / "a-file" / "x.json", "m", DATASET, "greedy", True)


def test_the_scorer_keys_candidates_as_objects(scorer):
    """Text is read once into an Representation: a pooled key scores as its template and read-out apart (never
    denoised), the same whether given as text or as a key; a layer and an ensemble are scored by score() too."""
    from promptsearch.template import Template

    text = scorer.score("[X] @mean")
    key = scorer.score(Representation("[X]", readout="mean"))
    assert (text.template, text.readout, text.denoise, text.cached) == ("[X]", "mean", False, False)
    assert key.cached and key.spearman == text.spearman and key.entry_key == Representation("[X]", readout="mean")
    assert scorer.score(Template.parse(PAPER_T)).spearman == scorer.score(Representation(PAPER_T)).spearman
    # one kept copy
    assert scorer.similarities("[X] @mean") is scorer.similarities(Representation("[X]", readout="mean"))
    # a layer and an ensemble are scored by score too: as their layer view and their members' mean vectors do
    at2 = scorer.score(Representation(PAPER_T, 1))  # the tiny model's first of two layers
    assert (at2.layer == 1 and at2.key == f"{PAPER_T} @layer 1"
            and at2.spearman == scorer.at_layer(1).score(PAPER_T).spearman)
    both = Representation.ensemble([Representation(PAPER_T), Representation("[X]", readout="mean")])
    ens = scorer.score(both)
    assert ens.entry_key == both and ens.members == both.members and not ens.cached
    assert ens.spearman not in (text.spearman, scorer.score(PAPER_T).spearman)
    assert scorer.score([at2.entry_key, both])[1].spearman == ens.spearman  # in a list, as alone


def test_strategy_state_round_trips_as_typed_records(tmp_path):
    """What strategies leave besides scores is written and read back as the same typed records; another
    tool's x_ field is kept as it was; a record of the wrong shape is a one-line schema error."""
    from promptsearch.search.state import Generated, ParetoFront, PathStep, RaceState, Spread, StudyRef, Verdict

    out = tmp_path / "r.json"
    res = Results.open(out, "m", DATASET, "optuna", True)
    own, paper = Representation("[X]", readout="mean"), Representation("[X] means [MASK] .")
    res.baseline = Verdict(own, 70.5, best=paper, best_spearman=71.0, gain=0.5, se=0.2, min_gain=0.2, kept=False)
    res.spread = Spread(n=3, min=60.0, median=70.5, max=71.0, own=70.5, own_rank=2)
    res.study = StudyRef("sqlite:///s.db", "s", finished=7, pruned=2)
    res.pareto = ParetoFront([paper, own])
    res.generated = Generated(distinct=12, pairs_used=30, kept=5)
    members = (Representation("[X] means [MASK] ."), Representation("[X] is [MASK] .", 2),
               Representation("[X]", readout="mean"))
    res.path_steps = [PathStep("relation:best", 0, "[X] means [MASK] .", 71.0, candidates=4),
                      PathStep("ensemble", 1, "[X] @mean", 72.0, members=members, taken=True)]
    res.races["r1"] = RaceState(dropped=[{"template": "[X] is [MASK] .", "rung": 12}],
                                contenders=["[X] means [MASK] ."], rungs_done=1)
    res.extras["x_other"] = {"kept": [1, 2]}
    res.chosen = res.add(Score(Representation.ensemble(m.without_layer for m in members).text, 72.0, True, 0.0,
                               members=members)).entry_key
    res.save()
    back = Results.load(out)
    for name in ("chosen", "baseline", "spread", "study", "pareto", "generated", "path_steps", "races", "extras",
                 "entries"):
        assert getattr(back, name) == getattr(res, name), name
    d = json.loads(out.read_text())
    assert d["x_pareto"] == ["[X] means [MASK] .", "[X] @mean"]  # keys in the code, their text in the file
    assert d["x_races"] == {"r1": {"known": [], "dropped": [{"template": "[X] is [MASK] .", "rung": 12}],
                                   "contenders": ["[X] means [MASK] ."], "rungs_done": 1}}  # unset fields left out
    assert (d["x_baseline"]["key"], d["x_baseline"]["best"]) == ("[X] @mean", "[X] means [MASK] .")
    # an ensemble's members are keys in the code and their text in the file
    texts = ["[X] means [MASK] .", "[X] is [MASK] . @layer 2", "[X] @mean"]
    assert d["path"][1]["members"] == texts and [e for e in d["templates"] if e.get("members")][0]["members"] == texts
    ens = next(e for e in back.entries.values() if e.members)
    assert ens.members == members and ens.key == " + ".join(texts) and back.path_steps[1].key == ens.key
    assert back.chosen == ens.entry_key and d["x_chosen"] == ens.key
    assert list(back.entries) == [ens.entry_key] and back.baseline.key == own  # keys as objects, not their text
    d["x_spread"] = {"n": 3}
    out.write_text(json.dumps(d))
    with pytest.raises(PromptSearchError, match=r"schema.*x_spread.*'min'"):
        Results.load(out)


@pytest.mark.parametrize("content, message", [
    ({"relations": [], "prefix_tokens": ["This"]}, "'relations' must be a non-empty list"),
    ({"relations": ["means"]}, "'prefix_tokens' must be a non-empty list"),
    ({"relations": ["[MASK]"], "prefix_tokens": ["a"]}, "must not contain"),
])
def test_bad_vocabulary(tmp_path, content, message):
    from promptsearch.search.greedy import load_vocabulary
    p = tmp_path / "v.json"
    p.write_text(json.dumps(content))
    with pytest.raises(PromptSearchError, match=message):
        load_vocabulary(str(p))


@pytest.mark.parametrize("content, message", [
    ({"slots": {}}, "needs a 'format' string"),
    ({"format": "{a} [X] [MASK]", "slots": {"a": []}}, "slot 'a' used in the format needs a non-empty list"),
    ({"format": "{a} [MASK]", "slots": {"a": ["x"]}}, "does not make a valid template"),
    ({"format": "{a [X] [MASK]", "slots": {"a": ["x"]}}, "bad format string"),
    ("not json", "invalid JSON"),
])
def test_bad_grammar(tmp_path, content, message):
    p = tmp_path / "g.json"
    p.write_text(content if isinstance(content, str) else json.dumps(content))
    with pytest.raises(PromptSearchError, match=message):
        Grammar.load(str(p))


def test_shipped_grammar():
    g = Grammar.load()
    ts = list(g.all_templates())
    assert len(ts) == g.size and PAPER_T in ts and "[X] means [MASK] ." in ts


def test_a_template_and_itself_at_the_last_layer_are_scored_once(bert_enc, tmp_path):
    """`T` and `T @layer <last>` are one representation: asked together, uncached, they are encoded and cached once
    (not recorded twice as a template 'at two layers'), and both get its score."""
    scorer = Scorer(bert_enc, dataset=DATASET, cache=tmp_path / "cache.jsonl")
    last = bert_enc.prompt.n_layers
    t, at_last = scorer.score(["[X] means [MASK] .", f"[X] means [MASK] . @layer {last}"])
    alone = Scorer(bert_enc, dataset=DATASET, cache=tmp_path / "alone.jsonl")
    assert alone.score("[X] means [MASK] .").spearman == t.spearman == at_last.spearman
    assert scorer.n_scored == alone.n_scored == 1
    assert (tmp_path / "cache.jsonl").read_text().count("\n") == (tmp_path / "alone.jsonl").read_text().count("\n")
