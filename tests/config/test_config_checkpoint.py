"""specpath.config.checkpoint (what is read of a draft checkpoint) and the core's declared-class hook."""

from __future__ import annotations

import pytest

from specpath.config import declared
from specpath.config.checkpoint import DraftCheckpoint, load_hf_config, read_draft_checkpoint
from specpath.errors import SpeculativeConfigError


def test_what_a_checkpoint_says():
    ckpt = DraftCheckpoint("/m/x", {"model_type": "eagle3", "speculator_config_class": "my_eagle3"})
    assert (ckpt.model_type, ckpt.declared_class) == ("eagle3", "my_eagle3")
    assert ckpt.declared_field == "/m/x/config.json:speculator_config_class"
    assert DraftCheckpoint("/m/y", {"model_type": 3}).model_type is None


def test_reading_prefers_the_config_already_read(tmp_path, make_checkpoint):
    assert read_draft_checkpoint(None) is None
    assert read_draft_checkpoint(str(tmp_path / "hint-only")).config == {}  # a path hint, no config.json
    path = make_checkpoint("c", model_type="mtp")
    assert read_draft_checkpoint(path).model_type == "mtp"
    assert read_draft_checkpoint(path, {"model_type": "other"}).model_type == "other"


def test_load_hf_config_is_one_line_on_failure(tmp_path):
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(SpeculativeConfigError, match="must hold a JSON object"):
        load_hf_config(str(tmp_path))


@pytest.mark.parametrize(("value", "answer"), [("eagle3", "eagle3"), ("pkg:Cls", "pkg:Cls"), (3, None), (None, None)])
def test_the_declared_class_hook_reports_strings_only(value, answer):
    config = {} if value is None else {"speculator_config_class": value}
    assert declared.specpath_detect_method(DraftCheckpoint("/m", config)) == answer


def test_the_declared_class_hook_runs_first():
    assert declared.specpath_detect_method.specpath_impl["tryfirst"] is True
