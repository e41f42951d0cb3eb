"""The ``promptsearch`` command line: a thin layer over the library."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from .data import TASK_NAMES, PairFormat, expand_tasks
from .errors import PromptSearchError
from .paths import sts_dir
from .template import Template, quote


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that says what to do."""

    def error(self, message):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _at_least(minimum: int):
    """An argparse type: a whole number >= ``minimum`` (checked when the flags are read)."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {v}")
        return v
    return parse


def _positive(text: str) -> float:
    """An argparse type: a finite number > 0 (learning rates, epochs)."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (v > 0 and v < float("inf")):
        raise argparse.ArgumentTypeError(f"must be a number above 0, not {text}")
    return v


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default="default", help="'default' (bundled MiniLM), an HF id, or a local model directory")
    g.add_argument("--mlm-head", default=None, metavar="FILE",
                   help="a head.safetensors from train-head for [MASK] predictions ('none': no trained head; "
                        "default: the shipped head for the default model)")
    g.add_argument("--data-dir", default=None, help="STS data in SentEval layout (default: $PROMPTSEARCH_DATA_DIR or ../shared/data)")
    g.add_argument("--columns", default=None, metavar="A,B,SCORE",
                   help="pair columns of a user data set (default: sentence1,sentence2,score or a common spelling)")
    g.add_argument("--subset-column", default=None, metavar="NAME",
                   help="a column grouping a user data set's pairs into subsets (SentEval's 'all' aggregation)")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ..., or auto: spread a large model over the devices "
                                                "there are (default: cuda if available)")
    g.add_argument("--batch-size", type=_at_least(1), default=64)
    g.add_argument("--no-bf16", dest="bf16", action="store_false", default=None, help="run in float32 even where bf16 is fast")
    g.add_argument("--no-period", dest="add_period", action="store_false",
                   help="don't append '.' to sentences that don't end in . ? \" ' before they fill [X]")
    g.add_argument("--max-length", type=_at_least(1), default=None, help="token limit per input (sentence truncated inside [X])")
    g.add_argument("--compat", choices=["promptsearch", "reference"], default="promptsearch",
                   help="reference: feed [MASK] templates exactly as kongds/Prompt-BERT's evaluation.py does (one-string "
                        "tokenization, template bias with positions from 0); needed to reproduce its RoBERTa numbers")
    g.add_argument("--demos", default=None, metavar="FILE",
                   help="in-context demonstrations put before the template (PromptEOL style, causal LMs): "
                        "'sentence<TAB>word' lines")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def _encoder(args):
    from .encoding import PromptEncoder

    if getattr(args, "template_dir", None) and args.command in ("eval", "score"):
        from .model.saved import template_dir_config

        template_dir_config(args.template_dir)  # one-line error if it is not one
        return _encoder_from_dir(args, args.template_dir)
    if args.compat == "reference" and args.command in ("optiprompt", "finetune", "train-head"):
        raise PromptSearchError("--compat reference reproduces the reference's evaluation inputs; training uses the "
                                "default inputs, so drop --compat")
    return PromptEncoder.from_pretrained(
        args.model, device=args.device, mask_head=args.mlm_head, batch_size=args.batch_size, bf16=args.bf16,
        add_period=args.add_period, max_length=args.max_length, compat=args.compat, data_dir=args.data_dir,
        show_progress_bar=_show(args),
    )


def _template(args, text: str) -> str:
    """A template given on the command line: a shipped name (PromptEOL ...) or text, with --demos."""
    from .library import named_template, with_demos

    t = named_template(text)
    return with_demos(t, args.demos) if getattr(args, "demos", None) else t


def _fmt(args):
    return PairFormat.parse(args.columns, args.subset_column)


def _check_data(args, tasks) -> None:
    """Fail fast on a missing data folder — when a built-in task needs it (user data sets do not)."""
    if any(t in TASK_NAMES for t in tasks):
        sts_dir(args.data_dir)


def _one_dataset(spec: str) -> str:
    """The one data set a search or a dev evaluation scores on (a group such as sts-all is several)."""
    tasks = expand_tasks(spec)
    if len(tasks) != 1:
        raise PromptSearchError(f"--dataset {quote(spec)} names {len(tasks)} data sets ({', '.join(tasks)}); a search "
                                "scores on one, e.g. stsb-dev")
    return tasks[0]


def _show(args):
    return False if args.quiet else None


def _rep_from_args(args):
    from .encoding import rep

    if args.template and args.pooling not in (None, "mask", "topk-static"):
        raise PromptSearchError("give either --template or --pooling, not both (with a template, --pooling takes only "
                                "mask or topk-static)")
    if not args.template and args.pooling == "ditto" and not args.head:
        raise PromptSearchError("--pooling ditto needs --head L-H (find the best with 'promptsearch ditto-search')")
    pooling = (None if args.pooling == "mask" else args.pooling)
    template = _template(args, args.template) if args.template else None
    return rep(template, args.denoise, pooling, head=args.head if args.pooling == "ditto" else None)


# ---- commands -------------------------------------------------------------------------------

def cmd_eval(args) -> int:
    from .eval import anisotropy, evaluate_reps, format_table

    tasks = expand_tasks(args.tasks)
    _check_data(args, tasks)  # fail fast on a missing data dir, before loading the model
    if args.template_dir and not (args.template or args.pooling):
        enc = _encoder(args)  # the directory supplies the template
        args.template, args.denoise = enc.default_template, args.denoise or enc.default_denoise
        rep = _rep_from_args(args)
    else:
        rep = _rep_from_args(args)
        enc = _encoder(args)
    rep = enc.resolve(rep, args.data_dir)  # a Ditto head checked against the model before any pass
    t0 = time.time()
    res = evaluate_reps(enc, [rep], tasks, args.data_dir, show_progress_bar=_show(args), fmt=_fmt(args))[rep]
    extra = {}
    if args.anisotropy:
        extra = {rep.label: {"anisotropy": f"{anisotropy(enc, [rep], data_dir=args.data_dir)[rep]:.3f}"}}
    if args.json:
        out = {t: round(v["spearman"], 4) for t, v in res.items()}
        if len(tasks) > 1:
            out["avg"] = round(sum(v["spearman"] for v in res.values()) / len(res), 4)
        if args.anisotropy:
            out["anisotropy"] = float(extra[rep.label]["anisotropy"])
        print(json.dumps(out, indent=2))
        return 0
    print(f"model: {args.model}   representation: {rep.label}   ({time.time() - t0:.1f}s)")
    print(format_table([(rep.label, res)], tasks, extra, markdown=args.markdown))
    if args.subsets:
        for t, v in res.items():
            print(f"\n{t}: " + ", ".join(f"{k} {s:.2f}" for k, s in v["subsets"].items()))
    return 0


