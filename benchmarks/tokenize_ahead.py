"""Tokenizing ahead: what several pooled prompts cost when the next prompt is tokenized in a worker thread while the
previous one's batches run, against tokenizing each in turn, measured in one run.

A retrieval search encodes its queries under many query prompts in one call (``st_pooled``). Each prompt's texts
go through the tokenizer (sentence-transformers' ``preprocess`` for a probe, the fast tokenizer's backend for the
bulk), then through the model. On a GPU the model's part is short and the host's tokenizing is a large share of a
prompt's time; with ``ahead`` (the default when the model is not on the CPU) the tokenizing of prompt i + 1 runs
while prompt i's forward passes do. Both ways give the very same vectors (checked here, bit for bit).

The benchmark times ``--prompts`` query prompts (the shipped retrieval library's, ``{task}`` filled) over
``--queries`` of the demo task's queries, both ways in turn, ``--repeats`` times, and prints the fastest of each and
their ratio. ``--model tiny`` is a random 2-layer, 32-wide BERT with the default model's tokenizer: its forward is
nearly free, so the host's work dominates, as for a small model on a GPU. The tokenizer runs one thread, as the
command runs it (``TOKENIZERS_PARALLELISM=false``, unless set otherwise); on a CPU it shares the cores with torch's
threads, and ``--split-cores`` gives torch one intra-op thread too, which is how a GPU host runs them: the model's
host thread on one core, the tokenizer on another. The two ways alternate which goes first from one repeat to the
next.

A third way is timed beside them, as an experiment the library does not take: every prompt's rows in shared batches
(``together``), so 16 prompts of 64 short queries are one forward pass instead of 16. Its vectors are not the same
bits as a prompt's own batches give (each row's padding and batch differ), so the benchmark prints how far they are
from them; it runs only where the model's Pooling ignores the prompt's length (``include_prompt``).

    python benchmarks/tokenize_ahead.py [--model default|tiny|PATH] [--device cpu|cuda] [--queries 64]
                                        [--prompts 16] [--repeats 5] [--split-cores]
"""

from __future__ import annotations

