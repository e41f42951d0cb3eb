"""Racing for retrieval: the greedy document step screens document prompts on a smaller corpus (every judged document
and a share of the others), drops the ones clearly behind and halves the rest; only those left are encoded over the
whole corpus, and a resumed run races the same way."""

import pytest
from conftest import FakeRetrievalTask, make_encoder, small_retrieval_data

from promptsearch.errors import DataError, PromptSearchError
from promptsearch.eval.retrieval import RetrievalCandidate, RetrievalTask, screening_corpus
from promptsearch.search.retrieval import CorpusRace, GreedyRetrieval, RetrievalResults, RetrievalSearch, summary

N = 400


@pytest.fixture(scope="module")
def enc(tiny_bert_encoder_only_dir):
    return make_encoder(tiny_bert_encoder_only_dir)


def results(path=None):
    return RetrievalResults.open(path, "tiny", {"name": "fake", "fingerprint": "f" * 16, "queries": N, "corpus": 100},
                                 "fp32", {"model": "abc"})


def bonus(c):
    """Every query prompt clearly worse than none (the query step keeps the own); among the document prompts,
    search_document: best, title: … within the noise of it, passage: far behind."""
    doc = {"search_document: ": 0.03, "title: none | text: ": 0.029, "passage: ": -0.2}.get(c.document, 0.0)
    return doc - (0.1 if c.query else 0.0)


def test_a_document_prompt_clearly_behind_is_dropped_and_the_rest_halved(enc, tmp_path):
    task = FakeRetrievalTask(bonus, n=N, wobble=0.05)
    out = tmp_path / "r.json"
    res = RetrievalSearch(task, enc, results(out), GreedyRetrieval(readouts=["cls"], racing=CorpusRace(keep=0.3))).run()
    doc = next(s for s in res.steps if s["stage"] == "document")
    race = doc["race"]
    assert race["screened"] == 3 and race["documents"] == 10
    why = {d["document"]: d["why"] for d in race["dropped"]}
    # passage: is ~0.23 behind (many standard errors); title: ~0.001 behind, within the noise, goes out by halving
    # (ceil(0.3 x 3) = 1 goes on: the screen's best)
    assert why == {"passage: ": "behind", "title: none | text: ": "halving"}
    assert res.best == RetrievalCandidate.of("", "search_document: ", "mean") and doc["taken"]
    full = {c.document for c in task.scored}
    assert "passage: " not in full and "title: none | text: " not in full  # never scored on the whole corpus
    assert not any(c.document in ("passage: ", "title: none | text: ") for c in res.entries)
    screened = {c.document for c in task.screens[0].scored}
    assert screened == {"", "passage: ", "search_document: ", "title: none | text: "}  # the lead screened too
    assert [s.get("race") is None for s in res.steps] == [True, False, True]  # the query and read-out steps: no race
    assert res.stats["screened_out"] == 2
    assert "(2 of 3 document prompts dropped by racing on 10 documents)" in "\n".join(summary(res))
    again = FakeRetrievalTask(bonus, n=N, wobble=0.05)
    greedy = GreedyRetrieval(readouts=["cls"], racing=CorpusRace(keep=0.3))
    res2 = RetrievalSearch(again, enc, results(out), greedy).run()
    assert again.scored == [] and res2.steps == res.steps  # resumed: nothing scored again, the same race
    assert not again.screens and res2.stats["screened_out"] == 2  # its decision read back: no screen encoded again
    # the file's time is its runs' (a rerun with nothing to do had kept only its own): this run's, and in all of them
    first = res.stats
    assert (first["runs"], res2.stats["runs"]) == (1, 2) and res2.stats["scored_now"] == 0
    assert res2.stats["seconds_all_runs"] == pytest.approx(first["seconds"] + res2.stats["seconds"], abs=0.002)


def test_without_a_race_every_document_prompt_is_scored_on_the_whole_corpus(enc):
    task = FakeRetrievalTask(bonus, n=N, wobble=0.05)
    res = RetrievalSearch(task, enc, results(), GreedyRetrieval(readouts=["cls"])).run()
    assert {"passage: ", "title: none | text: "} <= {c.document for c in res.entries} and not task.screens
    assert res.best == RetrievalCandidate.of("", "search_document: ", "mean")  # the same answer as the race's


