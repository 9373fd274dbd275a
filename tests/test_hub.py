"""Hub ids resolve from a local Hugging Face cache layout, never the network."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpath import hub
from specpath.config.model import ModelConfig
from specpath.errors import SpeculativeConfigError

COMMIT = "0123456789abcdef0123456789abcdef01234567"
OTHER = "fedcba9876543210fedcba9876543210fedcba98"


def fake_cache(root, repo_id, config, *, refs=(("main", COMMIT),), commits=(COMMIT,)):
    """``models--org--name/{refs/<rev>, snapshots/<sha>/config.json}`` under ``root``."""
    org, name = repo_id.split("/")
    repo = root / f"models--{org}--{name}"
    for ref, sha in refs:
        (repo / "refs").mkdir(parents=True, exist_ok=True)
        (repo / "refs" / ref).write_text(sha)
    for sha in commits:
        snap = repo / "snapshots" / sha
        snap.mkdir(parents=True)
        (snap / "config.json").write_text(json.dumps(config))
    return repo


@pytest.fixture
def cache(tmp_path, monkeypatch):
    root = tmp_path / "hub"
    root.mkdir()
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(root))
    monkeypatch.chdir(tmp_path)
    return root


def test_cache_dir_follows_huggingface_hub_order(tmp_path, monkeypatch):
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub.hub_cache_dir() == str(tmp_path / ".cache" / "huggingface" / "hub")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub.hub_cache_dir() == str(tmp_path / "xdg" / "huggingface" / "hub")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert hub.hub_cache_dir() == str(tmp_path / "hfhome" / "hub")
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", str(tmp_path / "legacy"))
    assert hub.hub_cache_dir() == str(tmp_path / "legacy")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "new"))
    assert hub.hub_cache_dir() == str(tmp_path / "new")


def test_main_ref_resolves_to_its_snapshot(cache):
    fake_cache(cache, "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", {"model_type": "llama"})
    path = hub.resolve_model_path("yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    assert path == str(cache / "models--yuhuili--EAGLE3-LLaMA3.1-Instruct-8B" / "snapshots" / COMMIT)


def test_named_revision_and_commit_hash(cache):
    fake_cache(cache, "org/m", {}, refs=(("main", COMMIT), ("v2", OTHER)), commits=(COMMIT, OTHER))
    assert hub.resolve_model_path("org/m", "v2").endswith(OTHER)
    assert hub.resolve_model_path("org/m", COMMIT).endswith(COMMIT)


def test_missing_repo_is_one_line_naming_where_it_looked(cache):
    with pytest.raises(SpeculativeConfigError) as info:
        hub.resolve_model_path("org/absent", field="speculative_config.model")
    text = str(info.value)
    assert "\n" not in text
    assert str(cache / "models--org--absent" / "refs" / "main") in text
    assert text.startswith("speculative_config.model:") and "never downloads" in text


def test_ref_without_snapshot_is_one_line(cache):
    repo = fake_cache(cache, "org/m", {}, commits=())
    with pytest.raises(SpeculativeConfigError, match="no snapshot") as info:
        hub.resolve_model_path("org/m")
    assert str(repo / "snapshots" / COMMIT) in str(info.value)


def test_local_directory_wins_over_a_hub_id(cache, tmp_path):
    local = tmp_path / "org" / "m"
    local.mkdir(parents=True)
    assert hub.resolve_model_path("org/m") == "org/m"


@given(st.text(max_size=30))
def test_anything_that_is_not_a_hub_id_passes_through(text):
    if not hub.is_hub_id(text):
        assert hub.resolve_model_path(text) == text


@pytest.mark.parametrize("value", ["/abs/path", "./rel", "a/b/c", "org/", "/org/m", "org/../x", "ngram"])
def test_paths_are_not_hub_ids(value):
    assert not hub.is_hub_id(value)


def test_model_config_reads_a_cached_hub_id(cache):
    config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "vocab_size": 32,
              "hidden_size": 8, "num_hidden_layers": 1, "num_attention_heads": 2, "max_position_embeddings": 64}
    fake_cache(cache, "org/tiny", config)
    model = ModelConfig(model="org/tiny")
    assert model.model.endswith(COMMIT)
    assert model.model_weights == "org/tiny"
    assert model.hf_config["model_type"] == "llama"
    assert model.tokenizer == model.model


def test_model_config_missing_hub_id_is_one_line(cache):
    with pytest.raises(SpeculativeConfigError, match=r"^model_config.model: is not in the local Hugging Face cache"):
        ModelConfig(model="org/none")
