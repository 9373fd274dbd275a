"""SpeculatorConfig defaults, properties, hooks and DraftModelSpeculatorConfig."""

from __future__ import annotations

import pytest

from specpath.config.speculator import CAPABILITY_FLAGS, DraftModelSpeculatorConfig, SpeculatorConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError


def test_defaults_describe_a_drafter_with_no_needs():
    assert SpeculatorConfig.base_method is None and SpeculatorConfig.speculator_class is None
    assert SpeculatorConfig.supported_options == frozenset()
    expected_true = {"proposes_draft_tokens", "adaptive_verification_uses_draft_logits"}
    assert {f for f in CAPABILITY_FLAGS if getattr(SpeculatorConfig, f)} == expected_true
    assert DraftModelSpeculatorConfig.shares_target_positions is True
    assert not hasattr(SpeculatorConfig, "matches")  # checkpoints are recognised by the detection hook


def test_properties_read_the_resolved_spec(fake_builtins):
    spec = SpeculativeConfig(method="ngram", num_speculative_tokens=3)
    speculator = spec.speculator_config
    assert (speculator.num_speculative_tokens, speculator.num_lookahead_tokens, speculator.num_prefill_lookahead_tokens,
            speculator.max_num_new_slots_for_drafting, speculator.max_model_len) == (3, 0, 0, 0, None)
    assert speculator.hash_factors() == ()
    described = speculator.describe()
    assert described["config_class"] == "core_fakes:FakeNgram" and described["prefer_dense_token_history"] is True
    assert repr(speculator) == "FakeNgram()"  # no recursion through the back reference


def test_hidden_state_drafters_look_one_token_ahead_in_prefill(fake_builtins, make_checkpoint):
    spec = SpeculativeConfig(method="extract_hidden_states", num_speculative_tokens=2)
    assert spec.speculator_config.num_prefill_lookahead_tokens == 1
    assert not spec.speculator_config.proposes_draft_tokens


def test_draft_model_base_needs_a_model_and_builds_the_draft(fake_builtins, make_checkpoint):
    with pytest.raises(SpeculativeConfigError, match="speculative_config.model: required for method 'eagle'"):
        SpeculativeConfig(method="eagle", num_speculative_tokens=2)
    spec = SpeculativeConfig(method="eagle", model=make_checkpoint("head"), num_speculative_tokens=2)
    assert spec.draft_model_config.runner == "draft" and spec.draft_tensor_parallel_size == 1
    assert spec.draft_parallel_config.tensor_parallel_size == 1
    assert spec.speculator_config.max_model_len == 512


def test_adapt_draft_model_config_hook(fake_builtins, make_checkpoint):
    import attrs

    import core_fakes
    from specpath import register_speculative_method

    @attrs.frozen(kw_only=True)
    class Wrapping(core_fakes.FakeEagle):
        @classmethod
        def adapt_draft_model_config(cls, spec, draft):
            return attrs.evolve(draft, hf_overrides=[{"architectures": ["EagleHead"]}])

    register_speculative_method("wrapping", Wrapping)
    spec = SpeculativeConfig(method="wrapping", model=make_checkpoint("h"), num_speculative_tokens=2)
    assert spec.draft_model_config.architectures == ("EagleHead",)