def test_the_screening_corpus_holds_every_judged_document_and_a_seeded_share_of_the_rest():
    data = small_retrieval_data(20, 200)
    judged = {d for ds in data.relevant.values() for d in ds}
    others = len(data.corpus) - len(judged)
    sub = screening_corpus(data, 0.1, seed=0)
    assert judged <= set(sub.corpus) and len(sub.corpus) == len(judged) + round(0.1 * others)
    assert list(sub.corpus) == [d for d in data.corpus if d in sub.corpus]  # corpus order kept
    assert sub.queries == data.queries and sub.relevant == data.relevant
    assert screening_corpus(data, 0.1, seed=0).corpus == sub.corpus  # seeded
    assert screening_corpus(data, 0.1, seed=1).corpus != sub.corpus
    assert screening_corpus(data, 1.0) is data
    with pytest.raises(DataError, match="race_share=1.5"):
        screening_corpus(data, 1.5)
    with pytest.raises(PromptSearchError, match="race_share=0"):
        CorpusRace(0)


def test_a_real_race_records_the_screens_numbers_and_saves_corpus_passes(enc, tmp_path):
    data = small_retrieval_data(24, 300)
    task = RetrievalTask(data, cache_dir=tmp_path / "c")
    res = RetrievalSearch(task, enc, results(), GreedyRetrieval(readouts=["cls"], racing=CorpusRace())).run()
    race = next(s for s in res.steps if s["stage"] == "document")["race"]
    assert race["screened"] == 3 and race["documents"] < len(data.corpus) / 2
    # the screen's numbers are the task's on the smaller corpus (recomputed here apart)
    sub = RetrievalTask(screening_corpus(data, 0.1, 0), cache_dir=tmp_path / "apart")
    for d in race["dropped"]:
        c = RetrievalCandidate.from_json(d)
        assert round(sub.evaluate(enc, [c])[c]["ndcg@10"], 6) == d["ndcg"]
        assert c not in res.entries
    assert race["dropped"]  # at least one: half of the three at most go on
    # each dropped document prompt is one whole-corpus pass saved against the same search without a race
    plain = RetrievalTask(data, cache_dir=tmp_path / "plain")
    RetrievalSearch(plain, enc, results(), GreedyRetrieval(readouts=["cls"])).run()
    assert plain.corpus_passes - task.corpus_passes == len(race["dropped"])
    assert task.screen(0.1, 0).corpus_passes == 4  # the lead's prompt and the three others, on the screen
    # the screened share the lead's query side, whose vectors the query step made: the screen encodes no queries
    assert task.screen(0.1, 0).query_encodings == 0 and task.screen(0.1, 0)._queries is task._queries
    task.close()


def test_candidates_a_file_already_scored_are_weighed_even_when_the_race_drops_them(enc, tmp_path):
    out = tmp_path / "r.json"
    RetrievalSearch(FakeRetrievalTask(bonus, n=N, wobble=0.05), enc, results(out),
                    GreedyRetrieval(readouts=["cls"])).run()  # no race: every document prompt on the whole corpus
    task = FakeRetrievalTask(bonus, n=N, wobble=0.05)
    res = RetrievalSearch(task, enc, results(out), GreedyRetrieval(readouts=["cls"], racing=CorpusRace(keep=0.3))).run()
    doc = next(s for s in res.steps if s["stage"] == "document")
    assert task.scored == [] and len(doc["race"]["dropped"]) == 2  # nothing scored again; the race drops two ...
    assert doc["candidates"] == 4  # ... whose whole-corpus scores, already in the file, the step still weighs


def test_no_race_where_the_smaller_corpus_would_not_be_small(enc, tmp_path):
    """On a corpus of few documents besides the judged ones, the screen would hold most of it: screening four
    candidates there costs about what dropping two saves, so the step scores every document prompt on the whole corpus
    and says why once."""
    data = small_retrieval_data(12, 40)
    said: list[str] = []
    race = CorpusRace()
    task = RetrievalTask(data, cache_dir=tmp_path / "c")
    screen = len(task.screen(race.share, race.seed).corpus_ids)
    assert screen > race.most * len(data.corpus)  # the judged documents alone are more than a quarter
    greedy = GreedyRetrieval(readouts=["cls"], racing=race)
    res = RetrievalSearch(task, enc, results(), greedy, progress=said.append).run()
    doc = next(s for s in res.steps if s["stage"] == "document")
    assert "race" not in doc and res.stats["screened_out"] == 0 and res.stats["screen_passes"] == 0
    assert {c.document for c in res.entries} >= {"passage: ", "search_document: ", "title: none | text: "}
    assert [line for line in said if "racing" in line] == [
        f"  racing: none, its smaller corpus would hold {screen:,} of the {len(data.corpus):,} documents, more than "
        "25% (the judged ones and race_share= of the rest): a screen would cost about what it saves"]
    task.close()
