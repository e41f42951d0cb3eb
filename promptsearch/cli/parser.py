"""The command line's flags: every subcommand and what it takes (commands load when they run)."""

from __future__ import annotations

import argparse
import sys

from .. import __version__
from ..paths import DEV_SET
from ..representation import READOUTS
from ..template import quote

PAPER_T = 'This sentence : "[X]" means [MASK] .'


class Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line that says what to do."""

    def error(self, message):  # noqa: D401
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")

    def parse_args(self, args=None, namespace=None):
        """Arguments from the shell arrive with undecodable bytes as lone surrogates: say so."""
        for a in sys.argv[1:] if args is None else args:
            try:
                a.encode("utf-8")
            except UnicodeEncodeError:
                shown = a.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
                self.exit(2,
                          f"{self.prog}: error: argument {quote(shown, 80)} is not valid UTF-8; pass text in UTF-8\n")
        self._other_data_flag(sys.argv[1:] if args is None else list(args))
        ns, extras = self.parse_known_args(args, namespace)
        if extras:  # said by the command's own parser, with the flags it has that are close to a typo'd one
            self._parser_of(ns).error(_unrecognized(extras, self._parser_of(ns)))
        return ns

    def _other_data_flag(self, argv: list[str]) -> None:
        """Another command's name for the data (eval --dataset, score --data, retrieval --tasks) refused with this
        command's, before argparse reads it: as an abbreviation it would be taken for another flag (eval --data is
        --data-dir) or said to be ambiguous (score --data: --data-dir or --dataset)."""
        subs = [a for a in self._actions if isinstance(a, argparse._SubParsersAction)]
        command = next((x for x in argv if not x.startswith("-")), None)
        if not subs or command not in subs[0].choices:
            return
        parser = subs[0].choices[command]
        for x in argv:
            name = x.split("=", 1)[0]
            own = _data_flag(name, parser)
            if own and not any(name in a.option_strings for a in parser._actions):
                parser.error(f"unrecognized arguments: {x}; did you mean {own}? ({name} is another command's name for "
                             "the data)")

    def _parser_of(self, ns) -> argparse.ArgumentParser:
        """The parser of the subcommand ``ns`` names (this one if none)."""
        for a in self._actions:
            if isinstance(a, argparse._SubParsersAction) and getattr(ns, a.dest, None) in a.choices:
                return a.choices[getattr(ns, a.dest)]
        return self


def _unrecognized(extras: list[str], parser: argparse.ArgumentParser) -> str:
    """argparse's 'unrecognized arguments' line, with 'did you mean --x?' for each unknown flag close to one of
    ``parser``'s (argparse suggests only from Python 3.14)."""
    import difflib  # lazy: start-up time (only an error needs it)

    flags = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    close = []
    for e in extras:
        name = e.split("=", 1)[0]
        if name.startswith("--") and name not in flags:
            close += [m for m in difflib.get_close_matches(name, flags, n=1, cutoff=0.6) if m not in close]
    template = [n for n in (e.split("=", 1)[0] for e in extras) if n in TEMPLATE_FLAGS]
    if template and parser.prog.endswith(" retrieval"):  # a flag of the STS commands, not a typo
        return (f"unrecognized arguments: {' '.join(extras)}; {template[0]} sets how a template reads [MASK] or fills "
                "[X], and retrieval reads pooled prompts only: drop it")
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    return f"unrecognized arguments: {' '.join(extras)}{hint}"


DATA_FLAGS = ("--dataset", "--tasks", "--data")  # what the data is called: search commands, eval, retrieval


def _data_flag(name: str, parser: argparse.ArgumentParser) -> str | None:
    """The flag ``parser`` names its data by, when ``name`` is another command's name for the data (None: not one)."""
    if name not in DATA_FLAGS:
        return None
    own = [f for f in DATA_FLAGS if f != name and any(f in a.option_strings for a in parser._actions)]
    return own[0] if own else None


TEMPLATE_FLAGS = ("--mlm-head", "--no-period", "--compat", "--demos")  # what a pooled-only command (retrieval) omits


def at_least(minimum: int, kind=int):
    """An argparse type: a number (``kind``) of at least ``minimum``.

    With ``kind=float`` and ``minimum=0``: finite, above 0."""
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a {'whole ' if kind is int else ''}number") from None
        if kind is float and not (minimum < v < float("inf")):
            raise argparse.ArgumentTypeError(f"must be a number above {minimum}, not {text}")
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {v}")
        return v
    return parse


positive = at_least(0, float)


def non_negative(text: str) -> float:
    """An argparse type: a finite number of at least 0."""
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= v < float("inf"):
        raise argparse.ArgumentTypeError(f"must be at least 0, not {text}")
    return v


