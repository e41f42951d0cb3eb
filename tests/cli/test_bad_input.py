"""Bad input, tried as a new user would: one line on stderr, exit code 2, no traceback, nothing lost
(any results or cache file given is byte-identical afterwards), and never a wrong number with exit 0."""

import json
import shutil
import signal
import sys
import time

import numpy as np
import pytest
from conftest import DATA, PAPER_T, cli, make_encoder, run_cli, spawn

from promptsearch.cli import main

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
        (d / "splits" / f"{split}.csv").write_text("sentence1,sentence2,score\n" + "\n".join(rows) + "\n",
                                                   encoding="utf-8")
    (d / "baddemos.tsv").write_text("A dog runs.\tDog\nno tab on this line\n", encoding="utf-8")
    w["baddemos"] = d / "baddemos.tsv"
    for k in ("nocol.csv", "badscore.csv", "few.csv", "header-only.csv", "empty.csv", "splits"):
        w["u_" + k.replace(".csv", "").replace("-", "_")] = d / k
    # issue 19: a model folder without tokenizer files, data whose Spearman is undefined or whose
    # columns have the wrong type, files that are not what they are named, interrupted writes
    (d / "notok").mkdir()
    for f in ("config.json", "model.safetensors"):
        shutil.copy(tiny_bert_dir / f, d / "notok" / f)
    sents = [f"a man plays the tune {i}" for i in range(12)]
    _table(d / "const.csv", sents, 3.0)
    _table(d / "ids.csv", sents, None, id=list(range(12)))
    _table(d / "blank.csv", sents, None, sentence2=["  "] + sents[1:])
    import datasets
    datasets.Dataset.from_dict({"sentence1": [[x] for x in sents], "sentence2": sents,
                                "score": list(range(12))}).to_parquet(
        str(d / "lists.parquet"))
    datasets.Dataset.from_dict({"sentence1": sents, "sentence2": sents, "score": [[i] for i in range(12)]}).to_parquet(
        str(d / "listscore.parquet"))
    (d / "trunc.parquet").write_bytes((d / "lists.parquet").read_bytes()[:300])
    (d / "utf16.csv").write_text("sentence1,sentence2,score\n" + "".join(f"a {i},b {i},{i}\n" for i in range(12)),
                                 encoding="utf-16")
    (d / "latin1.csv").write_bytes(("sentence1,sentence2,score\n" + "".join(f"a {i},b {i},{i}\n" for i in range(5))
                                    + "caf\xe9 5,b 5,5\n").encode("latin-1"))
    (d / "bad.json").write_text('[{"sentence1": "a", "sentence2": "b", "score": 1},\n'
                                ' {"sentence1": "a" "sentence2": "b"}]')
    (d / "bad.jsonl").write_text('{"sentence1": "a", "sentence2": "b", "score": 1}\n{"sentence1": "a", "score": 2\n')
    (d / "quote.csv").write_text("sentence1,sentence2,score\n" + "".join(f"a {i},b {i},{i}\n" for i in range(5))
                                 + '"a 5,b 5,5\n' + "".join(f"a {i},b {i},{i}\n" for i in range(6, 12)))
    (d / "results-empty.json").write_text(json.dumps({**good, "templates": []}))
    # a tab- and a semicolon-separated .csv, commas inside their sentences (STS-B's own files are tab-separated)
    (d / "tabs.csv").write_text("sentence1\tsentence2\tscore\n" + "".join(f"a, {i}\tb {i}\t{i}\n" for i in range(6)))
    (d / "semi.csv").write_text("sentence1;sentence2;score\n" + "".join(f"a, {i};b {i};{i}\n" for i in range(6)))
    for k in ("notok", "const.csv", "ids.csv", "blank.csv", "lists.parquet", "listscore.parquet", "trunc.parquet",
              "utf16.csv", "latin1.csv", "bad.json", "bad.jsonl", "quote.csv", "results-empty.json", "tabs.csv",
              "semi.csv"):
        w[k.replace(".", "_").replace("-", "_")] = d / k
    return w


def _table(path, sents, score, **cols):
    import datasets
    data = {"sentence1": sents, "sentence2": sents[::-1], "score": [score] * len(sents) if score is not None else
            [float(i % 5) for i in range(len(sents))]}
    datasets.Dataset.from_dict({**data, **cols}).to_csv(str(path), index=False)


