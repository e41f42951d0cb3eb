"""Readers on the real shared files (../shared/data/sts)."""

import pytest

from promptsearch.data import TASKS, expand_tasks, load_corpus, load_task, read_sts_year
from promptsearch.errors import DataError
from promptsearch.paths import data_dirs

EXPECTED = {"sts12": 3108, "sts13": 1500, "sts14": 3750, "sts15": 3000, "sts16": 1186, "stsb": 1379, "sickr": 4927,
            "stsb-dev": 1500}


@pytest.mark.parametrize("task", list(EXPECTED))
def test_pair_counts_match_published_sizes(task):
    assert load_task(task).n_pairs == EXPECTED[task]


def test_sts16_skips_unscored_lines():
    d = read_sts_year("sts16")
    assert {k: len(v[2]) for k, v in d.subsets.items()} == {
        "answer-answer": 254, "headlines": 249, "plagiarism": 230, "postediting": 244, "question-question": 209}
    raw_lines = sum(1 for _ in open(data_dirs()[0] / "STS16-en-test" / "STS.input.postediting.txt", encoding="utf-8"))
    assert raw_lines == 3287  # most lines are unscored and were skipped
    assert all(0 <= y <= 5 for *_, ys in d.subsets.values() for y in ys)


def test_rows_are_parsed_into_the_right_fields():
    a, b, y = load_task("stsb-dev").subsets["dev"]
    assert (a[0], b[0], y[0]) == ("a man with a hard hat is dancing .", "a man wearing a hard hat is dancing .", 5.0)
    a, b, y = load_task("sickr").subsets["test"]
    assert a[0] == "There is no boy playing outdoors and there is no man smiling" and 1 <= min(y) and max(y) <= 5
    assert not any("\r" in s for s in a + b)  # CRLF file stripped


def test_data_dir_resolution(tmp_path, monkeypatch):
    sts, train = data_dirs()
    assert data_dirs(str(sts)) == (sts, sts.parent / "train")
    assert data_dirs(str(sts.parent)) == (sts.parent / "sts", sts.parent / "train")
    monkeypatch.setenv("PROMPTSEARCH_DATA_DIR", str(sts))
    assert data_dirs()[0] == sts
    with pytest.raises(DataError, match="does not exist"):
        data_dirs(str(tmp_path / "nope"))
    with pytest.raises(DataError, match="holds no STSBenchmark"):
        data_dirs(str(tmp_path))


def test_malformed_rows_name_file_and_line(tmp_path):
    (tmp_path / "STSBenchmark").mkdir()
    (tmp_path / "STSBenchmark" / "sts-dev.csv").write_text("g\tf\t2012\t1\t4.0\tone sentence\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"sts-dev.csv:1: expected 7"):
        load_task("stsb-dev", tmp_path)
    y = tmp_path / "STS12-en-test"
    y.mkdir()
    (y / "STS.input.x.txt").write_text("a\tb\nc\td\n", encoding="utf-8")
    (y / "STS.gs.x.txt").write_text("1.0\nabc\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"STS.gs.x.txt:2: .*'abc'"):
        load_task("sts12", tmp_path)


def test_task_expansion():
    assert expand_tasks("sts-all") == TASKS
    assert expand_tasks("stsb-dev, sickr") == ["stsb-dev", "sickr"]
    with pytest.raises(DataError, match="unknown task"):
        expand_tasks("sts17")


def test_a_task_by_another_name(tmp_path, monkeypatch):
    """The names tables print (STS-B, SICK-R), MTEB's (STSBenchmark) and "_" for "-" name the built-in sets; a
    mistyped alias is offered its fix; a folder of such a name where the command runs stays the user's data."""
    assert expand_tasks("STS-B, stsb_test, STSBenchmark, SICK-R, sick_test, stsb_dev, sts_all") == [
        "stsb", "sickr", "stsb-dev", *[t for t in TASKS if t not in ("stsb", "sickr")]]
    # the names' parts joined as the built-in names join them (a user's trial: STS-B-dev, sick-r-test, sts-12)
    assert expand_tasks("STS-B-dev, sick-r-test, sick_r_dev, sts-12, STS_B_train") == [
        "stsb-dev", "sickr", "sick-trial", "sts12", "stsb-train"]
    # each name exactly as a table prints it (score's header: "STS-B dev ([MASK] rows denoised)", held-out "SICK-R")
    assert expand_tasks("STS-B dev, SICK-R trial, STS-B test (original), sick-r train") == [
        "stsb-dev", "sick-trial", "stsb-original-test", "sick-train"]
    with pytest.raises(DataError, match=r"unknown task 'stsb-tset' \(did you mean 'stsb-test'\?\)"):
        expand_tasks("stsb-tset")
    from promptsearch.data.tasks import scoring_sets
    from promptsearch.errors import PromptSearchError

    with pytest.raises(PromptSearchError, match="test sets for reporting"):  # a group by any name is no dev set
        scoring_sets("sts_all")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "STSBenchmark").mkdir()  # a SentEval folder of the user's own
    (tmp_path / "stsb-test").mkdir()  # a built-in name as it was before: still the built-in set
    assert expand_tasks("STSBenchmark,stsb-test") == ["STSBenchmark", "stsb"]
    own = tmp_path / "stsbenchmark"  # the alias itself, lower-cased: the user's pairs, read as theirs
    own.mkdir(exist_ok=True)  # (one folder with the one above where names ignore case)
    (own / "pairs.csv").write_text("sentence1,sentence2,score\n" + "".join(f"a {i},b {i},{i % 5}\n" for i in range(12)),
                                   encoding="utf-8")
    got = load_task(expand_tasks("stsbenchmark")[0])
    assert sum(len(s[2]) for s in got.subsets.values()) == 12  # not the built-in test set's 1,379


def test_wikipedia_corpus():
    c = load_corpus()
    assert len(c) == 11914 and all(c)


def test_dev_sets_are_parsed_once_into_an_object_that_names_itself():
    """``dataset="stsb-dev, sick-trial"`` becomes a DevSets (names in order, written back as the results file and
    the cache record it); one already parsed passes through untouched; a test-set group is refused in one line."""
    from promptsearch.data import DevSets
    from promptsearch.errors import PromptSearchError

    sets = DevSets.parse("stsb-dev, sick-trial")
    assert sets.names == ("stsb-dev",
                          "sick-trial") and sets.text == str(sets) == "stsb-dev,sick-trial" and len(sets) == 2
    assert DevSets.parse(sets) is sets and list(sets) == ["stsb-dev", "sick-trial"]
    with pytest.raises(PromptSearchError, match="7 data sets"):
        DevSets.parse("sts-all")
