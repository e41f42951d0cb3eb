"""Causal LMs: the template's prefix computed once, the sentence once, each suffix branched off.

A causal LM's state at a position depends only on what comes before it, so a template
``before [X] after`` splits into three passes that give the same states as one full forward:

1. the prefix (``before``: leading specials, the template text, ``--demos``) alone, once per
   call: its key/value cache is expanded over each batch;
2. the sentences of a batch, continuing that cache (padding, left or right, masked out, the
   position ids counting real tokens only);
3. each template's suffix (``after``), continuing the prefix+sentence cache, which is cropped
   back after each one. Templates equal up to and including [X] (greedy's relation step, a
   grammar's suffix slots) share passes 1 and 2: N suffixes cost one sentence pass plus N short
   suffix passes instead of N full encodes.

A row whose sentence is cut shorter for its template than the group's longest cut (a template
with a longer suffix leaves less room) is computed by the plain full forward instead.
"""

from __future__ import annotations

import copy
from typing import Sequence

import numpy as np
import torch

from ..template import Template
from .batching import budget_batches, pad


def branchable(module, template: Template) -> bool:
    """Whether ``template`` can be split: a causal LM, no soft prompt, a read-out in the suffix."""
    if not module.causal or module.soft_prompt(template) is not None:
        return False
    r = module.rendered(template)
    return not r.mask_in_before and r.mask_index < len(r.after) and module.share_prefix


def plan(module, group: list[Template], rows: dict, max_tokens: int, max_rows: int | None) -> tuple:
    """(each row's sentence ids at the group's longest cut, that cut's length, the batches)."""
    n_prefix = len(module.rendered(group[0]).before)
    longest = np.max([rows[t].bias for t in group], axis=0)
    sent = [next(rows[t][i][0][n_prefix : n_prefix + longest[i]] for t in group if rows[t].bias[i] == longest[i])
            for i in range(len(longest))]
    longest_suffix = max(len(module.rendered(t).after) for t in group)
    return sent, longest, budget_batches([n_prefix + len(s) + longest_suffix for s in sent], max_tokens, max_rows)


def branched_states(module, group: list[Template], rows: dict, planned: tuple, layers: Sequence[int] | None,
                    out: torch.Tensor, at: dict, bar=None) -> None:
    """Write into ``out[:, at[t] + i]`` the read-out states of every row ``i`` of every template ``t``
    of ``group`` (templates with the same ``before`` ids), from the three passes above."""
    sent, longest, batches = planned
    before = list(module.rendered(group[0]).before)
    n_prefix = len(before)
    prefix = _prefix_cache(module, before)
    dev = module.device
    for idx in batches:
        cache, att = _sentence_pass(module, prefix, n_prefix, [sent[i] for i in idx])
        lens = att.sum(1)
        for t in group:
            r = module.rendered(t)
            after = torch.as_tensor(r.after, device=dev).expand(len(idx), -1)
            pos = (n_prefix + lens)[:, None] + torch.arange(after.shape[1], device=dev)
            # (a row cut shorter for this template may run past the model's positions here; it is not kept)
            pos = pos.clamp(max=module.max_length - 1) + module.position_offset
            mask = torch.cat([torch.ones((len(idx), n_prefix), dtype=att.dtype, device=dev), att,
                              torch.ones_like(after)], 1)
            o = module.encoder(input_ids=after, attention_mask=mask, position_ids=pos, past_key_values=cache,
                               use_cache=True, output_hidden_states=layers is not None)
            cache.crop(-after.shape[1])  # back to prefix + sentence (a negative count: every transformers version)
            st = (o.last_hidden_state[None] if layers is None else torch.stack([o.hidden_states[k] for k in layers]))
            st = st[:, :, r.mask_index].float()
            same = rows[t].bias[idx] == longest[idx]
            if same.any():
                out[:, torch.from_numpy(idx[same] + at[t]).to(dev)] = st[:, torch.from_numpy(same).to(dev)]
            if not same.all():  # cut shorter for this template: its own full forward
                full = module.states_for_rows([rows[t][i] for i in idx[~same]], t, layers)
                out[:, torch.from_numpy(idx[~same] + at[t]).to(dev)] = full if layers is not None else full[None]
        if bar is not None:
            bar.update(1)


def _prefix_cache(module, before: list[int]):
    """The key/value cache of the prefix alone (batch 1), or None for an empty prefix."""
    if not before:
        return None
    ids = torch.as_tensor([before], device=module.device)
    pos = torch.arange(len(before), device=module.device)[None] + module.position_offset
    return module.encoder(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=pos,
                          use_cache=True).past_key_values


def _sentence_pass(module, prefix, n_prefix: int, sents: list[list[int]]):
    """The sentences continuing the prefix cache: (the grown cache, the sentences' attention mask)."""
    b = len(sents)
    ids, att = pad(sents, module.tokenizer.pad_token_id or 0, module.device, side=module.padding_side)
    cache = None
    if prefix is not None:
        cache = copy.deepcopy(prefix)
        cache.batch_repeat_interleave(b)
    pos = n_prefix + (att.cumsum(1) - 1).clamp(min=0) + module.position_offset
    mask = torch.cat([torch.ones((b, n_prefix), dtype=att.dtype, device=att.device), att], 1)
    o = module.encoder(input_ids=ids, attention_mask=mask, position_ids=pos, past_key_values=cache, use_cache=True)
    return o.past_key_values, att
