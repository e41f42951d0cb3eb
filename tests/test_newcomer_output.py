"""What a newcomer met in the main job (issue 46, items 29-38): held-out validation of the answer only, the
greedy table within 80 columns, the plot's labels and order, the column and bar names."""

import json

import pytest
from conftest import write_vocab

from promptsearch.cli import main

DATASET = "sts16"  # 1,186 real pairs


def _greedy(tiny_bert_dir, tmp_path, *extra):
    out = tmp_path / "best.json"
    argv = ["greedy", "--model", str(tiny_bert_dir), "--dataset", DATASET, "--vocabulary", write_vocab(tmp_path),
            "--max-steps", "1", "--out", str(out), "--no-cache", "--no-bf16", "--no-racing", "--validate-on", "sts13",
            "--readouts", "mean", *extra]
    assert main(argv) == 0
    return out, json.loads(out.read_text(encoding="utf-8"))


def _key(e):
    return e["template"] + (" @" + e["readout"] if e.get("readout") else "")


def test_held_out_validation_scores_the_answer_and_the_best_mask_template_only(tiny_bert_dir, tmp_path, capsys):
    """Item 29: by default the chosen representation and the best [MASK] template, announced with its cost first."""
    out, d = _greedy(tiny_bert_dir, tmp_path)
    err = capsys.readouterr().err
    held = {_key(e) for e in d["templates"] if "validation" in e}
    best_mask = next(_key(e) for e in d["templates"] if not e.get("readout") and not e.get("members"))
    assert held == {d["x_chosen"], best_mask}  # 8 before: the best 5, the model's own, the path
    assert d["validation"]["top"] == 0 and d["validation"]["tasks"] == ["sts13"]
    line = next(x for x in err.splitlines() if x.startswith("held-out validation:"))
    n = len(held)
    assert f"{n} representation" in line and f"{n} × " in line and "sentences" in line and "--validate-top 0" in line


def test_validate_top_k_still_scores_the_best_k_and_the_path(tiny_bert_dir, tmp_path):
    out, d = _greedy(tiny_bert_dir, tmp_path, "--validate-top", "2", "-q")
    held = {_key(e) for e in d["templates"] if "validation" in e}
    path = {r["template"] for r in d["path"] if r["stage"] in ("relation:best", "prefix")}
    ranked = sorted(d["templates"], key=lambda e: -e["spearman"])
    assert held == {_key(e) for e in ranked[:2]} | path | {"[X] @mean", d["x_chosen"]}
    assert d["validation"]["top"] == 2


def test_the_plot_labels_the_answer_chosen_and_orders_candidates_as_searched(tmp_path):
    """Item 31: the README's main job (docs/results/greedy-readout-default.json) answers with the model's own
    [X] @mean, which is also the best read-out; its step said '(not taken)', and the candidates' panel put the
    read-out step before the prefix step (sorted by name)."""
    from conftest import REPO

    from promptsearch.search.plots import _path_steps, _sources, plot_results
    from promptsearch.search.results import Results

    res = Results.load(REPO / "docs" / "results" / "greedy-readout-default.json")
    labels = [label for label, _, _ in _path_steps(res.path_steps, res.best.entry_key)]
    assert labels[-1] == "read-out [X] @mean (chosen)" and not any("not taken" in x for x in labels)
    names = list(_sources(res))
    assert names.index("relation") < names.index("prefix step 1") < names.index("greedy:readout")
    assert plot_results(REPO / "docs" / "results" / "greedy-readout-default.json", tmp_path / "p.svg")[0].stat().st_size


def test_a_best_read_out_that_is_not_taken_says_so():
    from promptsearch.representation import Representation
    from promptsearch.search.plots import _path_steps
    from promptsearch.search.state import PathStep

    step = PathStep(stage="readout:best", step=3, template="query: [X] @mean", spearman=80.0, lead="[X] is [MASK] .",
                    taken=False)
    assert _path_steps([step], Representation("[X] is [MASK] ."))[0][0].endswith("(not taken)")
    assert _path_steps([step], step.entry_key)[0][0].endswith("(chosen)")
    step.lead = step.template  # the best read-out is the best so far (an ensemble then grows from it)
    assert _path_steps([step],
                       Representation.ensemble([step.entry_key, Representation("[X] is [MASK] .")]))[0][0].endswith(
        "(the best so far: stays)")


