"""Encoding: sentences → vectors. Batching, the representations, the prompt module, the encoder."""

from .encoder import EncodeOptions, PromptEncoder, PromptStates
from .prompt import PromptModule
from .reps import (
    Cls,
    Ditto,
    Ensemble,
    FirstLast,
    MaskState,
    Mean,
    Pooling,
    Rep,
    Static,
    StaticDebiased,
    TopKStatic,
    rep,
)

__all__ = ["PromptEncoder", "PromptStates", "EncodeOptions", "PromptModule", "Rep", "rep", "MaskState", "Ensemble",
           "TopKStatic", "Pooling", "Cls", "Mean", "FirstLast", "Static", "StaticDebiased", "Ditto"]
