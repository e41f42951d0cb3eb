"""Racing greedy, screening precision and held-out validation (issue 13) — real STS data."""

import json

import jsonschema
import numpy as np
import pytest
from conftest import CLI_DEVICE, PAPER_T, REPO, make_encoder, write_vocab

from promptsearch.cli import main
from promptsearch.encoding.encoder import PromptStates
from promptsearch.search import Results, Score, Scorer, run_strategy
from promptsearch.search.greedy import Greedy
from promptsearch.search.progressive import score_progressive
from promptsearch.search.racing import Racing, race
from promptsearch.search.results import SCHEMA_ID, load, schema

DATASET = "sts16"  # 1,186 real pairs


class Synthetic:
    """A stand-in screening encoder whose vectors give each template a chosen quality: the angle
    between a pair's two vectors follows the gold score plus Gaussian noise of the template's size."""

    precision = "synthetic"

    def __init__(self, scorer, noise: dict[str, float]):
        ev, rng = scorer.evaluator, np.random.default_rng(0)
        self.index = {s: i for i, s in enumerate(scorer.sentences)}
        self.vecs = {}
        for t, sigma in noise.items():
            angle = np.full(len(scorer.sentences), np.nan)
            for a, b, y in zip(ev.ia, ev.ib, ev.gold):
                if np.isnan(angle[a]):
                    angle[a] = rng.uniform(0, 2 * np.pi)
                if np.isnan(angle[b]):
                    angle[b] = angle[a] + (1 - y / 5) * np.pi / 2 + sigma * rng.standard_normal()
            self.vecs[t] = np.stack([np.cos(angle), np.sin(angle)], 1).astype(np.float32)
        self.calls = 0

    def template_states(self, sentences, templates, denoise=True, show_progress_bar=None):
        self.calls += 1
        vs = [self.vecs[t][[self.index[s] for s in sentences]] for t in templates]
        return [PromptStates(raw=v, bias=np.zeros_like(v)) for v in vs]


def test_race_keeps_the_clear_best_and_drops_a_clear_loser_at_the_first_rung(bert_enc, monkeypatch):
    scorer = Scorer(bert_enc, dataset=DATASET, cache=False)
    noise = {"[X] best [MASK] .": 0.05, "[X] worst [MASK] .": 50.0,
             **{f"[X] middling{i} [MASK] .": 0.5 + 0.05 * i for i in range(8)}}
    syn = Synthetic(scorer, noise)
    scorer.screening_encoder = syn
    full = {t: scorer.evaluator.spearman(v) for t, v in syn.vecs.items()}
    assert max(full, key=full.get) == "[X] best [MASK] ."  # the construction: one clearly best ...
    # ... one useless
    assert full["[X] best [MASK] ."] - sorted(full.values())[-2] > 10 and full["[X] worst [MASK] ."] < 10
    def full_score(t):  # a full-set score from the construction, as Scorer.score gives it (one, or a list)
        return [Score(x, full[x], True, 0.0) for x in t] if isinstance(t, list) else Score(t, full[t], True, 0.0)

    monkeypatch.setattr(scorer, "score", full_score)
    racing = Racing()
    out = race(scorer, list(noise), racing)
    first_rung = round(racing.fractions[0] * scorer.evaluator.n_pairs)
    assert "[X] best [MASK] ." in [s.template for s in out.scores]  # the true best reaches the full set
    assert len(out.scores) <= racing.finalists
    dropped = {d["template"]: d["rung"] for d in out.dropped}
    assert dropped["[X] worst [MASK] ."] == first_rung  # out at the first rung
    assert set(dropped) | {s.template for s in out.scores} == set(noise)  # every candidate accounted for
    # work: far less than scoring all ten on the full set (the finalists' full scores come on top)
    assert out.encodings < 0.4 * len(noise)


