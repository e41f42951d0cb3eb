"""Prompt-based contrastive fine-tuning with template denoising (PromptBERT §4.3, Eq. 4).

* ``unsup``: a sentence's two views are two different templates, each minus its template
  bias (computed with the current weights), in-batch negatives, temperature 0.05.
* ``sup``: NLI triplets (premise, entailment, contradiction): one template for all three,
  denoised; the entailment is the positive, every other entailment and every contradiction
  in the batch a negative.

Large batches on small memory use gradient caching (``step``, shared with OptiPrompt).
Runs on CPU, one GPU or several through ``accelerate launch -m promptsearch finetune``.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

import torch
from accelerate import Accelerator
from tqdm.auto import tqdm

from ..data import data_fingerprint, set_label
from ..data.tasks import resolved_task
from ..encoding import PromptEncoder
from ..errors import PromptSearchError, note, worded
from ..fileio import atomic_write
from ..model import model_fingerprint
from ..model.loading import _quiet_transformers, tokenizer_fingerprint
from ..model.saved import UNFINISHED, load_template_dir, write_config
from ..representation import Representation, is_mask
from ..template import Template, quote
from .export import mask_model_card, public, write_modules, write_sentence_transformers_files
from .loop import (
    PENDING,
    Checkpoint,
    DevEval,
    Progress,
    TrainConfig,
    Trainee,
    TraineeState,
    TrainRun,
    check_compat,
    checkpoint_path,
    end_checkpoint,
    sentences_per_second,
    set_seed,
    take,
    train_loop,
)
from .step import Step, train_step

CHECKPOINT = "finetune-checkpoint.pt"
DEFAULTS = {"unsup": {"lr": 1e-5, "batch_size": 256}, "sup": {"lr": 5e-5, "batch_size": 512}}


@dataclass
class FinetuneConfig(TrainConfig):
    """Prompt-contrastive fine-tuning: the mode, the templates (unsup: two views), how long, the read-out
    trained; the rest is ``TrainConfig`` (lr and batch size by mode, a dev
    score every 25 steps, denoised).

    :param mode: ``"unsup"`` (two views of a sentence through two templates, SimCSE-style) or ``"sup"`` (NLI
        triplets through one template).
    :param templates: the templates trained with: two for unsup (its two views), one for sup.
    :param epochs: passes over the training data.
    :param max_steps: stop after this many steps (None: as ``epochs`` gives).
    :param layer: the read-out layer trained and saved (None: the last hidden state).
    :param readout: a pooled read-out trained (``mean``, ``sentence-mean``, ``cls``; its views never denoised;
        None: the [MASK] state).
    :param eval_steps: score the dev set every this many steps.
    :param denoise: subtract the template bias from the [MASK] states (off for a pooled read-out).
    :raises KeyError: for a mode other than unsup or sup.
    :raises promptsearch.TemplateError: for a template that does not parse."""

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
        """What one training step compares (``step``)."""
        return Step(self.mode, tuple(self.templates), self.denoise, self.temperature, self.max_seq_length,
                    self.micro_batch, self.micro_tokens, self.layer, self.readout)


def finetune(enc: PromptEncoder, data, cfg: FinetuneConfig, out_dir, model_name: str, run: TrainRun = TrainRun(),
             announce=None) -> dict:
    """Train, evaluate on the dev set every ``eval_steps``, keep the best weights in ``out_dir``. The
    resume checkpoint (``out_dir/resume/``) is removed when training ends unless ``run.keep_checkpoint``.
    ``announce(views)``: called with ``views_note``'s line once the run is past its checks (a checkpoint of
    other settings, views that cannot differ), before anything is written.

    :param enc: the encoder to train (from ``prepare_encoder``).
    :param data: the training data: sentences (unsup) or ``sent0, sent1, hard_neg`` triplets (sup).
    :param cfg: what is trained, and how.
    :param out_dir: the folder the best checkpoint is saved in (a model folder every command reads).
    :param model_name: the base model's name, recorded in the folder.
    :param run: the dev set, where data is read from, resuming and keeping the checkpoint.
    :param announce: called once with the views' note, before anything is written (None: not called).
    :returns: ``{"dev_set", "start_dev", "best_dev", "steps", "seconds", "steps_per_second",
        "train_sentences_per_second", "history", "device", "processes"}``.
    :raises promptsearch.PromptSearchError: for views that cannot differ, a checkpoint in ``out_dir`` of other
        settings, or a dev set that cannot be read or scored, or an encoder with ``compat="reference"``."""
    check_compat(enc.compat)
    acc, device = _accelerator(enc)
    out = Path(out_dir)
    # identical views with no dropout would train nothing: refused before anything is written
    views = views_note(enc, cfg)
    assert cfg.lr is not None and cfg.batch_size is not None and cfg.eval_steps is not None  # set by __post_init__
    set_seed(cfg.seed)
    prompt = enc.prompt.to(device)
    for p in prompt.encoder.parameters():
        p.requires_grad_(True)
    opt = torch.optim.AdamW(prompt.encoder.parameters(), lr=cfg.lr, weight_decay=0.0)
    steps_per_epoch = max(len(data) // cfg.batch_size, 1)
    total = cfg.max_steps or max(int(steps_per_epoch * cfg.epochs), 1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: max(0.0, 1.0 - s / total))
    dev = DevEval(enc, run.dev_dataset, run.data, run.scores)
    settings = run_settings(enc, cfg, dev, data)
    tdev = cfg.templates[0]
    start, best, start_score = 0, None, None
    ckpt = checkpoint_path(out, CHECKPOINT)
    ck = Checkpoint.load(ckpt) if run.resume else None
    if ck is not None:
        check_resumable(ck, settings, out)
    if announce is not None:
        announce(views)
    wrapped, opt = acc.prepare(prompt, opt)
    saved = ck and ck.resume(FinetuneState, templates=cfg.templates, mode=cfg.mode, layer=cfg.layer)
    if saved:
        assert ck is not None  # what was saved came from it
        acc.unwrap_model(wrapped).encoder.load_state_dict(saved.model)
        opt.load_state_dict(saved.optimizer)
        sched.load_state_dict(saved.scheduler)
        start, best, start_score, cfg.history = ck.step, ck.best, saved.start_score, ck.history
    t_start, fresh = None, start_score is None
    if fresh:  # before the folder is made: a start refused (a data error, similarities with no spread) leaves nothing
        t0 = time.time()
        start_score = best = dev.start(tdev, cfg.denoise, cfg.layer, cfg.readout)
        t_start = time.time() - t0
        t_start = t_start if t_start > 0.5 else None  # below that it came from the score cache: no measure of a pass
        cfg.history.append({"step": 0, "dev": round(start_score, 4)})
    assert start_score is not None and best is not None  # computed just above, or the checkpoint's
    if acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
        mark_unfinished(out)
        if fresh:
            save_model(enc, out, cfg, model_name, {"step": 0, "dev": start_score, "dev_set": run.dev_dataset})
    if acc.is_main_process:
        note(plan_line(cfg, total, start, len(data), run.dev_dataset))
    wrapped.train()
    trainee = _Finetunee(enc, cfg, acc, (wrapped, opt, sched), dev,
                         lambda info: save_model(enc, out, cfg, model_name, info),
                         start_score, settings)
    trainee.estimate = (total - start, total // cfg.eval_steps - start // cfg.eval_steps + (total % cfg.eval_steps > 0),
                        t_start)
    progress = Progress(start, best, cfg.history, ck.trainee.get(PENDING) if saved and ck is not None else None)
    secs, evaluating = train_loop(trainee, data, cfg.schedule(total), ckpt, progress, run.data.show_progress_bar)
    best = progress.best
    wrapped.eval()
    if acc.is_main_process:
        end_checkpoint(ckpt, run.keep_checkpoint)
        (out / UNFINISHED).unlink(missing_ok=True)  # the folder now holds the run's result
    return {"dev_set": run.dev_dataset, "start_dev": round(start_score, 4), "best_dev": round(best, 4), "steps": total,
            "seconds": round(secs, 1), "steps_per_second": round((total - start) / secs, 3) if secs > 0 else None,
            "train_sentences_per_second": sentences_per_second(total - start, cfg.batch_size, secs, evaluating),
            "history": cfg.history, "device": str(device), "processes": acc.num_processes}


def _accelerator(enc: PromptEncoder) -> tuple[Accelerator, torch.device]:
    """Accelerate, and the device this process trains on. Launched as several processes (``accelerate launch``,
    ``torchrun``), each trains on the device Accelerate gives it; a single process trains where the encoder is
    (``device=`` / ``--device``: the CPU, or the second GPU), where Accelerate's default would be the first GPU.
    The model is placed here, not by ``prepare``."""
    acc = Accelerator(device_placement=False)
    return acc, acc.device if acc.num_processes > 1 else enc.device


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
    readout: str | None = None  # a pooled read-out trained (absent in checkpoints from before they were: [MASK])
    settings: dict | None = None  # what changes the run's numbers (run_settings); absent in older checkpoints


class _Finetunee(Trainee):
    """Prompt-contrastive fine-tuning in the one loop: the whole encoder trained (under accelerate),
    the best weights saved as a model folder."""

    atomic_update = True  # update() applies a step whole or not at all: an interrupt is checkpointed at the last step

    def __init__(self, enc, cfg: FinetuneConfig, acc, parts: tuple, dev: DevEval, save, start_score: float,
                 settings: dict | None = None):
        """``parts``: the prepared (wrapped module, optimizer, scheduler); ``save(info)`` writes the model folder;
        ``settings``: what changes the numbers (``run_settings``), kept in the checkpoint."""
        self.enc, self.cfg, self.acc, self.dev, self.save, self.start_score = enc, cfg, acc, dev, save, start_score
        self.device = enc.device
        self.settings = settings
        # (steps, evaluations, seconds of the start's dev evaluation or None), set once the run is planned
        self.estimate: tuple[int, int, float | None] | None = None
        self.wrapped, self.opt, self.sched = parts
        self.local_bs = max(cfg.batch_size // acc.num_processes, 1)
        self.desc, self.is_main = f"finetune ({cfg.mode})", acc.is_main_process

    def step(self, items) -> torch.Tensor:
        acc, bs = self.acc, self.local_bs
        items = items[acc.process_index * bs : (acc.process_index + 1) * bs]
        return train_step(self.enc, self.cfg.step, items, acc.backward, lambda: acc.no_sync(self.wrapped),
                          prompt=self.wrapped)

    def update(self) -> None:
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad()

    def first_step(self, seconds: float, loss: torch.Tensor) -> None:
        if self.estimate is None or not self.is_main:
            return

        steps, evals, t_eval = self.estimate
        tqdm.write(worded(estimate_line(seconds, steps, evals, t_eval)), file=sys.stderr)  # above the progress bar

    def evaluate(self) -> float:
        cfg = self.cfg
        return self.dev(cfg.templates[0], cfg.denoise, cfg.layer, cfg.readout)

    def keep(self, done: int, score: float) -> None:
        self.save({"step": done, "dev": score, "dev_set": self.dev.dataset})

    def state(self) -> FinetuneState:
        cfg = self.cfg
        return FinetuneState(cfg.templates, cfg.mode, self.acc.unwrap_model(self.wrapped).encoder.state_dict(),
                             self.opt.state_dict(), self.sched.state_dict(), self.start_score, cfg.layer, cfg.readout,
                             self.settings)

    def after_eval(self) -> None:
        self.acc.wait_for_everyone()
        self.wrapped.train()


# What a resumed run must share with the checkpoint's (else its start, best and history are another run's), and
# how a refusal names each.
SETTINGS = {"model": "model (weights)", "tokenizer": "tokenizer (its files or settings)", "mode": "mode",
            "templates": "templates", "layer": "read-out layer", "readout": "read-out", "denoise": "denoise setting",
            "dev_set": "dev set", "dev_data": "dev set's pairs", "train_data": "training data", "lr": "learning rate",
            "batch_size": "batch size", "seed": "seed", "temperature": "temperature", "max_seq_length": "max sequence "
                                                                                                        "length"}


def corpus_fingerprint(data) -> str:
    """A short hash of the training data: its length and up to 1,000 rows spread over it (a memory-mapped
    corpus of millions of lines is not read whole for this)."""
    n = len(data)
    idx = sorted({int(i * n / 1000) for i in range(min(n, 1000))})
    return hashlib.sha1(json.dumps([n, take(data, idx)], ensure_ascii=False,
                                   default=str).encode("utf-8")).hexdigest()[:12]


def run_settings(enc: PromptEncoder, cfg: FinetuneConfig, dev: DevEval, data) -> dict:
    """Everything that changes a run's numbers (the steps it takes aside: a resumed run may go further)."""
    return {"model": model_fingerprint(enc.model), "tokenizer": tokenizer_fingerprint(enc.tokenizer), "mode": cfg.mode,
            "templates": list(cfg.templates), "layer": cfg.layer, "readout": cfg.readout, "denoise": cfg.denoise,
            "dev_set": " ".join(str(x) for x in resolved_task(dev.dataset) if x is not None),
            "dev_data": data_fingerprint(dev.evaluator.data), "train_data": corpus_fingerprint(data), "lr": cfg.lr,
            "batch_size": cfg.batch_size, "seed": cfg.seed, "temperature": cfg.temperature,
            "max_seq_length": cfg.max_seq_length}


