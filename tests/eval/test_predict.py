"""[MASK] predictions with/without denoising and the Eq. 3 representation."""

import numpy as np
import pytest
import torch
from conftest import PAPER_T, ROBERTA_T, make_encoder

from promptsearch import rep
from promptsearch.cli import main
from promptsearch.eval.predict import mask_logits, predict, topk_static


@pytest.mark.parametrize("fixture, template", [("tiny_bert_dir", PAPER_T), ("tiny_roberta_dir", ROBERTA_T),
                                                ("tiny_distilbert_dir", PAPER_T)])
def test_head_logits_equal_the_mlm_forward(fixture, template, request):
    enc = make_encoder(request.getfixturevalue(fixture))
    s = "a man is playing a guitar ."
    ids, pos = enc.rendered(template).ids(enc.sentence_ids(enc.prepare([s]), template)[0])
    with torch.no_grad():
        expected = enc.model.mlm(input_ids=torch.tensor([ids])).logits[0, pos]
    raw, den = mask_logits(enc, [s], template)
    finite = torch.isfinite(raw[0])
    torch.testing.assert_close(raw[0][finite], expected[finite], atol=1e-4, rtol=1e-4)
    assert not finite[enc.tokenizer.mask_token_id]  # special tokens are never predicted
    st = enc.prompt_states([s], template, denoise=True)
    with torch.no_grad():
        head_den = enc.model.mlm_logits(torch.as_tensor(st.denoised))[0]
    torch.testing.assert_close(den[0][finite], head_den[finite], atol=1e-4, rtol=1e-4)


def test_predictions_depend_on_the_sentence_and_on_denoising(bert_enc):
    preds = predict(bert_enc, ["a man is playing a guitar .", "the stock market fell sharply ."], PAPER_T, top_k=5)
    assert len(preds[0].raw) == 5 and all(0 <= p <= 1 for _, p in preds[0].raw)
    assert preds[0].raw != preds[1].raw
    assert preds[0].raw != preds[0].denoised


def test_eq3_is_the_probability_weighted_top_k_average(bert_enc):
    s = ["a man is playing a guitar .", "a woman slices an onion ."]
    v = topk_static(bert_enc, s, PAPER_T, denoise=True, k=7)
    raw, den = mask_logits(bert_enc, s, PAPER_T)
    for i in range(2):
        p = den[i].softmax(-1)
        top = p.topk(7)
        w = top.values / top.values.sum()
        expected = (w[:, None] * bert_enc.word_embeddings[top.indices]).sum(0)
        np.testing.assert_allclose(v[i], expected.numpy(), atol=1e-5)
    np.testing.assert_allclose(bert_enc.encode(s, rep=rep(PAPER_T, denoise=True, pooling="topk-static", top_k=7)), v,
                               atol=1e-6)


def test_predict_and_table9_commands(tiny_bert_dir, capsys):
    assert main(["predict", "--model", str(tiny_bert_dir), "--no-bf16", "-q", "i am sad .", "the man plays ."]) == 0
    out = capsys.readouterr().out
    assert out.count("without denoising") == 2 and out.count("with denoising") == 2
    assert main(["table9", "--model", str(tiny_bert_dir), "--tasks", "sts16", "--no-bf16", "-q"]) == 0
    out = capsys.readouterr().out
    assert "avg. top-200 tokens (denoised)" in out and "[MASK] token" in out
    assert main(["eval", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--pooling", "topk-static", "--tasks",
                 "sts16", "-q", "--no-bf16"]) == 0
    assert main(["eval", "--model", str(tiny_bert_dir), "--template", PAPER_T, "--pooling", "mean", "-q"]) == 2
