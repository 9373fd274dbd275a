"""torch_dtype, the embedded-target helpers and the draft layer's shape fields."""

import pytest
import torch

from specpath_engine.model import default_model_path
from specpath_engine.modeling.dtypes import torch_dtype
from specpath.config.model import ModelConfig
from specpath.config.shipped import EMBEDDED_TARGET, target_fingerprint
from specpath_engine.modeling.layers import DraftLayer, layer_shape


def test_torch_dtype():
    assert torch_dtype(torch.bfloat16) is torch.bfloat16
    assert torch_dtype("float16") is torch.float16 and torch_dtype("torch.bfloat16") is torch.bfloat16
    assert torch_dtype(None) is torch.float32 and torch_dtype("Size") is torch.float32
    assert torch_dtype("nope", default=torch.float64) is torch.float64


def test_the_embedded_fingerprint_is_the_engines_default_model():
    """The core names the embedded target by its architecture alone; it must stay this model's."""
    assert target_fingerprint(ModelConfig(model=str(default_model_path()))) == EMBEDDED_TARGET


def test_layer_shape_defaults_and_the_layer_it_builds():
    shape = layer_shape({"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "vocab_size": 50})
    assert shape["num_key_value_heads"] == 4 and shape["head_dim"] == 8 and shape["rope_theta"] == 10000.0

    class Config:
        pass

    config = Config()
    config.__dict__.update(shape)
    layer = DraftLayer(config, attn_in=64)
    assert layer.q_proj.in_features == 64 and layer.o_proj.out_features == 32
    names = {n for n, _ in layer.named_parameters()}
    assert {"q_proj.weight", "post_attention_layernorm.weight", "down_proj.weight"} <= names


def test_triton_or_reference_picks_by_device_and_imports_the_kernel_only_on_cuda():
    from specpath_engine.modeling.dispatch import triton_or_reference

    def reference():
        return "reference"

    assert triton_or_reference("cpu", "no_such_module_xyz:kernel", reference) is reference
    assert triton_or_reference("cpu", "no_such_module_xyz:kernel", "math:sqrt")(4.0) == 2.0
    with pytest.raises(ModuleNotFoundError):
        triton_or_reference("cuda", "no_such_module_xyz:kernel", reference)
