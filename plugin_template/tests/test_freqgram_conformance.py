"""The specpath conformance kit, applied to freqgram: one subclass, the whole contract."""

from specpath.testing import SpeculatorConformance
from specpath_freqgram.config import FreqgramSpeculatorConfig


class TestFreqgramConformance(SpeculatorConformance):
    method = "freqgram"
    config_class = FreqgramSpeculatorConfig
    distribution = "specpath-freqgram"
    # Model-free: no KV of its own, no extra rows, nothing to read past a prefill chunk.
    expected = {
        "num_lookahead_tokens": lambda k: 0,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 0,
    }
    expected_flags = {
        "base_method": "ngram",
        "uses_target_hidden_states": False,
        "proposes_draft_tokens": True,
        "draft_has_own_vocab": False,
    }
    valid_options = [
        {"speculator_options": {"max_order": 1}},
        {"speculator_options": {"max_order": 8}},
        {"speculator_options": {}},
    ]
    invalid_options = [
        ({"speculator_options": {"max_order": 0}}, "speculator_options.max_order"),
        ({"speculator_options": {"max_order": 9}}, "from 1 to 8"),
        ({"speculator_options": {"max_order": "3"}}, "got '3'"),
        ({"speculator_options": {"max_order": True}}, "got True"),
        ({"speculator_options": {"max_ordr": 2}}, "did you mean 'max_order'?"),
    ]
    hash_sensitive_options = [
        ({"speculator_options": {"max_order": 2}}, {"speculator_options": {"max_order": 4}}),
    ]
    known_failures = {}