def cmd_ditto_search(args) -> int:
    from .eval.ditto import format_heads, search_heads

    task = _one_dataset(args.dataset)
    _check_data(args, [task])
    enc = _encoder(args)
    scores = search_heads(enc, task, data_dir=args.data_dir, show_progress_bar=_show(args), fmt=_fmt(args))
    if args.json:
        print(json.dumps([{"head": f"{l}-{h}", "spearman": round(s, 4)} for l, h, s in scores], indent=2))
    else:
        print(format_heads(scores, top=args.top))
        l, h, s = scores[0]
        print(f"\nbest head: {l}-{h} (STS-B dev {s:.2f}); use it with: promptsearch eval --pooling ditto --head {l}-{h}")
    return 0


def cmd_report(args) -> int:
    """Every baseline, the paper's templates raw and denoised, and the best Ditto head."""
    from .eval.ditto import search_heads
    from .encoding.reps import Ditto, rep
    from .eval import anisotropy, evaluate_reps, format_table, results_json
    from .library import paper_templates

    tasks = expand_tasks(args.tasks)
    _check_data(args, tasks + ["stsb-dev"])  # the Ditto head is chosen on STS-B dev
    if args.json:
        _check_report_file(args.json)
    enc = _encoder(args)
    t0 = time.time()
    l, h, s = search_heads(enc, data_dir=args.data_dir, show_progress_bar=_show(args))[0]
    print(f"best Ditto head on STS-B dev: {l}-{h} ({s:.2f})", file=sys.stderr)
    if args.template:
        templates = [_template(args, t) for t in args.template]
    elif enc.model.causal:
        from .library import causal_templates

        templates = [_template(args, t) for t in causal_templates()]
    else:
        templates = paper_templates(enc.model.config.model_type, compat=enc.compat)
    reps = [rep(pooling=p) for p in ["cls", "mean", "first-last", "static", "static-debiased"]]
    reps.append(Ditto(l, h))
    for t in templates:
        reps += [rep(t), rep(t, denoise=True)]
    res = evaluate_reps(enc, reps, tasks, args.data_dir, show_progress_bar=_show(args), fmt=_fmt(args))
    aniso = anisotropy(enc, reps, data_dir=args.data_dir)
    extra = {r.label: {"anisotropy": f"{aniso[r]:.3f}"} for r in reps}
    rows = [(r.label, res[r]) for r in reps]
    print(f"model: {args.model}   ({time.time() - t0:.0f}s; Spearman x100 of cosine; anisotropy = mean cosine of random Wikipedia pairs)")
    print(format_table(rows, tasks, extra, markdown=True))
    if args.json:
        from .fileio import atomic_write

        atomic_write(args.json, results_json([(r, res[r]) for r in reps], args.model))
    return 0


def _check_report_file(path) -> None:
    """report --json overwrites FILE: only a report of its own, or a new file (never, say, a results file)."""
    p = Path(path)
    _check_out(p)
    if p.exists():
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            ok = isinstance(d, dict) and set(d) == {"model", "results"}
        except (OSError, ValueError):
            ok = False
        if not ok:
            raise PromptSearchError(f"--json {p} exists and is not a report written by promptsearch report; give a new "
                                    "file name")


# ---- search commands ------------------------------------------------------------------------

def _search_flags(p: argparse.ArgumentParser, out: str) -> None:
    g = p.add_argument_group("scoring")
    g.add_argument("--out", default=out, help=f"results JSON (default {out}); an existing one is resumed")
    g.add_argument("--dataset", default="stsb-dev", help="scoring set (default stsb-dev)")
    g.add_argument("--no-denoise", dest="denoise", action="store_false",
                   help="rank by the raw [MASK] state (default: denoised; both are cached)")
    g.add_argument("--cache", default=None, help="score cache (JSONL; default $PROMPTSEARCH_CACHE or ~/.cache/promptsearch/scores.jsonl)")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the score cache")
    g.add_argument("--precision", choices=["auto", "fp32", "bf16", "int8"], default="auto",
                   help="screening precision for racing/pruning rungs (auto: the reference precision, bf16 where fast "
                        "else fp32; int8: quantized linear layers, CPU). Recorded scores are always the reference precision's")
    g.add_argument("--validate-top", type=_at_least(0), default=5, metavar="K",
                   help="after the search, score the best K templates on held-out sets (default 5; 0: off)")
    g.add_argument("--validate-on", default="stsb,sickr", metavar="TASKS",
                   help="held-out sets for --validate-top (default stsb,sickr: the STS-B and SICK-R test sets; any data set the tool reads)")


def _scorer(args, enc=None):
    from .search import Scorer

    dataset = _one_dataset(args.dataset)
    if getattr(args, "out", None) and args.cache and not args.no_cache and Path(args.cache).resolve() == Path(args.out).resolve():
        raise PromptSearchError(f"--cache and --out are both {args.out}; the cache is a separate file (e.g. scores.jsonl)")
    return Scorer(enc or _encoder(args), dataset=dataset, denoise=args.denoise, data_dir=args.data_dir,
                  cache_path=args.cache, use_cache=not args.no_cache, fmt=_fmt(args), screening=args.precision)


def _validation(args) -> dict:
    """run_strategy's held-out validation arguments (checked before anything is scored)."""
    from .data import load_task
    from .errors import DataError

    tasks = []
    try:
        tasks = expand_tasks(args.validate_on) if args.validate_top and args.validate_on.strip() else []
        for t in tasks:  # read now, not after the search
            load_task(t, args.data_dir, _fmt(args))
    except DataError as exc:
        raise PromptSearchError(f"held-out validation: {exc}; pass --validate-on TASKS, or --validate-top 0 to skip "
                                "it") from None
    return {"validate_on": tasks, "validate_top": args.validate_top, "show_progress_bar": _show(args)}


