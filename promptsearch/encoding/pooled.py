"""A prompt's pooled read-outs, computed as sentence-transformers computes them.

``SentenceTransformer.encode(sentences, prompt=P)`` tokenizes ``P + sentence`` as one string (its
Transformer module's ``preprocess``: its tokenizer, its max length, ``do_lower_case``; the prompt's
token count for ``include_prompt=False``), runs the transformer, then its Pooling, Dense and Normalize
modules. This module calls those very functions and modules (``ModuleStack``),
with promptsearch's batching around them: sentences deduplicated, each tokenized once (the bulk by the
tokenizer's backend once it gave ``preprocess``'s ids on the longest and shortest texts), rows cut into
token-budget batches longest first, every read-out of one prompt pooled from the same forward pass, bf16
autocast where it is the faster precision, and on a GPU the next prompt tokenized in a worker thread while
the previous one's batches run and a prompt's many texts (a corpus) tokenized by several threads. Padding is the
tokenizer's own side, so a row's numbers do not depend on its batch (float rounding aside).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import queue
import threading
from collections import deque
from collections.abc import Generator, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, closing, contextmanager, nullcontext
from typing import Any, Mapping, Sequence

import numpy as np
import torch

from ..errors import PromptSearchError
from .batching import budget_batches, padding, unique

TOKENIZE_CHUNK = 512  # texts per preprocess call (padded to the chunk's longest)
PROBE = 8  # texts tokenized by sentence-transformers' preprocess before its tokenizer's backend takes the bulk
PER_TOKEN = {"input_ids", "attention_mask", "token_type_ids"}
# off the CPU: prompts tokenized ahead, each in a worker thread (one: on an H100's host, more workers were no faster,
# the tokenizer's Python share holding the interpreter lock); and threads that share one prompt's many texts, each on
# a clone of the tokenizer's backend, at least SPLIT_TEXTS each (4: 2.3x on the demo's corpus there; 8 no faster),
# at most the host's cores less one (benchmarks/tokenize_ahead.py)
TOKENIZE_AHEAD = 1
TOKENIZE_THREADS = 4
SPLIT_TEXTS = 512


def _preprocessed(stack, texts: list[str], prompt: str, kw: dict) -> tuple[dict[str, list[np.ndarray]], dict]:
    """``texts`` through sentence-transformers' ``preprocess``, a chunk at a time: ({name: one unpadded array a row},
    {prompt_length, modality, …})."""
    rows: dict[str, list] = {}
    rest: dict = {}
    for start in range(0, len(texts), TOKENIZE_CHUNK):
        f = stack.transformer.preprocess(texts[start : start + TOKENIZE_CHUNK], prompt=prompt or None, **kw)
        mask = f["attention_mask"].numpy().astype(bool)
        cut = np.cumsum(mask.sum(1))[:-1]
        for name, v in f.items():
            if isinstance(v, torch.Tensor) and v.dim() == 2 and v.shape == mask.shape:
                rows.setdefault(name, []).extend(np.split(v.numpy()[mask], cut))  # real tokens, whichever side padded
            elif not isinstance(v, torch.Tensor):
                rest[name] = v
            else:
                raise PromptSearchError(f"sentence-transformers' preprocess gave {name} of shape {tuple(v.shape)}; "
                                        "promptsearch pools text inputs of token ids only")
    return rows, rest


@contextmanager
def _plain(backend) -> Iterator[None]:
    """The backend neither truncating nor padding for the block: the truncation and padding a tokenizer call leaves
    set on it are lifted, and put back after (each call of the tokenizer sets its own anyway)."""
    trunc, pad = backend.truncation, backend.padding
    backend.no_truncation()
    backend.no_padding()
    try:
        yield
    finally:
        if trunc is not None:
            backend.enable_truncation(**trunc)
        if pad is not None:
            backend.enable_padding(**{k: v for k, v in pad.items() if k != "pad_to_multiple_of" or v is not None})


def _encode(backend, texts: list[str]) -> list:
    """The backend's encodings of whole texts (special tokens added), neither truncated nor padded."""
    with _plain(backend):
        return backend.encode_batch(texts, add_special_tokens=True)


