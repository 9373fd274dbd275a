"""The ``eagle`` and ``extract_hidden_states`` speculators (the drafting loop they run:
:mod:`specpath_drafting.loop`)."""

from __future__ import annotations

from typing import Any

import torch

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, SpeculatorContext
from specpath_drafting.heads import HiddenStateHead, load_head_weights, read_head_config
from specpath_drafting.loop import HiddenStateSpeculator, target_layers
from specpath_drafting.vocab import serving_lm_head
from specpath_eagle.head import EagleHead


class EagleSpeculator(HiddenStateSpeculator):
    """EAGLE-1: reads the target's last decoder layer (before the final norm)."""

    def build_head(self) -> HiddenStateHead:
        path = self.spec.model
        config = read_head_config(path, "eagle")
        lm_head = serving_lm_head(self.context.lm_head, path, self.context.vocab_size,
                                  prepare=self.context.prepare_module)
        head = EagleHead(config, embed_tokens=self.context.embed_tokens, lm_head=lm_head)
        return load_head_weights(head, path)

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return (target_layers(self.context) - 1,)


class ExtractHiddenStatesSpeculator(BaseSpeculator):
    """Proposes nothing; keeps each request's target states of the auxiliary layers, in
    position order, until :meth:`pop_hidden_states` takes them."""

    def __init__(self, spec: Any, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        from specpath_drafting.config import default_aux_layer_ids, engine_layers

        ids = spec.eagle_aux_hidden_state_layer_ids
        self.layers = engine_layers(ids if ids is not None else default_aux_layer_ids(target_layers(context)))
        self.states: dict[str, list[torch.Tensor]] = {}
        self.finished: dict[str, torch.Tensor] = {}

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return self.layers

    def propose(self, batch: DraftBatch) -> DraftProposal:
        start = 0
        for r in batch.requests:
            n = r.num_new_positions
            if n and batch.hidden_states is not None:
                self.states.setdefault(r.req_id, []).append(batch.hidden_states[start:start + n].detach().clone())
            start += n
        return DraftProposal(token_ids=torch.zeros(0, dtype=torch.int32), num_draft_tokens=[0] * len(batch.requests))

    def remove_request(self, req_id: str) -> None:
        parts = self.states.pop(req_id, None)
        if parts:
            self.finished[req_id] = torch.cat(parts)

    def pop_hidden_states(self, req_id: str) -> torch.Tensor | None:
        """``[num_positions, len(hidden_state_layers), hidden]`` of a request (live or finished)."""
        if req_id in self.finished:
            return self.finished.pop(req_id)
        parts = self.states.pop(req_id, None)
        return torch.cat(parts) if parts else None