def _check_out(path) -> None:
    """Fail before loading anything if --out cannot be written."""
    from pathlib import Path

    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise PromptSearchError(f"--out {p} is a directory; give a file name such as best.json")
    probe = parent
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise PromptSearchError(f"--out {p} is not writable; choose a path in a writable folder")


def _print_ranking(results, top: int) -> None:
    ranked = results.ranked()[:top]
    w = max([len(e.template) for e in ranked] + [8])
    kind = "denoised" if results.denoise else "raw"
    held = (results.validation or {}).get("tasks", []) if any(e.validation for e in ranked) else []
    print(f"\n{'rank':>4}  {'template'.ljust(w)}  {results.dataset + ' (' + kind + ')':>20}"
          + "".join(f"  {t:>10}" for t in held))
    for i, e in enumerate(ranked, 1):
        v = e.validation or {}
        print(f"{i:>4}  {e.template.ljust(w)}  {e.spearman:20.2f}"
              + "".join(f"  {v[t]:10.2f}" if t in v else f"  {'':>10}" for t in held))
    if held:
        print(f"(held-out: the best {results.validation['top']} by {results.dataset}, scored on {', '.join(held)})")


def _print_stats(results) -> None:
    d = results.to_dict()["stats"]
    tpm = f"{d['templates_per_minute']:.1f} templates/min" if d["templates_per_minute"] else "all cached"
    work = ", ".join(f"{v:.1f} {k}" for k, v in d["encodings_by_precision"].items())
    work = f"; {d['encodings']:.1f} full-set encodings ({work})" if d["encodings"] else ""
    print(f"\nscored {d['scored']} templates in {d['seconds']:.0f}s ({tpm}){work}; {d['cached']} came from the cache; "
          f"results: {results.path}")


def cmd_greedy(args) -> int:
    from .search import run_strategy
    from .search.greedy import Greedy, format_path, load_vocabulary

    _check_out(args.out)
    load_vocabulary(args.vocabulary)
    _check_data(args, [_one_dataset(args.dataset)])
    racing = None if args.no_racing else _racing(args)
    val = _validation(args)
    strat = Greedy(vocabulary=args.vocabulary, max_steps=args.max_steps, show_progress_bar=_show(args), racing=racing)
    res = run_strategy(strat, _scorer(args), args.out, args.model, **val)
    print(format_path(strat.path, res))
    b = res.best
    print(f"\nbest: {b.template}   {b.spearman:.2f}")
    _print_stats(res)
    return 0


def _racing(args):
    from .search.racing import Racing

    try:
        rungs = tuple(float(x) for x in args.race_rungs.split(","))
    except ValueError:
        raise PromptSearchError(f"--race-rungs {quote(args.race_rungs)}: give fractions such as 0.125,0.25,0.5") from None
    return Racing(fractions=rungs, finalists=args.finalists).check()


def _read_templates(args) -> list[str]:
    from pathlib import Path


    items = list(args.templates or [])
    if args.file:
        try:
            lines = Path(args.file).read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise PromptSearchError(f"cannot read --file {args.file}: {exc.strerror or exc}") from None
        except UnicodeDecodeError as exc:
            line = Path(args.file).read_bytes()[: exc.start].count(b"\n") + 1
            raise PromptSearchError(f"--file {args.file}:{line}: not valid UTF-8 (byte {exc.object[exc.start]:#04x}); "
                                    "save the file as UTF-8") from None
        items += [x.strip() for x in lines if x.strip() and not x.lstrip().startswith("#")]
    if not items:
        raise PromptSearchError("give templates as arguments or with --file (one per line)")
    return [Template.parse(_template(args, t)).text for t in items]


def cmd_score(args) -> int:
    from .search import Results

    if args.template_dir and not (args.templates or args.file):
        enc = _encoder(args)
        args.templates = [enc.default_template]
    else:
        enc = None
    templates = _read_templates(args)
    if args.out:
        _check_out(args.out)
    _check_data(args, [_one_dataset(args.dataset)])
    scorer = _scorer(args, enc)
    for t in templates:  # every template usable with this tokenizer before anything is written
        scorer.encoder.check_template(t)
    val = _validation(args)
    res = Results.open(args.out, args.model, scorer.dataset, "score", args.denoise, {"templates": len(templates)})
    res.track(scorer.work)
    for t in templates:
        res.add(scorer.score(t), "score")
    if val["validate_top"] and val["validate_on"]:
        from .search import validate

        validate(res, scorer, val["validate_on"], val["validate_top"], show_progress_bar=val["show_progress_bar"])
    _print_ranking(res, len(res.entries))
    if args.out:
        _print_stats(res)
    return 0


def _slug(text: str) -> str:
    import re

    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-")[-60:] or "model"


def _compare(res, path) -> None:
    from .search.results import load

    other = load(path)
    if not other["templates"]:
        return
    ob = max(other["templates"], key=lambda e: e["spearman"])
    b = res.best
    diff = b.spearman - ob["spearman"]
    verdict = "is at least as good as" if diff >= 0 else f"falls short by {-diff:.2f} points of"
    print(f"\n{res.strategy} best {b.spearman:.2f} {verdict} the {other['strategy']} best {ob['spearman']:.2f} "
          f"({ob['template']})")


def cmd_optuna(args) -> int:
    from pathlib import Path

    import optuna

    from .search import run_strategy
    from .search.grammar import Grammar
    from .search.optuna_search import OptunaSearch, optuna_summary

    _check_out(args.out)
    g = Grammar.load(args.grammar)
    if args.compare:
        from .search.results import load

        load(args.compare)
    _check_data(args, [_one_dataset(args.dataset)])
    storage = args.storage or f"sqlite:///{Path(args.out).resolve().with_suffix('.db')}"
    name = args.study_name or f"promptsearch-{_slug(args.model)}-{args.dataset}-{'denoised' if args.denoise else 'raw'}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    strat = OptunaSearch(storage=storage, study_name=name, trials=args.trials, grammar=args.grammar, seed=args.seed,
                         prune=not args.no_prune, show_progress_bar=_show(args))
    print(f"study {name!r} in {storage}: grammar {g.source} has {g.size} templates; target {args.trials} finished trials",
          file=sys.stderr)
    val = _validation(args)
    scorer = _scorer(args)
    t0 = time.time()
    done_before = sum(optuna_summary(strat.open_study(len(scorer.gold)))[k] for k in ("complete", "pruned"))
    try:
        res = run_strategy(strat, scorer, args.out, args.model, **val)
    except optuna.exceptions.StorageInternalError as exc:
        raise PromptSearchError(f"Optuna storage {storage} failed ({exc}); check the --storage URL") from None
    _print_ranking(res, args.top)
    s = optuna_summary(strat.study)
    wall = time.time() - t0
    ran = s["complete"] + s["pruned"] - done_before
    print(f"\nstudy: {s['complete']} complete, {s['pruned']} pruned, {s['fail']} failed, {s['running']} running trials; "
          f"this run finished {ran} trials in {wall:.0f}s ({60 * ran / max(wall, 1e-9):.1f} trials/min)")
    if s["running"]:
        print(f"note: {s['running']} trial(s) still marked running: another worker's, or left by a worker that was killed; "
              "those are failed and retried once their heartbeat is 90 s old, when a worker of this study next starts a trial")
    _print_stats(res)
    if args.compare:
        _compare(res, args.compare)
    return 0