def test_the_racing_rule_is_a_pure_function_of_rung_scores():
    # two candidates' similarities on a rung's pairs, and their gold: the rule alone decides
    rng = np.random.default_rng(0)
    gold = rng.uniform(0, 5, 400)
    sims = {"good": gold + rng.normal(0, 0.3, 400), "noise": rng.normal(0, 1, 400),
            "ok": gold + rng.normal(0, 1.5, 400), "tie": gold + rng.normal(0, 1.5, 400)}
    racing = Racing(finalists=1)
    keep, dropped = racing.decide(sims, gold)
    assert keep[0] == "good" and "noise" in dropped  # clearly behind: out
    assert len(keep) <= max(racing.finalists, -(-len(sims) // 2))  # successive halving's cap
    assert sorted(keep + dropped) == sorted(sims)
    assert racing.decide(sims, gold) == (keep, dropped)  # deterministic: same resamples
    # the leader itself never counts as behind, even alone
    assert Racing().decide({"only": sims["good"]}, gold) == (["only"], [])


_vocab = write_vocab


def test_recorded_scores_never_come_from_the_screening_precision(tiny_bert_dir, tmp_path):
    enc = make_encoder(tiny_bert_dir, bf16=False)
    cache = tmp_path / "cache.jsonl"
    scorer = Scorer(enc, dataset=DATASET, cache=cache, screening="int8")
    g = Greedy(vocabulary=_vocab(tmp_path), max_steps=2, show_progress_bar=False)
    res = run_strategy(g, scorer, tmp_path / "best.json", "tiny", validate_top=0)
    assert scorer.screening_encoder.precision == "int8" and scorer.screening_encoder is not enc
    reference = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset=DATASET, cache=False)
    screen = Scorer(scorer.screening_encoder, dataset=DATASET, cache=False)
    differs = 0
    for e in res.entries.values():
        ref = reference.score(e.key).spearman
        assert e.spearman == pytest.approx(ref, abs=1e-4)  # results round to 4 decimals
        differs += abs(screen.score(e.key).spearman - ref) > 1e-3
    assert differs  # int8 numbers are other numbers: had any been recorded, the check above would see it
    for r in g.path:
        assert r.spearman == pytest.approx(reference.score(r.template).spearman, abs=1e-4)
    keys = [json.loads(json.loads(line)["key"]) for line in cache.read_text().splitlines()]
    assert keys and all("fp32" in k and "int8" not in k for k in keys)  # the cache holds reference scores only
    d = load(tmp_path / "best.json")
    by_precision = d["stats"]["encodings_by_precision"]
    assert by_precision["int8"] > 0 and by_precision["fp32"] >= len(res.entries)


def test_resume_mid_race_reaches_the_same_path(tiny_bert_dir, tmp_path):
    vocab = _vocab(tmp_path)

    def run(where, interrupt_at=None):
        enc = make_encoder(tiny_bert_dir, bf16=False)
        real, calls = enc.template_states, [0]

        def flaky(*a, **kw):
            calls[0] += 1
            if calls[0] == interrupt_at:
                raise KeyboardInterrupt
            return real(*a, **kw)

        enc.template_states = flaky
        scorer = Scorer(enc, dataset=DATASET, cache=where / "cache.jsonl")
        g = Greedy(vocabulary=vocab, max_steps=3, show_progress_bar=False)
        run_strategy(g, scorer, where / "best.json", "tiny", validate_top=0)
        return g.path, calls[0]

    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    path, n_calls = run(tmp_path / "a")
    assert any(r.dropped for r in path)  # the race did drop candidates
    # interrupt inside the first prefix step's race (the relation step takes the first few calls)
    at = n_calls // 2
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "b", interrupt_at=at)
    state = load(tmp_path / "b" / "best.json")["x_races"]
    assert state  # the race's progress was saved
    resumed, _ = run(tmp_path / "b")
    assert resumed == path


def test_schema_v2_validates_and_a_v1_file_still_loads_and_resumes(tmp_path):
    old = json.loads((REPO / "docs" / "results" / "greedy-default.json").read_text())
    # the same run as a /1 file: no encodings stats, no validation
    old["schema"] = "promptsearch.results/1"
    for k in ("encodings", "encodings_by_precision"):
        old["stats"].pop(k, None)
    old.pop("validation", None)
    for e in old["templates"]:
        e.pop("validation", None)
    p = tmp_path / "old.json"
    p.write_text(json.dumps(old))
    assert load(p)["templates"]  # still readable
    res = Results.open(p, old["model"], old["dataset"], old["strategy"], old["denoise"], old["settings"])
    res.save()
    d = load(p)
    assert d["schema"] == SCHEMA_ID and len(d["templates"]) == len(old["templates"])
    jsonschema.validate(d, schema())
    d["templates"][0]["validation"] = {"stsb": 101.0}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(d, schema())


