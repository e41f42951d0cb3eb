"""retrieval: the best query prompt x document prompt x read-out on retrieval data, into one results file."""

from __future__ import annotations

import shlex
from typing import cast

from ..data.retrieval import RetrievalFormat, load_retrieval
from ..eval.retrieval import FLOAT16_ABOVE_GIB, RetrievalTask, hold_out, sample_queries, unseen
from ..fileio import check_writable
from ..search.distributed import WorkQueue
from ..search.retrieval import (
    GreedyRetrieval,
    RetrievalResults,
    RetrievalSearch,
    RetrievalWork,
    check_pooled,
    resumed_precision,
    summary,
)
from ..search.retrieval_generate import generate_instructions, prompts_of
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
    queue = None
    if args.strategy == "optuna" or args.storage:  # a storage that cannot be used is refused before anything loads
        check_storage(args.storage or default_storage(args.out))
    # --columns/--subset-column given: the pair format, which load_retrieval refuses in one line
    fmt = (cast(RetrievalFormat, o.fmt(args)) if args.columns or args.subset_column
           else RetrievalFormat.parse(args.relevant_from))
    whole = load_retrieval(args.data, data_dir=args.data_dir, split=args.split, fmt=fmt, description=args.description)
    searchable = hold_out(whole, args.holdout, args.seed)  # an answer is checked on the queries the search never sees
    data = sample_queries(searchable, args.queries, args.seed)
    rest = unseen(whole, data)
    readouts = check_pooled([r.strip() for r in args.readouts.split(",") if r.strip()]) if args.readouts else None
    bf16, pinned = resumed_precision(args.out, args.bf16)  # a resumed results file keeps its precision
    enc = o.encoder(args, settings={"bf16": bf16}, pinned=pinned)
    cache = False if args.no_cache else args.cache_dir
    task = RetrievalTask(data, cache_dir=cache, show_progress_bar=o.show(args),
                         float16_above_gib=FLOAT16_ABOVE_GIB if args.float16_above_gib is None
                         else args.float16_above_gib)
    confirm = RetrievalTask(rest, cache_dir=cache, show_progress_bar=o.show(args),
                            float16_above_gib=task.float16_above_gib) if rest is not None else None
    try:
        results = RetrievalResults.for_task(args.out, args.model, task, enc)
        strategy = (OptunaRetrieval.beside(args.out, args.model, task.record(), storage=args.storage,
                                           study_name=args.study_name, trials=args.trials, seed=args.tpe_seed,
                                           batch=args.batch_trials, library=args.prompts, readouts=readouts)
                    if args.strategy == "optuna" else None)
        if args.storage and strategy is None:  # greedy over workers: each candidate a job in a work study
            queue = WorkQueue(args.storage, RetrievalWork(task, enc, source_of(args)), args.model, args.study_name,
                              local=not args.no_local)
            if not args.quiet:
                o.say(f"work study {queue.name!r}: start workers with  promptsearch worker --storage URL "
                      f"--study-name {queue.name}")
        search = RetrievalSearch(task, enc, results, strategy or GreedyRetrieval(readouts, args.prompts),
                                 min_gain=args.min_gain or "auto", progress=None if args.quiet else o.say,
                                 confirm=confirm, queue=queue)
        search.add_queries(generated_prompts(args, results, search.description))
        if not args.quiet:
            o.say(f"data: {data.name}, {len(task.query_ids)} queries searched"
                  + (f" ({len(rest.queries)} more kept unseen to check the answer on)" if rest is not None else "")
                  + f", {len(task.corpus_ids)} documents")
        res = search.run()
    finally:
        if queue is not None:
            queue.close()
        task.close()
        if confirm is not None:
            confirm.close()
    absorbed = strategy.absorbed if strategy is not None else 0
    if enc.precision != "fp32" and not args.quiet:  # the reference's numbers are fp32: say when these are not
        o.say(f"note: these scores were computed in {enc.precision}; sentence-transformers' evaluator on the exported "
              "model computes in fp32, so its numbers differ from these by that rounding (--no-bf16, with another "
              "--out, gives its numbers)")
    print(f"corpus encodings: {task.corpus_encodings} computed in {task.corpus_passes} passes over the corpus, "
          f"{task.corpus_reused} read back from the cache; "
          f"{search.scored_now} candidates scored now"
          + (f", {absorbed} read from the study's trials of other runs" if strategy is not None else "")
          + f", {len(res.entries) - search.scored_now - absorbed} resumed from {res.path}")
    if rest is not None:  # the search's scores are those queries'; an answer other than the own was checked on the rest
        why = f"--holdout {args.holdout:g}" + (f", --queries {args.queries}" if args.queries else "")
        print(f"searched on {len(data.queries):,} of {len(whole.queries):,} queries ({why}); an answer other than the "
              f"model's own is checked on the other {len(rest.queries):,}")
    print("\n".join(summary(res)))
    print(next_steps(res))
    return 0


def source_of(args) -> dict:
    """How a worker rebuilds the data this run searches: ``load_retrieval``'s arguments, the hold-out and sample draws,
    the float16 limit and the max length (the work study records it)."""
    return {"data": args.data, "split": args.split, "relevant_from": args.relevant_from,
            "description": args.description, "holdout": args.holdout, "queries": args.queries, "seed": args.seed,
            "float16_above_gib": FLOAT16_ABOVE_GIB if args.float16_above_gib is None else args.float16_above_gib,
            "max_length": args.max_length}


def work_for(args, spec: dict, model: str) -> RetrievalWork:
    """A worker's side of a retrieval search's work study: the same data (rebuilt from ``spec["source"]``, its
    ``--data-dir`` this worker's), the model in the study's precision unless --bf16/--no-bf16 say another (then
    refused by ``check_spec``), corpus vectors in this machine's cache."""
    src = spec["source"]
    whole = load_retrieval(src["data"], data_dir=args.data_dir, split=src["split"],
                           fmt=RetrievalFormat.parse(src["relevant_from"]), description=src["description"])
    data = sample_queries(hold_out(whole, src["holdout"], src["seed"]), src["queries"], src["seed"])
    bf16 = spec["precision"] == "bf16" if args.bf16 is None else args.bf16  # a given --bf16/--no-bf16: checked
    enc = o.encoder(args, settings={"bf16": bf16,
                                    "max_length": args.max_length or src["max_length"]}, model=model)
    task = RetrievalTask(data, show_progress_bar=False, float16_above_gib=src["float16_above_gib"])
    return RetrievalWork(task, enc, src)


def generated_prompts(args, results: RetrievalResults, task: str) -> list[tuple[str, str]]:
    """The query prompts ``--generate MODEL`` wrote: the ones the results file kept (a resumed run scores the same),
    else ``--generate-n`` sampled now and kept in it."""
    if results.generated:
        return [(g["prompt"], g["source"]) for g in results.generated]
    if not args.generate:
        return []
    texts = generate_instructions(args.generate, task, args.generate_n, args.seed, args.device)
    got = prompts_of(texts, f"generated by {args.generate}")
    results.generated = [{"prompt": p, "source": src} for p, src in got]
    results.save()
    if not args.quiet:
        o.say(f"generated {len(got)} query prompt{'' if len(got) == 1 else 's'} with {args.generate} ({len(texts)} "
              "sampled; the rest were not one sentence of plain text)")
    return got