def cmd_t5(args) -> int:
    from .data import read_wordnet
    from .search import run_strategy
    from .search.generate import GenerateSearch

    _check_out(args.out)
    read_wordnet(args.wordnet_dir)  # fail fast on a missing WordNet
    _check_data(args, [_one_dataset(args.dataset)])
    strat = GenerateSearch(generator=args.generator, model_t5=args.model_t5, num_templates=args.num_templates,
                           num_pairs=args.num_pairs, wordnet_dir=args.wordnet_dir, seed=args.seed, num_beams=args.num_beams,
                           show_progress_bar=_show(args))
    strat.name = "t5"
    val = _validation(args)
    res = run_strategy(strat, _scorer(args), args.out, args.model, **val)
    g = res.extras.get("x_generated", {})
    print(f"generated {g.get('distinct', '?')} distinct templates from {g.get('pairs_used', '?')} WordNet (word, definition) "
          f"pairs with the {args.generator} generator; scored the top {g.get('kept', '?')}")
    _print_ranking(res, args.top)
    _print_stats(res)
    if args.compare:
        _compare(res, args.compare)
    return 0


# ---- training commands ----------------------------------------------------------------------

def _train_flags(p: argparse.ArgumentParser, out: str) -> None:
    g = p.add_argument_group("training")
    g.add_argument("--train-file", help="a .txt (one sentence a line), a .csv/.tsv/.json/.jsonl/.parquet file or dataset "
                                        "folder with a text column, or a hub id (default: the Wikipedia sample in the "
                                        "data folder's train/); finetune --mode sup: sent0,sent1,hard_neg columns")
    g.add_argument("--text-column", default=None, help="the text column of --train-file (default: text, sentence, ...)")
    g.add_argument("--dataset", default="stsb-dev", help="dev set for choosing the best checkpoint (default stsb-dev; "
                                                         "any data set the tool reads)")
    g.add_argument("--train-batch-size", type=_at_least(2), default=None,
                   help="sentences per step (at least 2: the other sentences of a batch are the negatives)")
    g.add_argument("--lr", type=_positive, default=None)
    g.add_argument("--max-seq-length", type=_at_least(1), default=32, help="sentence tokens kept per example")
    g.add_argument("--eval-steps", type=_at_least(1), default=None, help="evaluate on STS-B dev every N steps")
    g.add_argument("--seed", type=_at_least(0), default=42)
    g.add_argument("--seeds", default=None, metavar="S1,S2,...",
                   help="train once per seed (OUT/seed-N each) and report mean ± std on every task (overrides --seed)")
    g.add_argument("--out", default=out, help=f"output directory (default {out}); a checkpoint there is resumed")
    g.add_argument("--no-resume", action="store_true", help="ignore a checkpoint in --out and start over")
    g.add_argument("--final-tasks", default="sts-all", help="tasks of the before/after table at the end")


def _corpus(args):
    """The training sentences: --train-file through datasets (memory-mapped), else the Wikipedia sample."""
    from .data import load_corpus, load_texts

    if args.train_file:
        return load_texts(args.train_file, args.text_column)
    return load_corpus(data_dir=args.data_dir)


def _before_after(before_enc, after_enc, template: str, denoise: bool, tasks_spec: str, data_dir, labels, show,
                  fmt=None) -> str:
    from .encoding import rep
    from .eval import evaluate_reps, format_table

    tasks = expand_tasks(tasks_spec)
    r = rep(template, denoise=denoise)
    rows = []
    for label, enc in zip(labels, (before_enc, after_enc)):
        rows.append((label, evaluate_reps(enc, [r], tasks, data_dir, show_progress_bar=show, fmt=fmt)[r]))
    return format_table(rows, tasks, markdown=True)


def cmd_optiprompt(args) -> int:
    from .library import default_template
    from .train.optiprompt import OptiPromptConfig, train_optiprompt

    _seeds(args)  # a bad --seeds fails before anything loads
    _check_data(args, expand_tasks(args.final_tasks) + [_one_dataset(args.dataset)])
    corpus = _corpus(args)
    _check_out(str(Path(args.out) / "promptsearch.json"))
    enc = _encoder(args)
    if args.template:
        template = Template.parse(_template(args, args.template)).text
    else:
        template = default_template(enc.model.config.model_type, enc.model.causal)
    denoise = args.denoise

    def train_one(seed: int, out: Path) -> None:
        cfg = OptiPromptConfig(template=template, steps=args.steps, batch_size=args.train_batch_size or 64, lr=args.lr or 3e-3,
                               max_seq_length=args.max_seq_length, eval_steps=args.eval_steps or 50, denoise=denoise,
                               seed=seed, show_progress_bar=_show(args))
        summary = train_optiprompt(enc if seed == seeds[0] else _encoder(args), corpus, cfg, str(out), args.model,
                                   data_dir=args.data_dir, resume=not args.no_resume,
                                   dev_dataset=_one_dataset(args.dataset), fmt=_fmt(args))
        print(f"OptiPrompt{f' (seed {seed})' if len(seeds) > 1 else ''}: STS-B dev {summary['manual_stsb_dev']:.2f} "
              f"(manual template) -> {summary['best_stsb_dev']:.2f} (best vectors) in {summary['steps']} steps x "
              f"{cfg.batch_size} sentences, {summary['seconds']:.0f}s; saved to {out}")

    seeds = _seeds(args)
    return _train_seeds(args, seeds, train_one, template, denoise, ["manual template", "OptiPrompt vectors"])