def check_resumable(ck: Checkpoint, settings: dict, out: Path) -> None:
    """A fine-tuning checkpoint in ``out`` is resumed only by the run it belongs to: one line naming the first
    setting that differs otherwise (as a search refuses its results file). Checkpoints of earlier versions, which
    did not record the settings, are checked on what they hold (templates, mode, layer, read-out)."""
    saved = FinetuneState.from_dict(ck.trainee)
    if saved is None:
        return  # another trainer's checkpoint: not resumed (start anew, as before)
    # (an earlier version's checkpoint did not hold its read-out either: it was not compared then, nor now)
    old = saved.settings or {"mode": saved.mode, "templates": list(saved.templates), "layer": saved.layer}
    for k, label in SETTINGS.items():
        if k in old and old[k] != settings[k]:
            what = "" if k in ("dev_data", "train_data", "model",
                               "tokenizer") else f" ({old[k]!r} there, {settings[k]!r} now)"
            raise PromptSearchError(f"{out} holds a finetune checkpoint (step {ck.step}) trained with another "
                                    f"{label}{what}, whose start, best and history are not this run's: pass another "
                                    "out=, or no_resume=True to start over in it")


def mark_unfinished(out: Path) -> None:
    """Mark ``out`` as holding a run that has not finished (removed when it does): the model there is the best
    checkpoint so far, which promptsearch refuses to score or load (``read_config``)."""
    atomic_write(out / UNFINISHED, "promptsearch finetune has not finished training this folder: the model here is "
                 "its best checkpoint so far. Re-run the same finetune command to resume it.\n")


