import numpy as np
import pytest
import torch
from conftest import PAPER_T, PRECISIONS, ROBERTA_T, make_encoder, vec_tol

from promptsearch import PromptSearchError, rep
from promptsearch.model.loading import load_model

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
SENTS = ["a man is playing a guitar .", "a woman slices an onion", "the cat sat on the mat .",
         "a man is playing a guitar ."]


def _manual_mask_state(enc, ids, pos, position_ids=None, attention_mask=None):
    """One unpadded forward of one input, in the encoder's precision."""
    ids_t = torch.tensor([ids])
    with torch.no_grad(), enc.autocast():
        mask = torch.ones_like(ids_t) if attention_mask is None else torch.tensor([attention_mask])
        out = enc.encoder(input_ids=ids_t, attention_mask=mask,
                          position_ids=None if position_ids is None else torch.tensor([position_ids]))
    return out.last_hidden_state[0, pos].float().numpy()


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("kind, template", [("bert", PAPER_T), ("roberta", ROBERTA_T)])
def test_mask_state_equals_single_unpadded_forward(kind, template, precision, encoders):
    enc = encoders(kind, precision)
    vecs = enc.encode(SENTS, template=template)
    tol = vec_tol(precision, vecs, encoders(kind, "fp32").encode(SENTS, template=template))
    assert np.abs(vecs[0] - vecs[1]).max() > 2 * tol  # the tolerance can tell two sentences apart
    for s, v in zip(SENTS, vecs):
        sent = enc.sentence_ids(enc.prepare([s]), template)[0]
        ids, pos = enc.rendered(template).ids(sent)
        np.testing.assert_allclose(v, _manual_mask_state(enc, ids, pos), atol=tol)
    np.testing.assert_array_equal(vecs[0], vecs[3])  # duplicates share one encoding


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("kind, template", [("bert", PAPER_T), ("roberta", ROBERTA_T), ("bert", "[MASK] , so : [X] !")])
def test_denoise_bias_is_template_only_forward_with_shifted_positions(kind, template, precision, encoders):
    enc = encoders(kind, precision)
    r = enc.rendered(template)
    states = enc.prompt_states(SENTS, template, denoise=True)
    tol = vec_tol(precision, states.bias, encoders(kind, "fp32").prompt_states(SENTS, template, denoise=True).bias)
    off = enc.model.position_offset
    for i, s in enumerate(SENTS):
        sent = enc.sentence_ids(enc.prepare([s]), template)[0]
        n = len(sent)
        # (1) by construction: template tokens alone, positions after [X] shifted by n
        ids = list(r.before) + list(r.after)
        pos_ids = list(range(off, off + len(r.before))) + list(range(off + len(r.before) + n,
                                                                     off + len(r.before) + n + len(r.after)))
        mask = r.mask_index if r.mask_in_before else len(r.before) + r.mask_index
        expected = _manual_mask_state(enc, ids, mask, position_ids=pos_ids)
        np.testing.assert_allclose(states.bias[i], expected, atol=tol)
        # (2) independently: the full input with the sentence hidden from attention gives the same vector
        full, fpos = r.ids(sent)
        att = [1] * len(r.before) + [0] * n + [1] * len(r.after)
        np.testing.assert_allclose(states.bias[i], _manual_mask_state(enc, full, fpos, attention_mask=att),
                                   atol=max(tol, 1e-4))
    np.testing.assert_allclose(enc.encode(SENTS, template=template, denoise=True), states.raw - states.bias, atol=1e-6)
    lengths = {len(x) for x in enc.sentence_ids(enc.prepare(SENTS), template)}
    t = __import__("promptsearch").Template.parse(template).text
    assert all((t, n) in enc.prompt._bias_cache for n in lengths)
    # the bias really depends on the shift
    with torch.no_grad():
        b = enc.prompt.template_bias(template, [1, 20]).numpy()
    assert not np.allclose(b[0], b[1], atol=1e-4)


@pytest.mark.parametrize("device", DEVICES)
def test_an_encoder_in_training_mode_encodes_with_its_bias_computed_afresh(device, tiny_bert_dir):
    """In training mode (dropout on) the template bias is computed afresh on the encoder's device, not cached. With
    dropout at 0 it is the cached bias, and ``encode`` gives the same vectors. On a GPU the fresh bias stayed on the
    device and ``encode`` failed to convert it (found on an H100, 2026-11-26)."""
    enc = make_encoder(tiny_bert_dir, device=device)
    want = enc.encode(SENTS, template=PAPER_T, denoise=True)
    enc.prompt.clear_cache()
    for m in enc.encoder.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    enc.encoder.train()
    try:
        got = enc.encode(SENTS, template=PAPER_T, denoise=True)
        assert not enc.prompt._bias_cache  # computed afresh, not kept
    finally:
        enc.encoder.eval()
    np.testing.assert_allclose(got, want, atol=1e-5)