def _seeds(args) -> list[int]:
    """--seeds 0,1,2 (several runs, reported as mean ± std) or the single --seed."""
    if args.seeds is None:
        return [args.seed]
    try:
        seeds = list(dict.fromkeys(int(x) for x in args.seeds.split(",") if x.strip()))
        if any(x < 0 for x in seeds):
            raise ValueError
    except ValueError:
        raise PromptSearchError(f"--seeds {quote(args.seeds)}: give whole numbers of 0 or more separated by commas, "
                                "e.g. 0,1,2") from None
    if not seeds:
        raise PromptSearchError("--seeds: give at least one seed, e.g. 0,1,2")
    return seeds


def _train_seeds(args, seeds: list[int], train_one, template: str, denoise: bool, labels: list[str]) -> int:
    """Train once per seed (each in its own folder, each resumable), then the before/after table:
    with several seeds, every run's numbers and their mean ± std (also written to OUT/seeds.json)."""
    from .encoding import rep
    from .eval import evaluate_reps
    from .eval.tables import format_seed_table, mean_std
    from .fileio import atomic_write

    outs = [Path(args.out)] if len(seeds) == 1 else [Path(args.out) / f"seed-{s}" for s in seeds]
    for s, out in zip(seeds, outs):
        train_one(s, out)
    if len(seeds) == 1:
        print(_before_after(_encoder(args), _encoder_from_dir(args, outs[0]), template, denoise, args.final_tasks,
                            args.data_dir, labels, _show(args), _fmt(args)))
        return 0
    tasks = expand_tasks(args.final_tasks)
    r = rep(template, denoise=denoise)

    def scores(enc):
        return evaluate_reps(enc, [r], tasks, args.data_dir, show_progress_bar=_show(args), fmt=_fmt(args))[r]

    before = scores(_encoder(args))
    runs = [scores(_encoder_from_dir(args, out)) for out in outs]
    rows = [(labels[0], [before])] + [(f"{labels[1]}, seed {s}", [res]) for s, res in zip(seeds, runs)]
    rows.append((f"{labels[1]}, mean ± std over {len(seeds)} seeds", runs))
    print(format_seed_table(rows, tasks))
    ms = mean_std(runs, tasks)
    atomic_write(Path(args.out) / "seeds.json", json.dumps({
        "template": template, "denoise": denoise, "seeds": seeds, "std": "sample (ddof=1)",
        "tasks": {t: {"mean": round(m, 4), "std": round(sd, 4),
                      "runs": [round(res[t]["spearman"], 4) for res in runs] if t in tasks else None}
                  for t, (m, sd) in ms.items()},
        "before": {t: round(before[t]["spearman"], 4) for t in tasks}}, indent=2) + "\n")
    print(f"(mean ± sample std over seeds {', '.join(map(str, seeds))}; per-seed models in {args.out}/seed-N; numbers in "
          f"{Path(args.out) / 'seeds.json'})")
    return 0


def _encoder_from_dir(args, path):
    """An encoder from a trained directory (optiprompt vectors or a fine-tuned model)."""
    from .encoding import PromptEncoder

    return PromptEncoder.from_pretrained(str(path), device=args.device, mask_head=args.mlm_head, batch_size=args.batch_size, bf16=args.bf16,
                                         add_period=args.add_period, max_length=args.max_length,
                                         show_progress_bar=_show(args))


def cmd_finetune(args) -> int:
    from .data import load_triplets, snli_triplets
    from .search.results import top_templates
    from .train.finetune import FinetuneConfig, finetune

    _seeds(args)  # a bad --seeds fails before anything loads
    _check_data(args, expand_tasks(args.final_tasks) + [_one_dataset(args.dataset)])
    templates = [Template.parse(_template(args, t)).text for t in (args.template or [])]
    if args.templates:
        best = top_templates(args.templates, 2 if args.mode == "unsup" else 1)
        if not best:
            raise PromptSearchError(f"--templates {args.templates} holds no scored templates yet; run a search into it "
                                    "first, or give --template T")
        templates += [e["template"] for e in best]
    dir_cfg, soft = None, None
    if args.template_dir:
        from .model.saved import load_template_dir

        dir_cfg, soft = load_template_dir(args.template_dir)
        templates.insert(0, dir_cfg["template"])
    if not templates:
        raise PromptSearchError("give --templates best.json (a search's results), --template T (repeatable) or --template-dir")
    if args.mode == "unsup" and len(templates) == 1:
        templates = templates * 2
    templates = templates[:2] if args.mode == "unsup" else templates[:1]
    if args.mode == "unsup":
        data = _corpus(args)
    else:
        data = load_triplets(args.train_file) if args.train_file else snli_triplets(args.data_dir)
    _check_out(str(Path(args.out) / "promptsearch.json"))
    enc = _encoder(args)
    if enc.model.causal:
        raise PromptSearchError(f"{args.model} is a causal LM; fine-tuning covers masked LMs (for a causal LM: optiprompt, "
                                "which trains only the template's vectors)")
    if soft is not None:
        enc.set_soft_prompt(dir_cfg["template"], soft.to(enc.device))
    def train_one(seed: int, out: Path) -> None:
        e = enc if seed == seeds[0] else _encoder(args)
        if soft is not None and e is not enc:
            e.set_soft_prompt(dir_cfg["template"], soft.to(e.device))
        cfg = FinetuneConfig(mode=args.mode, templates=templates, lr=args.lr, batch_size=args.train_batch_size,
                             micro_batch=args.micro_batch, max_seq_length=args.max_seq_length, epochs=args.epochs,
                             max_steps=args.max_steps, eval_steps=args.eval_steps or 25, denoise=args.denoise, seed=seed,
                             show_progress_bar=_show(args))
        if seed == seeds[0]:
            print(f"fine-tuning ({args.mode}) with template(s): " + " | ".join(cfg.templates), file=sys.stderr)
        summary = finetune(e, data, cfg, str(out), args.model, data_dir=args.data_dir, resume=not args.no_resume,
                           dev_dataset=_one_dataset(args.dataset), fmt=_fmt(args))
        print(f"finetune {args.mode}{f' (seed {seed})' if len(seeds) > 1 else ''}: STS-B dev {summary['start_stsb_dev']:.2f} "
              f"(start) -> {summary['best_stsb_dev']:.2f} (best checkpoint) in {summary['steps']} steps of {cfg.batch_size}, "
              f"{summary['seconds']:.0f}s ({summary['steps_per_second']} steps/s on {summary['device']}); saved to {out}")

    seeds = _seeds(args)
    return _train_seeds(args, seeds, train_one, templates[0], args.denoise,
                        [f"{args.model} (start)", f"fine-tuned ({args.mode})"])