def _encode_split(backends: list, texts: list[str]) -> list:
    """``_encode`` of ``texts``, shared among ``backends`` (each used by one thread: several run at once, the
    tokenizer's backend releasing Python's lock while it encodes) once there are at least ``SPLIT_TEXTS`` of them
    for each: the same encodings, in order (each text's encoding depends on that text alone)."""
    k = min(len(backends), len(texts) // SPLIT_TEXTS)
    if k < 2:
        return _encode(backends[0], texts)
    with ThreadPoolExecutor(k, thread_name_prefix="promptsearch-tokenize") as pool:
        parts = list(pool.map(lambda i: _encode(backends[i], texts[i::k]), range(k)))
    out: list = [None] * len(texts)
    for i, part in enumerate(parts):
        out[i::k] = part
    return out


def _backend_clones(stack, n: int) -> list | None:
    """``n`` clones of the stack's fast tokenizer backend (None for a slow tokenizer), one for each thread that
    tokenizes at once: a backend serves one thread at a time (each tokenizer call sets its truncation and padding on
    it). Each is made from the backend's serialized form (its normalizer, vocabulary, added tokens and
    post-processor), with what a tokenizer call sets on its backend besides truncation and padding, which that form
    leaves out (``encode_special_tokens``, from the tokenizer's ``split_special_tokens``), set as a call sets it; and
    kept on the stack (``ModuleStack.tokenizer_clones``) for later calls while the backend serializes the same.
    ``_rows`` compares a clone's ids with ``preprocess``'s on every prompt's probe texts."""
    tok = stack.transformer.tokenizer
    backend = getattr(tok, "_tokenizer", None) if getattr(tok, "is_fast", False) else None
    if backend is None:
        return None
    with _plain(backend):
        spec = backend.to_str()
    key = hashlib.sha256(spec.encode()).hexdigest()
    kept = stack.tokenizer_clones
    if kept.get("key") != key:
        kept.clear()
        kept.update(key=key, clones=[])
    clones = kept["clones"]
    while len(clones) < n:
        clones.append(type(backend).from_str(spec))
    for c in clones[:n]:
        c.encode_special_tokens = bool(getattr(tok, "split_special_tokens", False))
    return clones[:n]


def _rows(stack, texts: list[str], prompt: str, max_length: int | None, backends: list | None = None,
          lock: AbstractContextManager | None = None) -> tuple[dict[str, list[np.ndarray]], dict]:
    """Every text's features exactly as sentence-transformers' ``preprocess`` makes them, unpadded: {name: one array
    a row} for the per-token features (input ids, attention mask, token types), and the rest ({prompt_length,
    modality}) as it gave them.

    Its Python-side call costs more than the tokenizing (padding, tensors: 3x the backend's time on STS-B dev), so
    the bulk goes through the fast tokenizer's Rust backend (``prompt + text``, special tokens added, as
    ``preprocess`` feeds its tokenizer) once the longest and shortest texts came out of both with the same ids and
    token types; a text the backend makes longer than the max length is truncated by ``preprocess`` itself.
    Anything else (a slow tokenizer, a feature the backend does not give, ids that differ) takes ``preprocess``
    for every text.

    :param backends: the fast tokenizer's backends that encode the bulk, a share each (``_encode_split``), the
        first also the probe texts (default: the tokenizer's own): clones of it (``_backend_clones``) where another
        thread tokenizes at the same time, or where several share the bulk.
    :param lock: held around each ``preprocess`` call (the tokenizer itself: one thread at a time)."""
    kw = {"max_length": max_length} if max_length else {}
    lock = lock or nullcontext()
    tok = stack.transformer.tokenizer
    limit = max_length or getattr(tok, "model_max_length", None) or 0
    order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first: chunks of similar length
    ordered = [texts[i] for i in order]
    probe = sorted(set(range(min(PROBE // 2, len(ordered))))
                   | set(range(max(len(ordered) - PROBE // 2, 0), len(ordered))))
    with lock:
        head, rest = _preprocessed(stack, [ordered[j] for j in probe], prompt, kw)
    if not getattr(tok, "is_fast", False):
        backends = None
    elif not backends:
        own = getattr(tok, "_tokenizer", None)
        backends = [own] if own is not None else None
    backend = backends[0] if backends else None  # the probe checks what encodes the bulk
    fast = backend is not None and len(ordered) > len(probe) and set(head) <= PER_TOKEN
    if fast:  # compared where preprocess did not truncate (the shortest texts at least)
        same = [list(e.ids) == head["input_ids"][n].tolist() and ("token_type_ids" not in head or list(e.type_ids) ==
                head["token_type_ids"][n].tolist())
                for n, e in enumerate(_encode(backend, [prompt + ordered[j] for j in probe]))
                if not limit or len(head["input_ids"][n]) < limit]
        fast = bool(same) and all(same)
    rows: dict[str, list]  # each text's features (None until filled)
    if not fast:
        with lock:
            rows, rest = _preprocessed(stack, ordered, prompt, kw)
    else:
        assert backends  # fast: the probe's backend is backends[0]
        rows = {name: [None] * len(ordered) for name in head}
        for n, j in enumerate(probe):
            for name in head:
                rows[name][j] = head[name][n]
        todo = [j for j in range(len(ordered)) if rows["input_ids"][j] is None]
        bulk = dict(zip(todo, _encode_split(backends, [prompt + ordered[j] for j in todo])))
        long = [j for j, e in bulk.items() if limit and len(e) > limit]  # truncated: by preprocess's own rule
        if long:
            with lock:
                cut, _ = _preprocessed(stack, [ordered[j] for j in long], prompt, kw)
            for n, j in enumerate(long):
                for name in head:
                    rows[name][j] = cut[name][n]
        _fill(rows, {j: e for j, e in bulk.items() if rows["input_ids"][j] is None})
    out: dict[str, list] = {name: [None] * len(texts) for name in rows}
    for name, rs in rows.items():
        for i, r in zip(order, rs):
            out[name][i] = r
    return out, rest


def _fill(rows: dict[str, list], encodings: dict[int, Any]) -> None:
    """Row ``j`` of each per-token feature in ``rows`` from the backend's encoding ``encodings[j]``: its ids, its
    token types, a mask of ones. Each feature is one array of all the rows (read in one pass, not an array made a
    row), each row a view of it."""
    if not encodings:
        return
    encs = list(encodings.values())
    ends = np.cumsum(np.fromiter(map(len, encs), dtype=np.int64, count=len(encs)))
    spans = list(zip([0, *ends[:-1].tolist()], ends.tolist()))
    total = int(ends[-1])
    read = {"input_ids": lambda e: e.ids, "token_type_ids": lambda e: e.type_ids}
    for name in rows:
        flat = np.ones(total, dtype=np.int64) if name == "attention_mask" else np.fromiter(
            itertools.chain.from_iterable(map(read[name], encs)), dtype=np.int64, count=total)
        for j, (a, b) in zip(encodings, spans):
            rows[name][j] = flat[a:b]


def _pad(rows: dict[str, list[np.ndarray]], idx: np.ndarray, side: str, pad_id: int, device) -> dict[str, torch.Tensor]:
    """Rows ``idx`` of every per-token feature padded to the batch's longest, on ``side`` (input ids with
    ``pad_id``, the rest with 0)."""
    lens = np.fromiter((len(rows["input_ids"][i]) for i in idx), dtype=np.int64, count=len(idx))
    real, _ = padding(lens, side)
    out = {}
    for name, rs in rows.items():
        a = np.full(real.shape, pad_id if name == "input_ids" else 0, dtype=rs[idx[0]].dtype)
        a[real] = np.concatenate([rs[i] for i in idx])
        out[name] = _upload(a, device)
    return out


def _upload(a: np.ndarray, device) -> torch.Tensor:
    """``a`` as a tensor on ``device``: on a GPU, copied from pinned memory without waiting for the device (the
    pinned buffer is not reused before its copy ran: PyTorch's host allocator records the copy), so the host goes on
    to the next batch while this one runs."""
    t = torch.from_numpy(a)
    if torch.device(device).type != "cuda":
        return t.to(device)
    return t.pin_memory().to(device, non_blocking=True)


def st_pooled(encoder, sentences: Sequence[str], prompts: Mapping[str, Sequence[str]], batch_size: int | None = None,
              bar=None, ahead: int | None = None, threads: int | None = None) -> dict[str, dict[str, np.ndarray]]:
    """{prompt: {read-out: (n, dim)}} for the sentences under each prompt, each pooled read-out as sentence-transformers
    computes it for the model's stack with that Pooling (the sentences fed as given; ``encoder``'s ``max_length``
    option, when set, in place of the folder's max length: ``pooled_max_length``).

    Each prompt's rows go in token-budget batches of their own, so a prompt's vectors do not depend on what else is
    encoded with it; the vectors stay on the model's device until every prompt's are computed, then come back in
    one copy. With several prompts, the next prompts are tokenized in worker threads while the previous one's
    batches run (``ahead``), many texts are shared among threads (``threads``), and on a GPU each batch's inputs go
    up from pinned memory without waiting: the same numbers, with the tokenizer's time hidden behind the model's.

    :param prompts: each prompt ("" for none) → the read-outs wanted under it.
    :param ahead: how many prompts are tokenized ahead, each in a worker thread (0 or False: each in turn, in the
        caller's thread; True: one). Default: ``tokenizing_defaults``.
    :param threads: with at most one prompt ahead, the threads among which a prompt's texts are shared once there
        are ``SPLIT_TEXTS`` or more for each (1: none). Default: ``tokenizing_defaults``."""
    stack = encoder.model.stack()
    uniq, inverse = unique(list(sentences))
    if not uniq:
        return {p: {r: np.zeros((0, stack.dimension), np.float32) for r in rs} for p, rs in prompts.items()}
    max_length = encoder.pooled_max_length if encoder.options.max_length else None
    device = encoder.device
    for m in stack.modules:
        m.to(device)
    default_ahead, default_threads = tokenizing_defaults(device)
    ahead = default_ahead if ahead is None else ahead
    threads = default_threads if threads is None else threads
    tok = stack.transformer.tokenizer  # read before worker threads tokenize: from then on only they use it
    pad = getattr(tok, "padding_side", "right"), tok.pad_token_id if tok.pad_token_id is not None else 0
    on_device: dict[str, dict[str, torch.Tensor]] = {}
    with closing(_tokenized(stack, uniq, list(prompts), max_length, int(ahead), threads)) as tokenized:
        for p, (rows, rest) in tokenized:
            poolings = {r: stack.pooling_for(r).to(device) for r in dict.fromkeys(prompts[p])}
            on_device[p] = _forward_rows(encoder, stack, rows, rest, poolings, batch_size, bar, pad)
    return {p: {r: v.cpu().numpy()[inverse] for r, v in got.items()} for p, got in on_device.items()}


def tokenizing_defaults(device) -> tuple[int, int]:
    """``st_pooled``'s defaults on ``device``: (prompts tokenized ahead, threads sharing a prompt's many texts). None
    and 1 on the CPU, where the tokenizer and the model would share the same cores; elsewhere ``TOKENIZE_AHEAD`` and
    ``TOKENIZE_THREADS``, each at most the host's cores less one."""
    if torch.device(device).type == "cpu":
        return 0, 1
    spare = max(1, (os.cpu_count() or 1) - 1)
    return min(TOKENIZE_AHEAD, spare), min(TOKENIZE_THREADS, spare)


def _tokenized(stack, texts: list[str], prompts: list[str], max_length: int | None, ahead: int, threads: int,
               ) -> Generator[tuple[str, tuple[dict[str, list[np.ndarray]], dict]], None, None]:
    """(prompt, ``_rows`` of the texts under it) for each prompt in order. With ``ahead`` above 0 and several
    prompts, that many worker threads tokenize the next prompts while the caller works on this one (at most
    ``ahead + 1`` prompts' rows are held), every prompt's tokenizing in a worker: the caller must not use the
    tokenizer until the generator is closed. Several workers each take a clone of the tokenizer's backend
    (``_backend_clones``) for the bulk, and ``preprocess`` (the tokenizer itself) one at a time; with one worker
    or none, the bulk of many texts is shared among ``threads`` clones (``_encode_split``)."""
    n = min(ahead, len(prompts)) if len(prompts) > 1 else 0
    split = _backend_clones(stack, threads) if threads > 1 and n <= 1 and len(texts) >= 2 * SPLIT_TEXTS else None
    try:
        if n < 1:
            for p in prompts:
                yield p, _rows(stack, texts, p, max_length, backends=split)
            return
        lock = threading.Lock() if n > 1 else None
        free: queue.SimpleQueue = queue.SimpleQueue()  # the backends not in use: one list a worker (None: its own)
        clones = _backend_clones(stack, n) if n > 1 else None
        for b in ([[c] for c in clones] if clones else [split] * n):
            free.put(b)

        def job(p: str):
            backends = free.get()
            try:
                return _rows(stack, texts, p, max_length, backends=backends, lock=lock)
            finally:
                free.put(backends)

        pool = ThreadPoolExecutor(n, thread_name_prefix="promptsearch-tokenize")
        try:
            pending = deque(pool.submit(job, p) for p in prompts[:n])
            for i, p in enumerate(prompts):
                got = pending.popleft().result()
                if i + n < len(prompts):
                    pending.append(pool.submit(job, prompts[i + n]))
                yield p, got
        finally:
            pool.shutdown(wait=True, cancel_futures=True)  # an interrupt or error: the workers' prompts finish first
    except BaseException:  # an error, an interrupt, or the caller stopping early: no clone is handed out again
        stack.tokenizer_clones.clear()  # while a thread a second interrupt left running may still hold it
        raise


def _forward_rows(encoder, stack, rows: dict[str, list[np.ndarray]], rest: dict, poolings: dict, batch_size, bar,
                  pad: tuple[str, int]) -> dict[str, torch.Tensor]:
    """{read-out: (rows, dim) float32 on the model's device}: the token rows through the transformer in token-budget
    batches, each batch pooled by every Pooling in ``poolings``.

    :param pad: the tokenizer's padding side and pad id (read before a worker thread may be tokenizing)."""
    lengths = np.array([len(x) for x in rows["input_ids"]])
    batches = budget_batches(lengths, encoder.max_tokens, batch_size or encoder.batch_size)
    if bar is not None:
        bar.total = (bar.total or 0) + len(batches)
        bar.refresh()
    side, pad_id = pad
    device = encoder.device
    out: dict[str, torch.Tensor] = {}
    with torch.inference_mode(), encoder.autocast():
        for idx in batches:
            feats = {**_pad(rows, idx, side, pad_id, device), **rest}
            feats = stack.transformer(feats)
            where = _upload(idx, device)
            for r, pool in poolings.items():
                v = _pooled(stack, pool, dict(feats))
                if r not in out:
                    out[r] = torch.empty((len(lengths), v.shape[1]), dtype=torch.float32, device=device)
                out[r][where] = v
            if bar is not None:
                bar.update(1)
    return out


def st_forward(stack, texts: Sequence[str], prompt: str, readout: str, max_length: int | None, device) -> torch.Tensor:
    """One batch of texts under ``prompt`` through the stack with ``readout``'s Pooling, (B, dim): differentiable,
    dropout as the encoder's mode says (what training's views of a pooled prompt are)."""
    f = stack.transformer.preprocess(list(texts), prompt=prompt or None,
                                     **({"max_length": max_length} if max_length else {}))
    f = stack.transformer({k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in f.items()})
    pool = stack.pooling_for(readout).to(device)
    for m in stack.after_pooling():
        m.to(device)
    return _pooled(stack, pool, f)


def _pooled(stack, pool, features: dict) -> torch.Tensor:
    """The transformer's ``features`` through ``pool`` and the stack's modules after its Pooling (Dense,
    Normalize …): the sentence embeddings, (B, dim), float32."""
    f = pool(features)
    for m in stack.after_pooling():
        f = m(f)
    return f["sentence_embedding"].float()


def prompt_tokens(stack, prompt: str) -> int:
    """The tokens an input holds besides its sentence under ``prompt`` (the special tokens and the prompt's),
    counted once per stack and prompt (``ModuleStack.prompt_lengths``; every encode call checks its prompts)."""
    if prompt not in stack.prompt_lengths:
        stack.prompt_lengths[prompt] = int(stack.transformer.preprocess([""], prompt=prompt or None)["attention_mask"]
                                           .sum())
    return stack.prompt_lengths[prompt]


def input_lengths(stack, texts: Sequence[str], prompt: str, max_length: int | None) -> list[int]:
    """Each text's input length under ``prompt``, special tokens included, cut at ``max_length``."""
    tok = stack.transformer.tokenizer
    n = [len(x) for x in tok([prompt + t for t in texts], add_special_tokens=True)["input_ids"]]
    return [min(x, max_length) if max_length else x for x in n]
