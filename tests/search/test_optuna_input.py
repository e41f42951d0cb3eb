"""Bad input to the Optuna study and its storage (issue 46, items 4, 11, 15, 16, 22, 25): a study resumed
with other data or other trial options, storage URLs that are not a database's, refusals that left a
``.db`` or a RUNNING trial behind — each is one line with exit 2 that names the fix, and leaves every
file as it was."""

import json

import optuna
import pytest
from conftest import stsb_dev_csv as _pairs_csv
from optuna.trial import TrialState

from promptsearch.cli import main

GRAMMAR = {"format": "{prefix} [X] {relation} [MASK] .",
           "slots": {"prefix": ["", "This :", "So"], "relation": ["means", "is"]}}


@pytest.fixture
def grammar(tmp_path):
    p = tmp_path / "grammar.json"
    p.write_text(json.dumps(GRAMMAR))
    return str(p)


def _one_line(capsys, code, *words):
    err = capsys.readouterr().err
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert all(w in lines[0] for w in words), err
    return lines[0]



def _trials(storage, name="s"):
    return [(t.number, t.state, t.values) for t in optuna.load_study(study_name=name, storage=storage).trials]


def _optuna(tiny_bert_dir, grammar, tmp_path, *extra, out="o.json"):
    return ["optuna", "--model", str(tiny_bert_dir), "--grammar", grammar, "--storage",
            f"sqlite:///{tmp_path / 's.db'}", "--study-name", "s", "--out", str(tmp_path / out), "--no-cache", "-q",
            "--no-bf16", "--validate-top", "0", "--seed", "0", *extra]


def test_a_study_resumed_after_its_data_changed_is_refused(tiny_bert_dir, grammar, tmp_path, capsys):
    """4. The results file was deleted and the data changed: the study's trials (scores of the old data) were
    resumed and ranked. The study records what its numbers were computed with, as a results file does."""
    mine = _pairs_csv(tmp_path / "mine.csv", 0, 80)
    argv = _optuna(tiny_bert_dir, grammar, tmp_path, "--dataset", str(mine), "--trials", "3")
    assert main(argv) == 0
    storage = f"sqlite:///{tmp_path / 's.db'}"
    before = _trials(storage)
    capsys.readouterr()
    (tmp_path / "o.json").unlink()
    _pairs_csv(mine, 400, 480)
    _one_line(capsys, main(argv[:argv.index("--trials") + 1] + ["6"]), "other contents of", "--study-name")
    assert _trials(storage) == before  # no trial asked, none left running
    assert not (tmp_path / "o.json").exists()


def test_a_refused_pareto_leaves_no_database(tiny_bert_dir, tmp_path, capsys):
    """11. ``--pareto`` with one dev set was refused after the default storage (x.db beside --out) was made."""
    out = tmp_path / "x.json"
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--pareto", "--out", str(out), "-q"])
    _one_line(capsys, code, "--pareto", "--dataset")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_refusal_after_the_model_loads_leaves_no_database(tiny_bert_dir, tmp_path, capsys):
    """11. A refusal that needs the model (a grammar without [MASK] and no pooled read-out) came after the
    storage was opened: the SQLite file is made only when the search starts."""
    g = tmp_path / "g.json"
    g.write_text(json.dumps({"format": "{p} [X]", "slots": {"p": ["This sentence :", "The sentence :"]}}))
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--grammar", str(g), "--out",
                 str(tmp_path / "x.json"), "-q", "--no-bf16", "--no-cache"])
    _one_line(capsys, code, "--readouts")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["g.json"]


def test_a_failing_suggestion_leaves_no_running_trial(tmp_path):
    """11. A trial's parameters refused by Optuna (or any error while a batch is asked) left it RUNNING."""
    from promptsearch.search.study import ask_batch, open_storage

    study = optuna.create_study(study_name="s", storage=open_storage(f"sqlite:///{tmp_path / 's.db'}"))
    study.enqueue_trial({})

    def suggest(trial):
        if trial.number == 1:
            raise ValueError("CategoricalDistribution does not support dynamic value space.")
        trial.suggest_categorical("a", ["x", "y"])

    with pytest.raises(ValueError):
        ask_batch(study, 4, 10, suggest)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.FAIL]


BAD_URLS = ["foo", "nosuchdb://x", "sqlite:////nonexistent/dir/x.db", "sqlite:///{tmp}", "sqlite:///{tmp}/text.db"]


@pytest.mark.parametrize("command", ["optuna", "greedy", "worker"])
@pytest.mark.parametrize("url", BAD_URLS)
def test_a_storage_that_is_no_database_is_one_line(tiny_bert_dir, tmp_path, capsys, url, command):
    """15. ``--storage foo`` and a SQLite file that cannot be opened (no folder, a folder, a text file) were
    SQLAlchemy tracebacks (after five retries); now one line naming --storage, before a model loads."""
    (tmp_path / "text.db").write_text("not a database\n")
    url = url.format(tmp=tmp_path)
    argv = [command, "--model", str(tiny_bert_dir), "--storage", url, "-q", "--no-bf16"]
    if command != "worker":
        argv += ["--dataset", "sts16", "--out", str(tmp_path / "o.json"), "--no-cache"]
    line = _one_line(capsys, main(argv))
    assert "storage" in line and "sqlite:///study.db" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["text.db"]
    assert (tmp_path / "text.db").read_text() == "not a database\n"