# ---- predictions ----------------------------------------------------------------------------

def cmd_predict(args) -> int:
    from .eval.predict import format_predictions, predict

    template = Template.parse(_template(args, args.template)).text
    if not args.sentences:
        raise PromptSearchError("give one or more sentences to predict [MASK] for")
    empty = [i for i, x in enumerate(args.sentences, 1) if not x.strip()]
    if empty:
        raise PromptSearchError(f"sentence {empty[0]} is empty; give sentences with text in them")
    enc = _encoder(args)
    if not enc.model.has_mlm_head:
        print(f"note: {args.model} has no MLM head: tokens come from projecting [MASK] states on the word embeddings",
              file=sys.stderr)
    elif enc.model.mask_head is not None and not args.quiet:
        meta = getattr(enc.model.mask_head, "meta", {}) or {}
        acc = (f" (held-out masked-token top-5 {100 * meta['heldout_top5']:.1f} %, unigram "
               f"{100 * meta['unigram_top5']:.1f} %)") if "heldout_top5" in meta else ""
        from .model import shipped_head_path

        which = "the shipped head" if Path(enc.model.mask_head_path) == shipped_head_path() else enc.model.mask_head_path
        print(f"note: [MASK] tokens from a head trained on the frozen encoder ({which}){acc}", file=sys.stderr)
    preds = predict(enc, enc.prepare(args.sentences), template, top_k=args.top_k)
    if args.json:
        print(json.dumps([{"sentence": p.sentence, "raw": p.raw, "denoised": p.denoised} for p in preds], indent=2))
    else:
        print(format_predictions(preds, template, args.denoise))
    return 0


def cmd_train_head(args) -> int:
    """Learn a [MASK] prediction head on the frozen encoder (for checkpoints without one)."""
    from .encoding.batching import bf16_supported
    from .train.head import CORPORA, HeadConfig, HeadTrainSettings, dedupe, head_corpus, run_train_head
    from .model import load_model

    parts = [p.strip() for p in args.corpus.split(",") if p.strip()]
    from .data.user import is_user_dataset

    bad = [p for p in parts if p not in CORPORA and not is_user_dataset(p)]
    if bad or not parts:
        raise PromptSearchError(f"--corpus {args.corpus!r}: give a comma list of {', '.join(CORPORA)} or text files")
    corpora = head_corpus(parts, args.data_dir, args.wordnet_dir)
    sentences = dedupe([s for v in corpora.values() for s in v])
    if args.max_sentences:
        import random

        random.Random(args.seed).shuffle(sentences)
        sentences = sentences[: args.max_sentences]
    print("corpus: " + ", ".join(f"{k} {len(v):,}" for k, v in corpora.items()))
    model = load_model(args.model, device=args.device, mask_head="none")
    if model.tokenizer.mask_token is None:
        raise PromptSearchError(f"{args.model}'s tokenizer has no mask token; a [MASK] head needs one")
    if model.mlm is not None:
        print(f"note: {args.model} has its own MLM head; the trained one is used only when passed with --mlm-head",
              file=sys.stderr)
    cfg = HeadConfig(model.config.hidden_size, model.word_embeddings.shape[0], decoder=args.decoder, rank=args.rank,
                     depth=args.depth)
    settings = HeadTrainSettings(epochs=args.epochs, batch_size=args.head_batch_size, lr=args.lr, seed=args.seed,
                                 bf16=args.bf16 if args.bf16 is not None else bf16_supported(model.word_embeddings.device))
    rep = run_train_head(model, sentences, args.out, cfg, settings, heldout=args.heldout, cache_dir=args.cache_dir,
                         show_progress_bar=not args.quiet, meta={"corpus": parts})
    print(rep.summary())
    print(f"wrote {rep.path} (best epoch {rep.history.best_epoch}); use it with --mlm-head {rep.path}")
    return 0


def cmd_table9(args) -> int:
    """PromptBERT Table 9: [MASK] state vs Eq. 3 (avg. of top-200 static embeddings), +/- denoising."""
    from .encoding import rep
    from .eval import evaluate_reps, format_table

    tasks = expand_tasks(args.tasks)
    template = Template.parse(_template(args, args.template)).text
    _check_data(args, tasks)
    enc = _encoder(args)
    reps = [rep(template, denoise=d, pooling=p) for p in (None, "topk-static") for d in (False, True)]
    res = evaluate_reps(enc, reps, tasks, args.data_dir, show_progress_bar=_show(args), fmt=_fmt(args))
    names = {None: "[MASK] token", "topk-static": "avg. top-200 tokens"}
    rows = [(f"{names[p]}{' (denoised)' if d else ''}", res[r])
            for r, (p, d) in zip(reps, [(p, d) for p in (None, "topk-static") for d in (False, True)])]
    print(f"model: {args.model}   template: {template}")
    print(format_table(rows, tasks, markdown=True))
    return 0


def cmd_tui(args) -> int:
    from .tui import PromptSearchApp

    if bool(args.storage) != bool(args.study_name):
        raise PromptSearchError("--storage and --study-name go together (or give --results FILE)")
    dataset = _one_dataset(args.dataset)
    PromptSearchApp(results=args.results, storage=args.storage, study_name=args.study_name, model=args.model,
                    mask_head=args.mlm_head, dataset=dataset).run()
    return 0


