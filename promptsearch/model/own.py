"""The model's own representation: what the checkpoint's authors pool when nobody adds a prompt.

A sentence-transformers folder says it in its own files: ``modules.json`` names the Pooling
module, whose ``config.json`` gives the pooling mode (mean, CLS) and ``include_prompt``;
``config_sentence_transformers.json`` may hold ``prompts`` and a ``default_prompt_name``. Any
other checkpoint gets mean pooling over the plain sentence. The answer is a results-entry key
(``[X] @mean``, ``query: [X] @sentence-mean``, ``[X] @cls``): every search scores it first and
keeps it unless a template beats it beyond noise.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..template import OWN, SENT, readout_key


def own_key(path: str | Path | None) -> str:
    """The key of the model's own representation (``OWN``, mean pooling, when the folder says nothing)."""
    p = Path(path) if path else None
    if p is None or not (p / "modules.json").is_file():
        return OWN
    try:
        modules = json.loads((p / "modules.json").read_text(encoding="utf-8"))
        pool = next((m for m in modules if str(m.get("type", "")).endswith("models.Pooling")), None)
        cfg = json.loads((p / pool["path"] / "config.json").read_text(encoding="utf-8")) if pool else {}
        st = p / "config_sentence_transformers.json"
        st_cfg = json.loads(st.read_text(encoding="utf-8")) if st.is_file() else {}
    except (OSError, ValueError, TypeError, KeyError, StopIteration):
        return OWN  # an unreadable config: the plain default, not a guess
    if cfg.get("pooling_mode_cls_token"):
        readout = "cls"
    elif cfg.get("pooling_mode_mean_tokens", True):
        readout = "mean" if cfg.get("include_prompt", True) else "sentence-mean"
    else:
        return OWN  # max / last-token / weighted pooling: not one this tool reads; mean pooling instead
    prompts, name = st_cfg.get("prompts") or {}, st_cfg.get("default_prompt_name")
    prefix = prompts.get(name, "") if isinstance(prompts, dict) and name else ""
    prefix = prefix if isinstance(prefix, str) and SENT not in prefix and "[MASK]" not in prefix else ""
    return readout_key(prefix + SENT, readout)
