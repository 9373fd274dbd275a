"""The specpath conformance kit, applied to both n-gram methods."""

from specpath.testing import SpeculatorConformance
from specpath_ngram.config import NgramGPUSpeculatorConfig, NgramSpeculatorConfig


class NgramConformance(SpeculatorConformance):
    distribution = "specpath-ngram"
    # Model-free: no KV of its own, no extra rows, nothing to read past a prefill chunk.
    expected = {
        "num_lookahead_tokens": lambda k: 0,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 0,
    }
    expected_flags = {
        "uses_target_hidden_states": False,
        "uses_separate_workspace_lane": False,
        "prefer_dense_token_history": True,
        "draft_has_own_vocab": False,
        "supports_pcp": False,
    }
    valid_options = [
        {"prompt_lookup_min": 1},
        {"prompt_lookup_max": 8},
        {"prompt_lookup_min": 2, "prompt_lookup_max": 6},
    ]
    invalid_options = [
        ({"prompt_lookup_min": 6, "prompt_lookup_max": 3}, "prompt_lookup_min"),
        ({"prompt_lookup_min": 0}, "prompt_lookup_min: must be >= 1"),
        ({"prompt_lookup_max": "4"}, "prompt_lookup_max"),
    ]


class TestNgramConformance(NgramConformance):
    method = "ngram"
    config_class = NgramSpeculatorConfig
    expected_flags = {**NgramConformance.expected_flags, "base_method": "ngram"}


class TestNgramGPUConformance(NgramConformance):
    method = "ngram_gpu"
    config_class = NgramGPUSpeculatorConfig
    expected_flags = {**NgramConformance.expected_flags, "base_method": "ngram_gpu"}


NgramConformance.__test__ = False  # the kit marks every subclass a test class; this one is shared
