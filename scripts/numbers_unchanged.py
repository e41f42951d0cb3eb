"""Run the two commands whose output a refactor must leave unchanged, against any checkout.

    python scripts/numbers_unchanged.py run CHECKOUT OUT     # promptsearch imported from CHECKOUT
    python scripts/numbers_unchanged.py compare OUT_A OUT_B  # exit 0 when every number is identical

``run`` writes into OUT: ``report.json`` from ``report --model default --tasks sts-all --json`` and
``greedy.json`` from a greedy search (two steps, racing, no score cache) on a small random BERT
built here from a fixed seed (``OUT/tiny-bert``: the same weights for every checkout), and
``greedy-wide.json`` from the same search taking every step after the template's (every layer,
read-outs with two prefix steps, an ensemble of three, held-out validation of the top two and the
path). ``compare`` reads both folders and compares everything except wall-clock times and the
software/machine record (a file only one folder has is named and skipped).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

VOLATILE = {"seconds", "elapsed", "wall_s", "started", "finished", "created", "time", "timestamp", "software",
            "machine", "version", "updated", "templates_per_minute", "torch", "transformers", "host", "cpu", "threads", "known", "command", "argv"}


def _data() -> Path:
    given = os.environ.get("PROMPTSEARCH_DATA_DIR")
    return Path(given) if given else Path(__file__).resolve().parents[2] / "shared" / "data" / "sts"


def tiny_bert(d: Path) -> Path:
    """A 2-layer random BERT with an MLM head and a vocabulary of STS-B dev's words (seed 0)."""
    import torch
    from transformers import BertConfig, BertForMaskedLM, BertTokenizer

    if (d / "config.json").exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    words: list[str] = []
    with open(_data() / "STSBenchmark" / "sts-dev.csv", encoding="utf-8") as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            words += (p[5] + " " + p[6]).lower().split()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    extra = ["this", "sentence", "means", ":", '"', "'", ".", "of", "is", "like", "a", "##s", "##ing", "##ed"]
    vocab = list(dict.fromkeys(specials + extra + sorted(set(words))))[:3000]
    (d / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    BertTokenizer(vocab=str(d / "vocab.txt")).save_pretrained(d)
    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=len(vocab), pad_token_id=0, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=128, max_position_embeddings=128)
    BertForMaskedLM(cfg).save_pretrained(d)
    return d


def run(checkout: Path, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    model = tiny_bert(out / "tiny-bert")
    vocab = out / "vocab.json"
    vocab.write_text(json.dumps({"relations": ["means", "is", "", "like"], "prefix_tokens": ["This", "sentence", ":", "a"],
                                 "wrappers": ['"']}), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(checkout), "PROMPTSEARCH_CACHE": str(out / "scores.jsonl"),
           "PROMPTSEARCH_DATA_DIR": str(_data())}
    py = [sys.executable, "-m", "promptsearch"]
    cmds = {
        "report": py + ["report", "--model", "default", "--tasks", "sts-all", "--json", str(out / "report.json"), "-q",
                        "--no-bf16"],
        "greedy": py + ["greedy", "--model", str(model), "--dataset", "sts16", "--vocabulary", str(vocab),
                        "--max-steps", "2", "--min-gain", "0", "--out", str(out / "greedy.json"), "--no-cache", "-q",
                        "--no-bf16", "--validate-top", "0"],
        "greedy-wide": py + ["greedy", "--model", str(model), "--dataset", "sts16", "--vocabulary", str(vocab),
                             "--max-steps", "2", "--min-gain", "0", "--out", str(out / "greedy-wide.json"), "--no-cache",
                             "-q", "--no-bf16", "--layers", "all", "--ensemble", "3", "--readout-steps", "2",
                             "--validate-top", "2"],
    }
    for name, cmd in cmds.items():
        r = subprocess.run(cmd, cwd=checkout, env=env, capture_output=True, text=True)
        (out / f"{name}.stdout").write_text(r.stdout)
        (out / f"{name}.stderr").write_text(r.stderr)
        print(f"{name}: exit {r.returncode}", flush=True)
        if r.returncode:
            sys.exit(r.stderr[-2000:])


def _strip(x):
    if isinstance(x, dict):
        return {k: _strip(v) for k, v in x.items() if k not in VOLATILE}
    if isinstance(x, list):
        return [_strip(v) for v in x]
    if isinstance(x, str) and os.sep in x and ("tiny-bert" in x or x.endswith(".json")):
        return Path(x).name  # the two runs' folders differ
    return x


def _unkeyed(d):
    """A race is keyed by a hash that includes the model's path, which differs between the two folders:
    compare the races' contents in order instead."""
    if isinstance(d, dict) and isinstance(d.get("x_races"), dict):
        d = {**d, "x_races": sorted((json.dumps(v, sort_keys=True) for v in d["x_races"].values()))}
    return d


def _diff(a, b, where="") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append(f"{where}/{k}: only in {'B' if k not in a else 'A'}")
            else:
                out += _diff(a[k], b[k], f"{where}/{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where}: {a!r} vs {b!r}"]


def compare(a: Path, b: Path) -> int:
    bad = 0
    for name in ("report.json", "greedy.json", "greedy-wide.json"):
        if not ((a / name).exists() and (b / name).exists()):
            print(f"{name}: not in both folders, skipped")
            continue
        da, db = (_strip(_unkeyed(json.loads((p / name).read_text()))) for p in (a, b))
        diffs = _diff(da, db)
        print(f"{name}: {'identical' if not diffs else f'{len(diffs)} differences'}")
        for d in diffs[:40]:
            print("  " + d)
        bad += bool(diffs)
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("run", "compare"):
        sys.exit(__doc__)
    if sys.argv[1] == "run":
        run(Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve())
    else:
        sys.exit(compare(Path(sys.argv[2]), Path(sys.argv[3])))
