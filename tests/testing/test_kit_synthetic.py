"""drive_speculator / check_proposal: a correct toy speculator passes, each broken rule fails."""

import pytest
import torch

from specpath.speculator import BaseSpeculator, DraftProposal
from specpath_engine.testing.synthetic import ProposalError, drive_speculator, tiny_context

VOCAB = 64


class RepeatLast(BaseSpeculator):
    """Drafts the last token again, as many times as allowed; records what it was told."""

    def __init__(self, dtype=torch.int32, extra=0, probs=False, layers=()):
        super().__init__(spec=None, context=tiny_context(vocab_size=VOCAB))
        self.dtype, self.extra, self.probs, self.layers = dtype, extra, probs, layers
        self.removed, self.verified, self.rows = [], [], []

    @property
    def hidden_state_layers(self):
        return self.layers

    def propose(self, batch):
        counts = [r.max_draft_tokens + (self.extra if r.max_draft_tokens else 0) for r in batch.requests]
        ids = [r.token_ids[-1] for r, n in zip(batch.requests, counts) for _ in range(n)]
        if batch.hidden_states is not None:
            self.rows.append((batch.hidden_states.shape[0], sum(r.num_new_positions for r in batch.requests)))
        probs = None
        if self.probs:
            probs = torch.full((len(ids), VOCAB), 1.0 / VOCAB)
        return DraftProposal(token_ids=torch.tensor(ids, dtype=self.dtype), num_draft_tokens=counts,
                             draft_probs=probs)

    def on_verified(self, req_ids, num_accepted):
        self.verified.append((list(req_ids), list(num_accepted)))

    def remove_request(self, req_id):
        self.removed.append(req_id)


def test_a_correct_speculator_passes_and_sees_the_whole_life_cycle():
    spec = RepeatLast()
    steps = drive_speculator(spec, k=3, vocab_size=VOCAB, decode_steps=6)
    assert len(steps) == 7  # one prefill chunk + six decode steps
    assert all(r.max_draft_tokens == 0 for r in steps[0].batch.requests)
    assert spec.removed == ["req-1"] and len(spec.verified) == 6
    for step in steps:
        for req in step.batch.requests:
            first_new = len(req.token_ids) - 1 - req.num_new_positions
            assert first_new >= 0  # the contract's position range is valid
    # The first decode step shows each prompt's remaining positions as new.
    decode = steps[1].batch.requests
    prefill = {r.req_id: len(r.token_ids) - 1 for r in steps[0].batch.requests}
    assert all(r.num_new_positions == len(r.token_ids) - 1 - prefill[r.req_id] for r in decode)


def test_hidden_states_have_one_row_per_new_position():
    spec = RepeatLast(layers=(1, 3))
    drive_speculator(spec, k=2, vocab_size=VOCAB, uses_hidden_states=True)
    assert spec.rows and all(rows == expected for rows, expected in spec.rows)


def test_draft_probs_are_checked_and_accepted_when_right():
    drive_speculator(RepeatLast(probs=True), k=2, vocab_size=VOCAB)


@pytest.mark.parametrize(
    ("speculator", "options", "rule"),
    [
        (RepeatLast(dtype=torch.int64), {}, "dtype"),
        (RepeatLast(extra=1), {}, "allowed 0.."),
        (RepeatLast(), {"proposes_draft_tokens": False}, "proposes_draft_tokens"),
        (RepeatLast(layers=(1,)), {}, "uses_target_hidden_states"),
        (RepeatLast(), {"uses_hidden_states": True}, "hidden_state_layers is empty"),
    ],
)
def test_each_broken_rule_is_reported(speculator, options, rule):
    with pytest.raises(ProposalError, match=rule):
        drive_speculator(speculator, k=3, vocab_size=VOCAB, **options)


class OutOfVocab(RepeatLast):
    def propose(self, batch):
        proposal = super().propose(batch)
        return DraftProposal(token_ids=torch.full_like(proposal.token_ids, VOCAB),
                             num_draft_tokens=proposal.num_draft_tokens)


def test_out_of_vocab_tokens_are_reported():
    with pytest.raises(ProposalError, match="outside"):
        drive_speculator(OutOfVocab(), k=2, vocab_size=VOCAB)
