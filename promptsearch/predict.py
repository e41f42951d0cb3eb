"""[MASK] token predictions with and without template denoising (PromptBERT Table 7), and
the Eq. 3 representation: the probability-weighted average of the static embeddings of the
top-k predicted tokens (Table 9)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from .encoder import PromptEncoder


@dataclass
class Prediction:
    sentence: str
    raw: list[tuple[str, float]]
    denoised: list[tuple[str, float]]


@torch.inference_mode()
def mask_logits(enc: PromptEncoder, sentences: Sequence[str], template: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(raw, denoised) vocabulary logits at [MASK]; denoised = head(h − template bias)."""
    st = enc.prompt_states(list(sentences), template, denoise=True, show_progress_bar=False)
    return _word_logits(enc, st.raw), _word_logits(enc, st.denoised)


def _word_logits(enc: PromptEncoder, states) -> torch.Tensor:
    """Head logits with special tokens ([CLS], <s>, [MASK] ...) excluded: predictions are words."""
    logits = enc.model.mlm_logits(torch.as_tensor(states, device=enc.device)).float()
    special = [i for i in getattr(enc.tokenizer, "all_special_ids", []) if i < logits.shape[-1]]
    logits[..., special] = float("-inf")
    return logits


def predict(enc: PromptEncoder, sentences: Sequence[str], template: str, top_k: int = 5) -> list[Prediction]:
    raw, den = mask_logits(enc, sentences, template)
    tok = enc.tokenizer
    out = []
    for i, s in enumerate(sentences):
        rows = []
        for logits in (raw[i], den[i]):
            p = logits.softmax(-1)
            v, ix = p.topk(top_k)
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


@torch.inference_mode()
def topk_static_from_states(enc: PromptEncoder, states: np.ndarray, k: int = 200, batch_size: int = 256) -> np.ndarray:
    """Eq. 3: Σ_{v in top-k} P(v | h) · e_v / Σ P over the MLM's top-k tokens, for [MASK] states h."""
    emb = enc.word_embeddings.float()
    out = []
    for start in range(0, len(states), batch_size):
        p = _word_logits(enc, states[start : start + batch_size]).softmax(-1)
        v, ix = p.topk(min(k, p.shape[-1]), dim=-1)
        w = v / v.sum(-1, keepdim=True)
        out.append(torch.einsum("bk,bkd->bd", w, emb[ix]).cpu().numpy())
    return np.concatenate(out) if out else np.zeros((0, emb.shape[1]), np.float32)


def topk_static(enc: PromptEncoder, sentences: Sequence[str], template: str, denoise: bool = False, k: int = 200) -> np.ndarray:
    """Eq. 3 for sentences (from the raw or the denoised [MASK] state)."""
    st = enc.prompt_states(list(sentences), template, denoise=denoise)
    return topk_static_from_states(enc, st.denoised if denoise else st.raw, k)