def build_parser() -> argparse.ArgumentParser:
    from . import __version__

    p = _Parser(prog="promptsearch", description="Find prompt templates that turn a masked LM into a sentence encoder.")
    p.add_argument("--version", action="version", version=f"promptsearch {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    e = sub.add_parser("eval", help="evaluate one template or pooling on STS tasks",
                       description="Spearman x100 of cosine similarity on STS tasks for one representation.")
    _common(e)
    e.add_argument("--template", help="e.g. 'This sentence : \"[X]\" means [MASK] .'")
    e.add_argument("--denoise", action="store_true", help="subtract the template bias (position-shifted template-only pass)")
    e.add_argument("--pooling", help="cls | mean | first-last | static | static-debiased | ditto; with --template: "
                   "topk-static (Eq. 3)")
    e.add_argument("--head", help="Ditto head as L-H, 0-based (with --pooling ditto)")
    e.add_argument("--tasks", default="stsb-dev", help="stsb-dev | sts-all | comma list of sts12..sts16,stsb,sickr,stsb-dev")
    e.add_argument("--json", action="store_true", help="print JSON: task -> spearman")
    e.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    e.add_argument("--subsets", action="store_true", help="also print per-subset Spearman")
    e.add_argument("--anisotropy", action="store_true", help="also report mean cosine of random Wikipedia pairs")
    e.add_argument("--template-dir", help="a directory written by optiprompt or finetune (its model, template, vectors)")
    e.set_defaults(func=cmd_eval)

    d = sub.add_parser("ditto-search", help="grid-search the Ditto attention head on STS-B dev")
    _common(d)
    d.add_argument("--dataset", default="stsb-dev", help="the set heads are scored on (default stsb-dev; any data set)")
    d.add_argument("--top", type=_at_least(1), default=10)
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_ditto_search)

    r = sub.add_parser("report", help="the README table: every baseline, paper templates +/- denoising, best Ditto head")
    _common(r)
    r.add_argument("--tasks", default="sts-all")
    r.add_argument("--template", action="append", help="template(s) instead of the paper's three (repeatable)")
    r.add_argument("--json", metavar="FILE", help="also write all numbers (with subsets) to FILE")
    r.set_defaults(func=cmd_report)

    pr = sub.add_parser("predict", help="top-k [MASK] tokens without and with template denoising (Table 7)")
    _common(pr)
    pr.add_argument("sentences", nargs="*")
    pr.add_argument("--template", default='This sentence : "[X]" means [MASK] .')
    pr.add_argument("--top-k", type=_at_least(1), default=5)
    pr.add_argument("--denoise", choices=["both", "yes", "no"], default="both", help="which columns to show")
    pr.add_argument("--json", action="store_true")
    pr.set_defaults(func=cmd_predict)

    t9 = sub.add_parser("table9", help="[MASK] state vs avg. top-200 static embeddings (Eq. 3), +/- denoising")
    _common(t9)
    t9.add_argument("--template", default='This sentence : "[X]" means [MASK] .')
    t9.add_argument("--tasks", default="stsb-dev,stsb")
    t9.set_defaults(func=cmd_table9)

    th = sub.add_parser("train-head", help="learn a [MASK] prediction head on the frozen encoder (models without an MLM head)")
    _common(th)
    th.add_argument("--out", default="head", help="output directory (head.safetensors, train-head.json, checkpoint)")
    th.add_argument("--corpus", default="wiki,wordnet,snli,sts",
                    help="comma list: wiki (Wikipedia sample), wordnet (glosses + examples), snli, sts (STS-B/SICK train), "
                         "or text files / data sets (one sentence a line, or a text column)")
    th.add_argument("--wordnet-dir", default=None, help="WordNet data files (default /usr/share/wordnet)")
    th.add_argument("--max-sentences", type=_at_least(1), default=None, help="use a random subset of the corpus")
    th.add_argument("--decoder", choices=["rank", "full", "tied"], default="rank",
                    help="rank: word embeddings + a trainable low-rank correction (small file); full: untied; tied: BERT's")
    th.add_argument("--rank", type=_at_least(1), default=64)
    th.add_argument("--depth", type=_at_least(1), default=1, help="dense+GELU+LayerNorm blocks before the decoder")
    th.add_argument("--epochs", type=_at_least(1), default=4)
    th.add_argument("--head-batch-size", type=_at_least(1), default=1024, help="masked states per training step")
    th.add_argument("--lr", type=_positive, default=2e-3)
    th.add_argument("--heldout", type=_at_least(1), default=2000, help="sentences whose masked tokens are held out")
    th.add_argument("--seed", type=_at_least(0), default=0)
    th.add_argument("--cache-dir", default=None, help="where masked states are cached (default ~/.cache/promptsearch/head)")
    th.set_defaults(func=cmd_train_head)

    gr = sub.add_parser("greedy", help="greedy template search (relation tokens, then prefix tokens; PromptBERT Table 4)")
    _common(gr)
    _search_flags(gr, "best.json")
    gr.add_argument("--vocabulary", default="greedy", help="relation/prefix vocabulary: a shipped name or a .json path")
    gr.add_argument("--max-steps", type=_at_least(0), default=8, help="most prefix tokens to add")
    gr.add_argument("--no-racing", action="store_true", help="score every candidate on the full set (the paper's "
                                                             "protocol; default: race them on growing subsets)")
    gr.add_argument("--race-rungs", default="0.125,0.25,0.5", metavar="FRACTIONS",
                    help="the racing rungs: shares of the dev pairs (default 0.125,0.25,0.5)")
    gr.add_argument("--finalists", type=_at_least(1), default=2, help="candidates per step that get a full-set score (default 2)")
    gr.set_defaults(func=cmd_greedy)

    op = sub.add_parser("optuna", help="TPE search over a template grammar with successive-halving pruning (resumable, multi-worker)")
    _common(op)
    _search_flags(op, "optuna.json")
    op.add_argument("--trials", type=_at_least(1), default=60, help="total finished trials for the study (all workers together)")
    op.add_argument("--grammar", default="grammar", help="grammar JSON: a shipped name or a path")
    op.add_argument("--storage", help="Optuna RDB URL (default: sqlite:///<out>.db beside --out); share it to run several workers")
    op.add_argument("--study-name", help="default: promptsearch-<model>-<dataset>-<denoised|raw>")
    op.add_argument("--seed", type=_at_least(0), default=None, help="TPE sampler seed")
    op.add_argument("--no-prune", action="store_true", help="score every trial on the full set")
    op.add_argument("--compare", metavar="RESULTS", help="a results file (e.g. best.json from greedy) to compare the best with")
    op.add_argument("--top", type=_at_least(1), default=10)
    op.set_defaults(func=cmd_optuna)

    t5 = sub.add_parser("t5", help="definition-driven generation: T5 (or the MLM) fills spans around WordNet (word, definition) pairs")
    _common(t5)
    _search_flags(t5, "t5.json")
    t5.add_argument("--generator", choices=["t5", "mlm"], default="t5", help="t5 (needs --model-t5) or mlm (offline: the searched model)")
    t5.add_argument("--model-t5", default="google-t5/t5-base", help="T5 HF id or local path")
    t5.add_argument("--num-templates", type=_at_least(1), default=500, help="distinct templates to collect and score")
    t5.add_argument("--num-pairs", type=_at_least(1), default=200, help="WordNet pairs per generation round")
    t5.add_argument("--num-beams", type=_at_least(1), default=8, help="T5 beam size (= sequences kept per pair)")
    t5.add_argument("--wordnet-dir", default="/usr/share/wordnet", help="folder with WordNet's data.noun/verb/adj/adv")
    t5.add_argument("--seed", type=_at_least(0), default=0)
    t5.add_argument("--compare", metavar="RESULTS", help="a results file to compare the best with")
    t5.add_argument("--top", type=_at_least(1), default=10)
    t5.set_defaults(func=cmd_t5)

    o = sub.add_parser("optiprompt", help="learn continuous template vectors with the encoder frozen (unsup SimCSE loss)")
    _common(o)
    _train_flags(o, "runs/optiprompt")
    o.add_argument("--template", help="manual template to start from (default: the paper's first)")
    o.add_argument("--steps", type=_at_least(1), default=200)
    o.add_argument("--denoise", action="store_true", help="train and evaluate the denoised [MASK] state")
    o.set_defaults(func=cmd_optiprompt)

    f = sub.add_parser("finetune", help="prompt-based contrastive fine-tuning with template denoising (unsup or sup NLI)")
    _common(f)
    _train_flags(f, "runs/finetune")
    f.add_argument("--mode", choices=["unsup", "sup"], default="unsup")
    f.add_argument("--templates", metavar="RESULTS", help="a search's results JSON: unsup takes its top-2, sup its best")
    f.add_argument("--template", action="append", help="a template (repeatable; unsup uses two)")
    f.add_argument("--template-dir", help="an optiprompt output directory (its template and vectors)")
    f.add_argument("--no-denoise", dest="denoise", action="store_false", help="don't subtract template biases")
    f.add_argument("--micro-batch", type=_at_least(0), default=64, help="micro-batch for gradient caching (0: whole batch at once)")
    f.add_argument("--epochs", type=_positive, default=1.0)
    f.add_argument("--max-steps", type=_at_least(1), default=None)
    f.set_defaults(func=cmd_finetune)

    tu = sub.add_parser("tui", help="terminal UI: live leaderboard of a search, [MASK] predictions")
    tu.add_argument("--results", default="best.json", help="results JSON to follow (default best.json)")
    tu.add_argument("--storage", help="an Optuna storage URL to follow instead")
    tu.add_argument("--study-name")
    tu.add_argument("--model", default="default", help="model for predictions and for searches started from the TUI")
    tu.add_argument("--mlm-head", default=None, metavar="FILE", help="a head.safetensors from train-head for the predictions")
    tu.add_argument("--dataset", default="stsb-dev", help="data set for searches started from the TUI and for random "
                                                          "sentences (default stsb-dev; any data set the tool reads)")
    tu.set_defaults(func=cmd_tui)

    sc = sub.add_parser("score", help="score given templates on STS-B dev and print the ranking")
    _common(sc)
    _search_flags(sc, None)
    sc.add_argument("templates", nargs="*", help="templates, each with one [X] and one [MASK]")
    sc.add_argument("--file", help="a file with one template a line (# comments allowed)")
    sc.add_argument("--template-dir", help="a directory written by optiprompt or finetune (scores its template with its vectors)")
    sc.set_defaults(func=cmd_score)
    return p


