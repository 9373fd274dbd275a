"""Fixtures shared by the core's tests (non-autouse: modules opt in by name).

``tests/`` is put on ``sys.path`` so test modules in sub-folders can import the test-only
config classes in ``core_fakes.py``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.append(os.path.dirname(__file__))

_ENV = ("SPECPATH_PLUGINS", "SPECPATH_DISABLE_PLUGIN_AUTOLOAD", "SPECPATH_STRICT_PLUGINS")


@pytest.fixture
def fresh_plugins(monkeypatch):
    """No installed plugin is visible and no registration leaks between tests."""
    from specpath import plugins

    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    plugins.reset(search_path=[])
    yield plugins
    plugins.reset()


@pytest.fixture
def fake_builtins(fresh_plugins):
    """Test-only classes bound to every implemented built-in name through an in-process plugin."""
    import core_fakes

    fresh_plugins.get_plugin_manager().register(core_fakes.BuiltinFakesPlugin(), name="builtin-fakes")
    return core_fakes


DEFAULT_HF_CONFIG = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 4,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 512,
    "torch_dtype": "float32",
}


@pytest.fixture
def make_checkpoint(tmp_path):
    """``make_checkpoint(name, **config_overrides) -> path`` of a local checkpoint dir."""

    def make(name: str = "ckpt", **overrides) -> str:
        path = tmp_path / name
        path.mkdir(parents=True, exist_ok=True)
        config = {**DEFAULT_HF_CONFIG, **overrides}
        config = {k: v for k, v in config.items() if v is not None}
        (path / "config.json").write_text(json.dumps(config))
        return str(path)

    return make


class FakeSite:
    """A folder of fake installed distributions (``.dist-info`` + modules) on ``sys.path``."""

    def __init__(self, root: Path, monkeypatch) -> None:
        self.root = root
        self.modules: list[str] = []
        root.mkdir(parents=True, exist_ok=True)
        monkeypatch.syspath_prepend(str(root))

    def add(self, dist: str, entry_points: dict[str, str], modules: dict[str, str], version: str = "1.0") -> None:
        info = self.root / f"{dist.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
        lines = ["[specpath.methods]"] + [f"{k} = {v}" for k, v in entry_points.items()]
        (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
        for module, source in modules.items():
            (self.root / f"{module}.py").write_text(textwrap.dedent(source))
            self.modules.append(module)
        importlib.invalidate_caches()

    def rescan(self) -> None:
        from specpath import plugins

        plugins.reset(search_path=[str(self.root)])


@pytest.fixture
def fake_site(tmp_path, monkeypatch, fresh_plugins):
    site = FakeSite(tmp_path / "site", monkeypatch)
    yield site
    for module in site.modules:
        sys.modules.pop(module, None)
