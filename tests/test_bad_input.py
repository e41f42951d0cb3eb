"""Bad input, tried as a new user would: one line on stderr, exit code 2, no traceback, nothing lost
(any results or cache file given is byte-identical afterwards), and never a wrong number with exit 0."""

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from promptsearch.cli import main
from conftest import DATA, PAPER_T, make_encoder

ROBERTA_T = "This sentence : '[X]' means [MASK] ."


def _stsb_copy(root, rows: list[str] | None):
    """A data folder whose STS-B dev is ``rows`` (None: the first 60 real rows)."""
    (root / "STSBenchmark").mkdir(parents=True)
    if rows is None:
        rows = (DATA / "STSBenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:60]
    (root / "STSBenchmark" / "sts-dev.csv").write_text("".join(r + "\n" for r in rows), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def world(tmp_path_factory, tiny_bert_dir, tiny_gpt2_dir):
    """Data folders, damaged checkpoints, and a results file + cache written by a real run."""
    d = tmp_path_factory.mktemp("bad-input")
    real = (DATA / "STSBenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()
    p = real[0].split("\t")
    w = {
        "small": _stsb_copy(d / "small", None),
        "empty": _stsb_copy(d / "empty", []),
        "nan": _stsb_copy(d / "nan", real[:5] + ["\t".join(p[:4] + ["nan"] + p[5:])]),
        "model": tiny_bert_dir,
        "gpt2": tiny_gpt2_dir,
    }
    for name in ("trunc", "config"):
        shutil.copytree(tiny_bert_dir, d / name)
    weights = d / "trunc" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    cfg = json.loads((d / "config" / "config.json").read_text())
    cfg["hidden_size"] = 999
    (d / "config" / "config.json").write_text(json.dumps(cfg))
    w["trunc"], w["config"] = d / "trunc", d / "config"
    (d / "bad.txt").write_bytes(b"[X] means [MASK] .\n[X] \xff [MASK] .\n")
    w["badfile"] = d / "bad.txt"
    # a real results file and cache, which every bad command below must leave as they are
    w["out"], w["cache"] = d / "best.json", d / "cache.jsonl"
    assert main(["score", "--model", str(tiny_bert_dir), "--data-dir", str(w["small"]), "--cache", str(w["cache"]),
                 "--out", str(w["out"]), "-q", "--no-bf16", "--validate-top", "0", PAPER_T]) == 0
    good = json.loads(w["out"].read_text())
    no_spearman = json.loads(json.dumps(good))
    del no_spearman["templates"][0]["spearman"]
    (d / "no-spearman.json").write_text(json.dumps(no_spearman))
    (d / "null-stats.json").write_text(json.dumps({**good, "stats": None}))
    w["no_spearman"], w["null_stats"] = d / "no-spearman.json", d / "null-stats.json"
    (d / "vocab.json").write_text('{"relations": [], "prefix_tokens": ["This"]}')
    (d / "grammar.json").write_text('{"format": "{a} [X] [MASK]", "slots": {"a": []}}')
    (d / "a-file").write_text("x")
    w["vocab"], w["grammar"], w["afile"], w["new"] = d / "vocab.json", d / "grammar.json", d / "a-file", d / "new.json"
    # user data sets (csv through datasets)
    rows = [f"a man plays {i},a woman sings {i},{i}" for i in range(12)]
    (d / "nocol.csv").write_text("left,right,gold\n" + "\n".join(rows) + "\n", encoding="utf-8")
    (d / "badscore.csv").write_text("sentence1,sentence2,score\n" + "\n".join(rows[:5] + ["x,y,high", "u,v,", "p,q,nan"]
                                                                               + rows[5:]) + "\n", encoding="utf-8")
    (d / "few.csv").write_text("sentence1,sentence2,score\n" + "\n".join(rows[:4]) + "\n", encoding="utf-8")
    (d / "header-only.csv").write_text("sentence1,sentence2,score\n", encoding="utf-8")
    (d / "empty.csv").write_text("", encoding="utf-8")
    (d / "splits").mkdir()
    for split in ("train", "test"):
        (d / "splits" / f"{split}.csv").write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n", encoding="utf-8")
    (d / "baddemos.tsv").write_text("A dog runs.\tDog\nno tab on this line\n", encoding="utf-8")
    w["baddemos"] = d / "baddemos.tsv"
    for k in ("nocol.csv", "badscore.csv", "few.csv", "header-only.csv", "empty.csv", "splits"):
        w["u_" + k.replace(".csv", "").replace("-", "_")] = d / k
    return w


S = ["score", "--model", "{model}", "--data-dir", "{small}", "--cache", "{cache}", "-q", "--no-bf16", "--validate-top", "0"]
LONG = " ".join(["word"] * 600)

CASES = [
    # today's cases
    (["eval", "--template", "no placeholder [MASK] ."], "has 0 [X] placeholders"),
    (["eval", "--template", "[X] means ."], "has 0 [MASK] tokens"),
    (["eval", "--template", "[X] [MASK] or [MASK]"], "has 2 [MASK] tokens"),
    (["eval", "--pooling", "max"], "unknown pooling 'max'"),
    (["eval", "--pooling", "mean", "--data-dir", "/no/such/dir"], "does not exist"),
    (["eval", "--pooling", "mean", "--tasks", "sts99"], "unknown task"),
    (["eval", "--pooling", "ditto"], "needs --head"),
    (["eval", "--model", "/no/such/model", "--pooling", "mean"], "does not exist"),
    (["eval", "--template", PAPER_T, "--pooling", "mean"], "either --template or --pooling"),
    (S + ["--out", "{out}", "[X] and [X] [MASK]"], "has 2 [X]"),
    (S + ["--out", "{out}"], "give templates as arguments or with --file"),
    (["greedy", "--out", "{afile}/best.json"], "is not writable"),
    (["greedy", "--out", "/tmp"], "is a directory"),
    (["greedy", "--model", "{model}", "--out", "{out}", "--cache", "{cache}", "--vocabulary", "/no/such.json"], "no template file"),
    (["greedy", "--vocabulary", "{vocab}", "--out", "{new}"], "'relations' must be a non-empty list"),
    (["optuna", "--grammar", "{grammar}", "--out", "{new}"], "slot 'a' used in the format needs a non-empty list"),
    (["optuna", "--grammar", "/no/such/grammar.json", "--out", "{new}"], "no template file"),
    (["t5", "--generator", "mlm", "--wordnet-dir", "/no/wordnet", "--out", "{new}"], "apt-get install wordnet-base"),
    # 2. a gold score of nan
    (S + ["--data-dir", "{nan}", "--out", "{out}", PAPER_T], "sts-dev.csv:6: score 'nan' is not a finite number"),
    # 5. a --file that is not UTF-8
    (S + ["--out", "{out}", "--file", "{badfile}"], "bad.txt:2: not valid UTF-8"),
    # 6. a sentence or a template that is not UTF-8 (the shell hands undecodable bytes over as surrogates)
    (["predict", "--model", "{model}", "-q", "a \udcff b."], "is not valid UTF-8"),
    (S + ["--out", "{out}", "[X] \udcff [MASK] ."], "is not valid UTF-8"),
    # 7. no pairs at all
    (S + ["--data-dir", "{empty}", "--no-cache", "--out", "{out}", PAPER_T], "holds no sentence pairs"),
    (S + ["--data-dir", "{empty}", "--out", "{out}", PAPER_T], "holds no sentence pairs"),
    # 8. damaged checkpoints
    (["eval", "--model", "{trunc}", "--pooling", "mean", "-q"], "model.safetensors"),
    (["eval", "--model", "{config}", "--pooling", "mean", "-q"], "config.json"),
    # 9. results files that break the schema
    (S + ["--out", "{no_spearman}", PAPER_T], "at templates[0]: 'spearman' is a required property"),
    (S + ["--out", "{null_stats}", PAPER_T], "at stats: None is not of type 'object'"),
    # 13. an over-long template: a short quote
    (S + ["--out", "{out}", LONG + " [X] [MASK] ."], "leaving no room for a sentence"),
    # 14. empty sentences
    (["predict", "--model", "{model}", "-q", "a man .", "   "], "sentence 2 is empty"),
    # user data sets (issue: your own data)
    (S + ["--dataset", "{u_nocol}", "--out", "{out}", PAPER_T], "no sentence-pair columns among left, right, gold"),
    (S + ["--dataset", "{u_nocol}", "--columns", "left,right,score", "--out", "{out}", PAPER_T],
     "has no column 'score'; its columns are left, right, gold"),
    (S + ["--dataset", "{u_badscore}", "--out", "{out}", PAPER_T], "3 row(s)"),
    (S + ["--dataset", "{u_badscore}", "--out", "{out}", PAPER_T], "badscore.csv:7"),
    (S + ["--dataset", "{u_few}", "--out", "{out}", PAPER_T], "holds 4 scored pair(s); a Spearman correlation needs at least 10"),
    (S + ["--dataset", "{u_header_only}", "--out", "{out}", PAPER_T], "holds no data rows"),
    (S + ["--dataset", "{u_empty}", "--out", "{out}", PAPER_T], "empty.csv is empty"),
    (S + ["--dataset", "{u_splits}@dev", "--out", "{out}", PAPER_T], "has no split 'dev'; its splits are train, test"),
    (S + ["--dataset", "{u_splits}", "--out", "{out}", PAPER_T], "has the splits train, test; name one"),
    (S + ["--dataset", "nobody/no-such-set@test", "--out", "{out}", PAPER_T], "from the Hugging Face Hub"),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "my_pairs.xlsx"], "unknown task 'my_pairs.xlsx'"),
    # causal LMs
    (["eval", "--model", "{gpt2}", "--template", PAPER_T, "--tasks", "sts16", "-q"], "a causal LM has no mask token: drop [MASK]"),
    (["eval", "--model", "{gpt2}", "--template", "PromptEOL", "--demos", "{baddemos}", "-q"],
     "baddemos.tsv:2: expected 'sentence<TAB>word'"),
    (["eval", "--model", "{gpt2}", "--template", "This sentence : [X]", "--tasks", "sts16", "-q"], "ends with [X]"),
    (["eval", "--model", "{gpt2}", "--template", "PromptEOL", "--compat", "reference", "--tasks", "sts16", "-q"],
     "a causal LM uses the default"),
    (["finetune", "--model", "{gpt2}", "--template", "PromptEOL", "--out", "{afile}.d", "-q"], "is a causal LM"),
    # training commands refuse the reference inputs
    (["optiprompt", "--model", "{model}", "--compat", "reference"], "--compat reference"),
    (["eval", "--model", "{model}", "--pooling", "mean", "--device", "cuda:99"], "that CUDA device is not available here"),
    (["eval", "--model", "{model}", "--pooling", "mean", "--device", "gpu"], "--device 'gpu' is not a device"),
    # issue 13: racing, screening precision, held-out validation
    (S[:-2] + [PAPER_T], "held-out validation: missing data file"),
    (S[:-2] + ["--validate-top", "-1", PAPER_T], "--validate-top must be 0 (off) or more"),
    (S + ["--validate-on", "nosuchtask", "--validate-top", "3", PAPER_T], "held-out validation: unknown task 'nosuchtask'"),
    (["greedy", "--model", "{model}", "--out", "{new}", "--race-rungs", "0.5,x"], "--race-rungs '0.5,x': give fractions"),
    (["greedy", "--model", "{model}", "--out", "{new}", "--race-rungs", "0.5,0.25"], "racing rungs must be increasing"),
    (["greedy", "--model", "{model}", "--out", "{new}", "--finalists", "0"], "racing finalists must be at least 1"),
]


@pytest.mark.parametrize("argv, message", CASES, ids=[f"{i}-{c[0][0]}" for i, c in enumerate(CASES)])
def test_bad_input_is_one_line_exit_2_and_loses_nothing(argv, message, world, capsys):
    argv = [a.format(**{k: str(v) for k, v in world.items()}) for a in argv]
    files = {p: p.read_bytes() for p in (world["out"], world["cache"], world["no_spearman"], world["null_stats"])}
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert message in err and "Traceback" not in err
    assert len(err) < 400  # no 3,600-character template quoted back
    assert {p: p.read_bytes() for p in files} == files
    assert not world["new"].exists()


def _run(argv, **kw):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "promptsearch"] + argv, capture_output=True, text=True, env=env, **kw)


