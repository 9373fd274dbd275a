"""``specpath_train.trainer``'s target parts: the frozen embedding, final norm and LM head the
recipes score drafts with, as the target the data was captured from has them."""

import json

import pytest
import torch

from specpath_engine.model import LlamaModel, default_model_path
from specpath_engine.quantization import Int8Linear
from specpath_train.trainer import data_quantization, load_target_parts


def _data(tmp_path, key):
    (tmp_path / "features.json").write_text(json.dumps({"key": key, "heldout": 1}))
    return tmp_path


def test_the_parts_of_a_float_target_are_its_own(tmp_path):
    target = LlamaModel.from_pretrained(default_model_path())
    config, emb, norm, head = load_target_parts(str(default_model_path()), _data(tmp_path, {"target": "x"}))
    assert config["num_hidden_layers"] == len(target.model.layers)
    torch.testing.assert_close(head, target.lm_head.weight, rtol=0, atol=0)
    torch.testing.assert_close(emb, target.model.embed_tokens.weight, rtol=0, atol=0)
    assert data_quantization(tmp_path) is None and data_quantization(None) is None
    assert data_quantization(tmp_path / "missing") is None


@pytest.mark.parametrize("method", ["int8", "int4"])
def test_data_of_a_quantised_target_scores_against_its_head(tmp_path, method):
    """The LM head as the quantised target multiplies by (int8 under both formats); the embedding
    a step looks tokens up in stays the float one."""
    data = _data(tmp_path, {"target": "x", "quantization": method})
    assert data_quantization(data) == method
    target = LlamaModel.from_pretrained(default_model_path())
    _, emb, norm, head = load_target_parts(str(default_model_path()), data)
    torch.testing.assert_close(head, Int8Linear(target.lm_head).dequantized_weight(), rtol=0, atol=0)
    assert not torch.equal(head, target.lm_head.weight)
    torch.testing.assert_close(emb, target.model.embed_tokens.weight, rtol=0, atol=0)
    torch.testing.assert_close(norm, target.model.norm.weight, rtol=0, atol=0)
