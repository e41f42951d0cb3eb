"""PromptEncoder: sentences → vectors, for any representation (``promptsearch.encoding.reps``).

The shape follows ``SentenceTransformer.encode``: deduplicate, sort by length, batch, one
progress bar, return a numpy array in input order. Inference runs under
``torch.inference_mode`` and, where bf16 is the faster precision (measured on a CPU, GPUs with bf16
tensor cores: ``precision_choice``), under bf16 autocast. The [MASK] machinery (template rendering,
the forward, denoising) is the ``PromptModule`` in ``self.prompt``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterable, Sequence, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data import load_corpus
from ..errors import PromptSearchError, TemplateError
from ..library import read_templates
from ..model import DEFAULT_MODEL, LoadedModel, load_model
from ..model.quantize import int8_copy
from ..model.saved import load_template_dir, read_config
from ..representation import TEMPLATE_READOUTS, Representation, is_mask, uses_first_token
from ..template import RenderedTemplate, Template
from .batching import bf16_supported, default_max_tokens, length_order, pad, precision_choice, prepare, unique
from .pooled import prompt_tokens, st_pooled
from .prompt import PromptModule
from .reps import Batch, MaskState, Pooling, PromptPool, Rep, biased_token_ids, rep

if TYPE_CHECKING:
    from transformers import PreTrainedModel

R = TypeVar("R", bound=Rep)


@dataclass(frozen=True)
class EncodeOptions:
    """How an encoder runs, apart from what it reads: one object that travels together.

    :param batch_size: a cap on rows per template-pass batch (plain passes take 64 when None).
    :param max_tokens: padded tokens per batch (default: 2048 on CPU, 65536 on CUDA).
    :param bf16: autocast to bfloat16 (None: where it is the faster precision).
    :param add_period: append "." to sentences without final punctuation (the paper's evaluation).
    :param max_length: truncate inputs to this many tokens (default: the model's positions).
    :param show_progress_bar: show progress bars (None: on a terminal).
    :param compat: ``"promptsearch"`` or ``"reference"`` (the authors' rendering of a filled template).
    :param padding_side: where template rows are padded, ``"right"`` or ``"left"``."""

    batch_size: int | None = None
    max_tokens: int | None = None
    bf16: bool | None = None
    add_period: bool = True
    max_length: int | None = None
    show_progress_bar: bool | None = None
    compat: str = "promptsearch"
    padding_side: str = "right"


@dataclass
class PromptStates:
    """[MASK] states of a template for a list of sentences: raw and the template bias.

    :param raw: the states, float32 ``(n, hidden)``.
    :param bias: each sentence's template bias (zeros when not denoised), the same shape."""

    raw: np.ndarray
    bias: np.ndarray

    @property
    def denoised(self) -> np.ndarray:
        """The raw states minus the template bias (PromptBERT's template denoising)."""
        return self.raw - self.bias


class PromptEncoder:
    """Turn a (masked) language model into a sentence encoder with a prompt template.

    >>> enc = PromptEncoder.from_pretrained("default")
    >>> enc.encode(["a man plays a guitar ."], template='This sentence : "[X]" means [MASK] .').shape
    (1, 384)
    """

    def __init__(self, model: LoadedModel, options: "EncodeOptions | None" = None, *,
                 corpus: Sequence[str] | None = None, data_dir: str | os.PathLike | None = None, **option_fields):
        """Wrap a loaded model; most callers use ``from_pretrained``.

        :param model: what ``promptsearch.model.load_model`` returns.
        :param options: how the encoder runs (an ``EncodeOptions``; default: its defaults).
        :param corpus: the sentences static-debiased counts token frequencies on (default: the Wikipedia
            sample in ``data_dir``).
        :param data_dir: the data folder the Wikipedia sample is read from (default: the data location).
        :param option_fields: fields of ``EncodeOptions`` as keywords (``bf16=False``,
            ``show_progress_bar=False`` ...), which replace those of ``options``.
        :raises TypeError: for a keyword that is no field of ``EncodeOptions``."""
        try:
            o = dataclasses.replace(options or EncodeOptions(), **option_fields)
        except TypeError:
            bad = sorted(set(option_fields) - {f.name for f in dataclasses.fields(EncodeOptions)})
            known = ", ".join(f.name for f in dataclasses.fields(EncodeOptions))
            raise TypeError(f"PromptEncoder got unknown option(s) {', '.join(bad)}; EncodeOptions has "
                            f"{known}") from None
        self.options = o
        batch_size, max_tokens, bf16, max_length = o.batch_size, o.max_tokens, o.bf16, o.max_length
        add_period, show_progress_bar = o.add_period, o.show_progress_bar
        compat, padding_side = o.compat, o.padding_side
        self.model = model
        self.batch_size = batch_size  # a cap on rows per batch (template passes); plain passes take 64 when None
        device = next(model.encoder.parameters()).device
        self.max_tokens = max_tokens or default_max_tokens(device)  # padded tokens per template-pass batch
        self.bf16 = bf16_supported(device) if bf16 is None else bool(bf16)
        self.add_period = add_period
        self.max_length = min(max_length or model.max_positions, model.max_positions)
        self.show_progress_bar = show_progress_bar
        self._corpus = corpus
        self.data_dir = data_dir  # where static-debiased finds the Wikipedia sample (with corpus=None)
        self.prompt = PromptModule(model, self.max_length, self.bf16, compat, padding_side)
        self.int8 = False  # linear layers quantized (a screening copy, see with_precision)
        self.default_template: str | None = None  # set by a trained directory's promptsearch.json
        self.default_denoise = False
        self.default_layer: int | None = None  # a trained directory's read-out layer (None: the last)
        self.default_readout: str | None = None  # a trained directory's pooled read-out (None: [MASK])
        self._biased_ids: frozenset[int] | None = None
        self._pooled_signature: str | None = None
        self._progress_what: str | None = None  # the task its progress bars name (progress_named)
        # called once, before the first forward pass (the CLI's precision line)
        self.on_first_pass: Callable[[], None] | None = None
        lead, trail = self.prompt._specials()
        self._special_ids = set(lead) | set(trail) | set(getattr(self.tokenizer, "all_special_ids", []))

    @classmethod
    def from_pretrained(cls, name_or_path: str = DEFAULT_MODEL, device: str | None = None, mask_head: str | None = None,
                        **kwargs) -> "PromptEncoder":
        """Load "default", an HF id or a path. A directory written by ``promptsearch optiprompt``
        or ``finetune`` (it holds ``promptsearch.json``) brings its template, denoise setting and
        soft prompt, which ``encode`` then uses when called without a template or pooling.

        :param name_or_path: ``"default"``, a Hugging Face model id or a local folder.
        :param device: ``"cpu"``, ``"cuda"``, ... (default: CUDA when present).
        :param mask_head: a trained [MASK] head file (see ``promptsearch.model.load_model``).
        :param kwargs: ``EncodeOptions`` fields and the other keywords of ``PromptEncoder``.
        :returns: the encoder.
        :raises promptsearch.errors.ModelError: for a model that cannot be found or loaded (one line)."""
        cfg = read_config(name_or_path) if name_or_path != DEFAULT_MODEL and os.path.isdir(name_or_path) else None
        if cfg and cfg.get("soft_prompt"):
            cfg, soft = load_template_dir(name_or_path)
            enc = cls(load_model(cfg.get("base_model", DEFAULT_MODEL), device=device, mask_head=mask_head), **kwargs)
            assert soft is not None  # the config names a soft prompt
            enc.set_soft_prompt(cfg["template"], soft.to(enc.device))
        else:
            enc = cls(load_model(name_or_path, device=device, mask_head=mask_head), **kwargs)
        if cfg:
            enc.default_template, enc.default_denoise = cfg["template"], bool(cfg.get("denoise", False))
            enc.default_layer = cfg.get("layer")
            enc.default_readout = cfg.get("readout")
        return enc

    PRECISIONS = ("fp32", "bf16", "int8")

    @property
    def precision(self) -> str:
        """"int8" (quantized linear layers), "bf16" (autocast) or "fp32"."""
        return "int8" if self.int8 else "bf16" if self.bf16 else "fp32"

    def with_precision(self, precision: str) -> "PromptEncoder":
        """This encoder in another precision, for screening: the same tokenizer, template handling
        and soft prompts; ``bf16``/``fp32`` share the weights, ``int8`` runs a quantized copy (CPU).

        :param precision: ``"fp32"``, ``"bf16"`` or ``"int8"``.
        :returns: this encoder when it already runs in ``precision``, else a new one.
        :raises promptsearch.PromptSearchError: for an unknown precision, or bf16 where it is not the faster one."""
        if precision not in self.PRECISIONS:
            raise PromptSearchError(f"unknown precision {precision!r}; choose {', '.join(self.PRECISIONS)} or auto")
        if precision == self.precision:
            return self
        if precision == "bf16" and not bf16_supported(self.device):
            raise PromptSearchError(f"bf16 is not the faster precision on this {self.device.type} "
                                    f"({precision_choice(self.device)[1]}); use precision='fp32' or 'int8'")
        model = self.model
        if precision == "int8":
            model = dataclasses.replace(model, encoder=int8_copy(model.encoder))
        other = PromptEncoder(model, self.options, corpus=self._corpus, data_dir=self.data_dir,
                              bf16=precision == "bf16", max_tokens=self.max_tokens, max_length=self.max_length)
        other.int8 = precision == "int8"
        for t, v in self.soft_prompts.items():
            other.set_soft_prompt(t, v.detach().clone())
        return other

    # ---- small accessors -------------------------------------------------------------------
    @property
    def tokenizer(self):
        return self.model.tokenizer

    @property
    def encoder(self) -> PreTrainedModel:
        return self.prompt.encoder

    @property
    def device(self) -> torch.device:
        return self.prompt.device

    @property
    def compat(self) -> str:
        return self.prompt.compat

    @property
    def word_embeddings(self) -> torch.Tensor:
        return self.model.word_embeddings.detach()

    @property
    def soft_prompts(self) -> dict[str, torch.Tensor]:
        """Template text → its soft prompt (OptiPrompt vectors), for the templates that have one."""
        return {t: v for t in self.prompt._rendered if (v := self.prompt.soft_prompt(t)) is not None}

    def rendered(self, template: str | Template) -> RenderedTemplate:
        """The template's token ids for this model (rendered once, then cached).

        :param template: a template.
        :returns: the rendered template.
        :raises promptsearch.TemplateError: for a template this model cannot fill."""
        return self.prompt.rendered(template)

    def check_template(self, template: str | Template) -> int:
        """Check that this model can fill the template and leaves room for a sentence.

        :param template: a template.
        :returns: the room a sentence has, in tokens.
        :raises promptsearch.TemplateError: for a template this model cannot fill, or one that leaves no room."""
        return self.prompt.check_template(template)

    def sentence_ids(self, sentences: Sequence[str], template: str | Template) -> list[list[int]]:
        """The sentences' token ids as the template's [X] holds them (tokenized in its context, truncated so the
        template fits).

        :param sentences: the sentences (already prepared: see ``prepare``).
        :param template: a template.
        :returns: one list of ids per sentence.
        :raises promptsearch.TemplateError: for a template this model cannot fill, or one that leaves no room."""
        return self.prompt.sentence_ids(sentences, template)

    def set_soft_prompt(self, template: str | Template, vectors: torch.Tensor | None) -> None:
        """Replace the template's literal tokens by trained vectors (OptiPrompt), or restore them.

        :param template: a template.
        :param vectors: ``(n_soft, hidden)``: one vector per literal template token (``RenderedTemplate.soft_slots``);
            a ``torch.nn.Parameter`` is kept as is (training updates it), another tensor is frozen; None removes
            the soft prompt.
        :raises promptsearch.PromptSearchError: for vectors of another shape."""
        self.prompt.set_soft_prompt(template, vectors)

    def autocast(self):
        return self.prompt.autocast()

    def word_logits(self, states) -> torch.Tensor:
        """Head logits of [MASK] states with special tokens ([CLS], <s>, [MASK] ...) excluded:
        predictions are words.

        :param states: [MASK] states, ``(n, hidden)`` (an array or a tensor).
        :returns: float32 logits ``(n, vocabulary)``, special tokens at ``-inf``."""
        logits = self.model.mlm_logits(torch.as_tensor(states, device=self.device)).float()
        special = [i for i in getattr(self.tokenizer, "all_special_ids", []) if i < logits.shape[-1]]
        logits[..., special] = float("-inf")
        return logits

    def _progress(self, total: int, desc: str, show: bool | None):
        if show is None:
            show = self.show_progress_bar
        if show is None:
            show = sys.stderr.isatty() and total > 4
        what = self._progress_what
        return tqdm(total=total, desc=f"{desc} {what}" if what else desc, disable=not show, leave=False, unit="batch")

    @contextlib.contextmanager
    def progress_named(self, what: str | None):
        """Progress bars of the encodes inside say ``what`` (a task's name) after their verb."""
        was, self._progress_what = self._progress_what, what
        try:
            yield self
        finally:
            self._progress_what = was

    # ---- public API --------------------------------------------------------------------------
    def encode(
        self,
        sentences: str | Sequence[str],
        template: str | Template | None = None,
        denoise: bool | None = None,
        pooling: str | None = None,
        rep: Rep | None = None,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        normalize_embeddings: bool = False,
    ) -> np.ndarray:
        """Encode sentences; returns a float32 array ``(n, hidden)`` in input order.

        Give a ``Rep``, or the words for one: with ``template``
        the vector is the last hidden state at [MASK] (minus the template bias when ``denoise``);
        ``pooling="topk-static"`` gives Eq. 3 instead: the MLM head's top-k tokens' static
        embeddings weighted by probability. Without a template, ``pooling`` picks one of the paper's
        baselines: ``cls``, ``mean``, ``first-last``, ``static``, ``static-debiased``; with neither, the vectors
        are the model's own representation, what ``SentenceTransformer(model).encode(sentences)`` gives
        (``own_representation``). A prompt pooled as sentence-transformers pools it is
        ``rep=PromptPool("query: [X]", "sentence-mean")``.
        Representations with more settings come as ``rep``: ``rep=rep(T, layer=4)`` reads the
        template's state at another layer (as ``hidden_states`` counts them: 0 the embeddings; default
        the last), ``rep=rep(pooling="ditto", head="3-7")``
        (Ditto's attention head), ``rep=rep(template=T, pooling="topk-static", top_k=50)``. A model directory written by
        ``finetune``/``optiprompt`` supplies its own template and denoise setting when neither
        ``template`` nor ``pooling`` is given.

        :param sentences: one sentence or a list of them.
        :param template: a template with ``[X]`` (and ``[MASK]`` for its [MASK] state), text or a
            ``promptsearch.template.Template``.
        :param denoise: subtract the template bias from [MASK] states.
        :param pooling: a baseline pooling (``cls``, ``mean``, ``first-last``, ``static``, ``static-debiased``,
            ``ditto``) or, with a template, ``topk-static``.
        :param rep: the representation itself; replaces ``template``, ``denoise`` and ``pooling``.
        :param batch_size: a cap on rows per batch (default: the encoder's).
        :param show_progress_bar: show a progress bar (default: the encoder's setting).
        :param normalize_embeddings: scale each vector to unit length.
        :returns: float32 ``(n, hidden)`` in input order; ``(hidden,)`` for a single sentence given as a string.
        :raises promptsearch.TemplateError: for a template this model cannot read (one line).
        """
        if rep is None:
            layer = None
            if template is None and pooling is None and self.default_template:
                template = self.default_template
                denoise = self.default_denoise if denoise is None else denoise
                layer = self.default_layer
                pooling = self.default_readout
            if template is None and pooling is None and not denoise:
                rep = self.own_rep()  # what SentenceTransformer(model).encode(sentences) gives
            else:
                rep = _rep(template, bool(denoise), pooling, layer=layer)
        single = isinstance(sentences, str)
        sents = [sentences] if isinstance(sentences, str) else list(sentences)
        out = self.encode_reps(sents, [rep], batch_size=batch_size, show_progress_bar=show_progress_bar)[rep]
        if normalize_embeddings:
            out = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out[0] if single else out

    POOLED_VERSION = "st-pooled/1"  # how pooled prompts are computed: sentence-transformers' own path (see .pooled)

    def pooled_signature(self) -> str:
        """What a prompt's pooled numbers depend on besides the encoder's weights, as a short hash: the
        sentence-transformers stack (its modules and their weights, its max length, its tokenizer's
        settings), the max length asked for, and how pooled read-outs are computed.

        :returns: 12 hexadecimal characters."""
        if self._pooled_signature is None:
            st = self.model.stack()
            tok = st.transformer.tokenizer
            assert tok is not None  # a Transformer module reads text through its tokenizer
            h = hashlib.sha1(json.dumps([self.POOLED_VERSION, st.describe(), self.pooled_max_length, type(tok).__name__,
                                         tok.padding_side,
                                         str(getattr(getattr(tok, "backend_tokenizer", None), "normalizer", ""))],
                                        default=str).encode("utf-8"))
            for m in st.modules:
                for v in m.state_dict().values():
                    h.update(v.detach().float().cpu().numpy().tobytes())
            self._pooled_signature = h.hexdigest()[:12]
        return self._pooled_signature

    @property
    def batching(self) -> str:
        """How rows are batched (token budget / row cap): outside fp32 a row's vector depends on the batch it is
        padded in by more than the last digit, so scores and stored vectors are keyed by it there.

        :returns: ``"<max_tokens>/<batch_size or ->"``."""
        return f"{self.max_tokens}/{self.batch_size or '-'}"

    @property
    def pooled_max_length(self) -> int | None:
        """The longest input a prompt's pooled read-out feeds, special tokens included: the ``max_length`` option
        when set (within the model's positions), else the model's own (its folder's ``max_seq_length``); None for
        a tokenizer without a limit."""
        if self.options.max_length:
            return min(int(self.options.max_length), self.model.max_positions)
        n = self.model.stack().max_seq_length
        return int(n) if n and n < 1_000_000 else None

    def folder_representation(self) -> tuple[Representation, bool] | None:
        """The representation a trained folder (optiprompt, finetune: its ``promptsearch.json``) was trained and
        saved with, and whether it is denoised: its template read at its layer, or pooled by its read-out (never
        denoised). None for a model that is no such folder. What every command reads a folder's representation by.

        :returns: ``(representation, denoised)``, or None."""
        if not self.default_template:
            return None
        key = Representation.of(self.default_template, self.default_layer, self.default_readout)
        return key, bool(self.default_denoise) and key.readout is None

    def folder_options(self, denoise: bool = False, layer: int | None = None,
                       readout: str | None = None) -> tuple[list[str] | None, bool, int | None, str | None]:
        """A trained folder's representation as options to read it by (what ``eval`` scores when given the folder
        alone): ``([template], denoise, layer, readout)``, each given one winning over the folder's — denoised when
        ``denoise`` or the folder was saved denoised; its layer unless ``layer``; its pooled read-out unless
        ``readout``. ``([no template], denoise, layer, readout)`` as given for a model that is no such folder."""
        saved, saved_denoise = self.folder_representation() or (None, False)
        if saved is None:
            return None, denoise, layer, readout
        return ([saved.template], denoise or saved_denoise, saved.layer if layer is None else layer,
                saved.readout if saved.readout and readout is None else readout)

    def folder_key(self, readout: str | None = None, demos=None,
                   denoise: bool = True) -> tuple[Representation, bool] | None:
        """A trained folder's own representation as ``score`` ranks it: its template (with ``demos``) at its layer,
        read out by ``readout`` (None: the folder's own read-out; a pooled one reads the last layer), and whether it
        is denoised (``denoise`` and saved so: ``denoise=False`` still reads the raw state). None for a model that
        is no such folder."""
        saved, saved_denoise = self.folder_representation() or (None, False)
        if saved is None:
            return None
        readout = saved.readout if readout is None else readout
        t = read_templates([saved.template], None, demos)[0]
        return Representation.of(t, saved.layer if is_mask(readout) else None, readout), denoise and saved_denoise

    def own_representation(self) -> Representation:
        """The model's own representation: what ``SentenceTransformer(model).encode(sentences)`` computes (its
        folder's prompt and pooling, or sentence-transformers' default stack for a plain checkpoint); for a folder
        promptsearch trained, the representation it was trained and saved with (``folder_representation``:
        what its sentence-transformers module computes)."""
        trained = self.folder_representation()
        return trained[0] if trained is not None else self.model.stack().own()

    def own_rep(self) -> Rep:
        """``own_representation`` as the encoder computes it (a trained folder's denoised as it was saved).

        :returns: the ``promptsearch.encoding.reps.Rep`` to pass to ``encode_reps``."""
        trained = self.folder_representation()
        if trained is not None:
            k, denoise = trained
            return _rep(k.template, denoise, k.readout, layer=k.layer)
        k = self.model.stack().own()
        assert k.readout is not None  # the stack's own representation is pooled
        return PromptPool(k.template, k.readout)

    def describe_own(self, denoise: bool | None = None) -> str:
        """What ``own_representation`` read, in words.

        :param denoise: whether a trained folder's [MASK] state is scored denoised, when not as it was saved
            (None: as saved).
        :returns: one line, such as ``CLS pooling without the prompt + Dense 384→256 + Normalize, ...``."""
        trained = self.folder_representation()
        if trained is not None:
            k, saved = trained
            denoise = saved if denoise is None or k.readout else denoise
            return (f"the representation it was trained with, {k.text}{' (denoised)' if denoise else ''}"
                    + ("" if denoise == saved else f" (saved {'denoised' if saved else 'raw'})"))
        return self.model.stack().describe()

    def resolve(self, r: R) -> R:
        """The representation ready for this model: a Ditto head checked against its shape,
        static-debiased given its token ids (counted once on the corpus or the data folder's
        Wikipedia sample).

        :param r: the representation.
        :returns: the representation resolved against this encoder.
        :raises promptsearch.PromptSearchError: for a Ditto head this model does not have."""
        return r.resolve(self)

    def biased_token_ids(self) -> frozenset[int]:
        """The token ids static-debiased drops, counted once on this encoder's corpus (or the Wikipedia
        sample of its ``data_dir``)."""
        if self._biased_ids is None:
            corpus = self._corpus if self._corpus is not None else load_corpus(data_dir=self.data_dir)
            self._biased_ids = frozenset(biased_token_ids(self.tokenizer, list(corpus)))
        return self._biased_ids

    def biased_token_mask(self) -> torch.Tensor:
        """Boolean mask over the vocabulary of the tokens static-debiased drops."""
        ids = self.biased_token_ids()
        mask = torch.zeros(self.word_embeddings.shape[0], dtype=torch.bool)
        mask[[i for i in ids if i < mask.numel()]] = True
        return mask.to(self.device)

    def encode_reps(self, sentences: Sequence[str], reps: Sequence[Rep], batch_size: int | None = None,
                    show_progress_bar: bool | None = None) -> dict[Rep, np.ndarray]:
        """Vectors of ``sentences`` for every rep, sharing forward passes: one template pass gives
        raw and denoised states (and Eq. 3); all poolings share one plain pass (per set of needs).

        :param sentences: the sentences.
        :param reps: the representations (an ensemble's members are computed once each).
        :param batch_size: a cap on rows per batch (default: the encoder's).
        :param show_progress_bar: show a progress bar (default: the encoder's setting).
        :returns: each rep → float32 ``(n, hidden)`` in input order.
        :raises promptsearch.TemplateError: for a template or read-out this model cannot read (one line)."""
        wanted, reps = reps, list(dict.fromkeys(p for r in reps for p in r.parts()))  # an ensemble's members
        out: dict[Rep, np.ndarray] = {}
        masked = [r for r in reps if isinstance(r, MaskState)]  # the reps read from a template's [MASK] (r.prompt)
        templates = list(dict.fromkeys(r.template for r in masked))
        # every template from shared passes, every read-out layer asked for from the same passes
        at = {r: self.prompt.layer_index(r.layer) for r in masked}  # each rep's layer as a hidden_states index, once
        layers = None if all(r.layer is None for r in masked) else list(dict.fromkeys(at.values()))
        states = self.template_states(sentences, templates, denoise=any(r.denoise for r in masked),
                                      batch_size=batch_size,
                                      show_progress_bar=show_progress_bar, layers=layers) if masked else []
        for template, st in zip(templates, states):
            for m in (m for m in masked if m.template == template):
                s = st if isinstance(st, PromptStates) else st[at[m]]  # one state, or one per layer asked
                out[m] = m.from_states(s.raw, s.denoised, self)
        pooled_t = [r for r in reps if isinstance(r, PromptPool)]  # a template's pass, pooled
        for r in pooled_t:
            self.check_readout(r)
        by_prompt: dict[str, list[PromptPool]] = {}  # prompts: as sentence-transformers computes them
        for r in pooled_t:
            if r.st_prompt is not None:
                by_prompt.setdefault(r.st_prompt, []).append(r)
        if by_prompt:
            self.first_pass()
            with self._progress(len(sentences) * len(by_prompt) // 64, "encode", show_progress_bar) as bar:
                bar.total = 0  # st_pooled adds its batches
                got = st_pooled(self, sentences, {p: [r.readout for r in rs] for p, rs in by_prompt.items()},
                                batch_size, bar)
                for prompt, rs in by_prompt.items():
                    for r in rs:
                        out[r] = got[prompt][r.readout]
        rendered = [r for r in pooled_t if r.st_prompt is None]  # other templates: promptsearch's rendering
        if rendered:
            by_template = self.template_pooled(sentences, list(dict.fromkeys(r.template for r in rendered)),
                                               batch_size=batch_size, show_progress_bar=show_progress_bar)
            for r in rendered:
                out[r] = by_template[r.template][TEMPLATE_READOUTS.index(r.readout)]
        pooled = {r: self.resolve(r) for r in reps if isinstance(r, Pooling)}  # the plain-sentence passes
        if pooled:
            res = self.forward_pooled(sentences, list(dict.fromkeys(pooled.values())), batch_size=batch_size,
                                      show_progress_bar=show_progress_bar)
            for plain, resolved in pooled.items():
                out[plain] = res[resolved]
        return {r: r.combine([out[p] for p in r.parts()]) for r in wanted}

    def check_rep(self, r: Rep) -> None:
        """A one-line error when a template of ``r`` (each member of an ensemble) cannot be read here: a
        pooled read-out this model cannot give, a [MASK] template it cannot fill, no room for a sentence.

        :param r: the representation to check.
        :raises promptsearch.PromptSearchError: (a ``promptsearch.errors.TemplateError`` for a template)
            naming what cannot be read."""
        for m in r.parts():
            if isinstance(m, PromptPool):
                self.check_readout(m)
            elif isinstance(m, MaskState):  # m.prompt
                self.check_template(m.template)

    def check_readout(self, r: PromptPool) -> None:
        """A one-line error for a pooled read-out this model cannot give, or a template that leaves no room."""
        if r.st_prompt is not None:  # sentence-transformers' stack reads it (a one-line error if it cannot)

            n, room = prompt_tokens(self.model.stack(), r.st_prompt), self.pooled_max_length
            if room and n >= room:
                raise TemplateError(f"prompt {r.st_prompt[:60]!r} takes {n} tokens with the special tokens, leaving no "
                                    f"room for a sentence within {room}; shorten it, or raise max_length= where the "
                                    "model takes more")
            return
        if uses_first_token(r.readout) and (self.model.causal or not self.prompt._specials()[0]):
            raise PromptSearchError("the cls read-out reads a [CLS] token this "
                                    f"{'causal LM' if self.model.causal else 'tokenizer'} does not put first; use "
                                    "readout=mean or sentence-mean")
        self.prompt.check_template(r.template, pooled=True)

    def template_pooled(self, sentences: Sequence[str], templates: Sequence[str | Template],
                        batch_size: int | None = None, show_progress_bar: bool | None = None) -> dict[str, np.ndarray]:
        """Each template's pass pooled every way (``TEMPLATE_READOUTS`` order),
        {template: (3, n, hidden)}. Sentences fill [X] whitespace-collapsed, with no period added (as
        sentence-transformers feeds them: ``[X] @mean`` is the model's plain mean pooling).

        :param sentences: the sentences.
        :param templates: templates (promptsearch renders them, pieces tokenized apart).
        :param batch_size: a cap on rows per batch (default: the encoder's).
        :param show_progress_bar: show a progress bar (default: the encoder's setting).
        :returns: template text → float32 ``(3, n, hidden)``."""
        ts = list(dict.fromkeys(Template.parse(t) for t in templates))
        uniq, inverse = unique(prepare(sentences, add_period=False))
        rows = {t: self.prompt.input_rows(uniq, t, pooled=True) for t in ts}
        self.first_pass()
        with torch.inference_mode(), self._progress(len(uniq) * len(ts) // 64, "encode", show_progress_bar) as bar:
            states = self.prompt.pooled_rows_states(rows, self.max_tokens, batch_size or self.batch_size, bar)
        return {t.text: states[t.text][:, inverse] for t in ts}

    # ---- template ([MASK]) representation -----------------------------------------------------
    def prepare(self, sentences: Iterable[str]) -> list[str]:
        """Whitespace collapsed, then the final period added unless ``add_period`` is off.

        :param sentences: the sentences.
        :returns: the sentences as the template passes read them."""
        return prepare(sentences, self.add_period)

    def prompt_states(self, sentences: Sequence[str], template: str | Template, denoise: bool = True,
                      batch_size: int | None = None, show_progress_bar: bool | None = None,
                      layers: Sequence[int | None] | None = None) -> PromptStates | dict[int, PromptStates]:
        """[MASK] states for the sentences and, if ``denoise``, each one's template bias — or, with
        ``layers`` (read-out layers as ``hidden_states`` counts them, None the last), {layer: states}
        for every one of them from the same forward passes.

        :param sentences: the sentences.
        :param template: a [MASK] template.
        :param denoise: compute each sentence's template bias (else the bias is zeros).
        :param batch_size: a cap on rows per batch (default: the encoder's).
        :param show_progress_bar: show a progress bar (default: the encoder's setting).
        :param layers: read-out layers to return at once (default: the last only).
        :returns: a ``PromptStates``, or {layer index: ``PromptStates``} with ``layers``."""
        return self.template_states(sentences, [template], denoise, batch_size, show_progress_bar, layers)[0]

    def template_states(self, sentences: Sequence[str], templates: Sequence[str | Template], denoise: bool = True,
                        batch_size: int | None = None, show_progress_bar: bool | None = None,
                        layers: Sequence[int | None] | None = None) -> list[PromptStates | dict[int, PromptStates]]:
        """``prompt_states`` of several templates at once, in the order given: each sentence is
        tokenized once, each template's rows go in token-budget batches of their own (``max_tokens``
        padded tokens; at most ``batch_size`` rows when given; a causal LM's templates that share a
        prefix share its passes) and the states come back in one copy.

        :param sentences: the sentences.
        :param templates: [MASK] templates.
        :param denoise: compute each sentence's template bias (else the bias is zeros).
        :param batch_size: a cap on rows per batch (default: the encoder's).
        :param show_progress_bar: show a progress bar (default: the encoder's setting).
        :param layers: read-out layers to return at once (default: the last only).
        :returns: one ``prompt_states`` result per template, in the order given."""
        ts = list(dict.fromkeys(Template.parse(t) for t in templates))
        uniq, inverse = unique(self.prepare(sentences))
        rows = {t: self.prompt.input_rows(uniq, t) for t in ts}
        self.first_pass()
        ls = None if layers is None else list(dict.fromkeys(self.prompt.layer_index(k) for k in layers))
        with torch.inference_mode(), self._progress(len(uniq) * len(ts) // 64, "encode", show_progress_bar) as bar:
            states = self.prompt.rows_states(rows, self.max_tokens, batch_size or self.batch_size, ls, bar)
            out: dict[str, PromptStates | dict[int, PromptStates]] = {}
            for t in ts:

                def at_layer(j: int, k: int | None) -> PromptStates:  # the j-th layer read, hidden_states[k]
                    bias = (self.prompt.template_bias(t, rows[t].bias, layer=k).cpu().numpy()[inverse] if denoise
                            else np.zeros((len(sentences), self.prompt.hidden_size), dtype=np.float32))
                    return PromptStates(raw=states[t.text][j][inverse], bias=bias)

                out[t.text] = at_layer(0, None) if ls is None else {k: at_layer(j, k) for j, k in enumerate(ls)}
        return [out[Template.parse(t).text] for t in templates]

    def encode_templates(self, sentences: Sequence[str], templates: Sequence[str | Template], denoise: bool = True,
                         layer: int | None = None, batch_size: int | None = None,
                         show_progress_bar: bool | None = None) -> list[np.ndarray]:
        """``encode`` of each template, in one call: one float32 array (n, hidden) per template, in the
        order given, equal to each template's ``encode`` alone (a greedy step, a racing rung and a
        candidate list score this way).

        :param sentences: the sentences.
        :param templates: [MASK] templates.
        :param denoise: subtract each template's bias.
        :param layer: the read-out layer as ``hidden_states`` counts it (default: the last).
        :param batch_size: a cap on rows per batch (default: the encoder's).
        :param show_progress_bar: show a progress bar (default: the encoder's setting).
        :returns: one float32 ``(n, hidden)`` array per template."""
        reps = [_rep(t, denoise, layer=layer) for t in templates]
        out = self.encode_reps(sentences, reps, batch_size=batch_size, show_progress_bar=show_progress_bar)
        return [out[r] for r in reps]

    def first_pass(self) -> None:
        """Run the ``on_first_pass`` hook once, if one is set: each encoding pass calls it; a command that wants its
        line said before any pass (a resumed run encodes only at its end) calls it itself."""
        hook, self.on_first_pass = self.on_first_pass, None
        if hook is not None:
            hook()

    # ---- pooling baselines -------------------------------------------------------------------
    @torch.inference_mode()
    def forward_pooled(self, sentences, poolings: Sequence[Pooling], *, batch_size=None,
                       show_progress_bar=None) -> dict[Pooling, np.ndarray]:
        """Run plain ``[CLS] s [SEP]`` batches once and apply every pooling (resolved).

        :param sentences: the sentences.
        :param poolings: the paper's baseline poolings, resolved (see ``resolve``).
        :param batch_size: rows per batch (default: the encoder's, else 64).
        :param show_progress_bar: show a progress bar (default: the encoder's setting).
        :returns: each pooling → float32 ``(n, hidden)`` in input order."""
        self.first_pass()
        hidden_states = any(p.hidden_states for p in poolings)
        attentions = any(p.attentions for p in poolings)
        forward = any(p.forward for p in poolings)
        uniq, inverse = unique([" ".join(s.split()) for s in sentences])
        enc = self.tokenizer(uniq, add_special_tokens=True, truncation=True,
                             max_length=self.max_length)["input_ids"] if uniq else []
        order = length_order(enc)
        bs = batch_size or self.batch_size or 64
        pad_id = self.tokenizer.pad_token_id or 0
        results: dict[Pooling, list] = {p: [None] * len(uniq) for p in poolings}
        special = torch.as_tensor(sorted(self._special_ids), device=self.device)
        emb = self.word_embeddings
        n_batches = (len(enc) + bs - 1) // bs
        with (self._attn_impl("eager" if attentions else None),
              self._progress(n_batches, "encode", show_progress_bar) as bar):
            for start in range(0, len(enc), bs):
                idx = order[start : start + bs]
                ids, att = pad([enc[i] for i in idx], pad_id, self.device)
                token_mask = att.bool() & ~torch.isin(ids, special)
                b = Batch(input_ids=ids, attention_mask=att, token_mask=token_mask)
                if forward:
                    with self.autocast():
                        o = self.encoder(input_ids=ids, attention_mask=att, output_hidden_states=hidden_states,
                                         output_attentions=attentions)
                    b.last_hidden = o.last_hidden_state.float()
                    b.hidden_states = tuple(h.float() for h in o.hidden_states) if hidden_states else None
                    b.attentions = tuple(a.float() for a in o.attentions) if attentions else None
                for p in poolings:
                    v = p.pool(b, emb).float().cpu().numpy()
                    for j, i in enumerate(idx):
                        results[p][i] = v[j]
                bar.update(1)
        out = {}
        for p, rows in results.items():
            arr = np.stack(rows) if rows else np.zeros((0, self.word_embeddings.shape[1]), np.float32)
            out[p] = arr[inverse] if len(uniq) else arr
        return out

    @contextlib.contextmanager
    def _attn_impl(self, impl: str | None):
        """Attention maps need the eager implementation; switch to it for the duration."""
        if impl is None or not hasattr(self.encoder, "set_attn_implementation"):
            yield
            return
        before = getattr(self.encoder.config, "_attn_implementation", None)
        if before == impl:
            yield
            return
        self.encoder.set_attn_implementation(impl)
        try:
            yield
        finally:
            if before:
                self.encoder.set_attn_implementation(before)


_rep = rep  # encode() has an argument named ``rep``