S = ["score", "--model", "{model}", "--data-dir", "{small}", "--cache", "{cache}", "-q", "--no-bf16", "--validate-top",
     "0"]
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
    (["eval", "--template", PAPER_T, "--pooling", "mean"], ("--template", "--pooling")),
    (S + ["--out", "{out}", "[X] and [X] [MASK]"], "has 2 [X]"),
    (S + ["--out", "{out}"], "--file"),
    (["greedy", "--out", "{afile}/best.json"], "is not writable"),
    (["greedy", "--out", "/tmp"], "is a directory"),
    (["greedy", "--model", "{model}", "--out", "{out}", "--cache", "{cache}", "--vocabulary", "/no/such.json"],
     "no template file"),
    (["greedy", "--vocabulary", "{vocab}", "--out", "{new}"], "'relations'"),
    (["optuna", "--grammar", "{grammar}", "--out", "{new}"], "slot 'a'"),
    (["optuna", "--grammar", "/no/such/grammar.json", "--out", "{new}"], "no template file"),
    (["t5", "--generator", "mlm", "--wordnet-dir", "/no/wordnet", "--out", "{new}"], "wordnet-base"),
    # 2. a gold score of nan
    (S + ["--data-dir", "{nan}", "--out", "{out}", PAPER_T], ("sts-dev.csv:6", "'nan'")),
    # 5. a --file that is not UTF-8
    (S + ["--out", "{out}", "--file", "{badfile}"], ("bad.txt:2", "UTF-8")),
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
    (S + ["--out", "{no_spearman}", PAPER_T], ("templates[0]", "'spearman'")),
    (S + ["--out", "{null_stats}", PAPER_T], ("stats", "'object'")),
    # 13. an over-long template: a short quote
    (S + ["--out", "{out}", LONG + " [X] [MASK] ."], "no room"),
    # 14. empty sentences
    (["predict", "--model", "{model}", "-q", "a man .", "   "], ("sentence 2", "empty")),
    # user data sets (issue: your own data)
    (S + ["--dataset", "{u_nocol}", "--out", "{out}", PAPER_T], ("columns", "left, right, gold")),
    (S + ["--dataset", "{u_nocol}", "--columns", "left,right,score", "--out", "{out}", PAPER_T],
     ("'score'", "left, right, gold")),
    (S + ["--dataset", "{u_badscore}", "--out", "{out}", PAPER_T], "3 row(s)"),
    (S + ["--dataset", "{u_badscore}", "--out", "{out}", PAPER_T], "badscore.csv:7"),
    (S + ["--dataset", "{u_few}", "--out", "{out}", PAPER_T], ("4 scored pair", "10")),
    (S + ["--dataset", "{u_header_only}", "--out", "{out}", PAPER_T], "holds no data rows"),
    (S + ["--dataset", "{u_empty}", "--out", "{out}", PAPER_T], "empty.csv is empty"),
    (S + ["--dataset", "{u_splits}@dev", "--out", "{out}", PAPER_T], ("'dev'", "train, test")),
    (S + ["--dataset", "{u_splits}", "--out", "{out}", PAPER_T], ("train, test", "name one")),
    (S + ["--dataset", "nobody/no-such-set@test", "--out", "{out}", PAPER_T], "Hugging Face Hub"),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "my_pairs.xlsx"], "unknown task 'my_pairs.xlsx'"),
    # a new user's trial: a missing data file named as such, a typo offered its fix
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "my_pairs.csv"],
     ("no data file 'my_pairs.csv'", "existing file")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "stsb-dve"],
     ("unknown task 'stsb-dve' (did you mean 'stsb-dev'?)", "sts-all")),
    (["greedy", "--model", "{model}", "--out", "{new}", "--readouts", "meen"],
     "unknown read-out 'meen' (did you mean 'mean'?)"),
    # causal LMs
    (["eval", "--model", "{gpt2}", "--template", PAPER_T, "--tasks", "sts16", "-q"], ("causal LM", "drop [MASK]")),
    (["eval", "--model", "{gpt2}", "--template", "PromptEOL", "--demos", "{baddemos}", "-q"],
     ("baddemos.tsv:2", "sentence<TAB>word")),
    (["eval", "--model", "{gpt2}", "--template", "This sentence : [X]", "--tasks", "sts16", "-q"], "ends with [X]"),
    (["eval", "--model", "{gpt2}", "--template", "PromptEOL", "--compat", "reference", "--tasks", "sts16", "-q"],
     ("causal LM", "default")),
    (["finetune", "--model", "{gpt2}", "--template", "PromptEOL", "--out", "{afile}.d", "-q"], "is a causal LM"),
    # training commands refuse the reference inputs
    (["optiprompt", "--model", "{model}", "--compat", "reference"], "--compat reference"),
    (["eval", "--model", "{model}", "--pooling", "mean", "--device", "cuda:99"], ("CUDA", "not available")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--device", "gpu"], "--device 'gpu'"),
    # issue 13: racing, screening precision, held-out validation
    (S[:-2] + [PAPER_T], ("held-out validation", "missing")),
    (S[:-2] + ["--validate-top", "-1", PAPER_T], ("--validate-top", "at least 0")),
    (S + ["--validate-on", "nosuchtask", "--validate-top", "3", PAPER_T], ("held-out validation", "'nosuchtask'")),
    (["greedy", "--model", "{model}", "--out", "{new}", "--race-rungs", "0.5,x"],
     ("--race-rungs '0.5,x'", "fractions")),
    (["greedy", "--model", "{model}", "--out", "{new}", "--race-rungs", "0.5,0.25"], ("rungs", "increasing")),
    (["greedy", "--model", "{model}", "--out", "{new}", "--finalists", "0"], ("--finalists", "at least 1")),
    # issue 19 — W2: a model folder without tokenizer files (every word would be [UNK])
    (["eval", "--model", "{notok}", "--pooling", "mean", "-q"], "has no tokenizer files"),
    # W3: Spearman undefined — constant gold scores, one-pair or constant subsets
    (S + ["--dataset", "{const_csv}", "--out", "{out}", PAPER_T], "every gold score of"),
    (["eval", "--model", "{model}", "--template", PAPER_T, "--tasks", "{const_csv}", "-q"], ("Spearman", "undefined")),
    (["eval", "--model", "{model}", "--template", PAPER_T, "--tasks", "{ids_csv}", "--subset-column", "id", "-q"],
     "subset '0' of"),
    # W4: column types
    (["eval", "--model", "{model}", "--template", PAPER_T, "--tasks", "{lists_parquet}", "-q"],
     "column 'sentence1' of"),
    (["eval", "--model", "{model}", "--template", PAPER_T, "--tasks", "{listscore_parquet}", "-q"], "not scores"),
    # L1: a cache that is not one; the cache and the results file the same path
    (S[:5] + ["--cache", "{out}", "-q", "--no-bf16", "--validate-top", "0", "--out", "{new}", PAPER_T],
     "score cache"),
    (S[:5] + ["--cache", "{new}", "-q", "--no-bf16", "--validate-top", "0", "--out", "{new}", PAPER_T],
     ("--cache", "--out")),
    (S[:5] + ["--cache", "{small}", "-q", "--no-bf16", "--validate-top", "0", PAPER_T], "is a folder"),
    # T3: repeated columns
    (S + ["--dataset", "{ids_csv}", "--columns", "sentence1,sentence1,score", "--out", "{out}", PAPER_T],
     "names 'sentence1' twice"),
    (S + ["--dataset", "{ids_csv}", "--columns", "sentence1,sentence2,sentence1", "--out", "{out}", PAPER_T], "twice"),
    (S + ["--dataset", "{ids_csv}", "--subset-column", "score", "--out", "{out}", PAPER_T],
     "is one of the pair columns"),
    (S + ["--dataset", "{ids_csv}", "--columns", "sentence1,sentence2,id", "--subset-column", "id", "--out", "{out}",
          PAPER_T],
     "is one of the pair columns"),
    # T4: numeric and device flags, checked when the flags are read
    (S + ["--batch-size", "0", "--out", "{out}", PAPER_T], ("--batch-size", "at least 1")),
    (["eval", "--batch-size", "-3"], ("--batch-size", "at least 1")),
    (["eval", "--max-length", "-4"], ("--max-length", "at least 1")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--device", "meta"], "meta"),
    (["predict", "--top-k", "-1", "a man ."], ("--top-k", "at least 1")),
    (["finetune", "--lr", "-1"], ("--lr", "a number above 0")),
    (["finetune", "--lr", "nan"], ("--lr", "a number above 0")),
    (["finetune", "--max-steps", "-1"], ("--max-steps", "at least 1")),
    (["finetune", "--train-batch-size", "-4"], ("--train-batch-size", "at least 2")),
    (["finetune", "--epochs", "0"], ("--epochs", "a number above 0")),
    (["optiprompt", "--steps", "0"], ("--steps", "at least 1")),
    (["optiprompt", "--seeds", "0,-1"], "whole numbers"),
    (["optuna", "--trials", "0"], ("--trials", "at least 1")),
    (["optuna", "--batch-trials", "0"], ("--batch-trials", "at least 1")),
    (["finetune", "--micro-tokens", "0"], ("--micro-tokens", "at least 1")),
    (["greedy", "--max-steps", "-2"], ("--max-steps", "at least 0")),
    (["train-head", "--rank", "0"], ("--rank", "at least 1")),
    (["t5", "--num-beams", "0"], ("--num-beams", "at least 1")),
    (["eval", "--seed", "1"], "unrecognized arguments"),
    # U1: files that are not what they are named, each said with the file, the cause and the fix
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{utf16_csv}", "-q"], ("UTF-16", "UTF-8")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{latin1_csv}", "-q"], ("latin1.csv:7", "UTF-8")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{bad_json}", "-q"], ("bad.json:2", "JSON")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{bad_jsonl}", "-q"], ("bad.jsonl:2", "JSON")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{trunc_parquet}", "-q"], "parquet"),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{quote_csv}", "-q"],
     ("quote.csv:7", "quoted field")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{tabs_csv}", "-q"],
     ("tabs.csv looks tab-separated", "name it .tsv")),
    (["eval", "--model", "{model}", "--pooling", "mean", "--tasks", "{semi_csv}", "-q"],
     ("semi.csv looks semicolon-separated", "separate its columns with commas")),
    # smaller: a group where one set is scored, empty sentences, an empty results file, paths of the wrong kind
    (S + ["--dataset", "sts-all", "--out", "{out}", PAPER_T], "names 7 data sets"),
    (["ditto-search", "--model", "{model}", "--dataset", "sts-all"], "names 7 data sets"),
    (S + ["--dataset", "{blank_csv}", "--out", "{out}", PAPER_T], "empty sentence"),
    (["finetune", "--model", "{model}", "--templates", "{results_empty_json}", "--out", "{afile}.d", "-q"],
     "no scored templates"),
    (["eval", "--model", "{model}", "--pooling", "mean", "--data-dir", "{afile}"], "not a folder"),
    (["predict", "--model", "{model}", "--mlm-head", "{small}", "a man ."], "head.safetensors"),
    (["eval", "--model", "{afile}", "--pooling", "mean"], "model's folder"),
    (["report", "--model", "{model}", "--tasks", "sts16", "--json", "{out}", "-q"], "not a report"),
    (S + ["--out", "{out}", "--no-local", PAPER_T], "--no-local leaves the scoring to 'promptsearch worker' processes"),
]


