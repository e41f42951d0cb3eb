"""Template ensembles (issue 21, item 4): the mean of the members' L2-normalized vectors, in the encoder,
eval and a greedy search's last step."""

import json

import numpy as np
import pytest
from conftest import CLI_DEVICE, PAPER_T, make_encoder

from promptsearch import PromptSearchError
from promptsearch.encoding import Ensemble, MaskState
from promptsearch.representation import Representation

SENTS = ["a man is playing a guitar .", "two dogs run in the park", "the cat sat on the mat .",
         "a woman slices an onion"]
OTHER = "[X] is about [MASK] ."


def test_an_ensemble_is_the_mean_of_its_members_normalized_vectors(bert_enc):
    a, b = MaskState(PAPER_T, True), MaskState(OTHER, False, 1)
    ens = Ensemble((a, b))
    out = bert_enc.encode_reps(SENTS, [ens, a])
    va, vb = bert_enc.encode(SENTS, rep=a), bert_enc.encode(SENTS, rep=b)
    want = (va / np.linalg.norm(va, axis=1, keepdims=True) + vb / np.linalg.norm(vb, axis=1, keepdims=True)) / 2
    np.testing.assert_allclose(out[ens], want, atol=1e-6)
    np.testing.assert_array_equal(out[a], va)
    assert ens.fields()["template"] == [PAPER_T, OTHER] and ens.fields()["layer"] == [None, 1]
    with pytest.raises(PromptSearchError, match="two or more"):
        Ensemble((a,))


def test_eval_with_several_templates_scores_their_ensemble(tiny_bert_dir, capsys):
    from promptsearch.cli import main
    from promptsearch.eval import evaluate_reps

    assert main(["eval", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--template", OTHER, "--denoise",
                 "--tasks", "sts16", "--json", "-q", "--no-bf16"]) == 0
    got = json.loads(capsys.readouterr().out)["sts16"]
    ens = Ensemble((MaskState(PAPER_T, True), MaskState(OTHER, True)))
    enc = make_encoder(tiny_bert_dir, bf16=False, device=CLI_DEVICE)  # the command's device: the same arithmetic
    want = evaluate_reps(enc, [ens], ["sts16"])[ens]["sts16"]["spearman"]
    assert got == pytest.approx(want, abs=1e-4)


def test_greedy_grows_an_ensemble_only_while_it_pays(tiny_bert_dir, tmp_path):
    from conftest import write_vocab as _vocab

    from promptsearch.cli import main
    from promptsearch.encoding.reps import rep_from_key
    from promptsearch.eval import evaluate_reps

    out = tmp_path / "best.json"
    assert main(["greedy", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--vocabulary", _vocab(tmp_path),
                 "--max-steps", "1", "--ensemble", "3", "--min-gain", "0", "--out", str(out), "--no-cache", "-q",
                 "--no-bf16", "--validate-top", "0", "--no-racing"]) == 0
    d = json.loads(out.read_text())
    rows = [r for r in d["path"] if r["stage"] == "ensemble"]
    assert rows and all(r["taken"] == (r["gain"] > 0) for r in rows) and len(rows[-1]["members"]) <= 3
    enc = make_encoder(tiny_bert_dir, bf16=False, device=CLI_DEVICE)
    for e in (e for e in d["templates"] if e.get("members")):  # members may be pooled read-outs (the model's own too)
        ens = rep_from_key(" + ".join(e["members"]), denoise=True)
        want = evaluate_reps(enc, [ens], ["sts16"])[ens]["sts16"]["spearman"]
        assert e["spearman"] == pytest.approx(want, abs=1e-4)
    taken = [r for r in rows if r["taken"]]
    assert d["x_baseline"]["best"] == (" + ".join(taken[-1]["members"]) if taken else d["x_baseline"]["best"])
    assert d["x_chosen"] in (d["x_baseline"]["best"], d["x_baseline"]["key"])  # greedy's answer, or the model's own


def test_ensemble_zero_is_a_usage_error(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main

    out = tmp_path / "best.json"
    code = main(["greedy", "--model", str(tiny_bert_dir), "--ensemble", "0", "--out", str(out), "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--ensemble" in err and "\n" not in err and not out.exists()


def test_finetune_takes_a_searched_ensembles_members_and_layer(tmp_path):
    from promptsearch.search import Results
    from promptsearch.search.scorer import Score
    from promptsearch.train.finetune import choose_templates

    res = Results.open(tmp_path / "best.json", "tiny", "stsb-dev", "greedy", True)
    res.add(Score(PAPER_T, 70.0, True, 1.0))
    res.add(Score(OTHER, 69.0, True, 1.0, layer=2))
    res.add(Score(f"{PAPER_T} + {OTHER}", 72.0, True, 0.0, members=(Representation(PAPER_T), Representation(OTHER, 2))))
    res.choose(Representation.ensemble([Representation(PAPER_T), Representation(OTHER, 2)]))
    assert choose_templates("unsup", results=Results.load(tmp_path / "best.json")) == ([PAPER_T, OTHER], None, None)
    res.choose(Representation(OTHER, 2))
    assert choose_templates("sup", results=Results.load(tmp_path / "best.json")) == ([OTHER], None, 2)


def test_report_takes_layers_and_ensembles_by_results_key(tiny_bert_dir, tmp_path):
    from promptsearch.cli import main
    from promptsearch.eval import evaluate_reps

    out = tmp_path / "report.json"
    keys = [f"{PAPER_T} + {OTHER}", f"{OTHER} @layer 1"]
    assert main(["report", "--model", str(tiny_bert_dir), "--template", keys[0], "--template", keys[1], "--tasks",
                 "sts16", "--json", str(out), "-q", "--no-bf16"]) == 0
    rows = {r["label"]: r for r in json.loads(out.read_text())["results"]}
    want = {Ensemble((MaskState(PAPER_T, True), MaskState(OTHER, True))), MaskState(OTHER, True, 1)}
    got = evaluate_reps(make_encoder(tiny_bert_dir, bf16=False, device=CLI_DEVICE), list(want), ["sts16"])
    for r in want:
        assert rows[r.label]["tasks"]["sts16"]["spearman"] == pytest.approx(got[r]["sts16"]["spearman"], abs=1e-4)
    assert rows[f"{OTHER} @layer 1 (denoised)"]["layer"] == 1
