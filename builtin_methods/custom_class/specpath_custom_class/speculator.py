"""``CustomClassSpeculator``: runs the class ``model`` names, whichever contract it follows.

A :class:`~specpath.speculator.BaseSpeculator` subclass is built with the same arguments and
every call is handed to it; anything else is a vLLM custom proposer and runs behind
:class:`~specpath_custom_class.vllm_adapter.VllmProposerAdapter`.
"""

from __future__ import annotations

from collections.abc import Sequence

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, SpeculatorContext
from specpath_custom_class.config import proposer_class


class CustomClassSpeculator(BaseSpeculator):
    """Delegates to the user's proposer (specpath contract) or to the vLLM adapter."""

    def __init__(self, spec, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        cls = proposer_class(spec)
        if issubclass(cls, BaseSpeculator):
            self.inner: BaseSpeculator = cls(spec, context)
        else:
            from specpath_custom_class.vllm_adapter import VllmProposerAdapter

            self.inner = VllmProposerAdapter(cls, spec, context)

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return ()  # the config declares no hidden states, so the engine sends none

    def propose(self, batch: DraftBatch) -> DraftProposal:
        return self.inner.propose(batch)

    def on_verified(self, req_ids: Sequence[str], num_accepted: Sequence[int]) -> None:
        self.inner.on_verified(req_ids, num_accepted)

    def remove_request(self, req_id: str) -> None:
        self.inner.remove_request(req_id)
