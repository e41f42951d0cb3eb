"""retrieval: the best query prompt x document prompt x read-out on retrieval data, into one results file."""

from __future__ import annotations

import shlex
from contextlib import ExitStack
from functools import partial
from typing import Callable, cast

from ..data.retrieval import RetrievalFormat, load_retrieval
from ..errors import PromptSearchError
from ..eval.retrieval import FLOAT16_ABOVE_GIB, TASK_SLOT, RetrievalTask, hold_out, sample_queries, unseen
from ..eval.retrieval_sets import RetrievalSets
from ..fileio import check_writable, resumed_model
from ..model.weights import folder_of, weights_sample
from ..paths import local_folder
from ..search.distributed import WorkQueue
from ..search.retrieval import (
    CorpusRace,
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
    task = res.best is not None and TASK_SLOT in res.best.query + res.best.document
    return ("next:\n"
            + (f"  promptsearch export {out} --out my-retrieval-model --description "
               "'what your task is, in one sentence'     # {task} filled, a sentence-transformers folder with these "
               "prompts\n" if task else
               f"  promptsearch export {out} --out my-retrieval-model     # a sentence-transformers folder with "
               "these prompts\n")
            + "  python -c \"from sentence_transformers import SentenceTransformer; "
            "m = SentenceTransformer('my-retrieval-model'); "
            "print(m.similarity(m.encode_query(['a question']), m.encode_document(['a passage'])))\"\n"
            f"  promptsearch plot {out}     # the search's picture: every candidate and each step's judgement\n"
            f"  promptsearch tui --results {out}     # the leaderboard")


def cmd_retrieval(args) -> int:
    check_writable(args.out, example="retrieval.json")
    if args.no_local and (args.strategy == "optuna" or not args.storage):
        raise PromptSearchError("--no-local leaves the greedy steps' scoring to 'promptsearch worker' processes: give "
                                "--storage URL too" + (", without --strategy optuna (an Optuna study is shared by "
                                                       "running the same command on each machine)"
                                                       if args.strategy == "optuna" else ""))
    if args.strategy != "optuna":  # a flag that would do nothing: said, not ignored
        optuna_only = [f for f, v in (("--trials", args.trials), ("--tpe-seed", args.tpe_seed),
                                      ("--batch-trials", args.batch_trials)) if v is not None]
        if optuna_only:
            raise PromptSearchError(f"{optuna_only[0]} applies to --strategy optuna; add it, or drop {optuna_only[0]}")
        if args.study_name is not None and not args.storage:
            raise PromptSearchError("--study-name names an Optuna study (--strategy optuna) or, with --storage URL, "
                                    "the greedy steps' work study; add one of them, or drop --study-name")
    queue = None
    if args.strategy == "optuna" or args.storage:  # a storage that cannot be used is refused before anything loads
        check_storage(args.storage or default_storage(args.out))
    # --columns/--subset-column given: the pair format, which load_retrieval refuses in one line
    fmt = (cast(RetrievalFormat, o.fmt(args)) if args.columns or args.subset_column
           else RetrievalFormat.parse(args.relevant_from))
    racing = None if args.no_racing else CorpusRace(args.race_share, seed=args.seed)  # a bad share: refused first
    wholes = load_sets(args.data, args.description,
                       partial(load_retrieval, data_dir=args.data_dir, split=args.split, fmt=fmt))
    if args.generate and len(wholes) > 1:
        raise PromptSearchError("--generate asks for instructions for one task; with several --data sets, run it on "
                                "one set, or drop --generate")
    parts = [split_queries(w, args.holdout, args.queries, args.seed) for w in wholes]
    checks = held_out_sets(args, wholes, [d for d, _, _ in parts])
    readouts = check_pooled([r.strip() for r in args.readouts.split(",") if r.strip()]) if args.readouts else None
    bf16, pinned = resumed_precision(args.out, args.bf16)  # a resumed results file keeps its precision
    enc = o.encoder(args, settings={"bf16": bf16}, pinned=pinned)
    f16 = FLOAT16_ABOVE_GIB if args.float16_above_gib is None else args.float16_above_gib
    # the searched queries, the unseen ones and the other sets alike: one corpus cache, one float16 limit
    make = partial(RetrievalTask, cache_dir=False if args.no_cache else args.cache_dir,
                   show_progress_bar=o.show(args), float16_above_gib=f16)
    task = as_task([make(d) for d, _, _ in parts], several=len(parts) > 1, objective=args.objective)
    held = [make(r) for _, r, _ in parts if r is not None]
    confirm = as_task(held, several=len(parts) > 1, objective=args.objective) if held else None
    others = [make(d) for d in checks]
    with ExitStack() as ended:  # the tasks' vectors dropped, and (first) the work queue closed: interrupted, its
        # workers wait for the same command to resume it
        for t in (task, confirm, *others):
            if t is not None:
                ended.callback(t.close)
        results = RetrievalResults.for_task(args.out, resumed_model(args.out, args.model), task, enc)
        results.command = o.recorded_command(args)  # saved with the first score, or the verdict
        results.model_folder = local_folder(args.model) or results.model_folder  # the one loaded: found from elsewhere
        results.model_weights = weights_sample(folder_of(args.model))  # an export checks them (None: none to take)
        strategy = (OptunaRetrieval.beside(args.out, results.model, task.record(), storage=args.storage,
                                           study_name=args.study_name, seed=args.tpe_seed, library=args.prompts,
                                           readouts=readouts, racing=racing,
                                           **{k: v for k, v in (("trials", args.trials), ("batch", args.batch_trials))
                                              if v is not None})  # not given: the strategy's defaults
                    if args.strategy == "optuna" else None)
        if args.storage and strategy is None:  # greedy over workers: each candidate a job in a work study
            queue = ended.enter_context(WorkQueue(args.storage, RetrievalWork(task, enc, source_of(args)),
                                                  results.model, args.study_name, local=not args.no_local))
            if not args.quiet:
                o.say(o.worker_line(args.storage, queue.name))
        search = RetrievalSearch(task, enc, results, strategy or GreedyRetrieval(readouts, args.prompts, racing),
                                 min_gain=args.min_gain or "auto", progress=None if args.quiet else o.say,
                                 confirm=confirm, queue=queue)
        search.add_queries(generated_prompts(args, results, search.description))
        search.check_space()  # a file of another search space: refused before it is said to resume
        n_rest = sum(len(r.queries) for _, r, _ in parts if r is not None)
        if not args.quiet:
            dropped = sum(w.dropped_queries for w in wholes)
            o.say(f"data: {task.data.name}, {_queries(len(task.query_ids))} searched"
                  + (f" ({n_rest:,} more kept unseen to check the answer on)" if n_rest else "")
                  + f", {len(task.corpus_ids):,} documents"
                  + (f" in {len(parts)} sets (the metric: the {args.objective} of their nDCG@10; {{task}} in a prompt "
                     "is each set's description)" if len(parts) > 1 else "")
                  + (f"; {_queries(dropped)} without a relevant document left out, "
                     "as sentence-transformers' evaluator leaves them out" if dropped else ""))
            held_n = sum(n for _, _, n in parts)
            for note in (*(f"note: --queries {args.queries} asks for more queries than {d.name} has to search "
                           f"({len(d.queries):,}{' after --holdout' if n else ''}): all of them are searched"
                           for d, _, n in parts if args.queries and len(d.queries) < args.queries),
                         holdout_note(args.holdout, n_rest, len(task.query_ids), n_rest - held_n),
                         few_searched_note(len(task.query_ids), held_n, n_rest - held_n),
                         *(duplicate_note(w) for w in wholes),
                         *(few_held_out_note(t.data.name, len(t.query_ids)) for t in others),
                         o.one_set_objective_note(args.objective, len(parts), "--data")):
                if note:
                    o.say(note)
            if results.entries:
                o.say(o.resuming(results.path, len(results.entries), results.UNIT))
            enc.first_pass()  # the precision line, here: a resumed run encodes only at its end
        res = search.run(others, args.validate_top, o.show(args), announce=None if args.quiet else o.say)
    absorbed = strategy.absorbed if strategy is not None else 0
    if enc.precision != "fp32" and not args.quiet:  # the reference's numbers are fp32: say when these are not
        o.say(f"note: these scores were computed in {enc.precision}; sentence-transformers' evaluator on the exported "
              "model computes in fp32, so its numbers may differ from these by that rounding (--no-bf16, with another "
              "--out, gives its numbers)")
    print(f"corpus encodings{' in this process (workers count their own)' if queue is not None else ''}: "
          f"{task.corpus_encodings} computed in {_plural(task.corpus_passes, 'pass')} over the corpus, "
          f"{task.corpus_reused} read back from the cache; "
          + (f"{search.scored_now} candidates scored now" if queue is None else  # jobs: also those workers finished
             f"{search.scored_now} candidates scored in the work study (here or by its workers, while this ran or "
             "before)")
          + (f", {absorbed} read from the study's trials of other runs" if strategy is not None else "")
          + f", {len(res.entries) - search.scored_now - absorbed} resumed from {res.path}"
          + (f"; {_plural(strategy.repeats, 'trial')} proposed a candidate scored already (told its score, not "
             "encoded again)" if strategy is not None and strategy.repeats else "")
          + (f"; {_raced(res, search.screened_out)}" if search.screened_out else ""))
    if n_rest:  # the search's scores are those queries'; an answer other than the own was checked on the rest
        why = f"--holdout {args.holdout:g}" + (f", --queries {args.queries}" if args.queries else "")
        print(f"searched on {len(task.query_ids):,} of {len(task.query_ids) + n_rest:,} queries ({why}); an answer "
              f"other than the model's own is checked on the other {n_rest:,}")
    print("\n".join(summary(res)))
    print(next_steps(res))
    return 0


def held_out_sets(args, searched: list, sampled: list) -> list:
    """The retrieval sets ``--validate-on`` names (each read now, not after the search; each with its own description),
    none of them one the search sees.

    :param args: the command's arguments.
    :param searched: the ``--data`` sets' data.
    :param sampled: the queries of them the search sees (their data, ``--holdout`` and a ``--queries`` sample left out).
    :returns: each held-out set's data.
    :raises promptsearch.PromptSearchError: for a set the search also searches, or two of one name."""
    if args.validate_top and not args.validate_on.strip():
        raise PromptSearchError(f"--validate-top {args.validate_top} scores the search's best on --validate-on sets: "
                                "give them too (e.g. --validate-on snli-entailment)")
    if not args.validate_on.strip() or args.validate_top == 0:
        return []
    sets = load_sets(args.validate_on, None, partial(load_retrieval, data_dir=args.data_dir, split=args.split,
                                                     fmt=RetrievalFormat.parse(args.relevant_from)), "--validate-on")
    seen = {w.fingerprint(): w.name for w in searched}
    names: set[str] = set()
    for d in sets:
        if d.fingerprint() in seen:
            raise PromptSearchError(f"--validate-on {d.name} is the data --data searches ({seen[d.fingerprint()]}): "
                                    "give sets the search does not see (its own unseen queries already check the "
                                    "answer: --holdout)")
        if d.name in names:
            raise PromptSearchError(f"--validate-on names {d.name} twice; give each set once")
        names.add(d.name)
    texts = {q for w in sampled for q in w.queries.values()}
    for d in sets:  # the same queries over another corpus: a check of its own kind, not of unseen queries
        shared = sum(q in texts for q in d.queries.values())
        if shared and not args.quiet:
            o.say(f"note: --validate-on {d.name} shares {shared:,} of its {_queries(len(d.queries))} with the queries "
                  f"searched: on {'those' if shared > 1 else 'that one'} it checks the answer on its corpus, not on "
                  "queries the search never saw")
    return sets


def holdout_note(holdout: float, unseen_queries: int, searched: int, left_out: int = 0, few: int = 30) -> str:
    """A note when the check on unseen queries is weak or absent although ``--holdout`` asked for one ('' when not).
    Its advice names a smaller ``--queries`` where the sample left queries out (those are unseen too, and a larger
    ``--holdout`` would only take them from the sample's leftovers), else a larger ``--holdout`` only where the
    queries are enough for both the search and the check (``few`` each): with fewer, holding more out would leave
    the search too few (``few_searched_note``).

    :param holdout: the share of the queries held out.
    :param unseen_queries: how many are unseen: held out, and left out of a ``--queries`` sample.
    :param searched: how many were searched.
    :param left_out: how many of the unseen the ``--queries`` sample left out.
    :param few: below this many the check is called weak: the standard error of a mean over so few queries is itself
        uncertain.
    :returns: the note, or ''."""
    if holdout <= 0:
        return ""
    if unseen_queries == 0:
        return (f"note: too few queries to hold any out (--holdout {holdout:g}): an answer other than the model's own "
                "is not checked on unseen queries")
    if unseen_queries < few:
        advice = ("more queries, or a smaller --queries, make it" if left_out else
                  "more queries, or a larger --holdout, make it" if searched + unseen_queries >= 2 * few else
                  "more queries would make it")
        return (f"note: only {_queries(unseen_queries)} {'is' if unseen_queries == 1 else 'are'} "
                f"{'unseen' if left_out else 'held out'}: the check on them is weak ({advice} stronger)")
    return ""


def few_searched_note(searched: int, held: int, left_out: int, few: int = 30) -> str:
    """A note when so few queries are searched that a step's gain is mostly noise ('' when not): steps are then
    rarely taken, and the answer is likely the model's own for that reason alone. Its advice names only what would
    give more: a larger ``--queries`` where the sample left queries out (the search has that many, whatever
    ``--holdout``), else a smaller ``--holdout`` where it held some out and the queries are enough for both the search
    and the check (``few`` each), else data with more queries.

    :param searched: the queries searched.
    :param held: the queries ``--holdout`` kept unseen.
    :param left_out: the queries ``--queries`` left out of its sample.
    :param few: below this many the note is given.
    :returns: the note, or ''."""
    if searched >= few:
        return ""
    if left_out:  # the search has --queries of them: a smaller --holdout would not add any
        advice = "a larger --queries"
    elif held and searched + held >= 2 * few:  # enough queries for a strong search and a strong check
        advice = "a smaller --holdout"
    elif held:
        advice = (f"data with more queries: {_queries(searched + held)} with a relevant document, too few to search "
                  "on and check on both")
    else:
        advice = f"data with more queries: every query with a relevant document is searched, {_queries(searched)} here"
    return (f"note: only {_queries(searched)} searched: a step's gain over so few is mostly "
            f"noise, so steps are rarely taken and the answer is likely the model's own for that reason (give "
            f"{advice})")


def few_held_out_note(name: str, queries: int, few: int = 30) -> str:
    """A note when a held-out set (``--validate-on``) has so few queries that its scores say little ('' when not).

    :param name: the set's name.
    :param queries: its queries (with a relevant document).
    :param few: below this many the note is given.
    :returns: the note, or ''."""
    if queries >= few:
        return ""
    return (f"note: held-out set {name} has only {_queries(queries)}: one query moves its nDCG@10 by up to "
            f"1/{queries}, so differences between prompts there are mostly noise")


def duplicate_note(data) -> str:
    """A note when documents share a text ('' when not): they tie in every ranking, and which comes first is decided
    by document id, as sentence-transformers' evaluator decides it, so a score can move with their ids alone.

    :param data: the ``RetrievalData``.
    :returns: the note, or ''."""
    n = data.duplicate_texts
    if not n:
        return ""
    return (f"note: {n:,} {'document has' if n == 1 else 'documents have'} the text of another in {data.name}: they "
            "tie in every ranking, ranked by document id as sentence-transformers' evaluator ranks them, so a score "
            "can move with their ids alone (keep one of each for a number that does not)")


def _queries(n: int) -> str:
    return f"{n:,} {'query' if n == 1 else 'queries'}"


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 'es' if word.endswith('s') else 's'}"


