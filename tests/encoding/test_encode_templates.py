"""Many templates per call (``encode_templates``): each sentence tokenized once, token-budget
batches, one copy back — and every template's vectors the ones ``encode`` gives it alone."""

import numpy as np
import pytest
import torch
from conftest import CAUSAL_T, PRECISIONS, make_encoder

from promptsearch import rep
from promptsearch.encoding.batching import budget_batches
from promptsearch.search import Scorer

SENTS = ["a man is playing a guitar .", "two dogs run in the park", "the cat sat on the mat .",
         "a woman slices an onion",
         "a man is playing a guitar .", "the children are playing football on a large green field near the school ."]
MLM_T = ['This sentence : "[X]" means [MASK] .', "[X] means [MASK] .", '"[X]" is like [MASK] .']
CAUSAL = [CAUSAL_T, '"[X]" means in one word:"', 'This sentence : "[X]" means in a word:"']


def _alone(enc, templates, denoise=False, layer=None):
    return [enc.encode(SENTS, rep=rep(t, denoise=denoise, layer=layer)) for t in templates]


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("kind", ["bert", "roberta"])
@pytest.mark.parametrize("denoise", [False, True])
def test_equal_to_each_template_alone_masked_lm(encoders, kind, precision, denoise):
    enc = encoders(kind, precision)
    got = enc.encode_templates(SENTS, MLM_T, denoise=denoise)
    want = _alone(enc, MLM_T, denoise=denoise)
    for g, w in zip(got, want):
        assert g.shape == (len(SENTS), enc.prompt.hidden_size) and g.dtype == np.float32
        np.testing.assert_allclose(g, w, atol=1e-5, rtol=0)
        # a template's batches are its own: the company it is encoded in changes nothing
        np.testing.assert_array_equal(g, w)
    assert np.abs(got[0] - got[1]).max() > 1e-3  # different templates, different vectors


@pytest.mark.parametrize("compat", ["promptsearch", "reference"])
def test_equal_alone_in_both_compat_modes(tiny_bert_dir, tiny_roberta_dir, compat):
    for d in (tiny_bert_dir, tiny_roberta_dir):
        enc = make_encoder(d, compat=compat)
        for dn in (False, True):
            for g, w in zip(enc.encode_templates(SENTS, MLM_T, denoise=dn), _alone(enc, MLM_T, denoise=dn)):
                np.testing.assert_allclose(g, w, atol=1e-5, rtol=0)


@pytest.mark.parametrize("kind", ["tiny_gpt2_dir", "tiny_opt_dir", "tiny_llama_dir"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_equal_alone_causal_both_paddings(kind, side, request):
    enc = make_encoder(request.getfixturevalue(kind), padding_side=side)
    for dn in (False, True):
        got = enc.encode_templates(SENTS, CAUSAL, denoise=dn)
        for g, w in zip(got, _alone(enc, CAUSAL, denoise=dn)):
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=0)
        assert np.abs(got[0] - got[1]).max() > 1e-4


def test_layers_soft_prompts_and_repeats(tiny_bert_dir):
    enc = make_encoder(tiny_bert_dir)
    torch.manual_seed(0)
    enc.set_soft_prompt(MLM_T[1], torch.randn(enc.rendered(MLM_T[1]).n_soft, enc.prompt.hidden_size))
    for layer in (None, 1):
        got = enc.encode_templates(SENTS, MLM_T + [MLM_T[0]], denoise=True, layer=layer)
        want = _alone(enc, MLM_T + [MLM_T[0]], denoise=True, layer=layer)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, atol=1e-5, rtol=0)
        np.testing.assert_array_equal(got[0], got[3])  # a template asked twice
    assert not enc.encode_templates([], MLM_T)[0].size


