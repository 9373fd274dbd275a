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


def test_both_sides_draft_every_request_and_a_long_enough_model_free_chain_is_taken_where_favoured():
    drafter = Recorder({"a": [5, 6, 7, 8], "b": [9, 9, 9, 9], "c": [4, 4]}, layers=(1, 2))
    model_free = Recorder({"a": [1, 2, 3], "b": [7], "c": []})
    hybrid = HybridSpeculator(drafter, model_free, min_tokens=2)
    hybrid.engine_score = 0.5  # earlier requests found the model-free tokens right where they parted
    batch = batch_of("a", "b", "c")
    out = hybrid.propose(batch)
    # a: they part at depth 0 (the engine's record: the model-free chain);
    # b: the model-free draft is too short; c: none
    assert list(out.num_draft_tokens) == [3, 4, 2] and out.token_ids.tolist() == [1, 2, 3, 9, 9, 9, 9, 4, 4]
    seen = drafter.batches[0]
    assert seen.requests == batch.requests and seen.hidden_states is batch.hidden_states
    assert model_free.batches[0].hidden_states is None and model_free.batches[0].requests == batch.requests
    assert hybrid.hidden_state_layers == (1, 2) and hybrid.num_model_free_drafts == 1


def test_without_a_long_enough_model_free_draft_the_drafters_proposal_passes_through():
    drafter = Recorder({"a": [5, 6]})
    hybrid = HybridSpeculator(drafter, Recorder({"a": [1]}), min_tokens=2)
    out = hybrid.propose(batch_of("a"))
    assert out.token_ids.tolist() == [5, 6] and drafter.batches[0].requests[0].max_draft_tokens == 4


def test_where_one_chain_extends_the_other_the_longer_is_verified():
    drafter = Recorder({"a": [1, 2], "b": [3, 4, 5, 6]})
    hybrid = HybridSpeculator(drafter, Recorder({"a": [1, 2, 3, 4], "b": [3, 4]}), min_tokens=2)
    out = hybrid.propose(batch_of("a", "b"))
    assert out.token_ids.tolist() == [1, 2, 3, 4, 3, 4, 5, 6] and hybrid.num_model_free_drafts == 1


def step(hybrid: HybridSpeculator, committed: list[int], budget: int = 4) -> DraftProposal:
    return hybrid.propose(DraftBatch(requests=(DraftRequest(req_id="a", token_ids=committed, num_new_positions=1,
                                                            max_draft_tokens=budget),)))


def test_a_request_learns_which_side_to_trust_where_they_part():
    # the drafter says 5, 6; the model-free method 7, 8; the target writes the drafter's tokens
    drafter, model_free = Recorder({"a": [5, 6]}), Recorder({"a": [7, 8]})
    hybrid = HybridSpeculator(drafter, model_free, min_tokens=2)
    text = [1, 2, 3]
    assert step(hybrid, text).token_ids.tolist() == [5, 6]  # no record yet: the drafter's chain
    hybrid.on_verified(["a"], [0])
    text = text + [7]  # the target's token where they parted was the model-free one
    assert step(hybrid, text).token_ids.tolist() == [7, 8]
    assert hybrid.score["a"] > 0 and hybrid.engine_score > 0
    hybrid.on_verified(["a"], [0])
    for token in (5, 5, 5):  # then the drafter's, three times: the record turns
        text = text + [token]
        out = step(hybrid, text)
        hybrid.on_verified(["a"], [0])
    assert out.token_ids.tolist() == [5, 6] and hybrid.score["a"] < 0
    # a new request starts from the engine's tally, its own record moves on from there
    other = HybridSpeculator(Recorder({"a": [5, 6]}), Recorder({"a": [7, 8]}), min_tokens=2)
    other.engine_score = 0.1
    assert step(other, [1]).token_ids.tolist() == [7, 8]
    other.on_verified(["a"], [0])
    assert step(other, [1, 5]).token_ids.tolist() == [5, 6] and other.score["a"] < 0


def test_a_token_neither_side_drafted_is_no_evidence():
    hybrid = HybridSpeculator(Recorder({"a": [5, 6]}), Recorder({"a": [7, 8]}), min_tokens=2)
    step(hybrid, [1, 2])
    hybrid.on_verified(["a"], [0])
    step(hybrid, [1, 2, 9])
    assert "a" not in hybrid.score and hybrid.engine_score == 0.0


def test_verification_reaches_both_and_the_side_not_verified_keeps_nothing():
    drafter, model_free = Recorder({"a": [5, 6, 7], "b": [1, 2]}), Recorder({"a": [8, 9], "b": []})
    hybrid = HybridSpeculator(drafter, model_free, min_tokens=1)
    hybrid.engine_score = 0.5
    hybrid.propose(batch_of("a", "b"))  # a: the model-free chain (the record favours it), b: the drafter's
    hybrid.on_verified(["a", "b"], [1, 2])
    assert drafter.verified == [(["a", "b"], [0, 2])]
    assert model_free.verified == [(["a", "b"], [1, 0])]
    hybrid.remove_request("a")
    assert drafter.removed == model_free.removed == ["a"]
    hybrid.forget_responses()  # a benchmark's new round: both sides drop what earlier requests taught them
    assert drafter.removed == model_free.removed == ["a", "*"] and hybrid.engine_score == 0.0


def test_a_step_where_nobody_drafts_skips_the_model_free_method():
    drafter, model_free = Recorder({"a": [5, 6]}), Recorder({"a": [5, 6, 7]})
    hybrid = HybridSpeculator(drafter, model_free, min_tokens=2)
    assert hybrid.propose(batch_of("a", budget=0)).token_ids.tolist() == []
    assert len(drafter.batches) == 1 and model_free.batches == []  # the drafter still reads the new positions
    assert hybrid.propose(batch_of("a")).token_ids.tolist() == [5, 6, 7]  # it extends the drafter's chain
    assert len(model_free.batches) == 1


def test_a_model_free_method_that_predicts_nothing_is_asked_less_often_until_it_does():
    from specpath.hybrid import IDLE_EVERY, IDLE_STEPS

    drafter, model_free = Recorder({"a": [5, 6]}), Recorder({"a": [7, 8]})
    hybrid = HybridSpeculator(drafter, model_free, min_tokens=2)
    text = [1, 2, 3]

    def run(steps: int, committed: int) -> None:
        nonlocal text
        for _ in range(steps):
            hybrid.propose(batch_of_text(text))
            hybrid.on_verified(["a"], [0])
            text = text + [committed]

    run(IDLE_STEPS + 1, 5)  # the target writes the drafter's token: the model-free one is never right
    assert len(model_free.batches) == IDLE_STEPS  # asked every step until IDLE_STEPS went by
    run(4 * IDLE_EVERY, 5)
    assert len(model_free.batches) == IDLE_STEPS + 4  # then every IDLE_EVERY-th step
    assert len(drafter.batches) == IDLE_STEPS + 1 + 4 * IDLE_EVERY  # the drafter every step
    asked = len(model_free.batches)
    while len(model_free.batches) == asked:  # the next step it is asked, its first token is right
        run(1, 7)
    run(IDLE_EVERY, 7)
    assert len(model_free.batches) == asked + 1 + IDLE_EVERY  # asked every step again
    hybrid.forget_responses()
    assert hybrid._idle == 0


def batch_of_text(text: list[int]) -> DraftBatch:
    return DraftBatch(requests=(DraftRequest(req_id="a", token_ids=list(text), num_new_positions=1,
                                             max_draft_tokens=4),))