def test_held_out_validation_is_the_evaluation_and_is_printed(tiny_bert_dir, tmp_path, capsys):
    out = tmp_path / "best.json"
    argv = ["greedy", "--model", str(tiny_bert_dir), "--dataset", DATASET, "--vocabulary", _vocab(tmp_path),
            "--max-steps", "1", "--out", str(out), "--cache", str(tmp_path / "c.jsonl"), "-q", "--no-bf16",
            "--validate-top", "2", "--validate-on", "sts13,sickr"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    d = load(out)
    jsonschema.validate(d, schema())
    assert {k: v for k, v in d["validation"].items() if k != "seconds"} == {"tasks": ["sts13", "sickr"], "top": 2}
    assert d["validation"]["seconds"] >= 0 and "held-out validation" in printed  # its time, apart from the search's
    ranked = d["templates"]
    held = [e for e in ranked if "validation" in e]
    # all considered, not the finalists
    assert [r["candidates"] for r in d["path"] if r["stage"] == "relation:best"] == [4]
    path_templates = {r["template"] for r in d["path"] if r["stage"] in ("relation:best", "prefix")}

    def key(e):
        return e["template"] + (" @" + e["readout"] if e.get("readout") else "")

    # the best two, the path, the model's own representation and the chosen answer
    assert {key(e) for e in held} == {key(e) for e in ranked[:2]} | path_templates | {"[X] @mean", d["x_chosen"]}
    from promptsearch.encoding.reps import rep_from_key
    from promptsearch.eval import evaluate_reps

    enc = make_encoder(tiny_bert_dir, device=CLI_DEVICE, bf16=False)  # the device and precision the command used
    for e in held:
        r = rep_from_key(key(e), denoise=True)
        want = evaluate_reps(enc, [r], ["sts13", "sickr"])[r]
        assert e["validation"] == {t: pytest.approx(want[t]["spearman"], abs=1e-4) for t in ("sts13", "sickr")}
        assert f"{e['validation']['sickr']:.2f}" in printed
    assert "STS13" in printed.splitlines()[0] and "full-set encodings" in printed  # as tables name it


def test_no_racing_scores_every_candidate(tiny_bert_dir, tmp_path):
    out = tmp_path / "best.json"
    assert main(["greedy", "--model", str(tiny_bert_dir), "--dataset", DATASET, "--vocabulary", _vocab(tmp_path),
                 "--max-steps", "1", "--out", str(out), "--no-cache", "-q", "--no-bf16", "--validate-top", "0",
                 "--no-racing"]) == 0
    d = load(out)
    assert len([r for r in d["path"] if r["stage"] == "relation"]) == 4
    assert d["settings"]["racing"] is None and "validation" not in d
    n = d["stats"]["scored"]
    assert d["stats"]["encodings"] == pytest.approx(n)  # one full-set encoding per template scored


def test_pruning_rungs_screen_in_int8_but_the_full_score_is_the_reference(tiny_bert_dir, tmp_path):
    """Optuna's progressive scoring with a screening precision: partial rungs in int8, the last one
    the reference precision's one-pass score (and only that is cached)."""
    cache = tmp_path / "c.jsonl"
    scorer = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset=DATASET, cache=cache, screening="int8")
    steps = list(score_progressive(scorer, PAPER_T, [100, 300]))
    assert [n for n, _ in steps] == [100, 300, 1186]
    reference = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset=DATASET, cache=False).score(PAPER_T).spearman
    assert steps[-1][1] == pytest.approx(reference, abs=1e-9)
    assert scorer.work["int8"] > 0 and scorer.work["fp32"] == 1.0
    keys = [json.loads(json.loads(line)["key"]) for line in cache.read_text().splitlines()]
    assert len(keys) == 2 and all("fp32" in k for k in keys)  # raw + denoised, reference precision only


def test_a_rung_reports_progress_as_its_candidates_are_encoded(tiny_bert_dir):
    """The bar used to sit at 0/16 for a whole rung: now it moves every few candidates within one."""
    scorer = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset=DATASET, cache=False)
    templates = [f"[X] {r} [MASK] ." for r in ("means", "is", "like", "says", "shows", "of", "is like", "equals", "a")]
    calls = []
    race(scorer, templates, Racing(fractions=(0.25, 0.5), finalists=2), progress=lambda *a: calls.append(a))
    first = [(n, total) for label, n, total in calls if label.startswith("rung 1/")]
    assert first[0] == (0, 9) and (4, 9) in first and first[-1] == (9, 9)  # 0, then every PROGRESS_CHUNK, then all


def test_a_run_whose_scores_all_come_from_the_cache_says_where_its_time_went(tiny_bert_dir, tmp_path):
    """From a new user's trial: a greedy run whose every full score came from the score cache said "scored 0
    templates in 317s (all cached)" while its races had encoded for minutes. Its stats line now says no template was
    scored in full, how many came from the cache, and that the time went to racing the rest on parts of the data
    (the candidates a race drops have no full score to cache, so a second run races them again)."""
    vocab = _vocab(tmp_path)

    def run(out):
        scorer = Scorer(make_encoder(tiny_bert_dir, bf16=False), dataset=DATASET, cache=tmp_path / "cache.jsonl")
        g = Greedy(vocabulary=vocab, max_steps=3, show_progress_bar=False)
        return g, run_strategy(g, scorer, out, "tiny", validate_top=0)

    g, first = run(tmp_path / "first.json")
    assert any(r.dropped for r in g.path) and first.scored > 0  # the race dropped some: they have no full score
    assert f"scored {first.scored} templates in" in first.format_stats()
    _, again = run(tmp_path / "again.json")
    line = again.format_stats()
    assert again.scored == 0 and again.cached == len(again.entries) > 0 and again.seconds > 0, line
    assert f"scored no template in full: {again.cached} came from the cache and " in line, line
    assert "s racing the rest on parts of the data" in line and "scored 0" not in line, line
