"""A model's sentence-transformers module stack, read by sentence-transformers itself.

``SentenceTransformer(folder)`` reads a folder's ``modules.json`` (today's layout or the legacy
``sentence_transformers.models.*`` one, ``pooling_mode_*_tokens`` booleans and all), its Pooling,
Dense and Normalize modules, its max length and its prompts; a plain Hugging Face checkpoint gets
sentence-transformers' default stack (a Transformer and mean pooling; last-token pooling for a
``*ForCausalLM``). ``load_stack`` does exactly that, then points the stack's Transformer at the
encoder promptsearch already loaded, so one set of weights serves [MASK] templates and pooled
read-outs alike. The Transformer's own weights are not read twice: it is loaded on the ``meta``
device, unless a module after it (a Dense) holds weights, which sentence-transformers would then put
on ``meta`` too; that folder is read in full, and its Transformer's copy dropped.

A pooled representation is this stack with its Pooling module's mode and ``include_prompt`` set by
the representation (``ModuleStack.pooling_for``): the Dense, Normalize and max length stay the
folder's. A stack this tool cannot run as sentence-transformers does is refused with one line that
names the module, never replaced by something else.
"""

from __future__ import annotations

import contextlib
import json
import logging
import tempfile
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ..errors import ModelError, first_line
from ..representation import Representation, pooling_of, readout_of

if TYPE_CHECKING:
    from sentence_transformers.base.modules import Dense, Normalize, Router, Transformer
    from sentence_transformers.sentence_transformer.modules import Pooling
    from transformers import PreTrainedModel


