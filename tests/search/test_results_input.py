"""Bad input, third round (issue 34): results that mix data or settings, keys read as text, a
symlinked or read-only ``--out``, and tracebacks — each gives the right number or one line with
exit 2, and leaves every file as it was."""

import json
import os
import re
import stat

import pytest
from conftest import DATA, PAPER_T
from conftest import stsb_dev_csv as _pairs_csv

from promptsearch.cli import main

T2 = "[X] means [MASK] ."



@pytest.fixture()
def base(tiny_bert_dir):
    return ["score", "--model", str(tiny_bert_dir), "--no-cache", "-q", "--no-bf16", "--validate-top", "0"]


def _one_line(capsys, code, message):
    err = capsys.readouterr().err
    assert code == 2, err
    words = (message,) if isinstance(message, str) else message
    assert len(err.strip().splitlines()) == 1 and all(w in err for w in words) and "Traceback" not in err, err


@pytest.mark.parametrize("template, message", [
    (T2 + " @layer 3", ("layer 3", "out of range")),
    (T2 + " @layer x", ("read-out layer", "'@layer'")),
    (PAPER_T + " + ", "dangling '+'"),
])
def test_a_results_key_is_not_read_as_text(tiny_bert_dir, capsys, template, message):
    """1. ``T @layer 3`` and ``A + `` were scored as literal text under the real read-out's label: one
    key parser reads them wherever a template is read, and a key that does not parse (or names a layer
    the model has not: 2 layers here) is an error before any pass (report: before the Ditto head search)."""
    for cmd in ("eval", "report"):
        _one_line(capsys, main([cmd, "--model", str(tiny_bert_dir), "--template", template, "--tasks", "sts16", "-q"]),
                  message)
    _one_line(capsys,
              main(["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--no-cache", "-q", template]),
              "names a read-out layer" if "@layer" in template else message)


def test_eval_reads_a_key_as_the_representation_it_names(tiny_bert_dir, capsys):
    got = {}
    for how in (["--template", T2 + " @layer 1", "--denoise"], ["--template", T2, "--layer", "1", "--denoise"],
                ["--template", "query : [X] @sentence-mean"],
                ["--template", "query : [X]", "--readout", "sentence-mean"]):
        assert main(["eval", "--model", str(tiny_bert_dir), *how, "--tasks", "sts16", "--json", "-q", "--no-bf16"]) == 0
        got[len(got)] = json.loads(capsys.readouterr().out)["sts16"]
    assert got[0] == got[1] and got[2] == got[3] and got[0] != got[2]


def test_resuming_after_the_data_changed_is_refused(base, tmp_path, capsys):
    """2. The results file records each set's content fingerprint, not just its name."""
    mine, out = _pairs_csv(tmp_path / "mine.csv", 0, 40), tmp_path / "mine.json"
    assert main(base + ["--dataset", str(mine), "--out", str(out), PAPER_T]) == 0
    before = out.read_bytes()
    _pairs_csv(mine, 400, 440)
    _one_line(capsys, main(base + ["--dataset", str(mine), "--out", str(out), T2]), "other contents of")
    assert out.read_bytes() == before


@pytest.mark.parametrize("flag",
                         [["--max-length", "9"], ["--no-period"], ["--bf16"],
                          ["--dataset", "sts16,stsb-dev", "--objective", "min"]])
def test_resuming_with_other_settings_is_refused(base, tmp_path, capsys, flag):
    """3. A setting that changes a number is recorded and checked on resume."""
    out = tmp_path / "r.json"
    first = ["--dataset", "sts16,stsb-dev"] if "--objective" in flag else []
    assert main(base + first + ["--out", str(out), PAPER_T]) == 0
    before = out.read_bytes()
    code = main(base + flag + ["--out", str(out), T2])
    _one_line(capsys, code, "--out")
    assert out.read_bytes() == before


def test_json_and_jsonl_of_the_same_records_give_the_same_spearman(tiny_bert_dir, tmp_path, capsys):
    """4. A JSON list was read through pandas' lossy float parser: 1e-12 steps became ties."""
    rows = (DATA / "STSBenchmark" / "sts-dev.csv").read_text(encoding="utf-8").splitlines()[:60]
    recs = []
    for k, r in enumerate(rows):
        p = r.split("\t")
        recs.append({"sentence1": p[5], "sentence2": p[6],
                     "score": round(float(p[4])) + k * 1e-12 + (0.5 if k % 2 else 0)})
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs), encoding="utf-8")
    (tmp_path / "p.json").write_text(json.dumps(recs), encoding="utf-8")
    got = {}
    for name in ("p.json", "p.jsonl"):
        assert main(["eval", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--tasks", str(tmp_path / name),
                     "--json", "-q", "--no-bf16"]) == 0
        got[name] = json.loads(capsys.readouterr().out)[str(tmp_path / name)]
    assert got["p.json"] == got["p.jsonl"]


def test_out_through_a_symlink_updates_its_target(base, tmp_path):
    """7. The link was replaced by a plain file and its target never updated."""
    target, link = tmp_path / "real.json", tmp_path / "link.json"
    assert main(base + ["--out", str(target), PAPER_T]) == 0
    link.symlink_to(target)
    assert main(base + ["--out", str(link), T2]) == 0
    assert link.is_symlink() and len(json.loads(target.read_text())["templates"]) == 3  # the model's own + 2


