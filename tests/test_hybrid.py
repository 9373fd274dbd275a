"""HybridSpeculator: the model-free draft where it is long enough, the drafter's elsewhere."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath.hybrid import HybridSpeculator, merge_proposals
from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftRequest, DraftTree, SpeculatorContext

VOCAB = 50
CONTEXT = SpeculatorContext(vocab_size=VOCAB, max_model_len=64, max_num_seqs=4)


def chains(draw, n: int, budget: int) -> list[list[int]]:
    return [draw(st.lists(st.integers(0, VOCAB - 1), max_size=budget)) for _ in range(n)]


def proposal(drafts: list[list[int]], *, probs: bool = False, tree: bool = False) -> DraftProposal:
    flat = [t for d in drafts for t in d]
    draft_probs = None
    if probs:
        draft_probs = torch.softmax(torch.randn(len(flat), VOCAB), dim=-1)
    draft_tree = None
    if tree:  # each chain as a tree whose nodes hang off the root
        draft_tree = DraftTree(token_ids=flat, parents=[-1 for d in drafts for _ in d],
                               probs=[0.5 for d in drafts for _ in d], num_tree_tokens=[len(d) for d in drafts])
    return DraftProposal(token_ids=torch.tensor(flat, dtype=torch.int32), num_draft_tokens=[len(d) for d in drafts],
                         draft_probs=draft_probs, tree=draft_tree)


@st.composite
def cases(draw):
    n = draw(st.integers(1, 5))
    own, free = chains(draw, n, 4), chains(draw, n, 4)
    taken = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return own, free, taken, draw(st.booleans()), draw(st.booleans()), draw(st.booleans())


@settings(max_examples=200, deadline=None)
@given(cases())
def test_merge_takes_each_requests_drafts_from_its_side(case):
    own, free, taken, probs, own_tree, free_tree = case
    a, b = proposal(own, probs=probs, tree=own_tree), proposal(free, tree=free_tree)
    merged = merge_proposals(a, b, taken)
    expected = [f if t else o for o, f, t in zip(own, free, taken)]
    assert list(merged.num_draft_tokens) == [len(d) for d in expected]
    assert merged.token_ids.dtype == torch.int32
    assert merged.token_ids.tolist() == [x for d in expected for x in d]
    if probs and merged.token_ids.numel():
        own_starts = [sum(len(d) for d in own[:i]) for i in range(len(own))]
        merged_starts = [sum(len(d) for d in expected[:i]) for i in range(len(expected))]
        for i, (d, t) in enumerate(zip(expected, taken)):
            for j, token in enumerate(d):
                row = merged.draft_probs[merged_starts[i] + j]
                # a model-free draft is one-hot; a kept drafter draft keeps its probabilities
                want = torch.nn.functional.one_hot(torch.tensor(token), VOCAB).float() if t else \
                    a.draft_probs[own_starts[i] + j]
                assert torch.equal(row, want)
    else:
        assert merged.draft_probs is None
    if own_tree or free_tree:
        sizes = [len(d) if (free_tree if t else own_tree) else 0 for d, t in zip(expected, taken)]
        assert list(merged.tree.num_tree_tokens) == sizes
        assert list(merged.tree.token_ids) == [x for d, n in zip(expected, sizes) if n for x in d]
    else:
        assert merged.tree is None


class Recorder(BaseSpeculator):
    """Drafts ``drafts[req_id]`` (cut to the budget) and records what it was asked."""

    def __init__(self, drafts: dict[str, list[int]], layers: tuple[int, ...] = ()) -> None:
        super().__init__(None, CONTEXT)
        self.drafts, self.layers = drafts, layers
        self.batches: list[DraftBatch] = []
        self.verified: list[tuple[list[str], list[int]]] = []
        self.removed: list[str] = []

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return self.layers

    def propose(self, batch: DraftBatch) -> DraftProposal:
        self.batches.append(batch)
        return proposal([self.drafts[r.req_id][: r.max_draft_tokens] for r in batch.requests])

    def on_verified(self, req_ids, num_accepted) -> None:
        self.verified.append((list(req_ids), list(num_accepted)))

    def remove_request(self, req_id: str) -> None:
        self.removed.append(req_id)

    def forget_responses(self) -> None:
        self.removed.append("*")


def batch_of(*ids: str, budget: int = 4) -> DraftBatch:
    requests = tuple(DraftRequest(req_id=i, token_ids=[1, 2, 3], num_new_positions=2, max_draft_tokens=budget)
                     for i in ids)
    return DraftBatch(requests=requests, hidden_states=torch.zeros(2 * len(ids), 1, 8))


def test_the_drafter_reads_every_request_and_drafts_only_where_not_replaced():
    drafter = Recorder({"a": [5, 6, 7, 8], "b": [9, 9, 9, 9], "c": [4, 4]}, layers=(1, 2))
    model_free = Recorder({"a": [1, 2, 3], "b": [7], "c": []})
    hybrid = HybridSpeculator(drafter, model_free, min_tokens=2)
    batch = batch_of("a", "b", "c")
    out = hybrid.propose(batch)
    assert list(out.num_draft_tokens) == [3, 4, 2] and out.token_ids.tolist() == [1, 2, 3, 9, 9, 9, 9, 4, 4]
    seen = drafter.batches[0]
    assert [r.max_draft_tokens for r in seen.requests] == [0, 4, 4]
    assert [r.num_new_positions for r in seen.requests] == [2, 2, 2]  # it still reads the new positions
    assert seen.hidden_states is batch.hidden_states
    assert model_free.batches[0].hidden_states is None and model_free.batches[0].requests == batch.requests
    assert hybrid.hidden_state_layers == (1, 2) and hybrid.num_model_free_drafts == 1


def test_without_a_long_enough_model_free_draft_the_drafters_proposal_passes_through():
    drafter = Recorder({"a": [5, 6]})
    hybrid = HybridSpeculator(drafter, Recorder({"a": [1]}), min_tokens=2)
    out = hybrid.propose(batch_of("a"))
    assert out.token_ids.tolist() == [5, 6] and drafter.batches[0].requests[0].max_draft_tokens == 4


def test_verification_and_removal_reach_both():
    drafter, model_free = Recorder({}), Recorder({})
    hybrid = HybridSpeculator(drafter, model_free, min_tokens=1)
    hybrid.on_verified(["a", "b"], [1, 0])
    hybrid.remove_request("a")
    assert drafter.verified == model_free.verified == [(["a", "b"], [1, 0])]
    assert drafter.removed == model_free.removed == ["a"]
    hybrid.forget_responses()  # a benchmark's new round: both sides drop what earlier requests taught them
    assert drafter.removed == model_free.removed == ["a", "*"]