def layer_numbers(text: str):
    """An argparse type: ``all``, or read-out layers as ``hidden_states`` indices ("3,4,5"; negative counts
    from the end) — parsed here, once; whether the model has them is checked when it is loaded."""
    if text.strip() == "all":
        return "all"
    try:
        return [int(x) for x in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give all, or layer numbers such as 3,4,5,6") from None


def _command(sub, name: str, func: str, **kw) -> Parser:
    """A subcommand whose ``func`` ("module:function" of this package) loads only when it runs."""
    p = sub.add_parser(name, **kw)
    p.set_defaults(func=func)
    return p


def _common(p: argparse.ArgumentParser, pooled: bool = False) -> None:
    """The model and data flags every command takes; ``pooled``: a command whose read-outs are pooled only (retrieval),
    so the [MASK] and template flags (--mlm-head, --no-period, --compat, --demos) are not offered (their defaults
    set)."""
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default="default",
                   help="'default' (bundled MiniLM), an HF id, or a local model directory")
    if not pooled:
        g.add_argument("--mlm-head", default=None, metavar="FILE", help="a train-head head.safetensors ('none': none; "
                                                                        "default: the shipped one)")
    where = ("default: $PROMPTSEARCH_DATA_DIR, or ../shared/data beside the current folder or the promptsearch "
             "checkout")
    g.add_argument("--data-dir", default=None, help=f"the built-in data: STS-B dev and SNLI dev, which the built-in "
                   f"retrieval tasks are made from ({where})" if pooled else f"STS data in SentEval layout ({where})")
    # a pooled-only command (retrieval) refuses the pair columns in one line (its data is no pairs): not offered
    g.add_argument("--columns", default=None, metavar="A,B,SCORE",
                   help=argparse.SUPPRESS if pooled else "pair columns of a user data set (default: "
                                                         "sentence1,sentence2,score)")
    g.add_argument("--subset-column", default=None, metavar="NAME",
                   help=argparse.SUPPRESS if pooled else "a column grouping a user data set's pairs into subsets")
    g.add_argument("--device", default=None, help="cpu, cuda, cuda:1 ..., or auto: a large model over every device "
                                                  "(default: cuda if any)")
    g.add_argument("--batch-size", type=at_least(1), default=None, help="rows per batch at most (default: as "
                                                                        "--max-tokens fit)")
    g.add_argument("--max-tokens", type=at_least(1), default=None, help="padded tokens per batch (default: 2048 on "
                                                                        "CPU, 65536 on CUDA)")
    g.add_argument("--bf16", dest="bf16", action="store_true", default=None, help="run under bf16 autocast (default: "
                                                                                  "where it is the faster precision)")
    g.add_argument("--no-bf16", dest="bf16", action="store_false", default=None, help="run in float32 (default: where "
                                                                                      "bf16 is not faster)")
    if not pooled:
        g.add_argument("--no-period", dest="add_period", action="store_false", help="don't end sentences with '.' "
                                                                                    "before they fill [X]")
    g.add_argument("--max-length", type=at_least(1), default=None, help="token limit per input (sentence truncated "
                                                                        "inside [X])")
    if pooled:
        p.set_defaults(mlm_head=None, add_period=True, compat="promptsearch", demos=None)
        g.add_argument("-q", "--quiet", action="store_true", help="only the results: no progress bars, and no data, "
                                                                  "step, precision or note lines")
        return
    g.add_argument("--compat", choices=["promptsearch", "reference"], default="promptsearch",
                   help="reference: kongds/Prompt-BERT's inputs exactly")
    g.add_argument("--demos", default=None, metavar="FILE", help="in-context demonstrations before the template "
                                                                 "(PromptEOL style, causal LMs): 'sentence<TAB>word' "
                                                                 "lines")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bars, no precision line")