@pytest.mark.parametrize("argv, message", CASES, ids=[f"{i}-{c[0][0]}" for i, c in enumerate(CASES)])
def test_bad_input_is_one_line_exit_2_and_loses_nothing(argv, message, world, capsys):
    argv = [a.format(**{k: str(v) for k, v in world.items()}) for a in argv]
    files = {p: p.read_bytes() for p in (world["out"], world["cache"], world["no_spearman"], world["null_stats"])}
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1, err
    assert all(m in err for m in ((message,) if isinstance(message, str) else message)) and "Traceback" not in err
    assert len(err) < 400  # no 3,600-character template quoted back
    assert {p: p.read_bytes() for p in files} == files
    assert not world["new"].exists()


def _run(argv, **kw):
    return run_cli(argv, **kw)


@pytest.mark.realmodel
def test_long_input_prints_no_transformers_warning(world):
    """13. The default model (512 positions): a 600-word template is one short line, a 5,000-word
    sentence is truncated without transformers' "indexing errors" warning."""
    r = _run(["score", "--model", "default", "--data-dir", str(world["small"]), "--no-cache", "-q", "--validate-top",
              "0", LONG + " [X] [MASK] ."])
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
    argv = ["greedy", "--model", str(world["model"]), "--dataset", "sts16", "--out", str(out), "--no-cache", "-q",
            "--no-bf16"]
    p = cli(argv)
    deadline = time.time() + 120
    while time.time() < deadline and not (out.exists() and json.loads(out.read_text() or "{}").get("templates")):
        time.sleep(0.05)
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 143, err
    last = err.strip().splitlines()[-1]
    assert "terminated" in last and str(out) in last and "resume" in last, err
    assert json.loads(out.read_text())["templates"]