def test_long_input_prints_no_transformers_warning(world):
    """13. The default model (512 positions): a 600-word template is one short line, a 5,000-word
    sentence is truncated without transformers' "indexing errors" warning."""
    r = _run(["score", "--model", "default", "--data-dir", str(world["small"]), "--no-cache", "-q", "--validate-top", "0",
                  LONG + " [X] [MASK] ."])
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and len(r.stderr) < 400, r.stderr
    r = _run(["predict", "--model", "default", "-q", " ".join(["word"] * 5000) + " ."])
    assert r.returncode == 0 and "indexing errors" not in r.stderr and "Token indices" not in r.stderr, r.stderr


# ---- wrong numbers with exit 0 ------------------------------------------------------------------

def test_cache_never_returns_a_score_measured_on_other_data(world, tmp_path, capsys):
    """1. The key holds a fingerprint of the pairs scored, not just the task name."""
    cache = tmp_path / "c.jsonl"
    base = ["score", "--model", str(world["model"]), "--cache", str(cache), "-q", "--no-bf16"]
    assert main(base + ["--data-dir", str(world["small"]), "--validate-top", "0", PAPER_T]) == 0
    small = capsys.readouterr().out
    assert main(base + ["--data-dir", str(DATA), PAPER_T]) == 0
    full = capsys.readouterr().out
    assert main(base + ["--data-dir", str(DATA), "--no-cache", PAPER_T]) == 0
    fresh = capsys.readouterr().out
    assert full == fresh and full != small  # the full set's number, measured on the full set
    assert main(base + ["--data-dir", str(world["empty"]), PAPER_T]) == 2  # not the cached number of another copy


