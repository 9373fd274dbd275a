"""The global tree makes later calls on the same LLM draft differently. A seeded sampled call's
text does not move with it under standard verification (its tokens are the race winners on its
noise, whatever was drafted); under a mode that keeps rejection sampling (block) it does, and
``forget_responses()`` is the per-call way to keep earlier calls out; explain says so."""

from specpath import create_speculative_config
from specpath_engine.harness import DEMO_PROMPTS
from specpath_engine.llm import LLM, SamplingParams

PARAMS = SamplingParams(temperature=0.8, seed=7, max_tokens=64)


def _call(llm):
    return [o.token_ids for o in llm.generate(list(DEMO_PROMPTS[:3]), PARAMS)]


def test_a_seeded_call_repeats_whatever_the_global_tree_learned():
    llm = LLM(None, {"method": "suffix"}, num_threads=1)
    first = _call(llm)
    assert llm.speculator.cache.cached_requests  # the first call's responses joined the global tree
    drafted = llm.metrics.num_draft_tokens
    assert _call(llm) == first
    assert llm.metrics.num_draft_tokens != drafted  # the drafts did change


def test_forgetting_earlier_responses_repeats_a_seeded_call_under_block_verification():
    # fixed K: under block verification a seeded text also follows the draft lengths, which the
    # measured policy takes from timings
    llm = LLM(None, {"method": "suffix", "rejection_sample_method": "block", "draft_length_policy": "fixed"},
              num_threads=1)
    first = _call(llm)
    second = _call(llm)
    assert second != first  # what the note warns about: earlier calls changed the drafts
    llm.speculator.forget_responses()
    assert llm.speculator.cache.cached_requests == []
    assert _call(llm) == first


def test_explain_notes_the_global_tree_unless_it_is_off():
    (note,) = create_speculative_config({"method": "suffix"}).speculator_config.notes
    assert "seeded" in note and "forget_responses()" in note and "suffix_decoding_max_cached_requests: 0" in note
    off = create_speculative_config({"method": "suffix", "suffix_decoding_max_cached_requests": 0})
    assert off.speculator_config.notes == ()