def test_each_sentence_is_tokenized_once(tiny_bert_dir, monkeypatch):
    import promptsearch.encoding.prompt as prompt

    enc = make_encoder(tiny_bert_dir)
    seen = []
    real = prompt.tokens_in_context
    monkeypatch.setattr(prompt, "tokens_in_context", lambda tok, texts: seen.append(list(texts)) or real(tok, texts))
    enc.encode_templates(SENTS, MLM_T)
    assert len(seen) == 1 and len(seen[0]) == len(set(SENTS))  # one call, each distinct sentence once
    enc.encode_templates(SENTS[:3], ['This word : "[X]" is [MASK] .'])
    assert len(seen) == 1  # a new template over known sentences tokenizes nothing


@pytest.mark.parametrize("kind", ["tiny_bert_dir", "tiny_roberta_dir", "tiny_gpt2_dir", "tiny_llama_dir"])
def test_token_ids_are_the_tokenizers_own(kind, sentences, request):
    """The sentences are tokenized through the fast backend in one call: the ids are the
    tokenizer's own, also after a truncating call, and a tokenizer whose own call does more than
    its backend (a Python-side override) is used as it is."""
    from transformers import AutoTokenizer

    from promptsearch.template import PROBE, token_ids

    tok = AutoTokenizer.from_pretrained(request.getfixturevalue(kind))
    texts = sentences[:40] + [" " + s for s in sentences[40:50]] + ["[MASK] <s> </s> <unk> <mask>", "",
                                                                    "  two  spaces "]
    want = [list(x) for x in tok(texts, add_special_tokens=False)["input_ids"]]
    assert len(texts) > PROBE and token_ids(tok, texts) == want
    tok(texts[:3], truncation=True, max_length=4)  # leaves the backend truncating ...
    assert token_ids(tok, texts) == want  # ... which the probe (the tokenizer's own call) undoes first

    class Shouting:  # its own call upper-cases first; the backend alone would not
        is_fast, _tokenizer = True, tok._tokenizer

        def __call__(self, texts, **kw):
            return tok([t.upper() for t in texts], **kw)

    loud = [list(x) for x in tok([t.upper() for t in texts], add_special_tokens=False)["input_ids"]]
    assert token_ids(Shouting(), texts) == loud and (loud != want or kind == "tiny_bert_dir")


def test_batches_follow_the_token_budget(tiny_bert_dir):
    enc = make_encoder(tiny_bert_dir, max_tokens=40)
    shapes = []
    hook = enc.encoder.register_forward_pre_hook(lambda m, a, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                                 with_kwargs=True)
    try:
        enc.encode_templates(SENTS, MLM_T, denoise=False)
    finally:
        hook.remove()
    n_rows = len(set(SENTS)) * len(MLM_T)
    assert sum(b for b, _ in shapes) == n_rows
    assert all(b * t <= 40 or b == 1 for b, t in shapes) and len(shapes) > len(MLM_T)
    roomy = make_encoder(tiny_bert_dir, max_tokens=4096)
    np.testing.assert_allclose(roomy.encode_templates(SENTS, MLM_T)[0], enc.encode_templates(SENTS, MLM_T)[0],
                               atol=1e-5)


@pytest.mark.parametrize("side", ["right", "left"])
def test_spliced_rows_pad_as_rows_built_one_by_one(tiny_bert_dir, side):
    """A template's rows are spliced from the sentences' cached tokens as arrays: each row and each
    padded batch is what building the row alone (template pieces + truncated sentence) and padding
    the batch alone give, for [MASK] before and after [X], truncated sentences, any grouping."""
    from promptsearch.encoding.batching import pad

    enc = make_encoder(tiny_bert_dir, max_length=14)  # the long sentence is cut to fit
    for t in MLM_T + ['[MASK] , in other words : "[X]"']:
        rows, r = enc.prompt.input_rows(SENTS, t), enc.rendered(t)
        built = [(*r.ids(s), len(s)) for s in enc.prompt.sentence_ids(SENTS, t)]
        assert [rows[i] for i in range(len(rows))] == built and max(n for _, _, n in built) < len(SENTS[-1].split())
        batches = budget_batches(rows.lengths, 30)
        for cells in (1, 60, 1 << 22):  # each batch alone, a few together, all together
            for idx, (ids, att, read, shift) in zip(batches, rows.padded_batches(batches, 0, side, cells)):
                want_ids, want_att = pad([built[i][0] for i in idx], 0, "cpu", side=side)
                np.testing.assert_array_equal(ids, want_ids.numpy())
                np.testing.assert_array_equal(att, want_att.numpy())
                want_shift = [ids.shape[1] - len(built[i][0]) if side == "left" else 0 for i in idx]
                assert shift.tolist() == want_shift
                assert read.tolist() == [built[i][1] + sh for i, sh in zip(idx, want_shift)]
                assert (ids[np.arange(len(idx)), read] == enc.tokenizer.mask_token_id).all()