def test_static_debiased_reads_the_data_dir_given(tmp_path, monkeypatch, tiny_bert_dir, capsys):
    """3. With no env var and no ../shared/data, --data-dir is where the Wikipedia sample is read."""
    monkeypatch.delenv("PROMPTSEARCH_DATA_DIR", raising=False)
    monkeypatch.chdir(tmp_path)
    code = main(["eval", "--model", str(tiny_bert_dir), "--pooling", "static-debiased", "--tasks", "stsb-dev",
                 "--data-dir", str(DATA.parent), "--json", "-q", "--no-bf16"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert 0 < abs(json.loads(out)["stsb-dev"]) < 100


def test_internal_whitespace_is_collapsed_on_byte_level_bpe(tiny_roberta_dir):
    """4. 'a  man' and 'a man' are one sentence with or without the final period."""
    for add_period in (True, False):
        enc = make_encoder(tiny_roberta_dir, add_period=add_period)
        v = enc.encode(["a  man is   playing", "a man is playing"], template=ROBERTA_T)
        np.testing.assert_array_equal(v[0], v[1])


# ---- quieter defects ------------------------------------------------------------------------------

def test_sigterm_ends_a_search_like_ctrl_c(world, tmp_path):
    """10. A message, the results kept, re-running resumes."""
    out = tmp_path / "g.json"
    argv = ["greedy", "--model", str(world["model"]), "--dataset", "sts16", "--out", str(out), "--no-cache", "-q", "--no-bf16"]
    p = subprocess.Popen([sys.executable, "-m", "promptsearch"] + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and json.loads(out.read_text() or "{}").get("templates")):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    assert err.strip().splitlines()[-1] == f"promptsearch greedy: terminated; scored templates are saved in {out}, " \
                                           "re-run the same command to resume"
    assert json.loads(out.read_text())["templates"]


def test_optuna_summary_reports_running_trials(tiny_bert_dir, tmp_path, capsys):
    """11. A trial left RUNNING (a killed worker's, inside the heartbeat grace period) is counted."""
    import optuna

    storage = f"sqlite:///{tmp_path / 's.db'}"
    grammar = tmp_path / "g.json"
    grammar.write_text(json.dumps({"format": "{a} [X] means [MASK] .", "slots": {"a": ["", "This :", "So"]}}))
    optuna.create_study(study_name="s", storage=storage, direction="maximize").ask()  # never told: RUNNING
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--trials", "2", "--grammar", str(grammar),
                 "--storage", storage, "--study-name", "s", "--out", str(tmp_path / "o.json"), "--no-cache", "-q", "--no-bf16"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 running trials" in out and "retried once their heartbeat is 90 s old" in out


def test_unwritable_cache_is_said_once(world, tmp_path, capsys):
    """12. A cache that cannot be written: one warning, the scores still printed."""
    (tmp_path / "afile").write_text("x")
    code = main(["score", "--model", str(world["model"]), "--data-dir", str(world["small"]), "--cache",
                 str(tmp_path / "afile" / "c.jsonl"), "-q", "--no-bf16", "--validate-top", "0", PAPER_T, "[X] means [MASK] ."])
    out, err = capsys.readouterr()
    assert code == 0 and PAPER_T in out
    assert err.count("cannot use the score cache") == 1


def test_predict_escapes_control_characters(tiny_bert_dir, capsys):
    """14. An ESC sequence in the input is shown escaped, never sent to the terminal."""
    assert main(["predict", "--model", str(tiny_bert_dir), "-q", "--no-bf16", "a \x1b[31mred\x1b[0m man ."]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\\x1b[31mred" in out


def test_tui_says_when_a_file_has_the_wrong_schema(tmp_path, world):
    """15. Valid JSON of another kind is an error on the board, not an empty leaderboard."""
    from promptsearch.tui.sources import ResultsFileSource

    (tmp_path / "other.json").write_text(json.dumps({"hello": 1}))
    assert "not a promptsearch results file" in ResultsFileSource(tmp_path / "other.json").load().error
    board = ResultsFileSource(world["null_stats"]).load()
    assert "stats" in board.error and not board.rows
    assert ResultsFileSource(world["out"]).load().rows  # a good file still shows


def test_loading_a_model_leaves_progress_bars_as_they_were(tiny_bert_dir):
    from transformers.utils import logging as hf_logging

    from promptsearch.model.loading import load_model

    hf_logging.disable_progress_bar()
    try:
        load_model(str(tiny_bert_dir))
        assert not hf_logging.is_progress_bar_enabled()
    finally:
        hf_logging.enable_progress_bar()
    load_model(str(tiny_bert_dir))
    assert hf_logging.is_progress_bar_enabled()
