"""``RowAllocator``: which row of a drafter's per-request buffers a live request owns.

Drafters keep their state (KV, last hidden state, token table) in ``[rows, ...]`` tensors, one
row per live request; a request takes the lowest free row on first use and gives it back when
it finishes. Growing buffers (a draft model's KV) add rows with :meth:`add_rows`.
"""

from __future__ import annotations

from collections.abc import Callable


class RowAllocator:
    def __init__(self, num_rows: int = 0, *, owner: str = "drafter") -> None:
        self.num_rows = 0
        self.owner = owner
        """Named in the error when every row is taken."""
        self._free: list[int] = []
        self._row_of: dict[str, int] = {}
        self.add_rows(num_rows)

    def add_rows(self, num_rows: int) -> None:
        """``num_rows`` more rows after the existing ones (taken lowest first)."""
        self._free.extend(range(self.num_rows + num_rows - 1, self.num_rows - 1, -1))
        self.num_rows += num_rows

    @property
    def has_free_row(self) -> bool:
        return bool(self._free)

    def get(self, req_id: str) -> int | None:
        """The request's row, or None when it holds none."""
        return self._row_of.get(req_id)

    def row(self, req_id: str, *, grow: Callable[[int], None] | None = None) -> int:
        """The request's row, taken on first use. With every row taken, ``grow(n)`` (when given)
        doubles the owner's buffers from ``n`` rows to ``2n`` and the ``n`` new rows are added;
        without it that is an error."""
        row = self._row_of.get(req_id)
        if row is None:
            if not self._free and grow is not None:
                grow(self.num_rows)
                self.add_rows(self.num_rows)
            if not self._free:
                raise RuntimeError(f"{self.owner}: more live requests than its {self.num_rows} rows (max_num_seqs)")
            row = self._row_of[req_id] = self._free.pop()
        return row

    def release(self, req_id: str) -> int | None:
        """Give the request's row back; returns it (None when it held none)."""
        row = self._row_of.pop(req_id, None)
        if row is not None:
            self._free.append(row)
        return row

    def __contains__(self, req_id: str) -> bool:
        return req_id in self._row_of

    def __len__(self) -> int:
        """Rows in use."""
        return len(self._row_of)