def test_budget_batches_cover_every_row_once_longest_first():
    lengths = [5, 30, 7, 7, 12, 1, 50, 9]
    batches = budget_batches(lengths, 40)
    rows = np.concatenate(batches)
    assert sorted(rows.tolist()) == list(range(len(lengths)))
    assert [lengths[i] for i in rows] == sorted(lengths, reverse=True)
    for b in batches:
        assert len(b) * max(lengths[i] for i in b) <= 40 or len(b) == 1
    assert all(len(b) <= 2 for b in budget_batches(lengths, 1000, max_rows=2))


def test_score_many_equals_each_score_alone(tiny_bert_dir):
    templates = MLM_T + ['This word : "[X]" is [MASK] .']
    many = Scorer(make_encoder(tiny_bert_dir), dataset="sts16", cache=False).score(templates)
    for t, sc in zip(templates, many):
        alone = Scorer(make_encoder(tiny_bert_dir), dataset="sts16", cache=False).score(t)
        assert sc.template == t and sc.spearman == alone.spearman and not sc.cached


SUFFIXES = [CAUSAL_T, 'This sentence : "[X]" means in a word:"', 'This sentence : "[X]" is like:"',
            'This sentence : "[X]"']


@pytest.mark.parametrize("kind", ["tiny_gpt2_dir", "tiny_opt_dir", "tiny_llama_dir"])
@pytest.mark.parametrize("side", ["right", "left"])
def test_causal_suffixes_branch_from_one_prefix_and_sentence_pass(kind, side, request):
    """Templates equal up to [X]: the prefix cached, the sentence encoded once, each suffix branched
    off — the states of full, separate forwards (fp32), at every layer, also where a long suffix
    cuts a sentence shorter (those rows take their own forward)."""
    enc = make_encoder(request.getfixturevalue(kind), padding_side=side, max_length=40)
    plain = make_encoder(request.getfixturevalue(kind), padding_side=side, max_length=40)
    plain.prompt.share_prefix = False
    # cut in every template
    sents = SENTS + ["a very long sentence " + "about many different things that go on " * 6 + "."]
    shapes = []
    hook = enc.encoder.register_forward_pre_hook(lambda m, a, kw: shapes.append(tuple(kw["input_ids"].shape)),
                                                 with_kwargs=True)
    try:
        got = enc.encode_templates(sents, SUFFIXES, denoise=False)
    finally:
        hook.remove()
    for dn in (False, True):
        for layer in (None, 1):
            g = enc.encode_templates(sents, SUFFIXES, denoise=dn, layer=layer)
            w = plain.encode_templates(sents, SUFFIXES, denoise=dn, layer=layer)
            for a, b in zip(g, w):
                np.testing.assert_allclose(a, b, atol=1e-5, rtol=0)
    assert any(np.abs(a - b).max() > 1e-4 for a, b in zip(got[:1], got[1:]))  # the suffixes do differ
    longest_suffix = max(len(enc.rendered(t).after) for t in SUFFIXES)
    b = len(set(sents))
    assert len([s for s in shapes if s[0] == b and s[1] <= longest_suffix]) == len(SUFFIXES)  # one short pass a suffix
    assert len([s for s in shapes if s[0] == b and s[1] > longest_suffix]) == 1  # the sentences: once, for all four
    assert len(shapes) < 2 * len(SUFFIXES) + 2  # (+ the prefix, + the rows a longer suffix cut shorter: one each)
