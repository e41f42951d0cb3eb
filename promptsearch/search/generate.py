"""Definition-driven template generation (PromptBERT §4.2, after LM-BFF).

A (word, definition) pair is a sentence [X] (the definition) and the word its [MASK] should
predict. A generator fills the spans around them::

    <extra_id_0> {definition} <extra_id_1> {word} <extra_id_2>   →   A [X] B [MASK] C

``T5Generator`` asks a T5 model (any HF id or path) with beam search. ``MLMGenerator`` is
the offline mode: it fills ``[MASK]`` spans of a few lengths around the pair with the masked
LM being searched, one position at a time (most confident first), branching on the top-k
tokens of the first position. Candidates from all pairs are ranked by how many pairs
produced them.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from tqdm.auto import tqdm

from ..data import read_wordnet
from ..errors import ModelError, TemplateError, first_line, note
from ..model.loading import _quiet_transformers, resolve_device
from ..template import Template, special_tokens_around
from .runner import Runner
from .scorer import Scorer
from .state import Generated
from .strategy import Strategy

SPAN_PATTERNS = [(0, 1, 1), (1, 1, 1), (2, 1, 1), (3, 1, 1), (2, 2, 1), (3, 2, 1), (1, 2, 1), (4, 1, 1)]


def _template_from_spans(a: str, b: str, c: str) -> str | None:
    text = f"{a} [X] {b} [MASK] {c}"
    try:
        t = Template.parse(text)
    except TemplateError:
        return None
    if not b.strip():
        return None  # [X] [MASK] with nothing between is a degenerate template
    return t.text


def _clean(span: str) -> str:
    return " ".join(span.replace("[X]", "").replace("[MASK]", "").split())


class T5Generator:
    """Span filling with a T5 model (``google-t5/t5-base`` where the hub is reachable)."""

    def __init__(self, model_name: str, device=None, num_beams: int = 8, max_new_tokens: int = 24):
        from transformers import AutoTokenizer, T5ForConditionalGeneration  # lazy: start-up time

        try:
            with _quiet_transformers():
                self.tokenizer = AutoTokenizer.from_pretrained(model_name)
                # Any: transformers' own annotations do not check here (``to`` typed as a wrapped function,
                # ``generate`` with a self type T5 does not match, its return a union of output classes)
                self.model: Any = T5ForConditionalGeneration.from_pretrained(model_name)
        except (OSError, ValueError) as exc:
            first = first_line(exc)
            raise ModelError(f"cannot load T5 model {model_name!r} ({first}); pass model_t5= with a local path or "
                             "a reachable HF id, or use generator=mlm offline") from None
        self.device = resolve_device(device)
        # transformers types ``to`` as a wrapped function whose first argument is the model itself
        self.model.to(self.device).eval()  # type: ignore[arg-type]
        self.num_beams = num_beams
        self.max_new_tokens = max_new_tokens

    def parse(self, text: str) -> str | None:
        """``<extra_id_0> A <extra_id_1> B <extra_id_2> C ...`` → ``A [X] B [MASK] C``."""
        for tok in (self.tokenizer.pad_token, self.tokenizer.eos_token):
            if tok:
                text = text.replace(tok, " ")
        spans = {}
        for k in range(3):
            start = text.find(f"<extra_id_{k}>")
            if start < 0:
                if k < 2:
                    return None
                spans[k] = ""
                continue
            start += len(f"<extra_id_{k}>")
            end = text.find("<extra_id_", start)
            spans[k] = _clean(text[start:] if end < 0 else text[start:end])
        return _template_from_spans(spans[0], spans[1], spans[2])

    @torch.inference_mode()
    def generate(self, pairs: list[tuple[str, str]], batch_size: int = 8, show=None) -> Counter:
        counts: Counter = Counter()
        for start in tqdm(range(0, len(pairs), batch_size), desc="t5 generate", leave=False, disable=show is False):
            chunk = pairs[start : start + batch_size]
            inputs = [f"<extra_id_0> {d} <extra_id_1> {w} <extra_id_2>" for w, d in chunk]
            enc = self.tokenizer(inputs, return_tensors="pt", padding=True, truncation=True,
                                 max_length=128).to(self.device)
            out = self.model.generate(**enc, num_beams=self.num_beams, num_return_sequences=self.num_beams,
                                      max_new_tokens=self.max_new_tokens, early_stopping=True)
            for text in self.tokenizer.batch_decode(out, skip_special_tokens=False):
                t = self.parse(text)
                if t:
                    counts[t] += 1
        return counts


class MLMGenerator:
    """Offline span filling with the masked LM being searched (no T5 needed)."""

    def __init__(self, encoder, top_k: int = 3, patterns=SPAN_PATTERNS):
        self.enc = encoder
        self.top_k = top_k
        self.patterns = patterns
        m = encoder.model
        if not m.has_mlm_head:
            note(f"note: {m.name} has no MLM head; generator=mlm scores tokens by projecting [MASK] states on the "
                 "word embeddings, so expect weak templates")
        special = set(getattr(m.tokenizer, "all_special_ids", []))
        vocab = m.tokenizer.get_vocab()
        bad = [i for t, i in vocab.items()
               if i in special or t.startswith("[unused") or t.startswith("<") or "[X]" in t]
        self._banned = torch.tensor(sorted(set(bad)), dtype=torch.long)

    @torch.inference_mode()
    def _logits(self, ids: torch.Tensor) -> torch.Tensor:
        m = self.enc.model
        att = torch.ones_like(ids)
        with self.enc.autocast():
            if m.mlm is not None and m.mask_head is None:
                logits = m.mlm(input_ids=ids, attention_mask=att).logits.float()
            else:  # a trained head (train-head), or the word-embedding stand-in
                h = m.encoder(input_ids=ids, attention_mask=att).last_hidden_state.float()
                logits = m.mlm_logits(h).float()
        logits[..., self._banned.to(logits.device)] = -1e9
        return logits

    def _fill(self, ids: list[int], holes: list[int]) -> list[list[int]]:
        """Fill the holes most-confident-first; branch on top-k at the first fill."""
        dev = self.enc.device
        beams = [list(ids)]
        remaining = list(holes)
        first = True
        while remaining:
            nxt = []
            for b in beams:
                logits = self._logits(torch.tensor([b], device=dev))[0]
                probs = logits[remaining].softmax(-1)
                conf, tok = probs.max(-1)
                j = int(conf.argmax())
                pos = remaining[j]
                choices = probs[j].topk(self.top_k).indices.tolist() if first else [int(tok[j])]
                for c in choices:
                    nb = list(b)
                    nb[pos] = c
                    nxt.append(nb)
            beams = nxt
            remaining = [p for p in remaining if beams[0][p] == self.enc.tokenizer.mask_token_id]
            first = False
        return beams

    def generate(self, pairs: list[tuple[str, str]], show=None) -> Counter:
        tok = self.enc.tokenizer
        lead, trail = special_tokens_around(self.enc.tokenizer)
        mask = tok.mask_token_id
        counts: Counter = Counter()
        for word, definition in tqdm(pairs, desc="mlm generate", leave=False, disable=show is False):
            d_ids = tok(definition, add_special_tokens=False)["input_ids"][:40]
            w_ids = tok(word, add_special_tokens=False)["input_ids"][:6]
            for a, b, c in self.patterns:
                ids = lead + [mask] * a + d_ids + [mask] * b + w_ids + [mask] * c + trail
                s0 = len(lead)
                s1 = s0 + a + len(d_ids)
                s2 = s1 + b + len(w_ids)
                holes = list(range(s0, s0 + a)) + list(range(s1, s1 + b)) + list(range(s2, s2 + c))
                for filled in self._fill(ids, holes):
                    spans = [tok.decode(filled[s0 : s0 + a]), tok.decode(filled[s1 : s1 + b]),
                             tok.decode(filled[s2 : s2 + c])]
                    t = _template_from_spans(*(_clean(x) for x in spans))
                    if t:
                        counts[t] += 1
        return counts


@dataclass
class GenerateSearch(Strategy):
    """Generate templates from WordNet (word, definition) pairs, then score them all."""

    generator: str = "t5"  # "t5" | "mlm"
    model_t5: str = "google-t5/t5-base"
    num_templates: int = 500
    num_pairs: int = 200
    wordnet_dir: str = "/usr/share/wordnet"
    seed: int = 0
    num_beams: int = 8
    show_progress_bar: bool | None = None
    name: str = "t5"
    SPACE: ClassVar[tuple[str, ...]] = ("generator", "model_t5", "num_templates", "num_pairs", "wordnet_dir", "seed",
                                        "num_beams")
    generated: dict = field(default_factory=dict)

    def settings(self) -> dict:
        return {"generator": self.generator, "model_t5": self.model_t5 if self.generator == "t5" else None,
                "num_templates": self.num_templates, "num_pairs": self.num_pairs, "wordnet_dir": self.wordnet_dir,
                "seed": self.seed, "num_beams": self.num_beams}

    def candidates(self, scorer: Scorer) -> list[str]:
        pairs = read_wordnet(self.wordnet_dir)
        rng = random.Random(self.seed)
        rng.shuffle(pairs)
        show = self.show_progress_bar
        gen: T5Generator | MLMGenerator
        if self.generator == "t5":
            gen = T5Generator(self.model_t5, device=scorer.encoder.device, num_beams=self.num_beams)
        else:
            gen = MLMGenerator(scorer.encoder)
        counts: Counter = Counter()
        used = 0
        # Keep drawing pairs until enough distinct templates exist (or WordNet runs out).
        while len(counts) < self.num_templates and used < len(pairs):
            batch = pairs[used : used + self.num_pairs]
            used += len(batch)
            counts.update(gen.generate(batch, show=show))
            if used >= self.num_pairs * 20:
                break
        self.generated = {"pairs_used": used, "distinct": len(counts)}
        return [t for t, _ in counts.most_common(self.num_templates)]

    def propose(self, runner: Runner) -> None:
        templates = self.candidates(runner.scorer)
        runner.keep(generated=Generated(**self.generated, kept=len(templates)))
        runner.score(templates, f"{self.generator}", desc="score")
