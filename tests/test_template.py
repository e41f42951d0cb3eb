import pytest
from conftest import PAPER_T, ROBERTA_T

from promptsearch import Template, TemplateError


@pytest.mark.parametrize("bad, why", [
    ("no placeholder [MASK] .", "0 [X]"),
    ("[X] [X] means [MASK] .", "2 [X]"),
    ("[X] means [MASK] [MASK] .", "2 [MASK]"),
])
def test_parse_rejects_bad_templates(bad, why):
    with pytest.raises(TemplateError, match=r"\b" + why.split()[0] + r" \[" + why.split()[1][1:]):
        Template.parse(bad)


def test_a_template_without_mask_is_for_causal_lms(bert_enc):
    """No [MASK]: a causal LM's template (the last token is read); a masked LM refuses it."""
    t = Template.parse("[X] means nothing .")
    assert t.readout == "last" and t.order == ("X",)
    with pytest.raises(TemplateError, match=r"\b0 \[MASK\]"):
        bert_enc.rendered(t)


def test_parse_normalises_whitespace_and_finds_slots():
    t = Template.parse('  This sentence :  "[X]" means [MASK] . ')
    assert t.text == PAPER_T
    assert t.order == ("X", "MASK")
    assert t.pieces == ('This sentence : "', '" means ', " .")
    assert Template.parse("[MASK] : [X]").order == ("MASK", "X")
    assert t.fill("a cat .") == 'This sentence : "a cat ." means [MASK] .'


def test_bert_rendering_tokens(bert_enc):
    tok = bert_enc.tokenizer
    r = bert_enc.rendered(PAPER_T)
    assert tok.convert_ids_to_tokens(list(r.before)) == ["[CLS]", "this", "sentence", ":", '"']
    assert tok.convert_ids_to_tokens(list(r.after)) == ['"', "means", "[MASK]", ".", "[SEP]"]
    ids, pos = r.ids(tok("a man", add_special_tokens=False)["input_ids"])
    assert ids[pos] == tok.mask_token_id and ids.count(tok.mask_token_id) == 1


def test_roberta_rendering_uses_its_mask_spaces_and_single_quotes(roberta_enc):
    tok = roberta_enc.tokenizer
    r = roberta_enc.rendered(ROBERTA_T)
    before = tok.convert_ids_to_tokens(list(r.before))
    after = tok.convert_ids_to_tokens(list(r.after))
    assert before[0] == "<s>" and after[-1] == "</s>"
    assert "<mask>" in after and "[MASK]" not in tok.decode(list(r.after))
    assert "Ġmeans" in after  # BPE keeps the space before 'means'
    assert "Ġ." in after  # ... and before the final period
    assert not r.sentence_prefix_space  # the sentence follows the quote directly
    # The rendered ids decode back to the template text with the model's own mask token.
    sent = roberta_enc.sentence_ids(["a man plays ."], ROBERTA_T)[0]
    ids, pos = r.ids(sent)
    assert tok.decode(ids) == "<s>This sentence : 'a man plays .' means<mask> .</s>"
    assert ids[pos] == tok.mask_token_id


def test_roberta_sentence_after_space_gets_bpe_space(roberta_enc):
    tok = roberta_enc.tokenizer
    r = roberta_enc.rendered("Sentence [X] means [MASK] .")
    assert r.sentence_prefix_space
    first = roberta_enc.sentence_ids(["man ."], "Sentence [X] means [MASK] .")[0][0]
    assert tok.convert_ids_to_tokens(first).startswith("Ġ")


@pytest.mark.parametrize("fixture", ["bert_enc", "roberta_enc"])
def test_truncation_inside_x_keeps_template_and_mask(fixture, request):
    enc = request.getfixturevalue(fixture)
    long = " ".join(["man"] * 500) + " ."
    for template in (PAPER_T, "[MASK] , so : [X] !"):
        r = enc.rendered(template)
        sent = enc.sentence_ids([long], template)[0]
        ids, pos = r.ids(sent)
        assert len(ids) == enc.max_length
        assert ids[: len(r.before)] == list(r.before) and ids[len(ids) - len(r.after):] == list(r.after)
        assert ids[pos] == enc.tokenizer.mask_token_id
    v = enc.encode([long, "a man ."], template=PAPER_T if fixture == "bert_enc" else ROBERTA_T, denoise=True)
    assert v.shape == (2, 32)


