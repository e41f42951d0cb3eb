"""What the trainers share: one training loop (``train_loop``, the objective plugged in as a
``Trainee``), one config base (``TrainConfig``), sentence batches, dev evaluation, typed
resumable checkpoints (``Checkpoint``)."""

from __future__ import annotations

import random
import signal
import time
from contextlib import contextmanager, suppress
from dataclasses import MISSING, dataclass, field, fields, replace
from pathlib import Path
from typing import Callable, Sequence, TypeVar

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data import DEV_SET, DataOptions, load_task
from ..encoding import MaskState, PromptEncoder
from ..encoding.reps import PromptPool, rep_from_key
from ..errors import PromptSearchError
from ..eval.sts import STSEvaluator, evaluators
from ..fileio import atomic_replace
from ..representation import Representation


def set_seed(seed: int) -> None:
    """Seed Python's ``random``, NumPy's global generator and torch's (``torch.manual_seed``: every device).

    :param seed: the seed."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def check_compat(compat: str) -> None:
    """Refuse to train with ``compat="reference"``: it reproduces the reference code's evaluation inputs, and
    training uses the default inputs (finetune and optiprompt check their encoder; a command checks its flag
    before the model loads).

    :param compat: the encoder's input compatibility (``enc.compat``).
    :raises promptsearch.PromptSearchError: for ``"reference"``."""
    if compat == "reference":
        raise PromptSearchError("compat=reference reproduces the reference's evaluation inputs; training uses the "
                                "default inputs, so drop compat=reference")


def batches(items: list, batch_size: int, seed: int, start_step: int = 0):
    """Endless shuffled batches, epoch after epoch; deterministic in (seed, step) so a resumed
    run sees the same data order.

    :param items: the data: a list, or a ``datasets.Dataset`` (rows read by ``take``).
    :param batch_size: rows per batch. An epoch is ``len(items) // batch_size`` batches (at least one): the
        rows left over are not seen that epoch, and with fewer rows than ``batch_size`` a batch is all of them.
    :param seed: epoch ``e``'s order is the permutation ``numpy.random.default_rng(seed + e)`` draws.
    :param start_step: the first step given (a resumed run's).
    :returns: an endless iterator of ``(step, rows)``, from ``start_step`` on."""
    per_epoch = max(len(items) // batch_size, 1)
    step = start_step
    while True:
        epoch, k = divmod(step, per_epoch)
        order = np.random.default_rng(seed + epoch).permutation(len(items))
        idx = order[k * batch_size : (k + 1) * batch_size]
        yield step, take(items, idx)
        step += 1


def take(items, idx) -> list:
    """Rows ``idx`` of a list, or of a memory-mapped ``datasets.Dataset`` (one column: its values;
    several: tuples) — a 1M-line corpus is never held as a Python list.

    :param items: a list, or a ``datasets.Dataset``.
    :param idx: the row indices.
    :returns: the rows in ``idx`` order: the list's items; a data set's values of its one column, or a tuple
        per row of its several."""
    if hasattr(items, "column_names"):
        cols = items[[int(i) for i in idx]]
        values = [cols[c] for c in items.column_names]
        return values[0] if len(values) == 1 else list(zip(*values))
    return [items[i] for i in idx]


def trained_rep(template: str, denoise: bool, layer: int | None = None,
                readout: str | None = None) -> MaskState | PromptPool:
    """What a trainer trains and scores: the template's pass pooled by ``readout`` (never denoised), or
    its [MASK] state at ``layer``.

    :param template: the template text.
    :param denoise: subtract the template bias from the [MASK] state (ignored with ``readout``).
    :param layer: the layer the [MASK] state is read at (None: the last hidden state; ignored with ``readout``).
    :param readout: a pooled read-out of the template's pass (None: the [MASK] state).
    :returns: a ``MaskState``, or a ``PromptPool`` with ``readout``.
    :raises promptsearch.TemplateError: for a template that does not parse, or a read-out that is unknown or
        cannot pool this template."""
    r = rep_from_key(Representation.of(template, None if readout else layer, readout), denoise)
    assert isinstance(r, (MaskState, PromptPool))  # one template, not an ensemble
    return r


@dataclass(kw_only=True)
class TrainSettings:
    """What every trainer is configured by — the template trainers and the [MASK] head's alike: the
    optimiser's learning rate, the batch size and the seed. A subclass adds what its trainer needs and
    sets its own defaults (``None``: that trainer's default).

    :param lr: the optimiser's learning rate (None: the trainer's default).
    :param batch_size: items per optimisation step (None: the trainer's default).
    :param seed: the seed of the run's random generators and of its data order."""

    lr: float | None = None
    batch_size: int | None = None
    seed: int = 42


@dataclass(kw_only=True)
class TrainConfig(TrainSettings):
    """What every template trainer is configured by (prompt-contrastive fine-tuning, OptiPrompt): the
    ``TrainSettings``, gradient-cached micro-batches, the contrastive loss's temperature, the
    token limit, how often the dev set is scored, denoising, and the dev history the run fills. A subclass adds
    what it trains and sets its own defaults (``None``: that default).

    :param micro_batch: rows per micro-batch of gradient caching (0: the whole batch at once).
    :param micro_tokens: micro-batches filled by a token budget instead, in length order (rows at most
        ``micro_batch`` when that is set); None: ``micro_batch`` rows at a time.
    :param max_seq_length: the tokens a sentence is cut to (a pooled prompt's own tokens come on top).
    :param temperature: the contrastive loss's temperature.
    :param eval_steps: score the dev set every this many steps, and at the end (None: the trainer's default).
    :param denoise: subtract the template bias from the [MASK] states.
    :param history: the dev evaluations' rows (``{"step", "loss", "dev"}``), filled by the run."""

    micro_batch: int = 64  # rows per micro-batch of gradient caching (0: the whole batch at once)
    micro_tokens: int | None = None  # micro-batches by a token budget, in length order (rows at most micro_batch)
    max_seq_length: int = 32
    temperature: float = 0.05
    eval_steps: int | None = None
    denoise: bool = False
    history: list = field(default_factory=list)

    def schedule(self, total: int) -> "Schedule":
        """``total`` steps of this config's batches, seed and evaluation interval.

        :param total: the steps the run ends at.
        :returns: the ``Schedule``."""
        # a trainer's config sets both (its __post_init__ fills the defaults it leaves None)
        assert self.batch_size is not None and self.eval_steps is not None
        return Schedule(total, self.batch_size, self.seed, self.eval_steps)


# How a representation's scores on tasks are found: ``scores(encoder, r, tasks, data) -> {task: {"spearman"}}``.
# ``fresh_scores`` measures them; ``promptsearch.search.validate.known_scores`` (what the command line passes)
# takes a score an earlier run measured with the same weights, data and settings from the score cache.
TaskScores = Callable[[PromptEncoder, "MaskState | PromptPool", Sequence[str], DataOptions], dict]


def fresh_scores(enc: PromptEncoder, r: MaskState | PromptPool, tasks: Sequence[str],
                 data: DataOptions = DataOptions()) -> dict[str, dict]:
    """``{task: {"spearman"}}`` of ``r`` on each task, measured (what ``eval`` prints for it).

    :param enc: the encoder, on its current weights.
    :param r: the representation scored.
    :param tasks: task names (as ``promptsearch.data.expand_tasks`` gives them).
    :param data: where the data is read from, and whether progress shows.
    :returns: task → ``{"spearman": Spearman ×100}``, in the order given.
    :raises promptsearch.errors.DataError: for a task that cannot be read.
    :raises promptsearch.PromptSearchError: for a representation the model cannot compute, or a score that is
        undefined (every pair got the same similarity)."""
    evs = evaluators(tasks, data)
    out = {}
    for task in tqdm(tasks, desc="scoring", leave=False, disable=data.show_progress_bar is False, unit="task"):
        out[task] = {"spearman": evs[task].evaluate(enc, [r], show_progress_bar=data.show_progress_bar)[r]["spearman"]}
    return out


@dataclass(frozen=True)
class TrainRun:
    """How a training run is run, whatever it trains: the dev set that chooses the checkpoint, where
    its data is and whether progress shows (``data``), whether a checkpoint in the output folder is
    resumed, whether that checkpoint is kept when training ends, and how the untrained start's scores
    are found (``scores``: ``TaskScores``; the default measures them).

    :param dev_dataset: the dev set scored at each evaluation; its best score chooses what is kept.
    :param data: where the data is read from, in which columns, and whether progress shows.
    :param resume: go on from a resume checkpoint in the output folder, when there is one of this run.
    :param keep_checkpoint: keep the resume checkpoint when training ends (False: removed).
    :param scores: ``scores(encoder, r, tasks, data) -> {task: {"spearman"}}``: how the untrained start's dev
        score and a before/after table's scores are found; ``fresh_scores`` measures them."""

    dev_dataset: str = DEV_SET
    data: DataOptions = DataOptions()
    resume: bool = True
    keep_checkpoint: bool = False
    scores: TaskScores = fresh_scores


class DevEval:
    """The dev set's Spearman of a template on the encoder's current weights (the one STSEvaluator;
    the template-bias cache follows the weights by itself). Called as ``dev(template, denoise, layer,
    readout)``: that Spearman ×100, measured in eval mode (each module's own mode restored after).

    :param encoder: the encoder being trained.
    :param dataset: the dev set (read once, here).
    :param data: where the data is read from and in which columns (progress never shows).
    :param scores: how the untrained start's score is found (``start``).
    :raises promptsearch.errors.DataError: for a dev set that cannot be read."""

    def __init__(self, encoder: PromptEncoder, dataset: str = DEV_SET, data: DataOptions = DataOptions(),
                 scores: TaskScores = fresh_scores):
        self.encoder, self.scores = encoder, scores
        self.dataset, self.data = dataset, replace(data, show_progress_bar=False)
        self.evaluator = STSEvaluator(load_task(dataset, data.data_dir, data.fmt))

    def __call__(self, template: str, denoise: bool, layer: int | None = None, readout: str | None = None) -> float:
        """The dev set's Spearman of the template on the current weights, measured in eval mode.

        :param template: the template text.
        :param denoise: subtract the template bias from the [MASK] state (ignored with ``readout``).
        :param layer: the [MASK] state's layer (None: the last hidden state; ignored with ``readout``).
        :param readout: a pooled read-out (None: the [MASK] state).
        :returns: the dev set's Spearman ×100."""
        r = trained_rep(template, denoise, layer, readout)
        with self._eval_mode():
            return self.evaluator.evaluate(self.encoder, [r], show_progress_bar=False, subsets=False)[r]["spearman"]

    def start(self, template: str, denoise: bool, layer: int | None = None, readout: str | None = None) -> float:
        """The same number for the untrained start, found by ``scores`` (through the score cache, a start a
        search or an earlier run already scored on this set, same weights, data and settings, costs no pass).

        :param template: the template text.
        :param denoise: subtract the template bias from the [MASK] state (ignored with ``readout``).
        :param layer: the [MASK] state's layer (None: the last hidden state; ignored with ``readout``).
        :param readout: a pooled read-out (None: the [MASK] state).
        :returns: the dev set's Spearman ×100."""

        r = trained_rep(template, denoise, layer, readout)
        with self._eval_mode():
            return self.scores(self.encoder, r, [self.dataset], self.data)[self.dataset]["spearman"]

    @contextmanager
    def _eval_mode(self):
        prompt = self.encoder.prompt
        was = {m: m.training for m in prompt.modules()}  # each module's own mode: the prompt's flag is not the
        prompt.eval()  # encoder's (a freshly made module says training), and prompt.train(flag) would set them all
        try:
            yield
        finally:
            for m, training in was.items():
                m.training = training


LOG_EVERY = 10  # steps between the progress bar's loss readings: each reading waits for the device


def log_progress(bar, done: int, loss: torch.Tensor, last: float | None, best: float, total: int,
                 evaluated: bool) -> None:
    """Advance a trainer's bar by a step. The loss (a device tensor) is read for the bar only on the
    first and last steps, every ``LOG_EVERY`` steps and after a dev evaluation, so the other steps
    queue work on the device without waiting for it.

    :param bar: the trainer's tqdm bar.
    :param done: the steps done, this one included.
    :param loss: this step's loss.
    :param last: the last dev score (None: none yet).
    :param best: the best dev score so far.
    :param total: the run's last step.
    :param evaluated: whether the dev set was scored after this step."""
    bar.update(1)
    if evaluated or done % LOG_EVERY == 0 or done in (1, total):
        bar.set_postfix(loss=f"{float(loss):.3f}", dev=f"{last:.2f}" if last is not None else "-", best=f"{best:.2f}")


def sentences_per_second(steps: int, batch_size: int, seconds: float, evaluating: float) -> float | None:
    """Training throughput: ``steps`` × ``batch_size`` over the wall time less the dev evaluations.

    :param steps: the steps this run took.
    :param batch_size: items per step.
    :param seconds: the run's wall time.
    :param evaluating: the seconds of it spent on dev evaluations.
    :returns: items per second, rounded to 0.1; None when no time is left once the evaluations are taken off."""
    return round(steps * batch_size / (seconds - evaluating), 1) if seconds > evaluating else None


def rng_state(device: torch.device | str | None = None) -> dict:
    """The state of every random generator a run on ``device`` draws from: for a resume checkpoint, and to replay
    a micro-batch's dropout.

    :param device: the device the run trains on. A CUDA device's generator is kept with the others; no other
        GPU's (nothing is opened on a GPU the run does not use), and none for a run on the CPU.
    :returns: ``{"python", "numpy", "torch"}`` (Python's ``random``, NumPy's global generator, torch's CPU
        generator), and ``"cuda"``: (the GPU's index, its generator's state) when ``device`` is a CUDA device."""
    st = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.random.get_rng_state()}
    dev = None if device is None else torch.device(device)
    if dev is not None and dev.type == "cuda":
        index = torch.cuda.current_device() if dev.index is None else dev.index
        st["cuda"] = (index, torch.cuda.get_rng_state(index))
    return st


def set_rng_state(st: dict) -> None:
    """Restore the generators ``rng_state`` saved. A GPU's is restored where that GPU is; a checkpoint written
    before (every GPU's generator, in a list) restores those of the GPUs there are.

    :param st: what ``rng_state`` returned."""
    random.setstate(st["python"])
    np.random.set_state(st["numpy"])
    torch.random.set_rng_state(st["torch"])
    saved = st.get("cuda")
    if saved is None or not torch.cuda.is_available():
        return
    if isinstance(saved, tuple) and len(saved) == 2 and isinstance(saved[0], int):
        if saved[0] < torch.cuda.device_count():
            torch.cuda.set_rng_state(saved[1], saved[0])
        return
    for index, state in enumerate(list(saved)[: torch.cuda.device_count()]):
        torch.cuda.set_rng_state(state, index)


RESUME_DIR = "resume"  # a trainer's resume checkpoint lives in OUT/resume/, apart from the model it writes


def checkpoint_path(out, name: str) -> Path:
    """Where a trainer keeps its resume checkpoint ``name``: ``out/resume/name``.

    :param out: the trainer's output folder.
    :param name: the checkpoint's file name.
    :returns: the path (nothing is created)."""
    return Path(out) / RESUME_DIR / name


S = TypeVar("S", bound="TraineeState")


@dataclass
class TraineeState:
    """A trainee's part of a resume checkpoint (weights, optimizer, what it was training): each trainer
    subclasses it with its fields."""

    def to_dict(self) -> dict:
        """The fields by name, as a checkpoint stores them.

        :returns: field name → value (shallow: state dicts are not copied)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}  # shallow: state dicts are not copied

    @classmethod
    def from_dict(cls: type[S], d: dict) -> S | None:
        """The record, or None when ``d`` lacks a field it needs (a checkpoint of another trainer); a field
        with a default that an earlier version did not write takes the default.

        :param d: a checkpoint's trainee part (keys that are not fields are ignored).
        :returns: the record, or None."""
        need = [f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING]
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d}) if all(k in d for k in need) else None


@dataclass
class Checkpoint:
    """A resume checkpoint: where the run is (steps done, best dev score, the history, every random
    generator's state) and the trainee's part. Written flat, as earlier versions wrote it.

    :param step: the steps done.
    :param best: the best dev score so far.
    :param history: the dev evaluations' rows so far.
    :param rng: every random generator's state (``rng_state``).
    :param trainee: the trainee's part (``TraineeState.to_dict``)."""

    step: int
    best: float
    history: list
    rng: dict
    trainee: dict

    def save(self, path: Path) -> None:
        """Write the checkpoint to ``path`` with ``torch.save``, atomically (the file is whole or not there),
        its folder made when missing.

        :param path: the checkpoint file."""
        path.parent.mkdir(parents=True, exist_ok=True)
        state = {**self.trainee, "step": self.step, "best": self.best, "history": self.history, "rng": self.rng}
        atomic_replace(path, lambda tmp: torch.save(state, tmp))

    @classmethod
    def load(cls, path: Path) -> "Checkpoint | None":
        """The checkpoint at ``path`` (or where earlier versions of the template trainers kept it, beside the
        model), or None.

        :param path: where the trainer keeps it (``checkpoint_path``).
        :returns: the first of the two files that exists, read (``read``); None when neither does."""
        for p in (path, path.parent.parent / path.name):
            if p.is_file():
                return cls.read(p)
        return None

    @classmethod
    def read(cls, path: Path) -> "Checkpoint | None":
        """The checkpoint in the file ``path``; None when there is none, or the file holds no run's place.

        :param path: the file.
        :returns: the checkpoint, or None."""
        return cls.from_dict(torch.load(path, map_location="cpu", weights_only=False)) if path.is_file() else None

    @classmethod
    def from_dict(cls, d) -> "Checkpoint | None":
        """A checkpoint as ``save`` lays it out (flat); None for anything else.

        :param d: what ``torch.load`` read from a checkpoint file.
        :returns: the checkpoint (the keys other than ``step``, ``best``, ``history`` and ``rng`` are its
            trainee part), or None when ``d`` is not a dict holding those four."""
        if not isinstance(d, dict) or not all(k in d for k in ("step", "best", "history", "rng")):
            return None
        own = {k: d[k] for k in ("step", "best", "history", "rng")}
        return cls(**own, trainee={k: v for k, v in d.items() if k not in own})

    def resume(self, kind: type[S], **same) -> S | None:
        """The trainee's saved state when it is of ``kind`` and was training what this run trains (its fields
        ``same`` as given), the random generators restored; None: start afresh.

        :param kind: the trainee's ``TraineeState`` subclass.
        :param same: fields the saved state must equal (e.g. ``template=``).
        :returns: the saved state (the random generators then restored), or None."""
        saved = kind.from_dict(self.trainee)
        if saved is None or any(getattr(saved, k) != v for k, v in same.items()):
            return None
        set_rng_state(self.rng)
        return saved


def end_checkpoint(path: Path, keep: bool) -> None:
    """A finished run's resume checkpoint: removed (with its folder, and any copy where earlier
    versions kept it) unless ``keep`` — the folder then holds the trained model alone.

    :param path: the run's checkpoint file (``checkpoint_path``).
    :param keep: keep it; False: it is removed, and its folder when nothing else is left in it."""

    if keep:
        return
    for p in (path, path.parent.parent / path.name):
        p.unlink(missing_ok=True)
    try:
        path.parent.rmdir()
    except OSError:  # not empty (something else of the user's), or already gone
        pass


# ---- the one training loop ------------------------------------------------------------------------
class Trainee:
    """What ``train_loop`` trains: prompt-contrastive fine-tuning, OptiPrompt and the [MASK] head each
    subclass it with their objective and what they keep; the hooks not needed do nothing.

    :cvar desc: the progress bar's label.
    :cvar is_main: whether this is the process that evaluates and writes (one of several under accelerate).
    :cvar device: the device it trains on (a checkpoint keeps that GPU's random generator; None: no GPU's).
    :cvar atomic_update: True: ``step`` only computes gradients and ``update`` applies them, so that an
        interrupt is checkpointed at the last whole step."""

    desc = "train"  # the progress bar's label
    is_main = True  # the process that evaluates and writes (one of several under accelerate)
    device: torch.device | None = None  # where it trains: a checkpoint keeps this GPU's generator (None: no GPU's)

    def step(self, items) -> torch.Tensor:
        """One optimisation step on a batch; the loss (a device tensor, read only to log).

        :param items: the batch's rows.
        :returns: the loss.
        :raises NotImplementedError: here; a subclass implements it."""
        raise NotImplementedError

    def evaluate(self) -> float:
        """The dev score on the current weights.

        :returns: the score (higher is better).
        :raises NotImplementedError: here; a subclass implements it."""
        raise NotImplementedError

    def keep(self, done: int, score: float) -> None:
        """A new best dev score at step ``done``: keep what produced it (here: nothing).

        :param done: the steps done.
        :param score: the new best score."""

    def state(self) -> TraineeState:
        """The trainee's part of the resume checkpoint (weights, optimizer ...).

        :returns: the state (here: an empty ``TraineeState``)."""
        return TraineeState()

    def after_eval(self) -> None:
        """After each evaluation, on every process (synchronise, back to training mode)."""

    atomic_update = False  # True: step() only computes gradients and update() applies them, so that an interrupt
    # is checkpointed at the last whole step (train_loop runs update() with Ctrl-C held back)

    def update(self) -> None:
        """Apply a step's gradients (optimizer and schedule), when ``atomic_update``."""

    def first_step(self, seconds: float, loss: torch.Tensor) -> None:
        """After the first step a run takes (``seconds`` of wall time): say how long the run will be (here:
        nothing).

        :param seconds: the step's wall time, the device waited for.
        :param loss: its loss."""

    def record(self, done: int, loss: torch.Tensor, score: float) -> dict:
        """The history's row for an evaluation after step ``done``.

        :param done: the steps done.
        :param loss: the last step's loss.
        :param score: the dev score.
        :returns: ``{"step", "loss", "dev"}``, the loss and score rounded to 4 places."""
        return {"step": done, "loss": round(float(loss), 4), "dev": round(score, 4)}


@dataclass(frozen=True)
class Schedule:
    """How long and on what: ``total`` steps of ``batch_size`` items, shuffled by ``seed``, a dev
    evaluation every ``eval_steps`` and at the end.

    :param total: the step the run ends at.
    :param batch_size: items per step.
    :param seed: the data order's seed.
    :param eval_steps: steps between dev evaluations."""

    total: int
    batch_size: int
    seed: int
    eval_steps: int

    def batches(self, data, start: int):
        """(step, items) from step ``start`` on: ``batches`` (a subclass may order its data otherwise).

        :param data: the training data (a list or a ``datasets.Dataset``).
        :param start: the first step.
        :returns: an endless iterator of ``(step, items)``."""
        return batches(data, self.batch_size, self.seed, start)


@dataclass
class Progress:
    """Where a run is: the steps done, the best dev score, the history (saved in the checkpoint).

    :param step: the steps done (where the run starts).
    :param best: the best dev score so far (``train_loop`` updates it).
    :param history: the dev evaluations' rows (``train_loop`` appends to it).
    :param pending_loss: the loss of step ``step`` when an interrupt came before its dev evaluation
        (``train_loop`` runs that evaluation first); None: none pending."""

    step: int = 0
    best: float = float("-inf")
    history: list = field(default_factory=list)
    # an interrupt came before step ``step``'s dev evaluation: its loss (run it first)
    pending_loss: float | None = None


# a checkpoint's trainee part: the loss of its step, whose evaluation an interrupt stopped
PENDING = "pending_eval_loss"


@contextmanager
def interrupts_held():
    """Ctrl-C and SIGTERM wait until the block is done (a step applied whole, a checkpoint written whole), then
    reach the handler they would have reached (Python's for Ctrl-C and the CLI's for SIGTERM raise
    KeyboardInterrupt). A signal ignored or left to the system, and any outside the main thread, is left alone.

    :returns: a context manager; the handlers are restored when its block ends."""
    came: list[tuple[int, object]] = []
    before = {}
    for sig in (signal.SIGINT, signal.SIGTERM):
        with suppress(ValueError):  # not the main thread
            if callable(signal.getsignal(sig)):
                before[sig] = signal.signal(sig, lambda signum, frame: came.append((signum, frame)))
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
        if came:
            signum, frame = came[0]
            before[signum](signum, frame)


def train_loop(trainee: Trainee, data, schedule: Schedule, checkpoint: Path | None, progress: Progress,
               show_progress_bar: bool | None = None) -> tuple[float, float]:
    """Train from ``progress.step`` to ``schedule.total``: each step ``trainee.step``; at each evaluation
    the dev score goes into the history, a better one is kept (``trainee.keep``) and the resume
    checkpoint written (unless ``checkpoint`` is None). Returns (seconds, seconds of them spent evaluating).

    :param trainee: what is trained.
    :param data: the training data, batched by ``schedule.batches``.
    :param schedule: the steps, batches and evaluation interval.
    :param checkpoint: the resume checkpoint file written at each evaluation (None: none written).
    :param progress: where the run starts; its ``best`` and ``history`` are updated as it goes.
    :param show_progress_bar: False: no progress bar (it shows on the main process only).
    :returns: ``(seconds, evaluating)``: the run's wall time and the part of it spent on dev evaluations.
    :raises KeyboardInterrupt: re-raised after an interrupt; with ``trainee.atomic_update`` the steps applied
        since the last checkpoint are checkpointed first (when ``checkpoint`` is given)."""

    t0, evaluating, last = time.time(), 0.0, None  # training time is the wall time less the dev evaluations
    bar = tqdm(total=schedule.total, initial=progress.step, desc=trainee.desc, unit="step",
               disable=show_progress_bar is False or not trainee.is_main)
    whole, saved = progress.step, progress.step  # steps applied whole; steps the checkpoint holds
    after, loss = None, None  # the random generators after the last whole step; its loss

    def due(done: int) -> bool:
        return done % schedule.eval_steps == 0 or done == schedule.total

    def evaluate_at(done: int, loss) -> None:
        nonlocal last, evaluating, saved
        t_eval = time.time()
        if trainee.is_main:
            last = trainee.evaluate()
            with interrupts_held():
                progress.history.append(trainee.record(done, loss, last))
                if last > progress.best:
                    progress.best = last
                    trainee.keep(done, last)
                if checkpoint is not None:
                    Checkpoint(done, progress.best, progress.history, rng_state(trainee.device),
                               trainee.state().to_dict()).save(checkpoint)
                    saved = done
        trainee.after_eval()
        evaluating += time.time() - t_eval

    try:
        if progress.pending_loss is not None and progress.step:  # the evaluation an interrupt stopped comes first
            saved = -1  # (should this one be interrupted too, it stays pending)
            loss = torch.tensor(progress.pending_loss)
            evaluate_at(progress.step, loss)
        for step, items in schedule.batches(data, progress.step):
            if step >= schedule.total:
                break
            t_step = time.time()
            loss = trainee.step(items)
            done = step + 1
            if trainee.atomic_update:
                with interrupts_held():
                    trainee.update()
                    whole, after = done, rng_state(trainee.device)
            if step == progress.step:  # the first step this run takes, waited for on the device: its whole time
                float(loss)
                trainee.first_step(time.time() - t_step, loss)
            evaluate = due(done)
            if evaluate:
                evaluate_at(done, loss)
            log_progress(bar, done, loss, last, progress.best, schedule.total, evaluate)
    except KeyboardInterrupt:
        if trainee.atomic_update and trainee.is_main and checkpoint is not None and whole != saved and whole > 0:
            with interrupts_held():  # the steps since the last evaluation are kept: a resumed run goes on from them
                state = trainee.state().to_dict()
                if due(whole):  # its evaluation did not finish: the resumed run runs it first
                    assert loss is not None  # a whole step was taken
                    state[PENDING] = float(loss)
                Checkpoint(whole, progress.best, progress.history, after or rng_state(trainee.device),
                           state).save(checkpoint)
        raise
    finally:
        bar.close()
    return time.time() - t0, evaluating