def views_note(enc: PromptEncoder, cfg: FinetuneConfig) -> str:
    """Which views unsup training compares, and why they differ; one-line error when they would not (the same
    input twice in a model without dropout: the loss would teach nothing)."""
    if cfg.mode != "unsup":
        return "views: premise, entailment (positive) and contradiction (hard negative), one template"
    p = max((m.p for m in enc.encoder.modules() if isinstance(m, torch.nn.Dropout)), default=0.0)
    k = quote(Representation.of(cfg.templates[0], None if cfg.readout else cfg.layer, cfg.readout).text)
    if cfg.templates[0] != cfg.templates[-1]:
        return (f"views: two templates of each sentence (PromptBERT's objective), dropout {p:g}"
                + ("" if cfg.readout else ", each less its template bias" if cfg.denoise else ""))
    if p <= 0:
        raise PromptSearchError(f"unsup fine-tuning of {k} compares the same input twice, and this model has no "
                                "dropout to make the two views differ: the loss would teach nothing; give two "
                                "templates (template= twice), or use mode='sup'")
    return f"views: {k} twice, made to differ by the model's dropout ({p:g}; SimCSE's unsupervised objective)"


def _duration(seconds: float) -> str:
    m = round(seconds / 60)
    return f"{seconds:.0f} s" if seconds < 90 else f"{m} min" if m < 90 else f"{m // 60} h {m % 60:02d} min"


