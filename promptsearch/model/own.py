"""The model's own representation: what ``SentenceTransformer(model).encode(sentences)`` computes.

It is read from the model's sentence-transformers module stack (:mod:`.stack`, loaded by
sentence-transformers itself): the default prompt (``default_prompt_name`` in
``config_sentence_transformers.json``) before ``[X]``, pooled as its Pooling module pools
(``pooling_mode`` and ``include_prompt``), its Dense and Normalize after it, its max length. A plain
checkpoint gets sentence-transformers' default: mean pooling, no prompt (last-token pooling for a
``*ForCausalLM``). Every search scores it first and keeps it unless a template beats it beyond noise;
``eval`` and ``encode`` with no template give it.
"""

from __future__ import annotations

from ..representation import Representation
from .loading import LoadedModel


def own_representation(model: LoadedModel) -> Representation:
    """The model's own representation, e.g. ``query: [X] @sentence-cls`` (a one-line error when
    sentence-transformers cannot read the model or this tool cannot run its stack as is)."""
    return model.stack().own()


def describe_own(model: LoadedModel) -> str:
    """What was read, in words: ``CLS pooling + Dense 384→256 + Normalize, 128 tokens, default prompt 'query: '``."""
    return model.stack().describe()
