"""OptiPrompt and the fine-tuner on a tiny random BERT and real sentences."""

import json

import numpy as np
import pytest
import torch
from conftest import CLI_DEVICE, PAPER_T, make_encoder

from promptsearch import PromptEncoder
from promptsearch.train.finetune import FinetuneConfig, finetune
from promptsearch.train.loop import TrainRun
from promptsearch.train.optiprompt import OptiPromptConfig, train_optiprompt
from promptsearch.train.step import loss as step_loss
from promptsearch.train.step import micro_batches, train_step, views

T2 = 'This sentence of "[X]" means [MASK] .'


@pytest.fixture
def fresh(tiny_bert_dir):
    return make_encoder(tiny_bert_dir)


def test_optiprompt_changes_only_the_prompt_vectors(fresh, sentences, tmp_path):
    before = {n: p.detach().clone() for n, p in fresh.encoder.named_parameters()}
    cfg = OptiPromptConfig(template=PAPER_T, steps=6, batch_size=16, eval_steps=3, lr=1e-2)
    summary = train_optiprompt(fresh, sentences, cfg, tmp_path / "op", str(fresh.model.path), TrainRun(resume=False))
    for n, p in fresh.encoder.named_parameters():
        assert torch.equal(p, before[n]), n  # bit-identical
    saved = json.loads((tmp_path / "op" / "promptsearch.json").read_text())
    assert saved["template"] == PAPER_T and saved["soft_prompt"] == "soft_prompt.safetensors"
    assert [h["step"] for h in summary["history"]] == [3, 6]
    # training throughput: 6 steps x 16 sentences over the wall time less the two dev evaluations
    assert 6 * 16 / summary["seconds"] < summary["train_sentences_per_second"] < float("inf")
    # the directory loads as an encoder with those vectors
    loaded = PromptEncoder.from_pretrained(str(tmp_path / "op"), device="cpu", bf16=False)
    assert torch.equal(loaded.soft_prompts[PAPER_T], fresh.soft_prompts[PAPER_T])
    np.testing.assert_allclose(loaded.encode(sentences[:8]), fresh.encode(sentences[:8], template=PAPER_T), atol=1e-6)
    # versioned, one key for the base model whichever trainer wrote it; the older spelling still reads
    assert saved["format"] == "promptsearch.trained/1" and saved["base_model"] == str(fresh.model.path)
    legacy = {k: v for k, v in saved.items() if k not in ("format", "base_model")} | {"model": saved["base_model"]}
    (tmp_path / "op" / "promptsearch.json").write_text(json.dumps(legacy))
    old = PromptEncoder.from_pretrained(str(tmp_path / "op"), device="cpu", bf16=False)
    assert torch.equal(old.soft_prompts[PAPER_T], fresh.soft_prompts[PAPER_T])


def test_the_bias_cache_follows_the_weights(fresh):
    """No cache to clear by hand: an in-place weight update (an optimizer step) empties it."""
    with torch.no_grad():
        before = fresh.prompt.template_bias(PAPER_T, [5]).clone()
        assert fresh.prompt._bias_cache
        torch.manual_seed(0)
        for p in fresh.encoder.parameters():
            p.add_(0.1 * torch.randn_like(p))
        after = fresh.prompt.template_bias(PAPER_T, [5])
        again = fresh.prompt.template_bias(PAPER_T, [5], cache=False)
    assert (before - after).abs().max() > 1e-2  # recomputed with the new weights ...
    torch.testing.assert_close(after, again, atol=1e-5, rtol=0)  # ... as a fresh computation gives (fp32, other batch)


def test_optiprompt_vectors_move_and_resume(fresh, sentences, tmp_path):
    from promptsearch.train.optiprompt import initial_vectors
    init = initial_vectors(fresh, PAPER_T)
    cfg = OptiPromptConfig(template=PAPER_T, steps=4, batch_size=16, eval_steps=2, lr=5e-2)
    import promptsearch.train.optiprompt as op
    op.DevEval.__call__, real = (lambda self, t, d: float(len(self.encoder.soft_prompts))), op.DevEval.__call__
    try:
        train_optiprompt(fresh, sentences, cfg, tmp_path / "op", "tiny", TrainRun(resume=False, keep_checkpoint=True))
        assert not torch.allclose(fresh.soft_prompts[PAPER_T], init)  # "best" is the trained vectors here
        ck = torch.load(tmp_path / "op" / "resume" / op.CHECKPOINT, weights_only=False)
        assert ck["step"] == 4
        cfg2 = OptiPromptConfig(template=PAPER_T, steps=6, batch_size=16, eval_steps=2, lr=5e-2)
        s2 = train_optiprompt(fresh, sentences, cfg2, tmp_path / "op", "tiny", TrainRun(resume=True))
        assert [h["step"] for h in s2["history"]] == [2, 4, 6]  # continued from step 4
        assert not (tmp_path / "op" / "resume").exists()  # finished without --keep-checkpoint: removed
    finally:
        op.DevEval.__call__ = real


