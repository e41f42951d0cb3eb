"""The [MASK] head learned on a frozen encoder (train-head) and its use by predictions."""

import json

import pytest
import torch
from conftest import PAPER_T, make_encoder

from promptsearch.cli import main
from promptsearch.errors import ModelError
from promptsearch.eval.predict import mask_logits, predict
from promptsearch.model.loading import load_model
from promptsearch.train.head import (
    HeadConfig,
    HeadData,
    HeadTrainSettings,
    MaskedStates,
    MaskHead,
    Masking,
    collect_states,
    head_accuracy,
    load_head,
    run_train_head,
    save_head,
    shipped_head_path,
    split_heldout,
    train_head,
    unigram_accuracy,
)


def _synthetic(vocab=50, hidden=16, n=3000, seed=0):
    """States that do encode their target (embedding + noise), with Zipf-like targets."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(vocab, hidden, generator=g)
    p = 1.0 / torch.arange(1, vocab + 1).float()
    t = torch.multinomial(p / p.sum(), n, replacement=True, generator=g)
    x = emb[t] + 0.3 * torch.randn(n, hidden, generator=g)
    return emb, MaskedStates(x.half(), t, torch.arange(n) // 2)


@pytest.mark.parametrize("decoder", ["tied", "rank", "full"])
def test_head_learns_a_map_that_exists_and_beats_unigram(decoder):
    emb, st = _synthetic()
    train, test = split_heldout(st, 1500, 300)
    uni = unigram_accuracy(train.targets, test.targets, 50)
    head = MaskHead(HeadConfig(16, 50, decoder=decoder, rank=4), torch.randn(50, 16))  # embeddings unrelated to emb
    head.init_bias(torch.bincount(train.targets, minlength=50))
    before = head_accuracy(head, test.states, test.targets)
    hist = train_head(head, train, test, HeadTrainSettings(epochs=8, batch_size=64, lr=1e-2), show_progress_bar=False)
    acc = head_accuracy(head, test.states, test.targets)
    assert uni.top1 < 0.35 and acc.top1 > uni.top1 + 0.3 and acc.top1 > before.top1 + 0.3
    if decoder != "tied":  # a tied decoder's logits live in the span of the given word embeddings
        assert acc.top1 > 0.9
    assert acc.top5 >= uni.top5 and acc.top1 == pytest.approx(hist.best["top1"])
    assert len(hist.epochs) == 8 and hist.epochs[-1]["loss"] < hist.epochs[0]["loss"]


def test_unigram_baseline_counts_training_targets():
    train = torch.tensor([3, 3, 3, 1, 1, 2, 4, 5, 6])
    test = torch.tensor([3, 1, 7, 7])
    u = unigram_accuracy(train, test, 10)
    assert u.top1 == 0.25 and u.top5 == 0.5 and u.n == 4


def test_heldout_split_is_by_sentence():
    _, st = _synthetic()
    train, test = split_heldout(st, 1500, 300)
    assert len(train.targets) + len(test.targets) == 3000
    assert set(train.sentence.tolist()).isdisjoint(test.sentence.tolist())
    assert len(set(test.sentence.tolist())) == 300


def test_collect_states_masks_only_words_and_keeps_their_ids(tiny_bert_encoder_only_dir, sentences):
    m = load_model(str(tiny_bert_encoder_only_dir), device="cpu")
    got = collect_states(m, sentences[:40], layers=(-1, 1), masking=Masking(0.15, bf16=False), show_progress_bar=False)
    last, first = got[-1], got[1]
    assert len(last.targets) >= 40 and last.states.shape == (len(last.targets), 32) == first.states.shape
    assert not torch.isin(last.targets, torch.tensor(m.tokenizer.all_special_ids)).any()
    assert not torch.equal(last.states, first.states)
    # with every token masked the states are the encoder's at [CLS] [MASK]… [SEP] and the targets the words
    s0 = "a man plays a guitar ."
    full = collect_states(m, [s0], masking=Masking(1.0, bf16=False), show_progress_bar=False)[-1]
    body = m.tokenizer(s0, add_special_tokens=False)["input_ids"]
    ids = [m.tokenizer.cls_token_id] + [m.tokenizer.mask_token_id] * len(body) + [m.tokenizer.sep_token_id]
    with torch.no_grad():
        h = m.encoder(input_ids=torch.tensor([ids])).last_hidden_state[0, 1:-1]
    assert full.targets.tolist() == body
    torch.testing.assert_close(full.states.float(), h, atol=2e-3, rtol=2e-3)
    again = collect_states(m, sentences[:40], layers=(-1,), masking=Masking(0.15, bf16=False),
                           show_progress_bar=False)[-1]
    assert torch.equal(again.targets, last.targets)  # seeded


def test_save_load_round_trip_and_model_integration(tmp_path, tiny_bert_encoder_only_dir):
    m = load_model(str(tiny_bert_encoder_only_dir), device="cpu")
    assert not m.has_mlm_head
    head = MaskHead(HeadConfig(32, m.word_embeddings.shape[0], decoder="rank", rank=4), m.word_embeddings)
    with torch.no_grad():
        head.u.normal_()
    path = save_head(head, tmp_path / "head.safetensors", {"note": "x"})
    back = load_head(path, m.word_embeddings)
    x = torch.randn(3, 32)
    torch.testing.assert_close(back(x), head(x), atol=0.05, rtol=0.01)  # float16 storage
    assert back.meta == {"note": "x"}
    enc = make_encoder(tiny_bert_encoder_only_dir, mask_head=str(path))
    assert enc.model.has_mlm_head
    raw, _ = mask_logits(enc, ["a man plays a guitar ."], PAPER_T)
    st = enc.prompt_states(["a man plays a guitar ."], PAPER_T)
    with torch.no_grad():
        expected = back(torch.as_tensor(st.raw))[0]
    finite = torch.isfinite(raw[0])
    torch.testing.assert_close(raw[0][finite], expected[finite], atol=1e-4, rtol=1e-4)


def test_bad_head_files_give_one_line_errors(tmp_path, tiny_bert_encoder_only_dir, tiny_bert_dir):
    with pytest.raises(ModelError, match="does not exist"):
        load_model(str(tiny_bert_encoder_only_dir), mask_head=str(tmp_path / "nope.safetensors"))
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(ModelError, match="not a head file"):
        load_model(str(tiny_bert_encoder_only_dir), mask_head=str(tmp_path / "junk.safetensors"))
    other = MaskHead(HeadConfig(32, 99), torch.randn(99, 32))
    save_head(other, tmp_path / "other.safetensors")
    with pytest.raises(ModelError, match="vocabulary"):
        load_model(str(tiny_bert_dir), mask_head=str(tmp_path / "other.safetensors"))


def test_train_head_cli_writes_a_head_and_resumes(tmp_path, tiny_bert_encoder_only_dir, capsys, monkeypatch):
    out = tmp_path / "h"
    argv = ["train-head", "--model", str(tiny_bert_encoder_only_dir), "--corpus", "sts", "--max-sentences", "300",
            "--epochs", "2", "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--heldout", "50", "-q",
            "--device", "cpu", "--no-bf16"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "unigram baseline on the held-out tokens" in text and "epoch 2/2" in text
    info = json.loads((out / "train-head.json").read_text())
    assert info["sentences"] == 300 and len(info["history"]) == 2
    assert (tmp_path / "cache").is_dir() and (out / "head.safetensors").is_file()
    # a re-run replays: states from the cache, training from the finished checkpoint
    import promptsearch.train.head as H

    monkeypatch.setattr(H, "collect_states", lambda *a, **k: pytest.fail("states were not cached"))
    assert main(argv) == 0
    text2 = capsys.readouterr().out
    assert "epoch 1/2" not in text2 and json.loads((out / "train-head.json").read_text())["history"] == info["history"]
    # and the head is used for predictions
    assert main(["predict", "--model", str(tiny_bert_encoder_only_dir), "--mlm-head", str(out / "head.safetensors"),
                 "--device", "cpu", "a man plays a guitar ."]) == 0
    assert "no MLM head" not in capsys.readouterr().err


def test_interrupted_training_resumes_where_it_stopped(tmp_path, tiny_bert_encoder_only_dir, sentences):
    m = load_model(str(tiny_bert_encoder_only_dir), device="cpu")
    cfg = HeadConfig(32, m.word_embeddings.shape[0], rank=4)
    settings = HeadTrainSettings(epochs=3, batch_size=64)

    def run(log):
        return run_train_head(m, sentences[:200], tmp_path / "h", cfg, settings, HeadData(40, cache_dir=tmp_path / "c"),
                              log=log, show_progress_bar=False)

    def stop_after_first(line):
        if line.startswith("epoch 2/3"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(stop_after_first)
    # the checkpoint's key records the settings in the order earlier versions wrote (their runs still resume)
    written = json.loads((tmp_path / "h" / "checkpoint.key").read_text())[2]
    assert list(written.items()) == [("epochs", 3), ("batch_size", 64), ("lr", 2e-3), ("weight_decay", 0.01),
                                     ("warmup", 0.05), ("seed", 0), ("bf16", False)]
    lines = []
    rep = run(lines.append)
    epochs = [line for line in lines if line.startswith("epoch")]
    assert [e.split(":")[0] for e in epochs] == ["epoch 3/3"]  # epochs 1 and 2 were kept
    assert len(rep.history.epochs) == 3
    full = []
    run_train_head(m, sentences[:200], tmp_path / "fresh", cfg, settings, HeadData(40, cache_dir=tmp_path / "c"),
                   log=full.append, show_progress_bar=False)
    assert [line for line in full if line.startswith("epoch 3/3")] == epochs  # same numbers as an uninterrupted run


def test_the_default_model_loads_the_shipped_head(default_enc):
    assert shipped_head_path().is_file() and shipped_head_path().stat().st_size < 8_000_000
    assert default_enc.model.mask_head is not None and default_enc.model.has_mlm_head
    meta = default_enc.model.mask_head.meta
    assert meta["heldout_top5"] - meta["unigram_top5"] >= 0.10


def test_shipped_head_predicts_masked_words_of_unseen_sentences(default_enc):
    """STS-B dev was not in the head's corpus: mask its words and check the head finds them."""
    from promptsearch.data import read_stsb

    sents = read_stsb("dev").sentences()[:600]
    m = default_enc.model
    st = collect_states(m, sents, masking=Masking(0.15, seed=1, bf16=False), show_progress_bar=False)[-1]
    special = m.tokenizer.all_special_ids
    acc = head_accuracy(m.mask_head, st.states, st.targets, exclude=special)
    counts = torch.bincount(st.targets, minlength=m.config.vocab_size)  # unigram fitted on the test tokens themselves
    uni = unigram_accuracy(st.targets, st.targets, m.config.vocab_size)
    assert counts.sum() > 500
    assert acc.top5 > uni.top5 + 0.10, (acc, uni)
    # no head at all (projection on the word embeddings) is far worse
    none = load_model("default", mask_head="none", device="cpu")
    assert none.mask_head is None and not none.has_mlm_head


