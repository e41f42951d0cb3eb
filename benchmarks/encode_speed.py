"""Encode speed, every line measured in this one run on this machine, over STS-B dev:

1. PromptEncoder ``encode`` (tokenize once, token-budget batches, inference_mode, bf16 autocast
   where fast) against a naive loop (input order, duplicates kept, fp32, batches of 64), one
   template, with both Spearman scores;
2. per template: ``encode`` of each of 16 templates alone vs ``encode_templates`` of all 16;
3. host overhead per template: the same two with a 1-layer, 32-wide BERT built from the
   default model's tokenizer (its forward nearly free: what is left is tokenizing, batching,
   copying, the bias), and the host work alone (the forward replaced by zeros of its shape);
4. the peer: sentence-transformers ``encode`` of the same model (mean pooling), same sentences;
5. a roofline: the linear layers' FLOPs of one template (2 x tokens x linear weights; attention
   scores not counted) over the encode time, next to a plain matmul of the model's FFN shape in
   the same precision — for the model and a random BERT-base-sized ``BertForMaskedLM``.

    python benchmarks/encode_speed.py [--model default] [--device cpu|cuda] [--templates 16] [--no-bert-base]
    python benchmarks/encode_speed.py --host-only [--repeats 3]   # line 3 alone, a few seconds
    python benchmarks/encode_speed.py --precisions [--repeats 2]  # fp32 vs bf16, the model and BERT-base size
    python benchmarks/encode_speed.py --pooled [--repeats 3]      # line 6 alone

6. pooled read-outs: the model's own representation and a prompt pooled (``query: [X] @mean``) through
   sentence-transformers' stack (:mod:`promptsearch.encoding.pooled`) against ``SentenceTransformer(model).encode``
   of the same thing (its defaults: batch 32), and against promptsearch's own rendering of the prompt (the path
   pooled prompts took before they went through sentence-transformers), same precision, interleaved rounds, the
   fastest of ``--repeats`` each. The ratios are what the issue asks to stay >= 1.0x.

``--precisions`` times ``encode`` of one template (denoised, STS-B dev) in float32 and under bf16
autocast, alternating, warm, for the model and a random BERT-base-sized model, and prints which
precision the default (:func:`promptsearch.encoding.batching.precision_choice`) takes here and why.
"""

from __future__ import annotations

import argparse
import dataclasses
import time
from types import SimpleNamespace

import numpy as np
import torch
from _device import add_device_flag, bert_base_dir, device_name, resolve, scratch_dir, sync, timed

from promptsearch import PromptEncoder
from promptsearch.data import load_task
from promptsearch.eval import score_task


def naive_encode(enc: PromptEncoder, sentences, template, batch_size):
    """What a first implementation does: every sentence, in order, padded batches, fp32."""
    r = enc.rendered(template)
    dev = enc.device
    out = []
    with torch.no_grad():
        for start in range(0, len(sentences), batch_size):
            chunk = enc.prepare(sentences[start : start + batch_size])
            rows = [r.ids(ids) for ids in enc.sentence_ids(chunk, template)]
            n = max(len(ids) for ids, _ in rows)
            pad = enc.tokenizer.pad_token_id or 0
            ids = torch.tensor([x + [pad] * (n - len(x)) for x, _ in rows], device=dev)
            att = torch.tensor([[1] * len(x) + [0] * (n - len(x)) for x, _ in rows], device=dev)
            h = enc.encoder(input_ids=ids, attention_mask=att).last_hidden_state
            out.append(h[torch.arange(len(rows), device=dev), torch.tensor([p for _, p in rows], device=dev)].float().cpu().numpy())
    return np.concatenate(out)


