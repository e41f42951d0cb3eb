"""``promptsearch.json``: what a trained directory tells ``PromptEncoder.from_pretrained``.

An OptiPrompt directory holds only the template vectors (``soft_prompt.safetensors``) and
names the base model; a fine-tuned directory is a full Hugging Face model directory. Both
carry ``promptsearch.json`` = {format, template, denoise, pooling, base_model, layer?, soft_prompt?, ...}
(``layer``: the read-out layer as ``hidden_states`` counts, absent for the last hidden state).
``format`` is ``promptsearch.trained/1``; files written before it existed (no ``format``, and
OptiPrompt's ``model`` where fine-tuning wrote ``base_model``) still read.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from safetensors.torch import load_file, save_file

from ..errors import PromptSearchError
from ..fileio import atomic_replace, atomic_write

if TYPE_CHECKING:
    import torch

CONFIG_NAME = "promptsearch.json"
FORMAT = "promptsearch.trained/1"
SOFT_PROMPT_NAME = "soft_prompt.safetensors"
UNFINISHED = "UNFINISHED"  # in a folder finetune is still training (or was stopped in): its model is a checkpoint


def check_finished(directory) -> None:
    """One-line error for a folder whose fine-tuning run has not finished: its model is the best checkpoint so
    far (at first the untrained start), not the run's result."""
    d = Path(directory)
    if (d / UNFINISHED).is_file():
        raise PromptSearchError(f"{d} holds a finetune run that has not finished (its model is a checkpoint, perhaps "
                                "the untrained start): re-run that finetune command to finish it, or pass a finished "
                                "folder")


def read_config(directory) -> dict | None:
    p = Path(directory) / CONFIG_NAME
    if not p.is_file():
        return None
    check_finished(directory)
    try:
        d = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise PromptSearchError(f"{p} is not valid JSON ({exc})") from None
    if not isinstance(d, dict) or "template" not in d:
        raise PromptSearchError(f"{p} has no 'template'; it was not written by promptsearch")
    if d.get("format", FORMAT) != FORMAT:
        raise PromptSearchError(f"{p} is {d['format']!r}, this promptsearch reads {FORMAT!r}; upgrade promptsearch")
    if "base_model" not in d and "model" in d:  # OptiPrompt's key before the format had a version
        d["base_model"] = d.pop("model")
    return d


def write_config(directory, config: dict) -> None:
    atomic_write(Path(directory) / CONFIG_NAME,
                 json.dumps({"format": FORMAT, **config}, indent=2, ensure_ascii=False) + "\n")


def save_soft_prompt(directory, template: str, vectors, base_model: str, denoise: bool,
                     extra: dict | None = None) -> None:
    d = Path(directory)
    tensors = {"soft_prompt": vectors.detach().float().cpu().contiguous()}
    atomic_replace(d / SOFT_PROMPT_NAME, lambda tmp: save_file(tensors, tmp))
    write_config(d, {"template": template, "denoise": denoise, "pooling": "mask", "base_model": base_model,
                     "soft_prompt": SOFT_PROMPT_NAME, **(extra or {})})


def template_dir_config(directory) -> dict:
    """The config of a directory written by optiprompt or finetune; one-line error otherwise."""
    d = Path(directory)
    if not d.is_dir():
        what = "is a file, not a folder" if d.exists() else "does not exist"
        raise PromptSearchError(f"template_dir={d} {what}; pass a folder written by 'promptsearch optiprompt' or "
                                "'finetune'")
    cfg = read_config(d)
    # export's, or any model's folder
    if cfg is None and any((d / f).is_file() for f in ("modules.json", "config.json")):
        raise PromptSearchError(f"{d} is a model folder, not one written by 'promptsearch optiprompt' or 'finetune' "
                                f"(no {CONFIG_NAME}); pass it as model={shlex.quote(str(d))} (eval reads an exported "
                                "folder's representation from it)")
    if cfg is None:
        raise PromptSearchError(f"{d} has no {CONFIG_NAME}; pass a folder written by 'promptsearch optiprompt' or "
                                "'finetune'")
    return cfg


def load_template_dir(directory) -> tuple[dict, torch.Tensor | None]:
    """(config, soft-prompt tensor or None) of a directory written by optiprompt or finetune."""
    d = Path(directory)
    cfg = template_dir_config(d)
    soft = None
    if cfg.get("soft_prompt"):
        soft = load_file(str(d / cfg["soft_prompt"]))["soft_prompt"]
    return cfg, soft