def test_default_predictions_depend_on_the_sentence(default_enc):
    preds = predict(default_enc, ["i am sad.", "the man is playing the guitar."], PAPER_T, top_k=5)
    assert preds[0].raw != preds[1].raw and preds[0].denoised != preds[1].denoised


@pytest.mark.parametrize("layout", ["now", "before the one loop"])
def test_head_training_resumes_from_its_checkpoint_in_either_layout(layout, tmp_path):
    """The head trains in the one loop: stopped after epoch 2 and run again, it trains epoch 3 alone and ends
    where an uninterrupted run ends (the same rows, the same weights) — also from a checkpoint laid out as
    versions before the one loop wrote it."""
    emb, st = _synthetic()
    train, test = split_heldout(st, 1500, 300)
    settings = HeadTrainSettings(epochs=3, batch_size=128, lr=1e-2)

    def run(checkpoint=None, on_epoch=None):
        torch.manual_seed(0)
        head = MaskHead(HeadConfig(16, 50, rank=4), emb)
        hist = train_head(head, train, test, settings, checkpoint=checkpoint, on_epoch=on_epoch,
                          show_progress_bar=False)
        return head, hist

    def stop_at_2(epoch, acc, loss):
        if epoch == 2:
            raise KeyboardInterrupt

    ck = tmp_path / "checkpoint.pt"
    with pytest.raises(KeyboardInterrupt):
        run(ck, stop_at_2)
    if layout != "now":
        d = torch.load(ck, weights_only=False)
        torch.save({"head": d["head"], "opt": d["opt"], "sched": d["sched"], "best_state": d["best_state"],
                    "hist": {"epochs": d["history"], "best_epoch": 2, "best": d["history"][-1]}}, ck)
    seen = []
    head, hist = run(ck, lambda e, acc, loss: seen.append(e))
    fresh, full = run()
    assert seen == [3] and hist.epochs == full.epochs and hist.best_epoch == full.best_epoch
    assert all(torch.equal(a, b) for a, b in zip(head.state_dict().values(), fresh.state_dict().values()))


def test_the_head_trains_in_the_devices_default_precision_unless_told(monkeypatch):
    """bf16=None is decided by the library (the device's measured or pinned precision), as the command line's
    default once was there alone; a given precision stays."""
    from promptsearch.train.head import HeadTrainSettings

    for pin, want in (("bf16", True), ("fp32", False)):
        monkeypatch.setenv("PROMPTSEARCH_PRECISION", pin)
        got = HeadTrainSettings().on("cpu")
        assert got.bf16 is want and got.record()["bf16"] is want
    assert HeadTrainSettings(bf16=False).on("cpu").bf16 is False
    assert HeadTrainSettings().bf16 is None
