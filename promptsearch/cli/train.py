"""optiprompt, finetune, train-head: training runs, each resumable, with their before/after tables."""

from __future__ import annotations

import sys
from pathlib import Path

from ..data import check_data, expand_tasks, load_triplets, one_dataset, snli_triplets, training_corpus
from ..errors import PromptSearchError
from ..fileio import check_writable
from ..library import default_template
from ..model.loading import DEFAULT_MODEL, default_model_path
from ..search.results import Results
from ..search.validate import known_scores
from ..train.export import check_export, export_representation, export_retrieval, export_target, retrieval_answer
from ..train.finetune import FinetuneConfig, choose_training, finetune, prepare_encoder
from ..train.finetune import summary_line as finetune_line
from ..train.head import HeadConfig, HeadData, HeadTrainSettings, head_model, run_train_head
from ..train.head_corpus import corpus_parts, training_sentences
from ..train.loop import TrainRun, trained_rep
from ..train.optiprompt import OptiPromptConfig, train_optiprompt
from ..train.optiprompt import summary_line as optiprompt_line
from ..train.seeds import parse_seeds, seed_outputs, seeds_report
from . import options as o


def _start(args) -> list[int]:
    """What fails fast (--seeds, the data, --out) before the corpus or a model loads; the seeds."""
    seeds = parse_seeds(args.seeds, args.seed)
    check_data(expand_tasks(args.final_tasks) + [one_dataset(args.dataset)], args.data_dir)
    check_writable(Path(args.out) / "promptsearch.json")
    return seeds


def _dev(args) -> TrainRun:
    """How every training run is run: dev set, data, resume, the checkpoint kept or not."""
    return TrainRun(dev_dataset=one_dataset(args.dataset), data=o.data(args), resume=not args.no_resume,
                    keep_checkpoint=args.keep_checkpoint, scores=known_scores)  # measured before: from the cache


def _config(args, seed: int) -> dict:
    """The config fields both trainers take from the flags (None: the trainer's default)."""
    return dict(lr=args.lr, batch_size=args.train_batch_size, max_seq_length=args.max_seq_length,
                eval_steps=args.eval_steps,
                micro_batch=args.micro_batch, micro_tokens=args.micro_tokens, denoise=args.denoise, seed=seed)


def _table(args, seeds, template: str, labels, readout: str | None = None, layer: int | None = None) -> int:
    """The before/after table of what was trained (several seeds: mean ± std, also in OUT/seeds.json)."""
    r = trained_rep(template, args.denoise, layer, readout)
    print(seeds_report(lambda: o.encoder(args), lambda path: o.encoder(args, path), r, expand_tasks(args.final_tasks),
                       args.out, seeds, labels, _dev(args)))
    return 0


def cmd_optiprompt(args) -> int:
    seeds, corpus = _start(args), training_corpus(args.train_file, args.text_column, args.data_dir)
    enc = o.encoder(args, training=True)
    template = o.template(args, args.template).text if args.template else default_template(enc.model.config.model_type,
                                                                                           enc.model.causal)
    for i, (seed, out) in enumerate(zip(seeds, seed_outputs(args.out, seeds))):
        cfg = OptiPromptConfig(template=template, steps=args.steps, **_config(args, seed))
        summary = train_optiprompt(enc if i == 0 else o.encoder(args, training=True), corpus, cfg, str(out), args.model,
                                   _dev(args))
        print(optiprompt_line(summary, cfg, out, len(seeds) > 1))
    return _table(args, seeds, template, ["manual template", "OptiPrompt vectors"])


def cmd_finetune(args) -> int:
    seeds = _start(args)
    chosen = choose_training(args.mode, [o.template(args, t) for t in args.template or []],
                             Results.load(args.templates) if args.templates else None, args.template_dir, args.readout,
                             args.model, o.say)
    templates = chosen.templates
    if args.mode == "unsup":
        data = training_corpus(args.train_file, args.text_column, args.data_dir)
    else:
        data = load_triplets(args.train_file) if args.train_file else snli_triplets(args.data_dir)
    for i, (seed, out) in enumerate(zip(seeds, seed_outputs(args.out, seeds))):
        enc = prepare_encoder(o.encoder(args, training=True), args.model, templates[0], chosen.soft)
        cfg = FinetuneConfig(mode=args.mode, templates=templates, epochs=args.epochs, max_steps=args.max_steps,
                             layer=chosen.layer, readout=chosen.readout, **_config(args, seed))

        def announce(views: str, first: bool = i == 0) -> None:  # said once the run is past its checks
            if first:
                print(f"fine-tuning ({args.mode}) with template(s): " + " | ".join(templates) + f"\n{views}",
                      file=sys.stderr)

        print(finetune_line(finetune(enc, data, cfg, str(out), args.model, _dev(args), announce), cfg, out,
                            len(seeds) > 1))
    return _table(args, seeds, templates[0], [f"{args.model} (start)", f"fine-tuned ({args.mode})"], chosen.readout,
                  chosen.layer)


def cmd_train_head(args) -> int:
    """Learn a [MASK] prediction head on the frozen encoder (for checkpoints without one)."""
    sentences, counts = training_sentences(args.corpus, args.data_dir, args.wordnet_dir, args.max_sentences, args.seed)
    print("corpus: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()))
    model = head_model(args.model, args.device, log=o.say)
    cfg = HeadConfig(model.config.hidden_size, model.word_embeddings.shape[0], decoder=args.decoder, rank=args.rank,
                     depth=args.depth)
    if line := o.precision_line(args, model.word_embeddings.device):
        print(line, file=sys.stderr)
    settings = HeadTrainSettings(epochs=args.epochs, batch_size=args.head_batch_size, lr=args.lr, seed=args.seed,
                                 bf16=args.bf16)
    data = HeadData(heldout=args.heldout, cache_dir=args.cache_dir, describe={"corpus": corpus_parts(args.corpus)})
    rep = run_train_head(model, sentences, args.out, cfg, settings, data, show_progress_bar=not args.quiet)
    print(f"{rep.summary()}\nwrote {rep.path} (best epoch {rep.history.best_epoch}); use it with --mlm-head {rep.path}")
    return 0


def cmd_export(args) -> int:
    """A searched representation as a sentence-transformers folder (no trust_remote_code, no promptsearch); a
    retrieval search's query and document prompts as one that encode_query / encode_document read."""
    out = check_export(args.out, bool(args.results), args.template)
    if args.results and (answer := retrieval_answer(args.results, args.model, args.max_length,
                                                         args.description)) is not None:
        print(export_retrieval(answer.model, answer.query, answer.document, answer.readout, out,
                               str(default_model_path()) if answer.model == DEFAULT_MODEL else None, answer.max_length,
                               document_readout=answer.document_readout))
        return 0
    if args.description is not None:
        raise PromptSearchError("--description fills {task} in a retrieval results file's prompts; this export is of "
                                "an STS representation: drop it")
    model, k, length = export_target(Results.load(args.results) if args.results else None, args.template, args.model,
                                     args.max_length, o.say)
    print(export_representation(model, k, out, str(default_model_path()) if model == DEFAULT_MODEL else None, length))
    return 0
