"""Prompt-based contrastive fine-tuning with template denoising (PromptBERT §4.3, Eq. 4).

* ``unsup``: a sentence's two views are two different templates, each minus its template
  bias (computed with the current weights), in-batch negatives, temperature 0.05.
* ``sup``: NLI triplets (premise, entailment, contradiction): one template for all three,
  denoised; the entailment is the positive, every other entailment and every contradiction
  in the batch a negative.

Large batches on small memory use gradient caching (:mod:`.step`, shared with OptiPrompt).
Runs on CPU, one GPU or several through ``accelerate launch -m promptsearch finetune``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from pathlib import Path

import torch

from ..encoding import PromptEncoder
from ..template import Template
from .loop import (Checkpoint, DevEval, Progress, Trainee, TraineeState, TrainConfig, TrainRun, checkpoint_path,
                   end_checkpoint, sentences_per_second, set_seed, train_loop)
from ..model.loading import _quiet_transformers
from ..model.saved import write_config
from ..representation import Representation, is_mask
from .export import public, write_modules, write_sentence_transformers_files
from .step import Step, train_step

CHECKPOINT = "finetune-checkpoint.pt"
DEFAULTS = {"unsup": {"lr": 1e-5, "batch_size": 256}, "sup": {"lr": 5e-5, "batch_size": 512}}


@dataclass
class FinetuneConfig(TrainConfig):
    """Prompt-contrastive fine-tuning: the mode, the templates (unsup: two views), how long, the read-out
    trained; the rest is :class:`~promptsearch.train.loop.TrainConfig` (lr and batch size by mode, a dev
    score every 25 steps, denoised)."""

    mode: str  # "unsup" | "sup"
    templates: list[str]
    epochs: float = 1.0
    max_steps: int | None = None
    layer: int | None = None  # the read-out layer trained and saved (None: the last hidden state)
    readout: str | None = None  # a pooled read-out trained (mean, sentence-mean, cls; its views never denoised)
    eval_steps: int | None = field(default=25, kw_only=True)
    denoise: bool = field(default=True, kw_only=True)

    def __post_init__(self):
        d = DEFAULTS[self.mode]
        self.lr = self.lr if self.lr is not None else d["lr"]
        self.batch_size = self.batch_size or d["batch_size"]
        self.eval_steps = self.eval_steps or 25
        self.templates = [Template.parse(t).text for t in self.templates]
        if is_mask(self.readout):
            self.readout = None
        else:
            self.denoise, self.layer = False, None  # a pooled read-out has no template bias and reads the last layer

    @property
    def step(self) -> Step:
        """What one training step compares (:mod:`.step`)."""
        return Step(self.mode, tuple(self.templates), self.denoise, self.temperature, self.max_seq_length,
                    self.micro_batch, self.micro_tokens, self.layer, self.readout)


def finetune(enc: PromptEncoder, data, cfg: FinetuneConfig, out_dir, model_name: str, run: TrainRun = TrainRun()) -> dict:
    """Train, evaluate on the dev set every ``eval_steps``, keep the best weights in ``out_dir``. The
    resume checkpoint (``out_dir/resume/``) is removed when training ends unless ``run.keep_checkpoint``."""
    from accelerate import Accelerator

    acc = Accelerator()
    out = Path(out_dir)
    if acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
    set_seed(cfg.seed)
    prompt = enc.prompt.to(acc.device)
    for p in prompt.encoder.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(prompt.encoder.parameters(), lr=cfg.lr, weight_decay=0.0)
    steps_per_epoch = max(len(data) // cfg.batch_size, 1)
    total = cfg.max_steps or max(int(steps_per_epoch * cfg.epochs), 1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / total))
    wrapped, opt = acc.prepare(prompt, opt)
    dev = DevEval(enc, run.dev_dataset, run.data)
    tdev = cfg.templates[0]
    start, best, start_score = 0, None, None
    ckpt = checkpoint_path(out, CHECKPOINT)
    ck = Checkpoint.load(ckpt) if run.resume else None
    saved = ck and ck.resume(FinetuneState, templates=cfg.templates, mode=cfg.mode, layer=cfg.layer)
    if saved:
        acc.unwrap_model(wrapped).encoder.load_state_dict(saved.model)
        opt.load_state_dict(saved.optimizer)
        sched.load_state_dict(saved.scheduler)
        start, best, start_score, cfg.history = ck.step, ck.best, saved.start_score, ck.history
    if start_score is None:
        start_score = best = dev.start(tdev, cfg.denoise, cfg.layer, cfg.readout)
        cfg.history.append({"step": 0, "dev": round(start_score, 4)})
        if acc.is_main_process:
            save_model(enc, out, cfg, model_name, {"step": 0, "dev": start_score, "dev_set": run.dev_dataset})
    wrapped.train()
    trainee = _Finetunee(enc, cfg, acc, (wrapped, opt, sched), dev, lambda info: save_model(enc, out, cfg, model_name, info),
                         start_score)
    progress = Progress(start, best, cfg.history)
    secs, evaluating = train_loop(trainee, data, cfg.schedule(total), ckpt, progress, run.data.show_progress_bar)
    best = progress.best
    wrapped.eval()
    if acc.is_main_process:
        end_checkpoint(ckpt, run.keep_checkpoint)
    return {"dev_set": run.dev_dataset, "start_dev": round(start_score, 4), "best_dev": round(best, 4), "steps": total,
            "seconds": round(secs, 1), "steps_per_second": round((total - start) / secs, 3) if secs > 0 else None,
            "train_sentences_per_second": sentences_per_second(total - start, cfg.batch_size, secs, evaluating),
            "history": cfg.history, "device": str(acc.device), "processes": acc.num_processes}


@dataclass
class FinetuneState(TraineeState):
    """Fine-tuning's part of the resume checkpoint: what it trains, the encoder's weights, the optimizer and
    schedule, and the dev score it started from."""

    templates: list[str]
    mode: str
    model: dict[str, Any]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    start_score: float
    layer: int | None = None  # absent in checkpoints from before read-out layers: the last


class _Finetunee(Trainee):
    """Prompt-contrastive fine-tuning in the one loop: the whole encoder trained (under accelerate),
    the best weights saved as a model folder."""

    def __init__(self, enc, cfg: FinetuneConfig, acc, parts: tuple, dev: DevEval, save, start_score: float):
        """``parts``: the prepared (wrapped module, optimizer, scheduler); ``save(info)`` writes the model folder."""
        self.enc, self.cfg, self.acc, self.dev, self.save, self.start_score = enc, cfg, acc, dev, save, start_score
        self.wrapped, self.opt, self.sched = parts
        self.local_bs = max(cfg.batch_size // acc.num_processes, 1)
        self.desc, self.is_main = f"finetune ({cfg.mode})", acc.is_main_process

    def step(self, items) -> torch.Tensor:
        acc, bs = self.acc, self.local_bs
        items = items[acc.process_index * bs : (acc.process_index + 1) * bs]
        loss = train_step(self.enc, self.cfg.step, items, acc.backward, lambda: acc.no_sync(self.wrapped), prompt=self.wrapped)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad()
        return loss

    def evaluate(self) -> float:
        cfg = self.cfg
        return self.dev(cfg.templates[0], cfg.denoise, cfg.layer, cfg.readout)

    def keep(self, done: int, score: float) -> None:
        self.save({"step": done, "dev": score, "dev_set": self.dev.dataset})

    def state(self) -> FinetuneState:
        cfg = self.cfg
        return FinetuneState(cfg.templates, cfg.mode, self.acc.unwrap_model(self.wrapped).encoder.state_dict(),
                             self.opt.state_dict(), self.sched.state_dict(), self.start_score, cfg.layer)

    def after_eval(self) -> None:
        self.acc.wait_for_everyone()
        self.wrapped.train()


def save_model(enc: PromptEncoder, out: Path, cfg: FinetuneConfig, model_name: str, info: dict) -> None:
    """A Hugging Face model directory + promptsearch.json + a sentence-transformers module list."""
    model = enc.model.mlm or enc.encoder  # keep the MLM head (it shares the trained encoder) when there is one
    with _quiet_transformers():
        model.save_pretrained(out)
        enc.tokenizer.save_pretrained(out)
    write_config(out, {"template": cfg.templates[0], "denoise": cfg.denoise, "pooling": cfg.readout or "mask",
                       "base_model": model_name, **({"layer": cfg.layer} if cfg.layer is not None else {}),
                       **({"readout": cfg.readout} if cfg.readout else {}),
                       "finetune": {"mode": cfg.mode, "templates": cfg.templates, "lr": cfg.lr, "batch_size": cfg.batch_size,
                                    "temperature": cfg.temperature, "max_seq_length": cfg.max_seq_length, "seed": cfg.seed,
                                    **info}})
    k = Representation.of(cfg.templates[0], readout=cfg.readout)
    if not cfg.readout:  # a [MASK] read-out: a sentence-transformers folder with promptsearch's module (trust_remote_code)
        write_sentence_transformers_files(out)
    elif k.prompt is not None:  # a pooled prompt: a plain sentence-transformers folder of the model's stack, trained
        write_modules(Path(out), enc.model.stack(), k, enc.pooled_max_length, model_name)
        public(Path(out))


def choose_templates(mode: str, templates=(), results: str | None = None, template_dir: str | None = None):
    """The templates a fine-tuning run trains with: ``template_dir``'s (an OptiPrompt run, whose
    vectors come along: returned as the second value), then the given ones, then the best of a
    search's ``results`` (unsup takes two views, sup one; one template alone gives unsup both). A
    search's chosen ensemble gives its members; its read-out layer is the third value (None: the last)."""
    from ..errors import PromptSearchError
    from ..search.results import top_templates

    chosen, layer = [Template.parse(t).text for t in templates], None
    if results:
        best = top_templates(results, 2 if mode == "unsup" else 1)
        if not best:
            raise PromptSearchError(f"templates={results} holds no scored templates yet; run a search into it "
                                    "first, or give template=T")
        if best[0].members:  # an ensemble: its members are the views (their layer: the first member's)
            chosen += [m.without_layer.text for m in best[0].members]
            layer = best[0].members[0].layer
        else:
            chosen += [e.template for e in best if e.layer == best[0].layer and not e.members]
            layer = best[0].layer
    soft = None
    if template_dir:
        from ..model.saved import load_template_dir

        cfg, soft = load_template_dir(template_dir)
        chosen.insert(0, cfg["template"])
    if not chosen:
        raise PromptSearchError("give templates=best.json (a search's results), template=T (repeatable) or template_dir=")
    if mode == "unsup" and len(chosen) == 1:
        chosen = chosen * 2
    given = len(templates) + (1 if template_dir else 0)
    if given > (2 if mode == "unsup" else 1):
        raise PromptSearchError(f"{mode} fine-tuning takes {'two templates (the two views)' if mode == 'unsup' else 'one template'}; "
                                f"{given} were given: drop the extra template=")
    return (chosen[:2] if mode == "unsup" else chosen[:1]), soft, layer


