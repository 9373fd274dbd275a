"""CatchUpWindow: a lazily fed drafter catches up on at most W of a request's newest positions at
once (its prompt whole), and every view it gets is a consistent request of its own."""

from __future__ import annotations

import attrs
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath.catch_up import CatchUpWindow, ShiftedNoise, catch_up_window, handed_over
from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftRequest, SpeculatorContext

CONTEXT = SpeculatorContext(vocab_size=50, max_model_len=4096, max_num_seqs=4)


class PositionNoise:
    """Noise whose value at position p is p (so a shifted lookup shows)."""

    def gumbel(self, first: int, count: int) -> torch.Tensor:
        return torch.arange(first, first + count, dtype=torch.float32)[:, None].expand(count, 3)


class Recorder(BaseSpeculator):
    """A drafter that keeps, per request id, the tokens and hidden rows it was handed, and checks
    each hand-over continues where the last one left off (what a drafter's own KV assumes)."""

    def __init__(self) -> None:
        super().__init__(None, CONTEXT)
        self.seen: dict[str, list[float]] = {}  # id -> hidden rows handed over (their position tags)
        self.calls: list[DraftBatch] = []
        self.verified: list[tuple[list[str], list[int]]] = []
        self.removed: list[str] = []

    def propose(self, batch: DraftBatch) -> DraftProposal:
        self.calls.append(batch)
        row = 0
        for r in batch.requests:
            had = self.seen.setdefault(r.req_id, [])
            assert len(had) == len(r.token_ids) - 1 - r.num_new_positions  # continues where it left off
            if batch.hidden_states is not None:
                had.extend(batch.hidden_states[row:row + r.num_new_positions, 0, 0].tolist())
            else:
                had.extend([0.0] * r.num_new_positions)
            row += r.num_new_positions
        return DraftProposal(token_ids=torch.zeros(0, dtype=torch.int32), num_draft_tokens=[0] * len(batch.requests))

    def on_verified(self, req_ids, num_accepted) -> None:
        self.verified.append((list(req_ids), list(num_accepted)))

    def remove_request(self, req_id: str) -> None:
        self.removed.append(req_id)
        self.seen.pop(req_id, None)


def hidden_for(requests: list[tuple[str, int, int]]) -> torch.Tensor:
    """Rows tagged by their position: ``[sum(n), 2 layers, 4]``."""
    tags = [float(p) for _, first, n in requests for p in range(first, first + n)]
    return torch.tensor(tags)[:, None, None].expand(len(tags), 2, 4).contiguous()


@st.composite
def schedules(draw):
    """Steps of 3 requests: each step, each request gains 1-12 tokens and, now and then, drafts
    (then it is handed everything since it last drafted)."""
    window = draw(st.integers(1, 40))
    steps = draw(st.lists(st.lists(st.tuples(st.integers(1, 12), st.booleans()), min_size=3, max_size=3),
                          min_size=1, max_size=30))
    prompts = draw(st.lists(st.integers(1, 90), min_size=3, max_size=3))
    return window, prompts, steps


@settings(max_examples=150, deadline=None)
@given(schedules())
def test_every_view_is_consistent_and_at_most_the_window(case):
    window, prompts, steps = case
    inner = Recorder()
    wrapped = CatchUpWindow(inner, window)
    lengths = {f"r{i}": p + 1 for i, p in enumerate(prompts)}  # the prompt and a sampled token
    delivered = dict.fromkeys(lengths, 0)
    for step in steps:
        entries, spans = [], []
        for (rid, length), (grow, drafts) in zip(list(lengths.items()), step):
            if drafts:
                n = length - 1 - delivered[rid]
                ids = list(range(length))  # token at position p is p
                entries.append(DraftRequest(req_id=rid, token_ids=ids, num_new_positions=n, max_draft_tokens=2,
                                            noise=PositionNoise()))
                spans.append((rid, delivered[rid], n))
                delivered[rid] = length - 1
            lengths[rid] = length + grow
        if not entries:
            continue
        wrapped.propose(DraftBatch(requests=tuple(entries), hidden_states=hidden_for(spans)))
        got = inner.calls[-1]
        for e, view in zip(entries, got.requests):
            first = len(e.token_ids) - 1 - e.num_new_positions
            assert view.num_new_positions <= window or (first == 0 and view is e)  # a prompt is whole
            start = len(e.token_ids) - len(view.token_ids)
            assert list(view.token_ids) == list(e.token_ids[start:])  # a suffix of the request
            assert view.req_id == (e.req_id if start == 0 else f"{e.req_id}@{start}")
            # the rows it holds for the view are the true positions' rows, newest included
            assert inner.seen[view.req_id] == [float(p) for p in range(start, len(e.token_ids) - 1)]
            # a seeded request's noise is read at the true positions
            assert view.noise.gumbel(len(view.token_ids), 1)[0, 0] == len(e.token_ids)
        ids = [e.req_id for e in entries]
        wrapped.on_verified(ids, [1] * len(ids))
        assert inner.verified[-1][0] == [v.req_id for v in got.requests]
    for rid in lengths:
        wrapped.remove_request(rid)
    assert not inner.seen  # every view it held was removed: restarted ones at the restart, the rest now