import argparse
import os
import sys
import time


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="default", help="default, tiny (2-layer 32-wide BERT) or a model id / folder")
    ap.add_argument("--queries", type=int, default=64)
    ap.add_argument("--prompts", type=int, default=16)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--split-cores", action="store_true",
                    help="one thread for torch and one for the tokenizer (as on a GPU host)")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--device", default=None, help="cpu, cuda, cuda:N (default: cuda if available, else cpu)")
    args = ap.parse_args()
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # as the command sets it: the tokenizer on one thread
    if args.split_cores:
        os.environ["RAYON_RS_NUM_CPUS"] = "1"  # the tokenizer's Rust thread pool, in case parallelism is asked for
    import numpy as np
    import torch

    from _device import device_name, resolve, scratch_dir, sync
    from promptsearch import PromptEncoder
    from promptsearch.data.retrieval import demo_task
    from promptsearch.encoding.pooled import st_pooled
    from promptsearch.eval.retrieval import sample_queries
    from promptsearch.search.retrieval import library_prompts

    if args.split_cores:
        torch.set_num_threads(1)
    device = resolve(args.device)
    model = tiny_model(scratch_dir("tiny-ahead-")) if args.model == "tiny" else args.model
    enc = PromptEncoder.from_pretrained(model, device=str(device), show_progress_bar=False)
    data = sample_queries(demo_task(args.data_dir), args.queries, seed=0)
    queries = list(data.queries.values())
    prompts = [p for _, p in library_prompts("query", data.name)][: args.prompts]
    if len(prompts) < 2:
        sys.exit("tokenize_ahead.py: give --prompts 2 or more (one prompt has nothing to tokenize ahead)")
    want = {p: ["mean"] for p in prompts}
    first = {ahead: st_pooled(enc, queries, want, ahead=ahead) for ahead in (False, True)}  # warm-up, and the check
    same = all(np.array_equal(first[False][p]["mean"], first[True][p]["mean"]) for p in prompts)
    times: dict[bool, list[float]] = {False: [], True: []}
    for i in range(args.repeats):
        for ahead in ((False, True) if i % 2 == 0 else (True, False)):
            sync(device)
            t0 = time.perf_counter()
            st_pooled(enc, queries, want, ahead=ahead)
            sync(device)
            times[ahead].append(time.perf_counter() - t0)
    seq, ahd = min(times[False]), min(times[True])
    tog = None
    if getattr(enc.model.stack().pooling_for("mean"), "include_prompt", True):
        got = together(enc, queries, prompts)
        diff = max(float(np.abs(got[p] - first[False][p]["mean"]).max()) for p in prompts)
        tt = []
        for _ in range(args.repeats):
            sync(device)
            t0 = time.perf_counter()
            together(enc, queries, prompts)
            sync(device)
            tt.append(time.perf_counter() - t0)
        tog = min(tt)
    one = args.split_cores or os.environ["TOKENIZERS_PARALLELISM"].lower() in ("false", "0", "")
    cores = (f"torch {torch.get_num_threads()} thread{'s' if torch.get_num_threads() > 1 else ''}, tokenizer "
             + ("1 thread" if one else "its own thread pool"))
    print(f"{len(prompts)} query prompts x {len(queries)} queries, model {args.model} ({enc.precision}), on "
          f"{device_name(device)} "
          f"({cores}), fastest of {args.repeats}:")
    print(f"  tokenized in turn:     {seq * 1000:8.1f} ms")
    print(f"  tokenized one ahead:   {ahd * 1000:8.1f} ms")
    print(f"  in turn / ahead = {seq / ahd:.2f}x; the vectors {'are identical' if same else 'DIFFER'}")
    if tog is not None:
        print(f"  all prompts in shared batches (together): {tog * 1000:8.1f} ms; in turn / together = {seq / tog:.2f}x;"
              f" largest difference from the prompts' own batches {diff:.2e}")
    if not same:
        sys.exit(1)


def together(enc, queries: list[str], prompts: list[str]) -> dict:
    """{prompt: (n, dim)} mean-pooled, every prompt's rows (tokenized in turn) in shared token-budget batches: one
    ``_forward_rows`` over all of them."""
    import torch

    from promptsearch.encoding.batching import unique
    from promptsearch.encoding.pooled import _forward_rows, _rows

    stack = enc.model.stack()
    uniq, inverse = unique(list(queries))
    max_length = enc.pooled_max_length if enc.options.max_length else None
    rows: dict[str, list] = {}
    rest: dict = {}
    for p in prompts:
        r, rest = _rows(stack, uniq, p, max_length)
        for name, v in r.items():
            rows.setdefault(name, []).extend(v)
    rest = {k: v for k, v in rest.items() if k != "prompt_length"}  # the Pooling includes the prompt: unused
    tok = stack.transformer.tokenizer
    pad = getattr(tok, "padding_side", "right"), tok.pad_token_id if tok.pad_token_id is not None else 0
    pool = stack.pooling_for("mean").to(enc.device)
    v = _forward_rows(enc, stack, rows, rest, {"mean": pool}, None, None, pad)["mean"]
    n = len(uniq)
    with torch.no_grad():
        full = v.cpu().numpy()
    return {p: full[i * n:(i + 1) * n][inverse] for i, p in enumerate(prompts)}


def tiny_model(d: str) -> str:
    """A random 2-layer, 32-wide BERT with the default model's tokenizer (a plain Hugging Face folder: mean pooling,
    as sentence-transformers reads one): a model whose forward is nearly free."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from promptsearch.model.loading import resolve_model_path

    torch.manual_seed(0)
    tok = AutoTokenizer.from_pretrained(resolve_model_path("default"))
    BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64)).save_pretrained(d)
    tok.save_pretrained(d)
    return d


if __name__ == "__main__":
    main()