def test_optuna_summary_reports_running_trials(tiny_bert_dir, tmp_path, capsys):
    """11. A trial left RUNNING (a killed worker's, inside the heartbeat grace period) is counted."""
    import optuna

    storage = f"sqlite:///{tmp_path / 's.db'}"
    grammar = tmp_path / "g.json"
    grammar.write_text(json.dumps({"format": "{a} [X] means [MASK] .", "slots": {"a": ["", "This :", "So"]}}))
    optuna.create_study(study_name="s", storage=storage, direction="maximize").ask()  # never told: RUNNING
    code = main(["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--trials", "2", "--grammar",
                 str(grammar), "--storage", storage, "--study-name", "s", "--out", str(tmp_path / "o.json"),
                 "--no-cache", "-q", "--no-bf16"])
    out = capsys.readouterr().out
    assert code == 0
    assert "1 running trials" in out and "heartbeat" in out and "90 s" in out


def test_unwritable_cache_is_said_once(world, tmp_path, capsys):
    """12. A cache that cannot be written: one warning, the scores still printed."""
    (tmp_path / "afile").write_text("x")
    code = main(["score", "--model", str(world["model"]), "--data-dir", str(world["small"]), "--cache",
                 str(tmp_path / "afile" / "c.jsonl"), "-q", "--no-bf16", "--validate-top", "0", PAPER_T,
                 "[X] means [MASK] ."])
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
    assert "results file" in ResultsFileSource(tmp_path / "other.json").load().error
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