def test_the_greedy_table_fits_an_80_column_terminal(monkeypatch):
    """Item 32: the README's main job printed a table 157 columns wide (long notes and read-out prompts set the
    label column), which wraps on an 80-column terminal; every number must still be there."""
    from conftest import REPO

    from promptsearch.search.greedy import format_path
    from promptsearch.search.results import Results

    monkeypatch.setenv("COLUMNS", "80")
    for name in ("greedy-readout-default", "greedy-readout-ensemble-default", "greedy-multi-default", "greedy-default"):
        res = Results.load(REPO / "docs" / "results" / f"{name}.json")
        table = format_path(res.path_steps, res)
        assert max(map(len, table.splitlines())) <= 80, name
        held = (res.validation or {}).get("tasks", [])  # named as score's and eval's tables name them (a trial)
        assert not held or table.splitlines()[0].split()[-len(held):] == [{"stsb": "STS-B", "sickr": "SICK-R"}.get(
            t, t) for t in held], table.splitlines()[0]
        for step in res.path_steps:
            if step.stage not in ("relation:best", "layer:best", "readout:best", "readout-stop"):
                assert f"{step.spearman:.2f}" in table
        for e in res.entries.values():
            for v in (e.validation or {}).values():
                assert f"{v:.2f}" in table or e.key not in {s.key for s in res.path_steps}
    monkeypatch.setenv("COLUMNS", "200")  # a wider terminal: the templates whole
    res = Results.load(REPO / "docs" / "results" / "greedy-readout-default.json")
    assert "Represent the meaning of this sentence: [X] @sentence-mean " in format_path(res.path_steps, res)


def test_score_does_not_say_denoised_over_pooled_rows(tiny_bert_dir, tmp_path, capsys):
    """Item 33: 'score' headed its column '(denoised)' over rows that are pooled read-outs (denoising is a
    [MASK]-state thing)."""
    argv = ["score", "--model", str(tiny_bert_dir), "--dataset", DATASET, "--no-cache", "-q", "--no-bf16",
            "--validate-top", "0", "--readout", "mean", "query: [X]"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    head = next(x for x in out.splitlines() if x.lstrip().startswith("rank"))
    assert "(pooled)" in head and "denoised" not in out
    assert main(argv[:-3] + ["[X] means [MASK] ."]) == 0  # with the model's own pooled row: the [MASK] rows are
    head = next(x for x in capsys.readouterr().out.splitlines() if x.lstrip().startswith("rank"))
    assert "([MASK] rows denoised)" in head  # not the pooled row
    assert main(argv[:-3] + ["--no-denoise", "[X] means [MASK] ."]) == 0
    head = next(x for x in capsys.readouterr().out.splitlines() if x.lstrip().startswith("rank"))
    assert "([MASK] rows raw)" in head


def test_a_ranking_of_mask_templates_only_still_says_denoised():
    from conftest import REPO

    from promptsearch.search.results import Results

    res = Results.load(REPO / "docs" / "results" / "greedy-default.json")
    assert "STS-B dev (denoised)" in res.format_ranking(3)


def test_eval_bars_name_their_task(bert_enc, monkeypatch):
    """Item 34: 'eval --tasks sts-all' showed seven bars that all said 'encode:'."""
    import promptsearch.encoding.encoder as encoder_module
    from promptsearch.encoding.reps import rep_from_key
    from promptsearch.eval import evaluate_reps

    said = []
    real = encoder_module.tqdm
    monkeypatch.setattr(encoder_module, "tqdm", lambda *a, **kw: said.append(kw.get("desc")) or real(*a, **kw))
    reps = [rep_from_key("[X] means [MASK] .", denoise=True), rep_from_key("[X] @mean", denoise=False)]
    evaluate_reps(bert_enc, reps, ["sts12", "sts16"])
    assert {"encode sts12", "encode sts16"} <= set(said) and "encode" not in said
    said.clear()
    bert_enc.encode(["a man plays ."], template="[X] means [MASK] .")  # outside an evaluation: the verb alone
    assert said and set(said) <= {"encode"}


def test_the_readme_never_sends_two_different_searches_into_one_results_file():
    """Item 38: the tour's search (two dev sets) wrote --out best.json, the file the first command had just
    written with one dev set, and was refused ('holds a run with dataset=...'). Each results file the README's
    searches write is written by one command line only (run again, it resumes)."""
    from conftest import REPO
    from test_docs import _argv, shown_commands

    from promptsearch.cli.parser import build_parser

    writers: dict[str, set] = {}
    for c in shown_commands((REPO / "README.md").read_text(encoding="utf-8")):
        argv = _argv(c)
        args = build_parser().parse_args(argv)
        if args.command in ("greedy", "optuna", "t5", "score") and args.out:
            writers.setdefault(args.out, set()).add(tuple(argv))
    assert writers and all(len(v) == 1 for v in writers.values()), writers


# ---- item 35: the docs ------------------------------------------------------------------------------------
def _pages():
    from conftest import REPO

    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def _slug(heading: str) -> str:
    """A heading's anchor as MkDocs' toc extension makes it."""
    import re

    text = re.sub(r"[`*_]", "", heading).strip().lower()
    return re.sub(r"[\s]+", "-", re.sub(r"[^\w\s-]", "", text))


def _anchors(page) -> set[str]:
    import re

    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return {_slug(m) for m in re.findall(r"^#{1,6} (.+)$", text, re.M)}


def test_no_link_is_empty_and_every_anchor_names_a_section():
    """index.md had '[`docs/`]()' (the README's link to its own docs folder, made relative); the search guide
    sent readers to sections that did not exist."""
    import re

    bad = []
    for page in _pages():
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]*)\)", text):
            if not target:
                bad.append(f"{page.name}: empty link")
                continue
            if target.startswith(("http:", "https:")) or "#" not in target:
                continue
            where, anchor = target.split("#", 1)
            dest = (page.parent / where).resolve() if where else page
            generated = dest.exists() and "\n::: " in dest.read_text(encoding="utf-8")  # mkdocstrings' anchors
            if dest.suffix == ".md" and not generated and (not dest.exists() or anchor not in _anchors(dest)):
                bad.append(f"{page.name}: {target}")
    assert not bad, bad