def test_denoised_training_views_subtract_the_template_only_forward(fresh):
    fresh.encoder.eval()  # no dropout, so the two computations are comparable
    ids = fresh.sentence_ids(fresh.prepare(["a man plays .", "two dogs run in the park ."]), PAPER_T)
    with torch.enable_grad():
        den = fresh.prompt(ids, PAPER_T, denoise=True)
        raw = fresh.prompt(ids, PAPER_T, denoise=False)
        assert den.requires_grad
    for i, s in enumerate(ids):
        t_ids, pos, m = fresh.prompt.template_only_inputs(PAPER_T, len(s))
        with torch.no_grad():
            h = fresh.encoder(input_ids=torch.tensor([t_ids]), position_ids=torch.tensor([pos])).last_hidden_state[0, m]
        torch.testing.assert_close(den[i].detach(), raw[i].detach() - h, atol=1e-5, rtol=0)


@pytest.mark.parametrize("mode", ["unsup", "sup"])
def test_gradient_caching_equals_full_batch_gradient(fresh, sentences, mode):
    # float64 and dropout off, so the full-batch and the micro-batched passes compute the same
    # function; what remains is rounding (vectors are cast to float32 before the loss).
    fresh.encoder.eval().double()
    items = sentences[:24] if mode == "unsup" else list(zip(sentences[:24], sentences[24:48], sentences[48:72]))
    grads, losses = {}, {}
    for m, tokens in ((0, None), (5, None), (0, 64)):  # whole batch; 5 rows; 64 sentence tokens, in length order
        cfg = FinetuneConfig(mode=mode, templates=[PAPER_T, T2], micro_batch=m, micro_tokens=tokens, batch_size=24)
        if tokens:
            chunks = micro_batches(fresh, cfg.step, items)
            assert len(chunks) > 2 and sorted(i for c in chunks for i in c) == list(range(24))
            assert len({len(c) for c in chunks}) > 1  # rows per micro-batch follow the lengths
        fresh.encoder.zero_grad()
        out = train_step(fresh, cfg.step, items, lambda loss: loss.backward())
        assert out.ndim == 0 and not out.requires_grad  # the loss, detached on the device: read only to log
        losses[m, tokens] = float(out)
        grads[m, tokens] = torch.cat([p.grad.flatten() for p in fresh.encoder.parameters() if p.grad is not None])
    full = (0, None)
    for k in ((5, None), (0, 64)):
        assert losses[full] == pytest.approx(losses[k], rel=1e-6)
        # measured 3.6e-6; reading stale cached biases in the first pass (a bug once) gave 3.5e-5
        assert ((grads[full] - grads[k]).norm() / grads[full].norm()).item() < 1e-5
    assert not fresh.prompt._bias_cache  # training never reads or fills the bias cache


def test_optiprompt_micro_batches_give_the_whole_batch_gradient(fresh, sentences):
    """OptiPrompt's step is the shared gradient-cached one: the soft vectors' gradient from
    micro-batches (rows, or a token budget) equals the whole batch's (float64, dropout off)."""
    from promptsearch.train.optiprompt import initial_vectors
    fresh.encoder.eval().double()
    for p in fresh.encoder.parameters():
        p.requires_grad_(False)
    soft = torch.nn.Parameter(initial_vectors(fresh, PAPER_T).double())
    fresh.set_soft_prompt(PAPER_T, soft)
    grads, losses = {}, {}
    for (m, tokens), chunks in {(0, None): 1, (5, None): 5, (0, 64): None}.items():
        cfg = OptiPromptConfig(template=PAPER_T, batch_size=24, micro_batch=m, micro_tokens=tokens, denoise=True)
        n = len(micro_batches(fresh, cfg.step, sentences[:24]))
        assert n == chunks if chunks else n > 2  # 64 sentence tokens: several micro-batches
        soft.grad = None
        losses[m, tokens] = float(train_step(fresh, cfg.step, sentences[:24], lambda loss: loss.backward()))
        grads[m, tokens] = soft.grad.clone()
    for k in ((5, None), (0, 64)):
        assert losses[0, None] == pytest.approx(losses[k], rel=1e-6)
        assert grads[0, None].norm() > 0
        assert ((grads[0, None] - grads[k]).norm() / grads[0, None].norm()).item() < 1e-5


def test_unsup_loss_decreases_on_a_toy_corpus(fresh, sentences):
    corpus = sentences[:32]
    cfg = FinetuneConfig(mode="unsup", templates=[PAPER_T, T2], lr=1e-3, batch_size=32, micro_batch=0)
    def eval_loss():  # the training objective itself: dropout on, same dropout masks each time
        fresh.encoder.train()
        torch.manual_seed(123)
        with torch.no_grad():
            return float(step_loss(cfg.step, views(fresh, cfg.step, corpus)))
    start = eval_loss()
    opt = torch.optim.AdamW(fresh.encoder.parameters(), lr=1e-3)
    fresh.encoder.train()
    for _ in range(30):
        train_step(fresh, cfg.step, corpus, lambda loss: loss.backward())
        opt.step()
        opt.zero_grad()
    assert eval_loss() < start - 0.2  # measured: 8.44 -> 8.15 after 15 steps


