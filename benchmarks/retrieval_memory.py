"""Peak memory of retrieval metrics over a large corpus: ``retrieval_metrics`` reading a float16 ``CorpusStore`` in
chunks, the same file as an ``np.memmap`` in chunks, and the full-matrix approach (the corpus as float32 in memory,
one (queries x corpus) score matrix: the same function with one chunk the size of the corpus).

    python benchmarks/retrieval_memory.py [--corpus 200000 --queries 500 --dim 384 --chunk-size 20000]

Each variant runs in a fresh process; its cost is the peak resident memory (VmHWM, reset just before) above the
resident memory before it loads the corpus (queries, ids and qrels already loaded). The estimate of the CorpusStore
run's peak (``promptsearch/eval/ir_metrics.py`` says where each term comes from), in bytes:

    chunk_size x (4 x n_queries + 6 x dim)    a chunk's float32 rows and scores, and the float16 rows read
  + n_queries x max_k x 110                  the running top-k and its merge with a chunk's
  + n_corpus x 60                            the corpus ids' order
  + about 15 MB                              torch's first use of these operations in a process

and for ``retrieval_metrics_many`` over 16 query matrices (16 query prompts in one pass: the "many" variant), 15 x
n_queries x (12 x max_k + 4 x dim) more: each further matrix's copy and its running top-k.

A memmap's pages count as resident once touched (the kernel may drop them, as they are the file's), so its peak grows
with the corpus; the store reads each chunk into one buffer of its own, so only a chunk is resident.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

VARIANTS = {"store": "CorpusStore (float16), chunked", "memmap": "np.memmap (float16), chunked",
            "full": "full matrix (float32 corpus)", "many": "CorpusStore, 16 query matrices"}
MATRICES = 16  # the "many" variant: retrieval_metrics_many over this many query matrices (16 query prompts), one pass


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith(field + ":"))


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:  # Linux: "5" resets VmHWM to the current RSS
        f.write("5")


def worker(variant: str, folder: Path, chunk_size: int) -> None:
    # here, not at the top: the worker's imports are made before its baseline, so torch's own memory is not counted
    import torch  # noqa: F401

    from promptsearch.eval.ir_metrics import CorpusStore, retrieval_metrics, retrieval_metrics_many

    queries = np.load(folder / "queries.npy")
    rng = np.random.default_rng(2)  # the further query prompts' matrices: the queries moved a little, each its own
    further = [queries + 0.3 * rng.standard_normal(queries.shape, dtype=np.float32) for _ in range(MATRICES - 1)]
    meta = json.loads((folder / "meta.json").read_text())
    relevant = {q: set(d) for q, d in meta["relevant"].items()}
    query_ids = list(meta["relevant"])
    corpus_ids = [f"doc{j}" for j in range(meta["corpus"])]
    before = _status_kb("VmRSS")
    _reset_peak()
    t0 = time.perf_counter()
    corpus: object
    if variant in ("store", "many"):
        corpus = CorpusStore.open(folder / "corpus.npy")
    elif variant == "memmap":
        corpus = np.load(folder / "corpus.npy", mmap_mode="r")
    else:
        corpus = np.load(folder / "corpus.npy").astype(np.float32)
        chunk_size = len(corpus)
    if variant == "many":
        got = retrieval_metrics_many([queries, *further], corpus, query_ids, corpus_ids, relevant,
                                     chunk_size=chunk_size)[0]
        del got["per_query"]
    else:
        got = retrieval_metrics(queries, corpus, query_ids, corpus_ids, relevant, chunk_size=chunk_size)
    seconds = time.perf_counter() - t0
    peak = _status_kb("VmHWM")
    print(json.dumps({"variant": variant, "extra_mb": (peak - before) / 1024, "seconds": seconds,
                      "chunk_size": chunk_size, "metrics": got}))


def write_task(folder: Path, n_corpus: int, n_queries: int, dim: int, chunk_size: int) -> None:
    """A Gaussian corpus written chunk by chunk to a CorpusStore; each query leans towards 1-3 of its documents."""
    from promptsearch.eval.ir_metrics import CorpusStore  # lazy: start-up time (--help, and the workers' own import)

    rng = np.random.default_rng(0)
    picks = [rng.choice(n_corpus, size=int(rng.integers(1, 4)), replace=False) for _ in range(n_queries)]
    wanted = {int(j) for p in picks for j in p}
    rows: dict[int, np.ndarray] = {}
    with CorpusStore(folder / "corpus.npy", n_corpus, dim) as store:
        for start in range(0, n_corpus, chunk_size):
            part = np.random.default_rng([1, start]).standard_normal((min(chunk_size, n_corpus - start), dim),
                                                                    dtype=np.float32)
            rows.update({j: part[j - start] for j in wanted if start <= j < start + len(part)})
            store.append(part)
    # noise 3x a document's length: the relevant documents are found, but not always first (metrics mid-range)
    queries = np.stack([np.mean([rows[int(j)] for j in p], 0) + 3 * rng.standard_normal(dim) for p in picks])
    np.save(folder / "queries.npy", queries.astype(np.float32))
    relevant = {f"q{i}": [f"doc{int(j)}" for j in p] for i, p in enumerate(picks)}
    (folder / "meta.json").write_text(json.dumps({"corpus": n_corpus, "relevant": relevant}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=int, default=200_000)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--chunk-size", type=int, default=20_000)
    ap.add_argument("--worker", nargs=2, metavar=("VARIANT", "FOLDER"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], Path(args.worker[1]), args.chunk_size)
        return
    n, nq, dim, chunk = args.corpus, args.queries, args.dim, args.chunk_size
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_task(folder, n, nq, dim, chunk)
        size = (folder / "corpus.npy").stat().st_size
        print(f"corpus {n:,} x {dim} (float16 file {size / 2**20:.0f} MiB), {nq:,} queries, chunks of {chunk:,} rows; "
              f"cpu, {os.cpu_count()} cores")
        for variant in VARIANTS:
            out = subprocess.run([sys.executable, __file__, "--worker", variant, str(folder), "--chunk-size",
                                  str(chunk)], capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(out.stderr)
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    max_k = 100  # the default cut-offs' largest (map@100)
    estimate = chunk * (4 * nq + 6 * dim) + 110 * nq * max_k + 60 * n + 15 * 2**20
    further = (MATRICES - 1) * nq * (12 * max_k + 4 * dim)  # each further matrix: its copy and its running top-k
    print(f"{'variant':<32} {'extra peak RSS':>15} {'seconds':>8} {'ndcg@10':>9}")
    for r in rows:
        print(f"{VARIANTS[r['variant']]:<32} {r['extra_mb']:>12.1f} MB {r['seconds']:>8.2f} "
              f"{r['metrics']['ndcg@10']:>9.5f}")
    by = {r["variant"]: r for r in rows}
    print(f"estimate for the CorpusStore run: {estimate / 2**20:.1f} MB (chunk x (4 x queries + 6 x dim) + 110 x "
          f"queries x max_k + 60 x corpus + 15 MB); measured {by['store']['extra_mb'] / (estimate / 2**20):.2f}x it")
    many_mb = (estimate + further) / 2**20
    print(f"{MATRICES} query matrices in one pass (retrieval_metrics_many): estimate {many_mb:.1f} MB (+ "
          f"{MATRICES - 1} x queries x (12 x max_k + 4 x dim)); measured {by['many']['extra_mb'] / many_mb:.2f}x it, "
          f"{by['many']['seconds'] / by['store']['seconds']:.1f}x one matrix's time; the first matrix's metrics equal "
          f"one's alone: {'yes' if by['many']['metrics'] == by['store']['metrics'] else 'NO'}")
    print(f"full matrix / CorpusStore: {by['full']['extra_mb'] / by['store']['extra_mb']:.1f}x the memory, "
          f"{by['full']['seconds'] / by['store']['seconds']:.2f}x the time; np.memmap / CorpusStore: "
          f"{by['memmap']['extra_mb'] / by['store']['extra_mb']:.1f}x the memory")
    same = by["store"]["metrics"] == by["memmap"]["metrics"]
    print(f"store and memmap give the same metrics: {'yes' if same else 'NO'}; the full matrix's ndcg@10 differs by "
          f"{abs(by['full']['metrics']['ndcg@10'] - by['store']['metrics']['ndcg@10']):.1e} (other chunk shapes: "
          "float32 rounding of the scores may reorder near-ties)")


if __name__ == "__main__":
    main()