def _evaluate(sub) -> None:
    e = _command(sub, "eval", "evaluate:cmd_eval", help="evaluate one template or pooling on STS tasks",
                       description="Spearman x100 of cosine similarity on STS tasks for one representation.")
    _common(e)
    e.add_argument("--template", action="append", help="e.g. 'This sentence : \"[X]\" means [MASK] .'; twice or more: "
                                                       "their ensemble")
    e.add_argument("--denoise", action="store_true", help="subtract the template bias (position-shifted template-only "
                                                          "pass)")
    e.add_argument("--pooling", help="cls | mean | first-last | static | static-debiased | ditto; with --template: "
                                     "topk-static (Eq. 3)")
    e.add_argument("--head", help="Ditto head as L-H, 0-based (with --pooling ditto)")
    e.add_argument("--layer", type=int, help="read the template's state at this layer (0: embeddings; default: the "
                                             "last)")
    e.add_argument("--readout", choices=READOUTS, default=None, help="with --template: mask (default), mean (all "
                                                                     "tokens), sentence-mean (the sentence's tokens), "
                                                                     "cls (the first token)")
    e.add_argument("--tasks", default=DEV_SET, help="stsb-dev | sts-all (the 7 test sets) | comma list of "
                                                    "sts12..sts16, stsb, sickr, stsb-dev, stsb-train, sick-trial, "
                                                    "sick-train, stsb-original-dev, stsb-original-test, or data "
                                                    "files (default stsb-dev)")
    e.add_argument("--json", action="store_true", help="print JSON: task -> spearman")
    e.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    e.add_argument("--subsets", action="store_true", help="also print per-subset Spearman")
    e.add_argument("--anisotropy", action="store_true", help="also report mean cosine of random Wikipedia pairs")
    e.add_argument("--template-dir",
                   help="a directory written by optiprompt or finetune (its model, template, vectors)")

    d = _command(sub, "ditto-search", "evaluate:cmd_ditto_search", help="grid-search the Ditto attention head on STS-B "
                                                                        "dev")
    _common(d)
    d.add_argument("--dataset", default=DEV_SET, help="the set heads are scored on (default stsb-dev; any data set)")
    d.add_argument("--top", type=at_least(1), default=10)
    d.add_argument("--json", action="store_true")

    r = _command(sub, "report", "evaluate:cmd_report", help="the paper's comparison on one model: every baseline, "
                                                            "the paper's templates +/- denoising, the best Ditto head")
    _common(r)
    r.add_argument("--tasks", default="sts-all")
    r.add_argument("--template", action="append", help="template(s) or results-entry keys instead of the paper's three "
                                                       "(repeatable)")
    r.add_argument("--readout", choices=READOUTS, default=None, help="read the templates' passes this way (mask: "
                                                                     "[MASK] raw and denoised, the default; mean, "
                                                                     "sentence-mean, cls: pooled)")
    r.add_argument("--json", metavar="FILE", help="also write all numbers (with subsets) to FILE")

    pr = _command(sub, "predict", "evaluate:cmd_predict", help="top-k [MASK] tokens without and with template "
                                                               "denoising (Table 7)")
    _common(pr)
    pr.add_argument("sentences", nargs="*")
    pr.add_argument("--template", default=PAPER_T)
    pr.add_argument("--top-k", type=at_least(1), default=5)
    pr.add_argument("--denoise", choices=["both", "yes", "no"], default="both", help="which columns to show")
    pr.add_argument("--json", action="store_true")

    t9 = _command(sub, "table9", "evaluate:cmd_table9", help="[MASK] state vs avg. top-200 static embeddings (Eq. 3), "
                                                             "+/- denoising")
    _common(t9)
    t9.add_argument("--template", default=PAPER_T)
    t9.add_argument("--tasks", default="stsb-dev,stsb")


def _search_flags(p, out: str | None) -> None:
    _common(p)
    g = p.add_argument_group("scoring")
    g.add_argument("--out", default=out, help=f"results JSON (default {out}); an existing one is resumed")
    g.add_argument("--dataset", default=DEV_SET, help="scoring set(s): stsb-dev, or a list such as stsb-dev,sick-trial")
    g.add_argument("--objective", choices=["mean", "min"], default="mean", help="over several sets: their mean or min "
                                                                                "Spearman")
    g.add_argument("--no-denoise", dest="denoise", action="store_false",
                   help="rank by the raw [MASK] state (default: denoised; both are cached)")
    g.add_argument("--cache", default=None, help="score cache (JSONL; default $PROMPTSEARCH_CACHE or "
                                                 "~/.cache/promptsearch/scores.jsonl)")
    g.add_argument("--no-cache", action="store_true", help="neither read nor write the score cache")
    g.add_argument("--precision", choices=["auto", "fp32", "bf16", "int8"], default="auto",
                   help="the precision racing and pruning screen candidates in (auto: the run's; every score a "
                        "results file keeps is computed in the run's precision, --bf16/--no-bf16)")
    g.add_argument("--validate-top", type=at_least(0), default=None, metavar="K",
                   help="held-out sets score, after the search, the chosen representation and the best [MASK] template "
                        "(the default); K: also the best K, the model's own and greedy's path; 0: no held-out scores")
    g.add_argument("--validate-on", default="stsb,sickr", metavar="TASKS",
                   help="held-out sets for --validate-top (default stsb,sickr: the STS-B and SICK-R test sets; any "
                        "data set the tool reads)")