def test_a_read_only_out_is_refused_and_a_mode_is_kept(base, tmp_path, capsys):
    """8. As root a read-only results file was replaced (mode back to 0644)."""
    out = tmp_path / "ro.json"
    assert main(base + ["--out", str(out), PAPER_T]) == 0
    os.chmod(out, 0o444)
    before = out.read_bytes()
    _one_line(capsys, main(base + ["--out", str(out), T2]), "is read-only")
    assert out.read_bytes() == before and stat.S_IMODE(out.stat().st_mode) == 0o444
    os.chmod(out, 0o640)
    assert main(base + ["--out", str(out), T2]) == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o640


def test_predict_top_k_beyond_the_vocabulary(tiny_bert_dir, capsys):
    """9. ``--top-k 100000`` was a RuntimeError; special tokens must never be listed."""
    assert main(["predict", "--model", str(tiny_bert_dir), "--top-k", "100000", "--json", "--no-bf16", "a man ."]) == 0
    cap = capsys.readouterr()
    rows = json.loads(cap.out)
    words = [w for w, _ in rows[0]["raw"]]
    assert "is more than this model's" in cap.err and len(words) == len(set(words)) > 100
    assert not {"[MASK]", "[UNK]", "[SEP]", "[CLS]", "[PAD]"} & set(words)


def test_a_results_file_that_is_not_utf8(tiny_bert_dir, base, tmp_path, capsys):
    """10. UnicodeDecodeError in every command that reads a results file."""
    bad = tmp_path / "bad.json"
    bad.write_bytes(b'{"schema": "promptsearch.results/2", "model": "caf\xe9"}')
    before = bad.read_bytes()
    for argv in (["plot", str(bad)], base + ["--out", str(bad), PAPER_T],
                 ["finetune", "--model", str(tiny_bert_dir), "--templates", str(bad), "--out", str(tmp_path / "ft"),
                  "-q"],
                 ["optuna", "--model", str(tiny_bert_dir), "--compare", str(bad), "--out", str(tmp_path / "o.json"),
                  "-q"]):
        _one_line(capsys, main(argv), "is not UTF-8 text")
    assert bad.read_bytes() == before


def test_plot_into_a_missing_folder(base, tmp_path):
    """11. ``plot --out missing_folder/x.svg`` was a FileNotFoundError."""
    out = tmp_path / "s.json"
    assert main(base + ["--out", str(out), PAPER_T, T2]) == 0
    svg = tmp_path / "missing" / "deeper" / "x.svg"
    assert main(["plot", str(out), "--out", str(svg)]) == 0 and svg.read_text().lstrip().startswith("<?xml")


def test_bf16_scores_are_cached_per_batching(tiny_bert_dir, tmp_path):
    """5. In bf16 a row's state depends on its batch: ``--max-tokens 64`` then a default run with the
    same cache returned the ``--max-tokens 64`` number. Now the second run scores afresh."""
    cache = tmp_path / "c.jsonl"
    argv = ["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--cache", str(cache), "-q", "--bf16",
            "--validate-top", "0"]
    assert main(argv + ["--max-tokens", "64", "--out", str(tmp_path / "a.json"), PAPER_T]) == 0
    assert main(argv + ["--out", str(tmp_path / "b.json"), PAPER_T]) == 0
    assert main(argv[:5] + ["--no-cache"] + argv[7:] + ["--out", str(tmp_path / "c.json"), PAPER_T]) == 0
    got = {n: json.loads((tmp_path / f"{n}.json").read_text()) for n in "abc"}
    assert got["b"]["stats"]["cached"] == 0
    assert got["b"]["templates"][0]["spearman"] == got["c"]["templates"][0]["spearman"]


def test_a_warm_cache_does_not_change_the_search(tiny_bert_dir, tmp_path):
    """6. Cached full-set scores skipped a racing rung, so survivors (and the answer) differed."""
    from conftest import write_vocab as _vocab

    vocab = _vocab(tmp_path)
    argv = ["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--vocabulary", vocab, "--max-steps", "2",
            "-q",
            "--no-bf16", "--validate-top", "0", "--readouts", "none", "--race-rungs", "0.25,0.5", "--finalists", "1"]
    assert main(argv + ["--no-cache", "--out", str(tmp_path / "cold.json")]) == 0
    cache = tmp_path / "warm.jsonl"  # scores of some candidates — the weak ones a race would drop — cached beforehand
    assert main(["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--cache", str(cache), "-q", "--no-bf16",
                 "--validate-top", "0", "[X] [MASK] .", "[X] like [MASK] .", "This [X] means [MASK] ."]) == 0
    assert main(argv + ["--cache", str(cache), "--out", str(tmp_path / "warm.json")]) == 0
    cold, warm = (json.loads((tmp_path / f"{n}.json").read_text()) for n in ("cold", "warm"))
    path = lambda d: [(r["stage"], r["template"], r["spearman"], r.get("dropped")) for r in d["path"]]  # noqa: E731
    assert path(cold) == path(warm) and cold["x_chosen"] == warm["x_chosen"]