@pytest.mark.parametrize("mode", ["unsup", "sup"])
def test_finetune_saves_loads_and_exports_to_sentence_transformers(tiny_bert_dir, sentences, tmp_path, mode):
    enc = make_encoder(tiny_bert_dir)
    data = sentences[:48] if mode == "unsup" else list(zip(sentences[:48], sentences[48:96], sentences[96:144]))
    cfg = FinetuneConfig(mode=mode, templates=[PAPER_T, T2] if mode == "unsup" else [PAPER_T], lr=1e-3, batch_size=16,
                         micro_batch=8, max_steps=3, eval_steps=1)
    summary = finetune(enc, data, cfg, tmp_path / "ft", "tiny", TrainRun(resume=False))
    assert [h["step"] for h in summary["history"]] == [0, 1, 2, 3]
    # 3 steps of 16 sentences over the training time alone (the dev evaluations left out): more than over the wall time
    assert summary["train_sentences_per_second"] > 3 * 16 / max(summary["seconds"], 0.1) > 0
    out = tmp_path / "ft"
    assert not list(out.rglob("*.pt")) and not (out / "resume").exists()  # finished: the model alone, no resume state
    saved = json.loads((out / "promptsearch.json").read_text())
    assert saved["template"] == PAPER_T and saved["denoise"] is True and saved["finetune"]["mode"] == mode
    # read by all like any folder (safetensors writes 0600), with a model card naming the base model
    assert {f.stat().st_mode & 0o777 for f in out.rglob("*") if f.is_file()} == {0o644}
    assert "base model: `tiny`" in (out / "README.md").read_text()
    loaded = PromptEncoder.from_pretrained(str(out), device="cpu", bf16=False)
    probe = sentences[200:230]
    got = loaded.encode(probe)
    assert got.shape == (30, 32)
    if saved["finetune"]["step"] == 3:  # the best checkpoint is the final weights: the round trip is exact
        np.testing.assert_allclose(got, enc.encode(probe, template=PAPER_T, denoise=True), atol=1e-5)
    from sentence_transformers import SentenceTransformer
    # sentence-transformers >= 6 imports any non-ST module class only with trust_remote_code=True
    st = SentenceTransformer(str(out), device="cpu", trust_remote_code=True)
    np.testing.assert_allclose(st.encode(probe, batch_size=7), got, atol=1e-5)


def test_finetune_checkpoint_lives_apart_resumes_and_goes_when_training_ends(tiny_bert_dir, sentences, tmp_path):
    """The resume checkpoint is OUT/resume/…: kept on request (or while a run can resume), read back
    by a longer run (also from where earlier versions kept it, beside the model), removed at the end."""
    import promptsearch.train.finetune as ft

    out = tmp_path / "ft"

    def run(steps, **kw):
        cfg = FinetuneConfig(mode="unsup", templates=[PAPER_T, T2], lr=1e-3, batch_size=16, micro_batch=8,
                             max_steps=steps, eval_steps=1)
        return finetune(make_encoder(tiny_bert_dir), sentences[:48], cfg, out, "tiny", TrainRun(**kw))

    run(2, resume=False, keep_checkpoint=True)
    ck = out / "resume" / ft.CHECKPOINT
    assert ck.is_file() and torch.load(ck, weights_only=False)["step"] == 2
    ck.rename(out / ft.CHECKPOINT)  # where earlier versions kept it
    (out / "resume").rmdir()
    s = run(3)
    assert [h["step"] for h in s["history"]] == [0, 1, 2, 3]  # went on from step 2
    assert not list(out.rglob("*.pt")) and not (out / "resume").exists()


def test_cli_optiprompt_and_finetune_end_to_end(tiny_bert_dir, tmp_path, capsys):
    from promptsearch.cli import main
    train = tmp_path / "train.txt"
    train.write_text("\n".join(f"sentence number {i} is about a {w} ." for i, w in enumerate(["cat", "dog",
                                                                                              "man"] * 20)))
    code = main(["optiprompt", "--model", str(tiny_bert_dir), "--train-file", str(train), "--steps", "2",
                 "--eval-steps", "1",
                 "--train-batch-size", "8", "--out", str(tmp_path / "op"), "--final-tasks", "sts16", "--no-bf16", "-q"])
    out = capsys.readouterr().out
    assert code == 0 and "OptiPrompt: STS-B dev" in out and "OptiPrompt vectors" in out
    code = main(["eval", "--template-dir", str(tmp_path / "op"), "--tasks", "sts16", "--json", "-q", "--no-bf16"])
    assert code == 0 and "sts16" in json.loads(capsys.readouterr().out)
    code = main(["finetune", "--model", str(tiny_bert_dir), "--mode", "sup", "--template", PAPER_T, "--max-steps", "1",
                 "--train-batch-size", "8", "--micro-batch", "4", "--out", str(tmp_path / "ft"), "--final-tasks",
                 "sts16", "--no-bf16", "-q"])
    out = capsys.readouterr().out
    assert code == 0 and "finetune sup: STS-B dev" in out and "fine-tuned (sup)" in out


