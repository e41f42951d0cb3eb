"""compat="reference" against a port of kongds/Prompt-BERT's evaluation.py (``get_delta`` and the
STS ``batcher`` with --mask_embedding_sentence [--mask_embedding_sentence_delta]), run on the
tiny random BERT and RoBERTa, in float32."""

import numpy as np
import pytest
import torch
from conftest import make_encoder

from promptsearch import Template
from promptsearch.library import paper_templates

# The reference's own template syntax (run.sh) and the same template in promptsearch's.
REF_BERT = ['*cls*_This_sentence_:_"*sent_0*"_means*mask*.*sep+*',
            '*cls*_This_sentence_of_"*sent_0*"_means*mask*.*sep+*']
REF_ROBERTA = ["*cls*_This_sentence_:_'_*sent_0*_'_means*mask*.*sep+*",
               "*cls*_The_sentence_:_'_*sent_0*_'_means*mask*.*sep+*"]
EDGE = ['he said "hi"', "it's '", "a  man   plays", "why ?", "the end"]


# ---- the port: the reference's code, changed only where noted -----------------------------------
def ref_get_delta(model, template, tokenizer, rows):
    template = template.replace('*mask*', tokenizer.mask_token)\
                       .replace('*sep+*', '')\
                       .replace('*cls*', '').replace('*sent_0*', ' ')
    bs_length = len(tokenizer.encode(template.split(' ')[0].replace('_', ' ').strip())) - 2 + 1
    batch = tokenizer([template.replace('_', ' ').strip().replace('   ', ' ')], return_tensors='pt')
    batch['position_ids'] = torch.arange(batch['input_ids'].shape[1]).unsqueeze(0)
    for k in batch:
        batch[k] = batch[k].repeat(rows, 1)  # the reference uses 256 rows; the tiny models have 64 positions
    batch['position_ids'][:, bs_length:] += torch.arange(rows).unsqueeze(-1)
    m_mask = batch['input_ids'] == tokenizer.mask_token_id
    with torch.no_grad():
        outputs = model(**batch, output_hidden_states=True, return_dict=True)
        delta = outputs.hidden_states[-1][m_mask]
    return delta, batch['input_ids'].shape[1]


def ref_batcher(model, tokenizer, template, batch, delta=None, template_len=None):
    sentences = [' '.join(s) for s in batch]
    template = template.replace('*mask*', tokenizer.mask_token)\
                       .replace('_', ' ').replace('*sep+*', '')\
                       .replace('*cls*', '')
    for i, s in enumerate(sentences):
        if len(s) > 0 and s[-1] not in '.?"\'':
            s += '.'
        sentences[i] = template.replace('*sent 0*', s).strip()
    batch = tokenizer(sentences, return_tensors='pt', padding=True)  # batch_encode_plus is gone in transformers 5
    with torch.no_grad():
        outputs = model(**batch, output_hidden_states=True, return_dict=True)
        last_hidden = outputs.last_hidden_state
        pooler_output = last_hidden[batch['input_ids'] == tokenizer.mask_token_id]
        if delta is not None:
            blen = batch['attention_mask'].sum(-1) - template_len
            pooler_output -= delta[blen]
    return pooler_output.view(batch['input_ids'].shape[0], -1).numpy()
# ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind, ref_template", [("bert", t) for t in REF_BERT] + [("roberta", t) for t in REF_ROBERTA]
                         + [("roberta", REF_BERT[0])])  # double quotes on RoBERTa: BPE merges '."' across [X]
def test_reference_compat_equals_the_reference_evaluation(kind, ref_template, sentences, tiny_bert_dir,
                                                          tiny_roberta_dir):
    enc = make_encoder(tiny_bert_dir if kind == "bert" else tiny_roberta_dir, compat="reference")
    template = Template.parse(ref_template)  # the reference's syntax is accepted as is
    sents = sentences[:40] + EDGE
    batches = [[s.split() for s in sents[i:i + 16]] for i in range(0, len(sents), 16)]  # SentEval hands over tokens
    model = enc.encoder
    raw = np.concatenate([ref_batcher(model, enc.tokenizer, ref_template, b) for b in batches])
    delta, template_len = ref_get_delta(model, ref_template, enc.tokenizer, rows=40)
    den = np.concatenate([ref_batcher(model, enc.tokenizer, ref_template, b, delta, template_len) for b in batches])
    st = enc.prompt_states(sents, template, denoise=True)
    assert np.abs(st.raw - raw).max() < 1e-5
    assert np.abs(st.denoised - den).max() < 1e-5
    assert np.abs(den - raw).max() > 1e-3  # the bias is not nothing
    if kind == "bert":  # for BERT the default inputs are the reference's already
        st = make_encoder(tiny_bert_dir).prompt_states(sents, template, denoise=True)
        assert np.abs(st.raw - raw).max() < 1e-5 and np.abs(st.denoised - den).max() < 1e-5


def test_default_compat_differs_from_the_reference_on_roberta(sentences, tiny_roberta_dir, roberta_enc):
    """On RoBERTa the default differs: the template-only input is re-tokenized and its positions start at 0."""
    ref = make_encoder(tiny_roberta_dir, compat="reference")
    t = Template.parse(REF_BERT[0])
    # the reference's template-only input re-tokenizes the template text: the closing quote follows
    # a space there ('Ġ"'), and positions start at 0
    ids_ref, start, _ = ref.prompt.inputs.template_only(t)
    r = roberta_enc.rendered(t)
    assert ids_ref != list(r.before) + list(r.after) and start == len(r.before)
    with torch.no_grad():
        b_ref, b_ps = ref.prompt.template_bias(t, [3]).numpy(), roberta_enc.prompt.template_bias(t, [3]).numpy()
    assert np.abs(b_ref - b_ps).max() > 1e-3


def test_reference_spellings_ship_with_the_paper_templates():
    assert paper_templates("roberta",
                           compat="reference") == [Template.parse(t).text for t in REF_ROBERTA] + ["[X] means[MASK]."]
    assert paper_templates("bert", compat="reference")[:2] == [Template.parse(t).text for t in REF_BERT]
    assert Template.parse(REF_ROBERTA[0]).text == "This sentence : ' [X] ' means[MASK]."


def test_reference_compat_on_the_command_line(tiny_roberta_dir, capsys):
    import json

    from promptsearch.cli import main
    args = ["eval", "--model", str(tiny_roberta_dir), "--template", REF_ROBERTA[0], "--denoise", "--tasks", "sts16",
            "--json", "-q", "--no-bf16"]
    assert main(args + ["--compat", "reference"]) == 0
    ref = json.loads(capsys.readouterr().out)["sts16"]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["sts16"] != ref
