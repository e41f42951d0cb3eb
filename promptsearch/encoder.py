"""PromptEncoder: sentences → vectors, with a template ([MASK] state) or a pooling baseline.

The shape follows ``SentenceTransformer.encode``: deduplicate, sort by length, batch,
one progress bar, return a numpy array in input order. Inference runs under
``torch.inference_mode`` and, where the hardware has fast bf16 (AMX/AVX512-BF16 CPUs,
recent GPUs), under bf16 autocast.

Template denoising (PromptBERT §4.3): the template alone is fed with the position
ids of the tokens after [X] shifted by the sentence's token length; its [MASK] state
is the template bias, subtracted from the sentence's [MASK] state. The bias depends
only on (template, sentence length), so it is cached per pair.
"""

from __future__ import annotations

import contextlib
import functools
import os
import sys
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from .errors import PromptSearchError, TemplateError
from .models import DEFAULT_MODEL, LoadedModel, load_model
from .pooling import Batch, get_pooling, parse_head, biased_token_ids
from .template import RenderedTemplate, Template, quote

SENTENCE_ENDINGS = ".?\"'"
TEMPLATE_POOLINGS = (None, "mask", "topk-static")
COMPAT_MODES = ("promptsearch", "reference")
BIAS_BUCKET = 32  # template-bias lengths computed together (see PromptEncoder.template_bias)


def add_final_period(sentence: str) -> str:
    """The reference evaluation's convention: a sentence not ending in . ? " ' gets a '.'."""
    s = sentence.strip()
    if s and s[-1] not in SENTENCE_ENDINGS:
        s += "."
    return s


def bf16_supported(device: torch.device) -> bool:
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type != "cpu":
        return False
    return _cpu_has_fast_bf16()


