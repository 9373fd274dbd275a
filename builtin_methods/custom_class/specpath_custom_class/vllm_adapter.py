"""Run a vLLM ``custom_class`` proposer unchanged inside specpath's engine.

vLLM builds the class with its ``VllmConfig``, calls ``load_model(model)`` once, and every step
calls ``propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None)``:
per request (batch order) the tokens sampled in the last step, the request's token count, and
a ``[num_requests, max_model_len]`` int32 buffer whose row ``i`` holds request ``i``'s tokens;
it answers one list of draft tokens per request. This adapter plays vLLM's part:

* the config is a :class:`VllmConfigView` with the attributes proposers read
  (``speculative_config`` is specpath's resolved config, which has vLLM's field names);
* ``load_model`` receives a :class:`TargetView` (the target's config, embedding and head);
* the token buffer is kept between steps, each step writing only what is new; requests with
  no draft budget this step get an empty ``sampled_token_ids`` entry, which vLLM's proposers
  skip, as vLLM does for requests still in prefill;
* answers are checked (one list per request, ints in the vocabulary) and cut to each
  request's budget.
"""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import numpy as np
import torch

from specpath_engine.modeling.rows import RowAllocator
from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, SpeculatorContext


@attrs.frozen(kw_only=True)
class ModelConfigView:
    max_model_len: int
    hf_config: dict
    dtype: Any
    vocab_size: int

    def get_vocab_size(self) -> int:
        return self.vocab_size


@attrs.frozen(kw_only=True)
class SchedulerConfigView:
    max_num_seqs: int


@attrs.frozen(kw_only=True)
class DeviceConfigView:
    device: Any


@attrs.frozen(kw_only=True)
class VllmConfigView:
    """What a vLLM proposer's ``__init__(vllm_config)`` may read."""

    speculative_config: Any
    """specpath's resolved ``SpeculativeConfig`` (``num_speculative_tokens``, ``model``,
    ``prompt_lookup_min``/``max``, ``speculator_options``, ...)."""
    model_config: ModelConfigView
    scheduler_config: SchedulerConfigView
    device_config: DeviceConfigView


@attrs.frozen(kw_only=True)
class TargetView:
    """What ``load_model(model)`` receives in place of vLLM's target module."""

    config: dict
    embed_tokens: Any = None
    lm_head: Any = None


class VllmProposerAdapter(BaseSpeculator):
    """specpath's speculator contract on top of a vLLM custom proposer."""

    def __init__(self, cls: type, spec, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        self.name = f"{cls.__module__}.{cls.__qualname__}"
        self.vocab_size = int(context.vocab_size)
        view = VllmConfigView(
            speculative_config=spec,
            model_config=ModelConfigView(max_model_len=int(context.max_model_len), hf_config=dict(context.target_config),
                                         dtype=context.dtype, vocab_size=self.vocab_size),
            scheduler_config=SchedulerConfigView(max_num_seqs=int(context.max_num_seqs)),
            device_config=DeviceConfigView(device=torch.device(context.device)),
        )
        self.proposer = cls(view)
        load = getattr(self.proposer, "load_model", None)
        if callable(load):
            load(TargetView(config=dict(context.target_config), embed_tokens=context.embed_tokens,
                            lm_head=context.lm_head))
        try:
            self._pass_slot_mappings = "slot_mappings" in inspect.signature(self.proposer.propose).parameters
        except (TypeError, ValueError):
            self._pass_slot_mappings = True
        slots = max(int(context.max_num_seqs), 1)
        self.tokens = np.zeros((slots, int(context.max_model_len)), np.int32)
        self.lengths = np.zeros(slots, np.int64)
        self.rows = RowAllocator(slots, owner=self.name)

    def _row(self, req_id: str) -> int:
        """The request's row of the token buffer (a new one starts empty; rows double when full)."""
        if req_id in self.rows:
            return self.rows.row(req_id)
        row = self.rows.row(req_id, grow=self._add_rows)
        self.lengths[row] = 0
        return row

    def _add_rows(self, slots: int) -> None:
        self.tokens = np.concatenate([self.tokens, np.zeros_like(self.tokens)])
        self.lengths = np.concatenate([self.lengths, np.zeros_like(self.lengths)])

    def propose(self, batch: DraftBatch) -> DraftProposal:
        requests = batch.requests
        n = len(requests)
        rows = np.empty(n, np.int64)
        sampled: list[list[int]] = []
        for i, r in enumerate(requests):
            row = self._row(r.req_id)
            ids = r.token_ids
            length = len(ids)
            have = int(self.lengths[row])
            if length < have:  # a restarted request
                have = 0
            if length > self.tokens.shape[1]:
                wider = np.zeros((self.tokens.shape[0], length), np.int32)
                wider[:, : self.tokens.shape[1]] = self.tokens
                self.tokens = wider
            if length > have:
                self.tokens[row, have:length] = np.asarray(ids[have:length], dtype=np.int32)
            # What the last step sampled: the new tokens (accepted drafts + bonus); for a
            # request seen for the first time, its last token (the first one sampled).
            new = list(ids[length - 1:length]) if have == 0 else list(ids[have:length])
            sampled.append(new if r.max_draft_tokens > 0 else [])
            self.lengths[row] = length
            rows[i] = row
        buffer = self.tokens[:n] if np.array_equal(rows, np.arange(n)) else self.tokens[rows]
        counts = self.lengths[rows].astype(np.int32)
        if self._pass_slot_mappings:
            answer = self.proposer.propose(sampled, counts, buffer, slot_mappings=None)
        else:
            answer = self.proposer.propose(sampled, counts, buffer)
        return self._to_proposal(answer, requests)

    def _to_proposal(self, answer: Any, requests) -> DraftProposal:
        try:
            drafts = [list(map(int, d)) for d in answer]
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{self.name}.propose must return a list of token-id lists: {exc}") from None
        if len(drafts) != len(requests):
            raise ValueError(f"{self.name}.propose returned {len(drafts)} drafts for {len(requests)} requests")
        flat, counts = [], []
        for d, r in zip(drafts, requests):
            d = d[: max(r.max_draft_tokens, 0)]
            if d and (min(d) < 0 or max(d) >= self.vocab_size):
                raise ValueError(f"{self.name}.propose drafted token ids outside [0, {self.vocab_size})")
            flat += d
            counts.append(len(d))
        return DraftProposal(token_ids=torch.tensor(flat, dtype=torch.int32), num_draft_tokens=counts)

    def remove_request(self, req_id: str) -> None:
        row = self.rows.release(req_id)
        if row is not None:
            self.lengths[row] = 0