# ---- issue 19: the second round ------------------------------------------------------------------

def test_a_plain_tsv_keeps_its_quotes_and_rows(tmp_path):
    """W1. A TSV has no quoting: quotes stay in the sentences and never merge rows; a pandas-written
    TSV (CSV-style quoting) still reads as it was written."""
    import datasets

    from promptsearch.data import load_task
    from promptsearch.data.user import load_pairs

    a, b, y = load_task("stsb-dev").subsets["dev"]
    rows = list(zip(a, b, y))[:760]
    assert sum('"' in x for x, _, _ in rows) > 5  # the data holds quote characters
    plain = tmp_path / "plain.tsv"
    plain.write_text("sentence1\tsentence2\tscore\n" + "".join(f"{x}\t{z}\t{s}\n" for x, z, s in rows),
                     encoding="utf-8")
    got = load_pairs(str(plain)).subsets["all"]
    assert got == ([r[0] for r in rows], [r[1] for r in rows], [r[2] for r in rows])
    balanced = tmp_path / "balanced.tsv"
    balanced.write_text("sentence1\tsentence2\tscore\n" + "".join(f'he said "hi {i}" .\tshe said "bye {i}" .\t{i % 5}\n'
                                                                  for i in range(40)), encoding="utf-8")
    got = load_pairs(str(balanced)).subsets["all"]
    assert len(got[0]) == 40 and got[0][3] == 'he said "hi 3" .'
    pandas_tsv = tmp_path / "pandas.tsv"
    datasets.Dataset.from_dict({"sentence1": a[:760], "sentence2": b[:760], "score": y[:760]}).to_csv(
        str(pandas_tsv), sep="\t", index=False)
    assert '""' in pandas_tsv.read_text(encoding="utf-8")  # CSV-style quoting really is in that file
    assert load_pairs(str(pandas_tsv)).subsets["all"] == ([r[0] for r in rows], [r[1] for r in rows],
                                                          [r[2] for r in rows])


def test_constant_similarities_are_an_error_not_nan(tiny_bert_dir):
    """W3. The gold scores vary (checked on loading); similarities that do not give no number."""
    from promptsearch import PromptSearchError
    from promptsearch.data import load_task
    from promptsearch.eval import STSEvaluator

    ev = STSEvaluator(load_task("sts16"))
    same = np.ones((len(ev.sentences), 4), np.float32)
    with pytest.raises(PromptSearchError, match="undefined.*same similarity"):
        ev.score(same)
    with pytest.raises(PromptSearchError, match="undefined"):
        ev.spearman(same)
    assert np.isnan(ev.spearman(same, np.arange(5)))  # a racing rung may be NaN; it is never recorded


def test_a_damaged_cache_line_is_skipped_with_one_warning(world, tmp_path, capsys):
    """T2. A line cut inside a UTF-8 character (an interrupted write): skipped, said once, the score the same."""
    cache = tmp_path / "c.jsonl"
    argv = ["score", "--model", str(world["model"]), "--data-dir", str(world["small"]), "--cache", str(cache), "-q",
            "--no-bf16", "--validate-top", "0", PAPER_T]
    assert main(argv) == 0
    first = capsys.readouterr().out
    with open(cache, "ab") as f:
        f.write(b'{"key": "caf\xc3')
    for _ in range(2):  # the damaged line stays (the file is only appended), and is said once a run
        assert main(argv + ["[X] means [MASK] ."]) == 0
        out, err = capsys.readouterr()
        assert err.count("1 damaged line") == 1 and "Traceback" not in err
        assert first.splitlines()[-1].split()[-1] in out  # the cached score of the paper template, unchanged


_cli = cli


