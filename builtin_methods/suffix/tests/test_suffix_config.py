"""Defaults, K, and the suffix fields refused on every other method."""

import pytest

from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath_suffix.config import DEFAULTS


def test_defaults_and_k_is_the_tree_depth():
    spec = SpeculativeConfig.from_dict({"method": "suffix"})
    assert {name: getattr(spec, name) for name in DEFAULTS} == DEFAULTS
    assert spec.num_speculative_tokens == 24
    assert SpeculativeConfig.from_dict({"method": "suffix", "suffix_decoding_max_tree_depth": 12}).num_speculative_tokens == 12
    assert SpeculativeConfig.from_dict({"method": "suffix", "num_speculative_tokens": 5}).num_speculative_tokens == 5
    described = spec.speculator_config.describe()
    assert described["num_lookahead_tokens"] == 0 and described["max_num_new_slots_for_drafting"] == 0


@pytest.mark.parametrize("name", sorted(DEFAULTS))
@pytest.mark.parametrize("method", ["ngram", "ngram_gpu"])  # every plugin's conformance kit checks it too
def test_other_methods_refuse_the_suffix_fields(method, name):
    value = {"suffix_decoding_max_spec_factor": 1.0, "suffix_decoding_min_token_prob": 0.1}.get(name, 8)
    fields = {"method": method, "num_speculative_tokens": 2, name: value}
    with pytest.raises(SpeculativeConfigError) as info:
        SpeculativeConfig.from_dict(fields)
    message = str(info.value)
    assert name in message and "\n" not in message


def test_suffix_refuses_other_methods_options():
    with pytest.raises(SpeculativeConfigError, match="prompt_lookup_min|not supported"):
        SpeculativeConfig.from_dict({"method": "suffix", "dspark_draft_topk": 4})
