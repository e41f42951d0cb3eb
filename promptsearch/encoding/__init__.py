"""Encoding: sentences → vectors. Batching, the representations, the prompt module, the encoder."""

from .encoder import PromptEncoder, PromptStates
from .prompt import PromptModule
from .reps import Cls, Ditto, FirstLast, MaskState, Mean, Pooling, Rep, Static, StaticDebiased, TopKStatic, rep

__all__ = ["PromptEncoder", "PromptStates", "PromptModule", "Rep", "rep", "MaskState", "TopKStatic", "Pooling", "Cls",
           "Mean", "FirstLast", "Static", "StaticDebiased", "Ditto"]
