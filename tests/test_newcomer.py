"""What a newcomer met in the main job (issue 46, items 29-38): held-out validation of the answer only, the
greedy table within 80 columns, the plot's labels and order, the column and bar names."""

import json

from promptsearch.cli import main
from conftest import write_vocab

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
    print(line)
    n = len(held)
    assert f"{n} representation" in line and f"{n} × " in line and "sentences" in line and "--validate-top 0" in line


def test_validate_top_k_still_scores_the_best_k_and_the_path(tiny_bert_dir, tmp_path):
    out, d = _greedy(tiny_bert_dir, tmp_path, "--validate-top", "2", "-q")
    held = {_key(e) for e in d["templates"] if "validation" in e}
    path = {r["template"] for r in d["path"] if r["stage"] in ("relation:best", "prefix")}
    ranked = sorted(d["templates"], key=lambda e: -e["spearman"])
    assert held == {_key(e) for e in ranked[:2]} | path | {"[X] @mean", d["x_chosen"]}
    assert d["validation"]["top"] == 2
