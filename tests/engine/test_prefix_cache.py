"""Prefix-cache hits return the same tokens as misses, greedy and seeded sampling alike.

Sampled rows are compared with a speculator that reads hidden states but drafts nothing: with drafts, how many a request verifies in a step
depends on the step's token budget, which a cache hit changes, and each verified draft consumes
randomness (the output is still an exact sample, just another one)."""

import pytest

from engine_helpers import HashSpeculator, make_engine, random_prompts
from specpath_engine.request import SamplingParams


@pytest.mark.parametrize(
    "drop, lookahead", [(False, 0), (True, 0), (True, 1)], ids=["plain", "tail-drop", "lookahead-hash"]
)
@pytest.mark.parametrize("temperature", [0.0, 0.8])
def test_hits_match_misses(model, drop, lookahead, temperature):
    shared = random_prompts(1, seed=31, lo=23, hi=23)[0]
    prompts = [shared + tail for tail in random_prompts(3, seed=32, lo=1, hi=9)] + [shared]
    params = [SamplingParams(temperature=temperature, max_tokens=10, seed=i) for i in range(len(prompts))]
    drafts = temperature == 0.0
    engine = make_engine(model, speculator=HashSpeculator(layers=(0,), drafts=drafts), k=2, prefix_caching=True, block_size=4, hidden=True,
                         use_eagle_block_drop=drop, num_hash_lookahead_tokens=lookahead)
    misses, first = engine.generate(prompts, params)
    hits, second = engine.generate(prompts, params)
    assert first.num_cached_tokens == 0 or first.num_cached_tokens < second.num_cached_tokens
    assert second.num_cached_tokens >= len(prompts) * (20 if not drop else 16)
    assert [r.output_token_ids for r in hits] == [r.output_token_ids for r in misses]
    cold = make_engine(model, speculator=HashSpeculator(layers=(0,), drafts=drafts), k=2, hidden=True, block_size=4)
    reference, _ = cold.generate(prompts, params)
    assert [r.output_token_ids for r in reference] == [r.output_token_ids for r in misses]
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
