"""One validator style across the config layer: the sub-configs run the speculative config's
field rules as attrs validators, so every bad value is a one-line ``SpeculativeConfigError``
naming ``<config>.<field>``."""

import inspect

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpath.config import model as model_configs
from specpath.config import rules
from specpath.config.args import merge_legacy
from specpath.config.model import (
    AttentionConfig,
    CacheConfig,
    KernelConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from specpath.errors import SpeculativeConfigError

COUNTS = [(ParallelConfig, "parallel_config", name) for name in
          ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size", "prefill_context_parallel_size")]
COUNTS += [(CacheConfig, "cache_config", "block_size"), (SchedulerConfig, "scheduler_config", "max_num_seqs"),
           (SchedulerConfig, "scheduler_config", "max_num_batched_tokens")]
NAMES = [(CacheConfig, "cache_config", "kv_cache_dtype"), (KernelConfig, "kernel_config", "moe_backend"),
         (AttentionConfig, "attention_config", "backend")]
not_a_count = st.one_of(st.integers(max_value=0), st.booleans(), st.floats(allow_nan=False), st.text(max_size=3))


@pytest.mark.parametrize(("cls", "owner", "name"), COUNTS)
@given(value=not_a_count)
def test_counts_refuse_anything_but_a_positive_int(cls, owner, name, value):
    with pytest.raises(SpeculativeConfigError) as err:
        cls(**{name: value})
    assert str(err.value).startswith(f"{owner}.{name}: must be an integer >= 1") and "\n" not in str(err.value)


@pytest.mark.parametrize(("cls", "owner", "name"), COUNTS)
@given(value=st.integers(1, 1 << 40))
def test_counts_keep_a_positive_int(cls, owner, name, value):
    assert getattr(cls(**{name: value}), name) == value


@pytest.mark.parametrize(("cls", "owner", "name"), NAMES)
@given(value=st.one_of(st.just(""), st.text(min_size=65, max_size=70), st.just("a\nb"), st.just(" auto")))
def test_backend_and_dtype_names_are_plain_names(cls, owner, name, value):
    with pytest.raises(SpeculativeConfigError, match=rf"^{owner}\.{name}: must be"):
        cls(**{name: value})


@pytest.mark.parametrize("runner", ["generate", "draft"])
def test_model_config_fields_name_their_owner(runner):
    owner = "speculative_config" if runner == "draft" else "model_config"
    with pytest.raises(SpeculativeConfigError, match=rf"^{owner}\.dtype: unknown dtype"):
        ModelConfig(model="embedded", runner=runner, dtype="float8")
    with pytest.raises(SpeculativeConfigError, match=rf"^{owner}\.max_model_len: must be an integer >= 1"):
        ModelConfig(model="embedded", runner=runner, max_model_len=0)


def test_an_unknown_legacy_flag_is_a_config_error():
    with pytest.raises(SpeculativeConfigError, match="unknown legacy flag.*did you mean 'spec_method'"):
        merge_legacy({}, spec_metod="ngram")


def test_every_sub_config_validator_is_a_field_rule():
    """No hand-written validator functions: each one is ``rules.validator(...)``."""
    classes = [obj for _, obj in inspect.getmembers(model_configs, inspect.isclass)
               if attrs.has(obj) and obj.__module__ == model_configs.__name__]
    checked = 0
    for cls in classes:
        for field in attrs.fields(cls):
            if field.validator is not None:
                assert field.validator.__qualname__ == rules.validator(owner="x").__qualname__, (cls, field.name)
                checked += 1
    assert checked >= len(COUNTS) + len(NAMES) + 2
