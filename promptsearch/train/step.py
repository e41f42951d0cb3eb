"""One contrastive training step, shared by ``finetune`` and ``optiprompt``.

A ``Step`` says what the loss compares: ``unsup``, a sentence's two views are its [MASK]
states under ``templates[0]`` and ``templates[-1]`` (the same template twice in OptiPrompt:
dropout makes the views differ), in-batch negatives; ``sup``, NLI triplets under one template.

Large batches on small memory use gradient caching (Gao et al. 2021): all views of the whole
batch are first computed without gradients in micro-batches, the loss and its gradient with
respect to those vectors are computed once over the full batch (so every in-batch negative
counts), then each micro-batch is recomputed with the same dropout RNG and back-propagated
with its slice of that gradient. The result equals the full-batch gradient.

``train_step`` returns the loss as a device tensor: reading it (``float(loss)``) waits for
the device, so the trainers read it only when they log.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import cast

import numpy as np
import torch

from ..encoding import PromptEncoder
from ..encoding.batching import budget_batches, prepare
from ..encoding.pooled import input_lengths, prompt_tokens
from ..representation import Representation
from .loop import rng_state, set_rng_state
from .losses import info_nce, supervised_nce


@dataclass(frozen=True)
class Step:
    mode: str  # "unsup" | "sup"
    templates: tuple[str, ...]  # unsup: the two views' templates (first and last); sup: the first
    denoise: bool = True
    temperature: float = 0.05
    max_seq_length: int = 32
    micro_batch: int = 64  # rows per micro-batch (0: the whole batch at once)
    micro_tokens: int | None = None  # micro-batches by a token budget, in length order (rows at most micro_batch)
    layer: int | None = None  # the read-out layer (None: the last hidden state)
    readout: str | None = None  # a pooled read-out of the template's pass; None: [MASK]


def st_prompt(step: Step, template: str) -> str | None:
    """The sentence-transformers prompt this step pools (a prompt before [X] with a pooled read-out), else None."""
    return Representation.of(template, readout=step.readout).prompt if step.readout else None


def st_max_length(enc: PromptEncoder, step: Step, prompt: str) -> int:
    """A pooled prompt's inputs cut as a sentence of ``max_seq_length`` tokens is: its prompt and special tokens
    more (within the model's own max length)."""
    n = prompt_tokens(enc.model.stack(), prompt) + step.max_seq_length
    return min(n, enc.pooled_max_length) if enc.pooled_max_length else n


def sentence_ids(enc: PromptEncoder, step: Step, texts: list[str], template: str) -> list[list[int]] | list[str]:
    """The sentences' ids as they fill ``template``'s [X] for this step's read-out (a pooled read-out:
    no period added, as it is evaluated), cut at ``max_seq_length``; a pooled prompt's sentences as text (the
    sentence-transformers stack tokenizes ``prompt + sentence`` itself, as it is evaluated)."""
    if st_prompt(step, template) is not None:
        return list(texts)
    if step.readout:
        ids = enc.prompt.sentence_ids(prepare(texts, add_period=False), template, pooled=True)
    else:
        ids = enc.sentence_ids(enc.prepare(texts), template)
    return [s[: step.max_seq_length] for s in ids]


def lengths(enc: PromptEncoder, step: Step, texts: list[str], template: str) -> list[int]:
    """Each sentence's token count as a view feeds it (what micro-batches are budgeted by)."""
    prompt = st_prompt(step, template)
    if prompt is not None:
        return input_lengths(enc.model.stack(), texts, prompt, st_max_length(enc, step, prompt))
    return [min(len(s), step.max_seq_length) for s in sentence_ids(enc, step, texts, template)]


def views(enc: PromptEncoder, step: Step, items: list, prompt=None) -> list[torch.Tensor]:
    """The representations the loss compares, for a (micro-)batch of items. ``prompt``: the
    prompt module as the trainer wrapped it (DDP under ``accelerate``), else ``enc.prompt``."""
    prompt = prompt or enc.prompt

    def rep(texts, template):
        ids = sentence_ids(enc, step, texts, template)
        if (p := st_prompt(step, template)) is not None:  # through the sentence-transformers stack, as it is evaluated
            return prompt(ids, template, readout=step.readout, max_length=st_max_length(enc, step, p))
        if step.readout:  # the template's pass pooled: nothing to denoise
            return prompt(ids, template, readout=step.readout)
        # never the bias cache: the no-grad first pass of gradient caching must draw the same
        # dropout masks as the second, so both compute the bias afresh
        return prompt(ids, template, denoise=step.denoise, cache=False, layer=step.layer)

    if step.mode == "unsup":
        return [rep(items, step.templates[0]), rep(items, step.templates[-1])]
    return [rep([x[i] for x in items], step.templates[0]) for i in range(3)]


def loss(step: Step, vs: list[torch.Tensor]) -> torch.Tensor:
    if step.mode == "unsup":
        return info_nce(vs[0], vs[1], step.temperature)
    return supervised_nce(vs[0], vs[1], vs[2], step.temperature)


def micro_batches(enc: PromptEncoder, step: Step, items: list) -> list[list[int]]:
    """The items of each micro-batch of a step: ``micro_batch`` rows at a time in item order (0: one
    batch); with ``micro_tokens``, in length order, each filled to that many sentence tokens (rows ×
    its longest item, truncated at ``max_seq_length``; at most ``micro_batch`` rows when that is set),
    so short sentences share large micro-batches and long ones do not run out of memory."""
    if step.micro_tokens:
        texts = items if step.mode == "unsup" else [s for x in items for s in x]
        lens = np.array(lengths(enc, step, texts, step.templates[0])).reshape(len(items), -1).max(1)
        return [b.tolist() for b in budget_batches(lens, step.micro_tokens, step.micro_batch or None)]
    m = step.micro_batch if step.micro_batch > 0 else len(items)
    return [list(range(i, min(i + m, len(items)))) for i in range(0, len(items), m)]


def train_step(enc: PromptEncoder, step: Step, items: list, backward, no_sync=contextlib.nullcontext,
               prompt=None) -> torch.Tensor:
    """One optimisation step's gradients for ``items`` (``backward(loss)`` back-propagates; the
    optimizer step is the caller's); micro-batched with gradient caching (the loss over the whole
    batch in item order, whatever order the micro-batches take). Returns the loss, detached, on
    the device."""
    chunks = micro_batches(enc, step, items)
    if len(chunks) <= 1:
        out = loss(step, views(enc, step, items, prompt))
        backward(out)
        return out.detach()
    order = torch.tensor([i for c in chunks for i in c])
    where = torch.empty_like(order)
    where[order] = torch.arange(len(order))  # item i's row in the micro-batches' concatenation
    states, parts = [], []
    with torch.no_grad():
        for c in chunks:
            states.append(rng_state(enc.device))  # the CPU's generator and, on a GPU, its own (where dropout draws)
            parts.append(views(enc, step, [items[i] for i in c], prompt))
    full = [torch.cat([p[v] for p in parts])[where.to(parts[0][v].device)].detach().requires_grad_()
            for v in range(len(parts[0]))]
    out = loss(step, full)
    out.backward()
    grads = [cast(torch.Tensor, f.grad) for f in full]  # set by out.backward(): every view requires it
    after = rng_state(enc.device)
    for k, (c, st) in enumerate(zip(chunks, states)):
        set_rng_state(st)  # the same dropout masks as in the first pass
        ctx = no_sync() if k < len(chunks) - 1 else contextlib.nullcontext()
        with ctx:
            vs = views(enc, step, [items[i] for i in c], prompt)
            idx = torch.tensor(c, device=grads[0].device)
            surrogate = sum((v * g[idx]).sum() for v, g in zip(vs, grads))
            backward(surrogate)
    set_rng_state(after)
    return out.detach()