def _work_flags(p) -> None:
    """Spreading a search's scoring over worker processes (``promptsearch worker``) through a database."""
    g = p.add_argument_group("several processes or machines")
    g.add_argument("--storage", metavar="URL", help="a database (postgresql://user:password@host/db, or "
                                                    "sqlite:///work.db on one machine) where candidates wait for "
                                                    "'promptsearch worker' processes; this process scores too")
    g.add_argument("--study-name", metavar="NAME", help="the work study's name (default: one derived from the model, "
                                                        "data and settings)")
    g.add_argument("--no-local", action="store_true", help="with --storage: leave all the scoring to the workers")
    g.add_argument("--grace", type=at_least(2), default=90, metavar="SECONDS",
                   help="with --storage: a worker silent this long is taken for dead and its candidate queued again "
                        "(default 90)")


def _search(sub) -> None:
    gr = _command(sub, "greedy", "search:cmd_greedy", help="greedy template search (relation tokens, then prefix "
                                                           "tokens; PromptBERT Table 4)")
    _search_flags(gr, "best.json")
    gr.add_argument("--vocabulary", default="greedy", help="relation/prefix vocabulary: a shipped name or a .json path")
    gr.add_argument("--max-steps", type=at_least(0), default=8, help="most prefix tokens to add")
    gr.add_argument("--no-racing", action="store_true", help="score every candidate on the full set (the paper's "
                                                             "protocol)")
    gr.add_argument("--layers", type=layer_numbers, help="a last step over read-out layers: all, or hidden_states "
                                                         "indices such as 3,4,5")
    gr.add_argument("--demos-pool", metavar="FILE", help="'sentence<TAB>word' lines: put the best one (or pair) before "
                                                         "the template")
    gr.add_argument("--ensemble", type=at_least(1), default=1, metavar="K",
                    help="average up to K of the best templates")
    gr.add_argument("--readouts", default="mean,sentence-mean", metavar="LIST",
                    help="a last step: prompts (the vocabulary's readout_prompts and the chosen template) read out "
                         "each of these ways (mean, sentence-mean, cls; 'none': no such step)")
    gr.add_argument("--readout-steps", type=at_least(0), default=0, metavar="N",
                    help="then up to N greedy prefix steps on the best pooled prompt (the vocabulary's prefix tokens, "
                         "quotes)")
    gr.add_argument("--min-gain", default="auto", help="points a step must gain to be taken (auto: its bootstrap std. "
                                                       "error)")
    gr.add_argument("--race-rungs", default="0.125,0.25,0.5", metavar="FRACTIONS",
                    help="the racing rungs: shares of the dev pairs (default 0.125,0.25,0.5)")
    gr.add_argument("--finalists", type=at_least(1), default=2, help="candidates per step that get a full-set score "
                                                                     "(default 2)")
    _work_flags(gr)

    wk = _command(sub, "worker", "search:cmd_worker", help="score candidates for a search started with --storage (on "
                                                           "any machine that reaches the database)")
    _common(wk)
    wk.set_defaults(model=None, add_period=None)
    wk.add_argument("--storage", metavar="URL", required=True, help="the database the search was started with")
    wk.add_argument("--study-name", metavar="NAME", help="the work study (default: the newest open one)")
    wk.add_argument("--grace", type=at_least(2), default=90, metavar="SECONDS", help="as the search's --grace (default "
                                                                                     "90)")
    wk.add_argument("--wait", type=at_least(0), default=600, metavar="SECONDS",
                    help="how long to wait for a search to start (default 600)")
    wk.add_argument("--cache-dir", default=None, help="a retrieval search's jobs: where this machine keeps corpus "
                                                      "vectors (default ~/.cache/promptsearch/retrieval)")

    op = _command(sub, "optuna", "search:cmd_optuna", help="TPE search over a template grammar with successive-halving "
                                                           "pruning (resumable, multi-worker)")
    _search_flags(op, "optuna.json")
    op.add_argument("--trials", type=at_least(1), default=60, help="total finished trials for the study (all workers "
                                                                   "together)")
    op.add_argument("--grammar", default="grammar", help="grammar JSON: a shipped name or a path")
    op.add_argument("--storage", help="Optuna RDB URL (default: sqlite:///<out>.db beside --out); share it to run "
                                      "several workers")
    op.add_argument("--study-name", help="default: promptsearch-<model>-<dataset>-<denoised|raw>")
    op.add_argument("--seed", type=at_least(0), default=None, help="TPE sampler seed")
    op.add_argument("--no-prune", action="store_true", help="score every trial on the full set")
    op.add_argument("--batch-trials", type=at_least(1), default=8, metavar="N", help="trials asked at once and encoded "
                                                                                     "together (default 8)")
    op.add_argument("--layers", type=layer_numbers, help="the read-out layer as a trial parameter: all, or "
                                                         "hidden_states indices such as 3,4,5")
    op.add_argument("--readouts", metavar="LIST", help="the read-out as a trial parameter: mask or one of these pooled "
                                                       "ones (mean, sentence-mean, cls; a pooled trial is scored on "
                                                       "the full set)")
    op.add_argument("--pareto", action="store_true", help="with several --dataset sets: one objective each, the Pareto "
                                                          "front")
    op.add_argument("--compare", metavar="RESULTS", help="a results file (e.g. best.json from greedy) to compare the "
                                                         "best with")
    op.add_argument("--top", type=at_least(1), default=10)

    t5 = _command(sub, "t5", "search:cmd_t5", help="definition-driven generation: T5 (or the MLM) fills spans around "
                                                   "WordNet (word, definition) pairs")
    _search_flags(t5, "t5.json")
    t5.add_argument("--generator", choices=["t5", "mlm"], default="t5", help="t5 (needs --model-t5) or mlm (offline: "
                                                                             "the searched model)")
    t5.add_argument("--model-t5", default="google-t5/t5-base", help="T5 HF id or local path")
    t5.add_argument("--num-templates", type=at_least(1), default=500, help="distinct templates to collect and score")
    t5.add_argument("--num-pairs", type=at_least(1), default=200, help="WordNet pairs per generation round")
    t5.add_argument("--num-beams", type=at_least(1), default=8, help="T5 beam size (= sequences kept per pair)")
    t5.add_argument("--wordnet-dir", default="/usr/share/wordnet", help="folder with WordNet's data.noun/verb/adj/adv")
    t5.add_argument("--seed", type=at_least(0), default=0)
    t5.add_argument("--compare", metavar="RESULTS", help="a results file to compare the best with")
    t5.add_argument("--top", type=at_least(1), default=10)
    _work_flags(t5)

    sc = _command(sub, "score", "search:cmd_score", help="score given templates on STS-B dev and print the ranking")
    _search_flags(sc, None)
    sc.add_argument("templates", nargs="*", help="templates, each with one [X] and one [MASK]")
    sc.add_argument("--file", help="a file with one template a line (# comments allowed)")
    sc.add_argument("--template-dir", help="a directory written by optiprompt or finetune (scores its template with "
                                           "its vectors)")
    sc.add_argument("--readout", choices=READOUTS, default=None, help="how each template's pass becomes a vector: its "
                                                                      "[MASK] state (default; with --template-dir, the "
                                                                      "folder's), the mean over all tokens, over the "
                                                                      "sentence's tokens, or the first ([CLS]) token")
    _work_flags(sc)


