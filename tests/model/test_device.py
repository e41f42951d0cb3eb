import pytest
import torch

from promptsearch.model.loading import default_device, resolve_device


@pytest.mark.parametrize("gpus, local_rank, want", [
    (0, None, "cpu"), (0, "1", "cpu"),  # no CUDA: the CPU, whatever a launcher says
    (2, None, "cuda"),  # one process: the first GPU (the current device)
    (2, "1", "cuda:1"),  # the second of two processes a launcher started: its own GPU
    (2, "0", "cuda:0"),
    (2, "5", "cuda"),  # a rank with no GPU of its own here: the first
    (2, "", "cuda"), (2, "x", "cuda"),
])
def test_the_default_device_is_the_processes_own_gpu_under_a_launcher(monkeypatch, gpus, local_rank, want):
    """Under ``accelerate launch`` / ``torchrun`` every process used to build its model on the first GPU before
    Accelerate moved it to its own: N copies on one GPU at first. Now each builds it on ``cuda:$LOCAL_RANK``."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    if local_rank is None:
        monkeypatch.delenv("LOCAL_RANK", raising=False)
    else:
        monkeypatch.setenv("LOCAL_RANK", local_rank)
    assert default_device() == torch.device(want)
    assert resolve_device(None) == torch.device(want) and resolve_device("") == torch.device(want)
    assert resolve_device("cpu") == torch.device("cpu")  # a device given is kept