@functools.lru_cache(maxsize=1)
def _cpu_has_fast_bf16() -> bool:
    """AMX-BF16 or AVX512-BF16 in /proc/cpuinfo (Linux); elsewhere assume no."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"amx_bf16", "avx512_bf16"})
    except OSError:
        pass
    return False


@dataclass
class PromptStates:
    """[MASK] states of a template for a list of sentences: raw and the template bias."""

    raw: np.ndarray
    bias: np.ndarray

    @property
    def denoised(self) -> np.ndarray:
        return self.raw - self.bias


class PromptEncoder:
    """Turn a (masked) language model into a sentence encoder with a prompt template.

    >>> enc = PromptEncoder.from_pretrained("default")
    >>> enc.encode(["a man plays a guitar ."], template='This sentence : "[X]" means [MASK] .').shape
    (1, 384)
    """

    def __init__(
        self,
        model: LoadedModel,
        *,
        batch_size: int = 64,
        bf16: bool | None = None,
        add_period: bool = True,
        max_length: int | None = None,
        show_progress_bar: bool | None = None,
        corpus: Sequence[str] | None = None,
        ditto_head: str | tuple[int, int] | None = None,
        compat: str = "promptsearch",
        data_dir: str | os.PathLike | None = None,
    ):
        if compat not in COMPAT_MODES:
            raise PromptSearchError(f"unknown compat mode {compat!r}; choose {' or '.join(COMPAT_MODES)}")
        self.compat = compat
        self.model = model
        self.batch_size = batch_size
        self.device = next(model.encoder.parameters()).device
        self.bf16 = bf16_supported(self.device) if bf16 is None else bool(bf16)
        self.add_period = add_period
        self.max_length = min(max_length or model.max_positions, model.max_positions)
        self.show_progress_bar = show_progress_bar
        self._corpus = corpus
        self.data_dir = data_dir  # where static-debiased finds the Wikipedia sample (with corpus=None)
        self.ditto_head = ditto_head
        self._rendered: dict[str, RenderedTemplate] = {}
        self._reference_inputs: dict[str, tuple[list[int], int, int]] = {}
        self._bias_cache: dict[tuple[str, int], torch.Tensor] = {}
        self.soft_prompts: dict[str, torch.Tensor] = {}
        self.forward_module: torch.nn.Module | None = None  # the encoder as wrapped by accelerate (DDP), if any
        self.default_template: str | None = None  # set by a trained directory's promptsearch.json
        self.default_denoise = False
        self._biased_mask: torch.Tensor | None = None
        lead, trail = self._specials()
        self._special_ids = set(lead) | set(trail) | set(getattr(self.tokenizer, "all_special_ids", []))

    @classmethod
    def from_pretrained(cls, name_or_path: str = DEFAULT_MODEL, device: str | None = None, head: str | None = None,
                        **kwargs) -> "PromptEncoder":
        """Load "default", an HF id or a path. A directory written by ``promptsearch optiprompt``
        or ``finetune`` (it holds ``promptsearch.json``) brings its template, denoise setting and
        soft prompt, which ``encode`` then uses when called without a template or pooling.
        ``head``: a trained [MASK] head file (see :func:`promptsearch.models.load_model`)."""
        from .train.saved import load_template_dir, read_config

        cfg = read_config(name_or_path) if name_or_path != DEFAULT_MODEL and os.path.isdir(name_or_path) else None
        if cfg and cfg.get("soft_prompt"):
            cfg, soft = load_template_dir(name_or_path)
            enc = cls(load_model(cfg.get("model", DEFAULT_MODEL), device=device, head=head), **kwargs)
            enc.set_soft_prompt(cfg["template"], soft.to(enc.device))
        else:
            enc = cls(load_model(name_or_path, device=device, head=head), **kwargs)
        if cfg:
            enc.default_template, enc.default_denoise = cfg["template"], bool(cfg.get("denoise", False))
        return enc

    # ---- small accessors -------------------------------------------------------------------
    @property
    def tokenizer(self):
        return self.model.tokenizer

    @property
    def encoder(self) -> torch.nn.Module:
        return self.model.encoder

    @property
    def word_embeddings(self) -> torch.Tensor:
        return self.model.word_embeddings.detach()

    def _specials(self):
        from .template import special_tokens_around

        return special_tokens_around(self.tokenizer)

    def rendered(self, template: str | Template) -> RenderedTemplate:
        t = Template.parse(template)
        r = self._rendered.get(t.text)
        if r is None:
            r = self._rendered[t.text] = t.render(self.tokenizer)
        return r

    def autocast(self):
        if not self.bf16:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _progress(self, total: int, desc: str, show: bool | None):
        if show is None:
            show = self.show_progress_bar
        if show is None:
            show = sys.stderr.isatty() and total > 4
        return tqdm(total=total, desc=desc, disable=not show, leave=False, unit="batch")

    # ---- public API --------------------------------------------------------------------------
    def encode(
        self,
        sentences: str | Sequence[str],
        template: str | Template | None = None,
        denoise: bool | None = None,
        pooling: str | None = None,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
        head: str | tuple[int, int] | None = None,
        normalize_embeddings: bool = False,
        top_k: int = 200,
    ) -> np.ndarray:
        """Encode sentences; returns a float32 array ``(n, hidden)`` in input order.

        With ``template`` the vector is the last hidden state at [MASK] (minus the template
        bias when ``denoise``); ``pooling="topk-static"`` gives Eq. 3 instead: the MLM head's top-k
        tokens' static embeddings weighted by probability. Without a template, ``pooling`` picks a
        baseline (default ``mean``):
        ``cls``, ``mean``, ``first-last``, ``static``, ``static-debiased``, ``ditto``.
        A model directory written by ``finetune``/``optiprompt`` supplies its own template and
        denoise setting when neither ``template`` nor ``pooling`` is given.
        """
        if template is None and pooling is None and self.default_template:
            template = self.default_template
            denoise = self.default_denoise if denoise is None else denoise
        denoise = bool(denoise)
        single = isinstance(sentences, str)
        sents = [sentences] if single else list(sentences)
        if template is not None:
            if pooling not in TEMPLATE_POOLINGS:
                raise PromptSearchError(f"pooling {pooling!r} does not take a template; with --template use "
                                        f"{' or '.join(p for p in TEMPLATE_POOLINGS if p)}, or drop --template")
            st = self.prompt_states(sents, template, denoise=denoise, batch_size=batch_size, show_progress_bar=show_progress_bar)
            out = st.denoised if denoise else st.raw
            if pooling == "topk-static":
                from .predict import topk_static_from_states

                out = topk_static_from_states(self, out, k=top_k)
        else:
            if denoise:
                raise PromptSearchError("--denoise needs a --template (it subtracts the template's own [MASK] state)")
            out = self.pool(sents, pooling or "mean", batch_size=batch_size, show_progress_bar=show_progress_bar, head=head)
        if normalize_embeddings:
            out = out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)
        return out[0] if single else out

    # ---- template ([MASK]) representation -----------------------------------------------------
    def prepare(self, sentences: Iterable[str]) -> list[str]:
        """Whitespace collapsed (as the reference evaluation's SentEval tokens are joined), then
        the final period added unless ``add_period`` is off."""
        out = [" ".join(s.split()) for s in sentences]
        return [add_final_period(s) for s in out] if self.add_period else out

    def check_template(self, template: str | Template) -> int:
        """Render the template for this tokenizer; the sentence tokens it leaves room for, or a
        one-line error when it leaves none."""
        r = self.rendered(template)
        room = self.max_length - r.n_template_tokens
        if room < 1:
            raise TemplateError(
                f"template {quote(Template.parse(template).text)} takes {r.n_template_tokens} tokens, "
                f"leaving no room for a sentence within {self.max_length}; shorten it"
            )
        return room

    def sentence_ids(self, sentences: Sequence[str], template: str | Template) -> list[list[int]]:
        """Token ids of each sentence as it fills [X], truncated so the template fits."""
        r = self.rendered(template)
        room = self.check_template(template)
        texts = [(" " + s) if r.sentence_prefix_space else s for s in sentences]
        if not texts:
            return []
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [list(x[:room]) for x in ids]

    def prompt_states(
        self,
        sentences: Sequence[str],
        template: str | Template,
        denoise: bool = True,
        batch_size: int | None = None,
        show_progress_bar: bool | None = None,
    ) -> PromptStates:
        """[MASK] states for the sentences and, if ``denoise``, each one's template bias."""
        template = Template.parse(template)
        uniq, inverse = _unique(self.prepare(sentences))
        rows = self.input_rows(uniq, template)
        hidden = self.word_embeddings.shape[1]
        states = np.zeros((len(rows), hidden), dtype=np.float32)
        order = np.argsort([-len(ids) for ids, _, _ in rows], kind="stable")
        bs = batch_size or self.batch_size
        with torch.inference_mode(), self._progress((len(rows) + bs - 1) // bs, "encode", show_progress_bar) as bar:
            for start in range(0, len(rows), bs):
                idx = order[start : start + bs]
                states[idx] = self._forward_rows([rows[i] for i in idx], template).float().cpu().numpy()
                bar.update(1)
            if denoise:
                bias = self.template_bias(template, [n for _, _, n in rows]).numpy()[inverse]
            else:
                bias = np.zeros((len(sentences), hidden), dtype=np.float32)
        raw = states[inverse]
        return PromptStates(raw=raw, bias=bias)

    def input_rows(self, sentences: Sequence[str], template: str | Template) -> list[tuple[list[int], int, int]]:
        """(input ids, [MASK] index, template-bias length) for each prepared sentence.

        By default the template's pieces and the sentence are tokenized apart and the bias length
        is the sentence's token count. ``compat="reference"`` tokenizes the filled template as one
        string, as kongds/Prompt-BERT's ``evaluation.py`` does (see :meth:`_reference_rows`)."""
        if self.compat == "reference":
            return self._reference_rows(sentences, Template.parse(template))
        r = self.rendered(template)
        return [(*r.ids(s), len(s)) for s in self.sentence_ids(sentences, template)]

    # ---- compat="reference": kongds/Prompt-BERT evaluation.py, input for input ---------------
    def _reference_template_only(self, template: Template) -> tuple[list[int], int, int]:
        """The reference's ``get_delta`` input: (ids, first shifted index, [MASK] index).

        The template text with [X] replaced by a space, runs of three spaces collapsed to one,
        tokenized as one string; positions start at 0 (for RoBERTa too) and the tokens from the
        first one after the prefix on are shifted by the sentence length."""
        hit = self._reference_inputs.get(template.text)
        if hit is None:
            tok = self.tokenizer
            text = template.text.replace("[MASK]", tok.mask_token).replace("[X]", " ").strip().replace("   ", " ")
            ids = list(tok(text)["input_ids"])
            lead, _ = self._specials()
            prefix = template.text.split("[X]", 1)[0].replace("[MASK]", tok.mask_token).strip()
            start = len(lead) + (len(tok(prefix, add_special_tokens=False)["input_ids"]) if prefix else 0)
            hit = self._reference_inputs[template.text] = (ids, start, ids.index(tok.mask_token_id))
        return hit

    def _reference_rows(self, sentences: Sequence[str], template: Template) -> list[tuple[list[int], int, int]]:
        """The reference's batcher input: the template with the sentence in place of [X], stripped,
        tokenized as one string (BPE merges across the [X] boundary included); [MASK] is found by
        id; the bias length is the input's length minus the template-only input's."""
        if self.soft_prompts.get(template.text) is not None:
            raise PromptSearchError("compat='reference' reproduces plain templates; a soft prompt (OptiPrompt) needs the default compat")
        tok = self.tokenizer
        t_ids, _, _ = self._reference_template_only(template)
        text = template.text.replace("[MASK]", tok.mask_token)
        rows = []
        for s in sentences:
            ids = list(tok(text.replace("[X]", s).strip())["input_ids"])
            if len(ids) > self.max_length:  # the reference never truncates; keep as many words as fit
                words = s.split()
                lo, hi = 0, len(words)
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if len(tok(text.replace("[X]", " ".join(words[:mid])).strip())["input_ids"]) <= self.max_length:
                        lo = mid
                    else:
                        hi = mid - 1
                ids = list(tok(text.replace("[X]", " ".join(words[:lo])).strip())["input_ids"])
            mask = [i for i, x in enumerate(ids) if x == tok.mask_token_id]
            if len(mask) != 1:
                raise PromptSearchError(f"sentence {s[:60]!r} holds the mask token itself; remove it from the sentence")
            rows.append((ids, mask[0], max(len(ids) - len(t_ids), 0)))
        return rows

    # Soft prompts (OptiPrompt): template text -> (n_soft, hidden) vectors that replace the
    # static embeddings of the template's literal tokens.
    def set_soft_prompt(self, template: str | Template, vectors: torch.Tensor | None) -> None:
        t = Template.parse(template).text
        if vectors is None:
            self.soft_prompts.pop(t, None)
        else:
            n = self.rendered(t).n_soft
            if tuple(vectors.shape) != (n, self.word_embeddings.shape[1]):
                raise PromptSearchError(f"soft prompt for {t!r} must be ({n}, {self.word_embeddings.shape[1]}), got {tuple(vectors.shape)}")
            self.soft_prompts[t] = vectors
        self.clear_cache()

    def clear_cache(self) -> None:
        """Forget cached template biases (call after the weights or soft prompts change)."""
        self._bias_cache.clear()

    def _inputs(self, ids: torch.Tensor, template: Template, sent_lens: Sequence[int]) -> dict:
        """``input_ids``, or ``inputs_embeds`` with soft-prompt vectors in the template slots."""
        soft = self.soft_prompts.get(template.text)
        if soft is None:
            return {"input_ids": ids}
        r = self.rendered(template)
        sb, sa = r.soft_slots()
        emb = self.encoder.get_input_embeddings()(ids)
        rows = torch.arange(len(ids), device=ids.device)[:, None]
        cols = torch.as_tensor([sb + [len(r.before) + n + j for j in sa] for n in sent_lens], device=ids.device)
        emb = emb.index_put((rows.expand_as(cols), cols), soft.to(emb.dtype).unsqueeze(0).expand(len(ids), -1, -1))
        return {"inputs_embeds": emb}

    def mask_states(self, sent_ids: Sequence[Sequence[int]], template: str | Template, denoise: bool = False,
                    cache: bool | None = None) -> torch.Tensor:
        """[MASK] hidden states (B, hidden) for token-id sentences; differentiable when grad is on.

        The building block of training (and of the sentence-transformers export). ``cache``: use
        the template-bias cache (default: only when gradients are off). Training passes ``False``,
        since its weights change between steps.
        """
        t = Template.parse(template)
        r = self.rendered(t)
        out = self._forward_rows([(*r.ids(list(s)), len(s)) for s in sent_ids], t)
        if denoise:
            out = out - self.template_bias(t, [len(s) for s in sent_ids], cache=cache).to(out.device)
        return out

    def _forward_rows(self, rows: Sequence[tuple[list[int], int, int]], template: Template) -> torch.Tensor:
        """One padded forward of (ids, [MASK] index, sentence length) rows: the [MASK] states."""
        ids, att = _pad([x for x, _, _ in rows], self.tokenizer.pad_token_id or 0, self.device)
        with self.autocast():
            h = (self.forward_module or self.encoder)(**self._inputs(ids, template, [n for _, _, n in rows]),
                                                      attention_mask=att).last_hidden_state
        pos = torch.as_tensor([p for _, p, _ in rows], device=self.device)
        return h[torch.arange(len(rows), device=self.device), pos].float()

    def template_only_inputs(self, template: str | Template, length: int) -> tuple[list[int], list[int], int]:
        """(ids, position ids, [MASK] index) of the template alone, as if a sentence of
        ``length`` tokens sat in [X]: positions after [X] are shifted by ``length``."""
        r = self.rendered(template)
        ids, mask = r.ids([])
        off = self.model.position_offset
        pos = [off + i for i in range(len(r.before))] + [off + len(r.before) + length + i for i in range(len(r.after))]
        return ids, pos, mask

    def _bias_forward(self, template: Template, lengths: list[int]) -> torch.Tensor:
        if self.compat == "reference":
            ids, start, mask = self._reference_template_only(template)
            rows = [(ids, list(range(start)) + [i + n for i in range(start, len(ids))], mask) for n in lengths]
        else:
            rows = [self.template_only_inputs(template, n) for n in lengths]
        ids = torch.as_tensor([r[0] for r in rows], device=self.device)
        pos = torch.as_tensor([r[1] for r in rows], device=self.device)
        with self.autocast():
            # A sentence of length 0 in the soft-prompt layout: the template tokens sit side by side.
            h = (self.forward_module or self.encoder)(**self._inputs(ids, template, [0] * len(rows)), attention_mask=torch.ones_like(ids),
                             position_ids=pos).last_hidden_state
        return h[:, rows[0][2]].float()

    def _longest_sentence(self, template: Template) -> int:
        """The most sentence tokens an input can hold (the bias lengths there are)."""
        if self.compat == "reference":
            return max(self.max_length - len(self._reference_template_only(template)[0]), 0)
        return max(self.max_length - self.rendered(template).n_template_tokens, 0)

    def template_bias(self, template: str | Template, lengths: Sequence[int], cache: bool | None = None) -> torch.Tensor:
        """The template's [MASK] state for each sentence length.

        By default, without gradients the result is cached per (template, length); with
        gradients on (training) it is computed afresh, once per distinct length, and stays
        differentiable. ``cache=False`` always computes afresh.
        """
        t = Template.parse(template)
        lengths = [int(n) for n in lengths]
        if not lengths:
            return torch.zeros((0, self.word_embeddings.shape[1]))
        if cache is None:
            cache = not torch.is_grad_enabled()
        if not cache:
            uniq = sorted(set(lengths))
            vec = self._bias_forward(t, uniq)
            where = {n: i for i, n in enumerate(uniq)}
            return vec[torch.as_tensor([where[n] for n in lengths], device=vec.device)]
        # Lengths are computed in fixed buckets of BIAS_BUCKET (0-31, 32-63, ...), always whole,
        # so a length's bias comes out of the same batch whatever was cached before: the
        # numbers never depend on the order in which templates and data were scored.
        top = self._longest_sentence(t)
        todo: dict[int, int] = {}  # bucket -> longest length asked for in it
        for n in lengths:
            if (t.text, n) not in self._bias_cache:
                todo[n // BIAS_BUCKET] = max(todo.get(n // BIAS_BUCKET, 0), n)
        for k, longest in sorted(todo.items()):
            chunk = list(range(k * BIAS_BUCKET, min((k + 1) * BIAS_BUCKET - 1, max(top, longest)) + 1))
            for n, v in zip(chunk, self._bias_forward(t, chunk).cpu()):
                self._bias_cache[(t.text, n)] = v
        return torch.stack([self._bias_cache[(t.text, n)] for n in lengths])

    # ---- pooling baselines -------------------------------------------------------------------
    def biased_token_mask(self, data_dir: str | os.PathLike | None = None) -> torch.Tensor:
        """Boolean mask over the vocabulary of tokens static-debiased drops (Appendix A.1), counted
        on ``corpus`` or else the Wikipedia sample of ``data_dir`` (default: the encoder's)."""
        if self._biased_mask is None:
            corpus = self._corpus
            if corpus is None:
                from .data import load_corpus

                corpus = load_corpus(data_dir=data_dir or self.data_dir)
            ids = biased_token_ids(self.tokenizer, list(corpus))
            mask = torch.zeros(self.word_embeddings.shape[0], dtype=torch.bool)
            mask[[i for i in ids if i < mask.numel()]] = True
            self._biased_mask = mask.to(self.device)
        return self._biased_mask

    @property
    def ditto_head_tuple(self) -> tuple[int, int]:
        return parse_head(self.ditto_head, self.model.num_layers, self.model.num_heads)

    def pool(self, sentences, pooling: str = "mean", batch_size=None, show_progress_bar=None, head=None) -> np.ndarray:
        p = get_pooling(pooling)
        if p.name == "ditto":
            if head is not None:
                self.ditto_head = head
            _ = self.ditto_head_tuple  # validate before the forward passes
        if p.name == "static-debiased":
            self.biased_token_mask()
        outs = self.forward_pooled(sentences, {p.name: p.fn}, hidden_states=p.hidden_states, attentions=p.attentions,
                                   forward=p.forward, batch_size=batch_size, show_progress_bar=show_progress_bar)
        return outs[p.name]

    @torch.inference_mode()
    def forward_pooled(self, sentences, fns: dict, *, hidden_states=False, attentions=False, forward=True,
                       batch_size=None, show_progress_bar=None) -> dict[str, np.ndarray]:
        """Run plain ``[CLS] s [SEP]`` batches once and apply several pooling functions."""
        uniq, inverse = _unique([" ".join(s.split()) for s in sentences])
        enc = self.tokenizer(uniq, add_special_tokens=True, truncation=True, max_length=self.max_length)["input_ids"] if uniq else []
        order = np.argsort([-len(s) for s in enc], kind="stable")
        bs = batch_size or self.batch_size
        pad = self.tokenizer.pad_token_id or 0
        results: dict[str, list] = {k: [None] * len(uniq) for k in fns}
        special = torch.as_tensor(sorted(self._special_ids), device=self.device)
        with self._attn_impl("eager" if attentions else None), self._progress((len(enc) + bs - 1) // bs, "encode", show_progress_bar) as bar:
            for start in range(0, len(enc), bs):
                idx = order[start : start + bs]
                ids, att = _pad([enc[i] for i in idx], pad, self.device)
                token_mask = att.bool() & ~torch.isin(ids, special)
                b = Batch(input_ids=ids, attention_mask=att, token_mask=token_mask)
                if forward:
                    with self.autocast():
                        o = self.encoder(input_ids=ids, attention_mask=att, output_hidden_states=hidden_states,
                                         output_attentions=attentions)
                    b.last_hidden = o.last_hidden_state.float()
                    b.hidden_states = tuple(h.float() for h in o.hidden_states) if hidden_states else None
                    b.attentions = tuple(a.float() for a in o.attentions) if attentions else None
                for name, fn in fns.items():
                    v = fn(b, self).float().cpu().numpy()
                    for j, i in enumerate(idx):
                        results[name][i] = v[j]
                bar.update(1)
        out = {}
        for name, rows in results.items():
            arr = np.stack(rows) if rows else np.zeros((0, self.word_embeddings.shape[1]), np.float32)
            out[name] = arr[inverse] if len(uniq) else arr
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


def _unique(items: Sequence[str]) -> tuple[list[str], np.ndarray]:
    index: dict[str, int] = {}
    inverse = np.fromiter((index.setdefault(s, len(index)) for s in items), dtype=np.int64, count=len(items))
    return list(index), inverse


def _pad(seqs: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    n = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), n), pad_id, dtype=torch.long)
    att = torch.zeros((len(seqs), n), dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.as_tensor(s, dtype=torch.long)
        att[i, : len(s)] = 1
    return ids.to(device), att.to(device)
