"""The ``promptsearch`` command line: a thin layer over the library."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from .errors import PromptSearchError


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that says what to do."""

    def error(self, message):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default="default", help="'default' (bundled MiniLM), an HF id, or a local model directory")
    g.add_argument("--data-dir", default=None, help="STS data in SentEval layout (default: $PROMPTSEARCH_DATA_DIR or ../shared/data)")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ... (default: cuda if available)")
    g.add_argument("--batch-size", type=int, default=64)
    g.add_argument("--no-bf16", dest="bf16", action="store_false", default=None, help="run in float32 even where bf16 is fast")
    g.add_argument("--no-period", dest="add_period", action="store_false",
                   help="don't append '.' to sentences that don't end in . ? \" ' before they fill [X]")
    g.add_argument("--max-length", type=int, default=None, help="token limit per input (sentence truncated inside [X])")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bars")


def _encoder(args):
    from .encoder import PromptEncoder

    return PromptEncoder.from_pretrained(
        args.model, device=args.device, batch_size=args.batch_size, bf16=args.bf16,
        add_period=args.add_period, max_length=args.max_length,
        show_progress_bar=False if args.quiet else None,
    )


def _show(args):
    return False if args.quiet else None


def _rep_from_args(args):
    from .evaluate import Rep
    from .template import Template

    if args.template and args.pooling:
        raise PromptSearchError("give either --template or --pooling, not both")
    if args.template:
        return Rep(template=Template.parse(args.template).text, denoise=args.denoise)
    if args.denoise:
        raise PromptSearchError("--denoise needs a --template")
    from .pooling import get_pooling

    p = get_pooling(args.pooling or "mean").name
    if p == "ditto" and not args.head:
        raise PromptSearchError("--pooling ditto needs --head L-H (find the best with 'promptsearch ditto-search')")
    return Rep(pooling=p, head=args.head if p == "ditto" else None)


# ---- commands -------------------------------------------------------------------------------

def cmd_eval(args) -> int:
    from .data import expand_tasks
    from .evaluate import anisotropy, evaluate_reps, format_table

    tasks = expand_tasks(args.tasks)
    rep = _rep_from_args(args)
    from .data import sts_dir

    sts_dir(args.data_dir)  # fail fast on a missing data dir, before loading the model
    enc = _encoder(args)
    if rep.pooling == "ditto":
        enc.ditto_head = rep.head
        _ = enc.ditto_head_tuple
    t0 = time.time()
    res = evaluate_reps(enc, [rep], tasks, args.data_dir, show_progress_bar=_show(args))[rep]
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
    from .data import sts_dir
    from .ditto import format_heads, search_heads

    sts_dir(args.data_dir)
    enc = _encoder(args)
    scores = search_heads(enc, data_dir=args.data_dir, show_progress_bar=_show(args))
    if args.json:
        print(json.dumps([{"head": f"{l}-{h}", "spearman": round(s, 4)} for l, h, s in scores], indent=2))
    else:
        print(format_heads(scores, top=args.top))
        l, h, s = scores[0]
        print(f"\nbest head: {l}-{h} (STS-B dev {s:.2f}); use it with: promptsearch eval --pooling ditto --head {l}-{h}")
    return 0


def cmd_report(args) -> int:
    """Every baseline, the paper's templates raw and denoised, and the best Ditto head."""
    from .data import expand_tasks, sts_dir
    from .ditto import search_heads
    from .evaluate import Rep, anisotropy, evaluate_reps, format_table, results_json
    from .library import paper_templates

    tasks = expand_tasks(args.tasks)
    sts_dir(args.data_dir)
    enc = _encoder(args)
    t0 = time.time()
    l, h, s = search_heads(enc, data_dir=args.data_dir, show_progress_bar=_show(args))[0]
    print(f"best Ditto head on STS-B dev: {l}-{h} ({s:.2f})", file=sys.stderr)
    templates = args.template or paper_templates(enc.model.config.model_type)
    reps = [Rep(pooling=p) for p in ["cls", "mean", "first-last", "static", "static-debiased"]]
    reps.append(Rep(pooling="ditto", head=f"{l}-{h}"))
    for t in templates:
        reps += [Rep(template=t), Rep(template=t, denoise=True)]
    res = evaluate_reps(enc, reps, tasks, args.data_dir, show_progress_bar=_show(args))
    aniso = anisotropy(enc, reps, data_dir=args.data_dir)
    extra = {r.label: {"anisotropy": f"{aniso[r]:.3f}"} for r in reps}
    rows = [(r.label, res[r]) for r in reps]
    print(f"model: {args.model}   ({time.time() - t0:.0f}s; Spearman x100 of cosine; anisotropy = mean cosine of random Wikipedia pairs)")
    print(format_table(rows, tasks, extra, markdown=True))
    if args.json:
        from .results import atomic_write

        atomic_write(args.json, results_json([(r, res[r]) for r in reps], args.model))
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
    e.add_argument("--pooling", help="cls | mean | first-last | static | static-debiased | ditto")
    e.add_argument("--head", help="Ditto head as L-H, 0-based (with --pooling ditto)")
    e.add_argument("--tasks", default="stsb-dev", help="stsb-dev | sts-all | comma list of sts12..sts16,stsb,sickr,stsb-dev")
    e.add_argument("--json", action="store_true", help="print JSON: task -> spearman")
    e.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    e.add_argument("--subsets", action="store_true", help="also print per-subset Spearman")
    e.add_argument("--anisotropy", action="store_true", help="also report mean cosine of random Wikipedia pairs")
    e.set_defaults(func=cmd_eval)

    d = sub.add_parser("ditto-search", help="grid-search the Ditto attention head on STS-B dev")
    _common(d)
    d.add_argument("--top", type=int, default=10)
    d.add_argument("--json", action="store_true")
    d.set_defaults(func=cmd_ditto_search)

    r = sub.add_parser("report", help="the README table: every baseline, paper templates +/- denoising, best Ditto head")
    _common(r)
    r.add_argument("--tasks", default="sts-all")
    r.add_argument("--template", action="append", help="template(s) instead of the paper's three (repeatable)")
    r.add_argument("--json", metavar="FILE", help="also write all numbers (with subsets) to FILE")
    r.set_defaults(func=cmd_report)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        return int(args.func(args) or 0)
    except PromptSearchError as exc:
        print(f"promptsearch {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"promptsearch {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