@contextlib.contextmanager
def _quiet_transformers():
    """Silence HF's load-time chatter (weight progress bars, 'newly initialized' warnings)."""
    from transformers.utils import logging as hf_logging  # lazy: start-up time

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:  # restore the caller's setting, whatever it was
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def _quiet():
    """sentence-transformers' and transformers' load-time chatter (a new model made with mean pooling,
    the default prompt, weight progress bars, the meta-device note) kept off the user's terminal."""
    st_log = logging.getLogger("sentence_transformers")
    level = st_log.level
    st_log.setLevel(logging.ERROR)
    try:
        with _quiet_transformers(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        st_log.setLevel(level)


def _classes() -> tuple[type[Transformer], type[Pooling], type[Dense], type[Normalize], type[Router]]:
    from sentence_transformers.base.modules import Dense, Normalize, Router, Transformer  # lazy: start-up time
    from sentence_transformers.sentence_transformer.modules import Pooling  # lazy: start-up time

    return Transformer, Pooling, Dense, Normalize, Router


@dataclass
class ModuleStack:
    """A model's sentence-transformers modules: its ``transformer`` (running promptsearch's encoder), the
    ``modules`` after it (one of them the Pooling, at ``pooling_index``), its ``prompts`` and
    ``default_prompt_name``; ``saved``: read from the folder's ``modules.json`` (False: sentence-transformers'
    default stack for a plain checkpoint).

    :param transformer: the stack's first module, sentence-transformers' ``Transformer``.
    :param modules: the modules after it, in order (the Pooling among them).
    :param pooling_index: the Pooling's index in ``modules``.
    :param prompts: the folder's prompts, by name.
    :param default_prompt_name: the prompt ``encode`` uses when given none (None: no prompt).
    :param saved: whether the stack was read from the folder's ``modules.json``.
    :param similarity: how the model compares two vectors (its ``similarity_fn_name``: cosine, dot, euclidean,
        manhattan)."""

    transformer: Transformer
    modules: list[torch.nn.Module]
    pooling_index: int
    prompts: dict[str, str | None] = field(default_factory=dict)
    default_prompt_name: str | None = None
    saved: bool = False
    _variants: dict = field(default_factory=dict, repr=False)
    similarity: str = "cosine"
    prompt_lengths: dict[str, int] = field(default_factory=dict, repr=False, compare=False)  # pooled.prompt_tokens
    tokenizer_clones: dict = field(default_factory=dict, repr=False, compare=False)  # pooled._backend_clones

    @property
    def pooling(self):
        """The stack's own Pooling module.

        :returns: sentence-transformers' ``Pooling``, ``modules[pooling_index]``."""
        return self.modules[self.pooling_index]

    @property
    def max_seq_length(self) -> int | None:
        """The longest input sentence-transformers feeds (``max_seq_length``), special tokens included.

        :returns: the Transformer's ``max_seq_length`` (None: it sets none)."""
        return self.transformer.max_seq_length

    @property
    def default_prompt(self) -> str:
        """The prompt ``encode`` prepends when given none ('' when the folder names no default).

        :returns: the prompt's text."""
        return (self.prompts.get(self.default_prompt_name) or "") if self.default_prompt_name else ""

    @property
    def dimension(self) -> int:
        """The token embeddings' width (what Pooling reads).

        :returns: the Pooling's ``embedding_dimension``."""
        return int(self.pooling.embedding_dimension)

    def own(self) -> Representation:
        """The model's own representation: its default prompt, pooled as its Pooling module pools.

        :returns: ``default_prompt + "[X]"`` with the Pooling's mode as its read-out.
        :raises promptsearch.TemplateError: for a pooling mode that is not one of sentence-transformers'."""
        p = self.pooling
        return Representation.of(self.default_prompt + "[X]", readout=readout_of(p.pooling_mode, p.include_prompt))

    def pooling_for(self, readout: str):
        """The Pooling module a pooled read-out runs: the folder's own when it pools that way, else one
        made like it with the read-out's mode and ``include_prompt``.

        :param readout: a pooled read-out name (``mean``, ``sentence-cls`` ...).
        :returns: the Pooling module (one per read-out is made, then reused).
        :raises promptsearch.TemplateError: for a name that is no pooled read-out."""
        mode, include = pooling_of(readout)
        p = self.pooling
        if p.pooling_mode == mode and (bool(p.include_prompt) == include or mode == "lasttoken"):
            return p
        if readout not in self._variants:
            _, Pooling, *_ = _classes()
            self._variants[readout] = Pooling(self.dimension, pooling_mode=mode, include_prompt=include)
        return self._variants[readout]

    def after_pooling(self) -> list[torch.nn.Module]:
        """The modules after the Pooling (Dense, Normalize …), run on every pooled read-out.

        :returns: those modules, in order (empty when the Pooling is last)."""
        return self.modules[self.pooling_index + 1 :]

    def describe(self, readout: str | None = None, prompt: str | None = None,
                 prompts: dict[str, str] | None = None) -> str:
        """The stack in words, e.g. ``CLS pooling + Dense 384→256 + Normalize, 128 tokens, default prompt
        'query: '`` (``readout``/``prompt``: as a pooled read-out would run it; ``prompts``: named prompts
        instead, ``query prompt 'query: ', no document prompt``).

        :param readout: a pooled read-out to describe instead of the stack's own pooling (None: its own).
        :param prompt: the prompt to name (None: the default prompt; '': none).
        :param prompts: named prompts (``query``, ``document``) to name instead of one prompt (None: ``prompt``).
        :returns: one line.
        :raises promptsearch.TemplateError: for a name that is no pooled read-out."""
        mode, include = pooling_of(readout) if readout else (self.pooling.pooling_mode,
                                                             bool(self.pooling.include_prompt))
        if prompts is not None:
            prompt = next((p for p in prompts.values() if p), "")  # pooled without it: any prompt there is
        prompt = self.default_prompt if prompt is None else prompt
        parts = [f"{_MODE_WORDS.get(mode, mode)} pooling" + ("" if include or mode == "lasttoken" or not prompt
                                                                  else " without the prompt")]
        for m in self.modules:
            if m is self.pooling:
                continue
            name = type(m).__name__
            if name == "Dense":
                parts.append(f"Dense {m.in_features}→{m.out_features}")
            else:
                parts.append(name)
        words = " + ".join(parts)
        if self.max_seq_length and self.max_seq_length < 1_000_000:  # a tokenizer with no limit says 1e30
            words += f", {self.max_seq_length} tokens"
        if prompts is not None:
            words += "".join(f", {name} prompt {p!r}" if p else f", no {name} prompt" for name, p in prompts.items())
        elif prompt:
            words += f", {'default ' if readout is None else ''}prompt {prompt!r}"
        return words


_MODE_WORDS = {"cls": "CLS", "mean": "mean", "max": "max", "mean_sqrt_len_tokens": "mean-sqrt-len",
               "weightedmean": "weighted-mean", "lasttoken": "last-token"}


def _has_meta_weights(modules) -> bool:
    return any(p.device.type == "meta" for m in modules for p in list(m.parameters()) + list(m.buffers()))


def _promptsearch_module(path: str) -> bool:
    """Whether ``path``'s modules.json names promptsearch's own module (a fine-tuned or OptiPrompt folder that
    reads the [MASK] state: sentence-transformers loads it only with trust_remote_code)."""
    try:
        modules = json.loads((Path(path) / "modules.json").read_text(encoding="utf-8"))
        return any(str(m.get("type", "")).startswith("promptsearch.") for m in modules)
    except (OSError, ValueError, AttributeError):
        return False


def _checkpoint_view(path: str):
    """A temporary folder that links every file of ``path`` but its sentence-transformers files: what
    sentence-transformers reads as the plain checkpoint, giving its default stack for it (the pooled
    read-outs of a folder whose own module is promptsearch's)."""
    view = tempfile.TemporaryDirectory(prefix="promptsearch-view-")
    skip = {"modules.json", "config_sentence_transformers.json", "sentence_bert_config.json", "README.md"}
    for f in Path(path).iterdir():
        if f.name not in skip:
            (Path(view.name) / f.name).symlink_to(f.resolve())
    return view


def pad_stand_in(tokenizer) -> None:
    """A tokenizer without a pad token (GPT-2, Llama) pads with its end-of-text token, else its unknown-word token:
    neither this tool nor sentence-transformers can pad a batch without one (transformers refuses), and padded
    positions are masked out, so any id will do. Without either it is left without one (the model loader refuses it).

    :param tokenizer: a Hugging Face tokenizer, changed in place."""
    if tokenizer.pad_token is None or tokenizer.pad_token_id is None:  # none, or one its vocabulary lacks
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token


def load_stack(path: str, encoder: PreTrainedModel | None = None) -> ModuleStack:
    """``path``'s sentence-transformers stack as sentence-transformers reads it, its Transformer running
    ``encoder`` (None: the Transformer's own weights, loaded here: then ``stack.transformer.auto_model`` is
    the encoder to use). A one-line ``ModelError`` for a stack this tool cannot run as is.

    :param path: a model folder, or a Hugging Face hub id.
    :param encoder: the weights the stack's Transformer runs (None: its own, loaded here on the CPU); the
        modules after it are moved to its device and floating-point dtype.
    :returns: the stack.
    :raises promptsearch.errors.ModelError: when sentence-transformers cannot read ``path``, or the stack does
        not start with a feature-extraction Transformer, sends queries and documents different ways (Router,
        Asym), has other than one Pooling module, concatenates pooling modes, or passes its modules forward
        arguments."""

    from sentence_transformers import SentenceTransformer  # lazy: start-up time
    from sentence_transformers.util import load_file_path  # lazy: start-up time

    Transformer, Pooling, _, _, Router = _classes()
    dev = torch.device("cpu") if encoder is None else next(encoder.parameters()).device
    with _quiet():
        try:
            saved = load_file_path(path, "modules.json", local_files_only=True) is not None
        except Exception:  # noqa: BLE001 - a hub id not in the cache: sentence-transformers says below
            saved = False
        view = _checkpoint_view(path) if saved and _promptsearch_module(path) else None
        try:
            where = view.name if view is not None else path
            st = SentenceTransformer(where, device="cpu",
                                     model_kwargs={"device_map": "meta"} if encoder is not None else None)
            mods = list(st.children())
            if encoder is not None and _has_meta_weights(mods[1:]):  # a Dense: read the folder in full
                st = SentenceTransformer(where, device="cpu")
                mods = list(st.children())
        except Exception as exc:  # noqa: BLE001 - whatever sentence-transformers raises, one line
            raise ModelError(f"sentence-transformers cannot read {path} ({type(exc).__name__}: "
                             f"{first_line(exc, 200)}); its pooled read-outs and its own representation need a folder "
                             "sentence-transformers loads") from None
        finally:
            if view is not None:
                view.cleanup()
        saved = saved and view is None
    first, rest = mods[0], mods[1:]
    if not isinstance(first, Transformer):
        raise ModelError(f"{path}: its first sentence-transformers module is {type(first).__name__}, not a "
                         "Transformer; promptsearch reads a transformer's states")
    if getattr(first, "transformer_task", "feature-extraction") != "feature-extraction":
        raise ModelError(f"{path}: its Transformer module is a {first.transformer_task} model, not a sentence encoder")
    for m in rest:
        if isinstance(m, Router) or type(m).__name__ == "Asym":
            raise ModelError(f"{path}: its {type(m).__name__} (Asym) module sends queries and documents through "
                             "different modules; promptsearch reproduces one path only")
    pools = [i for i, m in enumerate(rest) if isinstance(m, Pooling)]
    if len(pools) != 1:
        raise ModelError(f"{path}: {'no' if not pools else len(pools)} Pooling module{'s' if len(pools) > 1 else ''} "
                         f"in its sentence-transformers stack ({', '.join(type(m).__name__ for m in mods)}); "
                         "promptsearch reproduces a stack with one")
    pool = rest[pools[0]]
    assert isinstance(pool, Pooling)
    if not isinstance(pool.pooling_mode, str):
        raise ModelError(f"{path}: its Pooling module concatenates {' + '.join(pool.pooling_mode)} pooling; "
                         "promptsearch reproduces one pooling mode")
    if any((getattr(st, "module_kwargs", None) or {}).values()):
        raise ModelError(f"{path}: its modules take forward arguments (modules.json 'kwargs'); promptsearch reproduces "
                         "plain stacks")
    if first.tokenizer is not None:  # an export keeps the stand-in
        pad_stand_in(first.tokenizer)
    if encoder is not None:
        first.model = encoder  # the one set of weights: promptsearch's (the meta or second copy is dropped)
        dtype = next(encoder.parameters()).dtype
        for m in rest:
            m.to(device=dev, dtype=dtype if dtype.is_floating_point else None)
    return ModuleStack(first, rest, pools[0], dict(st.prompts), st.default_prompt_name, saved,
                       similarity=str(st.similarity_fn_name or "cosine"))