def _check_utf8(argv: list[str]) -> None:
    """Arguments from the shell arrive with undecodable bytes as lone surrogates: say so."""
    for a in argv:
        try:
            a.encode("utf-8")
        except UnicodeEncodeError:
            shown = a.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
            raise PromptSearchError(f"argument {quote(shown, 80)} is not valid UTF-8; pass text in UTF-8") from None


def _on_sigterm(signum, frame):  # SIGTERM ends a job like Ctrl-C: what is saved is said
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    import signal

    before = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C before a command started (start-up, reading the arguments)
        _ignore_further_interrupts()
        print("promptsearch: interrupted", file=sys.stderr)
        return 130
    finally:  # main() called from Python (tests, a notebook) leaves the handlers as it found them:
        for sig, handler in before.items():  # an ignored SIGINT would be inherited by every child process
            try:
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
            except ValueError:  # not the main thread
                pass


def _ignore_further_interrupts() -> None:
    """The command is ending: a second Ctrl-C (or SIGTERM) must not break the goodbye or the exit
    into a traceback."""
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, signal.SIG_IGN)
        except ValueError:  # not the main thread
            pass


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        _check_utf8(argv)
    except PromptSearchError as exc:
        print(f"promptsearch: error: {exc}", file=sys.stderr)
        return 2
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # a usage error (one line, already printed), --help or --version: an exit code
        return exc.code if isinstance(exc.code, int) else 2
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    import signal

    terminated = []
    try:
        previous = signal.signal(signal.SIGTERM, lambda s, f: (terminated.append(s), _on_sigterm(s, f)))
    except ValueError:  # not the main thread (e.g. called from a worker): leave signals alone
        previous = None
    try:
        return int(args.func(args) or 0)
    except PromptSearchError as exc:
        print(f"promptsearch {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _ignore_further_interrupts()
        out = getattr(args, "out", None)
        hint = f"; scored templates are saved in {out}, re-run the same command to resume" if out and Path(out).is_file() else ""
        if args.command == "train-head":
            hint = f"; masked states are cached and finished epochs saved in {out}, re-run the same command to resume"
        elif args.command in ("optiprompt", "finetune"):
            saved = out and any(Path(out).rglob("*-checkpoint.pt"))
            hint = f"; the last checkpoint is in {out}, re-run the same command to resume" if saved else ""
        what = "terminated" if terminated else "interrupted"
        print(f"promptsearch {args.command}: {what}{hint}", file=sys.stderr)
        return 143 if terminated else 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