def test_truncation_on_default_model_500_words(default_enc):
    words = "astonishingly the guitarist played unbelievable solos tonight".split()
    long = " ".join(words[i % len(words)] for i in range(500))
    assert len(default_enc.tokenizer(long, add_special_tokens=False)["input_ids"]) > 512
    r = default_enc.rendered(PAPER_T)
    sent = default_enc.sentence_ids(default_enc.prepare([long]), PAPER_T)[0]
    ids, pos = r.ids(sent)
    assert len(ids) == 512 == default_enc.max_length
    assert default_enc.tokenizer.convert_ids_to_tokens(ids[-5:]) == ['"', "means", "[MASK]", ".", "[SEP]"]
    assert default_enc.encode([long], template=PAPER_T).shape == (1, 384)


def test_template_too_long_for_model_is_a_clear_error(bert_enc):
    with pytest.raises(TemplateError, match="no room"):
        bert_enc.encode(["a"], template=" ".join(["man"] * 70) + " [X] [MASK]")


def test_entry_keys_parse_to_objects_and_write_back_the_same_text():
    from promptsearch.representation import Representation

    t = 'This sentence : "[X]" means [MASK] .'
    cases = {
        t: Representation(t),
        f"{t} @layer 4": Representation(t, 4),
        f"{t} @layer -2": Representation(t, -2),
        "query: [X] @mean": Representation("query: [X]", readout="mean"),
        "query: [X] @sentence-cls": Representation("query: [X]", readout="sentence-cls"),
        "query:\n[X] @max": Representation("query:\n[X]", readout="max"),  # a prompt keeps its whitespace
        " [X] @lasttoken": Representation(" [X]", readout="lasttoken"),
        f"{t} + [X] means [MASK] . @layer 3": Representation(members=(Representation(t),
                                                                      Representation("[X] means [MASK] .", 3))),
        f"{t} + [X] @mean": Representation(members=(Representation(t), Representation("[X]", readout="mean"))),
    }
    for text, key in cases.items():
        got = Representation.parse(text)
        assert got == key and got.text == text, text
    assert Representation.parse(f"{t} @layer 4").without_layer == Representation(t)
    assert Representation.parse(f"{t} + [X] @mean").first_template == t
    # split leaves the template as written; of/parse parse it (a one-line error for a bad one)
    assert Representation.split("not a template @mean") == Representation("not a template", readout="mean")
    with pytest.raises(TemplateError):
        Representation.parse("not a template @mean")
    with pytest.raises(TemplateError, match="dangling"):
        Representation.parse(f"{t} +  + [X] @mean")
    with pytest.raises(TemplateError, match="unknown read-out"):
        Representation.of("[X]", readout="maximum")
    # with no prompt there is nothing to leave out: sentence-MODE is MODE, as in sentence-transformers
    assert Representation.parse("[X] @sentence-mean") == Representation("[X]", readout="mean")
    # sentence-transformers' other modes pool a prompt; a template with text after [X] is pooled promptsearch's ways
    with pytest.raises(TemplateError, match="text after"):
        Representation.of("[X] means", readout="max")
    assert Representation.of("[X] means", readout="cls").text == "[X] means @cls"
    # a key is one line on a terminal (the file keeps the prompt's newline)
    assert Representation.parse("query:\n[X] @max").shown == "query:\\n[X] @max"
    # what sentence-transformers computes, and why not
    assert Representation.parse("query: [X] @sentence-mean").st_pooling == ("mean", False)
    assert Representation.parse("query: [X] @sentence-mean").prompt == "query: "
    for text, why in ((t, "[MASK] state"), (f"{t} @layer 4", "at a layer"), ("[X] means @mean", "text after [X]"),
                      (f"{t} + [X] @mean", "ensemble")):
        assert why in Representation.parse(text).why_not_sentence_transformers()
