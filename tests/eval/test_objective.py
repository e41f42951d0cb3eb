"""Several dev sets as one objective (issue 21, item 1): built-in splits, mean/min, per-set scores,
per-set caching, racing over groups, and the CLI."""

import json

import numpy as np
import pytest

from promptsearch.data import expand_tasks, load_task
from promptsearch.eval.objective import Objective, combine, grouped_spearman
from promptsearch.eval.sts import STSEvaluator
from promptsearch.search import Scorer
from promptsearch.search.racing import Racing

T = 'This sentence : "[X]" means [MASK] .'


def test_builtin_dev_splits_by_name():
    assert expand_tasks("sick-trial,sick-train,stsb-train") == ["sick-trial", "sick-train", "stsb-train"]
    assert [load_task(n).n_pairs for n in ("sick-trial", "sick-train", "stsb-train")] == [500, 4500, 5749]


def test_one_set_objective_is_that_sets_evaluator():
    ev = STSEvaluator(load_task("sick-trial"))
    obj = Objective({"sick-trial": ev})
    assert obj.sentences == ev.sentences and (obj.ia == ev.ia).all() and (obj.ib == ev.ib).all()
    vecs = np.random.default_rng(0).normal(size=(len(ev.sentences), 8))
    assert obj.spearman(vecs) == ev.spearman(vecs)
    pairs = np.arange(0, 500, 3)
    assert obj.spearman(vecs, pairs) == ev.spearman(vecs, pairs)


def test_two_sets_share_sentences_and_score_each_as_alone():
    a, b = STSEvaluator(load_task("sick-trial")), STSEvaluator(load_task("sts16"))
    obj = Objective({"sick-trial": a, "sts16": b}, "min")
    assert len(obj.sentences) == len(set(a.sentences) | set(b.sentences)) and obj.n_pairs == a.n_pairs + b.n_pairs
    vecs = np.random.default_rng(1).normal(size=(len(obj.sentences), 8))
    index = {s: i for i, s in enumerate(obj.sentences)}
    alone = {n: ev.spearman(vecs[[index[s] for s in ev.sentences]]) for n, ev in (("sick-trial", a), ("sts16", b))}
    assert obj.scores(vecs) == alone  # each set's number is exactly what that set alone gives
    assert obj.spearman(vecs) == min(alone.values())
    assert Objective({"sick-trial": a, "sts16": b}).spearman(vecs) == pytest.approx(np.mean(list(alone.values())),
                                                                                    abs=1e-12)


def test_combine_skips_undefined_sets():
    assert combine([10.0, float("nan"), 30.0]) == 20.0 and combine([10.0, 30.0], "min") == 10.0
    assert np.isnan(combine([float("nan")]))


def test_racing_rule_over_groups_follows_the_objective():
    """Candidate "spiky" is perfect on set 0 and anti-correlated on set 1; "even" is decent on both.
    Pooled (one group) spiky leads; by the mean or the min per set, even leads."""
    rng = np.random.default_rng(0)
    gold = np.concatenate([np.arange(200.0), np.arange(40.0)])
    groups = np.r_[np.zeros(200, int), np.ones(40, int)]
    spiky = np.concatenate([gold[:200], -gold[200:]])
    even = gold + rng.normal(0, 30, size=len(gold))
    sims = {"spiky": spiky, "even": even}
    assert grouped_spearman(spiky, gold) > grouped_spearman(even, gold)
    assert grouped_spearman(even, gold, groups, "min") > grouped_spearman(spiky, gold, groups, "min")
    r = Racing(finalists=1, keep=0.5)
    assert r.decide(sims, gold)[0] == ["spiky"]
    assert r.decide(sims, gold, 0, groups, "mean")[0] == ["even"]
    assert r.decide(sims, gold, 0, groups, "min")[0] == ["even"]


def test_scorer_objective_records_each_set_and_caches_them_apart(bert_enc, tmp_path):
    cache = tmp_path / "c.jsonl"
    both = Scorer(bert_enc, dataset="sick-trial,sts16", cache=cache)
    s = both.score(T)
    assert set(s.sets) == {"sick-trial", "sts16"}
    assert s.spearman == pytest.approx(np.mean(list(s.sets.values())), abs=1e-12)
    lines = [json.loads(x) for x in cache.read_text().splitlines()]
    assert len(lines) == 4  # raw and denoised, each set
    # a single-set scorer finds its set's score in the cache: the number the objective used
    one = Scorer(bert_enc, dataset="sts16", cache=cache)
    hit = one.score(T)
    assert hit.cached and hit.spearman == s.sets["sts16"] and hit.sets is None
    worst = Scorer(bert_enc, dataset="sick-trial,sts16", cache=cache, objective="min").score(T)
    assert worst.cached and worst.spearman == min(s.sets.values())