@pytest.mark.parametrize("command", ["optiprompt", "finetune"])
def test_seeds_report_mean_and_std_of_real_runs(command, tiny_bert_dir, tmp_path, capsys):
    """--seeds trains once per seed (each its own folder) and reports mean ± std per task, which are
    the mean and sample std of what the saved per-seed models score."""
    from promptsearch.cli import main
    from promptsearch.encoding import PromptEncoder, rep
    from promptsearch.eval import evaluate_reps
    train = tmp_path / "train.txt"
    train.write_text("\n".join(f"sentence number {i} is about a {w} ." for i, w in enumerate(["cat", "dog",
                                                                                              "man"] * 20)))
    out = tmp_path / command
    argv = [command, "--model", str(tiny_bert_dir), "--train-file", str(train), "--train-batch-size", "8",
            "--out", str(out), "--final-tasks", "sts16,sts13", "--no-bf16", "-q", "--seeds", "0,1,2", "--eval-steps",
            "1", "--keep-checkpoint"]
    argv += ["--steps",
             "2"] if command == "optiprompt" else ["--max-steps", "2", "--template", PAPER_T, "--micro-batch", "4"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    summary = json.loads((out / "seeds.json").read_text())
    assert summary["seeds"] == [0, 1, 2] and set(summary["tasks"]) == {"sts16", "sts13", "Avg."}
    r = rep(summary["template"], denoise=summary["denoise"])
    per_seed, last = [], []
    for s in (0, 1, 2):
        # the saved model is the best checkpoint on the dev set, which may be the untrained start for
        # every seed (no step beat it: that depends on rounding, so on the machine); what each seed
        # guarantees is its own trajectory: other batches, other dropout, other weights after the last step
        ck = torch.load(next((out / f"seed-{s}").glob("resume/*-checkpoint.pt")), map_location="cpu",
                        weights_only=False)
        assert ck["step"] == 2
        state = (ck["soft"] if command == "optiprompt"
                 else torch.cat([v.flatten().float() for v in ck["model"].values()]))
        last.append(state)
        enc = PromptEncoder.from_pretrained(str(out / f"seed-{s}"), device=CLI_DEVICE, bf16=False)
        per_seed.append(evaluate_reps(enc, [r], ["sts16"])[r]["sts16"]["spearman"])
    assert not any(torch.equal(last[i], last[j]) for i, j in ((0, 1), (0, 2), (1, 2)))  # three different runs
    got = summary["tasks"]["sts16"]
    assert got["runs"] == pytest.approx(per_seed, abs=1e-4)
    assert got["mean"] == pytest.approx(np.mean(per_seed), abs=1e-4)
    assert got["std"] == pytest.approx(np.std(per_seed, ddof=1), abs=1e-4)
    assert f"{got['mean']:.2f} ± {got['std']:.2f}" in printed and "mean ± std over 3 seeds" in printed


def test_checkpoints_are_typed_and_resume_only_their_own_run(tmp_path):
    """A checkpoint is written flat (as earlier versions wrote it) and read back as a Checkpoint whose
    trainee part becomes the trainer's record; another trainer's checkpoint, or one of other templates,
    is not resumed; a field an earlier version did not write takes its default."""
    from promptsearch.train.finetune import FinetuneState
    from promptsearch.train.loop import Checkpoint, TrainConfig, rng_state
    from promptsearch.train.optiprompt import OptiPromptState

    state = FinetuneState([PAPER_T, T2], "unsup", {"w": torch.ones(2)}, {"o": 1}, {"s": 2}, 61.5, layer=2)
    path = tmp_path / "resume" / "c.pt"
    Checkpoint(4, 63.0, [{"step": 4, "dev": 63.0}], rng_state(), state.to_dict()).save(path)
    flat = torch.load(path, weights_only=False)
    assert flat["step"] == 4 and flat["templates"] == [PAPER_T, T2] and flat["layer"] == 2  # the format on disk
    ck = Checkpoint.load(path)
    assert (ck.step, ck.best, ck.history) == (4, 63.0, [{"step": 4, "dev": 63.0}])
    back = ck.resume(FinetuneState, templates=[PAPER_T, T2], mode="unsup", layer=2)
    assert back.start_score == 61.5 and torch.equal(back.model["w"], torch.ones(2))
    assert ck.resume(FinetuneState, templates=[PAPER_T], mode="unsup", layer=2) is None  # other templates
    assert ck.resume(OptiPromptState, template=PAPER_T) is None  # another trainer's checkpoint
    old = {k: v for k, v in state.to_dict().items() if k != "layer"}  # written before read-out layers
    assert FinetuneState.from_dict(old).layer is None
    # the template trainers' configs share TrainConfig, and all three trainers' TrainSettings, each with its defaults
    assert isinstance(FinetuneConfig("unsup", [PAPER_T, T2]), TrainConfig) and isinstance(OptiPromptConfig(PAPER_T),
                                                                                          TrainConfig)
    from promptsearch.train.head import HeadTrainSettings
    from promptsearch.train.loop import TrainSettings

    head = HeadTrainSettings()
    assert isinstance(head, TrainSettings) and isinstance(OptiPromptConfig(PAPER_T), TrainSettings)
    assert (head.lr, head.batch_size, head.seed) == (2e-3, 1024, 0) and FinetuneConfig("unsup",
                                                                                       [PAPER_T, T2]).seed == 42
    assert (FinetuneConfig("sup", [PAPER_T]).lr, FinetuneConfig("sup", [PAPER_T]).eval_steps,
            OptiPromptConfig(PAPER_T).lr) \
        == (5e-5, 25, 3e-3)
    assert FinetuneConfig("unsup", [PAPER_T, T2]).denoise and not OptiPromptConfig(PAPER_T).denoise


# ---- issue 46: finetune's answer, resume, views, interrupts, its length ------------------------------------
# its answer: '[X] @mean + [X] means [MASK] . @sentence-mean'
ENSEMBLE_RESULTS = "docs/results/greedy-readout-ensemble-default.json"


def _train_file(tmp_path):
    f = tmp_path / "train.txt"
    f.write_text("\n".join(f"sentence number {i} is about a {w} ." for i, w in enumerate(["cat", "dog", "man"] * 20)))
    return str(f)


def test_finetune_refuses_an_answer_that_is_an_ensemble_with_a_pooled_member(tiny_bert_dir, tmp_path, capsys):
    """It trained the file's best [MASK] template without a word; the chosen ensemble is no one read-out."""
    from pathlib import Path

    from promptsearch.cli import main
    from promptsearch.search.results import Results

    results = Path(__file__).resolve().parents[2] / ENSEMBLE_RESULTS
    assert Results.load(results).best.members  # the case: the answer is an ensemble, one of its members pooled
    out = tmp_path / "ft"
    code = main(["finetune", "--model", str(tiny_bert_dir), "--templates", str(results), "--max-steps", "1",
                 "--train-batch-size", "4", "--train-file", _train_file(tmp_path), "--out", str(out),
                 "--final-tasks", "sts16", "--no-bf16", "-q"])
    err = capsys.readouterr().err
    assert code == 2 and "ensemble" in err and "--readout mask" in err and "Traceback" not in err
    assert len([line for line in err.splitlines() if "error" in line]) == 1 and not out.exists()


def _ft(tiny_dir, out, steps, *, eval_steps=2, readout=None, templates=(PAPER_T, T2), **kw):
    cfg = FinetuneConfig(mode="unsup", templates=list(templates), lr=1e-3, batch_size=16, micro_batch=8,
                         max_steps=steps, eval_steps=eval_steps, readout=readout)
    return finetune(make_encoder(tiny_dir), _sentences_for_ft(), cfg, out, "tiny", TrainRun(**kw))


def _sentences_for_ft():
    from conftest import _sentences

    return _sentences()[:64]


def test_finetune_resumed_with_another_dev_set_or_readout_is_refused(tiny_bert_dir, tmp_path, capsys):
    """It went on with the old run's start, best and history (a start of another set reported as this one's)."""
    import promptsearch.train.finetune as ft
    from promptsearch.errors import PromptSearchError

    out = tmp_path / "ft"
    _ft(tiny_bert_dir, out, 2, keep_checkpoint=True)
    ck = out / "resume" / ft.CHECKPOINT
    before = ck.read_bytes()
    with pytest.raises(PromptSearchError, match="dev set"):
        _ft(tiny_bert_dir, out, 3, dev_dataset="sick-trial")
    with pytest.raises(PromptSearchError, match="read-out"):
        _ft(tiny_bert_dir, out, 3, readout="mean")
    with pytest.raises(PromptSearchError, match="learning rate"):
        cfg = FinetuneConfig(mode="unsup", templates=[PAPER_T, T2], lr=5e-4, batch_size=16, micro_batch=8, max_steps=3,
                             eval_steps=2)
        finetune(make_encoder(tiny_bert_dir), _sentences_for_ft(), cfg, out, "tiny", TrainRun())
    from promptsearch.cli import main

    capsys.readouterr()
    assert main(["finetune", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--template", T2, "--dataset",
                 "sick-trial", "--out", str(out), "--max-steps", "3", "--eval-steps", "2", "--lr", "1e-3",
                 "--train-batch-size", "16", "--micro-batch", "8", "--final-tasks", "sts16", "--no-bf16", "-q"]) == 2
    err = capsys.readouterr().err.strip()  # one line, before anything is said or written
    assert len(err.splitlines()) == 1 and "dev set" in err and "--no-resume" in err and "--out" in err
    assert ck.read_bytes() == before  # nothing lost
    # --no-resume starts over
    s = _ft(tiny_bert_dir, out, 3, dev_dataset="sick-trial", resume=False, keep_checkpoint=True)
    assert [h["step"] for h in s["history"]] == [0, 2, 3] and s["dev_set"] == "sick-trial"
    assert _ft(tiny_bert_dir, out, 4, dev_dataset="sick-trial")["history"][:3] == s["history"]  # the same run goes on


def test_finetune_resumes_its_dev_file_by_any_spelling_and_a_refused_start_leaves_no_folder(tiny_bert_dir, tmp_path,
                                                                                             monkeypatch, capsys):
    """A dev set is a file, however it is spelled (./dev.csv, dev.csv, its absolute path): the same run resumes. A
    start the scorer refuses (60 pairs of a sentence and itself: no spread to rank) leaves no --out behind."""
    from conftest import stsb_dev_csv

    from promptsearch.cli import main

    monkeypatch.chdir(tmp_path)
    stsb_dev_csv(tmp_path / "dev.csv", 0, 60)
    out = tmp_path / "ft"
    _ft(tiny_bert_dir, out, 2, keep_checkpoint=True, dev_dataset="./dev.csv")
    assert [h["step"] for h in _ft(tiny_bert_dir, out, 3, keep_checkpoint=True, dev_dataset=str(tmp_path / "dev.csv"))
            ["history"]] == [0, 2, 3]  # resumed, not refused as another dev set
    rows = (tmp_path / "dev.csv").read_text(encoding="utf-8").splitlines()[1:]
    same = ["sentence1,sentence2,score"] + [f"{r.split(',')[0]},{r.split(',')[0]},{i % 5}" for i, r in enumerate(rows)
                                            if r.count(",") == 2]
    (tmp_path / "same.csv").write_text("\n".join(same) + "\n", encoding="utf-8")
    capsys.readouterr()
    code = main(["finetune", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--template", T2, "--dataset",
                 "same.csv",
                 "--out", str(tmp_path / "ft2"), "--max-steps", "2", "--train-batch-size", "16", "--micro-batch", "8",
                 "--train-file", _train_file(tmp_path), "--final-tasks", "sts16", "--no-bf16", "-q"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "same.csv" in err.splitlines()[-1] and "undefined" in err, err
    assert not (tmp_path / "ft2").exists()


def test_identical_views_are_said_to_differ_by_dropout_and_refused_without_it(tiny_bert_dir, tmp_path, capsys):
    """One template twice (the model's own read-out, say) is SimCSE's objective: dropout is the only noise, so a
    model without dropout is refused before anything is written; the run says which views it uses and how long it is."""
    from transformers import BertForMaskedLM

    from promptsearch.cli import main
    from promptsearch.errors import PromptSearchError

    code = main(["finetune", "--model", str(tiny_bert_dir), "--template", "[X]", "--readout", "mean", "--max-steps",
                 "2", "--eval-steps", "1", "--train-batch-size", "8", "--train-file", _train_file(tmp_path), "--out",
                 str(tmp_path / "ft"), "--final-tasks", "sts16", "--no-bf16", "-q"])
    err = capsys.readouterr().err
    assert code == 0
    assert "twice" in err and "dropout (0.1" in err and "SimCSE" in err  # the views, and why they differ
    assert "2 steps of 8 sentences" in err and "about" in err  # its length, before it starts and after one step
    nodrop = tmp_path / "no-dropout"
    m = BertForMaskedLM.from_pretrained(tiny_bert_dir, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    m.save_pretrained(nodrop)
    for f in tiny_bert_dir.iterdir():
        if f.name.startswith(("vocab", "tokenizer", "special")):
            (nodrop / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "ft2"
    with pytest.raises(PromptSearchError, match="no dropout"):
        _ft(nodrop, out, 2, readout="mean", templates=["[X]", "[X]"])
    assert not out.exists()
    assert _ft(nodrop, out, 1, eval_steps=1)["steps"] == 1  # two templates: views that differ without dropout


def test_finetune_help_says_what_each_flag_does():
    from promptsearch.cli.parser import build_parser

    sub = next(a for a in build_parser()._actions if a.choices and "finetune" in a.choices).choices["finetune"]
    helps = {o: a.help for a in sub._actions for o in a.option_strings}
    for flag in ("--mode", "--epochs", "--max-steps", "--lr", "--seed"):
        assert helps[flag], flag


def test_a_pooled_prompt_is_saved_again_at_each_better_checkpoint(tiny_bert_dir, tmp_path):
    """A model with a Normalize after its Pooling: the second save met the folder's 2_Normalize (FileExistsError)."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.base.modules import Normalize, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling

    from promptsearch.train.finetune import save_model

    st_dir = tmp_path / "st"
    tr = Transformer(str(tiny_bert_dir))
    SentenceTransformer(modules=[tr, Pooling(tr.get_embedding_dimension(), pooling_mode="mean"), Normalize()],
                        device="cpu").save(str(st_dir))
    enc = make_encoder(st_dir)
    cfg = FinetuneConfig(mode="unsup", templates=["query: [X]", "query: [X]"], readout="mean")
    out = tmp_path / "ft"
    for step in (0, 1):
        save_model(enc, out, cfg, str(st_dir), {"step": step, "dev": 1.0, "dev_set": "stsb-dev"})
    st = SentenceTransformer(str(out), device="cpu")
    assert st.prompts["query"] == "query: " and (out / "2_Normalize").is_dir()


def test_interrupts_are_held_until_the_block_is_done():
    import os
    import signal

    from promptsearch.train.loop import interrupts_held

    done = []
    with pytest.raises(KeyboardInterrupt):
        with interrupts_held():
            os.kill(os.getpid(), signal.SIGINT)
            done.append(1)  # the block finishes first
    assert done == [1] and signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_ctrl_c_keeps_every_step_and_marks_the_folder_unfinished(tiny_bert_dir, tmp_path, monkeypatch, capsys):
    """Ctrl-C lost every step since the last evaluation, and the folder's untrained start was scored without a
    word. Now: an interrupt during a step keeps the steps before it, one during a dev evaluation has it run first
    on resume, other commands refuse the unfinished folder, and the resumed run ends where an uninterrupted one does."""
    import promptsearch.train.finetune as ft
    import promptsearch.train.step as step_mod
    from promptsearch.cli import main
    from promptsearch.train.loop import DevEval

    ref = _ft(tiny_bert_dir, tmp_path / "ref", 4)
    out = tmp_path / "ft"
    ck = out / "resume" / ft.CHECKPOINT
    real_call, real_step = DevEval.__call__, step_mod.train_step
    calls = []

    def dev_interrupted(self, *a, **kw):  # the evaluation after step 2
        calls.append("dev")
        raise KeyboardInterrupt

    monkeypatch.setattr(DevEval, "__call__", dev_interrupted)
    with pytest.raises(KeyboardInterrupt):
        _ft(tiny_bert_dir, out, 4)
    saved = torch.load(ck, weights_only=False)
    assert saved["step"] == 2 and "pending_eval_loss" in saved and (out / "UNFINISHED").is_file()
    capsys.readouterr()
    assert main(["eval", "--template-dir", str(out), "--tasks", "sts16", "--no-bf16", "-q"]) == 2
    err = capsys.readouterr().err
    assert "not finished" in err and "re-run" in err and len(err.strip().splitlines()) == 1
    assert main(["export", "--template", "[X] @mean", "--model", str(out), "--out", str(tmp_path / "ex")]) == 2
    assert "not finished" in capsys.readouterr().err and not (tmp_path / "ex").exists()

    monkeypatch.setattr(DevEval, "__call__", real_call)
    n = []

    def step_interrupted(*a, **kw):  # inside step 4: steps 3 is kept
        n.append(1)
        if len(n) == 2:
            raise KeyboardInterrupt
        return real_step(*a, **kw)

    monkeypatch.setattr(ft, "train_step", step_interrupted)
    with pytest.raises(KeyboardInterrupt):
        _ft(tiny_bert_dir, out, 4)
    saved = torch.load(ck, weights_only=False)
    assert saved["step"] == 3 and "pending_eval_loss" not in saved and [h["step"] for h in saved["history"]] == [0, 2]
    monkeypatch.setattr(ft, "train_step", real_step)
    s = _ft(tiny_bert_dir, out, 4)
    assert not (out / "UNFINISHED").exists() and not ck.exists()
    assert [h["step"] for h in s["history"]] == [0, 2, 4]
    for got, want in zip(s["history"], ref["history"]):  # the same run as the uninterrupted one
        assert got["dev"] == pytest.approx(want["dev"], abs=1e-3) and got.get("loss") == pytest.approx(want.get("loss"),
                                                                                                       abs=1e-3)
    a = PromptEncoder.from_pretrained(str(out), device="cpu", bf16=False).encode(_sentences_for_ft()[:8])
    b = PromptEncoder.from_pretrained(str(tmp_path / "ref"), device="cpu", bf16=False).encode(_sentences_for_ft()[:8])
    np.testing.assert_allclose(a, b, atol=1e-4)


def test_a_start_measured_afresh_equals_the_score_caches(bert_enc, tmp_path):
    """train/ scores a start through eval/ (fresh_scores); the command line passes search's cached known_scores:
    the same number either way (one evaluator, one encoder), and the cached one is served on the second ask."""
    from promptsearch.encoding.reps import PromptPool
    from promptsearch.search.validate import known_scores
    from promptsearch.train.loop import DevEval, fresh_scores, trained_rep

    for r in (trained_rep(PAPER_T, True), trained_rep(PAPER_T, False, layer=1), PromptPool(PAPER_T, "mean")):
        fresh, cached = fresh_scores(bert_enc, r, ["sts16"]), known_scores(bert_enc, r, ["sts16"])
        assert abs(fresh["sts16"]["spearman"] - cached["sts16"]["spearman"]) < 1e-9, r  # the same float, computed twice
    asked = []

    def counted(enc, r, tasks, data):
        asked.append(tasks)
        return known_scores(enc, r, tasks, data)

    assert DevEval(bert_enc, "sts16", scores=counted).start(PAPER_T, True) == cached_start(bert_enc)
    assert asked == [["sts16"]]  # the start is found by the scores it was given
    # a dev evaluation leaves every module in the mode it found it: the shared encoder stayed in eval mode (it was
    # left training — dropout on — and later tests on the same encoder got other vectors)
    assert not bert_enc.encoder.training and not any(m.training for m in bert_enc.encoder.modules())


def cached_start(enc):
    from promptsearch.search.validate import known_scores
    from promptsearch.train.loop import trained_rep

    return known_scores(enc, trained_rep(PAPER_T, True), ["sts16"])["sts16"]["spearman"]


def test_what_finetune_trains_of_a_search_is_decided_by_the_library(tmp_path):
    """choose_training: a pooled answer is trained as such (said), readout='mask' trains the best [MASK] template
    (with a note), an ensemble with a pooled member is refused unless a read-out or template is given."""
    from promptsearch.errors import PromptSearchError
    from promptsearch.representation import Representation
    from promptsearch.search import Results
    from promptsearch.search.scorer import Score
    from promptsearch.train.finetune import choose_training

    res = Results.open(tmp_path / "best.json", "tiny", "stsb-dev", "greedy", True)
    res.add(Score(PAPER_T, 70.0, True, 1.0))
    res.add(Score(T2, 75.0, False, 1.0, readout="mean"))
    said = []
    got = choose_training("unsup", results=Results.load(tmp_path / "best.json"), say=said.append)
    assert (got.templates, got.readout, got.layer, got.soft) == ([T2, T2], "mean", None, None)
    assert said == [f"fine-tuning {T2} @mean, {tmp_path / 'best.json'}'s answer (75.00 on its dev set)"]
    said.clear()
    got = choose_training("sup", results=Results.load(tmp_path / "best.json"), readout="mask", say=said.append)
    assert (got.templates, got.readout) == ([PAPER_T], None)
    assert len(said) == 1 and said[0].startswith("note: ") and "readout=mask" in said[0]
    members = (Representation(PAPER_T), Representation(T2, readout="mean"))
    res.add(Score(Representation.ensemble(members).text, 80.0, True, 0.0, members=members))
    with pytest.raises(PromptSearchError, match="ensemble with a pooled member"):
        choose_training("unsup", results=Results.load(tmp_path / "best.json"), say=said.append)
    assert choose_training("unsup", [PAPER_T], Results.load(tmp_path / "best.json"), say=said.append).templates == \
        [PAPER_T, PAPER_T]


def test_training_refuses_the_reference_inputs_in_the_library(tiny_bert_dir, tmp_path):
    """compat="reference" reproduces the reference's evaluation inputs: finetune and optiprompt refuse an encoder
    made with it (the command line refuses the flag before the model loads)."""
    from promptsearch.errors import PromptSearchError

    enc = make_encoder(tiny_bert_dir, compat="reference")
    with pytest.raises(PromptSearchError, match="compat=reference"):
        train_optiprompt(enc, ["a b c"] * 4, OptiPromptConfig(PAPER_T, steps=1), tmp_path / "o", "tiny")
    with pytest.raises(PromptSearchError, match="compat=reference"):
        finetune(enc, ["a b c"] * 4, FinetuneConfig("unsup", [PAPER_T, PAPER_T.replace("means", "is")]), tmp_path / "f",
                 "tiny")
    assert not (tmp_path / "o").exists() and not (tmp_path / "f").exists()


@pytest.mark.parametrize("device", ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
def test_the_random_state_kept_is_the_training_devices_own(device):
    """A run's random state (a resume checkpoint's, a micro-batch's dropout replay) holds the generators it draws
    from: Python's, NumPy's, torch's CPU one and, on a GPU, that GPU's. It used to hold every visible GPU's, which
    opened each GPU from every process (a CPU run on a GPU machine too) and could not be restored on a machine
    with fewer GPUs. Restoring gives the same draws again."""
    import random

    from promptsearch.train.loop import rng_state, set_rng_state

    st = rng_state(device)
    assert ("cuda" in st) == (device == "cuda") and "cuda" not in rng_state()
    # as a checkpoint written before kept them: every GPU's generator, in a list
    every_gpu = [torch.cuda.get_rng_state(i) for i in range(torch.cuda.device_count())] if device == "cuda" else []

    def draws():
        return random.random(), float(np.random.rand()), torch.rand(3, device=device).tolist()

    first = draws()
    set_rng_state(st)
    assert draws() == first
    set_rng_state({**st, "cuda": every_gpu})
    assert draws() == first
