"""What the commands share: the encoder the model-and-data flags describe, templates as given."""

from __future__ import annotations

import os
import shlex
import sys

from ..data import DataOptions, PairFormat
from ..encoding import PromptEncoder
from ..encoding.batching import precision_choice
from ..errors import without_password, worded
from ..library import resolve_template
from ..model.saved import template_dir_config
from ..train.loop import check_compat


def show(args):
    return False if args.quiet else None


def precision_line(args, device, bf16: bool | None = None, pinned: str | None = None) -> str | None:
    """The precision a command runs in and why, one line for stderr (None with ``-q``): ``bf16`` as the
    library decided it (None: ``--bf16``/``--no-bf16`` as given), ``pinned`` the results file whose precision a
    resumed run keeps (``kept_precision``)."""
    if args.quiet:
        return None
    bf16 = args.bf16 if bf16 is None else bf16
    if pinned:
        why = f"{'bf16' if bf16 else 'fp32'} (the precision {pinned} was scored in: a resumed run keeps it)"
    elif bf16 is not None:
        why = f"{'bf16' if bf16 else 'fp32'} ({'--bf16' if bf16 else '--no-bf16'})"
    else:  # only what decides is asked: a flag or a resumed file spares the CPU's measurement
        why = precision_choice(device)[1]
    return worded(f"precision: {why}")  # a hint in it names the flag ('bf16=True forces it': '--bf16 forces it')


def recorded_command(args) -> dict | None:
    """What a results file keeps of the command that ran its search, so the TUI's ``s`` can resume it: its arguments
    and folder; a password in a URL is kept as ``***`` (and the TUI then asks for the command). None when the
    arguments are not known (a command function called without ``main``)."""
    argv = getattr(args, "command_line", None)
    if argv is None:
        return None
    kept = [without_password(a) for a in argv]
    return {"argv": kept, "cwd": os.getcwd(), **({"masked": True} if kept != list(argv) else {})}


def worker_line(storage: str, study: str) -> str:
    """What a search with a work study says: its name and the worker command that joins it, the storage URL as given
    (a password as ``***``: the worker's user fills it in)."""
    return (f"work study {study!r}: start workers with  promptsearch worker --storage "
            f"{shlex.quote(without_password(storage))} --study-name {shlex.quote(study)}")


def say(line: str) -> None:
    """A library's line for the user (stderr), its parameters said as the command's flags."""
    print(worded(line), file=sys.stderr)


def one_set_objective_note(objective: str, n_sets: int, flag: str) -> str | None:
    """The note for ``--objective min`` over one set (a user's trial: accepted without a word): it combines several
    sets' scores, and one set's is its own. None otherwise.

    :param objective: the ``--objective`` given.
    :param n_sets: how many sets the command scores on.
    :param flag: the command's flag for its sets (``--dataset``, ``--data``).
    :returns: the note, or None."""
    if objective == "mean" or n_sets != 1:
        return None
    return (f"note: --objective {objective} combines several {flag} sets' scores (comma-joined); over one set it is "
            "that set's own score")


def resuming(path, n: int, unit: str) -> str:
    """What a resumed search says before it starts: its results file's ``n`` scored ``unit``s are read back.

    :param path: the results file.
    :param n: the entries it holds.
    :param unit: what an entry is called ("representation", "candidate").
    :returns: the line."""
    return (f"resuming {path}: its {n:,} scored {unit}{'' if n == 1 else 's'} {'is' if n == 1 else 'are'} read back, "
            "not scored again")


def fmt(args) -> PairFormat:
    return PairFormat.parse(args.columns, args.subset_column)


def data(args) -> DataOptions:
    """Where the command reads data and whether it shows progress."""
    return DataOptions(args.data_dir, fmt(args), show(args))


def template(args, text: str):
    """A template given on the command line: a shipped name (PromptEOL ...) or text, with --demos."""
    return resolve_template(text, getattr(args, "demos", None))


def encoder(args, path=None, training: bool = False, settings: dict | None = None, pinned: str | None = None,
            model: str | None = None) -> PromptEncoder:
    """The encoder the flags describe: ``--model`` (or ``model``), or a directory ``path`` written by optiprompt or
    finetune (checked first; its own model, template and vectors). ``settings``: what the library decided over the
    flags (``bf16``, ``add_period``, ``max_length``, ``compat``: a resumed file's precision, a worker's search);
    ``pinned``: the results file whose precision a resumed run keeps."""
    if training:
        check_compat(args.compat)  # before the model loads
    kw = dict(device=args.device, mask_head=args.mlm_head, batch_size=args.batch_size, max_tokens=args.max_tokens,
              bf16=args.bf16, add_period=args.add_period, max_length=args.max_length, show_progress_bar=show(args),
              data_dir=args.data_dir)  # where static-debiased and anisotropy find the Wikipedia sample
    kw.update(settings or {})
    compat = kw.pop("compat", args.compat)
    if path is not None:
        template_dir_config(path)  # one-line error if it is not one
        enc = PromptEncoder.from_pretrained(str(path), **kw)
    else:
        enc = PromptEncoder.from_pretrained(model or args.model, compat=compat, **kw)
    line = precision_line(args, enc.device, kw["bf16"], pinned)
    stored = str(enc.model.encoder.dtype).removeprefix("torch.")  # its config's dtype: sentence-transformers' too
    if line and stored not in ("float32", "bfloat16" if enc.bf16 else "float32") and not enc.int8:
        line += (f"; but the model's weights are stored in {stored} and run in it, as sentence-transformers runs them "
                 "(its config's dtype)")
    if line:  # said when the work starts, so that a refused input stays one line
        enc.on_first_pass = lambda: print(line, file=sys.stderr)
    return enc
