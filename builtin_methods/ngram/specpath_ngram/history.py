"""Every live request's tokens, kept between steps so a step copies only what is new.

The engine hands the speculator each request's whole history every step. Copying all of it
into a fresh buffer would cost O(total tokens) per step before any matching starts; instead
each request owns a row of one padded int32 buffer and a step appends the tokens added since
the previous one. Rows and width grow by doubling, so a long-running server never copies a
history more than a logarithmic number of times.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from specpath_engine.modeling.rows import RowAllocator


class TokenHistory:
    """Request id -> a row of :attr:`tokens`; lengths of what each row holds."""

    def __init__(self, slots: int = 8, width: int = 256) -> None:
        self.tokens = np.zeros((max(slots, 1), max(width, 1)), dtype=np.int32)
        """``[slots, width]``: row ``r`` holds a request's tokens in ``[:lengths[r]]``."""
        self.lengths = np.zeros(self.tokens.shape[0], dtype=np.int64)
        self.rows = RowAllocator(self.tokens.shape[0], owner="ngram token history")

    def __len__(self) -> int:
        return len(self.rows)

    def update(self, requests: Sequence, appended: list | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Bring every request's row up to date; ``(rows, lengths)`` int32, in batch order.

        Each ``request`` has ``req_id`` and ``token_ids``; tokens already stored are assumed
        unchanged (committed tokens never change). When ``appended`` is a list, each write is
        recorded as ``(row, start, tokens)`` so a device copy can replay exactly these writes.
        """
        rows = np.empty(len(requests), dtype=np.int32)
        lengths = np.empty(len(requests), dtype=np.int32)
        for i, request in enumerate(requests):
            row = self.rows.row(request.req_id, grow=self._add_rows)
            token_ids = request.token_ids
            length = len(token_ids)
            have = int(self.lengths[row])
            if length < have:  # a restarted request: its row is rewritten from the start
                have = 0
            if length > have:
                if length > self.tokens.shape[1]:
                    self._widen(length)
                new = np.asarray(token_ids[have:length], dtype=np.int32)
                self.tokens[row, have:length] = new
                if appended is not None:
                    appended.append((row, have, new))
            self.lengths[row] = length
            rows[i] = row
            lengths[i] = length
        return rows, lengths

    def remove(self, req_id: str) -> None:
        """Free a finished request's row (unknown ids are ignored)."""
        row = self.rows.release(req_id)
        if row is not None:
            self.lengths[row] = 0

    def _add_rows(self, slots: int) -> None:
        """Double the buffers' rows (every row is taken)."""
        self.tokens = np.concatenate([self.tokens, np.zeros_like(self.tokens)])
        self.lengths = np.concatenate([self.lengths, np.zeros_like(self.lengths)])

    def _widen(self, length: int) -> None:
        slots, width = self.tokens.shape
        wider = np.zeros((slots, max(2 * width, length)), dtype=np.int32)
        wider[:, :width] = self.tokens
        self.tokens = wider
