"""[MASK] token predictions with and without template denoising (PromptBERT Table 7), and
the Eq. 3 representation: the probability-weighted average of the static embeddings of the
top-k predicted tokens (Table 9)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..encoding import PromptEncoder, PromptStates
from ..encoding.reps import TopKStatic
from ..errors import PromptSearchError
from ..model import shipped_head_path


@dataclass
class Prediction:
    sentence: str
    raw: list[tuple[str, float]]
    denoised: list[tuple[str, float]]


@torch.inference_mode()
def mask_logits(enc: PromptEncoder, sentences: Sequence[str], template: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(raw, denoised) vocabulary logits at [MASK]; denoised = head(h − template bias)."""
    st = enc.prompt_states(list(sentences), template, denoise=True, show_progress_bar=False)
    assert isinstance(st, PromptStates)  # one layer's states: no layers= asked
    return enc.word_logits(st.raw), enc.word_logits(st.denoised)


def check_sentences(sentences: Sequence[str]) -> list[str]:
    """Sentences to predict for: at least one, none empty (one-line errors)."""
    if not sentences:
        raise PromptSearchError("give one or more sentences to predict [MASK] for")
    empty = [i for i, x in enumerate(sentences, 1) if not x.strip()]
    if empty:
        raise PromptSearchError(f"sentence {empty[0]} is empty; give sentences with text in them")
    return list(sentences)


def predict(enc: PromptEncoder, sentences: Sequence[str], template: str, top_k: int = 5) -> list[Prediction]:
    raw, den = mask_logits(enc, sentences, template)
    tok = enc.tokenizer
    out = []
    for i, s in enumerate(sentences):
        rows = []
        for logits in (raw[i], den[i]):
            p = logits.softmax(-1)
            words = int(torch.isfinite(logits).sum())  # special tokens are -inf (word_logits): never listed
            v, ix = p.topk(min(top_k, words))
            rows.append([(tok.convert_ids_to_tokens(int(j)), float(x)) for x, j in zip(v, ix)])
        out.append(Prediction(s, rows[0], rows[1]))
    return out


def printable(text: str) -> str:
    """Control characters (ESC sequences included) shown escaped, never sent to the terminal raw."""
    return "".join(c if c.isprintable() or c == " " else c.encode("unicode_escape").decode("ascii") for c in text)


def format_predictions(preds: list[Prediction], template: str, show: str = "both") -> str:
    lines = []
    for pr in preds:
        lines.append(printable(template.replace("[X]", pr.sentence)))
        cols = [("without denoising", pr.raw)] if show in ("both", "no") else []
        cols += [("with denoising", pr.denoised)] if show in ("both", "yes") else []
        w = 26
        lines.append("  " + "".join(name.ljust(w) for name, _ in cols))
        for r in range(len(cols[0][1])):
            cells = [f"{printable(c[1][r][0])} {c[1][r][1]:.3f}".ljust(w) for c in cols]
            lines.append("  " + "".join(cells))
        lines.append("")
    return "\n".join(lines).rstrip()


def topk_static(enc: PromptEncoder, sentences: Sequence[str], template: str, denoise: bool = False,
                k: int = 200) -> np.ndarray:
    """Eq. 3 for sentences (from the raw or the denoised [MASK] state)."""
    return enc.encode(list(sentences), rep=TopKStatic(template, denoise, k=k))


def top_k_note(enc: PromptEncoder, top_k: int) -> str | None:
    """A note when ``top_k`` asks for more tokens than the model has word tokens (all of them are listed)."""
    words = enc.word_logits(torch.zeros((1, enc.prompt.hidden_size))).isfinite().sum().item()
    if top_k > words:
        return f"note: top_k={top_k} is more than this model's {words} word tokens: listing all {words}"
    return None


def head_note(enc: PromptEncoder, model_name: str, quiet: bool = False) -> str | None:
    """Where the [MASK] predictions come from, when it is not the model's own MLM head (``quiet``:
    only when there is no head at all)."""
    if not enc.model.has_mlm_head:
        return f"note: {model_name} has no MLM head: tokens come from projecting [MASK] states on the word embeddings"
    if enc.model.mask_head is None or quiet:
        return None
    meta = getattr(enc.model.mask_head, "meta", {}) or {}
    acc = (f" (held-out masked-token top-5 {100 * meta['heldout_top5']:.1f} %, unigram "
           f"{100 * meta['unigram_top5']:.1f} %)") if "heldout_top5" in meta else ""
    which = "the shipped head" if Path(enc.model.mask_head_path) == shipped_head_path() else enc.model.mask_head_path
    return f"note: [MASK] tokens from a head trained on the frozen encoder ({which}){acc}"