def plan_line(cfg: FinetuneConfig, total: int, start: int, n: int, dev_set: str) -> str:
    """How long the run is, said before it starts."""
    assert cfg.batch_size is not None  # set by __post_init__
    epochs = total * cfg.batch_size / max(n, 1)
    e = f"{epochs:.0f}" if epochs >= 10 else f"{epochs:.2g}"
    return (f"{total} step{'' if total == 1 else 's'} of {cfg.batch_size} sentences ({e} "
            f"epoch{'' if e == '1' else 's'} of {n:,}), {set_label(dev_set)} scored every "
            f"{cfg.eval_steps} steps"
            + (f"; resuming at step {start}" if start else ""))


def estimate_line(step_seconds: float, steps: int, evals: int, eval_seconds: float | None) -> str:
    """The run's length estimated from its first step (and the start's dev evaluation, when it was computed)."""
    rest = step_seconds * steps + (evals * eval_seconds if eval_seconds else 0.0)
    many = "s" if evals != 1 else ""
    evals_part = f" and {evals} dev evaluation{many} of {eval_seconds:.0f} s" if eval_seconds else \
        f" plus {evals} dev evaluation{many}" if evals else ""
    plural = '' if steps == 1 else 's'
    return f"first step {step_seconds:.2g} s: about {_duration(rest)} for {steps} step{plural}{evals_part}"