def _raced(res, dropped: int) -> str:
    """What racing did, in words: the candidates it dropped, after how many passes over the smaller corpus (some read
    back from the cache), and how many races a resumed run read back from its file instead of screening again."""
    st = res.stats
    passes, read = st.get("screen_passes", 0), st.get("races_read", 0)
    out, reused = f"racing dropped {dropped}", st.get("screen_reused", 0)
    if passes:
        out += f" after {_plural(passes, 'pass')} over a smaller corpus"
        if reused:
            out += f" and {_plural(reused, 'encoding')} read back from the cache"
    elif reused:  # a screen read back from the cache drops candidates too
        out += f" on a smaller corpus, its {_plural(reused, 'encoding')} read back from the cache"
    if read:
        out += f" ({_plural(read, 'race')} read back from {res.path}, not screened again)"
    return out


def source_of(args) -> dict:
    """How a worker rebuilds the data this run searches: ``load_retrieval``'s arguments, the hold-out and sample draws,
    the float16 limit and the max length (the work study records it)."""
    return {"data": args.data, "split": args.split, "relevant_from": args.relevant_from,
            "description": args.description, "holdout": args.holdout, "queries": args.queries, "seed": args.seed,
            "float16_above_gib": FLOAT16_ABOVE_GIB if args.float16_above_gib is None else args.float16_above_gib,
            "max_length": args.max_length, "objective": args.objective}