def test_a_second_writer_of_one_results_file_is_refused(world, tmp_path):
    """L2. While one process writes --out, another is refused in one line and the file is untouched;
    once the first ends (the kernel drops its lock), the same command runs."""
    out = tmp_path / "best.json"
    argv = ["score", "--model", str(world["model"]), "--data-dir", str(world["small"]), "--no-cache", "-q", "--no-bf16",
            "--validate-top", "0", "--out", str(out), PAPER_T]
    holder = spawn([sys.executable, "-c", "import sys, time; from promptsearch.fileio import hold_write_lock; "
                               "hold_write_lock(sys.argv[1]); print('held', flush=True); time.sleep(120)", str(out)],
                   stderr=None)
    try:
        assert holder.stdout.readline().strip() == "held"
        out.write_text("{}")  # what the holder has written so far
        second = _cli(argv)
        _, err = second.communicate(timeout=120)
        assert second.returncode == 2, err
        lines = err.strip().splitlines()
        assert (len(lines) == 1 and str(out.resolve()) in lines[0] and f"pid {holder.pid}" in lines[0]
                and "--out" in lines[0]), err
        assert out.read_text() == "{}"
    finally:
        holder.kill()
        holder.wait()
    out.unlink()
    again = _cli(argv)
    _, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    assert json.loads(out.read_text())["templates"]


def _trial_scored(out) -> bool:
    """Whether a results file holds a score besides the model's own representation."""
    try:
        return any(e.get("source") != "baseline" for e in json.loads(out.read_text() or "{}").get("templates", []))
    except (OSError, ValueError):
        return False


@pytest.mark.parametrize("signals, code", [(["SIGINT"], 130), (["SIGTERM"], 143), (["SIGINT", "SIGINT"], 130)])
def test_interrupting_optuna_is_one_line_and_leaves_no_running_trial(signals, code, tiny_bert_dir, tmp_path):
    """T1. Ctrl-C / SIGTERM / Ctrl-C twice during a study: the CLI's one line (no Optuna traceback),
    the interrupted trial failed rather than left RUNNING, and the study resumes."""
    import optuna

    out = tmp_path / "o.json"
    storage = f"sqlite:///{tmp_path / 'o.db'}"
    argv = ["optuna", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--trials", "500", "--out", str(out),
            "--storage", storage, "--study-name", "s", "--no-cache", "-q", "--no-bf16", "--validate-top", "0"]
    p = _cli(argv)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not _trial_scored(out):  # (the model's own comes first)
        time.sleep(0.02)
    for s in signals:
        p.send_signal(getattr(signal, s))
        time.sleep(0.02)
    _, err = p.communicate(timeout=120)
    assert p.returncode == code, err
    assert "Traceback" not in err and "Exception ignored" not in err and "failed" not in err, err
    what = "terminated" if code == 143 else "interrupted"
    last = err.strip().splitlines()[-1]
    assert what in last and str(out) in last and "resume" in last, err
    states = [t.state for t in optuna.load_study(study_name="s", storage=storage).trials]
    assert optuna.trial.TrialState.RUNNING not in states and states
    done = sum(s in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED) for s in states)
    argv[argv.index("--trials") + 1] = str(done + 1)
    again = _cli(argv)
    _, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    assert json.loads(out.read_text())["x_study"]["finished"] >= done + 1


@pytest.mark.realmodel
@pytest.mark.parametrize("after", [0.0, 0.5])
def test_ctrl_c_during_start_up_is_one_line(after, tmp_path):
    """T5. Ctrl-C while the command starts (imports, model loading): one line, exit 130, and no claim
    that results were saved where nothing was written. The signal is sent once the process is
    loading torch (its library mapped in: the command's own imports have begun), then ``after``
    seconds later — never by a wall-clock guess, which under load can land in Python's start-up."""
    out = tmp_path / "never.json"
    p = _cli(["greedy", "--model", "default", "--out", str(out), "--no-cache", "-q"])
    maps = f"/proc/{p.pid}/maps"
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and "libtorch" not in open(maps, encoding="utf-8",
                                                                                 errors="replace").read():
        time.sleep(0.005)
    time.sleep(after)
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "interrupted" in err and "saved" not in err and not out.exists()


