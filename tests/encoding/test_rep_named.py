"""rep_named: the representation a command's options name, and the option combinations it refuses (a library rule
the CLI once held: eval's flag errors)."""

import pytest

from promptsearch.encoding.reps import Ensemble, MaskState, PromptPool, rep_named
from promptsearch.errors import PromptSearchError

T = 'This sentence : "[X]" means [MASK] .'


def test_nothing_named_is_the_models_own():
    assert rep_named() is None
    assert rep_named([], False, None, None, None, None) is None


def test_a_template_with_options_is_its_mask_state_or_pooled_pass():
    r = rep_named([T], denoise=True, layer=3)
    assert isinstance(r, MaskState) and r.denoise and r.layer == 3 and r.template == T
    p = rep_named(["query: [X]"], readout="mean")
    assert isinstance(p, PromptPool) and p.readout == "mean"
    assert isinstance(rep_named([T, 'This word : "[X]" means [MASK] .']), Ensemble)


def test_a_results_key_names_its_own_readout_and_layer():
    r = rep_named([f"{T} @layer 4"], denoise=True)
    assert isinstance(r, MaskState) and r.layer == 4 and r.denoise
    assert isinstance(rep_named(["query: [X] @mean"]), PromptPool)


@pytest.mark.parametrize("kw, words", [
    ({"readout": "mean"}, "template="),  # a read-out with nothing to read
    ({"template": [f"{T} @layer 4"], "layer": 2}, "drop readout="),  # a key that names its layer, and a layer
    ({"template": ["query: [X] @mean"], "readout": "cls"}, "names its read-out"),
    ({"template": [T], "pooling": "cls"}, "not both"),
    ({"pooling": "ditto"}, "head="),
])
def test_options_that_clash_are_refused_naming_the_parameters(kw, words):
    with pytest.raises(PromptSearchError, match=words):
        rep_named(**kw)