def test_a_hand_edited_or_foreign_winner_is_said(base, tmp_path, capsys):
    """15. A hand-edited entry (99.9, never scored) was rank 1 and trained on without a word; so was a
    results file searched on another model."""
    from promptsearch.search.results import Results

    out = tmp_path / "r.json"
    assert main(base + ["--out", str(out), PAPER_T, T2]) == 0
    assert Results.load(out).unverified() == []
    d = json.loads(out.read_text())
    d["templates"][-1]["spearman"] = 99.9
    d["x_chosen"] = d["templates"][-1]["template"]
    out.write_text(json.dumps(d))
    res = Results.load(out)
    assert res.unverified() == [res.best.entry_key] and res.best.spearman == 99.9
    notes = res.trust_notes("another-model")
    assert "search wrote" in notes[0] and "not 'another-model'" in notes[1]
    capsys.readouterr()
    assert main(base + ["--out", str(out), PAPER_T]) == 0  # resumed: the edit is not laundered by a rewrite
    assert "note: " in capsys.readouterr().out and Results.load(out).unverified()



@pytest.mark.parametrize("field, value", [("x_baseline", {"key": "no placeholder"}),
                                          ("x_pareto", ["[X] means [MASK] . @layer x"])])
def test_a_results_key_edited_into_one_that_does_not_read_is_one_line(base, tmp_path, capsys, field, value):
    """The keys a results file names (the baseline's, the Pareto front's) are read as it loads: one edited
    into something that is not a key is one line naming the file and the field, not a template error."""
    out = tmp_path / "r.json"
    assert main(base + ["--out", str(out), PAPER_T]) == 0
    d = json.loads(out.read_text())
    d[field] = value
    out.write_text(json.dumps(d))
    capsys.readouterr()
    assert main(["plot", str(out), "--out", str(tmp_path / "r.svg")]) == 2
    err = capsys.readouterr().err.strip()
    assert str(out) in err and field in err and "key" in err and "\n" not in err and not (tmp_path / "r.svg").exists()

@pytest.mark.parametrize("lines, message", [
    (["a dog runs .\tdog", "the [MASK] sleeps .\tcat"], ("pool.tsv:2", "[MASK]")),
    (["a dog runs .\tdog", "[X] rains .\train"], ("pool.tsv:2", "[X]")),
    ([f"sentence {i} .\tword" for i in range(200)], "200 demonstrations"),
])
def test_a_demos_pool_is_checked_before_anything_runs(tiny_bert_dir, tmp_path, capsys, lines, message):
    """12/13. A pool line holding [X] or [MASK] was found after the whole search, naming a generated
    template; a 100,000-line pool had no bound."""
    pool, out = tmp_path / "pool.tsv", tmp_path / "best.json"
    pool.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _one_line(capsys, main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--demos-pool", str(pool),
                            "--out", str(out), "--no-cache", "-q"]), message)
    assert not out.exists()


def test_a_demos_pool_byte_order_mark_is_not_text(tmp_path):
    from promptsearch.library import read_demos

    pool = tmp_path / "pool.tsv"
    pool.write_bytes("a dog runs .\tdog\n".encode("utf-8-sig"))
    assert read_demos(str(pool)) == [("a dog runs .", "dog")]


def test_late_or_unclear_training_and_dataset_input(tiny_bert_dir, tmp_path, capsys):
    """14. Extra --template views were dropped silently; an empty --dataset was told to use --tasks; the
    summary named STS-B dev whatever --dataset was."""
    _one_line(capsys, main(["finetune", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--template", T2,
                            "--template", "[X] is [MASK] .", "--out", str(tmp_path / "ft"), "-q"]), "--template")
    _one_line(capsys, main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "", "--out", str(tmp_path / "g.json"),
                            "-q"]), ("--dataset", "empty"))
    # the run reports, and records, the dev set it was given under that set's own name
    ft = tmp_path / "sick"
    assert main(["finetune", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--dataset", "sick-trial",
                 "--max-steps", "1", "--train-batch-size", "8", "--micro-batch", "4", "--out", str(ft), "--final-tasks",
                 "sts16", "-q", "--no-bf16"]) == 0
    assert re.search(r"finetune unsup: SICK-R trial [\d.]+ \(start\) -> ", capsys.readouterr().out)
    saved = json.loads((ft / "promptsearch.json").read_text())["finetune"]
    assert saved["dev_set"] == "sick-trial" and "dev" in saved and "stsb_dev" not in saved


def test_a_retrieval_results_file_is_named_as_one_where_template_scores_are_read(tmp_path):
    from promptsearch.errors import PromptSearchError
    from promptsearch.search import Results

    p = tmp_path / "retrieval.json"
    p.write_text(json.dumps({"kind": "retrieval", "version": 1, "model": "default", "entries": []}))
    with pytest.raises(PromptSearchError, match="holds a retrieval search") as e:
        Results.load(p)
    assert "promptsearch export" in str(e.value) and "\n" not in str(e.value)
