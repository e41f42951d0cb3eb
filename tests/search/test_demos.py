"""Demonstrations chosen from a pool (issue 21, item 5): PromptEOL's choice on the dev set, automated."""

import json

import pytest
from conftest import CAUSAL_T

from promptsearch.cli import main
from promptsearch.library import demo_template, read_demos

POOL = ("a man plays a guitar .\tmusic\nthe cat sleeps on the mat .\tcat\n# a comment\n"
        "a woman is slicing an onion .\tcooking\n")


def test_a_demonstration_is_the_filled_template_with_its_word(tmp_path):
    assert demo_template("[X] means [MASK] .",
                         [("a dog runs .", "dog")]) == "a dog runs . means dog . [X] means [MASK] ."
    assert (demo_template(CAUSAL_T, [("a dog runs .", "dog"), ("it rains .", "rain")])
            == f'This sentence : "a dog runs ." means in one word:"dog". This sentence : "it rains ." means in one '
               f'word:"rain". {CAUSAL_T}')
    p = tmp_path / "pool.tsv"
    p.write_text(POOL, encoding="utf-8")
    assert [w for _, w in read_demos(str(p))] == ["music", "cat", "cooking"]


@pytest.mark.parametrize("kind, vocabulary", [("tiny_bert_dir", None), ("tiny_gpt2_dir", "greedy-causal")])
def test_greedy_picks_the_best_demonstration_only_above_its_noise(kind, vocabulary, request, tmp_path):
    from conftest import CLI_DEVICE, make_encoder
    from conftest import write_vocab as _vocab

    from promptsearch.encoding import rep
    from promptsearch.eval import evaluate_reps

    d = str(request.getfixturevalue(kind))
    pool = tmp_path / "pool.tsv"
    # short: the tiny models take 64 tokens
    pool.write_text("a dog runs .\tdog\nit rains .\train\ncats sleep .\tcat\n", encoding="utf-8")
    out = tmp_path / "best.json"
    vocab = vocabulary or _vocab(tmp_path)
    assert main(["greedy", "--model", d, "--dataset", "sts16", "--vocabulary", vocab, "--max-steps", "1",
                 "--demos-pool", str(pool), "--readouts", "none", "--out", str(out), "--no-cache", "-q", "--no-bf16",
                 "--validate-top", "0", "--no-racing"]) == 0
    res = json.loads(out.read_text())
    step = [r for r in res["path"] if r["stage"] == "demos"][0]
    before = [r for r in res["path"] if r["stage"] in ("relation:best", "prefix")][-1]["template"]
    shots = read_demos(str(pool))
    enc = make_encoder(d, bf16=False, device=CLI_DEVICE)

    def fits(t):
        try:
            return enc.check_template(t) > 0
        except Exception:
            return False

    singles = [s for s in shots if fits(demo_template(before, [s]))]
    pairs = [1 for i, a in enumerate(singles) for b in singles[i + 1:] if fits(demo_template(before, [a, b]))]
    assert singles and step["candidates"] == len(singles) + len(pairs)  # every single that fits, then pairs of the best
    assert step["template"] in {demo_template(before, [s]) for s in shots} | {
        demo_template(before, [a, b]) for a in shots for b in shots if a != b}
    want = evaluate_reps(enc, [rep(step["template"], denoise=True)], ["sts16"])
    assert step["spearman"] == pytest.approx(next(iter(want.values()))["sts16"]["spearman"], abs=1e-4)
    assert step["taken"] == (step["gain"] > step["min_gain"])
    assert res["x_baseline"]["best"] == (step["template"] if step["taken"] else before)  # greedy's answer (then the
    assert res["x_chosen"] in (res["x_baseline"]["best"], res["x_baseline"]["key"])  # model's own, unless beaten)


def test_an_empty_demos_pool_is_one_line_and_writes_nothing(tiny_bert_dir, tmp_path, capsys):
    pool = tmp_path / "pool.tsv"
    pool.write_text("# nothing here\n\n", encoding="utf-8")
    out = tmp_path / "best.json"
    code = main(["greedy", "--model", str(tiny_bert_dir), "--demos-pool", str(pool), "--out", str(out), "--no-cache",
                 "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--demos-pool" in err and "sentence<TAB>word" in err and "\n" not in err
    assert not out.exists()
