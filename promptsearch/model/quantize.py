"""int8 copies of an encoder for screening: ``nn.Linear`` layers dynamically quantized.

Route chosen by measurement (``benchmarks/search_speed.py``, README "Faster search"): on CPU,
PyTorch's dynamic int8 linear (``torch.ao.quantization.quantize_dynamic``, fbgemm) runs
~1.8x an fp32 linear on an AVX2-only CPU and needs nothing else. torchao's
``Int8DynamicActivationInt8WeightConfig`` — the maintained route — was measured on the same
product (1600x384x1536, torch 2.13, torchao 0.18): eager it runs at 0.4-0.6x fp32 (its CPU
speed needs ``torch.compile`` and a C++ compiler at run time), and compiled with AVX2 kernels it
returned NaN. When torchao's CPU path is fast and sound eager, swap it in here: this is the one
place int8 is made.
"""

from __future__ import annotations

import copy
import warnings
from typing import TypeVar

import torch
from torch import nn

from ..errors import PromptSearchError

M = TypeVar("M", bound=nn.Module)


def int8_copy(encoder: M) -> M:
    """A float32 copy of ``encoder`` whose linear layers run int8 (dynamic activation scales)."""
    device = next(encoder.parameters()).device
    if device.type != "cpu":
        raise PromptSearchError(f"int8 screening runs on CPU (the model is on {device}); on a GPU use precision='bf16'")
    engines = torch.backends.quantized.supported_engines
    if "fbgemm" not in engines and "x86" not in engines:
        raise PromptSearchError("this PyTorch build has no int8 CPU engine (fbgemm/x86); use precision='fp32' or "
                                "'bf16'")
    from torch.ao.quantization import quantize_dynamic  # lazy: start-up time

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its deprecation notice: see the module docstring for why it is used
        q = quantize_dynamic(copy.deepcopy(encoder).float().eval(), {nn.Linear}, dtype=torch.qint8)
    return q