def work_for(args, spec: dict, model: str) -> RetrievalWork:
    """A worker's side of a retrieval search's work study: the same data (rebuilt from ``spec["source"]``, its
    ``--data-dir`` this worker's), the model in the study's precision unless --bf16/--no-bf16 say another (then
    refused by ``RetrievalWork.check``), corpus vectors in this machine's cache."""
    src = spec["source"]
    given = src["description"]
    try:
        wholes = load_sets(src["data"], [given] if isinstance(given, str) else given,  # one description: its text
                           partial(load_retrieval, data_dir=args.data_dir, split=src["split"],
                                   fmt=RetrievalFormat.parse(src["relevant_from"])))
    except PromptSearchError as exc:  # its --data named as the search was given it: a path relative to its folder
        raise PromptSearchError(f"the study's data, --data {src['data']!r} as the search was given it, cannot be read "
                                f"here ({exc}); run the worker where those paths hold the search's files (started "
                                "in the same folder, or the search given absolute paths)") from None
    bf16 = spec["precision"] == "bf16" if args.bf16 is None else args.bf16  # a given --bf16/--no-bf16: checked
    enc = o.encoder(args, settings={"bf16": bf16,
                                    "max_length": args.max_length or src["max_length"]}, model=model)
    task = as_task([RetrievalTask(split_queries(w, src["holdout"], src["queries"], src["seed"])[0],
                                  cache_dir=getattr(args, "cache_dir", None), show_progress_bar=False,
                                  float16_above_gib=src["float16_above_gib"])
                    for w in wholes], several=len(wholes) > 1, objective=src.get("objective", "mean"))
    return RetrievalWork(task, enc, src)