@pytest.mark.parametrize("precision", PRECISIONS)
def test_batching_and_padding_do_not_change_vectors(precision, encoders):
    enc, fp32 = encoders("bert", precision), encoders("bert", "fp32")
    together = enc.encode(SENTS, template=PAPER_T, batch_size=3)
    alone = np.stack([enc.encode([s], template=PAPER_T) for s in SENTS])[:, 0]
    np.testing.assert_allclose(together, alone, atol=vec_tol(precision, alone, fp32.encode(SENTS, template=PAPER_T)))
    pooled = enc.encode(SENTS, pooling="mean", batch_size=2)
    pooled_alone = np.stack([enc.encode(s, pooling="mean") for s in SENTS])
    np.testing.assert_allclose(pooled, pooled_alone,
                               atol=vec_tol(precision, pooled_alone, fp32.encode(SENTS, pooling="mean")))


def _plain_forward(enc, s, attentions=False):
    ids = torch.tensor([enc.tokenizer(s)["input_ids"]])
    with enc._attn_impl("eager" if attentions else None), torch.no_grad():
        out = enc.encoder(input_ids=ids, output_hidden_states=True, output_attentions=attentions)
    return ids[0], out


def test_every_pooling_matches_its_definition(bert_enc):
    enc, s = bert_enc, "a man is playing a guitar ."
    ids, out = _plain_forward(enc, s, attentions=True)
    last = out.last_hidden_state[0]
    special = torch.tensor([i in enc._special_ids for i in ids.tolist()])
    emb = enc.word_embeddings[ids]
    biased = enc.biased_token_mask()[ids]
    a = out.attentions[1][0, 2].diagonal()
    fl = (out.hidden_states[0][0] + out.hidden_states[-1][0]) / 2
    expected = {
        "cls": last[0],
        "mean": last.mean(0),
        "first-last": fl.mean(0),
        "static": emb[~special].mean(0),
        "static-debiased": emb[~special & ~biased].mean(0),
        "ditto": (fl * a[:, None]).sum(0) / a.sum(),
    }
    for name, vec in expected.items():
        got = enc.encode([s], rep=rep(pooling=name, head="1-2"))[0]
        np.testing.assert_allclose(got, vec.numpy(), atol=1e-5, err_msg=name)
    # static-debiased really drops something here, else the test above proves nothing
    assert (~special & biased).any() and (~special & ~biased).any()


def test_biased_tokens_are_frequent_subwords_and_punctuation(bert_enc):
    tok, mask = bert_enc.tokenizer, bert_enc.biased_token_mask()
    for t in [".", ",", "##s", "the", "a"]:
        assert mask[tok.convert_tokens_to_ids(t)], t
    for t in ["guitar", "onion"]:
        assert not mask[tok.convert_tokens_to_ids(t)], t


def test_pooling_and_template_errors(bert_enc):
    with pytest.raises(PromptSearchError, match="unknown pooling"):
        bert_enc.encode(["a"], pooling="max")
    with pytest.raises(PromptSearchError, match="needs head=L-H"):
        make_encoder(bert_enc.model.path).encode(["a"], pooling="ditto")
    with pytest.raises(PromptSearchError, match="out of range"):
        bert_enc.encode(["a"], rep=rep(pooling="ditto", head="5-0"))
    with pytest.raises(PromptSearchError, match="needs a template="):
        bert_enc.encode(["a"], denoise=True)


def test_period_convention(bert_enc):
    assert bert_enc.prepare(["a cat", "a cat .", 'he said "hi"', "why ?", "it's '"]) == ["a cat.", "a cat .",
                                                                                         'he said "hi"', "why ?",
                                                                                         "it's '"]
    off = make_encoder(bert_enc.model.path, add_period=False)
    assert off.prepare(["a cat"]) == ["a cat"]
    assert not np.allclose(off.encode(["a cat"], template=PAPER_T), bert_enc.encode(["a cat"], template=PAPER_T))


def test_loading_paths(tiny_bert_dir, tiny_bert_encoder_only_dir, tiny_distilbert_dir, capsys):
    m = load_model(str(tiny_bert_dir))
    assert m.has_mlm_head and m.tokenizer.mask_token == "[MASK]"
    m2 = load_model(str(tiny_bert_encoder_only_dir))
    assert not m2.has_mlm_head
    assert "no MLM head" in capsys.readouterr().err
    # the encoder weights are the checkpoint's, not a fresh init
    from transformers import BertModel
    ref = BertModel.from_pretrained(tiny_bert_encoder_only_dir)
    # loaded on the default device
    assert torch.equal(ref.embeddings.word_embeddings.weight, m2.encoder.embeddings.word_embeddings.weight.cpu())
    d = make_encoder(tiny_distilbert_dir)
    v = d.encode(SENTS, template=PAPER_T, denoise=True)
    assert v.shape == (4, 32) and np.isfinite(v).all()
    assert d.encode(SENTS, pooling="first-last").shape == (4, 32)


def test_default_model_weights_are_the_bundled_minilm(default_enc):
    from transformers import AutoModel

    from promptsearch.model.loading import default_model_path
    ref = AutoModel.from_pretrained(default_model_path())
    for (n, p), (_, q) in zip(ref.named_parameters(), default_enc.encoder.named_parameters()):
        assert torch.equal(p, q), n
    assert default_enc.model.mlm is None  # the checkpoint has no MLM head: the shipped trained head stands in
    assert default_enc.model.mask_head is not None and default_enc.model.has_mlm_head
    assert default_enc.model.tokenizer.mask_token == "[MASK]"