def _retrieval(sub) -> None:
    r = _command(sub, "retrieval", "retrieval:cmd_retrieval",
                 help="search query prompt x document prompt x pooled read-out on retrieval data (nDCG@10)",
                 description="Score the model's own query/document prompts and pooling first, then greedily the "
                             "shipped retrieval prompts (query prompts, document prompts, read-outs) on your "
                             "queries, corpus and relevance judgements; the corpus is encoded once per document "
                             "prompt and read-out. The answer is the model's own unless something beats it beyond "
                             "noise.")
    _common(r, pooled=True)
    g = r.add_argument_group("retrieval")
    g.add_argument("--data", default="demo", help="demo (paraphrase retrieval built from STS-B dev, offline), "
                                                  "snli-entailment (premise to entailed hypothesis, from SNLI dev, "
                                                  "offline), a BEIR "
                                                  "folder (corpus.jsonl, queries.jsonl, qrels/SPLIT.tsv), a Hugging "
                                                  "Face dataset folder or hub id in MTEB's layout; several joined by "
                                                  "commas are searched as one (the mean of their nDCG@10, or "
                                                  "--objective min)")
    g.add_argument("--objective", choices=["mean", "min"], default="mean", help="over several --data sets: their mean "
                                                                                "or min nDCG@10 (the worst set's)")
    g.add_argument("--split", default="test", help="the qrels split (default test)")
    g.add_argument("--relevant-from", default=None, metavar="SCORE",
                   help="graded judgments: the lowest qrel score that counts as relevant (default: scores must be 0 "
                        "or 1)")
    g.add_argument("--description", default=None, metavar="TEXT", action="append",
                   help="one sentence saying what the task is, filled into 'Instruct: {task}' prompts (default: the "
                        "data's, e.g. 'Given a query, retrieve relevant passages'); with several --data sets, once "
                        "for all or once per set, in order")
    g.add_argument("--out", default="retrieval.json", help="results JSON (default retrieval.json); an existing one is "
                                                           "resumed")
    g.add_argument("--queries", type=at_least(1), default=None, metavar="N",
                   help="score a seeded random sample of N queries (noisier; it saves the queries' encoding and "
                        "scoring only: the corpus stays whole, and racing, told apart by fewer queries, may drop "
                        "fewer document prompts, so it can take longer); with several --data sets, N of each set's")
    g.add_argument("--holdout", type=non_negative, default=0.2, metavar="F",
                   help="the share of the queries the search never sees (default 0.2; 0: none): an answer other than "
                        "the model's own must beat it there too, since the best of many prompts is chosen for how it "
                        "scored on the queries searched")
    g.add_argument("--validate-on", default="", metavar="DATA",
                   help="other retrieval sets (as --data takes them, joined by commas) the answer, the model's own and "
                        "the search's best are scored on afterwards, to see how the prompts carry over (not search "
                        "work: the answer stays the search's; default none)")
    g.add_argument("--validate-top", type=at_least(0), default=None, metavar="K",
                   help="with --validate-on: also the K best of the search (default none besides those three; 0: no "
                        "validation)")
    g.add_argument("--seed", type=at_least(0), default=0,
                   help="the --holdout and --queries draws' seed (default 0; the same on every process sharing a "
                        "study or work study: it decides which queries are searched)")
    g.add_argument("--no-racing", action="store_true",
                   help="score every document prompt on the whole corpus (default: the greedy document step screens "
                        "them on a smaller corpus first, and only the ones in contention are encoded over all of it; "
                        "with --strategy optuna, a trial with a new document prompt is screened there and pruned "
                        "unless in the better half)")
    g.add_argument("--race-share", type=float, default=0.1, metavar="F",
                   help="racing's smaller corpus: every judged document and this share of the others (default 0.1)")
    g.add_argument("--readouts", default=None, metavar="LIST",
                   help="pooled read-outs the last step tries, comma-separated (default: mean, sentence-mean, cls, "
                        "sentence-cls, max, lasttoken; a causal LM: lasttoken, mean, sentence-mean); the model's own "
                        "is always tried")
    g.add_argument("--min-gain", type=positive, default=None, metavar="G",
                   help="the nDCG@10 gain (a fraction, e.g. 0.005) a step must exceed (default: its standard error)")
    g.add_argument("--generate", metavar="MODEL",
                   help="also try query prompts a language model writes for the task (a causal LM, ideally "
                        "instruction-tuned, or a seq2seq model; Hugging Face id or path): each sampled instruction "
                        "becomes 'Instruct: ...\\nQuery: '")
    g.add_argument("--generate-n", type=at_least(1), default=16, metavar="N",
                   help="with --generate: instructions sampled (default 16; kept in --out, so a resumed run reuses "
                        "them)")
    g.add_argument("--prompts", default="retrieval", metavar="FILE",
                   help="the prompt library: a .json file with 'query' and 'document' lists of {prompt, source} "
                        "(default: the shipped one)")
    g.add_argument("--cache-dir", default=None, help="where corpus vectors are kept (default "
                                                     "~/.cache/promptsearch/retrieval)")
    g.add_argument("--float16-above-gib", type=non_negative, default=None, metavar="GIB",
                   help="keep the corpus's vectors in float16 when their float32 size is above GIB (default 2; 0: "
                        "always): half the disk, the metrics then off sentence-transformers' by float16 rounding "
                        "(float32 below it: the same numbers)")
    g.add_argument("--no-cache", action="store_true", help="keep no corpus vectors after the run")
    s = r.add_argument_group("strategy")
    s.add_argument("--strategy", choices=("greedy", "optuna"), default="greedy",
                   help="greedy: query prompts, then document prompts, then read-outs, each step taken beyond its "
                        "noise (default); optuna: TPE over all three, query prompts also composed by the library's "
                        "grammar (resumable, shareable across machines with --storage)")
    s.add_argument("--trials", type=at_least(1), default=None, help="optuna: total finished trials for the study (all "
                                                                    "processes together; default 40)")
    s.add_argument("--storage", metavar="URL",
                   help="greedy: a database (postgresql://user:password@host/db, or sqlite:///work.db on one machine) "
                        "where candidates wait for 'promptsearch worker' processes (this process scores too); optuna: "
                        "the study's database (default sqlite:///<out>.db beside --out): run the same command on "
                        "other machines to share it")
    s.add_argument("--study-name", help="greedy: the work study (default: one derived from the model, data and "
                                        "settings); optuna: default "
                                        "promptsearch-retrieval-<model>-<data>-<fingerprint>")
    s.add_argument("--no-local", action="store_true",
                   help="greedy with --storage: leave all the scoring to the workers")
    s.add_argument("--tpe-seed", type=at_least(0), default=None, metavar="N",
                   help="optuna: the TPE sampler's seed, for a reproducible study (default: none, each process its own "
                        "draws; processes sharing a study need different ones, or none)")
    s.add_argument("--batch-trials", type=at_least(1), default=None, metavar="N",
                   help="optuna: trials asked at once and scored together (default 8)")


