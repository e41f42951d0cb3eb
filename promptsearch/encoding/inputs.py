"""How a template and a sentence become model inputs: one object per compatibility mode.

``PromptInputs`` (the default) tokenizes the template's pieces and the sentence apart and
splices them, so a sentence's tokens are the same in every template and truncation happens
inside [X]. ``ReferenceInputs`` (``compat="reference"``) feeds what kongds/Prompt-BERT's
``evaluation.py`` feeds: the filled template tokenized as one string, and a template-only input
whose positions start at 0. A ``PromptModule`` holds one.
"""

from __future__ import annotations

from typing import Sequence

from ..errors import PromptSearchError
from ..template import Template, special_tokens_around
from .rows import ListRows, Row, SplicedRows


class PromptInputs:
    """The default inputs: template pieces and sentence tokenized apart."""

    def __init__(self, module):
        self.module = module

    def rows(self, sentences: Sequence[str], template: Template, pooled: bool = False) -> ListRows:
        """(input ids, [MASK] index, sentence token count) for each prepared sentence, spliced from
        the sentences' cached tokens (``SplicedRows``: no row built until a batch needs it);
        ``pooled``: for a pooled read-out (the template may have no [MASK])."""
        r = self.module.rendered(template, pooled)
        flat, starts, n = self.module.sentence_arrays(sentences, template, pooled)
        return SplicedRows(r.before, r.after, r.mask_in_before, r.mask_index, flat, starts, n)

    def bias_rows(self, template: Template, lengths: Sequence[int]) -> list[tuple[list[int], list[int], int]]:
        """(ids, position ids, [MASK] index) of the template alone for each sentence length."""
        return [self.module.template_only_inputs(template, n) for n in lengths]

    def n_template_tokens(self, template: Template) -> int:
        return self.module.rendered(template).n_template_tokens


class ReferenceInputs(PromptInputs):
    """kongds/Prompt-BERT's evaluation inputs (needed to reproduce its RoBERTa numbers)."""

    def __init__(self, module):
        super().__init__(module)
        self._template_only: dict[str, Row] = {}

    def template_only(self, template: Template) -> Row:
        """The reference's ``get_delta`` input: (ids, first shifted index, [MASK] index).

        The template text with [X] replaced by a space, runs of three spaces collapsed to one,
        tokenized as one string; positions start at 0 (for RoBERTa too) and the tokens from the
        first one after the prefix on are shifted by the sentence length."""
        hit = self._template_only.get(template.text)
        if hit is None:
            tok = self.module.tokenizer
            text = template.text.replace("[MASK]", tok.mask_token).replace("[X]", " ").strip().replace("   ", " ")
            ids = list(tok(text)["input_ids"])
            lead, _ = special_tokens_around(tok)
            prefix = template.text.split("[X]", 1)[0].replace("[MASK]", tok.mask_token).strip()
            start = len(lead) + (len(tok(prefix, add_special_tokens=False)["input_ids"]) if prefix else 0)
            hit = self._template_only[template.text] = (ids, start, ids.index(tok.mask_token_id))
        return hit

    def rows(self, sentences: Sequence[str], template: Template, pooled: bool = False) -> ListRows:
        """The reference's batcher input: the template with the sentence in place of [X], stripped,
        tokenized as one string (BPE merges across the [X] boundary included); [MASK] is found by
        id; the bias length is the input's length minus the template-only input's."""
        if self.module.soft_prompt(template) is not None:
            raise PromptSearchError("compat='reference' reproduces plain templates; a soft prompt (OptiPrompt) needs "
                                    "the default compat")
        tok, max_length = self.module.tokenizer, self.module.max_length
        t_ids, _, _ = self.template_only(template)
        text = template.text.replace("[MASK]", tok.mask_token)
        rows = []
        for s in sentences:
            ids = list(tok(text.replace("[X]", s).strip())["input_ids"])
            if len(ids) > max_length:  # the reference never truncates; keep as many words as fit
                words = s.split()
                lo, hi = 0, len(words)
                while lo < hi:
                    mid = (lo + hi + 1) // 2
                    if len(tok(text.replace("[X]", " ".join(words[:mid])).strip())["input_ids"]) <= max_length:
                        lo = mid
                    else:
                        hi = mid - 1
                ids = list(tok(text.replace("[X]", " ".join(words[:lo])).strip())["input_ids"])
            mask = [i for i, x in enumerate(ids) if x == tok.mask_token_id]
            if len(mask) != 1:
                raise PromptSearchError(f"sentence {s[:60]!r} holds the mask token itself; remove it from the sentence")
            rows.append((ids, mask[0], max(len(ids) - len(t_ids), 0)))
        return ListRows(rows)

    def bias_rows(self, template: Template, lengths: Sequence[int]) -> list[tuple[list[int], list[int], int]]:
        ids, start, mask = self.template_only(template)
        return [(ids, list(range(start)) + [i + n for i in range(start, len(ids))], mask) for n in lengths]

    def n_template_tokens(self, template: Template) -> int:
        return len(self.template_only(template)[0])
