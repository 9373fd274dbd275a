"""Published checkpoints resolve the way the ecosystem publishes them.

Every ``config.json`` under ``tests/fixtures/checkpoints/`` (sources in its ``SOURCES.md``) is
resolved with ``method`` omitted and with it given, against the installed built-in plugins:
the method each is recognised as, the values read from where the format keeps them (taps,
K, mask tokens), and the one-line refusals (Medusa, a method that contradicts the checkpoint).
No weights are loaded: resolution reads ``config.json`` only.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "checkpoints"


def fixture(name: str) -> str:
    path = FIXTURES / name
    assert (path / "config.json").is_file(), f"missing fixture {name}"
    return str(path)


def resolve(name: str, **fields) -> SpeculativeConfig:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # alias deprecations are tested elsewhere
        return SpeculativeConfig.from_dict({"model": fixture(name), **fields})


# fixture -> (method it is, what resolution reads from it: field -> expected value)
RECOGNISED = {
    "eagle/EAGLE-LLaMA3-Instruct-8B": ("eagle", {}),
    "eagle3/EAGLE3-LLaMA3.1-Instruct-8B": ("eagle3", {}),
    "eagle3/specforge-qwen3-4b-eagle3": ("eagle3", {}),
    "eagle3/specforge-deepseek-eagle3-nested-ids": ("eagle3", {"eagle_aux_hidden_state_layer_ids": (1, 29, 57)}),
    "speculators/Llama-3.1-8B-Instruct-speculator.eagle3": ("eagle3", {"num_speculative_tokens": 3}),
    "speculators/Kimi-K3-speculator.dspark": (
        "dspark", {"num_speculative_tokens": 8, "eagle_aux_hidden_state_layer_ids": (24, 48, 72, 88, 92)}),
    "dflash/z-lab-Qwen3-4B-DFlash-b16": (
        "dflash", {"num_speculative_tokens": 15, "eagle_aux_hidden_state_layer_ids": (2, 10, 18, 26, 34)}),
    "dflash/specforge-qwen3-8b-dflash": (
        "dflash", {"num_speculative_tokens": 15, "eagle_aux_hidden_state_layer_ids": (2, 10, 18, 26, 34)}),
    "dspark/specforge-qwen3-8b-dspark": (
        "dspark", {"num_speculative_tokens": 16, "eagle_aux_hidden_state_layer_ids": (2, 10, 18, 26, 34)}),
    "mtp/DeepSeek-V3": ("mtp", {"num_speculative_tokens": 1}),
    "mtp/GLM-4.5": ("mtp", {"num_speculative_tokens": 1}),
    "mtp/MiMo-7B-RL": ("mtp", {"num_speculative_tokens": 1}),
    "mtp/Qwen3-Next-80B-A3B-Instruct": ("mtp", {"num_speculative_tokens": 1}),
    "mtp/LongCat-Flash-Chat": ("mtp", {"num_speculative_tokens": 1}),
    "mtp/ERNIE-4.5-21B-A3B-PT": ("mtp", {"num_speculative_tokens": 1}),
    "mtp/Nemotron-H-MTP": ("mtp", {"num_speculative_tokens": 1}),
    "mtp/Qwen3.5-MoE": ("mtp", {"num_speculative_tokens": 1}),
    "draft_model/Llama-3.2-1B-Instruct": ("draft_model", {}),
    "draft_model/Qwen3-0.6B": ("draft_model", {}),
    "pard/PARD-Llama-3.2-1B": ("draft_model", {}),
    "p_eagle/specforge-qwen3-8b-peagle": ("eagle3", {}),
    "p_eagle/p-eagle-llama3.1-8b-ptd": ("eagle3", {"eagle_aux_hidden_state_layer_ids": (2, 16, 29)}),
}
MEDUSA = ["medusa/medusa-vicuna-7b-v1.3", "medusa/vllm-medusa-llama-68m"]
DECLARES_K = {name for name, (_, reads) in RECOGNISED.items() if "num_speculative_tokens" in reads}


def test_every_fixture_is_covered():
    on_disk = {str(p.parent.relative_to(FIXTURES)) for p in FIXTURES.glob("*/*/config.json")}
    assert on_disk == set(RECOGNISED) | set(MEDUSA)


def _k(name: str) -> dict:
    return {} if name in DECLARES_K else {"num_speculative_tokens": 2}


@pytest.mark.parametrize("name", sorted(RECOGNISED))
def test_recognised_with_method_omitted(name):
    method, reads = RECOGNISED[name]
    spec = resolve(name, **_k(name))
    assert spec.method == method
    for field, value in reads.items():
        assert getattr(spec, field) == value, field


@pytest.mark.parametrize("name", sorted(RECOGNISED))
def test_resolves_with_its_method_given(name):
    method, reads = RECOGNISED[name]
    omitted = resolve(name, **_k(name))
    given = resolve(name, method=method, **_k(name))
    assert type(given.speculator_config) is type(omitted.speculator_config)
    for field, value in reads.items():
        assert getattr(given, field) == value, field


@pytest.mark.parametrize("name", MEDUSA)
@pytest.mark.parametrize("method", [None, "draft_model"])
def test_medusa_is_refused_in_one_line_naming_medusa(name, method):
    fields = {"num_speculative_tokens": 2} | ({} if method is None else {"method": method})
    with pytest.raises(SpeculativeConfigError, match="Medusa") as info:
        resolve(name, **fields)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", sorted(n for n, (m, _) in RECOGNISED.items() if m == "mtp"))
def test_an_mtp_target_as_draft_model_points_to_mtp(name):
    with pytest.raises(SpeculativeConfigError, match="'mtp'") as info:
        resolve(name, method="draft_model", num_speculative_tokens=2)
    assert "draft_model" in str(info.value) and "\n" not in str(info.value)


WRONG = {"eagle": "dflash", "eagle3": "dflash", "dflash": "eagle3", "dspark": "mtp", "mtp": "eagle3"}


@pytest.mark.parametrize("name", sorted(n for n, (m, _) in RECOGNISED.items() if m in WRONG and "EAGLE-LLaMA3" not in n
                                        and "EAGLE3-LLaMA3.1" not in n))
def test_a_method_that_contradicts_the_checkpoint_names_both(name):
    """Only config evidence counts here: the yuhuili heads are plain Llama configs."""
    method = RECOGNISED[name][0]
    wrong = WRONG[method]
    with pytest.raises(SpeculativeConfigError) as info:
        resolve(name, method=wrong, num_speculative_tokens=2)
    text = str(info.value)
    assert f"{wrong!r}" in text and f"{method!r}" in text and "\n" not in text


def test_dflash_on_an_eagle3_head_says_eagle3_not_layout():
    with pytest.raises(SpeculativeConfigError, match="'eagle3' checkpoint") as info:
        resolve("eagle3/specforge-qwen3-4b-eagle3", method="dflash", num_speculative_tokens=2)
    assert "layout" not in str(info.value).replace(str(FIXTURES), "")


def test_parallel_drafting_reads_the_published_mask_tokens():
    pard = resolve("pard/PARD-Llama-3.2-1B", num_speculative_tokens=4, parallel_drafting=True)
    assert pard.speculator_config.pard_token_id == 128255  # amd/PARD's ``pard_token``
    assert pard.speculator_config.max_num_new_slots_for_drafting == 4
    peagle = resolve("p_eagle/p-eagle-llama3.1-8b-ptd", num_speculative_tokens=4, parallel_drafting=True)
    assert peagle.speculator_config.max_num_new_slots_for_drafting == 3  # K-1 mask queries
    specforge = resolve("p_eagle/specforge-qwen3-8b-peagle", num_speculative_tokens=4, parallel_drafting=True)
    assert specforge.method == "eagle3"
    with pytest.raises(SpeculativeConfigError, match="P-EAGLE mask parameters"):
        resolve("eagle3/specforge-qwen3-4b-eagle3", num_speculative_tokens=4, parallel_drafting=True)


def test_an_explicit_k_is_checked_against_the_mtp_layer_count():
    assert resolve("mtp/DeepSeek-V3", num_speculative_tokens=3).num_speculative_tokens == 3  # reuses the layer


COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _cache(root, repo_id, fixture_name):
    org, name = repo_id.split("/")
    repo = root / f"models--{org}--{name}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(COMMIT)
    snap = repo / "snapshots" / COMMIT
    snap.mkdir(parents=True)
    (snap / "config.json").write_text((FIXTURES / fixture_name / "config.json").read_text())
    return snap


def test_a_hub_id_draft_is_read_from_the_local_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.chdir(tmp_path)
    snap = _cache(tmp_path / "hub", "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "eagle3/EAGLE3-LLaMA3.1-Instruct-8B")
    spec = SpeculativeConfig.from_dict({"model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B", "num_speculative_tokens": 2})
    assert spec.method == "eagle3" and spec.model == str(snap)  # recognised by the repo name, as vLLM does
    with pytest.raises(SpeculativeConfigError, match=r"models--org--absent.refs.main") as info:
        SpeculativeConfig.from_dict({"model": "org/absent", "num_speculative_tokens": 2})
    assert str(info.value).startswith("speculative_config.model:") and "\n" not in str(info.value)


def test_the_draft_inherits_the_targets_load_config(tmp_path, monkeypatch):
    from specpath.config.model import LoadConfig, ModelConfig

    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "elsewhere"))
    monkeypatch.chdir(tmp_path)
    snap = _cache(tmp_path / "mycache", "Qwen/Qwen3-0.6B", "draft_model/Qwen3-0.6B")
    target = ModelConfig(model=fixture("draft_model/Qwen3-0.6B"), load_config=LoadConfig(download_dir=str(tmp_path / "mycache")))
    spec = SpeculativeConfig.from_dict({"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 2},
                                       target_model_config=target)
    assert spec.model == str(snap) and spec.draft_model_config.load_config == target.load_config
    own = LoadConfig(download_dir=str(tmp_path / "mycache"), load_format="safetensors")
    other = SpeculativeConfig.from_dict({"model": "Qwen/Qwen3-0.6B", "num_speculative_tokens": 2,
                                         "draft_load_config": {"download_dir": own.download_dir,
                                                               "load_format": "safetensors"}})
    assert other.draft_model_config.load_config == own


def _deepseek_v4_like(path, model_type):
    """A DeepSeek-V4-shaped target config (the keys detection reads; shaped after vLLM's
    handling of deepseek_v4 / deepseek_v41: MTP layers, DSpark stages, ``dspark_block_size``)."""
    import json

    config = json.loads((FIXTURES / "mtp" / "DeepSeek-V3" / "config.json").read_text())
    config.update(model_type=model_type, architectures=["DeepseekV4ForCausalLM"], dspark_block_size=8,
                  num_nextn_predict_layers=1)
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config))
    return str(path)


def test_dspark_defaults_to_a_deepseek_v4_target_that_carries_its_stages(tmp_path):
    from specpath.config.model import ModelConfig

    v4 = _deepseek_v4_like(tmp_path / "v4", "deepseek_v4")
    target = ModelConfig(model=v4)
    spec = SpeculativeConfig.from_dict({"method": "dspark"}, target_model_config=target)
    assert spec.model == v4 and spec.num_speculative_tokens == 8
    assert SpeculativeConfig.from_dict({"model": v4, "num_speculative_tokens": 1}).method == "mtp"  # its MTP layers
    explicit = SpeculativeConfig.from_dict({"method": "dspark", "model": v4}, target_model_config=target)
    assert explicit.method == "dspark"  # DSpark accepts a target the mtp plugin recognises, when it carries stages


def test_deepseek_v41_is_dspark_and_refuses_mtp(tmp_path):
    v41 = _deepseek_v4_like(tmp_path / "v41", "deepseek_v41")
    assert SpeculativeConfig.from_dict({"model": v41}).method == "dspark"
    with pytest.raises(SpeculativeConfigError, match="'dspark' checkpoint"):
        SpeculativeConfig.from_dict({"method": "mtp", "model": v41, "num_speculative_tokens": 1})


@pytest.mark.parametrize("method", ["dflash", "dspark"])
def test_a_block_method_on_a_plain_llama_head_is_refused(method):
    """The yuhuili heads are plain Llama configs: nothing in them says block drafter."""
    with pytest.raises(SpeculativeConfigError, match="not a block drafter") as info:
        resolve("eagle3/EAGLE3-LLaMA3.1-Instruct-8B", method=method, num_speculative_tokens=2)
    assert "\n" not in str(info.value)