def _train_flags(p, out: str) -> None:
    _common(p)
    g = p.add_argument_group("training")
    g.add_argument("--train-file", help="a .txt (one sentence a line), a .csv/.tsv/.json/.jsonl/.parquet file or "
                                        "dataset folder with a text column, or a hub id (default: the data folder's "
                                        "Wikipedia sample); sup: sent0,sent1,hard_neg")
    g.add_argument("--text-column", default=None, help="the text column of --train-file (default: text, sentence, ...)")
    g.add_argument("--dataset", default=DEV_SET, help="dev set for choosing the best checkpoint (default stsb-dev; any "
                                                      "data set)")
    g.add_argument("--train-batch-size", type=at_least(2), default=None,
                   help="sentences per step (at least 2: the other sentences of a batch are the negatives)")
    g.add_argument("--lr", type=positive, default=None,
                   help="learning rate (default: finetune 1e-5 unsup, 5e-5 sup, decayed linearly to 0; "
                        "optiprompt 3e-3)")
    g.add_argument("--max-seq-length", type=at_least(1), default=32, help="sentence tokens kept per example")
    g.add_argument("--eval-steps", type=at_least(1), default=None, help="evaluate on STS-B dev every N steps")
    g.add_argument("--micro-batch", type=at_least(0), default=64, help="micro-batch for gradient caching (0: whole "
                                                                       "batch at once)")
    g.add_argument("--micro-tokens", type=at_least(1), default=None, metavar="N", help="micro-batches filled to N "
                                                                                       "sentence tokens, in length "
                                                                                       "order (rows at most "
                                                                                       "--micro-batch)")
    g.add_argument("--seed", type=at_least(0), default=42,
                   help="seed of the batch order and dropout; the same seed and settings give the same run "
                        "(default 42)")
    g.add_argument("--seeds", default=None, metavar="S1,S2,...",
                   help="train once per seed (OUT/seed-N each) and report mean ± std on every task (overrides --seed)")
    g.add_argument("--out", default=out, help=f"output directory (default {out}); a checkpoint there is resumed (by a "
                                              "run of the same settings; finetune refuses other settings)")
    g.add_argument("--no-resume", action="store_true", help="ignore a checkpoint in --out and start over")
    g.add_argument("--keep-checkpoint", action="store_true", help="keep the resume checkpoint (OUT/resume/) when "
                                                                  "training ends (default: removed, so OUT holds the "
                                                                  "trained model alone)")
    g.add_argument("--final-tasks", default="sts-all", help="tasks of the before/after table at the end")


