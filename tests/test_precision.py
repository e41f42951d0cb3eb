"""The default precision is the one measured faster on the machine (issue: bf16 autocast is 1.6x
slower than fp32 on CPUs with AVX512-BF16 but no AMX). The rule is tested with the CPU's flags and
the GPU's compute capability mocked both ways; the CLI says what it chose in one line."""

import pytest
import torch

from promptsearch.cli import main
from promptsearch.encoding import batching
from promptsearch.encoding.batching import bf16_supported, precision_choice


@pytest.mark.parametrize("flags, bf16, why", [
    ({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}, True, "AMX"),
    ({"avx2", "avx512f", "avx512_bf16"}, False, "no AMX"),
    ({"avx2"}, False, "no fast bf16"),
    (set(), False, "no fast bf16"),
])
def test_cpu_rule(monkeypatch, flags, bf16, why):
    monkeypatch.setattr(batching, "_cpu_flags", lambda: frozenset(flags))
    got, line = precision_choice(torch.device("cpu"))
    assert got is bf16 and bf16_supported(torch.device("cpu")) is bf16
    assert line.startswith("bf16" if bf16 else "fp32") and why in line


@pytest.mark.parametrize("capability, bf16", [((9, 0), True), ((8, 0), True), ((7, 5), False), ((6, 1), False)])
def test_gpu_rule(monkeypatch, capability, bf16):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    got, line = precision_choice(torch.device("cuda"))
    assert got is bf16 and f"{capability[0]}.x" in line


def test_encoder_default_follows_the_rule(monkeypatch, tiny_bert_dir):
    from promptsearch import PromptEncoder

    for flags, want in (({"avx512_bf16"}, False), ({"avx512_bf16", "amx_bf16"}, True)):
        monkeypatch.setattr(batching, "_cpu_flags", lambda f=flags: frozenset(f))
        enc = PromptEncoder.from_pretrained(str(tiny_bert_dir), device="cpu", show_progress_bar=False)
        assert enc.bf16 is want and enc.precision == ("bf16" if want else "fp32")


def test_cli_prints_the_choice_once(monkeypatch, tiny_bert_dir, capsys):
    monkeypatch.setattr(batching, "_cpu_flags", lambda: frozenset({"avx512_bf16"}))
    argv = ["eval", "--model", str(tiny_bert_dir), "--tasks", "sts16", "--json", "--device", "cpu"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count("precision: fp32 (this CPU has AVX512-BF16 but no AMX") == 1, err
    assert main(argv + ["--bf16"]) == 0
    assert "precision: bf16 (--bf16)" in capsys.readouterr().err
    assert main(argv + ["-q"]) == 0
    assert "precision:" not in capsys.readouterr().err


def test_a_resumed_results_file_keeps_its_precision(tmp_path):
    """kept_precision: the flag wins; else a file's recorded fp32 or bf16 is kept (and named); else the default."""
    import json

    from promptsearch.search.results import Results, kept_precision

    out = tmp_path / "best.json"
    assert kept_precision(str(out), None) == (None, None)  # no file yet
    Results.open(out, "m", "stsb-dev", "score", True, numbers={"precision": "bf16"}).save()
    assert json.loads(out.read_text())["numbers"]["precision"] == "bf16"
    assert kept_precision(str(out), None) == (True, str(out))
    assert kept_precision(str(out), False) == (False, None)
    out.write_text("{not json")
    assert kept_precision(str(out), None) == (None, None)  # opening it says what is wrong
