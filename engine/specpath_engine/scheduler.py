"""Continuous batching with chunked prefill and a per-step draft budget.

Each step the scheduler decides, for every request it runs, how many of its uncomputed tokens
the target computes (a prefill chunk, or the one last-sampled token of a decoding request) and
how many drafts the runner may attach to a decoding request (the step's K, from the dynamic-K
table at the current batch size). Budgets are hard limits:

- at most ``max_num_seqs`` requests and ``max_num_batched_tokens`` target rows per step, where a
  decoding request costs ``1 + K`` rows plus the speculator's extra draft slots (unless it drafts
  in a separate workspace lane, which adds no rows to the target batch);
- KV blocks for every computed position, the step's drafts and ``num_lookahead_tokens`` more.

A prefill chunk never ends fewer than ``num_prefill_lookahead_tokens`` tokens before the end of
the prompt, so a drafter that reads the tokens after a committed position always has them.
When the KV pool runs dry the most recently admitted running request is preempted (its blocks
freed, to be recomputed later, prefix cache permitting). A preempted request that was decoding
recomputes all but its last token, which it then decodes as before, drafts included: its steps
(and so the random numbers each one draws) are the ones it would have run without preemption.

The scheduler reads only numbers; it never knows which method is running.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import attrs

from specpath.config.model import SchedulerConfig
from specpath_engine.block_manager import BlockManager
from specpath_engine.request import Request, RequestStatus


def _at_least_one(instance, attribute, value) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be >= 1, got {value}")


def _non_negative(instance, attribute, value) -> None:
    if value < 0:
        raise ValueError(f"{attribute.name} must be >= 0, got {value}")


@attrs.frozen(kw_only=True)
class SchedulerSettings:
    """The numbers the scheduler obeys: the user's budgets (``specpath.config.model.SchedulerConfig``)
    with the context length and the speculative reservations filled in, built from an
    ``EngineConfig`` by :meth:`specpath_engine.llm_engine.LLMEngine.from_config`."""

    max_num_seqs: int = attrs.field(default=attrs.fields(SchedulerConfig).max_num_seqs.default,
                                    validator=_at_least_one)
    max_num_batched_tokens: int = attrs.field(default=attrs.fields(SchedulerConfig).max_num_batched_tokens.default,
                                              validator=_at_least_one)
    max_model_len: int = attrs.field(default=2048, validator=_at_least_one)
    enable_chunked_prefill: bool = True
    num_lookahead_tokens: int = attrs.field(default=0, validator=_non_negative)
    """KV slots reserved past each request's scheduled tokens (``EngineConfig.num_lookahead_tokens``)."""
    num_prefill_lookahead_tokens: int = attrs.field(default=0, validator=_non_negative)
    num_extra_draft_slots: int = attrs.field(default=0, validator=_non_negative)
    """Target-batch rows a drafting request needs beyond ``1 + K`` (0 for separate-lane drafters)."""
    speculative: bool = False
    """Whether a speculator drafts at all."""

    def __attrs_post_init__(self) -> None:
        if self.max_num_batched_tokens <= self.num_prefill_lookahead_tokens:
            raise ValueError(
                f"max_num_batched_tokens={self.max_num_batched_tokens} must exceed "
                f"num_prefill_lookahead_tokens={self.num_prefill_lookahead_tokens}"
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise ValueError(
                f"max_num_batched_tokens={self.max_num_batched_tokens} must be >= max_model_len="
                f"{self.max_model_len} when chunked prefill is disabled"
            )


@attrs.define(kw_only=True, eq=False)
class ScheduledRequest:
    request: Request
    num_new_tokens: int
    """Uncomputed tokens the target computes this step (drafts excluded)."""
    max_draft_tokens: int
    """Drafts the runner may attach (0 unless the request decodes this step)."""

    @property
    def samples(self) -> bool:
        """Whether this step reaches the request's last token, so the target samples a new one."""
        r = self.request
        return r.num_computed_tokens + self.num_new_tokens == len(r.token_ids)


@attrs.define(kw_only=True, eq=False)
class SchedulerOutput:
    scheduled: list[ScheduledRequest]
    num_batched_tokens: int
    """Target rows budgeted this step (drafts at their maximum)."""
    num_speculative_tokens: int
    """The step's K before per-request clipping."""
    preempted: list[Request]


class Scheduler:
    """FCFS continuous batching over a :class:`BlockManager`."""

    def __init__(
        self,
        config: SchedulerSettings,
        block_manager: BlockManager,
        k_for_batch_size: Callable[[int], int] = lambda n: 0,
    ) -> None:
        self.config = config
        self.blocks = block_manager
        self.k_for_batch_size = k_for_batch_size
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        c = config
        worst = -(-(c.max_model_len + c.num_lookahead_tokens) // block_manager.block_size)
        if worst > block_manager.num_blocks:
            raise ValueError(
                f"KV cache of {block_manager.num_blocks} blocks cannot hold one request of max_model_len="
                f"{c.max_model_len} (+{c.num_lookahead_tokens} lookahead); needs {worst} blocks"
            )

    def add_request(self, request: Request) -> None:
        c = self.config
        if len(request.token_ids) >= c.max_model_len:
            raise ValueError(
                f"request {request.req_id}: prompt of {len(request.token_ids)} tokens does not fit "
                f"max_model_len={c.max_model_len} (needs room for at least one new token)"
            )
        request.status = RequestStatus.WAITING
        self.waiting.append(request)

    @property
    def has_unfinished(self) -> bool:
        return bool(self.waiting or self.running)

    # ------------------------------------------------------------------------------ step
    def _prefill_chunk(self, request: Request, budget: int) -> int:
        """How much of ``request``'s uncomputed prompt fits ``budget`` (0: wait)."""
        remaining = request.num_uncomputed
        if self.config.speculative and request.num_output_tokens > 0:
            remaining -= 1  # a recompute after preemption: the last token is a decode step, with drafts
        chunk = min(remaining, budget)
        if chunk < remaining:
            if not self.config.enable_chunked_prefill:
                return 0
            chunk = min(chunk, remaining - self.config.num_prefill_lookahead_tokens)
        return max(chunk, 0)

    def _draft_budget(self, request: Request, k: int, budget: int) -> int:
        """The step's K for one decoding request, clipped to its limits and the row budget."""
        c = self.config
        k = min(
            k,
            c.max_model_len - 1 - request.num_computed_tokens,  # last draft position < max_model_len
            request.params.max_tokens - request.num_output_tokens - 1,  # drafts past the end are waste
        )
        if k <= 0:
            return 0
        if 1 + k + c.num_extra_draft_slots > budget:
            k = budget - 1 - c.num_extra_draft_slots
        return max(k, 0)

    def _preempt(self, request: Request) -> None:
        self.blocks.free(request.table)
        request.table.block_hashes.clear()
        request.num_computed_tokens = 0
        request.num_delivered_positions = 0
        request.status = RequestStatus.WAITING
        request.num_preemptions += 1
        self.waiting.appendleft(request)

    def schedule(self) -> SchedulerOutput:
        c = self.config
        budget = c.max_num_batched_tokens
        n_active = min(c.max_num_seqs, len(self.running) + len(self.waiting))
        k = self.k_for_batch_size(n_active) if c.speculative else 0
        scheduled: list[ScheduledRequest] = []
        preempted: list[Request] = []

        i = 0
        while i < len(self.running) and budget > 0:
            request = self.running[i]
            if request.num_uncomputed == 1:
                drafts = self._draft_budget(request, k, budget)
                new, cost = 1, 1 + drafts + (c.num_extra_draft_slots if drafts else 0)
            else:
                new = self._prefill_chunk(request, budget)
                drafts, cost = 0, new
                if new == 0:
                    i += 1
                    continue
            positions = request.num_computed_tokens + new + drafts + c.num_lookahead_tokens
            while not self.blocks.can_allocate(request.table, positions):
                victim = self.running.pop()
                self._preempt(victim)
                preempted.append(victim)
                if victim is request:
                    break
            if request.status is not RequestStatus.RUNNING:
                break  # it preempted itself: nothing after it is left either
            self.blocks.allocate(request.table, positions)
            scheduled.append(ScheduledRequest(request=request, num_new_tokens=new, max_draft_tokens=drafts))
            budget -= cost
            i += 1

        while self.waiting and len(self.running) < c.max_num_seqs and budget > 0 and not preempted:
            request = self.waiting[0]
            fresh = not request.table.block_ids and request.num_computed_tokens == 0
            if fresh:
                cached = self.blocks.match_prefix(request.table, request.token_ids)
                request.num_computed_tokens = cached
                request.metrics.num_cached_tokens = cached
            new = self._prefill_chunk(request, budget)
            drafts = 0
            if new == 0 and c.speculative and request.num_output_tokens > 0 and request.num_uncomputed == 1:
                # the prefix cache held all of a preempted request but its last token: it decodes now
                new, drafts = 1, self._draft_budget(request, k, budget)
            positions = request.num_computed_tokens + new + drafts + c.num_lookahead_tokens
            if new == 0 or not self.blocks.can_allocate(request.table, positions):
                if fresh:  # give back the prefix-cache hits; retry next step
                    self.blocks.free(request.table)
                    request.num_computed_tokens = 0
                break
            self.blocks.allocate(request.table, positions)
            self.waiting.popleft()
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            scheduled.append(ScheduledRequest(request=request, num_new_tokens=new, max_draft_tokens=drafts))
            budget -= new + drafts + (c.num_extra_draft_slots if drafts else 0)

        return SchedulerOutput(
            scheduled=scheduled,
            num_batched_tokens=c.max_num_batched_tokens - budget,
            num_speculative_tokens=k,
            preempted=preempted,
        )

    def finish(self, request: Request, reason: str) -> None:
        """Retire a request (running or waiting) and free its blocks."""
        if request in self.running:
            self.running.remove(request)
        else:
            self.waiting.remove(request)
        request.status = RequestStatus.FINISHED
        request.finish_reason = reason
        self.blocks.free(request.table)

