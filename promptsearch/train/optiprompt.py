"""OptiPrompt (PromptBERT §4.2, Appendix B): continuous template vectors, encoder frozen.

The template's literal tokens (all but [X], [MASK] and special tokens) become trainable
vectors initialised from their static embeddings. The loss is unsupervised SimCSE: each
sentence passes twice with dropout on; the two [MASK] states are positives, the rest of
the batch negatives (temperature 0.05). Only the vectors change. Large batches are
micro-batched with gradient caching (``step``, shared with ``finetune``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..data import set_label
from ..encoding import PromptEncoder
from ..model.saved import save_soft_prompt
from ..template import Template
from .loop import (
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
    train_loop,
)
from .step import Step, train_step

CHECKPOINT = "optiprompt-checkpoint.pt"


@dataclass
class OptiPromptConfig(TrainConfig):
    """OptiPrompt: the template whose vectors are trained and for how many steps; the rest is
    ``TrainConfig`` (batches of 64, lr 3e-3, a dev score every 50 steps).

    :param template: the template whose literal tokens become trained vectors.
    :param steps: the optimisation steps.
    :param batch_size: sentences per step (None: 64).
    :param lr: Adam's learning rate (None: 3e-3).
    :param eval_steps: score the dev set every this many steps, and at the end (None: 50)."""

    template: str
    steps: int = 200
    batch_size: int = field(default=64, kw_only=True)
    lr: float = field(default=3e-3, kw_only=True)
    eval_steps: int = field(default=50, kw_only=True)

    def __post_init__(self):  # None (a flag left out): the default
        for name in ("batch_size", "lr", "eval_steps", "micro_batch"):
            if getattr(self, name) is None:
                setattr(self, name, type(self).__dataclass_fields__[name].default)

    @property
    def step(self) -> Step:
        """Unsupervised SimCSE over the template's [MASK] states (``step``): the same template
        twice, dropout making the two views differ.

        :returns: the training step's settings (the template parsed; this config's denoising, temperature,
            token limit and micro-batches).
        :raises promptsearch.TemplateError: for a template that does not parse."""
        t = Template.parse(self.template).text
        return Step("unsup", (t, t), self.denoise, self.temperature, self.max_seq_length, self.micro_batch,
                    self.micro_tokens)


def initial_vectors(enc: PromptEncoder, template: str) -> torch.Tensor:
    """The vectors OptiPrompt starts from: the static word embeddings of the template's literal tokens (every
    token but [X]'s, [MASK] and the special tokens), those before [X] first.

    :param enc: the encoder.
    :param template: the template.
    :returns: a float32 ``(tokens, hidden size)`` copy on the encoder's device, detached from the model.
    :raises promptsearch.TemplateError: for a template this model cannot fill."""
    r = enc.rendered(template)
    sb, sa = r.soft_slots()
    ids = [r.before[i] for i in sb] + [r.after[i] for i in sa]
    return enc.word_embeddings[torch.as_tensor(ids, device=enc.device)].detach().clone().float()


def train_optiprompt(enc: PromptEncoder, corpus: list[str], cfg: OptiPromptConfig, out_dir, model_name: str,
                     run: TrainRun = TrainRun()) -> dict:
    """Train, keep the best vectors on the dev set (``run.dev_dataset``), save them to ``out_dir``; returns a
    summary. ``corpus``: a list of sentences or a ``datasets.Dataset`` with one text column.

    The encoder's weights are frozen (and stay so); it is left with the best vectors set, in eval mode.

    :param enc: the encoder; its compatibility must not be ``"reference"``.
    :param corpus: the training sentences.
    :param cfg: the settings; its ``history`` is filled with the dev evaluations.
    :param out_dir: the folder the vectors are saved to (made when missing); the resume checkpoint is kept in
        its ``resume/`` until the run ends (and after, with ``run.keep_checkpoint``).
    :param model_name: the base model's name, written into the saved config.
    :param run: the dev set, data options, resuming, keeping the checkpoint, and how scores are found.
    :returns: ``{"dev_set", "manual_dev", "best_dev", "steps", "batch_size", "lr", "seconds",
        "train_sentences_per_second", "history"}``: the manual template's dev score and the best vectors', rounded
        to 4 places, and the run's settings and times.
    :raises promptsearch.PromptSearchError: for an encoder with ``compat="reference"``.
    :raises promptsearch.TemplateError: for a template that does not parse, or that this model cannot fill.
    :raises promptsearch.errors.DataError: for a dev set that cannot be read."""
    check_compat(enc.compat)  # compat="reference" is for evaluation inputs
    template = Template.parse(cfg.template).text
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    set_seed(cfg.seed)
    for p in enc.encoder.parameters():
        p.requires_grad_(False)
    soft = torch.nn.Parameter(initial_vectors(enc, template))
    opt = torch.optim.Adam([soft], lr=cfg.lr)
    dev = DevEval(enc, run.dev_dataset, run.data, run.scores)
    enc.set_soft_prompt(template, None)
    manual = dev(template, cfg.denoise)
    best, best_vec, start = manual, soft.detach().clone(), 0
    ckpt = checkpoint_path(out, CHECKPOINT)
    ck = Checkpoint.load(ckpt) if run.resume else None
    saved = ck and ck.resume(OptiPromptState, template=template)
    if saved:
        assert ck is not None  # the state came from it
        with torch.no_grad():
            soft.copy_(saved.soft)
        opt.load_state_dict(saved.optimizer)
        best, best_vec, start, cfg.history = ck.best, saved.best_vec, ck.step, ck.history
    enc.set_soft_prompt(template, soft)
    enc.prompt.train()  # dropout is the SimCSE noise; weights stay frozen
    trainee = _OptiPromptee(enc, cfg, template, soft, opt, dev, best_vec)
    progress = Progress(start, best, cfg.history)
    secs, evaluating = train_loop(trainee, corpus, cfg.schedule(cfg.steps), ckpt, progress, run.data.show_progress_bar)
    best = progress.best
    enc.prompt.eval()
    vec = trainee.best_vec  # the initial vectors unless a dev evaluation beat the manual template
    enc.set_soft_prompt(template, vec)
    summary = {"dev_set": run.dev_dataset, "manual_dev": round(manual, 4), "best_dev": round(best, 4),
               "steps": cfg.steps, "batch_size": cfg.batch_size, "lr": cfg.lr, "seconds": round(secs, 1),
               "train_sentences_per_second": sentences_per_second(cfg.steps - start, cfg.batch_size, secs, evaluating),
               "history": cfg.history}
    save_soft_prompt(out, template, vec, model_name, cfg.denoise, {"optiprompt": summary})
    end_checkpoint(ckpt, run.keep_checkpoint)
    return summary


@dataclass
class OptiPromptState(TraineeState):
    """OptiPrompt's part of the resume checkpoint: the template, its vectors now and at the best dev score, the
    optimizer.

    :param template: the template trained.
    :param soft: its vectors now.
    :param optimizer: the optimizer's state dict.
    :param best_vec: the vectors at the best dev score."""

    template: str
    soft: torch.Tensor
    optimizer: dict
    best_vec: torch.Tensor


class _OptiPromptee(Trainee):
    """OptiPrompt in the one loop: the template's vectors trained (the encoder frozen), the best kept."""

    desc = "optiprompt"

    def __init__(self, enc, cfg: OptiPromptConfig, template: str, soft: torch.nn.Parameter, opt, dev: DevEval,
                 best_vec: torch.Tensor):
        self.enc, self.cfg, self.template, self.soft, self.opt, self.dev = enc, cfg, template, soft, opt, dev
        self.device = enc.device
        self.best_vec = best_vec

    def step(self, items) -> torch.Tensor:
        self.opt.zero_grad()
        loss = train_step(self.enc, self.cfg.step, items, lambda out: out.backward())
        self.opt.step()
        return loss

    def evaluate(self) -> float:
        return self.dev(self.template, self.cfg.denoise)

    def keep(self, done: int, score: float) -> None:
        self.best_vec = self.soft.detach().clone()

    def state(self) -> OptiPromptState:
        return OptiPromptState(self.template, self.soft.detach().clone(), self.opt.state_dict(), self.best_vec)


def summary_line(summary: dict, cfg: OptiPromptConfig, out, several_seeds: bool = False) -> str:
    """What a finished OptiPrompt run says, under the name of the set that chose the vectors.

    :param summary: what ``train_optiprompt`` returned.
    :param cfg: the run's settings.
    :param out: where the vectors were saved.
    :param several_seeds: name the run's seed (one of several).
    :returns: one line."""

    dev = summary["dev_set"]
    return (f"OptiPrompt{f' (seed {cfg.seed})' if several_seeds else ''}: {set_label(dev)} "
            f"{summary['manual_dev']:.2f} (manual template) -> {summary['best_dev']:.2f} (best vectors) in "
            f"{summary['steps']} steps x {cfg.batch_size} sentences, {summary['seconds']:.0f}s{_rate(summary)}; saved "
            f"to {out}")


def _rate(summary: dict) -> str:
    rate = summary.get("train_sentences_per_second")
    return f" ({rate} sentences/s in training)" if rate else ""