def test_the_search_guide_puts_its_results_under_a_heading():
    import re

    from conftest import REPO

    text = (REPO / "docs" / "guides" / "search.md").read_text(encoding="utf-8")
    before = text[: text.index("These runs predate")]
    assert re.findall(r"^## (.+)$", before, re.M)[-1] == "Search results: the default model"
    assert "Faster search" not in text and '"[MASK] predictions" below' not in text


def test_the_training_guide_names_the_views_its_command_trains():
    """The guide measured 'finetune --templates best.json' with two [MASK] views; today's main job answers with
    the model's own mean pooling, so that command trains a pooled read-out. The guide's measured commands name
    the results file whose views it reports, and those are the views that file gives."""
    import re

    from conftest import REPO

    from promptsearch.search.results import Results
    from promptsearch.train.finetune import choose_templates

    text = (REPO / "docs" / "guides" / "training.md").read_text(encoding="utf-8")
    measured = text[text.rindex("Measured on the default model"):]
    files = set(re.findall(r"finetune --mode \w+ --templates (\S+)", measured))
    assert files == {"docs/results/greedy-default.json"}
    views, _, _ = choose_templates("unsup", results=Results.load(REPO / "docs/results/greedy-default.json"))
    assert all(f"`{v}`" in measured for v in views) and len(set(views)) == 2
    assert "dropout" in text  # the pooled answer's two views
    timing = measured[measured.index("651 s"):][:400]
    assert "AMX" in timing and "about an hour" in timing  # the machine it was measured on, and the slow case


@pytest.mark.realmodel
def test_the_predict_table_is_what_predict_prints(default_enc):
    """The guide documented `.` .196 for 'i am sad.' where predict measured .190 (fp32)."""
    import re

    from conftest import REPO

    from promptsearch.eval.predict import predict

    text = (REPO / "docs" / "guides" / "mask-head.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([^|`]+?) \| (`.+?) \| (`.+?) \|$", text, re.M)
    assert len(rows) == 4
    got = predict(default_enc, [r[0] for r in rows], 'This sentence : "[X]" means [MASK] .')
    for (sentence, raw, den), p in zip(rows, got):
        for shown, pairs in ((raw, p.raw), (den, p.denoised)):
            doc = {t: float(v) for t, v in re.findall(r"`([^`]+)` (\.\d+)", shown)}
            assert set(doc) == {t for t, _ in pairs}, sentence
            for t, v in pairs:  # printed to 3 decimals: within half a unit, plus float32 kernel noise
                assert abs(doc[t] - v) <= 0.0005 + 1e-5, (sentence, t, doc[t], v)


# ---- item 30 (in part): a results file pins its precision -------------------------------------------------
@pytest.mark.parametrize("first", ["--bf16", "--no-bf16"])
def test_a_resumed_results_file_keeps_the_precision_it_was_scored_in(tiny_bert_dir, tmp_path, capsys, first):
    """A results file begun in one precision was refused when resumed on a CPU whose default is the other
    ('holds scores computed with precision=...'); without --bf16/--no-bf16 the resumed run now takes the file's."""
    out = tmp_path / "scored.json"
    argv = ["score", "--model", str(tiny_bert_dir), "--dataset", DATASET, "--no-cache", "--validate-top", "0",
            "--out", str(out), "[X] means [MASK] ."]
    assert main(argv + [first, "-q"]) == 0
    want = json.loads(out.read_text(encoding="utf-8"))["numbers"]["precision"]
    capsys.readouterr()
    assert main(argv + ["[X] is [MASK] ."]) == 0  # resumed, one template more, the default precision not asked
    err = capsys.readouterr().err
    d = json.loads(out.read_text(encoding="utf-8"))
    assert d["numbers"]["precision"] == want and len(d["templates"]) == 3  # the two given and the model's own
    assert f"precision: {want}" in err and str(out) in err
    other = "--no-bf16" if first == "--bf16" else "--bf16"
    assert main(argv + [other, "-q"]) == 2  # a precision asked for that the file was not scored in: refused
    now = "fp32" if want == "bf16" else "bf16"  # said as the switch that sets it, not racing's --precision
    assert (f"holds scores computed with {want} arithmetic, not {now} as now ({first} computes as the file did)"
            in capsys.readouterr().err)
