"""Models: loading any checkpoint (with its MLM head, or a trained mask head), fingerprints,
the trained-directory format (promptsearch.json + soft prompt)."""

from .loading import DEFAULT_MODEL, LoadedModel, load_model, model_fingerprint
from .mask_head import MaskHead, load_head, save_head, shipped_head_path

__all__ = ["DEFAULT_MODEL", "LoadedModel", "load_model", "model_fingerprint", "MaskHead", "load_head", "save_head",
           "shipped_head_path"]