TEMPLATES = ['This sentence : "[X]" means [MASK] .', '[X] means [MASK] .', 'This word : "[X]" is [MASK] .',
             '"[X]" is like [MASK] .', 'This sentence : "[X]" is [MASK] .', 'This phrase : "[X]" means [MASK] .',
             '[X] is like [MASK] .', 'The sentence "[X]" means [MASK] .', 'In short , "[X]" means [MASK] .',
             '"[X]" : [MASK] .', 'This text : "[X]" is about [MASK] .', '[X] , that is [MASK] .',
             'A sentence : "[X]" means [MASK] .', 'This sentence of words : "[X]" means [MASK] .',
             '"[X]" , in one word : [MASK] .', 'This : "[X]" means [MASK] .']


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="default")
    ap.add_argument("--template", default=TEMPLATES[0])
    ap.add_argument("--templates", type=int, default=16, help="templates for the many-templates lines (at most 16)")
    ap.add_argument("--max-tokens", type=int, default=None, help="padded tokens per batch (default: the device's)")
    ap.add_argument("--data-dir", default=None)
    add_device_flag(ap)
    ap.add_argument("--no-bert-base", dest="bert_base", action="store_false", help="skip the BERT-base-sized roofline")
    ap.add_argument("--no-bf16", dest="bf16", action="store_false", default=None, help="fp32 even where bf16 is fast")
    ap.add_argument("--host-only", action="store_true", help="only the host-overhead lines (line 3), --repeats times")
    ap.add_argument("--repeats", type=int, default=1, help="with --host-only / --precisions: how many times to measure")
    ap.add_argument("--precisions", action="store_true", help="only fp32 against bf16 encode times, and the default's choice")
    ap.add_argument("--pooled", action="store_true", help="only the pooled read-outs against sentence-transformers (line 6)")
    args = ap.parse_args()

    data = load_task("stsb-dev", args.data_dir)
    a, b, _ = data.subsets["dev"]
    sentences = a + b
    device = resolve(args.device)
    fast = PromptEncoder.from_pretrained(args.model, device=str(device), max_tokens=args.max_tokens, bf16=args.bf16,
                                         show_progress_bar=False)
    templates = TEMPLATES[: args.templates]
    if args.precisions:
        precision_lines(fast, sentences, data, args.template, args.model, max(args.repeats, 1), args.bert_base)
        return
    if args.pooled:
        pooled_lines(fast, sentences, args.model, max(args.repeats, 1))
        return
    if args.host_only:
        print(f"STS-B dev: {len(sentences)} sentences, on {device_name(device)}, {'bf16' if fast.bf16 else 'fp32'}, "
              f"per template of {len(templates)}, denoised:")
        tiny = one_layer_bert(fast)
        for _ in range(args.repeats):
            host_lines(tiny, sentences, templates)
        return
    slow = PromptEncoder(fast.model, bf16=False, show_progress_bar=False)
    fast.encode(sentences[:64], template=args.template)  # warm-up (thread pools, kernels)
    naive_encode(slow, sentences[:64], args.template, 64)

    times = []
    with timed(device, times):
        v_naive = naive_encode(slow, sentences, args.template, 64)
    fast.prompt.clear_cache()
    with timed(device, times):
        v_fast = fast.encode(sentences, template=args.template, denoise=True)
    t_naive, t_fast = times

    def sp(v):
        return score_task(data, lambda ss, idx={s: i for i, s in enumerate(sentences)}: v[[idx[s] for s in ss]])["spearman"]

    prec = "bf16" if fast.bf16 else "fp32"
    print(f"STS-B dev: {len(sentences)} sentences ({len(set(sentences))} distinct), template {args.template!r}, "
          f"on {device_name(device)}, {prec}, batches of {fast.max_tokens} padded tokens")
    print(f"{'':36} {'seconds':>8} {'Spearman':>9}")
    print(f"{'naive loop (fp32, in order, raw)':36} {t_naive:8.3f} {sp(v_naive):9.2f}")
    print(f"{'PromptEncoder.encode (' + prec + ', denoised)':36} {t_fast:8.3f} {sp(v_fast):9.2f}")
    print(f"speed-up: {t_naive / t_fast:.2f}x")

    print(f"\nper template, {len(templates)} templates, denoised (encode: each alone; encode_templates: all in one call):")
    many_lines(fast, sentences, templates, args.model)
    host_lines(one_layer_bert(fast), sentences, templates)

    st_seconds = st_encode(fast, sentences, args.model)
    if st_seconds is not None:
        print(f"\nsentence-transformers encode of the same model (mean pooling, batch 64): {st_seconds:.3f} s "
              f"-> PromptEncoder.encode of one template is {st_seconds / t_fast:.2f}x its speed")

    pooled_lines(fast, sentences, args.model, max(args.repeats, 1))

    print("\nroofline (linear layers of one template over STS-B dev vs a plain matmul, both measured now):")
    roofline(fast, sentences, args.template, t_fast, args.model)
    if args.bert_base:
        roofline(bert_base(fast), sentences, args.template, None, "BERT-base size (random BertConfig())")