def load_sets(data: str, descriptions: list[str] | None, load: Callable, flag: str = "--data") -> list:
    """The retrieval sets ``--data`` (or another ``flag``) names (several joined by commas), each read by
    ``load(spec, description=...)`` with its ``--description`` (none: each set's own; one: every set's; else one per
    set, in order).

    :returns: each set's ``RetrievalData``."""
    specs = [s.strip() for s in data.split(",")] if "," in data else [data]
    if not all(specs):
        raise PromptSearchError(f"{flag} {data!r} names an empty set; give sets joined by commas, e.g. demo,my-beir")
    given = list(descriptions or [])
    if len(given) > 1 and len(given) != len(specs):
        raise PromptSearchError(f"--description is given {len(given)} times for {len(specs)} data set(s): give it "
                                "once (every set's), or once per set in --data's order")
    descs: list[str | None] = [None] * len(specs)
    if given:
        descs = list(given * len(specs) if len(given) == 1 else given)
    return [load(s, description=d) for s, d in zip(specs, descs)]


def split_queries(whole, holdout: float, queries: int | None, seed: int) -> tuple:
    """One set's queries the search sees (``--holdout`` kept out, ``--queries`` drawn from the rest), the rest
    (None: none) and how many of them ``--holdout`` kept out (the others were left out of the sample), each set
    drawn alike.

    :returns: ``(searched, unseen or None, held out)``."""
    kept = hold_out(whole, holdout, seed)
    data = sample_queries(kept, queries, seed)
    return data, unseen(whole, data), len(whole.queries) - len(kept.queries)


def as_task(tasks: list, several: bool, objective: str = "mean"):
    """One set's task as it is; several sets' (or the held-out part of some of them) as one ``RetrievalSets``, their
    scores combined by ``objective`` (mean or min)."""
    return RetrievalSets(tasks, objective) if several else tasks[0]


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
