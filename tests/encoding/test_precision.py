"""The default precision is measured, not read off a table of CPU flags (issue 46, item 30: on an AMD EPYC with
AVX512-BF16 and no AMX the flag rule said fp32 where bf16 measured 0.79x fp32's time). On a CPU the encoder's kind
of work is timed both ways once, cached per CPU model, threads and torch version; $PROMPTSEARCH_PRECISION and
--bf16/--no-bf16 override it; GPUs keep the compute-capability rule. The measurement is faked here (its number
decides), except in one test that runs it for real."""

import json
import math

import pytest
import torch

from promptsearch.cli import main
from promptsearch.encoding import batching, precision
from promptsearch.encoding.batching import bf16_supported, precision_choice
from promptsearch.errors import PromptSearchError


@pytest.mark.parametrize("ratio, bf16", [(0.79, True), (0.89, True), (0.9, False), (1.6, False)])
def test_the_cpu_default_is_the_precision_measured_faster(cpu_measured, ratio, bf16):
    calls = cpu_measured(ratio)
    got, line = precision_choice(torch.device("cpu"))
    assert got is bf16 and bf16_supported(torch.device("cpu")) is bf16
    assert line.startswith("bf16" if bf16 else "fp32") and f"{ratio:.2f}x" in line and "measured now" in line, line
    assert calls == [ratio]  # measured once, however often it is asked in a process


def test_a_measurement_is_cached_per_cpu_threads_and_torch_version(cpu_measured, monkeypatch):
    calls = cpu_measured(0.8)
    assert precision.cpu_choice()[0] is True and calls == [0.8]
    saved = json.loads(precision.cache_path().read_text())
    assert list(saved) == [precision.machine_key()] and saved[precision.machine_key()]["bf16_over_fp32"] == 0.8
    bf16, line = precision.cpu_choice()  # a new process: read back, not measured again
    assert bf16 is True and calls == [0.8] and "measured on this CPU" in line and str(precision.cache_path()) in line
    monkeypatch.setattr(torch, "__version__", "9.9.9")  # another torch: measured anew, the first entry kept
    assert precision.cpu_choice()[0] is True and calls == [0.8, 0.8]
    assert len(json.loads(precision.cache_path().read_text())) == 2


def test_an_unwritable_cache_still_gives_the_measured_choice(cpu_measured, tmp_path, monkeypatch):
    cpu_measured(1.3)
    (tmp_path / "xdg-cache").write_text("a file where the cache folder would be")
    bf16, line = precision.cpu_choice()
    assert bf16 is False and "not cached" in line


@pytest.mark.parametrize("value, bf16", [("bf16", True), ("fp32", False), ("BF16", True)])
def test_the_environment_variable_pins_it_without_measuring(cpu_measured, monkeypatch, value, bf16):
    calls = cpu_measured(0.5)
    monkeypatch.setenv("PROMPTSEARCH_PRECISION", value)
    for device in ("cpu", "cuda"):
        got, line = precision_choice(torch.device(device))
        assert got is bf16 and "PROMPTSEARCH_PRECISION" in line
    assert calls == []


def test_a_bad_environment_value_is_one_line(cpu_measured, monkeypatch):
    cpu_measured(0.5)
    monkeypatch.setenv("PROMPTSEARCH_PRECISION", "fp16")
    with pytest.raises(PromptSearchError, match="PROMPTSEARCH_PRECISION"):
        precision_choice(torch.device("cpu"))


@pytest.mark.parametrize("capability, bf16", [((9, 0), True), ((8, 0), True), ((7, 5), False), ((6, 1), False)])
def test_gpu_rule(cpu_measured, monkeypatch, capability, bf16):
    calls = cpu_measured(1.0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    got, line = precision_choice(torch.device("cuda"))
    assert got is bf16 and f"{capability[0]}.x" in line and calls == []


def test_the_measurement_times_both_precisions_for_real():
    """The real timing (no fake): a positive, finite ratio from alternating rounds. Its value is the machine's."""
    ratio = precision.measure_ratio(budget_s=0.0, min_rounds=1)
    assert ratio > 0 and math.isfinite(ratio)


@pytest.mark.parametrize("ratio, want", [(1.2, False), (0.7, True)])
def test_encoder_default_follows_the_measurement(cpu_measured, tiny_bert_dir, ratio, want):
    from promptsearch import PromptEncoder

    cpu_measured(ratio)
    enc = PromptEncoder.from_pretrained(str(tiny_bert_dir), device="cpu", show_progress_bar=False)
    assert enc.bf16 is want and enc.precision == ("bf16" if want else "fp32")


def test_cli_prints_the_measured_choice_once(cpu_measured, tiny_bert_dir, capsys):
    cpu_measured(1.25)
    argv = ["eval", "--model", str(tiny_bert_dir), "--tasks", "sts16", "--json", "--device", "cpu"]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert err.count("precision: fp32 (measured now on this CPU: bf16 took 1.25x fp32's time") == 1, err
    assert "--bf16 forces it" in err, err
    batching._cpu_choice_once.cache_clear()  # as a new process: the choice read back from the cache
    assert main(argv) == 0
    assert "precision: fp32 (measured on this CPU: bf16 took 1.25x" in capsys.readouterr().err  # cached
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
