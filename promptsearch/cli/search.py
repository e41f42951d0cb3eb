"""greedy, optuna, t5, score, tui: template search into one results file, through one scorer."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import signal
import sys
import threading
from contextlib import nullcontext

import optuna

from ..data import TASKS, DevSets, check_data, one_dataset, read_wordnet, set_label
from ..data.tasks import resolved_task
from ..errors import PromptSearchError
from ..fileio import check_apart, check_writable, resumed_model
from ..library import read_templates
from ..model.weights import folder_of, weights_sample
from ..paths import local_folder
from ..representation import Representation, readout_key
from ..search import GivenTemplates, Results, Scorer, check_resume, open_results, run_strategy
from ..search.distributed import STSWork, WorkQueue, serve
from ..search.generate import GenerateSearch
from ..search.greedy import Greedy, format_path, load_vocabulary
from ..search.optuna_search import OptunaSearch
from ..search.plots import plot_results
from ..search.racing import Racing
from ..search.results import kept_precision, scored_settings
from ..search.study import check_storage
from ..search.validate import held_out_tasks
from . import options as o


def _run(args, strategy, *checks, enc=None, denoise: bool | None = None) -> Results:
    """Check what fails fast (--out, ``checks``, each given the dev sets, the data, the held-out sets, --cache)
    before a model loads, then run ``strategy`` into --out with held-out validation (``denoise``: as decided for
    the representation scored; None: --denoise as given)."""
    if args.out:
        check_writable(args.out)
    sets = DevSets.parse(args.dataset)  # the dev set(s), read once: the checks and the scorer get the object
    for check in checks:
        check(sets)
    check_data(sets, args.data_dir)
    tasks = held_out_tasks(args.validate_on, args.validate_top, o.data(args))
    scored = {resolved_task(t) for t in sets.names}  # a set the search scores on is not held out (a user's trial: the
    left = [t for t in tasks if resolved_task(t) in scored]  # held-out column repeated the score, --dataset stsb)
    tasks = [t for t in tasks if t not in left]
    test = [t for t in sets.names if t in TASKS]
    which = "a test set" if len(test) == 1 else "test sets"
    notes = [n for n in ((f"note: --dataset {','.join(test)} names {which}, for reporting (eval --tasks): a search "
                          "chooses on the set it scores, so its scores there are optimistic; search on a dev set "
                          "(stsb-dev, sick-trial) and report the test sets" if test else None),
                         (f"note: held-out validation leaves out {', '.join(map(set_label, left))}: the search scores "
                          "on it, so it is not held out" if left else None),
                         o.one_set_objective_note(args.objective, len(sets.names), "--dataset"))
             if n and not args.quiet]  # said once nothing refused the run
    check_apart(None if args.no_cache else args.cache, args.out)
    bf16, pinned = kept_precision(args.out, args.bf16)  # a resumed results file keeps its precision
    work = args.command != "optuna" and getattr(args, "storage", None)
    if getattr(args, "no_local", False) and not work:
        raise PromptSearchError("--no-local leaves the scoring to 'promptsearch worker' processes: give --storage URL "
                                "too")
    if work:
        check_storage(args.storage, grace=args.grace)  # reachable, its driver installed: before a model loads (a new
        # SQLite file is made with the work study, after the strategy's checks)
    scorer = Scorer(enc or o.encoder(args, settings={"bf16": bf16}, pinned=pinned), dataset=sets,
                    denoise=args.denoise if denoise is None else denoise, data=o.data(args),
                    cache=False if args.no_cache else args.cache, screening=args.precision, objective=args.objective)
    announce = None if args.quiet else o.say
    model = resumed_model(args.out, args.model)  # a resumed file's own spelling of the same folder
    if work:
        strategy.check(scorer)  # refused before the work study is made (run_strategy checks again: nothing is scored)
        check_resume(strategy, scorer, args.out, model)  # so is a results file it would not resume
        queue = WorkQueue(args.storage, STSWork(scorer), model, args.study_name, local=not args.no_local,
                          grace=args.grace)
        scorer.distribute(queue)
        if announce:
            announce(o.worker_line(args.storage, queue.name))
    else:
        queue = None
    with queue if queue is not None else nullcontext():  # interrupted, its workers wait for the command to resume it
        results = open_results(strategy, scorer, args.out, model)
        for note in notes:  # said once nothing refused the run (a refusal stays one line)
            o.say(note)
        if announce and results.entries:  # said before it starts, as a retrieval search says it
            announce(o.resuming(results.path, len(results.entries), results.UNIT))
        results.extras["x_command"] = o.recorded_command(args)  # the TUI's "s" resumes the search with it
        if folder := local_folder(args.model):  # the one loaded (its fingerprints matched the file's)
            results.extras["x_model_folder"] = folder  # its name found again from elsewhere (an export, a resume)
        if (sample := weights_sample(folder_of(args.model))) is not None:  # an export checks it still holds these
            results.extras["x_model_weights"] = sample
        else:  # none to take (a hub id, a .bin checkpoint): an earlier run's would be another folder's news
            results.extras.pop("x_model_weights", None)
        return run_strategy(strategy, scorer, results, model, tasks, args.validate_top, o.show(args), announce)


def next_steps(res: Results, args) -> str:
    """What to do with the results file next, the chosen representation filled in."""
    best, out = res.best, shlex.quote(str(res.path))
    if best is None or res.path is None:
        return ""
    model = "" if args.model == "default" else f" --model {shlex.quote(args.model)}"
    if best.members:
        how = (" ".join(f"--template {shlex.quote(m.text)}" for m in best.members)
               + (" --denoise" if best.denoise else ""))
    elif best.readout:
        how = f"--template {shlex.quote(best.template)} --readout {best.readout}"
    else:
        how = (f"--template {shlex.quote(best.template)}" + (" --denoise" if best.denoise else "")
               + (f" --layer {best.layer}" if best.layer is not None else ""))
    lines = [f"promptsearch eval{model} {how} --tasks sts-all     # the chosen on the 7 STS test sets",
             f"promptsearch plot {out}     # the search's picture",
             f"promptsearch tui --results {out}     # leaderboard and [MASK] predictions"]
    if best.readout and not best.members:
        lines.insert(1, _export_step(res, best.entry_key, out, model))
    else:
        lines.insert(1, f"promptsearch finetune{model} --templates {out}     # fine-tune with it")
    return "\nnext:\n" + "\n".join("  " + x for x in lines)


def _export_step(res: Results, best: Representation, out: str, model: str) -> str:
    """The export step of a pooled answer: the results file's, or, where the answer has text after [X] or a [MASK]
    (a greedy template pooled: no sentence-transformers folder can hold it), the best-scored entry one can hold."""
    if (why := best.why_not_sentence_transformers()) is None:
        return f"promptsearch export {out} --out my-model     # a sentence-transformers folder"
    alt = next((e for e in res.ranked() if e.entry_key.readout and not e.entry_key.members
                and e.entry_key.why_not_sentence_transformers() is None), None)
    if alt is None:
        return f"promptsearch finetune{model} --templates {out}     # the chosen cannot be a plain folder: {why}"
    length = (res.numbers or {}).get("pooled_max_length")
    return (f"promptsearch export{model} --template {shlex.quote(alt.entry_key.text)}"
            + (f" --max-length {length}" if length else "")
            + f" --out my-model     # {alt.spearman:.2f}, the best a sentence-transformers folder holds (the chosen "
            f"cannot: {why})")


def cmd_greedy(args) -> int:
    strat = Greedy(vocabulary=args.vocabulary, max_steps=args.max_steps, show_progress_bar=o.show(args),
                   min_gain=args.min_gain,
                   layers=args.layers, ensemble=args.ensemble, demos_pool=args.demos_pool, readouts=args.readouts,
                   readout_steps=args.readout_steps,
                   racing=None if args.no_racing else Racing.parse(args.race_rungs, args.finalists))
    res = _run(args, strat, lambda sets: load_vocabulary(args.vocabulary))
    assert res.best is not None  # the model's own representation, at least, was scored
    print(f"{format_path(strat.path, res)}\n\nchosen: {res.best.key}   {res.best.spearman:.2f}\n{res.summary()}"
          f"{next_steps(res, args)}")
    return 0


def cmd_score(args) -> int:
    # before the folder's encoder is made: a resumed file keeps its own precision
    bf16, pinned = kept_precision(args.out, args.bf16)
    enc = (o.encoder(args, args.template_dir, settings={"bf16": bf16}, pinned=pinned)
           if args.template_dir and not (args.templates or args.file) else None)
    folder, denoise = (enc and enc.folder_key(args.readout, args.demos, args.denoise)) or (None, None)
    keys: list[Representation | str]
    if folder is not None:  # the folder's own representation, as eval reads it
        keys = [folder]
    else:
        templates = read_templates(args.templates, args.file, args.demos)
        keys = [readout_key(t.text, args.readout or "mask") for t in templates]
    res = _run(args, GivenTemplates(keys), enc=enc, denoise=denoise)
    print(res.summary(top=len(res.entries), stats=bool(args.out)))
    return 0


def cmd_optuna(args) -> int:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    strat = OptunaSearch.beside(args.out, resumed_model(args.out, args.model), args.dataset, args.denoise, args.storage,
                                args.study_name, trials=args.trials, grammar=args.grammar, seed=args.seed,
                                prune=not args.no_prune, show_progress_bar=o.show(args), pareto=args.pareto,
                                layers=args.layers, batch=args.batch_trials, readouts=args.readouts,
                                announce=lambda line: print(line, file=sys.stderr))
    res = _run(args, strat, strat.check_datasets, lambda sets: args.compare and Results.load(args.compare))
    print(res.format_ranking(args.top), strat.summary(), res.summary(compare=args.compare), sep="\n")
    return 0


def cmd_t5(args) -> int:
    strat = GenerateSearch(generator=args.generator, model_t5=args.model_t5, num_templates=args.num_templates,
                           num_pairs=args.num_pairs, wordnet_dir=args.wordnet_dir, seed=args.seed,
                           num_beams=args.num_beams,
                           show_progress_bar=o.show(args), name="t5")
    res = _run(args, strat, lambda sets: read_wordnet(args.wordnet_dir))  # fail fast on a missing WordNet
    g = res.generated
    print((f"generated {g.distinct} distinct templates from {g.pairs_used} WordNet (word, definition) pairs with the "
           f"{args.generator} generator; scored the top {g.kept}\n" if g else "")
          + res.summary(top=args.top, compare=args.compare))
    return 0


def cmd_worker(args) -> int:
    """Score candidates for a search started with --storage, until it is over."""
    # the worker's own paths from its own folder, whichever folder reads the study's (serve may read them from the
    # search's, a relative model or data path there)
    paths = {k: os.path.abspath(v) for k in ("data_dir", "cache_dir", "mlm_head")
             if isinstance(v := getattr(args, k, None), str) and v.lower() != "none"}
    if args.model and (folder := local_folder(args.model)):
        paths["model"] = folder
    mine = argparse.Namespace(**{**vars(args), **paths})

    def make_work(spec):  # the search's model and settings, unless the flags say otherwise
        model = mine.model or spec["model"]
        if spec.get("kind") == "retrieval":  # a retrieval search's candidates
            from .retrieval import work_for  # lazy: only a retrieval study needs it

            return work_for(mine, spec, model), model
        settings = scored_settings(spec["numbers"], mine.bf16, mine.add_period, mine.max_length)
        scorer = Scorer(o.encoder(mine, settings=settings, model=model), dataset=spec["dataset"],
                        denoise=spec["denoise"], data=o.data(mine), cache=False, screening=spec["screening"],
                        objective=spec["objective"])
        return STSWork(scorer), model

    log = None if args.quiet else o.say
    done = serve(args.storage, args.study_name, make_work, args.grace, args.wait, log)
    print(f"worker: {done} candidates scored")
    return 0


def cmd_plot(args) -> int:
    print("wrote " + ", ".join(map(str, plot_results(args.results, args.out, args.storage))))
    return 0


def cmd_tui(args) -> int:
    from ..tui import PromptSearchApp  # lazy: start-up time

    app = PromptSearchApp(results=args.results, storage=args.storage, study_name=args.study_name, model=args.model,
                          mask_head=args.mlm_head, dataset=one_dataset(args.dataset))
    # Textual reads keys from stdin and draws on stderr: without a terminal there it would spin forever
    if not all(f is not None and f.isatty() for f in (sys.__stdin__, sys.__stderr__)):
        raise PromptSearchError("the TUI needs a terminal (its input or its error output is redirected or piped); run "
                                "'promptsearch tui' in a terminal")
    _run_app(app)
    return 0


class _NoInterruptedTasks(logging.Filter):
    """Drops asyncio's report of a task that ended with KeyboardInterrupt ("Task exception was never retrieved").
    Since Python 3.12 Textual runs its widgets' message pumps as eager tasks. The KeyboardInterrupt that SIGTERM or
    Ctrl-C raises in one of them ends the app, as it should, and also stays in that task, which asyncio then reports
    with a traceback when the task is collected. The command says how it ended in its one line, so the report is
    not printed. Any other exception's report still is."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], KeyboardInterrupt))


