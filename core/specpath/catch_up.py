"""A lazily fed drafter catches up on a window of a request's newest positions, not on all of them.

A drafter that tolerates skipped steps (``SpeculatorConfig.tolerates_skipped_steps``) is handed a
request only in steps where it drafts, and then every position since it last saw it. After a long
back-off (the guard's exploration bursts come after up to hundreds of plain steps) that catch-up
costs the drafter a row per skipped position before one draft is verified (SmolLM2-135M int4,
EAGLE-3, 8 completions, a training job beside it: a burst handed 1,446 positions over at once, 242
ms of drafter where plain steps took ~50 ms), and it comes exactly where drafting was not paying.

With a window ``W``, a catch-up of more than ``W`` positions restarts the request in the drafter
from its newest ``W``: the drafter sees a new request (its own id, ``"<id>@<start>"``) whose
prompt is those positions, and its own KV for the request starts over. The drafters' attention
is rotary, so positions only matter relative to each other, and a seeded request's sampling
noise is looked up at the true positions. Every draft is still verified, so the output never
changes: only how much older context the drafter reads from then on.

A request's first hand-over, its prompt, is never cut: a head reading only the newest 64
positions of every prompt drafted worse (EAGLE-3 on 24 held-out prompts, K=4: τ 2.391 against
2.428, code 2.72 / 2.78, chat 2.46 / 2.53), and a request that drafts from its start pays for its
prompt once, as for a prefill. Probes wait at most 64 positions between tries
(``specpath_engine.draft_governor.MAX_WAIT``), so at the default window it is the long catch-ups
that are cut.

Example: ``W = 64``; a request with a 300-token prompt drafted from its start, then backed off for
200 positions. The drafter gets ``"r1@436"`` with ``token_ids[436:]`` (64 positions to ingest and
the sampled token) and the hidden states of positions 436-499 only; three positions later
``"r1@436"`` again with those three.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftRequest


@attrs.frozen
class ShiftedNoise:
    """A request's sampling noise seen from a view that starts ``start`` tokens in: position ``p``
    of the view is position ``p + start`` of the request."""

    noise: Any
    start: int

    def gumbel(self, first: int, count: int) -> Any:
        return self.noise.gumbel(first + self.start, count)


def catch_up_window(spec: Any) -> int:
    """The window for a resolved ``SpeculativeConfig``'s drafter, 0 where none applies: drafters
    with weights the engine feeds lazily (``tolerates_skipped_steps``, not ``model_free``)."""
    flags = spec.speculator_config
    if flags.model_free or not flags.tolerates_skipped_steps or not flags.proposes_draft_tokens:
        return 0
    from specpath.config.speculative import DEFAULT_CATCH_UP_WINDOW

    return DEFAULT_CATCH_UP_WINDOW if spec.catch_up_window is None else int(spec.catch_up_window)


def handed_over(first: int, num_positions: int, window: int) -> int:
    """How many of a request's ``num_positions`` pending positions, the first at position
    ``first``, its drafter is handed with this window (0: no window): a prompt (``first`` 0) whole,
    a catch-up at most ``window``."""
    return num_positions if not window or first == 0 else min(num_positions, window)


class CatchUpWindow(BaseSpeculator):
    """``inner`` fed at most ``window`` positions of a request at once (see the module docstring).
    Anything else is the inner speculator's: other attributes are read from it and set on it."""

    def __init__(self, inner: BaseSpeculator, window: int) -> None:
        if int(window) < 1:
            raise ValueError(f"catch-up window {window!r}: at least 1 position")
        super().__init__(inner.spec, inner.context)
        self.inner = inner
        self.window = int(window)
        self._starts: dict[str, int] = {}
        """Per restarted request, the first of its tokens the drafter's view holds (others: 0)."""
        self.num_restarts = 0
        """Hand-overs cut to the window (for metrics and tests)."""
        self.positions_skipped = 0
        """Positions those cuts left out."""

    _OWN = frozenset({"spec", "context", "inner", "window", "_starts", "num_restarts", "positions_skipped",
                      "propose", "on_verified", "remove_request", "forget_responses"})
    """What this wrapper holds itself; any other attribute, read, set or deleted, is the inner speculator's."""

    def __getattr__(self, name: str) -> Any:  # only for names this class does not define
        if name == "inner":
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in self._OWN:
            object.__setattr__(self, name, value)
        else:
            setattr(self.inner, name, value)

    def __delattr__(self, name: str) -> None:
        if name in self._OWN:
            object.__delattr__(self, name)
        else:
            delattr(self.inner, name)

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return self.inner.hidden_state_layers

    @property
    def draft_pass_cost(self) -> float | None:  # type: ignore[override]
        return self.inner.draft_pass_cost

    @staticmethod
    def _alias(req_id: str, start: int) -> str:
        return req_id if start == 0 else f"{req_id}@{start}"

    def propose(self, batch: DraftBatch) -> DraftProposal:
        window, starts = self.window, self._starts
        if not starts and all(handed_over(len(r.token_ids) - 1 - r.num_new_positions, r.num_new_positions, window)
                              == r.num_new_positions for r in batch.requests):
            return self.inner.propose(batch)  # nothing restarted, nothing to cut: the batch as it is
        views: list[DraftRequest] = []
        keep: list[int] = []  # rows of batch.hidden_states handed on
        row = 0
        for r in batch.requests:
            n = r.num_new_positions
            start = starts.get(r.req_id, 0)
            handed = handed_over(len(r.token_ids) - 1 - n, n, window)
            if handed < n:  # a catch-up cut: the drafter's view restarts at its newest positions
                self.inner.remove_request(self._alias(r.req_id, start))  # (a no-op where it held none)
                start = starts[r.req_id] = len(r.token_ids) - 1 - handed
                self.num_restarts += 1
                self.positions_skipped += n - handed
            keep.extend(range(row + n - handed, row + n))
            row += n
            n = handed
            if start == 0:
                views.append(r)
                continue
            noise = None if r.noise is None else ShiftedNoise(r.noise, start)
            views.append(attrs.evolve(r, req_id=self._alias(r.req_id, start), token_ids=r.token_ids[start:],
                                      num_new_positions=n, noise=noise))
        hidden = batch.hidden_states
        if hidden is not None and len(keep) != row:
            hidden = hidden[keep]  # [sum(positions handed on), layers, hidden]
        return self.inner.propose(DraftBatch(requests=tuple(views), hidden_states=hidden))

    def on_verified(self, req_ids: Sequence[str], num_accepted: Sequence[int]) -> None:
        starts = self._starts
        if starts:
            req_ids = [self._alias(r, starts.get(r, 0)) for r in req_ids]
        self.inner.on_verified(req_ids, num_accepted)

    def remove_request(self, req_id: str) -> None:
        self.inner.remove_request(self._alias(req_id, self._starts.pop(req_id, 0)))

    def forget_responses(self) -> None:
        self.inner.forget_responses()
