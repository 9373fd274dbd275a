"""Which target checkpoints carry their own DSpark stages (DeepSeek-V4 style)."""

from hypothesis import given
from hypothesis import strategies as st

from specpath_dspark.stages import carries_dspark_stages


def test_targets_that_carry_dspark_stages():
    assert carries_dspark_stages({"model_type": "deepseek_v4"})
    assert carries_dspark_stages({"model_type": "deepseek_v41"})
    assert carries_dspark_stages({"model_type": "x", "dspark_block_size": 8})
    assert not carries_dspark_stages({"model_type": "deepseek_v3"})


@given(st.dictionaries(st.text(max_size=12), st.integers(), max_size=4))
def test_a_dspark_key_is_the_evidence(config):
    config.pop("model_type", None)
    assert carries_dspark_stages(config) == any(k.startswith("dspark_") for k in config)