def save_model(enc: PromptEncoder, out: Path, cfg: FinetuneConfig, model_name: str, info: dict) -> None:
    """A Hugging Face model directory + promptsearch.json + a sentence-transformers module list."""
    model = enc.model.mlm or enc.encoder  # keep the MLM head (it shares the trained encoder) when there is one
    with _quiet_transformers():
        model.save_pretrained(out)
        enc.tokenizer.save_pretrained(out)
    write_config(out, {"template": cfg.templates[0], "denoise": cfg.denoise, "pooling": cfg.readout or "mask",
                       "base_model": model_name, **({"layer": cfg.layer} if cfg.layer is not None else {}),
                       **({"readout": cfg.readout} if cfg.readout else {}),
                       "finetune": {"mode": cfg.mode, "templates": cfg.templates, "lr": cfg.lr,
                                    "batch_size": cfg.batch_size,
                                    "temperature": cfg.temperature, "max_seq_length": cfg.max_seq_length,
                                    "seed": cfg.seed,
                                    **info}})
    k = Representation.of(cfg.templates[0], readout=cfg.readout)
    # a [MASK] read-out: a sentence-transformers folder with promptsearch's module (trust_remote_code)
    if not cfg.readout:
        write_sentence_transformers_files(out)
        (Path(out) / "README.md").write_text(mask_model_card(k, model_name, cfg.mode), encoding="utf-8")
    elif k.prompt is not None:  # a pooled prompt: a plain sentence-transformers folder of the model's stack, trained
        write_modules(Path(out), enc.model.stack(), k, enc.pooled_max_length, model_name)
    public(Path(out))  # safetensors writes its file 0600: the folder is read like any other


class SearchResults(Protocol):
    """What fine-tuning reads of a search's results (a ``promptsearch.search.results.Results``, loaded by
    the caller: train/ does not import search/)."""

    path: Any

    @property
    def best(self) -> Any: ...

    def top_templates(self, k: int = 2) -> list: ...

    def trust_notes(self, model: str | None = None) -> list[str]: ...


def choose_templates(mode: str, templates=(), results: SearchResults | None = None, template_dir: str | None = None):
    """The templates a fine-tuning run trains with: ``template_dir``'s (an OptiPrompt run, whose
    vectors come along: returned as the second value), then the given ones, then the best of a
    search's ``results`` (``Results.load(path)``; unsup takes two views, sup one; one template alone gives
    unsup both). A search's chosen ensemble gives its members; its read-out layer is the third value
    (None: the last)."""
    chosen, layer = [Template.parse(t).text for t in templates], None
    if results is not None:
        best = results.top_templates(2 if mode == "unsup" else 1)
        if not best:
            raise PromptSearchError(f"templates={results.path} holds no scored templates yet; run a search into it "
                                    "first, or give template=T")
        if best[0].members:  # an ensemble: its members are the views (their layer: the first member's)
            chosen += [m.without_layer.text for m in best[0].members]
            layer = best[0].members[0].layer
        else:
            chosen += [e.template for e in best if e.layer == best[0].layer and not e.members]
            layer = best[0].layer
    soft = None
    if template_dir:
        cfg, soft = load_template_dir(template_dir)
        chosen.insert(0, cfg["template"])
    if not chosen:
        raise PromptSearchError("give templates=best.json (a search's results), template=T (repeatable) or "
                                "template_dir=")
    if mode == "unsup" and len(chosen) == 1:
        chosen = chosen * 2
    given = len(templates) + (1 if template_dir else 0)
    if given > (2 if mode == "unsup" else 1):
        raise PromptSearchError(f"{mode} fine-tuning takes "
                                f"{'two templates (the two views)' if mode == 'unsup' else 'one template'}; {given} "
                                "were given: drop the extra template=")
    return (chosen[:2] if mode == "unsup" else chosen[:1]), soft, layer