def many_lines(enc: PromptEncoder, sentences, templates, label) -> tuple[float, float, float, float]:
    """Seconds per template: each template's ``encode`` alone, then ``encode_templates`` of all (bias
    caches emptied first, so both pay for the template biases). Returns (seconds inside the model's
    forward calls, alone and many; the totals, alone and many), per template: wall time between
    the encoder module's pre- and post-forward hooks (on CUDA the host's launch time, no sync)."""
    enc.encode(sentences[:64], template=templates[0])
    enc.prompt.clear_cache()  # both start from untokenized sentences and no template bias
    times, inside = [], [0.0]
    start = []
    hooks = [enc.prompt.encoder.register_forward_pre_hook(lambda *_: start.append(time.perf_counter())),
             enc.prompt.encoder.register_forward_hook(lambda *_: inside.__setitem__(0, inside[0] + time.perf_counter() - start.pop()))]
    try:
        with timed(enc.device, times):
            for t in templates:
                enc.encode(sentences, template=t, denoise=True)
        forward = [inside[0]]
        enc.prompt.clear_cache()
        with timed(enc.device, times):
            enc.encode_templates(sentences, templates, denoise=True)
        forward.append(inside[0] - forward[0])
    finally:
        for h in hooks:
            h.remove()
    alone, many = (x / len(templates) for x in times)
    print(f"  {label:44} encode {1000 * alone:8.1f} ms   encode_templates {1000 * many:8.1f} ms   ({alone / many:.2f}x)")
    return forward[0] / len(templates), forward[1] / len(templates), alone, many


def host_lines(tiny: PromptEncoder, sentences, templates) -> None:
    """The host-overhead line; under it, how much of it the model's forward calls take; then the
    host work alone, timed with the forward replaced by zeros (no forward time to subtract, so
    no noise from it)."""
    inside = many_lines(tiny, sentences, templates, "host overhead (1-layer 32-wide BERT)")
    print(f"  {'  of which inside the model forward calls':44} encode {1000 * inside[0]:8.1f} ms   encode_templates "
          f"{1000 * inside[1]:8.1f} ms   (the host work proper is the rest: {1000 * (inside[2] - inside[0]):.1f} / "
          f"{1000 * (inside[3] - inside[1]):.1f} ms)")
    many_lines(stubbed(tiny), sentences, templates, "host work alone (forward: zeros of its shape)")


class _ZeroForward(torch.nn.Module):
    """A stand-in encoder whose forward returns zeros of the real one's output shape."""

    def __init__(self, real: torch.nn.Module):
        super().__init__()
        self.real, self.config = real, real.config

    def get_input_embeddings(self):
        return self.real.get_input_embeddings()

    def forward(self, input_ids=None, inputs_embeds=None, output_hidden_states=False, **_):
        shape = input_ids.shape if input_ids is not None else inputs_embeds.shape[:2]
        h = torch.zeros(*shape, self.config.hidden_size, device=self.real.device)
        return SimpleNamespace(last_hidden_state=h, hidden_states=(h,) * (self.config.num_hidden_layers + 1))


def stubbed(enc: PromptEncoder) -> PromptEncoder:
    """The encoder with its forward replaced by :class:`_ZeroForward`: what it takes is host work."""
    return PromptEncoder(dataclasses.replace(enc.model, encoder=_ZeroForward(enc.model.encoder)), max_tokens=enc.max_tokens,
                         bf16=enc.bf16, show_progress_bar=False)


