"""Your own data: every input form of the same pairs scores the same, a user copy of STS-B dev scores
exactly as the built-in task, searches and training run on user files, any language."""

import json

import datasets
import pytest
from conftest import PAPER_T, make_encoder

from promptsearch.cli import main
from promptsearch.data import DataOptions, load_task
from promptsearch.encoding import rep
from promptsearch.eval import evaluate_reps


def _stsb_dev_rows():
    a, b, y = load_task("stsb-dev").subsets["dev"]
    return {"sentence1": a, "sentence2": b, "score": y}


@pytest.fixture(scope="module")
def forms(tmp_path_factory):
    """STS-B dev (the SentEval text the built-in task reads) written in every form the tool takes."""
    d = tmp_path_factory.mktemp("forms")
    cols = _stsb_dev_rows()
    ds = datasets.Dataset.from_dict(cols)
    datasets.utils.logging.disable_progress_bar()
    ds.to_csv(str(d / "pairs.csv"), index=False)
    ds.to_csv(str(d / "pairs.tsv"), index=False, sep="\t")
    ds.to_json(str(d / "pairs.jsonl"))
    (d / "pairs.json").write_text(json.dumps([dict(zip(cols, r)) for r in zip(*cols.values())]), encoding="utf-8")
    ds.to_parquet(str(d / "pairs.parquet"))
    ds.save_to_disk(str(d / "saved"))
    (d / "files").mkdir()
    ds.to_csv(str(d / "files" / "data.csv"), index=False)
    # a hub id: datasets reads a folder at that path the way it reads the hub (splits from file names)
    hub = d / "acme" / "stsb-copy"
    hub.mkdir(parents=True)
    ds.to_csv(str(hub / "validation.csv"), index=False)
    ds.select(range(20)).to_csv(str(hub / "test.csv"), index=False)
    # the SICK spelling of the columns
    ds.rename_columns({"sentence1": "sentence_A", "sentence2": "sentence_B", "score": "relatedness_score"}).to_json(
        str(d / "sick-style.jsonl"))
    # any names, mapped with --columns
    ds.rename_columns({"sentence1": "left", "sentence2": "right", "score": "gold"}).to_csv(str(d / "custom.csv"),
                                                                                           index=False)
    return d


@pytest.mark.parametrize("spec",
                         ["pairs.csv", "pairs.tsv", "pairs.jsonl", "pairs.json", "pairs.parquet", "saved", "files",
                                  "acme/stsb-copy@validation", "sick-style.jsonl"])
def test_every_form_scores_exactly_as_the_builtin_task(spec, forms, bert_enc, monkeypatch):
    monkeypatch.chdir(forms)
    r = rep(PAPER_T, denoise=True)
    res = evaluate_reps(bert_enc, [r], ["stsb-dev", spec])[r]
    assert res[spec]["pairs"] == 1500
    assert res[spec]["spearman"] == pytest.approx(res["stsb-dev"]["spearman"], abs=1e-9)


def test_columns_and_subsets(forms, bert_enc, tmp_path):
    from promptsearch.data import PairFormat

    r = rep(PAPER_T)
    got = evaluate_reps(bert_enc, [r], [str(forms / "custom.csv")],
                        DataOptions(fmt=PairFormat.parse("left,right,gold")))[r]
    ref = evaluate_reps(bert_enc, [r], ["stsb-dev"])[r]
    assert got[str(forms / "custom.csv")]["spearman"] == pytest.approx(ref["stsb-dev"]["spearman"], abs=1e-9)
    # a subset column: "all" is Spearman over the concatenation, each subset its own
    rows = _stsb_dev_rows()
    rows["genre"] = ["a" if i % 3 else "b" for i in range(len(rows["score"]))]
    datasets.Dataset.from_dict(rows).to_csv(str(tmp_path / "g.csv"), index=False)
    res = evaluate_reps(bert_enc, [r], [str(tmp_path / "g.csv")],
                        DataOptions(fmt=PairFormat.parse(None, "genre")))[r][str(tmp_path / "g.csv")]
    assert set(res["subsets"]) == {"a", "b"} and res["pairs"] == 1500


