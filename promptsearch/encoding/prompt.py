"""The prompt as an ``nn.Module``: template → token ids → model forward → [MASK] states.

``PromptModule`` owns the encoder (a submodule), the soft prompts (OptiPrompt vectors,
Parameters in a ``ParameterDict``) and the template-bias cache. The cache is keyed by the
weights' version, so ``.to()``, ``train()``, ``state_dict()``, an optimizer step and DDP just
work: nobody sets attributes on it from outside or clears a cache by hand.

Template denoising (PromptBERT §4.3): the template alone is fed with the position ids of the
tokens after [X] shifted by the sentence's token length; its [MASK] state is the template
bias, subtracted from the sentence's [MASK] state. The bias depends only on (template,
sentence length), so it is cached per pair.
"""

from __future__ import annotations

import hashlib
import itertools
from typing import Sequence, cast

import numpy as np
import torch
from torch import nn

from ..errors import PromptSearchError, TemplateError
from ..model import LoadedModel
from ..representation import TEMPLATE_READOUTS, Representation, is_mask
from ..template import RenderedTemplate, Template, quote, special_tokens_around, token_ids, tokens_in_context
from .batching import autocast, budget_batches
from .branching import branchable, branched_states
from .branching import plan as branch_plan
from .inputs import PromptInputs, ReferenceInputs
from .pooled import st_forward
from .rows import ListRows

COMPAT_MODES = ("promptsearch", "reference")
BIAS_BUCKET = 32  # template-bias lengths computed together (see PromptModule.template_bias)
TOKEN_CACHE = 1_000_000  # sentences whose token ids a module keeps


def _soft_key(template_text: str) -> str:
    return hashlib.sha1(template_text.encode("utf-8")).hexdigest()[:16]  # ParameterDict keys take no dots