def one_layer_bert(like: PromptEncoder) -> PromptEncoder:
    """A random 1-layer, 32-wide BertForMaskedLM with the model's tokenizer: its forward is nearly free."""
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    d = scratch_dir("bert-1x32-")
    BertForMaskedLM(BertConfig(vocab_size=len(like.tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
                               intermediate_size=37)).save_pretrained(d)
    like.tokenizer.save_pretrained(d)
    return PromptEncoder.from_pretrained(d, device=str(like.device), max_tokens=like.max_tokens, bf16=like.bf16,
                                         show_progress_bar=False)


def st_encode(like: PromptEncoder, sentences, model: str) -> float | None:
    """Seconds of sentence-transformers' plain ``encode`` (mean pooling) of the model over the sentences."""
    from sentence_transformers import SentenceTransformer

    try:  # sentence-transformers 6 moved the modules; 3-5 have them here
        from sentence_transformers.sentence_transformer import modules as models
    except ImportError:  # pragma: no cover
        from sentence_transformers import models

    from promptsearch.model.loading import resolve_model_path

    try:
        tr = models.Transformer(resolve_model_path(model), max_seq_length=like.max_length)
    except OSError:  # pragma: no cover - an id the hub would resolve
        return None
    dim = (getattr(tr, "get_embedding_dimension", None) or tr.get_word_embedding_dimension)()
    st = SentenceTransformer(modules=[tr, models.Pooling(dim, "mean")], device=str(like.device))
    if like.bf16:
        st = st.to(torch.bfloat16)
    st.encode(sentences[:64], batch_size=64)
    times = []
    with timed(like.device, times):
        st.encode(sentences, batch_size=64)
    return times[0]


def pooled_lines(enc: PromptEncoder, sentences, model: str, repeats: int) -> None:
    """Line 6: pooled read-outs through sentence-transformers' stack, against sentence-transformers' own encode and
    against promptsearch's own rendering of the same prompt; rounds interleaved, the fastest of ``repeats`` each."""
    import logging
    import warnings

    from sentence_transformers import SentenceTransformer

    from promptsearch.encoding.reps import PromptPool
    from promptsearch.model.loading import resolve_model_path

    logging.getLogger("sentence_transformers").setLevel(logging.ERROR)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        st = SentenceTransformer(resolve_model_path(model), device=str(enc.device))
    if enc.bf16:
        st = st.to(torch.bfloat16)
    own, prompt = enc.own_rep(), PromptPool("query: [X]", "mean")
    st_own, ps_own, st_p, ps_p, rendered = ("sentence-transformers encode (own)", "PromptEncoder.encode (own)",
                                            "sentence-transformers encode (query: )", "PromptEncoder.encode (query: [X] @mean)",
                                            "promptsearch's own rendering (query: [X])")
    ways = {st_own: lambda: st.encode(sentences), ps_own: lambda: enc.encode(sentences, rep=own),
            st_p: lambda: st.encode(sentences, prompt="query: "), ps_p: lambda: enc.encode(sentences, rep=prompt),
            rendered: lambda: (enc.prompt.clear_cache(), enc.template_pooled(sentences, ["query: [X]"]))}
    for f in ways.values():  # warm-up: thread pools, kernels, the stack loaded
        f()
    times = {k: [] for k in ways}
    for _ in range(repeats):
        for k, f in ways.items():
            with timed(enc.device, times[k]):
                f()
    best = {k: min(v) for k, v in times.items()}
    print(f"\npooled read-outs over STS-B dev ({len(sentences)} sentences), {'bf16' if enc.bf16 else 'fp32'}, fastest of "
          f"{repeats}: {enc.model.stack().describe()}")
    for k, v in best.items():
        print(f"  {k:44} {v:8.3f} s")
    print(f"  the model's own: {best[st_own] / best[ps_own]:.2f}x sentence-transformers' speed; a prompt: "
          f"{best[st_p] / best[ps_p]:.2f}x its speed, {best[rendered] / best[ps_p]:.2f}x promptsearch's own rendering's")


def linear_flops(enc: PromptEncoder, sentences, template) -> tuple[int, float]:
    """(tokens fed, FLOPs of the linear layers) for encoding the distinct sentences once."""
    rows = enc.prompt.input_rows(list(dict.fromkeys(enc.prepare(sentences))), template)
    tokens = int(rows.lengths.sum())
    per_token = 0
    for m in enc.encoder.modules():
        if isinstance(m, torch.nn.Linear):
            per_token += 2 * m.in_features * m.out_features
    return tokens, tokens * per_token


def matmul_gflops(enc: PromptEncoder, m: int = 1600) -> float:
    """GFLOP/s of a plain (m x hidden) @ (hidden x intermediate) product, in the encoder's precision."""
    cfg = enc.model.config
    h, i = cfg.hidden_size, getattr(cfg, "intermediate_size", 4 * cfg.hidden_size)
    x, w = torch.randn(m, h, device=enc.device), torch.randn(h, i, device=enc.device)
    with torch.inference_mode(), enc.autocast():
        for _ in range(3):
            x @ w
        sync(enc.device)
        n, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < 2.0:
            for _ in range(10):
                x @ w
            sync(enc.device)
            n += 10
    return 2 * m * h * i * n / (time.perf_counter() - t0) / 1e9


def roofline(enc: PromptEncoder, sentences, template, seconds, label) -> None:
    if seconds is None:
        enc.encode(sentences[:64], template=template)  # warm-up
        times = []
        with timed(enc.device, times):
            enc.encode(sentences, template=template)
        seconds = times[0]
    tokens, flops = linear_flops(enc, sentences, template)
    reached, plain = flops / seconds / 1e9, matmul_gflops(enc)
    prec = "bf16" if enc.bf16 else "fp32"
    print(f"  {label}: {tokens:,} tokens, {flops / 1e12:.2f} TFLOP of linear layers in {seconds:.2f} s = "
          f"{reached:.0f} GFLOP/s ({prec}); a plain {prec} matmul: {plain:.0f} GFLOP/s -> {100 * reached / plain:.0f}% "
          f"of it; {len(set(sentences)) / seconds:.0f} sentences/s")


def precision_lines(enc: PromptEncoder, sentences, data, template, label, repeats, with_bert_base) -> None:
    """encode in fp32 and in bf16 autocast, alternating (warm), for the model and BERT-base size."""
    from promptsearch.encoding.batching import precision_choice
    from promptsearch.encoding.precision import cpu_flags

    bf16, why = precision_choice(enc.device)
    flags = sorted(f for f in cpu_flags() if f.startswith(("amx", "avx512_bf16", "avx512f", "avx2")))
    print(f"STS-B dev: {len(sentences)} sentences, template {template!r}, denoised, on {device_name(enc.device)}"
          + (f" (flags: {' '.join(flags)})" if enc.device.type == "cpu" else ""))
    print(f"the default here: {why}")
    models = [(label, enc)] + ([("BERT-base size (random BertConfig())", bert_base(enc))] if with_bert_base else [])
    for name, m in models:
        variants = {"fp32": PromptEncoder(m.model, bf16=False, max_tokens=m.max_tokens, show_progress_bar=False),
                    "bf16": PromptEncoder(m.model, bf16=True, max_tokens=m.max_tokens, show_progress_bar=False)}
        times: dict[str, list[float]] = {"fp32": [], "bf16": []}
        sp = {}
        for e in variants.values():
            e.encode(sentences[:64], template=template, denoise=True)  # warm-up
        for _ in range(repeats):
            for prec, e in variants.items():
                e.prompt.clear_cache()
                t = []
                with timed(e.device, t):
                    v = e.encode(sentences, template=template, denoise=True)
                times[prec].append(t[0])
                idx = {s: i for i, s in enumerate(sentences)}
                sp[prec] = score_task(data, lambda ss: v[[idx[s] for s in ss]])["spearman"]
        best = {p: min(ts) for p, ts in times.items()}
        chosen = "bf16" if bf16 else "fp32"
        faster = min(best, key=best.get)
        print(f"  {name}: fp32 {' '.join(f'{t:.2f}' for t in times['fp32'])} s (Spearman {sp['fp32']:.2f}); "
              f"bf16 {' '.join(f'{t:.2f}' for t in times['bf16'])} s (Spearman {sp['bf16']:.2f}); "
              f"bf16/fp32 = {best['bf16'] / best['fp32']:.2f}x the time; the default ({chosen}) is "
              f"{best[chosen] / best[faster]:.2f}x the faster one's ({faster}) time")


def bert_base(like: PromptEncoder) -> PromptEncoder:
    """A randomly initialised BertForMaskedLM with BertConfig() defaults (12 x 768), the default
    model's (bert-base-uncased) tokenizer, the same encoder settings."""
    return PromptEncoder.from_pretrained(bert_base_dir(like.tokenizer), device=str(like.device),
                                         max_tokens=like.max_tokens, bf16=like.bf16, show_progress_bar=False)


if __name__ == "__main__":
    main()