def test_original_stsb_is_a_builtin_task():
    d = load_task("stsb-original-dev")
    a, _, y = d.subsets["dev"]
    assert d.n_pairs == 1500 and a[0] == "A man with a hard hat is dancing." and y[0] == 5.0
    assert load_task("stsb-original-test").n_pairs == 1379


def test_search_and_eval_on_a_user_file_from_the_command_line(tiny_bert_dir, tmp_path, capsys):
    """The README's example: a CSV made from the untokenized STS-B dev, searched and evaluated offline."""
    a, b, y = load_task("stsb-original-dev").subsets["dev"]
    n = 300
    datasets.Dataset.from_dict({"sentence1": a[:n], "sentence2": b[:n], "score": y[:n]}).to_csv(
        str(tmp_path / "my_pairs.csv"), index=False)
    vocab = tmp_path / "v.json"
    vocab.write_text(json.dumps({"relations": ["means", "is"], "prefix_tokens": ["this", "sentence"],
                                 "wrappers": ['"']}))
    pairs = str(tmp_path / "my_pairs.csv")
    assert main(["greedy", "--model", str(tiny_bert_dir), "--dataset", pairs, "--vocabulary", str(vocab), "--max-steps",
                 "1", "--out", str(tmp_path / "best.json"), "--no-cache", "-q", "--no-bf16"]) == 0
    best = json.loads((tmp_path / "best.json").read_text())
    assert best["dataset"] == pairs and best["templates"]
    capsys.readouterr()
    first = best["templates"][0]  # a [MASK] template (denoised) or a pooled read-out, the model's own among them
    how = ["--readout", first["readout"]] if first.get("readout") else ["--denoise"]
    assert main(["eval", "--model", str(tiny_bert_dir), "--template", first["template"], *how,
                 "--tasks", f"{pairs},stsb-dev", "--json", "-q", "--no-bf16"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out[pairs] == pytest.approx(best["templates"][0]["spearman"], abs=1e-4)  # the search's score, re-measured


def test_duplicated_pairs_are_kept_with_a_warning(tmp_path, capsys):
    rows = {"sentence1": [f"a {i}" for i in range(12)] + ["a 0"], "sentence2": [f"b {i}" for i in range(12)] + ["b 0"],
            "score": list(range(12)) + [0]}
    datasets.Dataset.from_dict(rows).to_csv(str(tmp_path / "d.csv"), index=False)
    assert load_task(str(tmp_path / "d.csv")).n_pairs == 13
    assert "repeats 1" in capsys.readouterr().err


# ---- any language -------------------------------------------------------------------------------

GERMAN = [("Ein Mann spielt Gitarre .", "Ein Mann spielt ein Instrument .", 4.2),
          ("Eine Frau schneidet eine Zwiebel .", "Eine Frau schneidet Gemüse .", 3.8),
          ("Ein Hund rennt im Park .", "Ein Hund läuft über die Wiese .", 3.9),
          ("Zwei Kinder spielen Fußball .", "Kinder spielen mit einem Ball .", 3.6),
          ("Der Zug kommt spät an .", "Die Bahn hat Verspätung .", 4.0),
          ("Ein Mann spielt Gitarre .", "Eine Katze schläft auf dem Sofa .", 0.2),
          ("Eine Frau liest ein Buch .", "Der Himmel ist blau .", 0.0),
          ("Ein Koch bereitet das Essen zu .", "Jemand kocht in der Küche .", 3.7),
          ("Das Auto ist rot .", "Ein rotes Auto parkt .", 3.1),
          ("Ein Vogel singt .", "Ein Mann fährt Fahrrad .", 0.3),
          ("Es regnet heute .", "Heute ist es nass und regnerisch .", 4.1),
          ("Die Kinder lachen .", "Ein Flugzeug startet .", 0.1)]


def test_a_german_template_search_end_to_end(tmp_path, capsys):
    """A tiny random BERT with a German vocabulary, the shipped German greedy vocabulary and
    paper templates, on a German pairs file."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    from promptsearch.library import load_json

    words = {w.lower() for a, b, _ in GERMAN for w in (a + " " + b).split()}
    vocab_file = load_json("greedy-de")
    words |= {w.lower() for t in vocab_file["relations"] + vocab_file["prefix_tokens"] for w in t.split()}
    words |= {w.lower() for t in load_json("paper")["translations"]["de"] for w in t.replace("[X]",
                                                                                             " ").replace("[MASK]",
                                                                                                          " ").split()}
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", '"', "'", ".", ":",
             ","] + sorted(words - {'"', "'", ".", ":", ","})
    d = tmp_path / "tiny-de"
    d.mkdir()
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(vocab=str(d / "vocab.txt")).save_pretrained(d)
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                               intermediate_size=37, max_position_embeddings=64)).save_pretrained(d)
    enc = make_encoder(d)
    assert enc.tokenizer.unk_token_id not in enc.rendered(load_json("paper")["translations"]["de"][0]).before
    datasets.Dataset.from_dict({"sentence1": [a for a, _, _ in GERMAN], "sentence2": [b for _, b, _ in GERMAN],
                                "score": [y for _, _, y in GERMAN]}).to_csv(str(tmp_path / "de.csv"), index=False)
    assert main(["greedy", "--model", str(d), "--dataset", str(tmp_path / "de.csv"), "--vocabulary", "greedy-de",
                 "--max-steps", "1", "--out", str(tmp_path / "de.json"), "--no-cache", "-q", "--no-bf16"]) == 0
    res = json.loads((tmp_path / "de.json").read_text())
    rels = [r["template"] for r in res["path"] if r["stage"] == "relation"]
    rels += [d["template"] for r in res["path"] if r["stage"] == "relation:best" for d in r["dropped"]]  # raced out
    assert "[X] bedeutet [MASK] ." in rels
    assert main(["score", "--model", str(d), "--dataset", str(tmp_path / "de.csv"), "--no-cache", "-q", "--no-bf16",
                 *load_json("paper")["translations"]["de"]]) == 0
    assert "bedeutet" in capsys.readouterr().out


# ---- training corpora ---------------------------------------------------------------------------

def test_training_reads_corpora_through_datasets(tiny_bert_dir, sentences, tmp_path, capsys):
    (tmp_path / "corpus.txt").write_text("\n".join(sentences[:64]) + "\n\n", encoding="utf-8")
    datasets.Dataset.from_dict({"body": sentences[:64]}).to_csv(str(tmp_path / "corpus.csv"), index=False)
    datasets.Dataset.from_dict({"sent0": sentences[:16], "sent1": sentences[16:32],
                                "hard_neg": sentences[32:48]}).to_csv(str(tmp_path / "nli.csv"), index=False)
    common = ["--model", str(tiny_bert_dir), "--final-tasks", "sts16", "-q", "--no-bf16", "--train-batch-size", "8"]
    assert main(["optiprompt", *common, "--train-file", str(tmp_path / "corpus.txt"), "--steps", "2", "--eval-steps",
                 "2", "--out", str(tmp_path / "op")]) == 0
    assert main(["optiprompt", *common, "--train-file", str(tmp_path / "corpus.csv"), "--text-column", "body",
                 "--steps", "2", "--eval-steps", "2", "--out", str(tmp_path / "op2")]) == 0
    assert main(["finetune", "--mode", "sup", *common, "--template", PAPER_T, "--train-file", str(tmp_path / "nli.csv"),
                 "--max-steps", "1", "--eval-steps", "1", "--out", str(tmp_path / "ft")]) == 0
    from promptsearch.data import load_texts

    texts = load_texts(str(tmp_path / "corpus.txt"))
    assert len(texts) == 64 and texts[0]["text"] == sentences[0]  # blank lines dropped, memory-mapped rows


def test_a_missing_path_shaped_like_a_hub_id_is_said_to_be_no_file_here_first():
    """'dir/name' that exists neither here nor on the hub (the suite runs offline): the one line says there is no
    such file or folder here before the hub's own error, and to check the path."""
    from promptsearch.data.user import load_pairs
    from promptsearch.errors import DataError

    with pytest.raises(DataError, match=r"^no file or folder 'no-owner/no-set' here, and cannot load it from the "
                                        r"Hugging Face Hub \(.*\); check the path"):
        load_pairs("no-owner/no-set")
