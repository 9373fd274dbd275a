"""Hidden-state speculators get the target's features of every committed position, once, in order."""

import pytest
import torch

from engine_helpers import OracleSpeculator, baseline, make_engine, random_prompts
from specpath_engine.request import SamplingParams


class RecordingSpeculator(OracleSpeculator):
    """Keeps the features it was handed, by request and position."""

    def __init__(self, references, layers):
        super().__init__(references, corrupt=0.4, seed=1, layers=layers)
        self.features: dict[str, dict[int, torch.Tensor]] = {}

    def propose(self, batch):
        row = 0
        for r in batch.requests:
            first = len(r.token_ids) - 1 - r.num_new_positions
            seen = self.features.setdefault(r.req_id, {})
            for j in range(r.num_new_positions):
                assert first + j not in seen, "a position was delivered twice"
                seen[first + j] = batch.hidden_states[row + j].clone()
            assert len(seen) == len(r.token_ids) - 1, "positions must arrive without gaps"
            row += r.num_new_positions
        assert batch.hidden_states.shape[0] == row
        return super().propose(batch)

    def remove_request(self, req_id):
        super().remove_request(req_id)
        self.features.pop(req_id, None)


@pytest.mark.parametrize("prefix_caching", [False, True])
def test_features_match_a_full_forward(model, prefix_caching):
    prompts = random_prompts(4, seed=11, lo=5, hi=30)
    prompts += prompts[:2]  # prefix-cache hits: their features come from the paged store
    outputs = baseline(model, prompts, 16)
    layers = (1, 0)
    speculator = RecordingSpeculator([p + o for p, o in zip(prompts, outputs)], layers)
    snapshots = {}
    original = speculator.on_verified

    def on_verified(req_ids, num_accepted):
        original(req_ids, num_accepted)
        for rid in req_ids:
            snapshots[rid] = dict(speculator.features[rid])

    speculator.on_verified = on_verified
    engine = make_engine(model, speculator=speculator, k=3, hidden=True, prefix_caching=prefix_caching,
                         max_num_batched_tokens=24)
    requests, metrics = engine.generate(prompts, SamplingParams(max_tokens=16))
    assert [r.output_token_ids for r in requests] == outputs
    if prefix_caching:
        assert metrics.num_cached_tokens > 0
    for r in requests:
        seen = snapshots[r.req_id]
        ids = torch.tensor(r.token_ids)
        with torch.inference_mode():
            full = model(ids, torch.arange(len(ids)), hidden_layers=layers).hidden_states
        for pos, feat in seen.items():
            torch.testing.assert_close(feat, full[pos], rtol=1e-9, atol=1e-9)
        assert len(seen) >= len(r.prompt_token_ids)


def test_hidden_state_speculator_without_layers_is_an_error(model):
    with pytest.raises(ValueError, match="hidden_state_layers"):
        make_engine(model, speculator=OracleSpeculator([]), hidden=True)