class PromptModule(nn.Module):
    """[MASK] states of templates filled with token-id sentences, raw and template bias."""

    def __init__(self, model: LoadedModel, max_length: int, bf16: bool = False, compat: str = "promptsearch",
                 padding_side: str = "right"):
        super().__init__()
        if compat not in COMPAT_MODES:
            raise PromptSearchError(f"unknown compat mode {compat!r}; choose {' or '.join(COMPAT_MODES)}")
        if compat == "reference" and model.causal:
            raise PromptSearchError("compat='reference' reproduces PromptBERT's masked-LM evaluation; a causal LM uses "
                                    "the default")
        if padding_side not in ("right", "left"):
            raise PromptSearchError(f"padding_side {padding_side!r}: choose right or left")
        self.causal = model.causal
        self.model = model  # its sentence-transformers stack pools prompts (not a submodule: the encoder below is)
        self.padding_side = padding_side
        self.encoder = model.encoder
        self.tokenizer = model.tokenizer
        self.position_offset = model.position_offset
        self.hidden_size = int(model.word_embeddings.shape[1])
        self.max_length = max_length
        self.bf16 = bf16
        self.compat = compat
        self.soft = nn.ParameterDict()
        self._rendered: dict[str, RenderedTemplate] = {}
        self._rendered_pooled: dict[str, RenderedTemplate] = {}  # templates without [MASK], for pooled read-outs
        self._tokens: dict[tuple, list[int]] = {}  # (starts the text?, sentence as it fills [X]) -> its token ids
        self._flat: tuple | None = None  # the last sentence set's tokens as arrays (see sentence_arrays)
        self.inputs = ReferenceInputs(self) if compat == "reference" else PromptInputs(self)
        self._bias_cache: dict[tuple, torch.Tensor] = {}  # (template, length) or (template, length, layer)
        self._bias_version: tuple | None = None
        self.n_layers = int(model.encoder.config.num_hidden_layers)
        self.share_prefix = True  # causal LMs: prefix cached, sentence once, suffixes branched (encoding.branching)

    @property
    def device(self) -> torch.device:
        return next(self.encoder.parameters()).device

    def autocast(self):
        return autocast(self.device, self.bf16)

    def _specials(self):
        return special_tokens_around(self.tokenizer)

    def rendered(self, template: str | Template, pooled: bool = False) -> RenderedTemplate:
        """The template's ids for this tokenizer; ``pooled``: for a pooled read-out (it needs no [MASK])."""
        t = Template.parse(template)
        if pooled and t.readout == "last":
            r = self._rendered_pooled.get(t.text)
            if r is None:
                r = self._rendered_pooled[t.text] = t.render(self.tokenizer, causal=self.causal, pooled=True)
            return r
        r = self._rendered.get(t.text)
        if r is None:
            r = self._rendered[t.text] = t.render(self.tokenizer, causal=self.causal)
        return r

    def check_template(self, template: str | Template, pooled: bool = False) -> int:
        """Render the template for this tokenizer; the sentence tokens it leaves room for, or a
        one-line error when it leaves none."""
        r = self.rendered(template, pooled)
        room = self.max_length - r.n_template_tokens
        if room < 1:
            raise TemplateError(
                f"template {quote(Template.parse(template).text)} takes {r.n_template_tokens} tokens, "
                f"leaving no room for a sentence within {self.max_length}; shorten it"
            )
        return room

    def _token_lists(self, sentences: Sequence[str], r: RenderedTemplate) -> list[list[int]]:
        """Token ids of each sentence as it fills [X] (whole), each sentence tokenized once per module
        (the template pieces are tokenized apart)."""
        # A sentence that starts the text is tokenized as the start of a text (a SentencePiece word-start mark on its
        # first word), any other as the continuation of the template's text before it.
        start = r.sentence_starts_text
        texts = [(start, (" " + s) if r.sentence_prefix_space and not start else s) for s in sentences]
        todo = list(dict.fromkeys(t for t in texts if t not in self._tokens))
        if todo:
            if len(self._tokens) + len(todo) > TOKEN_CACHE:
                self._tokens.clear()
            words = [t for _, t in todo]
            ids = token_ids(self.tokenizer, words) if start else tokens_in_context(self.tokenizer, words)
            self._tokens.update(zip(todo, ids))
        return [self._tokens[t] for t in texts]

    def sentence_ids(self, sentences: Sequence[str], template: str | Template, pooled: bool = False) -> list[list[int]]:
        """Token ids of each sentence as it fills [X], truncated so the template fits (``pooled``: the
        template as a pooled read-out renders it, [MASK] not needed)."""
        room = self.check_template(template, pooled)
        return [ids[:room] for ids in self._token_lists(sentences, self.rendered(template, pooled))]

    def sentence_arrays(self, sentences: Sequence[str], template: str | Template,
                        pooled: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``sentence_ids`` as arrays: (every sentence's whole tokens in one flat array, each
        one's start in it, each one's token count truncated so the template fits). The arrays of
        the last sentence set are kept, so the templates of one call splice from one copy."""
        r = self.rendered(template, pooled)
        room = self.check_template(template, pooled)
        key = (r.sentence_prefix_space, r.sentence_starts_text, tuple(sentences))
        if self._flat is None or self._flat[0] != key:
            lists = self._token_lists(sentences, r)
            lens = np.fromiter(map(len, lists), dtype=np.int64, count=len(lists))
            flat = np.fromiter(itertools.chain.from_iterable(lists), dtype=np.int64, count=int(lens.sum()))
            self._flat = (key, flat, np.cumsum(lens) - lens, lens)
        _, flat, starts, lens = self._flat
        return flat, starts, np.minimum(lens, room)

    def input_rows(self, sentences: Sequence[str], template: str | Template, pooled: bool = False) -> ListRows:
        """(input ids, [MASK] index, template-bias length) for each prepared sentence, as a
        ``ListRows`` (a sequence of those tuples, with their lengths as arrays).

        By default the template's pieces and the sentence are tokenized apart and the bias length
        is the sentence's token count. ``compat="reference"`` tokenizes the filled template as one
        string, as kongds/Prompt-BERT's ``evaluation.py`` does (``ReferenceInputs``). ``pooled``: rows
        for a pooled read-out (always the default inputs: the reference only reads [MASK])."""
        if pooled:
            return PromptInputs.rows(self.inputs, sentences, Template.parse(template), pooled=True)
        return self.inputs.rows(sentences, Template.parse(template))

    def set_soft_prompt(self, template: str | Template, vectors: torch.Tensor | None) -> None:
        """Soft prompt (OptiPrompt) for a template: (n_soft, hidden) vectors that replace the static
        embeddings of its literal tokens. A Parameter is kept as is (training updates it); any other
        tensor becomes a frozen one. ``None`` removes it."""
        t = Template.parse(template).text
        key = _soft_key(t)
        if vectors is None:
            if key in self.soft:
                del self.soft[key]
            return
        n = self.rendered(t).n_soft
        if tuple(vectors.shape) != (n, self.hidden_size):
            raise PromptSearchError(f"soft prompt for {quote(t)} must be ({n}, {self.hidden_size}), got "
                                    f"{tuple(vectors.shape)}")
        if not isinstance(vectors, nn.Parameter):
            vectors = nn.Parameter(vectors.detach().clone(), requires_grad=False)
        self.soft[key] = vectors

    def soft_prompt(self, template: str | Template) -> torch.Tensor | None:
        key = _soft_key(Template.parse(template).text)
        return self.soft[key] if key in self.soft else None

    def clear_cache(self) -> None:
        """Forget cached template biases and sentence token ids (never needed for correctness: the
        bias cache is keyed by the weights' version, so it empties itself when a parameter changes;
        a benchmark empties both to time an encode from scratch)."""
        self._bias_cache.clear()
        self._tokens.clear()
        self._flat = None

    def weights_version(self) -> tuple:
        """Changes whenever a parameter is replaced or updated in place (an optimizer step,
        ``load_state_dict``, a new soft prompt)."""
        return tuple((id(p), p._version) for p in self.parameters())

    def _inputs(self, ids: torch.Tensor, template: Template, sent_lens: Sequence[int],
                shifts: Sequence[int] | None = None) -> dict:
        """``input_ids``, or ``inputs_embeds`` with soft-prompt vectors in the template slots."""
        soft = self.soft_prompt(template)
        if soft is None:
            return {"input_ids": ids}
        r = self.rendered(template)
        sb, sa = r.soft_slots()
        emb = self.encoder.get_input_embeddings()(ids)
        rows = torch.arange(len(ids), device=ids.device)[:, None]
        shifts = shifts or [0] * len(sent_lens)
        cols = torch.as_tensor([[c + sh for c in sb + [len(r.before) + n + j for j in sa]]
                                for n, sh in zip(sent_lens, shifts)],
                               device=ids.device)
        emb = emb.index_put((rows.expand_as(cols), cols), soft.to(emb.dtype).unsqueeze(0).expand(len(ids), -1, -1))
        return {"inputs_embeds": emb}

    def forward(self, sent_ids: Sequence[Sequence[int]] | Sequence[str], template: str | Template,
                denoise: bool = False, cache: bool | None = None, layer: int | None = None, readout: str | None = None,
                max_length: int | None = None) -> torch.Tensor:
        """[MASK] hidden states (B, hidden) for token-id sentences; differentiable when grad is on.

        What training calls (through DDP when ``accelerate`` wraps this module) and the
        sentence-transformers export. ``cache``: use the template-bias cache (default: only when
        gradients are off). ``readout``: the template's pass pooled that way instead — a prompt before [X]
        through the model's sentence-transformers stack (the sentences as text, ``max_length`` tokens at most),
        any other template by promptsearch's rendering (mean, sentence-mean, cls; sentence ids as
        ``sentence_ids`` gives them with ``pooled``).
        """
        t = Template.parse(template)
        if not is_mask(readout):
            k = Representation.of(t, readout=readout)
            if k.prompt is not None:
                assert k.readout is not None  # a prompt pooled
                texts = cast(Sequence[str], sent_ids)  # a prompt's pass reads the sentences as text
                with self.autocast():
                    return st_forward(self.model.stack(), texts, k.prompt, k.readout, max_length, self.device)
            r = self.rendered(t, pooled=True)
            ids = cast(Sequence[Sequence[int]], sent_ids)
            rows = ListRows([(*r.ids(list(s)), len(s)) for s in ids])
            (batch,) = self._upload(rows, [np.arange(len(rows))])
            return self._pooled(batch, t)[TEMPLATE_READOUTS.index(readout)]
        r = self.rendered(t)
        ids = cast(Sequence[Sequence[int]], sent_ids)  # a template's [MASK] pass reads token ids
        mask_rows = [(*r.ids(list(s)), len(s)) for s in ids]
        out = (self.states_for_rows(mask_rows, t) if layer is None
               else self.states_for_rows(mask_rows, t, [self.layer_index(layer)])[0])
        if denoise:
            out = out - self.template_bias(t, [len(s) for s in sent_ids], cache=cache, layer=layer).to(out.device)
        return out

    def layer_index(self, layer: int | None) -> int:
        """A read-out layer as ``hidden_states`` counts them: 0 the embeddings, ``n_layers`` the last
        (None); negative counts from the end. A one-line error outside the model's range."""
        if layer is None:
            return self.n_layers
        if not -(self.n_layers + 1) <= int(layer) <= self.n_layers:
            raise PromptSearchError(f"layer {layer} is out of range: this model has hidden states 0 (the embeddings) "
                                    f"to {self.n_layers} (the last)")
        return int(layer) % (self.n_layers + 1)

    def states_for_rows(self, rows: Sequence[tuple[list[int], int, int]], template: Template,
                        layers: Sequence[int] | None = None) -> torch.Tensor:
        """One padded forward of (ids, read-out index, sentence length) rows: the [MASK] (or, for a
        causal LM, the last template token's) states, (B, hidden) — or, for ``layers`` (indices of
        ``hidden_states``), every one of those layers' states from the same pass, (len(layers), B,
        hidden). Right padding by default; with left padding (``padding_side="left"``) the
        position ids count from each row's first real token."""
        rows = rows if isinstance(rows, ListRows) else ListRows(rows)
        (batch,) = self._upload(rows, [np.arange(len(rows))])
        return self._states(batch, template, layers)

    def _upload(self, rows: ListRows, batches: list[np.ndarray]) -> list[tuple]:
        """Every batch's padded ids, attention mask and read-out index built on the host (in numpy,
        a batch at a time) and sent to the device in one copy (pinned and non-blocking on CUDA: no
        wait on the GPU per batch), with the host-side sentence lengths and left-padding shifts the
        soft-prompt path needs."""
        host, meta = [], []
        for idx, (ids, att, read, shifts) in zip(batches, rows.padded_batches(batches, self.tokenizer.pad_token_id or 0,
                                                                             self.padding_side)):
            host += [ids.ravel(), att.ravel(), read]
            meta.append((ids.shape, rows.bias[idx].tolist(), shifts.tolist()))
        flat = torch.from_numpy(np.concatenate(host)) if host else torch.zeros(0, dtype=torch.long)
        if self.device.type == "cuda":
            flat = flat.pin_memory()
        flat = flat.to(self.device, non_blocking=True)
        out, at = [], 0
        for shape, lens, shifts in meta:
            n = shape[0] * shape[1]
            ids, att = flat[at : at + n].view(shape), flat[at + n : at + 2 * n].view(shape)
            read = flat[at + 2 * n : at + 2 * n + shape[0]]
            at += 2 * n + shape[0]
            out.append((ids, att, read, lens, shifts))
        return out

    def _forward(self, batch: tuple, template: Template, hidden_states: bool = False):
        """The encoder's output for one uploaded batch (left padding: positions from each row's first token)."""
        ids, att, _, lens, shifts = batch
        extra = {}
        if self.padding_side == "left":
            extra["position_ids"] = (att.cumsum(1) - 1).clamp(min=0) + self.position_offset
        with autocast(ids.device, self.bf16):  # the batch's device: no walk over the parameters per batch
            return self.encoder(**self._inputs(ids, template, lens, shifts), attention_mask=att,
                                output_hidden_states=hidden_states, **extra)

    def _states(self, batch: tuple, template: Template, layers: Sequence[int] | None = None) -> torch.Tensor:
        """``states_for_rows`` of one uploaded batch."""
        o = self._forward(batch, template, hidden_states=layers is not None)
        read = batch[2]
        at = (torch.arange(len(read), device=read.device), read)
        if layers is None:
            return o.last_hidden_state[at].float()
        return torch.stack([o.hidden_states[k][at] for k in layers]).float()

    def rows_states(self, rows: dict[Template, ListRows], max_tokens: int,
                    max_rows: int | None = None, layers: Sequence[int] | None = None,
                    bar=None) -> dict[str, np.ndarray]:
        """The read-out states of every template's rows, (1 or len(layers), n_rows, hidden) each, in
        one call: each template's rows sorted by length and cut into batches of ``max_tokens`` padded
        tokens (at most ``max_rows`` rows), states kept on the device until one copy at the end.

        A batch holds one template's rows: a row's state then comes out of the same batch whether
        its template is encoded alone or with others, so a score never depends on what else was
        scored with it (mixing templates moves fp32 states by ~1e-7, enough to reorder near-tied
        cosines); a template's last, partial batch is all that mixing would fill. A causal LM's
        templates with the same prefix up to [X] share the prefix and sentence passes instead, each
        suffix branched off (``branching``)."""
        nl = 1 if layers is None else len(layers)
        groups: dict[tuple, list[Template]] = {}  # causal LMs: templates by prefix ids, branched (see .branching)
        for t, r in rows.items():
            if len(r) and branchable(self, t) and (r.bias > 0).all():
                groups.setdefault(self.rendered(t).before, []).append(t)
        branched = {t for g in groups.values() for t in g}
        plan = {t: budget_batches(r.lengths, max_tokens, max_rows) for t, r in rows.items() if t not in branched}
        plans = [(g, branch_plan(self, g, rows, max_tokens, max_rows)) for g in groups.values()]
        if bar is not None:
            bar.total = sum(map(len, plan.values())) + sum(len(p[2]) for _, p in plans)
            bar.refresh()
        at = dict(zip(rows, np.cumsum([0] + [len(r) for r in rows.values()]).tolist()))  # each template's first row
        out = torch.empty((nl, sum(map(len, rows.values())), self.hidden_size), dtype=torch.float32, device=self.device)
        with self.autocast():  # one autocast region: its weight casts are made once per call, not per batch
            self._fill(out, rows, plan, at, lambda batch, t: self._states(batch, t, layers) if layers is not None
                       else self._states(batch, t)[None], bar)
            for g, p in plans:
                branched_states(self, g, rows, p, layers, out, at, bar)
        host = out.cpu().numpy()  # the one device-to-host copy
        return {t.text: host[:, at[t] : at[t] + len(r)] for t, r in rows.items()}

    def _fill(self, out: torch.Tensor, rows: dict[Template, ListRows], plan: dict[Template, list[np.ndarray]],
              at: dict[Template, int], read, bar=None) -> None:
        """Each template's planned batches uploaded and read (``read(batch, template)``: (k, B, hidden)) into
        ``out[:, rows]`` at the template's first row ``at``, advancing ``bar`` a batch at a time."""
        for t, batches in plan.items():
            places = torch.from_numpy(np.concatenate(batches) + at[t] if batches
                                      else np.zeros(0, np.int64)).to(self.device)
            done = 0
            for idx, batch in zip(batches, self._upload(rows[t], batches)):
                out[:, places[done : done + len(idx)]] = read(batch, t)
                done += len(idx)
                if bar is not None:
                    bar.update(1)

    def pooled_rows_states(self, rows: dict[Template, ListRows], max_tokens: int, max_rows: int | None = None,
                           bar=None) -> dict[str, np.ndarray]:
        """Every template's rows pooled three ways from one pass, (3, n_rows, hidden) each: the mean over
        all tokens, over the sentence's tokens and the closing special tokens, and the first token's state
        (the order of ``TEMPLATE_READOUTS``). Token-budget batches of one
        template each, as ``rows_states``."""
        plan = {t: budget_batches(r.lengths, max_tokens, max_rows) for t, r in rows.items()}
        if bar is not None:
            bar.total = sum(map(len, plan.values()))
            bar.refresh()
        at = dict(zip(rows, np.cumsum([0] + [len(r) for r in rows.values()]).tolist()))
        out = torch.empty((3, sum(map(len, rows.values())), self.hidden_size), dtype=torch.float32, device=self.device)
        with self.autocast():
            self._fill(out, rows, plan, at, lambda batch, t: self._pooled(batch, t), bar)
        host = out.cpu().numpy()
        return {t.text: host[:, at[t] : at[t] + len(r)] for t, r in rows.items()}

    def _pooled(self, batch: tuple, template: Template) -> torch.Tensor:
        """(3, B, hidden): one batch's mean over all tokens, over the sentence's (+ closing specials), first token."""
        ids, att, _, lens, shifts = batch
        r = self.rendered(template, pooled=True)
        n_before, n_trail = len(r.before), r.n_trail
        h = self._forward(batch, template).last_hidden_state.float()
        shift = torch.as_tensor(shifts, device=ids.device)[:, None]
        n = torch.as_tensor(lens, device=ids.device)[:, None]
        rel = torch.arange(ids.shape[1], device=ids.device)[None, :] - shift  # each cell's place in its row
        row_len = att.sum(1, keepdim=True)
        sent = ((rel >= n_before) & (rel < n_before + n)) | ((rel >= row_len - n_trail) & (rel < row_len))
        first = h[torch.arange(len(ids), device=ids.device), shift[:, 0]]

        def mean(mask):
            m = mask.to(h.dtype).unsqueeze(-1)
            return (h * m).sum(1) / m.sum(1).clamp(min=1e-9)

        return torch.stack([mean(att.bool()), mean(sent & att.bool()), first])

    def template_only_inputs(self, template: str | Template, length: int) -> tuple[list[int], list[int], int]:
        """(ids, position ids, [MASK] index) of the template alone, as if a sentence of
        ``length`` tokens sat in [X]: positions after [X] are shifted by ``length``."""
        r = self.rendered(template)
        ids, mask = r.ids([])
        off = self.position_offset
        pos = [off + i for i in range(len(r.before))] + [off + len(r.before) + length + i for i in range(len(r.after))]
        return ids, pos, mask

    def _bias_forward(self, template: Template, lengths: list[int],
                      layers: Sequence[int] | None = None) -> torch.Tensor:
        """The template-alone [MASK] states, (len(lengths), hidden), or (len(layers), len(lengths), hidden)."""
        rows = self.inputs.bias_rows(template, lengths)
        ids = torch.as_tensor([r[0] for r in rows], device=self.device)
        pos = torch.as_tensor([r[1] for r in rows], device=self.device)
        with self.autocast():
            # A sentence of length 0 in the soft-prompt layout: the template tokens sit side by side.
            o = self.encoder(**self._inputs(ids, template, [0] * len(rows)), attention_mask=torch.ones_like(ids),
                             position_ids=pos, output_hidden_states=layers is not None)
        if layers is None:
            return o.last_hidden_state[:, rows[0][2]].float()
        return torch.stack([o.hidden_states[k][:, rows[0][2]] for k in layers]).float()

    def _longest_sentence(self, template: Template) -> int:
        """The most sentence tokens an input can hold (the bias lengths there are)."""
        return max(self.max_length - self.inputs.n_template_tokens(template), 0)

    def template_bias(self, template: str | Template, lengths: Sequence[int] | np.ndarray, cache: bool | None = None,
                      layer: int | None = None) -> torch.Tensor:
        """The template's [MASK] state for each sentence length (at ``layer`` of ``hidden_states``;
        default the last hidden state).

        By default, without gradients and with dropout off the result is cached per (template,
        length) — the cache empties itself when the weights change; with gradients on (training)
        it is computed afresh, once per distinct length, and stays differentiable. ``cache=False``
        always computes afresh.
        """
        t = Template.parse(template)
        lengths = np.asarray(lengths, dtype=np.int64).reshape(-1)
        if not len(lengths):
            return torch.zeros((0, self.hidden_size))
        uniq_arr, inverse_arr = np.unique(lengths, return_inverse=True)  # each distinct length looked up once
        inverse, uniq = torch.from_numpy(inverse_arr.reshape(-1)), uniq_arr.tolist()
        if cache is None:  # a bias computed with gradients or with dropout on is not one to keep
            cache = not torch.is_grad_enabled() and not self.encoder.training
        version = self.weights_version()
        if version != self._bias_version:  # weights changed since the cache was filled
            self._bias_cache.clear()
            self._bias_version = version
        layer = None if layer is None else self.layer_index(layer)  # a hidden_states index from here on
        layers = None if layer is None else list(range(self.n_layers + 1))  # one pass caches every layer
        key = (lambda n: (t.text, n)) if layer is None else (lambda n: (t.text, n, layer))
        if not cache:
            vec = self._bias_forward(t, uniq, None if layer is None else [layer])
            vec = vec if layer is None else vec[0]
            return vec[inverse.to(vec.device)]
        # Lengths are computed in fixed buckets of BIAS_BUCKET (0-31, 32-63, ...), always whole,
        # so a length's bias comes out of the same batch whatever was cached before: the
        # numbers never depend on the order in which templates and data were scored.
        top = self._longest_sentence(t)
        todo: dict[int, int] = {}  # bucket -> longest length asked for in it
        for n in uniq:
            if key(n) not in self._bias_cache:
                todo[n // BIAS_BUCKET] = max(todo.get(n // BIAS_BUCKET, 0), n)
        for k, longest in sorted(todo.items()):
            chunk = list(range(k * BIAS_BUCKET, min((k + 1) * BIAS_BUCKET - 1, max(top, longest)) + 1))
            vec = self._bias_forward(t, chunk, layers).cpu()
            for i, n in enumerate(chunk):
                if layers is None:
                    self._bias_cache[(t.text, n)] = vec[i]
                else:
                    for j in layers:
                        self._bias_cache[(t.text, n, j)] = vec[j, i]
        return torch.stack([self._bias_cache[key(n)] for n in uniq])[inverse]
