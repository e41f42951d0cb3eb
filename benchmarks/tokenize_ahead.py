"""Tokenizing ahead: what several pooled prompts cost when the next prompts are tokenized in worker threads while the
previous one's batches run, against tokenizing each in turn, measured in one run.

A retrieval search encodes its queries under many query prompts in one call (``st_pooled``). Each prompt's texts
go through the tokenizer (sentence-transformers' ``preprocess`` for a probe, the fast tokenizer's backend for the
bulk), then through the model. On a GPU the model's part is short and the host's tokenizing is a large share of a
prompt's time; with ``ahead`` k (the default when the model is not on the CPU: ``TOKENIZE_AHEAD``) k worker
threads tokenize prompts i + 1 ... i + k while prompt i's forward passes run, several workers each on a clone of
the tokenizer's backend. Every way gives the very same vectors (checked here, bit for bit).

The benchmark times ``--prompts`` query prompts (the shipped retrieval library's, ``{task}`` filled) over
``--queries`` of the demo task's queries, in turn and with each number of prompts ahead in ``--ahead``,
``--repeats`` times, and prints the fastest of each and its ratio to in turn. ``--corpus`` times one document
prompt over the demo's corpus (2,647 sentences) instead: there nothing is ahead, and each k of ``--ahead`` is a
number of threads that share the prompt's texts (``threads``; the default off the CPU is ``TOKENIZE_THREADS``).
``--model tiny`` is a random 2-layer, 32-wide BERT with the default model's tokenizer: its forward is nearly free,
so the host's work dominates, as for a small model on a GPU. The tokenizer runs one thread a call, as the command
runs it (``TOKENIZERS_PARALLELISM=false``, unless set otherwise); on a CPU it shares the cores with torch's threads,
and ``--split-cores`` gives torch one intra-op thread too, which is how a GPU host runs them: the model's host
thread on one core, the tokenizers on others. The ways alternate their order from one repeat to the next.

A further way is timed beside them, as an experiment the library does not take: every prompt's rows in shared
batches (``together``), so 16 prompts of 64 short queries are one forward pass instead of 16. Its vectors are not
the same bits as a prompt's own batches give (each row's padding and batch differ), so the benchmark prints how far
they are from them; it runs only where the model's Pooling ignores the prompt's length (``include_prompt``), and
not with ``--corpus``.

    python benchmarks/tokenize_ahead.py [--model default|tiny|PATH] [--device cpu|cuda] [--queries 64]
                                        [--prompts 16] [--repeats 5] [--ahead 1,2,4] [--corpus] [--split-cores]
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
    ap.add_argument("--ahead", default="1,2,4", help="the numbers of prompts tokenized ahead to time, each in a "
                                                     "worker thread; with --corpus, the numbers of threads that "
                                                     "share the texts (default 1,2,4)")
    ap.add_argument("--corpus", action="store_true",
                    help="time one prompt over the demo's corpus (2,647 sentences) instead: with k ahead, its texts "
                         "are shared among k threads")
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
    prompts = [p for p, _ in library_prompts("query", data.description)][: args.prompts]
    if args.corpus:  # one prompt over many texts
        queries = list(data.corpus.values())
        prompts = [p for p, _ in library_prompts("document", data.description) if p][:1]  # "passage: "
    elif len(prompts) < 2:
        sys.exit("tokenize_ahead.py: give --prompts 2 or more (one prompt has nothing to tokenize ahead)")
    want = {p: ["mean"] for p in prompts}
    ways = [0, *dict.fromkeys(int(a) for a in args.ahead.split(",") if int(a) > int(args.corpus))]  # 1 thread: in turn

    def run(k: int) -> dict:  # k prompts ahead; with --corpus, the one prompt's texts shared among k threads
        return st_pooled(enc, queries, want, ahead=0, threads=max(k, 1)) if args.corpus else \
            st_pooled(enc, queries, want, ahead=k, threads=1)

    first = {k: run(k) for k in ways}  # warm-up, and the check
    same = all(np.array_equal(first[0][p]["mean"], first[a][p]["mean"]) for a in ways for p in prompts)
    times: dict[int, list[float]] = {a: [] for a in ways}
    for i in range(args.repeats):
        for ahead in (ways if i % 2 == 0 else ways[::-1]):
            sync(device)
            t0 = time.perf_counter()
            run(ahead)
            sync(device)
            times[ahead].append(time.perf_counter() - t0)
    seq = min(times[0])
    tog = None
    if not args.corpus and getattr(enc.model.stack().pooling_for("mean"), "include_prompt", True):
        got = together(enc, queries, prompts)
        diff = max(float(np.abs(got[p] - first[0][p]["mean"]).max()) for p in prompts)
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
    what = f"1 document prompt x {len(queries)} documents" if args.corpus else \
        f"{len(prompts)} query prompts x {len(queries)} queries"
    print(f"{what}, model {args.model} ({enc.precision}), on "
          f"{device_name(device)} "
          f"({cores}), fastest of {args.repeats}:")
    print(f"  tokenized in turn:     {seq * 1000:8.1f} ms")
    for a in ways[1:]:
        ahd = min(times[a])
        how = f"shared among {a} threads" if args.corpus else f"tokenized {a} ahead"
        print(f"  {how}: {ahd * 1000:8.1f} ms; in turn / {a} = {seq / ahd:.2f}x")
    print(f"  the vectors {'are identical' if same else 'DIFFER'} every way")
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