@pytest.mark.parametrize("first, then, words", [
    (["--readouts", "mean"], ["--readouts", "mean,cls"], ["--readouts mean,", "mean,cls"]),
    (["--layers", "1"], ["--layers", "1,2"], ["--layers 1,", "1,2"]),
    (["--no-denoise"], [], ["raw scores", "--no-denoise"]),
    (["--dataset", "sts16,sts15", "--pareto"], ["--dataset", "sts16,sts15"],
     ["--pareto", "2 objectives", "--study-name"]),
])
def test_a_study_resumed_with_other_trial_options_is_refused(tiny_bert_dir, grammar, tmp_path, capsys, first, then,
                                                             words):
    """16. Other --readouts (or --layers) on resume: Optuna's 'CategoricalDistribution does not support dynamic
    value space' traceback, its trial left RUNNING; a multi-objective study was loaded as a single-objective one;
    a study of raw scores (an explicit --study-name) took denoised ones. Refused before anything is asked or written."""
    base = _optuna(tiny_bert_dir, grammar, tmp_path, "--trials", "3")
    if "--dataset" not in first:
        base += ["--dataset", "sts16"]
    assert main(base + first) == 0
    storage, out = f"sqlite:///{tmp_path / 's.db'}", tmp_path / "o.json"
    before, kept = _trials(storage), out.read_bytes()
    capsys.readouterr()
    _one_line(capsys, main(base[:base.index("--trials") + 1] + ["6"] + base[base.index("--trials") + 2:] + then),
              *words)
    assert _trials(storage) == before and out.read_bytes() == kept


def test_readout_steps_without_a_readout_is_refused(tiny_bert_dir, tmp_path, capsys):
    """22. ``--readouts none --readout-steps 2``: the steps were silently skipped."""
    code = main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--readouts", "none", "--readout-steps",
                 "2", "--out", str(tmp_path / "o.json"), "-q", "--no-bf16", "--no-cache"])
    _one_line(capsys, code, "--readout-steps", "--readouts")
    assert not (tmp_path / "o.json").exists()


def test_a_refused_greedy_with_a_storage_leaves_no_database(tiny_bert_dir, tmp_path, capsys):
    """11. ``greedy --storage sqlite:///w.db`` opened (made) the file before the model loaded, and a refusal of the
    strategy's (here item 22's) came after it: the work study's file is made after the strategy's checks."""
    code = main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--readouts", "none", "--readout-steps",
                 "2", "--storage", f"sqlite:///{tmp_path / 'w.db'}", "--out", str(tmp_path / "o.json"), "-q",
                 "--no-bf16", "--no-cache"])
    _one_line(capsys, code, "--readout-steps")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_a_results_file_greedy_would_not_resume_is_refused_before_its_work_study(tiny_bert_dir, tmp_path, capsys):
    """11. A resume refused (--out holds another data set's run) came after the work study's SQLite file was made."""
    out = tmp_path / "o.json"
    assert main(["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--out", str(out), "-q", "--no-bf16",
                 "--no-cache", "--validate-top", "0", "[X] is [MASK] ."]) == 0
    before = out.read_bytes()
    code = main(["score", "--model", str(tiny_bert_dir), "--dataset", "sts15", "--storage",
                 f"sqlite:///{tmp_path / 'w.db'}",
                 "--out", str(out), "-q", "--no-bf16", "--no-cache", "[X] means [MASK] ."])
    _one_line(capsys, code, "sts16")
    assert not (tmp_path / "w.db").exists() and out.read_bytes() == before


def test_another_searchs_results_file_is_refused_before_the_study_is_said(tiny_bert_dir, grammar, tmp_path, capsys):
    """From a new user's trial: optuna given a score (or greedy) run's --out said its study line, then refused the
    file 'with --strategy ...', a flag neither command has."""
    out = tmp_path / "o.json"
    assert main(["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--out", str(out), "-q", "--no-bf16",
                 "--no-cache", "--validate-top", "0", "[X] is [MASK] ."]) == 0
    capsys.readouterr()
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--grammar", grammar,
                 "--trials", "1", "--out", str(out), "--no-bf16", "--no-cache"])
    line = _one_line(capsys, code, f"{out} holds a score search, not an optuna one; pass another --out")
    assert "--strategy" not in line and not (tmp_path / "o.db").exists()


def test_a_worker_for_a_study_that_is_not_there_names_it(tmp_path, capsys):
    """25. ``worker --study-name nosuch``: the message named no study (and the worker made the SQLite file)."""
    url = f"sqlite:///{tmp_path / 'w.db'}"
    _one_line(capsys, main(["worker", "--storage", url, "--study-name", "nosuch", "--wait", "0", "-q"]), "'nosuch'",
              "--study-name")
    assert not (tmp_path / "w.db").exists()
    study = optuna.create_study(study_name="promptsearch-work-0123456789ab", storage=url)
    study.set_user_attr("spec", {"model": "m"})
    line = _one_line(capsys, main(["worker", "--storage", url, "--study-name", "nosuch", "--wait", "0", "-q"]),
                     "'nosuch'")
    assert "promptsearch-work-0123456789ab" in line


def test_the_default_study_lies_beside_the_results_file_named_after_model_data_and_variant(tmp_path):
    from promptsearch.search.optuna_search import OptunaSearch

    s = OptunaSearch.beside(tmp_path / "best.json", "org/model x", "stsb-dev", True, trials=3)
    assert s.storage == f"sqlite:///{(tmp_path / 'best.db').resolve()}" and s.trials == 3
    assert s.study_name == "promptsearch-org-model-x-stsb-dev-denoised"
    pareto = OptunaSearch.beside(tmp_path / "b.json", "m", "stsb-dev", False, pareto=True)
    assert pareto.study_name.endswith("raw-pareto")
    given = OptunaSearch.beside(tmp_path / "b.json", "m", "stsb-dev", False, "sqlite:///x.db", "mine")
    assert (given.storage, given.study_name) == ("sqlite:///x.db", "mine")
