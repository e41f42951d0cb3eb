"""One template's model inputs over a sentence set, as arrays, padded a batch at a time in numpy.

A row is (input ids, read-out index, template-bias length). ``SplicedRows`` holds them
without building them: the template's ``before`` and ``after`` ids and every sentence's
(truncated) tokens in one flat array, so a batch's padded ids are a few array operations
whatever its size, and the row lengths, read-out indices and bias lengths are arrays the
batching and the bias cache read at once. ``ListRows`` gives the same interface to rows
built one by one (``compat="reference"``, training batches). Indexing either gives the row tuple.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from .batching import padding

Row = tuple[list[int], int, int]  # (input ids, read-out index, template-bias length)


class ListRows(Sequence):
    """Rows given as tuples."""

    def __init__(self, rows: Sequence[Row]):
        self.rows = list(rows)
        self.lengths = np.fromiter((len(x) for x, _, _ in self.rows), dtype=np.int64, count=len(self.rows))
        self.read = np.fromiter((m for _, m, _ in self.rows), dtype=np.int64, count=len(self.rows))
        self.bias = np.fromiter((n for _, _, n in self.rows), dtype=np.int64, count=len(self.rows))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> Row:  # type: ignore[override]  # a row at a time, never a slice
        return self.rows[i]

    def _fill(self, ids: np.ndarray, att: np.ndarray, idx: np.ndarray) -> None:
        ids[att] = np.concatenate([np.asarray(self.rows[i][0], dtype=np.int64) for i in idx]) if len(idx) else []

    def padded(self, idx: np.ndarray, pad_id: int,
               side: str = "right") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(ids, attention mask, read-out index, left-padding shift) of rows ``idx`` padded to the
        longest of them, on the right or on the ``"left"`` (where positions move by the shift)."""
        idx = np.asarray(idx, dtype=np.int64)
        att, shift = padding(self.lengths[idx], side)
        ids = np.full(att.shape, pad_id, dtype=np.int64)
        self._fill(ids, att, idx)
        return ids, att.astype(np.int64), self.read[idx] + shift, shift

    def padded_batches(self, batches: Sequence[np.ndarray], pad_id: int, side: str = "right", cells: int = 1 << 22):
        """``padded`` of each batch, in order, equal to padding each alone: consecutive batches
        are padded together to the first one's width (batches come longest first; at most ``cells``
        ids at a time) and each is then cut back to its own width, a view."""
        i = 0
        while i < len(batches):
            width = int(self.lengths[batches[i]].max()) if len(batches[i]) else 0
            j, n = i + 1, len(batches[i])
            while j < len(batches) and (n + len(batches[j])) * width <= cells:
                n, j = n + len(batches[j]), j + 1
            ids, att, read, shift = self.padded(np.concatenate(batches[i:j]), pad_id, side)
            at = 0
            for idx in batches[i:j]:
                k, w = len(idx), int(self.lengths[idx].max()) if len(idx) else 0
                # left: rows end at the right edge
                cut = slice(ids.shape[1] - w, None) if side == "left" else slice(0, w)
                less = ids.shape[1] - w if side == "left" else 0
                yield ids[at : at + k, cut], att[at : at + k, cut], read[at : at + k] - less, shift[at : at + k] - less
                at += k
            i = j


class SplicedRows(ListRows):
    """``before + sentence[:bias] + after`` rows spliced from one flat array of sentence tokens."""

    def __init__(self, before: Sequence[int], after: Sequence[int], read_in_before: bool, read_index: int,
                 flat: np.ndarray, starts: np.ndarray, bias: np.ndarray):
        self.before, self.after = np.asarray(before, dtype=np.int64), np.asarray(after, dtype=np.int64)
        self.flat, self.starts, self.bias = flat, starts, bias
        self.lengths = len(self.before) + bias + len(self.after)
        self.read = np.full_like(bias, read_index) if read_in_before else len(self.before) + bias + read_index

    def __len__(self) -> int:
        return len(self.bias)

    def __getitem__(self, i: int) -> Row:  # type: ignore[override]  # a row at a time, never a slice
        s = self.flat[self.starts[i] : self.starts[i] + self.bias[i]]
        return np.concatenate([self.before, s, self.after]).tolist(), int(self.read[i]), int(self.bias[i])

    def _fill(self, ids: np.ndarray, att: np.ndarray, idx: np.ndarray) -> None:
        nb, na, n = len(self.before), len(self.after), self.bias[idx][:, None]
        col = np.cumsum(att, axis=1) - 1  # each real token's place within its row (padding: not read)
        head = att & (col < nb)
        ids[head] = self.before[col[head]]
        body = att & (col >= nb) & (col < nb + n)
        ids[body] = self.flat[(self.starts[idx][:, None] + col - nb)[body]]
        if na:
            tail = att & (col >= nb + n)
            ids[tail] = self.after[(col - nb - n)[tail]]
