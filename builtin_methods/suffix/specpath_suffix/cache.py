"""``SuffixCache``: every live request's suffix tree and the global tree of finished
responses, behind a request-id API.

The trees are :mod:`specpath_suffix.forest` arrays; this class owns them, grows them before a
compiled call could run out of room (a token adds at most ``depth`` nodes), keeps each live
request's tokens in a padded row (they are re-read to roll a request back or to re-match it in
a changed global tree) and keeps the global tree's FIFO of cached responses.

What goes where (as in Arctic Inference): a request's own tree holds its prompt and its
output; when the request ends, its output (the tokens after what it held when it first asked
for drafts) joins the global tree, which keeps at most ``max_cached_requests`` responses and
drops the oldest first. A request id that comes back (a preempted request resumed) replaces
its earlier response.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from specpath_suffix import drafts as d
from specpath_suffix import forest as f


class SuffixCache:
    """Suffix trees for live requests plus the global tree; see the module docstring."""

    def __init__(
        self,
        *,
        max_tree_depth: int = 24,
        max_cached_requests: int = 10000,
        max_spec_factor: float = 1.0,
        min_token_prob: float = 0.1,
        slots: int = 8,
        width: int = 256,
    ) -> None:
        self.depth = int(max_tree_depth)
        self.max_cached_requests = int(max_cached_requests)
        self.max_spec_factor = float(max_spec_factor)
        self.min_token_prob = float(min_token_prob)
        self.nodes = np.zeros((1024, f.NODE_FIELDS), np.int32)
        self.free = np.zeros(1024, np.int32)
        self.meta = np.zeros(4, np.int64)
        self.table = np.full((2048, 2), f.EMPTY, np.int64)
        slots, width = max(int(slots), 1), max(int(width), 1)
        self.roots = np.full(slots, -1, np.int32)
        self.active = np.full((slots, self.depth + 1), -1, np.int32)
        self.nact = np.zeros(slots, np.int64)
        self.gmatch = np.full((slots, self.depth + 1), -1, np.int32)
        self.gepoch = np.full(slots, -1, np.int64)
        self.history = np.zeros((slots, width), np.int32)
        self.lengths = np.zeros(slots, np.int64)
        self.response_starts = np.full(slots, -1, np.int64)
        self._rows: dict[str, int] = {}
        self._free_rows = list(range(slots - 1, -1, -1))
        self._responses: OrderedDict[str, tuple[int, np.ndarray]] = OrderedDict()
        """req id -> (where its response started, the response), oldest first."""
        self.global_root = -1
        if self.max_cached_requests != 0:
            self.reserve(0)
            self.global_root = int(f.new_root(self.nodes, self.free, self.meta))
        self._out = np.zeros((slots, max(self.depth, 1)), np.int32)
        self._counts = np.zeros(slots, np.int32)

    # -- capacity ---------------------------------------------------------------------------

    @property
    def num_nodes(self) -> int:
        """Nodes in use (every tree, roots included)."""
        return int(self.meta[f.META_NEXT] - self.meta[f.META_FREE])

    def reserve(self, new_tokens: int) -> None:
        """Make room for ``new_tokens`` appended tokens (``depth`` nodes each) and a root."""
        need = int(new_tokens) * self.depth + 1
        cap = self.nodes.shape[0]
        if int(self.meta[f.META_NEXT]) + need > cap:  # the free list is a bonus, not counted
            size = max(2 * cap, int(self.meta[f.META_NEXT]) + need)
            nodes = np.zeros((size, f.NODE_FIELDS), np.int32)
            nodes[:cap] = self.nodes
            free = np.zeros(size, np.int32)
            free[:cap] = self.free
            self.nodes, self.free = nodes, free
        used = int(self.meta[f.META_HASH_USED]) + need
        if 2 * used > self.table.shape[0]:
            size = self.table.shape[0]
            while 2 * used > size:
                size *= 2
            table = np.full((size, 2), f.EMPTY, np.int64)
            f.rehash(self.table, table)
            self.table = table

    def _row(self, req_id: str) -> int:
        row = self._rows.get(req_id)
        if row is not None:
            return row
        if not self._free_rows:
            self._grow_rows()
        row = self._free_rows.pop()
        self._rows[req_id] = row
        self.reserve(0)
        self.roots[row] = f.new_root(self.nodes, self.free, self.meta)
        self.active[row] = -1
        self.active[row, 0] = self.roots[row]
        self.nact[row] = 0
        self.gmatch[row] = -1
        self.gepoch[row] = -1
        self.lengths[row] = 0
        self.response_starts[row] = -1
        cached = self._responses.get(req_id)
        if cached is not None:  # resumed: its response still starts where it did
            self.response_starts[row] = cached[0]
        return row

    def _grow_rows(self) -> None:
        slots = self.roots.shape[0]

        def doubled(a: np.ndarray, fill: int) -> np.ndarray:
            return np.concatenate([a, np.full_like(a, fill)])

        self.roots = doubled(self.roots, -1)
        self.active = doubled(self.active, -1)
        self.nact = doubled(self.nact, 0)
        self.gmatch = doubled(self.gmatch, -1)
        self.gepoch = doubled(self.gepoch, -1)
        self.history = doubled(self.history, 0)
        self.lengths = doubled(self.lengths, 0)
        self.response_starts = doubled(self.response_starts, -1)
        self._out = doubled(self._out, 0)
        self._counts = doubled(self._counts, 0)
        self._free_rows = list(range(2 * slots - 1, slots - 1, -1))

    def _widen(self, length: int) -> None:
        slots, width = self.history.shape
        wider = np.zeros((slots, max(2 * width, length)), np.int32)
        wider[:, :width] = self.history
        self.history = wider

    # -- one request at a time (tests, tools) -------------------------------------------------

    def __contains__(self, req_id: str) -> bool:
        return req_id in self._rows

    def tokens(self, req_id: str) -> np.ndarray:
        row = self._rows[req_id]
        return self.history[row, : self.lengths[row]].copy()

    def append(self, req_id: str, tokens: Sequence[int]) -> None:
        """Append tokens to a request (starting it if new)."""
        row = self._row(req_id)
        have = int(self.lengths[row])
        self._write(row, have, have + len(tokens), tokens)
        self._step(np.array([row], np.int32), np.array([have], np.int32),
                   np.array([have + len(tokens)], np.int32), np.zeros(1, np.int32))

    def truncate(self, req_id: str, length: int) -> None:
        """Roll a request back to its first ``length`` tokens (O(depth) per removed token)."""
        row = self._rows[req_id]
        have = int(self.lengths[row])
        if not 0 <= length <= have:
            raise ValueError(f"cannot truncate {have} tokens to {length}")
        self.nact[row] = f.truncate(
            self.nodes, self.free, self.meta, self.table, self.roots[row], self.active[row],
            self.nact[row], self.history[row], have, length, self.depth,
        )
        self.lengths[row] = length
        self.gepoch[row] = -1  # match nodes in the global tree are recomputed
        if self.response_starts[row] > length:
            self.response_starts[row] = length

    def draft(self, req_id: str, max_tokens: int) -> list[int]:
        """Path-mode draft for one live request (marks the start of its response if unset)."""
        row = self._rows[req_id]
        if self.response_starts[row] < 0:
            self.response_starts[row] = self.lengths[row]
        rows = np.array([row], np.int32)
        length = self.lengths[rows].astype(np.int32)
        counts = self._step(rows, length, length, np.array([max_tokens], np.int32))
        return self._out[0, : counts[0]].tolist()

    def tree_draft(self, req_id: str, max_tokens: int) -> tuple[list[int], list[int], list[float], float]:
        """Tree-mode draft for one live request: ``(tokens, parents, probs, score)`` of the
        better-scoring tree (request or global); parents index into the same lists, -1 for
        children of the last token."""
        row = self._rows[req_id]
        length = int(self.lengths[row])
        size = max(int(max_tokens), 1)
        best = ([], [], [], 0.0)
        trees = [(self.active[row], int(self.nact[row]))]
        if self.global_root != -1:
            self._refresh_global_matches(row)
            trees.append((self.gmatch[row], min(length, self.depth)))
        for matches, limit in trees:
            tokens, parents = np.zeros(size, np.int32), np.zeros(size, np.int32)
            probs = np.zeros(size, np.float64)
            n, score = d.speculate_tree(
                self.nodes, matches, limit, int(max_tokens), self.max_spec_factor, self.min_token_prob,
                tokens, parents, probs,
            )
            if score > best[3]:
                best = (tokens[:n].tolist(), parents[:n].tolist(), probs[:n].tolist(), float(score))
        return best

    def stop(self, req_id: str) -> None:
        """End a request: free its tree; its response joins the global tree (FIFO)."""
        row = self._rows.pop(req_id, None)
        if row is None:
            return
        length = int(self.lengths[row])
        start = int(self.response_starts[row])
        f.free_tree(self.nodes, self.free, self.meta, self.table, self.roots[row])
        self.roots[row] = -1
        self.lengths[row] = 0
        self._free_rows.append(row)
        if self.global_root == -1:
            return
        self.evict(req_id)
        if start < 0 or start >= length:
            return
        response = self.history[row, start:length].copy()
        self.reserve(len(response))
        f.insert_sequence(self.nodes, self.free, self.meta, self.table, self.global_root, response, self.depth)
        self._responses[req_id] = (start, response)
        while self.max_cached_requests > 0 and len(self._responses) > self.max_cached_requests:
            _, (_, oldest) = self._responses.popitem(last=False)
            f.remove_sequence(self.nodes, self.free, self.meta, self.table, self.global_root, oldest, self.depth)

    def evict(self, req_id: str) -> None:
        """Drop one cached response from the global tree (unknown ids are ignored)."""
        old = self._responses.pop(req_id, None)
        if old is not None:
            f.remove_sequence(self.nodes, self.free, self.meta, self.table, self.global_root, old[1], self.depth)

    def forget_responses(self) -> None:
        """Empty the global tree (live requests keep their own trees): what follows drafts as on
        a fresh cache, so a seeded call repeats its first run's text."""
        for req_id in list(self._responses):
            self.evict(req_id)

    @property
    def cached_requests(self) -> list[str]:
        """Ids whose responses the global tree holds, oldest first."""
        return list(self._responses)

    # -- a batch (the speculator's step) ----------------------------------------------------

    def update(self, requests: Sequence) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Bring every request (``req_id``, ``token_ids``) up to date without touching its
        tree yet; ``(rows, old_lengths, new_lengths)`` int32 for :meth:`step`. A history that
        shrank or changed is rolled back to the common prefix first. Per request this is a few
        Python operations; the new tokens of the whole batch are copied in one call."""
        get = self._rows.get
        rows = [get(request.req_id) for request in requests]
        if None in rows:
            rows = [self._row(r.req_id) if row is None else row for r, row in zip(requests, rows)]
        rows = np.array(rows, np.int32)
        have = self.lengths[rows]
        last = self.history[rows, np.maximum(have - 1, 0)]
        old, new, fresh = [], [], []
        for request, row, length, token in zip(requests, rows.tolist(), have.tolist(), last.tolist()):
            token_ids = request.token_ids
            size = len(token_ids)
            if length and (size < length or token_ids[length - 1] != token):
                self._roll_back(request.req_id, row, token_ids)
                length = int(self.lengths[row])
            old.append(length)
            new.append(size)
            if size > length:
                fresh += token_ids[length:size]
        old = np.array(old, np.int32)
        new = np.array(new, np.int32)
        if len(new) and int(new.max()) > self.history.shape[1]:
            self._widen(int(new.max()))
        f.write_rows(self.history, rows, old, new, np.array(fresh, np.int32))
        return rows, old, new

    def step(self, rows: np.ndarray, old: np.ndarray, new: np.ndarray, budgets: np.ndarray) -> np.ndarray:
        """Ingest what :meth:`update` wrote and draft for every row with a budget > 0; the
        drafts are ``self.drafts[i, :counts[i]]``. Returns ``counts``."""
        starting = (budgets > 0) & (self.response_starts[rows] < 0)
        self.response_starts[rows[starting]] = new[starting]
        return self._step(rows, old, new, budgets)

    @property
    def drafts(self) -> np.ndarray:
        return self._out

    # -- internals ----------------------------------------------------------------------------

    def _write(self, row: int, start: int, end: int, tokens: Sequence[int]) -> None:
        if end > self.history.shape[1]:
            self._widen(end)
        self.history[row, start:end] = np.asarray(tokens, dtype=np.int32)

    def _roll_back(self, req_id: str, row: int, token_ids: Sequence[int]) -> None:
        have = int(self.lengths[row])
        common = min(have, len(token_ids))
        if common:
            same = self.history[row, :common] == np.asarray(token_ids[:common], dtype=np.int32)
            common = common if same.all() else int(np.argmin(same))
        self.truncate(req_id, common)

    def _refresh_global_matches(self, row: int) -> None:
        if self.gepoch[row] != self.meta[f.META_EPOCH]:
            f.match_nodes(self.nodes, self.table, self.global_root, self.history[row], int(self.lengths[row]),
                          self.depth, self.gmatch[row])
            self.gepoch[row] = self.meta[f.META_EPOCH]

    def _step(self, rows: np.ndarray, old: np.ndarray, new: np.ndarray, budgets: np.ndarray) -> np.ndarray:
        self.reserve(int((new - old).sum()))
        size = rows.shape[0]
        if self._counts.shape[0] < size:
            self._out = np.zeros((size, self._out.shape[1]), np.int32)
            self._counts = np.zeros(size, np.int32)
        budgets = np.minimum(budgets, self.depth).astype(np.int32)
        counts = self._counts[:size]
        d.step(
            self.nodes, self.free, self.meta, self.table, self.depth,
            self.roots, self.active, self.nact, self.gmatch, self.gepoch, self.history,
            rows, old, new, budgets, self.global_root, self.max_spec_factor, self.min_token_prob,
            self._out, counts,
        )
        self.lengths[rows] = new
        return counts