def test_cli_search_on_two_sets_writes_each_sets_score(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    out = tmp_path / "best.json"
    argv = ["score", T, "[X] means [MASK] .", "--model", str(tiny_bert_dir), "--dataset", "sick-trial,sts16",
            "--objective", "min", "--out", str(out), "--no-cache", "-q", "--no-bf16", "--validate-top", "0"]
    assert main(argv) == 0
    d = json.loads(out.read_text())
    assert d["dataset"] == "sick-trial,sts16" and d["settings"]["objective"] == "min"
    for e in d["templates"]:
        assert set(e["sets"]) == {"sick-trial", "sts16"} and e["spearman"] == pytest.approx(min(e["sets"].values()),
                                                                                            abs=1e-4)
    # resuming the file with another objective is refused, and the file is left as it was
    before = out.read_bytes()
    capsys.readouterr()
    assert main(argv[:-7] + ["--objective", "mean", "--out", str(out), "--no-cache", "-q", "--no-bf16"]) == 2
    assert "--objective" in capsys.readouterr().err and out.read_bytes() == before


def test_cli_unknown_scoring_set_is_one_line(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    out = tmp_path / "best.json"
    code = main(["score", T, "--model", str(tiny_bert_dir), "--dataset", "stsb-dev,sick-dev", "--out", str(out), "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "unknown task 'sick-dev'" in err and "\n" not in err and not out.exists()


# ---- decisions that respect noise (item 2) ---------------------------------------------------------
def test_gain_is_the_objectives_difference_with_a_paired_bootstrap_error():
    ev = STSEvaluator(load_task("sick-trial"))
    obj = Objective({"sick-trial": ev})
    rng = np.random.default_rng(0)
    before = ev.gold + rng.normal(0, 1.5, ev.n_pairs)
    assert obj.gain(before, before) == (0.0, 0.0)  # a template against itself: no gain, no noise
    after = ev.gold + rng.normal(0, 1.2, ev.n_pairs)
    gain, se = obj.gain(before, after)
    from promptsearch.eval.sts import spearman100

    assert gain == pytest.approx(spearman100(after, ev.gold) - spearman100(before, ev.gold), abs=1e-9)
    # the error of a difference measured on a quarter of the pairs is about twice as large (1/sqrt(n))
    quarter = Objective({"q": STSEvaluator(type(load_task("sick-trial"))("q", {"q": tuple(
        v[:125] for v in load_task("sick-trial").subsets["dev"])}))})
    _, se_q = quarter.gain(before[:125], after[:125])
    assert 1.4 < se_q / se < 2.8


def test_greedy_takes_a_step_only_above_its_noise(tiny_bert_dir, tmp_path):
    from conftest import write_vocab as _vocab

    from promptsearch.search import run_strategy
    from promptsearch.search.greedy import Greedy
    from tests.conftest import make_encoder

    enc = make_encoder(tiny_bert_dir, bf16=False)
    paths = {}
    for mg in ("auto", 0):
        scorer = Scorer(enc, dataset="sts16", cache=tmp_path / "c.jsonl")
        g = Greedy(vocabulary=_vocab(tmp_path), max_steps=4, show_progress_bar=False, racing=None, min_gain=mg,
                   readouts="none")
        res = run_strategy(g, scorer, tmp_path / f"best-{mg}.json", "tiny", validate_top=0)
        path = paths[mg] = res.path_steps
        prev = [r for r in path if r.stage == "relation:best"][0]
        for r in path:
            if r.stage not in ("prefix", "stop"):
                continue
            assert r.gain == pytest.approx(r.spearman - prev.spearman, abs=2e-4)
            assert r.min_gain == (r.se if mg == "auto" else 0) and r.se > 0
            assert (r.gain > r.min_gain) == (r.stage == "prefix")
            prev = r if r.stage == "prefix" else prev
        # the product is the path's end, not a noisier higher score (then the model's own unless it is beaten)
        assert res.baseline.best.text == prev.template and res.best.key in (prev.template, "[X] @mean")
    steps = {mg: [r.template for r in p if r.stage == "prefix"] for mg, p in paths.items()}
    assert steps["auto"] == steps[0][: len(steps["auto"])]  # the noise rule stops on the same path, no later


def test_cli_min_gain_must_be_auto_or_points(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    for bad in ("-1", "lots", "nan"):
        out = tmp_path / "best.json"
        code = main(["greedy", "--model", str(tiny_bert_dir), "--min-gain", bad, "--out", str(out), "-q"])
        err = capsys.readouterr().err.strip()
        assert code == 2 and "--min-gain" in err and "\n" not in err and not out.exists()


# ---- multi-objective Optuna (item 6) -----------------------------------------------------------
def test_pareto_study_writes_a_front_with_no_dominated_trial(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    g = tmp_path / "grammar.json"
    g.write_text(json.dumps({"format": "{prefix} [X] {relation} [MASK] .",
                             "slots": {"prefix": ["", "This sentence :", "A", "The text"],
                                       "relation": ["means", "is", "is like", "refers to"]}}), encoding="utf-8")
    out = tmp_path / "optuna.json"
    assert main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sick-trial,sts16", "--pareto", "--trials", "8",
                 "--grammar", str(g), "--seed", "0", "--out", str(out), "--no-cache", "-q", "--no-bf16",
                 "--validate-top", "0"]) == 0
    assert "Pareto front" in capsys.readouterr().out
    d = json.loads(out.read_text())
    # every entry, the model's own representation ('[X] @mean', scored first) too
    entries = {e["template"] + (" @" + e["readout"] if e.get("readout") else ""): (e["sets"]["sick-trial"],
                                                                                   e["sets"]["sts16"])
               for e in d["templates"]}
    front = set(d["x_pareto"])
    assert front and front <= set(entries)

    def dominates(a, b):
        return all(x >= y for x, y in zip(a, b)) and a != b

    for t in front:  # nobody beats a front template on both sets
        assert not any(dominates(v, entries[t]) for v in entries.values())
    for t in set(entries) - front:  # and everything off the front is beaten by someone
        assert any(dominates(v, entries[t]) for v in entries.values())


def test_pareto_needs_two_sets(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    out = tmp_path / "optuna.json"
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--pareto", "--out", str(out), "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--pareto" in err and "\n" not in err and not out.exists()