_NO_INTERRUPTED_TASKS = _NoInterruptedTasks()


def _run_app(app) -> None:
    """Run the Textual ``app``, and leave the job-control handlers its driver installs (SIGCONT, SIGTSTP: it
    never removes them) as they were found, also when SIGTERM or Ctrl-C ends it. A SIGTERM raises
    KeyboardInterrupt out of the app's loop (Textual puts the terminal back as the loop is torn down); a
    SIGCONT that came with it (``timeout`` sends both; a stopped process gets them together) then ran
    Textual's resume handler with no loop: two chained tracebacks and exit 1. Now the SIGTERM's or SIGINT's
    handler puts Textual's handlers away first; the command ends with its one line (143, 130)."""
    job = (signal.SIGCONT, signal.SIGTSTP)
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, *job)}

    def put_back(sigs) -> None:
        for sig in sigs:
            signal.signal(sig, kept[sig] if kept[sig] is not None else signal.SIG_DFL)

    def ending(signum, frame):
        for sig in job:  # a no-op, not the default: CPython complains when a pending signal's handler goes
            signal.signal(sig, _nothing)
        kept[signum](signum, frame)  # main's SIGTERM handler, Python's SIGINT one: KeyboardInterrupt
        raise KeyboardInterrupt

    ends = [sig for sig in (signal.SIGTERM, signal.SIGINT) if callable(kept[sig])]  # an ignored one stays ignored
    logging.getLogger("asyncio").addFilter(_NO_INTERRUPTED_TASKS)  # kept: the report comes when the task is collected
    try:
        for sig in ends:
            signal.signal(sig, ending)
    except ValueError:  # not the main thread: Textual's own way
        try:
            return app.run()
        finally:
            _end_searches(app)
    try:
        app.run()
    finally:
        try:  # still under ``ending``: a second signal here kills what is left, then the command ends
            try:
                _flush_the_terminal(app)
            finally:
                _end_searches(app)
        finally:
            put_back((*job, *ends))


def _end_searches(app) -> None:
    """End a search the TUI started in a child process (it keeps its scores), saying so: it may take a moment."""
    if app.running_searches():
        print("promptsearch tui: ending the search it started (its scores are kept; s resumes it)", file=sys.stderr)
    app.end_searches()


def _flush_the_terminal(app, seconds: float = 10.0) -> None:
    """Wait until Textual has written what puts the terminal back. Its driver writes from a thread; leaving
    application mode only queues the codes that leave the alternate screen, and a KeyboardInterrupt out of the
    app's loop skips the shutdown that drains that queue (``driver.close()``). The command's last line, printed
    next, could then land on the alternate screen, out of sight. Closing twice is harmless. At most ``seconds``:
    a writer that died on a terminal gone away cannot take its queue's end, and must not hang the command."""
    driver = getattr(app, "_driver", None)
    if driver is not None:
        closing = threading.Thread(target=driver.close, name="promptsearch-terminal", daemon=True)
        closing.start()
        closing.join(seconds)


def _nothing(signum, frame) -> None:
    """A signal handler that does nothing."""
