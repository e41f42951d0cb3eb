"""retrieval: the best query prompt x document prompt x read-out on retrieval data, into one results file."""

from __future__ import annotations

import shlex
from typing import cast

from ..data.retrieval import RetrievalFormat, load_retrieval
from ..eval.retrieval import FLOAT16_ABOVE_GIB, RetrievalTask, sample_queries
from ..fileio import check_writable
from ..search.retrieval import (
    GreedyRetrieval,
    RetrievalResults,
    RetrievalSearch,
    check_pooled,
    resumed_precision,
    summary,
)
from ..search.retrieval_optuna import OptunaRetrieval, default_storage
from ..search.study import check_storage
from . import options as o


def next_steps(res: RetrievalResults) -> str:
    """What to do with the results file next."""
    out = shlex.quote(str(res.path)) if res.path is not None else "RESULTS"
    return ("next:\n"
            f"  promptsearch export {out} --out my-model     # a sentence-transformers folder with these prompts\n"
            "  python -c \"from sentence_transformers import SentenceTransformer; m = SentenceTransformer('my-model'); "
            "print(m.similarity(m.encode_query(['a question']), m.encode_document(['a passage'])))\"")


def cmd_retrieval(args) -> int:
    check_writable(args.out, example="retrieval.json")
    if args.strategy == "optuna":  # a storage that cannot be used is refused before anything loads
        check_storage(args.storage or default_storage(args.out))
    # --columns/--subset-column given: the pair format, which load_retrieval refuses in one line
    fmt = (cast(RetrievalFormat, o.fmt(args)) if args.columns or args.subset_column
           else RetrievalFormat.parse(args.relevant_from))
    whole = load_retrieval(args.data, data_dir=args.data_dir, split=args.split, fmt=fmt, description=args.description)
    data = sample_queries(whole, args.queries, args.seed)
    sampled = len(data.queries) < len(whole.queries)
    readouts = check_pooled([r.strip() for r in args.readouts.split(",") if r.strip()]) if args.readouts else None
    bf16, pinned = resumed_precision(args.out, args.bf16)  # a resumed results file keeps its precision
    enc = o.encoder(args, settings={"bf16": bf16}, pinned=pinned)
    cache = False if args.no_cache else args.cache_dir
    task = RetrievalTask(data, cache_dir=cache, show_progress_bar=o.show(args),
                         float16_above_gib=FLOAT16_ABOVE_GIB if args.float16_above_gib is None
                         else args.float16_above_gib)
    # a sample's answer is checked against the model's own on all the queries
    confirm = RetrievalTask(whole, cache_dir=cache, show_progress_bar=o.show(args),
                            float16_above_gib=task.float16_above_gib) if sampled else None
    try:
        results = RetrievalResults.for_task(args.out, args.model, task, enc)
        strategy = (OptunaRetrieval.beside(args.out, args.model, task.record(), storage=args.storage,
                                           study_name=args.study_name, trials=args.trials, seed=args.seed,
                                           batch=args.batch_trials, library=args.prompts, readouts=readouts)
                    if args.strategy == "optuna" else None)
        search = RetrievalSearch(task, enc, results, strategy or GreedyRetrieval(readouts, args.prompts),
                                 min_gain=args.min_gain or "auto", progress=None if args.quiet else o.say,
                                 confirm=confirm)
        if not args.quiet:
            o.say(f"data: {data.name}, {len(task.query_ids)} queries, {len(task.corpus_ids)} documents")
        res = search.run()
    finally:
        task.close()
        if confirm is not None:
            confirm.close()
    absorbed = strategy.absorbed if strategy is not None else 0
    print(f"corpus encodings: {task.corpus_encodings} computed in {task.corpus_passes} passes over the corpus, "
          f"{task.corpus_reused} read back from the cache; "
          f"{search.scored_now} candidates scored now"
          + (f", {absorbed} read from the study's trials of other runs" if strategy is not None else "")
          + f", {len(res.entries) - search.scored_now - absorbed} resumed from {res.path}")
    print("\n".join(summary(res)))
    if sampled:  # the search's scores are the sample's; its answer was checked on all (said in the summary)
        print(f"searched on {len(data.queries):,} of {len(whole.queries):,} queries (--queries); the answer was "
              "weighed against the model's own on all of them")
    print(next_steps(res))
    return 0
