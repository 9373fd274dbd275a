"""The speculator drafts what the text has repeated, per request, and forgets finished ones."""

import torch

from specpath.speculator import DraftBatch, DraftRequest
from specpath_engine.testing import tiny_context
from specpath_freqgram.speculator import FreqgramSpeculator


class _Spec:
    """Just what the speculator reads from a resolved config."""

    class speculator_config:
        max_order = 3


def request(req_id, tokens, k):
    return DraftRequest(req_id=req_id, token_ids=tuple(tokens), num_new_positions=len(tokens) - 1,
                        max_draft_tokens=k)


def test_each_request_drafts_from_its_own_text():
    speculator = FreqgramSpeculator(_Spec(), tiny_context())
    proposal = speculator.propose(DraftBatch(requests=(
        request("a", [1, 2, 3, 4, 1, 2], 3),
        request("b", [7, 8, 9, 7, 8], 2),
        request("c", [5, 6], 4),          # nothing repeated yet
        request("d", [1, 2, 3, 1, 2], 0),  # still in prefill: no drafts asked
    )))
    assert proposal.token_ids.dtype == torch.int32
    assert list(proposal.num_draft_tokens) == [3, 2, 0, 0]
    assert proposal.token_ids.tolist() == [3, 4, 1, 9, 7]
    assert proposal.draft_probs is None


def test_finished_requests_are_forgotten():
    speculator = FreqgramSpeculator(_Spec(), tiny_context())
    speculator.propose(DraftBatch(requests=(request("a", [1, 2, 1], 2),)))
    speculator.remove_request("a")
    assert speculator._models == {}
    proposal = speculator.propose(DraftBatch(requests=(request("a", [4], 2),)))
    assert list(proposal.num_draft_tokens) == [0]
