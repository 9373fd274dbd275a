"""``FreqgramSpeculator``: one online frequency model per request, drafts as a greedy chain.

Per step it learns the request's new tokens (only accepted tokens ever reach ``token_ids``,
so rejected drafts never pollute the counts) and proposes up to ``max_draft_tokens`` tokens.
Drafts are deterministic, so they go to verification as one-hot drafts (no ``draft_probs``).
"""

from __future__ import annotations

import torch

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, SpeculatorContext
from specpath_freqgram.model import FrequencyModel


class FreqgramSpeculator(BaseSpeculator):
    def __init__(self, spec, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        self.max_order = spec.speculator_config.max_order
        self._models: dict[str, FrequencyModel] = {}

    def propose(self, batch: DraftBatch) -> DraftProposal:
        drafts: list[int] = []
        counts: list[int] = []
        for request in batch.requests:
            model = self._models.get(request.req_id)
            if model is None:
                model = self._models[request.req_id] = FrequencyModel(self.max_order)
            model.sync(request.token_ids)
            chain = model.propose(request.max_draft_tokens) if request.max_draft_tokens > 0 else []
            drafts += chain
            counts.append(len(chain))
        return DraftProposal(token_ids=torch.tensor(drafts, dtype=torch.int32), num_draft_tokens=counts)

    def remove_request(self, req_id: str) -> None:
        self._models.pop(req_id, None)
