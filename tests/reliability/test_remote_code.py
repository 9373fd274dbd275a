"""Nothing shipped with a checkpoint is imported unless the user passed trust_remote_code=True."""

from __future__ import annotations

import json
import shutil

import pytest

from specpath_engine.model import default_model_path
from specpath_engine.tokenizer import load_tokenizer

pytest.importorskip("transformers")


@pytest.fixture
def remote_code_checkpoint(tmp_path):
    """The embedded model with a tokenizer that declares custom code, which would leave a mark."""
    path = tmp_path / "ckpt"
    shutil.copytree(default_model_path(), path)
    marker = tmp_path / "code-ran"
    (path / "evil_tokenizer.py").write_text(
        f"import pathlib\npathlib.Path({str(marker)!r}).write_text('ran')\n"
        "from transformers import PreTrainedTokenizer\n"
        "class EvilTokenizer(PreTrainedTokenizer):\n    pass\n"
    )
    (path / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "EvilTokenizer",
        "auto_map": {"AutoTokenizer": ["evil_tokenizer.EvilTokenizer", None]},
    }))
    return path, marker


def test_auto_map_tokenizer_is_refused_without_trust(remote_code_checkpoint, monkeypatch):
    path, marker = remote_code_checkpoint
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("asked on the terminal"))
    with pytest.raises(ValueError) as failure:
        load_tokenizer(path)
    assert "\n" not in str(failure.value) and str(path) in str(failure.value)
    assert not marker.exists()


def test_llm_never_runs_checkpoint_code_by_default(remote_code_checkpoint, monkeypatch):
    from specpath_engine.llm import LLM

    path, marker = remote_code_checkpoint
    monkeypatch.setattr("builtins.input", lambda *a: pytest.fail("asked on the terminal"))
    with pytest.raises(ValueError, match="no usable tokenizer"):
        LLM(str(path))
    assert not marker.exists()


def test_trust_remote_code_without_a_model_is_not_ignored():
    """Without --model the flag travels with the embedded default target (it is what lets a
    custom_class proposer or a declared class resolve), never dropped."""
    from specpath.cli import _resolve, build_parser

    args = build_parser().parse_args(["validate", "--spec-method", "ngram", "--spec-tokens", "2", "--trust-remote-code"])
    spec = _resolve(args)
    assert spec.target_model_config is not None and spec.target_model_config.trust_remote_code
    plain = _resolve(build_parser().parse_args(["validate", "--spec-method", "ngram", "--spec-tokens", "2"]))
    assert plain.target_model_config is None or not plain.target_model_config.trust_remote_code


def test_trust_remote_code_is_what_allows_it(remote_code_checkpoint):
    """The control: the same checkpoint does import its code once the user trusts it."""
    path, marker = remote_code_checkpoint
    try:
        load_tokenizer(path, trust_remote_code=True)
    except Exception:  # the toy tokenizer class is incomplete; only the import matters here
        pass
    assert marker.exists()