def _train(sub) -> None:
    th = _command(sub, "train-head", "train:cmd_train_head", help="learn a [MASK] prediction head on the frozen "
                                                                  "encoder (models without an MLM head)")
    _common(th)
    th.add_argument("--out", default="head", help="output directory (head.safetensors, train-head.json, checkpoint)")
    th.add_argument("--corpus", default="wiki,wordnet,snli,sts",
                    help="comma list: wiki (Wikipedia sample), wordnet (glosses + examples), snli, sts (STS-B/SICK "
                         "train), or text files / data sets (one sentence a line, or a text column)")
    th.add_argument("--wordnet-dir", default=None, help="WordNet data files (default /usr/share/wordnet)")
    th.add_argument("--max-sentences", type=at_least(1), default=None, help="use a random subset of the corpus")
    th.add_argument("--decoder", choices=["rank", "full", "tied"], default="rank",
                    help="rank: word embeddings + a trainable low-rank correction (small file); full: untied; tied: "
                         "BERT's")
    th.add_argument("--rank", type=at_least(1), default=64)
    th.add_argument("--depth", type=at_least(1), default=1, help="dense+GELU+LayerNorm blocks before the decoder")
    th.add_argument("--epochs", type=at_least(1), default=4)
    th.add_argument("--head-batch-size", type=at_least(1), default=1024, help="masked states per training step")
    th.add_argument("--lr", type=positive, default=2e-3)
    th.add_argument("--heldout", type=at_least(1), default=2000, help="sentences whose masked tokens are held out")
    th.add_argument("--seed", type=at_least(0), default=0)
    th.add_argument("--cache-dir", default=None, help="where masked states are cached (default "
                                                      "~/.cache/promptsearch/head)")

    op = _command(sub, "optiprompt", "train:cmd_optiprompt", help="learn continuous template vectors with the encoder "
                                                                  "frozen (unsup SimCSE loss)")
    _train_flags(op, "runs/optiprompt")
    op.add_argument("--template", help="manual template to start from (default: the paper's first)")
    op.add_argument("--steps", type=at_least(1), default=200)
    op.add_argument("--denoise", action="store_true", help="train and evaluate the denoised [MASK] state")

    f = _command(sub, "finetune", "train:cmd_finetune", help="prompt-based contrastive fine-tuning with template "
                                                             "denoising (unsup or sup NLI)")
    _train_flags(f, "runs/finetune")
    f.add_argument("--mode", choices=["unsup", "sup"], default="unsup",
                   help="unsup: two views of each sentence of --train-file (two templates, or one with dropout), "
                        "in-batch negatives; sup: NLI triplets (default unsup)")
    f.add_argument("--templates", metavar="RESULTS",
                   help="a search's results JSON: unsup takes its top-2, sup its best")
    f.add_argument("--template", action="append", help="a template (repeatable; unsup uses two)")
    f.add_argument("--readout", choices=READOUTS, default=None, help="train this read-out of the templates' passes "
                                                                     "(mask: [MASK], the default; mean, sentence-mean, "
                                                                     "cls: pooled; default with --templates: the "
                                                                     "file's answer's)")
    f.add_argument("--template-dir", help="an optiprompt output directory (its template and vectors)")
    f.add_argument("--no-denoise", dest="denoise", action="store_false", help="don't subtract template biases")
    f.add_argument("--epochs", type=positive, default=1.0,
                   help="passes over the training data (default 1; may be a fraction); the run says its steps and, "
                        "after the first, about how long it takes")
    f.add_argument("--max-steps", type=at_least(1), default=None,
                   help="train this many steps instead of --epochs (a resumed run may be given more)")


