import pytest

from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError
from specpath_ngram.config import NgramGPUSpeculatorConfig, NgramSpeculatorConfig


def resolve(**fields):
    return SpeculativeConfig.from_dict({"num_speculative_tokens": 4, **fields})


@pytest.mark.parametrize(
    ("given", "window"),
    [
        ({}, (5, 5)),
        ({"prompt_lookup_min": 2}, (2, 2)),
        ({"prompt_lookup_max": 7}, (7, 7)),
        ({"prompt_lookup_min": 2, "prompt_lookup_max": 7}, (2, 7)),
        ({"prompt_lookup_min": 3, "prompt_lookup_max": 3}, (3, 3)),
    ],
)
@pytest.mark.parametrize("method", ["ngram", "ngram_gpu"])
def test_window_defaults(method, given, window):
    spec = resolve(method=method, **given)
    assert (spec.prompt_lookup_min, spec.prompt_lookup_max) == window
    config = spec.speculator_config
    assert (config.prompt_lookup_min, config.prompt_lookup_max) == window


@pytest.mark.parametrize("method", ["ngram", "ngram_gpu"])
def test_min_above_max_is_a_one_line_error(method):
    with pytest.raises(SpeculativeConfigError) as info:
        resolve(method=method, prompt_lookup_min=6, prompt_lookup_max=3)
    assert "prompt_lookup_min" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("fields", "config_class"),
    [
        ({"method": "ngram"}, NgramSpeculatorConfig),
        ({"method": "ngram_gpu"}, NgramGPUSpeculatorConfig),
        ({"model": "[ngram]"}, NgramSpeculatorConfig),
        ({"method": "[ngram]"}, NgramSpeculatorConfig),
    ],
)
def test_method_table_row(fields, config_class):
    """The n-gram rows of the method table: no hidden states, no workspace of its own,
    lookahead 0, extra slots 0, target vocabulary, no PCP; dense token history preferred."""
    for k in (1, 4, 9):
        config = resolve(**fields, num_speculative_tokens=k).speculator_config
        assert type(config) is config_class
        assert config.num_lookahead_tokens == 0
        assert config.max_num_new_slots_for_drafting == 0
        assert config.num_prefill_lookahead_tokens == 0
    assert config.uses_target_hidden_states is False
    assert config.uses_separate_workspace_lane is False
    assert config.draft_has_own_vocab is False
    assert config.supports_pcp is False
    assert config.prefer_dense_token_history is True
    assert config.proposes_draft_tokens is True
    assert config.supports_variable_draft_length is True


def test_needs_no_model_and_keeps_none():
    spec = resolve(method="ngram")
    assert spec.draft_model_config is None
