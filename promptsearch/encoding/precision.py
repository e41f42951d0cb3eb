"""The default precision on a CPU, measured rather than read off a table of CPU flags.

bf16 autocast is faster than float32 on some CPUs and slower on others, and the flags do not say which: on an AMD
EPYC with AVX512-BF16 and no AMX it measured 0.79x float32's time for a [MASK] template in one round of tests and
1.6x in another, depending on the kernels torch picked. So on first use the encoder's work is timed both ways (a
BERT-shaped stack of 2 layers, 384 wide, on 16 sentences of 32 tokens; rounds interleaved; about a second), and the
answer is cached per CPU model, thread count and torch version in ``<cache dir>/precision.json``. bf16 is chosen only
when it takes under ``BF16_BELOW`` of float32's time: its rounding costs the scores a little, so it must buy
clearly more speed than measurement noise. ``PROMPTSEARCH_PRECISION=fp32|bf16`` (or a command's ``--bf16`` /
``--no-bf16``) overrides the measurement; deleting the cache file measures again.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from datetime import date
from pathlib import Path

import torch

from ..errors import PromptSearchError
from ..fileio import atomic_write
from ..paths import cache_dir

ENV_VAR = "PROMPTSEARCH_PRECISION"
BF16_BELOW = 0.9  # bf16 is the default only when it takes less than this share of float32's time
CACHE_NAME = "precision.json"


def forced() -> str | None:
    """``fp32``/``bf16`` when ``$PROMPTSEARCH_PRECISION`` sets one, else None (``auto`` or unset: measured)."""
    value = os.environ.get(ENV_VAR, "").strip().lower()
    if value in ("", "auto"):
        return None
    if value not in ("fp32", "bf16"):
        raise PromptSearchError(f"{ENV_VAR}={os.environ[ENV_VAR]!r} is not a precision; set it to fp32, bf16 or auto")
    return value


def cache_path() -> Path:
    return cache_dir() / CACHE_NAME


def _cpuinfo(field: str) -> str | None:
    """The first ``field`` line's value in /proc/cpuinfo (Linux); None elsewhere or where it has none."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith(field):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux, else the platform's processor string)."""
    return _cpuinfo("model name") or platform.processor() or platform.machine() or "unknown CPU"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags from /proc/cpuinfo (Linux; elsewhere none): what benchmarks print beside a timing."""
    return frozenset((_cpuinfo("flags") or "").split())


def machine_key() -> str:
    """What a measurement holds for: the CPU model, the threads torch uses and torch's version."""
    return f"{cpu_name()} | {torch.get_num_threads()} threads | torch {torch.__version__}"


def _time(model, ids, bf16: bool) -> float:
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        start = time.perf_counter()
        model(input_ids=ids)
        return time.perf_counter() - start


def measure_ratio(budget_s: float = 1.0, min_rounds: int = 3) -> float:
    """bf16 autocast's time over float32's on this CPU for the encoder's kind of work: the median over rounds of
    bf16's time / float32's in that round (the two run back to back, so a busy moment slows both alike), after one
    warm-up of each; rounds go on for ``budget_s`` seconds, at least ``min_rounds``."""
    from transformers import BertConfig, BertModel  # lazy: start-up time (transformers is slow to import)

    config = BertConfig(hidden_size=384, num_hidden_layers=2, num_attention_heads=12, intermediate_size=1536,
                        vocab_size=1000)
    torch.manual_seed(0)
    model = BertModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (16, 32))
    _time(model, ids, False), _time(model, ids, True)  # warm-up: kernel selection, allocation
    ratios: list[float] = []
    start = time.perf_counter()
    while len(ratios) < min_rounds or (time.perf_counter() - start < budget_s and len(ratios) < 50):
        fp32 = _time(model, ids, False)
        ratios.append(_time(model, ids, True) / fp32)
    return statistics.median(ratios)


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def cpu_choice(measure=None) -> tuple[bool, str]:
    """(bf16?, why) on this CPU: the cached measurement for this machine, or a new one by ``measure`` (default
    ``measure_ratio``), then cached."""
    measure = measure or measure_ratio
    path, key = cache_path(), machine_key()
    known = _read(path)
    entry = known.get(key)
    if isinstance(entry, dict) and isinstance(entry.get("bf16_over_fp32"), (int, float)):
        ratio, when, how = float(entry["bf16_over_fp32"]), entry.get("measured", "?"), "measured"
    else:
        ratio, when, how = round(float(measure()), 3), date.today().isoformat(), "measured now"
        known[key] = {"bf16_over_fp32": ratio, "measured": when}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, json.dumps(known, indent=1, sort_keys=True) + "\n")
        except (OSError, PromptSearchError):
            when = "not cached: its folder is not writable"
    bf16 = ratio < BF16_BELOW
    kept = f"{when}; cached in {path}, delete it to measure again" if when[:1].isdigit() else when
    force = "bf16=False forces fp32" if bf16 else "bf16=True forces it"
    return bf16, (f"{'bf16' if bf16 else 'fp32'} ({how} on this CPU: bf16 took {ratio:.2f}x fp32's time, taken below "
                  f"{BF16_BELOW}x; {force}; {kept})")