def build_parser() -> Parser:
    p = Parser(prog="promptsearch", description="Find prompt templates that turn a language model (masked or causal) "
                                                "into a sentence encoder, and retrieval prompts for an embedding "
                                                "model.")
    p.add_argument("--version", action="version", version=f"promptsearch {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    _evaluate(sub)
    _train(sub)
    _search(sub)
    _retrieval(sub)
    ex = _command(sub, "export", "train:cmd_export", help="write a searched representation as a plain "
                                                          "sentence-transformers model folder")
    ex.add_argument("results", nargs="?", help="a results JSON: its chosen representation, of its model (a "
                                               "retrieval search's: its query and document prompts, for "
                                               "encode_query / encode_document)")
    ex.add_argument("--template", metavar="KEY", help="a representation instead, e.g. 'query: [X] @sentence-mean' "
                                                      "(with --model)")
    ex.add_argument("--model", default=None, help="the model (default: the results file's, else 'default')")
    ex.add_argument("--out", required=True, help="a new (or empty) folder for the model")
    ex.add_argument("--max-length", type=at_least(1), default=None, metavar="N",
                    help="with --template: the longest input in tokens (default: the model's; a results file's is the "
                         "length it was scored with; a retrieval results file's: the model's, or this)")
    ex.add_argument("--description", default=None, metavar="TEXT",
                    help="a retrieval results file searched over several --data sets: one sentence saying what your "
                         "task is, written into its prompts' {task}")
    pl = _command(sub, "plot", "search:cmd_plot", help="pictures of a results file: a greedy path, an Optuna study, "
                                                       "scores")
    pl.add_argument("results", help="a results JSON written by a search")
    pl.add_argument("--out", help="the picture: .svg, .png or .pdf (default: the results file's name, .svg)")
    pl.add_argument("--storage", help="an Optuna run's storage URL with its password (the results file records it "
                                      "without)")
    tu = _command(sub, "tui", "search:cmd_tui", help="terminal UI: live leaderboard of a search, [MASK] predictions")
    tu.add_argument("--results", default="best.json", help="results JSON to follow (default best.json)")
    tu.add_argument("--storage", help="an Optuna storage URL to follow instead")
    tu.add_argument("--study-name", help="the Optuna study in --storage to follow (give both, or --results)")
    tu.add_argument("--model", default="default", help="model for predictions and for searches started from the TUI")
    tu.add_argument("--mlm-head", default=None, metavar="FILE", help="a head.safetensors from train-head for the "
                                                                     "predictions")
    tu.add_argument("--dataset", default=DEV_SET, help="data set for searches started from the TUI and for random "
                                                          "sentences (default stsb-dev; any data set the tool reads)")
    return p