def test_hand_overs_within_the_window_pass_through_unchanged():
    inner = Recorder()
    wrapped = CatchUpWindow(inner, 8)
    reqs = (DraftRequest(req_id="a", token_ids=list(range(6)), num_new_positions=5, max_draft_tokens=2),
            DraftRequest(req_id="b", token_ids=list(range(9)), num_new_positions=8, max_draft_tokens=2))
    hidden = hidden_for([("a", 0, 5), ("b", 0, 8)])
    wrapped.propose(DraftBatch(requests=reqs, hidden_states=hidden))
    got = inner.calls[-1]
    assert got.requests == reqs and got.hidden_states is hidden
    assert wrapped.num_restarts == 0


def test_a_long_catch_up_restarts_the_request_from_its_newest_positions():
    """The module docstring's example: a 300-token prompt (whole), then 200 positions backed off, W = 64."""
    inner = Recorder()
    wrapped = CatchUpWindow(inner, 64)
    r = DraftRequest(req_id="r1", token_ids=list(range(301)), num_new_positions=300, max_draft_tokens=4)
    wrapped.propose(DraftBatch(requests=(r,), hidden_states=hidden_for([("r1", 0, 300)])))
    assert inner.calls[-1].requests[0] is r  # the prompt: whole
    back = attrs.evolve(r, token_ids=list(range(501)), num_new_positions=200)
    wrapped.propose(DraftBatch(requests=(back,), hidden_states=hidden_for([("r1", 300, 200)])))
    view = inner.calls[-1].requests[0]
    assert view.req_id == "r1@436" and list(view.token_ids) == list(range(436, 501)) and view.num_new_positions == 64
    assert inner.seen["r1@436"] == [float(p) for p in range(436, 500)] and inner.removed == ["r1"]
    assert (wrapped.num_restarts, wrapped.positions_skipped) == (1, 136)
    # three positions later it continues the same view; 100 later it restarts again
    later = attrs.evolve(r, token_ids=list(range(504)), num_new_positions=3)
    wrapped.propose(DraftBatch(requests=(later,), hidden_states=hidden_for([("r1", 500, 3)])))
    assert inner.calls[-1].requests[0].req_id == "r1@436"
    much_later = attrs.evolve(r, token_ids=list(range(604)), num_new_positions=100)
    wrapped.propose(DraftBatch(requests=(much_later,), hidden_states=hidden_for([("r1", 503, 100)])))
    assert inner.calls[-1].requests[0].req_id == "r1@539" and inner.removed == ["r1", "r1@436"]
    wrapped.remove_request("r1")
    assert inner.removed == ["r1", "r1@436", "r1@539"]


def test_shifted_noise_reads_the_true_positions():
    assert ShiftedNoise(PositionNoise(), 10).gumbel(5, 2)[:, 0].tolist() == [15.0, 16.0]


def test_everything_else_is_the_inner_drafters():
    inner = Recorder()
    inner.head = "the head"
    wrapped = CatchUpWindow(inner, 4)
    assert wrapped.head == "the head" and wrapped.hidden_state_layers == () and wrapped.draft_pass_cost is None
    wrapped.head = "another head"  # set on the drafter, where its own code reads it
    assert inner.head == "another head" and "head" not in vars(wrapped)
    del wrapped.head
    assert not hasattr(inner, "head")
    with pytest.raises(AttributeError):
        wrapped.no_such_thing  # noqa: B018
    with pytest.raises(ValueError, match="at least 1"):
        CatchUpWindow(inner, 0)


def test_a_model_free_method_has_no_window():
    from specpath import SpeculativeConfig

    assert catch_up_window(SpeculativeConfig(method="suffix")) == 0
    assert catch_up_window(SpeculativeConfig(method="ngram", num_speculative_tokens=3)) == 0


@given(st.integers(0, 500), st.integers(0, 500), st.integers(0, 100))
def test_handed_over_is_the_whole_prompt_or_at_most_the_window(first, n, window):
    got = handed_over(first, n, window)
    assert got == (n if window == 0 or first == 0 else min(n, window))
