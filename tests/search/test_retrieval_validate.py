"""Held-out validation of a retrieval search on other retrieval sets: the STS searches' validation (``held_out``), so
every kind of search validates alike. The answer, the model's own and the search's best (and the ``top`` best) are
scored on each other set, each score the set's own ``RetrievalTask`` number; nothing it finds changes the answer."""

import dataclasses
import json

import pytest
from conftest import make_encoder, small_retrieval_data

from promptsearch.cli import main
from promptsearch.eval.retrieval import RetrievalTask
from promptsearch.search.retrieval import GreedyRetrieval, RetrievalResults, RetrievalSearch, summary


@pytest.fixture(scope="module")
def two():
    whole = small_retrieval_data(40, 150)
    ids = list(whole.queries)
    a = dataclasses.replace(whole, name="a", queries={q: whole.queries[q] for q in ids[:20]},
                            relevant={q: whole.relevant[q] for q in ids[:20]})
    b = dataclasses.replace(whole, name="b", queries={q: whole.queries[q] for q in ids[20:]},
                            relevant={q: whole.relevant[q] for q in ids[20:]})
    return a, b


def test_the_answer_the_own_and_the_best_are_scored_on_another_set_as_that_sets_task_scores_them(
        tiny_bert_encoder_only_dir, two, tmp_path):
    enc = make_encoder(tiny_bert_encoder_only_dir)
    a, b = two
    out = tmp_path / "r.json"

    def search(path):
        task = RetrievalTask(a, cache_dir=tmp_path / "c")
        res = RetrievalResults.for_task(path, "tiny", task, enc)
        return RetrievalSearch(task, enc, res, GreedyRetrieval(readouts=["cls"]))

    plain = search(None).run()  # no validation: the same answer
    said: list[str] = []
    res = search(out).run([RetrievalTask(b, cache_dir=tmp_path / "c")], validate_top=2, announce=said.append)
    assert res.best == plain.best and res.verdict == plain.verdict  # not search work
    top2 = [e.candidate for e in res.ranked()[:2]]
    validated = {c for c, e in res.entries.items() if e.validation}
    assert validated == {res.best, res.own, *top2}
    alone = RetrievalTask(b, cache_dir=tmp_path / "apart")
    for c in validated:
        assert res.entries[c].validation == {"b": round(alone.evaluate(enc, [c])[c]["ndcg@10"], 6)}
    assert res.validation["tasks"] == ["b"] and res.validation["top"] == 2 and res.validation["seconds"] >= 0
    assert said == [f"held-out validation: {len(validated)} candidates on b ({len(validated)} scores; not search work, "
                    "validate_top=0 skips it)"]
    back = RetrievalResults.load(out)  # the file keeps them
    assert back.validation == res.validation
    assert {c: e.validation for c, e in back.entries.items()} == {c: e.validation for c, e in res.entries.items()}
    lines = summary(back)
    i = lines.index("held-out sets (ndcg@10 on b: data the search did not search; not search work):")
    assert "(the answer" in lines[i + 1] and len(lines[i + 1:i + 1 + len(validated)]) == len(validated)
    assert lines[-1].startswith("chosen: ") and lines[-2].startswith("spread of the ")
    none = search(tmp_path / "z.json").run([RetrievalTask(b, cache_dir=tmp_path / "c")], validate_top=0)
    assert none.validation is None and not any(e.validation for e in none.entries.values())


def test_a_set_the_search_sees_or_one_named_twice_is_refused_in_one_line(tiny_bert_encoder_only_dir, tmp_path, capsys):
    from conftest import beir_folder

    a = beir_folder(tmp_path / "a", small_retrieval_data(10, 30))
    base = ["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(a),
            "--out", str(tmp_path / "r.json")]
    assert main([*base, "--validate-on", str(a)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "--validate-on a is the data --data searches (a): give sets the search does not " \
                                   "see" in err
    assert main([*base, "--validate-on", "demo,demo"]) == 2
    assert "--validate-on names stsb-paraphrase twice; give each set once" in capsys.readouterr().err
    assert main([*base, "--validate-top", "2"]) == 2  # K best of the search, on no set: refused, not ignored
    assert ("--validate-top 2 scores the search's best on --validate-on sets: give them too" in
            capsys.readouterr().err)
    assert main([*base, "--validate-on", "demo,"]) == 2
    assert "--validate-on 'demo,' names an empty set" in capsys.readouterr().err
    assert not (tmp_path / "r.json").exists()  # refused before anything was written
    assert main([*base, "--validate-on", str(a), "--validate-top", "0", "-q"]) == 0  # no validation: nothing checked
    assert "held-out sets" not in capsys.readouterr().out
    assert "validation" not in json.loads((tmp_path / "r.json").read_text())


def test_a_held_out_set_of_few_queries_is_said_to_say_little(tiny_bert_encoder_only_dir, tmp_path, capsys):
    """A helper's trial: --validate-on a 4-query set printed 1.0000 for both prompts with no word that one query moves
    its nDCG@10 by a quarter; the searched queries had such a note, the held-out ones none."""
    from conftest import beir_folder

    from promptsearch.cli.retrieval import few_held_out_note

    a = beir_folder(tmp_path / "a", small_retrieval_data(40, 60))
    small = beir_folder(tmp_path / "small", small_retrieval_data(4, 12))
    assert main(["retrieval", "--model", str(tiny_bert_encoder_only_dir), "--data", str(a), "--validate-on",
                 str(small), "--readouts", "cls", "--no-bf16", "--no-cache", "--out", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert ("note: held-out set small has only 4 queries: one query moves its nDCG@10 by up to 1/4, so differences "
            "between prompts there are mostly noise") in err, err
    assert few_held_out_note("b", 30) == "" and few_held_out_note("b", 1).startswith("note: held-out set b has only 1 "
                                                                                     "query: ")
