"""eval, ditto-search, report, predict, table9: numbers and predictions for given representations."""

from __future__ import annotations

import json
import sys
import time

from ..data import DEV_SET, check_data, expand_tasks, one_dataset
from ..encoding.reps import MaskState, rep_named
from ..errors import worded
from ..eval import anisotropy, evaluate_reps, evaluators
from ..eval.ditto import best_head_line, format_heads, search_heads
from ..eval.predict import check_sentences, format_predictions, head_note, predict, top_k_note
from ..eval.tables import check_report_file, eval_output, report, report_templates, table9
from ..model.saved import read_config
from . import options as o


def cmd_eval(args) -> int:
    tasks = expand_tasks(args.tasks)
    check_data(tasks, args.data_dir)  # fail fast on a missing data dir, before loading the model
    enc, template, denoise, layer, readout = None, args.template, args.denoise, args.layer, args.readout
    if args.template_dir and not (args.template or args.pooling):  # the directory supplies the template (and layer)
        enc = o.encoder(args, args.template_dir)
        template, denoise, layer, readout = enc.folder_options(args.denoise, args.layer, args.readout)
    rep = rep_named(template, denoise, args.pooling, args.head, layer, readout, args.demos)  # None: the model's own
    enc = enc or (o.encoder(args, args.template_dir) if args.template_dir else o.encoder(args))
    own = rep is None
    rep = enc.resolve(enc.own_rep() if rep is None else rep)  # a Ditto head checked against the model before any pass
    t0 = time.time()
    res = evaluate_reps(enc, [rep], evaluators(tasks, o.data(args)), o.data(args))[rep]
    aniso = anisotropy(enc, [rep])[rep] if args.anisotropy else None
    if not args.json:
        said = (f" (the model's own: {enc.describe_own()})" if own
                else " (the raw [MASK] state; --denoise subtracts the template's bias, as score and the searches rank "
                     "it by default)" if isinstance(rep, MaskState) and not rep.denoise else "")
        print(f"model: {_loaded(args)}   representation: {rep.label}{said}   ({time.time() - t0:.1f}s)")
    print(eval_output(rep, res, tasks, aniso, args.json, args.markdown, args.subsets))
    return 0


def _loaded(args) -> str:
    """What was loaded, named by itself: the model, or a trained folder and what it holds."""
    if not args.template_dir:
        return args.model

    cfg = read_config(args.template_dir) or {}
    held = ("OptiPrompt soft vectors on " + str(cfg.get("base_model", "?")) if cfg.get("soft_prompt")
            else "fine-tuned weights" if cfg.get("finetune") else "a trained folder")
    return f"{args.template_dir} ({held})"


def cmd_ditto_search(args) -> int:
    task = one_dataset(args.dataset)
    check_data([task], args.data_dir)
    scores = search_heads(o.encoder(args), task, o.data(args))
    heads = [{"head": f"{layer}-{h}", "spearman": round(s, 4)} for layer, h, s in scores]
    print(json.dumps(heads, indent=2) if args.json
          else f"{format_heads(scores, top=args.top)}\n{worded(best_head_line(scores))}")
    return 0


def cmd_report(args) -> int:
    """Every baseline, the paper's templates raw and denoised, and the best Ditto head."""
    tasks = expand_tasks(args.tasks)
    check_data(tasks + [DEV_SET], args.data_dir)  # the Ditto head is chosen on STS-B dev
    if args.json:
        check_report_file(args.json)
    enc, t0 = o.encoder(args), time.time()
    table = report(enc, tasks, args.model, report_templates(enc, args.template, args.readout), args.demos, o.data(args),
                   args.json, log=o.say)
    print(f"model: {args.model}   ({time.time() - t0:.0f}s; Spearman x100 of cosine; anisotropy = mean cosine of "
          f"random Wikipedia pairs)\n{table}")
    return 0


def cmd_predict(args) -> int:
    template, sentences = o.template(args, args.template).text, check_sentences(args.sentences)
    enc = o.encoder(args)
    if note := head_note(enc, args.model, args.quiet):
        print(note, file=sys.stderr)
    if not args.quiet and (note := top_k_note(enc, args.top_k)):
        o.say(note)
    preds = predict(enc, enc.prepare(sentences), template, top_k=args.top_k)
    rows = [{"sentence": p.sentence, "raw": p.raw, "denoised": p.denoised} for p in preds]
    print(json.dumps(rows, indent=2) if args.json else format_predictions(preds, template, args.denoise))
    return 0


def cmd_table9(args) -> int:
    """PromptBERT Table 9: [MASK] state vs Eq. 3 (avg. of top-200 static embeddings), +/- denoising."""
    tasks, template = expand_tasks(args.tasks), o.template(args, args.template).text
    check_data(tasks, args.data_dir)
    table = table9(o.encoder(args), template, tasks, o.data(args))
    print(f"model: {args.model}   template: {template}\n{table}")
    return 0