@pytest.mark.parametrize("sig, code, word", [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
@pytest.mark.parametrize("after", [0.0, 0.3])
def test_ctrl_c_after_the_command_finished_keeps_its_status(after, sig, code, word, tiny_bert_dir):
    """Ctrl-C (or SIGTERM) once a command has printed its answer, while Python shuts down (a second or more once
    torch is loaded): the finished command's status (0) and nothing more on stderr, not a KeyboardInterrupt's
    traceback in a library's exit handler or a death by the signal (status -2, -15). The signal is sent once the
    answer is read, ``after`` seconds later, to a process still running (else the case proves nothing and is said
    so). On a loaded machine it may land before the command has returned from printing: then it is the command's
    interrupt, its one line and 130 (143); never a traceback or a death by the signal."""
    p = _cli(["eval", "--model", str(tiny_bert_dir), "--pooling", "mean", "--tasks", "stsb-dev", "--json", "-q"])
    assert p.stdout is not None
    lines = []
    while (line := p.stdout.readline()) and line.rstrip() != "}":
        lines.append(line)
    time.sleep(after)
    if p.poll() is not None:
        pytest.skip(f"the process had already left {after} s after its answer")
    p.send_signal(sig)
    rest, err = p.communicate(timeout=120)
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    if p.returncode == code:  # (a loaded machine) the command had not yet returned: interrupted, in its one line
        assert err.strip().splitlines()[-1] == f"promptsearch eval: {word}", err
    else:
        assert p.returncode == 0 and word not in err, (p.returncode, err)
    assert "stsb-dev" in json.loads("".join(lines) + "}\n" + rest)


def test_a_signal_while_a_finished_commands_handlers_are_put_back_keeps_its_status(monkeypatch, capsys):
    """A clean run caught it: SIGTERM in the instant the command's own SIGTERM handler was being put back (inside the
    restoring ``signal.signal`` call, the command's status had) raised its KeyboardInterrupt past every except of
    main, a traceback. The finished command's status stands, as once Python shuts down."""
    from promptsearch import interrupts

    real, calls = interrupts.signal.signal, []

    def restoring_one(sig, handler):
        calls.append(sig)
        if sig == signal.SIGTERM and calls.count(signal.SIGTERM) == 2:  # terminable putting the handler back
            real(sig, handler)
            raise KeyboardInterrupt
        return real(sig, handler)

    monkeypatch.setattr(interrupts.signal, "signal", restoring_one)
    assert main(["eval", "--seed", "1"]) == 2  # a usage error: its status had, then the signal
    assert calls.count(signal.SIGTERM) >= 2 and "unrecognized arguments" in capsys.readouterr().err


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_ctrl_c_that_lands_in_a_finalizer_is_not_lost(sig):
    """From a user's trial (1 Ctrl-C in 25): a Ctrl-C whose handler ran while the garbage collector ran a finalizer
    (the ``regex`` module's ``__del__``) raised its KeyboardInterrupt there, where Python prints "Exception ignored"
    and drops it; the search ran to its end and left with status 0. The command's handlers send it again once the
    finalizer has returned: the code running then gets it (a SIGTERM as the command raises it: a KeyboardInterrupt,
    the command noting it came), and nothing is printed of the dropped one."""
    script = f"""
import os, signal, sys, time
from promptsearch.__main__ import handle_signals
from promptsearch.interrupts import terminable
handle_signals()

class Finalized:
    def __del__(self):
        os.kill(os.getpid(), {int(sig)})
        t = time.time()
        while time.time() - t < 1:  # the handler runs in here: Python drops what it raises
            pass

with terminable() as terminated:
    try:
        Finalized()
        t = time.time()
        while time.time() - t < 10:
            pass
        print("lost")
    except KeyboardInterrupt:
        print("interrupted", terminated)
"""
    p = spawn([sys.executable, "-c", script])
    out, err = p.communicate(timeout=60)
    assert out.strip() == f"interrupted {[int(sig)] if sig == signal.SIGTERM else []}", (out, err)
    assert "Exception ignored" not in err and "Traceback" not in err, err


def test_an_ignored_ctrl_c_stays_ignored(tiny_bert_dir):
    """A command started with SIGINT ignored (a script's background job: the shell ignores it there) keeps it
    ignored, as before the handler for Ctrl-C after a command's end: a Ctrl-C to the script does not stop it. The
    signal is sent once the command loads torch (its work begun)."""
    import shlex

    argv = ["eval", "--model", str(tiny_bert_dir), "--pooling", "mean", "--tasks", "stsb-dev", "--json", "-q"]
    p = spawn(["bash", "-c", "trap '' INT; exec " + shlex.join([sys.executable, "-m", "promptsearch", *argv])])
    maps, deadline = f"/proc/{p.pid}/maps", time.time() + 120
    while time.time() < deadline and p.poll() is None and "libtorch" not in open(maps, encoding="utf-8",
                                                                                 errors="replace").read():
        time.sleep(0.005)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 0 and "interrupted" not in err, err
    assert "stsb-dev" in json.loads(out)


def test_an_unreachable_hub_fails_at_once(tiny_bert_dir):
    """U2. HF_HUB_OFFLINE unset and the hub unreachable (here: a closed port on this machine): one
    line, not a dozen lines of retries."""
    p = _cli(["eval", "--model", str(tiny_bert_dir), "--pooling", "mean", "--tasks", "nobody/no-such-set@test", "-q"],
             env={"HF_HUB_OFFLINE": None, "HF_ENDPOINT": "http://127.0.0.1:9"})
    _, err = p.communicate(timeout=120)
    assert p.returncode == 2 and len(err.strip().splitlines()) == 1, err
    assert "'nobody/no-such-set'" in err and "Hugging Face Hub" in err


def test_a_tokenizer_that_makes_no_tokens_is_one_line(tiny_gpt2_dir, tmp_path, capsys):
    """From a user's trial: a GPT-2 tokenizer built by hand came out empty (every text no tokens), and ``eval``
    ended in a reshape's traceback. It is now refused as the model is loaded: one line, exit 2."""
    bad = tmp_path / "empty-tokenizer"
    shutil.copytree(tiny_gpt2_dir, bad)
    tok = json.loads((bad / "tokenizer.json").read_text())
    tok["model"]["vocab"], tok["model"]["merges"] = {"<|endoftext|>": 0}, []
    (bad / "tokenizer.json").write_text(json.dumps(tok))
    capsys.readouterr()
    assert main(["eval", "--model", str(bad), "--pooling", "mean", "--tasks", "stsb-dev", "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "turns text into no tokens" in err, err


def test_a_vocabulary_of_other_text_is_not_refused_as_empty(tmp_path):
    """The review's case for the check above: a BPE vocabulary of Chinese characters alone (no unknown token) turns
    the check's English into no tokens, and is a tokenizer all the same: loaded, not refused."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertForMaskedLM, PreTrainedTokenizerFast

    from promptsearch.model.loading import load_model

    tk = Tokenizer(models.BPE(vocab={"你": 0, "好": 1, "你好": 2, "[MASK]": 3, "[PAD]": 4}, merges=[("你", "好")]))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tk, mask_token="[MASK]", pad_token="[PAD]").save_pretrained(tmp_path)
    BertForMaskedLM(BertConfig(vocab_size=8, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=37)).save_pretrained(tmp_path)
    m = load_model(str(tmp_path), device="cpu")
    assert m.tokenizer("你好", add_special_tokens=False)["input_ids"] == [2]
    assert m.tokenizer("A sentence", add_special_tokens=False)["input_ids"] == []



def _word_level_model(folder, vocab: dict, unk: str | None):
    """A tiny BERT under a word-level tokenizer of ``vocab`` that declares no special token to transformers."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk))
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=tk).save_pretrained(folder)
    BertModel(BertConfig(vocab_size=len(vocab) + 2, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=37)).save_pretrained(folder)
    return folder


@pytest.mark.parametrize("unk, says", [("[UNK]", "has no pad token"), (None, "fails on plain text")])
def test_a_tokenizer_that_cannot_pad_or_tokenize_is_one_line(tmp_path, capsys, unk, says):
    """A tokenizer with no pad token and nothing to stand in for one (no end-of-text or unknown-word token):
    sentence-transformers' padding raised transformers' ValueError from inside the encoder, a traceback; and a
    word-level vocabulary with no unknown-word token raised tokenizers' own error on the first word it lacks. Both
    are refused as the model is loaded, one line, exit 2."""
    words = ["a", "man", "plays", "the", "sentence"] + ([unk] if unk else [])
    bad = _word_level_model(tmp_path / "m", {w: i for i, w in enumerate(words)}, unk)
    capsys.readouterr()
    assert main(["eval", "--model", str(bad), "--pooling", "mean", "--tasks", "stsb-dev", "-q"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err, err


def test_output_piped_into_a_reader_that_stops_ends_quietly(tiny_bert_dir):
    """From a user's trial: ``promptsearch retrieval ... | head -1`` ended in a BrokenPipeError's traceback as the
    summary was printed after ``head`` left. A reader that stops now ends the command quietly with 141 (a shell's
    status for a writer stopped by SIGPIPE); its results were saved before the summary."""
    p = cli(["eval", "--model", str(tiny_bert_dir), "--pooling", "mean", "--tasks", "stsb-dev", "-q"])
    p.stdout.close()  # the reader gone before the command writes its table
    err = p.stderr.read()
    assert p.wait(timeout=120) == 141 and "Traceback" not in err and "BrokenPipe" not in err, err
