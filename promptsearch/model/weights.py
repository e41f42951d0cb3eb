"""What a model folder holds, read from its files without loading it: a hash of each weights file (``weights_sample``),
recorded by a search beside the model's folder, so an export can tell that the folder still holds the weights its
prompts were scored on (``changed_weights``) before it ships them.

A search's own check of its model is ``model_fingerprint`` (the loaded weights); an export reads the folder through
sentence-transformers, whose model class can differ from the search's (``BertModel`` with a pooler where the search
ran ``BertForMaskedLM``'s encoder), so the two are compared here where both read the same thing: the folder's
safetensors files, every tensor's name and shape and a few of its rows, read lazily (``safe_open``): a fraction of a
large model.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..errors import ModelError
from ..paths import local_folder

ROWS = 8  # rows of each tensor hashed, evenly spaced over its first dimension (a 1-D tensor: all of it)


def _weight_files(folder: Path) -> list[Path]:
    """The safetensors files a model folder's model reads: at its root, and in the folders its sentence-transformers
    modules name (``modules.json``: ``0_Transformer`` in the older layout, a ``2_Dense``); not those of anything else
    kept in it (a trainer's ``checkpoint-*``, an export written inside it, an adapter), which change while the model
    does not."""
    found = sorted(folder.glob("*.safetensors"))
    try:
        modules = json.loads((folder / "modules.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):  # none (a plain transformers folder), or unreadable (loading it says so)
        modules = []
    subs = {str(m.get("path")) for m in modules if isinstance(m, dict)} if isinstance(modules, list) else set()
    for sub in sorted(subs - {"", "."}):
        if (folder / sub).is_dir() and (folder / sub).resolve().is_relative_to(folder.resolve()):
            found += sorted((folder / sub).glob("*.safetensors"))
    return found


def _file_hash(path: Path) -> str:
    """A hash of one safetensors file's tensors: each one's name, shape and ``ROWS`` evenly spaced rows as float32
    (a value stored in another dtype, rounded otherwise, hashes otherwise), read lazily: a fraction of a large file."""
    from safetensors import safe_open  # lazy: read only by a search's record and an export

    h = hashlib.sha1()
    with safe_open(str(path), framework="pt") as st:
        for name in sorted(st.keys()):
            part = st.get_slice(name)
            shape = list(part.get_shape())
            h.update(json.dumps([name, shape]).encode("utf-8"))
            if len(shape) <= 1:
                values = [st.get_tensor(name)]
            else:
                values = [part[i:i + 1] for i in sorted({i * (shape[0] - 1) // (ROWS - 1) for i in range(ROWS)})]
            for v in values:
                h.update(v.float().contiguous().numpy().tobytes())
    return h.hexdigest()[:12]


def weights_sample(folder) -> dict[str, str] | None:
    """A model folder's weights in brief, each safetensors file its model reads (``_weight_files``; its path in the
    folder) to a hash of every tensor's name, shape and a few rows (``_file_hash``): what a search records so that an
    export knows the folder still holds what was scored, read in a fraction of a second whatever the model's size.

    :param folder: a model folder (anything else: None).
    :returns: the sample; None where there is none to take (not a folder, no safetensors files: a ``.bin``
        checkpoint), or a file cannot be read (the search itself reports it)."""
    folder = Path(folder)
    try:
        files = _weight_files(folder) if folder.is_dir() else []
        return {f.relative_to(folder).as_posix(): _file_hash(f) for f in files} or None
    except Exception:  # noqa: BLE001 - a file safetensors cannot read: no sample, as for a .bin checkpoint
        return None


def changed_weights(recorded, folder) -> str | None:
    """Whether a model folder no longer holds the weights a search recorded (``weights_sample`` then): the first
    recorded file that is gone or differs, named; None when they agree, or when there is nothing to compare (an
    older results file, a folder that is not there: loading it says so).

    :param recorded: the sample a results file recorded (anything else: nothing to compare).
    :param folder: the folder the model is read from now.
    :returns: what differs, in a few words, or None."""
    folder = Path(folder)
    if not isinstance(recorded, dict) or not recorded or not folder.is_dir():
        return None
    for file, value in sorted(recorded.items()):
        path = folder / str(file)
        if not path.is_file():
            return f"it holds no {file}"
        try:
            now = _file_hash(path)
        except Exception:  # noqa: BLE001 - a file safetensors cannot read: loading it says so
            return None
        if now != value:
            return f"its {file} differs"
    return None


def folder_of(name: str) -> Path | None:
    """The folder a model named ``name`` is read from, when it is one on this machine: the embedded default's, or a
    local folder (None: a hub id).

    :param name: the model as named.
    :returns: the folder, or None."""
    from .loading import DEFAULT_MODEL, default_model_path  # lazy: loading imports transformers

    if name == DEFAULT_MODEL:
        try:
            return default_model_path()
        except ModelError:  # its package is gone: loading it says so
            return None
    folder = local_folder(name)
    return Path(folder) if folder else None