@dataclass(frozen=True)
class TrainingChoice:
    """What a fine-tuning run trains (``choose_training``): its templates (unsup: the two views), an
    OptiPrompt run's vectors on the first (or None), the read-out layer (None: the last) and the pooled
    read-out (None: the [MASK] state)."""

    templates: list[str]
    soft: Any = None
    layer: int | None = None
    readout: str | None = None


def choose_training(mode: str, templates=(), results: SearchResults | None = None, template_dir: str | None = None,
                    readout: str | None = None, model: str | None = None,
                    say: Callable[[str], None] = note) -> TrainingChoice:
    """What to fine-tune, from the given ``templates``, a search's ``results`` (``Results.load(path)``) and
    an OptiPrompt run's ``template_dir``. ``readout``: the read-out to train (None: the search's answer's when it
    is a pooled one and nothing else is given, else the [MASK] state; ``'mask'``: the [MASK] state). What the
    reader should know of ``results`` (its trust notes against ``model``, the answer it trains) is told
    to ``say`` first. A search's answer that is an ensemble with a pooled member is refused unless
    ``readout`` or a template is given (no one read-out trains it)."""
    trained = None if is_mask(readout) else readout
    best = results.best if results is not None else None
    for line in results.trust_notes(model) if results is not None else []:
        say(f"note: {line}")
    own = bool(templates or template_dir)
    if best is not None and best.members and any(m.readout for m in best.members) and readout is None and not own:
        # a mixed or pooled ensemble: no one read-out trains it, and its best [MASK] template is not what was chosen
        assert results is not None  # best is its answer
        raise PromptSearchError(f"{results.path}'s answer {quote(best.key)} is an ensemble with a pooled member; "
                                "finetune trains one representation, not an ensemble: pass readout=mask to train the "
                                "file's best [MASK] template(s), or template=T (with readout=) for one of its members")
    if best is not None and best.readout and not best.members and readout is None and not own:
        # the search's answer is a pooled read-out (the model's own, say): train that, its prompt as both views' context
        assert results is not None  # best is its answer
        say(f"fine-tuning {best.key}, {results.path}'s answer ({best.spearman:.2f} on its dev set)")
        return TrainingChoice([best.template] * (2 if mode == "unsup" else 1), None, None, best.readout)
    chosen, soft, layer = choose_templates(mode, templates, results, template_dir)
    if best is not None and best.readout and not trained:
        assert results is not None  # best is its answer
        say(f"note: {results.path}'s answer is {best.key} ({best.spearman:.2f}); with readout=mask (or given "
            f"templates) finetune trains [MASK] read-outs of its best [MASK] template(s), and the result may stay "
            f"below that answer: compare its dev score with {best.spearman:.2f}")
    return TrainingChoice(chosen, soft, layer, trained)


def prepare_encoder(enc: PromptEncoder, model_name: str, template: str, soft=None) -> PromptEncoder:
    """The encoder to fine-tune: a masked LM (one-line error for a causal LM), with an OptiPrompt
    run's vectors (``soft``, from ``choose_templates``) on its template.

    :param enc: the encoder.
    :param model_name: the model's name, for the error.
    :param template: the template the soft prompt belongs to.
    :param soft: an OptiPrompt run's vectors (None: none).
    :returns: ``enc``, with the soft prompt set.
    :raises promptsearch.PromptSearchError: for a causal LM."""
    if enc.model.causal:
        raise PromptSearchError(f"{model_name} is a causal LM; fine-tuning covers masked LMs (for a causal LM: "
                                "optiprompt, which trains only the template's vectors)")
    if soft is not None:
        enc.set_soft_prompt(template, soft.to(enc.device))
    return enc


def summary_line(summary: dict, cfg: FinetuneConfig, out, several_seeds: bool = False) -> str:
    """What a finished fine-tuning run says, under the name of the set that chose the checkpoint."""
    dev = summary["dev_set"]
    return (f"finetune {cfg.mode}{f' (seed {cfg.seed})' if several_seeds else ''}: {set_label(dev)} "
            f"{summary['start_dev']:.2f} (start) -> {summary['best_dev']:.2f} (best checkpoint) in {summary['steps']} "
            f"step{'' if summary['steps'] == 1 else 's'} of {cfg.batch_size}, {summary['seconds']:.0f}s "
            f"({summary['steps_per_second']} steps/s, {summary['train_sentences_per_second']} sentences/s training on "
            f"{summary['device']}); saved to {out}")
