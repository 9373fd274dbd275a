"""Proposer classes the tests name by import path: one per contract, plus broken ones."""

from __future__ import annotations

import numpy as np
import torch

from specpath.speculator import BaseSpeculator, DraftProposal


def copy_after_last_token(context: np.ndarray, k: int) -> list[int]:
    """The k tokens after the latest earlier occurrence of the last token."""
    if len(context) < 2:
        return []
    last = context[-1]
    earlier = np.flatnonzero(context[:-1] == last)
    if not len(earlier):
        return []
    start = int(earlier[-1]) + 1
    return context[start:start + k].tolist()


class LastTokenProposer:
    """A vLLM custom_class proposer, written against vLLM's contract only."""

    def __init__(self, vllm_config):
        self.k = vllm_config.speculative_config.num_speculative_tokens
        self.max_model_len = vllm_config.model_config.max_model_len
        self.loaded = False

    def load_model(self, *args, **kwargs):
        self.loaded = True

    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None):
        assert self.loaded
        out = []
        for i, sampled in enumerate(sampled_token_ids):
            if not sampled:
                out.append([])
                continue
            n = int(num_tokens_no_spec[i])
            out.append(copy_after_last_token(token_ids_cpu[i, :n], min(self.k, self.max_model_len - n)))
        return out


class NoSlotMappingsProposer(LastTokenProposer):
    """An older proposer whose propose takes no slot_mappings."""

    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu):
        return super().propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu)


class CopySpeculator(BaseSpeculator):
    """The same rule written against specpath's contract."""

    def propose(self, batch):
        k = self.spec.num_speculative_tokens
        drafts = [copy_after_last_token(np.asarray(r.token_ids), min(k, r.max_draft_tokens)) for r in batch.requests]
        flat = sum(drafts, [])
        return DraftProposal(token_ids=torch.tensor(flat, dtype=torch.int32), num_draft_tokens=[len(d) for d in drafts])


class BadAnswerProposer(LastTokenProposer):
    def propose(self, sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None):
        return [[10**9]] * len(sampled_token_ids)


class NotAProposer:
    pass


not_a_class = 3
