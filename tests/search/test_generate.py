"""Definition-driven generation: WordNet parsing, the real T5 path on a tiny T5 taught one
mapping in the test, and the offline MLM generator end to end."""

import io
import json
from pathlib import Path

import pytest
import torch

from promptsearch.cli import main
from promptsearch.data import read_wordnet
from promptsearch.errors import DataError
from promptsearch.search.generate import MLMGenerator, T5Generator
from promptsearch.template import Template

SYNSETS = [
    "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived or known or inferred to have its own "
    "distinct existence",
    "00002137 03 n 02 abstraction 0 abstract_entity 0 010 | a general concept formed by extracting common features; "
    "\"an abstraction\"",
    "01123148 41 v 01 guitar_player 0 001 @ 01122387 v 0000 01 + 08 00 | a person who plays the guitar",
]


@pytest.fixture
def wordnet_dir(tmp_path):
    d = tmp_path / "wordnet"
    d.mkdir()
    header = "  1 This software and database is being provided to you, the LICENSEE, by  \n"
    (d / "data.noun").write_text(header + "\n".join(SYNSETS[:2]) + "\n", encoding="utf-8")
    (d / "data.verb").write_text(header + SYNSETS[2] + "\n", encoding="utf-8")
    for p in ("adj", "adv"):
        (d / f"data.{p}").write_text(header, encoding="utf-8")
    return d


def test_read_wordnet(wordnet_dir, tmp_path):
    pairs = read_wordnet(wordnet_dir)
    assert pairs == [
        ("entity", "that which is perceived or known or inferred to have its own distinct existence"),
        ("abstraction", "a general concept formed by extracting common features"),
        ("guitar player", "a person who plays the guitar"),
    ]
    with pytest.raises(DataError, match="wordnet-base"):
        read_wordnet(tmp_path / "missing")


def test_real_wordnet_if_installed():
    if not Path("/usr/share/wordnet/data.noun").exists():
        pytest.skip("wordnet-base is not installed (scripts/setup.sh installs it)")
    pairs = read_wordnet()
    assert len(pairs) > 100_000 and ("dog",
                                     "a member of the genus Canis (probably descended from the common wolf) "
                                     "that has been domesticated by man since prehistoric times") in pairs


@pytest.fixture(scope="module")
def tiny_t5_dir(tmp_path_factory):
    """A tiny random T5 with a sentencepiece vocabulary, trained for a few seconds to answer
    every span-filling input with '<extra_id_0> This <extra_id_1> means <extra_id_2> .'."""
    import sentencepiece as spm
    from transformers import T5Config, T5ForConditionalGeneration, T5Tokenizer

    d = tmp_path_factory.mktemp("tiny-t5")
    corpus = ["This sentence means something .", "a person who plays the guitar",
              "a general concept formed by features",
              "that which is perceived or known", "This means that .", "entity abstraction guitar player"] * 20
    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(corpus), model_writer=buf, vocab_size=60,
                                   model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                                   character_coverage=1.0, minloglevel=2, hard_vocab_limit=False)
    sp = spm.SentencePieceProcessor(model_proto=buf.getvalue())
    vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tok = T5Tokenizer(vocab=vocab, extra_ids=10)
    tok.save_pretrained(d)
    torch.manual_seed(0)
    cfg = T5Config(vocab_size=len(tok), d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1)
    model = T5ForConditionalGeneration(cfg)
    pairs = [("entity", "that which is perceived or known"), ("guitar player", "a person who plays the guitar"),
             ("abstraction", "a general concept formed by features")]
    inputs = tok([f"<extra_id_0> {d_} <extra_id_1> {w} <extra_id_2>" for w, d_ in pairs], return_tensors="pt",
                 padding=True)
    labels = tok(["<extra_id_0> This <extra_id_1> means <extra_id_2> . <extra_id_3>"] * len(pairs),
                 return_tensors="pt").input_ids
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(300):
        loss = model(**inputs, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    model.save_pretrained(d)
    return d


def test_t5_generation_path(tiny_t5_dir):
    gen = T5Generator(str(tiny_t5_dir), device="cpu", num_beams=4, max_new_tokens=24)
    counts = gen.generate([("guitar player", "a person who plays the guitar"),
                           ("entity", "that which is perceived or known")],
                          batch_size=2, show=False)
    assert counts.most_common(1)[0][0] == "This [X] means [MASK] ."
    assert all(Template.parse(t).text == t for t in counts)


def test_t5_output_parsing(tiny_t5_dir):
    gen = T5Generator(str(tiny_t5_dir), device="cpu")
    assert gen.parse("<pad> <extra_id_0> This sentence : \" <extra_id_1> \" means <extra_id_2> . <extra_id_3></s>") == \
        'This sentence : " [X] " means [MASK] .'
    assert gen.parse("<pad> <extra_id_0> In short , <extra_id_1> is</s>") == "In short , [X] is [MASK]"
    assert gen.parse("<pad> <extra_id_0> nothing else</s>") is None
    assert gen.parse("<pad> <extra_id_0> <extra_id_1> <extra_id_2></s>") is None  # nothing between [X] and [MASK]


def test_missing_t5_model_is_a_clear_error(tmp_path):
    from promptsearch.errors import ModelError
    with pytest.raises(ModelError, match="generator=mlm"):
        T5Generator(str(tmp_path / "nope"))


def test_mlm_generator_on_tiny_bert(bert_enc):
    counts = MLMGenerator(bert_enc, top_k=2).generate([("guitar player", "a person who plays the guitar")], show=False)
    assert len(counts) >= 8
    for t in counts:
        assert Template.parse(t).text == t and t.count("[X]") == 1


def test_t5_command_offline_mlm_end_to_end(tiny_bert_dir, wordnet_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PROMPTSEARCH_CACHE", str(tmp_path / "cache.jsonl"))
    out = tmp_path / "t5.json"
    code = main(["t5", "--generator", "mlm", "--model", str(tiny_bert_dir), "--num-templates", "5", "--num-pairs", "3",
                 "--wordnet-dir", str(wordnet_dir), "--dataset", "sts16", "--out", str(out), "--no-bf16", "-q"])
    assert code == 0
    d = json.loads(out.read_text())
    assert d["strategy"] == "t5" and d["settings"]["generator"] == "mlm"
    assert len(d["templates"]) == 6 and d["x_generated"]["kept"] == 5  # and the model's own representation, first
    assert "scored 6 templates" in capsys.readouterr().out
