"""Optuna studies on a real PostgreSQL server (a throwaway cluster: conftest.postgres_url): several
worker processes share one study; bad connection input is one line, exit 2, within seconds."""

from __future__ import annotations

import json
import sys
import time

import optuna
import pytest

from conftest import run_cli, spawn
from promptsearch.cli import main
from promptsearch.search.study import storage_url

GRAMMAR = {"format": "{prefix} {quote}[X]{quote} {relation} [MASK] .",
           "slots": {"prefix": ["", "This sentence :", "This"], "quote": ["", "\""], "relation": ["means", "is", "says"]}}

# Runs the CLI, but each of N workers waits, once its model is loaded, until all N are there: on a tiny
# model one process could otherwise finish every trial before another has imported torch.
_BARRIER = """
import os, sys, time
from promptsearch.cli import main
from promptsearch.search import optuna_search
folder, n, me = sys.argv[1], int(sys.argv[2]), sys.argv[3]
run = optuna_search.OptunaSearch.run
def waiting_run(self, *a, **k):
    open(os.path.join(folder, me), "w").close()
    deadline = time.time() + 120
    while len(os.listdir(folder)) < n and time.time() < deadline:
        time.sleep(0.01)
    return run(self, *a, **k)
optuna_search.OptunaSearch.run = waiting_run
sys.exit(main(sys.argv[4:]))
"""


def test_three_workers_share_one_study_on_postgresql(postgres_url, tiny_bert_dir, tmp_path):
    grammar = tmp_path / "grammar.json"
    grammar.write_text(json.dumps(GRAMMAR))
    met = tmp_path / "met"
    met.mkdir()
    args = ["optuna", "--model", tiny_bert_dir, "--dataset", "sts16", "--trials", "12", "--batch-trials", "2", "--grammar",
            grammar, "--storage", postgres_url, "--study-name", "three", "--no-bf16", "-q"]
    procs = [spawn([sys.executable, "-c", _BARRIER, met, "3", str(i)] + args + ["--out", tmp_path / f"w{i}.json", "--seed",
                   str(i)]) for i in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs
    study = optuna.load_study(study_name="three", storage=storage_url(postgres_url))
    finished = [t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)]
    assert 12 <= len(finished) <= 12 + 3 * 2  # each worker's batch in flight may finish past the target
    assert len({t.user_attrs["worker"] for t in study.trials}) == 3  # every worker ran trials
    assert len({t.number for t in study.trials}) == len(study.trials)  # one numbering, no trial twice
    completed = {t.user_attrs["template"] for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    files = [{e["template"] for e in json.loads((tmp_path / f"w{i}.json").read_text())["templates"]} for i in range(3)]
    assert any(completed <= f for f in files)  # the worker that finished last holds every complete trial
    # the same study read back: the values equal what the results files recorded
    by_template = {t.user_attrs["template"]: t.value for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE}
    recorded = {e["template"]: e["spearman"] for i in range(3)
                for e in json.loads((tmp_path / f"w{i}.json").read_text())["templates"] if e.get("source", "").startswith("optuna")}
    assert all(abs(by_template[t] - v) < 1e-3 for t, v in recorded.items() if t in by_template)


@pytest.mark.parametrize("how, message", [
    ("password", 'password authentication failed for user "promptsearch"'),
    ("host", "Connection refused"),
])
def test_bad_connection_input_is_one_line_within_seconds(postgres_url, tiny_bert_dir, tmp_path, how, message):
    url = (postgres_url.replace(":secret@", ":wrong@") if how == "password"
           else "postgresql://promptsearch:secret@127.0.0.1:1/postgres")
    t0 = time.time()
    r = run_cli(["optuna", "--model", tiny_bert_dir, "--dataset", "sts16", "--trials", "2", "--storage", url, "--out",
                 tmp_path / "o.json", "-q", "--no-bf16"], timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.stderr
    assert message in lines[0] and "cannot open the storage" in lines[0]
    assert "secret" not in r.stderr and "wrong" not in r.stderr  # no password shown
    assert time.time() - t0 < 30  # no retry storm (the process's start-up included)
    assert not (tmp_path / "o.json").exists()


def test_a_missing_driver_is_one_line_naming_the_package(tmp_path, monkeypatch, capsys, tiny_bert_dir):
    """No server needed: the driver is looked for before any connection."""
    pytest.importorskip("sqlalchemy")
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--trials", "1", "--storage",
                 "postgresql://u:p@localhost/db", "--out", str(tmp_path / "o.json"), "-q"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "pip install 'psycopg[binary]'" in err[0], err
