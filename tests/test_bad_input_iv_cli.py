"""Bad input, fourth round (issue 46), the command line's share: a key that would not read back, a
vocabulary that makes one, an exported folder given as --template-dir, an edited entry exported, a
typo'd flag, hints worded as flags, the data folder looked for beside the checkout, and the TUI
without a terminal or ended by SIGTERM — each one line with exit 2 (or the note it owes), nothing
written where it refuses."""

import pytest

from promptsearch.cli import main
from conftest import write_vocab

T2 = "[X] means [MASK] ."


def _one_line(capsys, code, *words):
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in err, err
    return err


def test_a_pooled_prompt_holding_a_join_is_refused_before_scoring(tiny_bert_dir, tmp_path, capsys):
    """19. 'a + [X]' pooled was scored as 'a + [X] @sentence-mean', a key that reads as the ensemble of 'a' and
    '[X] @sentence-mean': it ranked first, and plot (any reader) refused the file. Now refused before a pass,
    no file written; the same for a [MASK] template read at a layer."""
    out = tmp_path / "r.json"
    _one_line(capsys, main(["score", "--model", str(tiny_bert_dir), "--dataset", "sts16", "--no-cache", "-q",
                            "--validate-top", "0", "--out", str(out), "--readout", "sentence-mean", "a + [X]"]), "' + '")
    assert not out.exists()
    from promptsearch.errors import TemplateError
    from promptsearch.representation import Representation

    with pytest.raises(TemplateError, match="ensemble"):
        Representation.of("a + [X] means [MASK] .", layer=1)
    k = Representation.of("a + [X] means [MASK] .")  # read at [MASK], last layer: its key reads back as itself
    assert Representation.parse(k.text) == k
    k = Representation.of("a+b [X]", readout="mean")
    assert Representation.parse(k.text) == k


def test_a_vocabulary_with_a_lone_plus_is_refused_before_scoring(tiny_bert_dir, tmp_path, capsys):
    """20. A vocabulary token '+' was refused only when the prefix step made '+ [X] ...', after the first
    step had written entries. Now the vocabulary is refused as it is read: no results file."""
    out = tmp_path / "g.json"
    for kw in ({"prefix_tokens": ["a", "+"]}, {"relations": ["means", "+"]}, {"readout_prompts": ["a + [X]"]}):
        vocab = write_vocab(tmp_path, **kw)
        _one_line(capsys, main(["greedy", "--model", str(tiny_bert_dir), "--vocabulary", vocab, "--dataset", "sts16",
                                "--no-cache", "-q", "--validate-top", "0", "--no-racing", "--max-steps", "2",
                                "--out", str(out)]), "'+'", "vocab.json")
        assert not out.exists() and not list(tmp_path.glob("g.json*"))
