"""The specpath conformance kit, applied to ``suffix``."""

from specpath_engine.testing import SpeculatorConformance
from specpath_suffix.config import SuffixSpeculatorConfig


class TestSuffixConformance(SpeculatorConformance):
    method = "suffix"
    config_class = SuffixSpeculatorConfig
    distribution = "specpath-suffix"
    # Model-free: no KV of its own, no extra rows, nothing to read past a prefill chunk.
    expected = {
        "num_lookahead_tokens": lambda k: 0,
        "max_num_new_slots_for_drafting": lambda k: 0,
        "num_prefill_lookahead_tokens": lambda k: 0,
    }
    expected_flags = {
        "base_method": "suffix",
        "model_free": True,
        "uses_target_hidden_states": False,
        "uses_separate_workspace_lane": False,
        "draft_has_own_vocab": False,
        "supports_pcp": False,
        "supports_variable_draft_length": True,
    }
    valid_options = [
        {"suffix_decoding_max_tree_depth": 8},
        {"suffix_decoding_max_cached_requests": 0},
        {"suffix_decoding_max_spec_factor": 2.5, "suffix_decoding_min_token_prob": 0.0},
    ]
    invalid_options = [
        ({"suffix_decoding_max_tree_depth": 0}, "suffix_decoding_max_tree_depth: must be >= 1"),
        ({"suffix_decoding_max_cached_requests": -1}, "suffix_decoding_max_cached_requests"),
        ({"suffix_decoding_max_spec_factor": 0.0}, "suffix_decoding_max_spec_factor"),
        ({"suffix_decoding_min_token_prob": 1.5}, "suffix_decoding_min_token_prob: must be in [0, 1]"),
        ({"suffix_decoding_max_tree_depth": "24"}, "suffix_decoding_max_tree_depth"),
    ]
    hash_sensitive_options = [
        ({"suffix_decoding_max_tree_depth": 8}, {"suffix_decoding_max_tree_depth": 16}),
        ({"suffix_decoding_min_token_prob": 0.1}, {"suffix_decoding_min_token_prob": 0.2}),
    ]