def prepare_encoder(enc: PromptEncoder, model_name: str, template: str, soft=None) -> PromptEncoder:
    """The encoder to fine-tune: a masked LM (one-line error for a causal LM), with an OptiPrompt
    run's vectors (``soft``, from :func:`choose_templates`) on its template."""
    if enc.model.causal:
        from ..errors import PromptSearchError

        raise PromptSearchError(f"{model_name} is a causal LM; fine-tuning covers masked LMs (for a causal LM: "
                                "optiprompt, which trains only the template's vectors)")
    if soft is not None:
        enc.set_soft_prompt(template, soft.to(enc.device))
    return enc


def summary_line(summary: dict, cfg: FinetuneConfig, out, several_seeds: bool = False) -> str:
    """What a finished fine-tuning run says, under the name of the set that chose the checkpoint."""
    from ..data import TASK_NAMES

    dev = summary["dev_set"]
    return (f"finetune {cfg.mode}{f' (seed {cfg.seed})' if several_seeds else ''}: {TASK_NAMES.get(dev, dev)} "
            f"{summary['start_dev']:.2f} "
            f"(start) -> {summary['best_dev']:.2f} (best checkpoint) in {summary['steps']} steps of {cfg.batch_size}, "
            f"{summary['seconds']:.0f}s ({summary['steps_per_second']} steps/s, {summary['train_sentences_per_second']} "
            f"sentences/s training on {summary['device']}); saved to {out}")
