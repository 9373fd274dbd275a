"""Which checkpoints carry MTP modules, read from their own ``config.json``.

Published MTP drafts are usually the *target's* checkpoint: DeepSeek-V3, GLM-4.5, MiMo,
Qwen3-Next, LongCat-Flash, ERNIE-4.5-MoE, Nemotron-H and others ship their MTP layers beside
the decoder and say so with a layer-count key. vLLM renames such a target's ``model_type`` to
its ``*_mtp`` type before matching (``SpeculativeConfig.hf_config_override``); this module is
that table, so a checkpoint is recognised the same way here, with no path guessing.

Pure functions over plain dicts: no torch, no plugin imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, get_args

from specpath.methods import MTPModelTypes

MTP_MODEL_TYPES = frozenset(get_args(MTPModelTypes))
"""``model_type`` values of MTP checkpoints: ``mtp`` and every ``*_mtp`` alias."""

TARGET_MODEL_TYPES: Mapping[str, str] = {
    "deepseek_v3": "deepseek_mtp",
    "deepseek_v32": "deepseek_mtp",
    "deepseek_v4": "deepseek_mtp",
    "glm_moe_dsa": "deepseek_mtp",
    "glm4_moe": "glm4_moe_mtp",
    "glm4_moe_lite": "glm4_moe_lite_mtp",
    "mimo": "mimo_mtp",
    "mimo_v2": "mimo_v2_mtp",
    "ernie4_5_moe": "ernie_mtp",
    "nemotron_h": "nemotron_h_mtp",
    "nemotron_h_puzzle": "nemotron_h_mtp",
    "qwen3_next": "qwen3_next_mtp",
    "qwen3_5": "qwen3_5_mtp",
    "qwen3_5_moe": "qwen3_5_mtp",
    "qwen3_5_text": "qwen3_5_mtp",
    "qwen3_5_moe_text": "qwen3_5_mtp",
    "longcat_flash": "longcat_flash_mtp",
    "longcat_flash_ngram": "longcat_flash_mtp",
    "exaone_moe": "exaone_moe_mtp",
    "exaone4_5": "exaone4_5_mtp",
    "pangu_ultra_moe": "pangu_ultra_moe_mtp",
    "step3p5": "step3p5_mtp",
    "kimi_k3": "kimi_k3_mtp",
    "hy_v3": "hy_v3_mtp",
    "hy_v4": "hy_v4_mtp",
    "bailing_hybrid": "bailing_hybrid_mtp",
    "dots3_note": "dots3_note_mtp",
    "glm5_next": "glm5_next_mtp",
    "gemma4_assistant": "gemma4_mtp",
    "minimax_m3_vl": "minimax_m3_mtp",
}
"""Target ``model_type`` -> the MTP type vLLM renames it to (its ``hf_config_override``)."""

TARGET_ARCHITECTURES: Mapping[str, str] = {
    "MiMoForCausalLM": "mimo_mtp",
    "MiMoV2ForCausalLM": "mimo_v2_mtp",
    "MiMoV2FlashForCausalLM": "mimo_v2_mtp",
    "Glm4MoeForCausalLM": "glm4_moe_mtp",
    "Glm4MoeLiteForCausalLM": "glm4_moe_lite_mtp",
    "GlmOcrForConditionalGeneration": "glm_ocr_mtp",
    "Step3p5ForCausalLM": "step3p5_mtp",
    "BailingMoeV2_5ForCausalLM": "bailing_hybrid_mtp",
    "BailingMoeV3ForCausalLM": "bailing_hybrid_v3_mtp",
}
"""Target architectures vLLM maps to an MTP type whatever their ``model_type``."""

LAYER_COUNT_KEYS = ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_modules", "n_predict")
"""Where checkpoints write their MTP layer count, top-level or under ``text_config`` /
``mtp_config`` (vLLM reads them in this spirit; a type with none given means one layer)."""


def _count(config: Mapping[str, Any]) -> int | None:
    for holder in (config, config.get("text_config"), config.get("mtp_config")):
        if not isinstance(holder, Mapping):
            continue
        for key in LAYER_COUNT_KEYS:
            value = holder.get(key)
            if type(value) is int:
                return value
    return None


def mtp_type(config: Mapping[str, Any]) -> str | None:
    """The ``*_mtp`` type this checkpoint is, as vLLM would rename it, or None. A target type
    whose layer count is given as 0 carries no MTP layers (None)."""
    model_type = config.get("model_type")
    if isinstance(model_type, str) and model_type in MTP_MODEL_TYPES:
        return model_type
    archs = [a for a in config.get("architectures") or () if isinstance(a, str)]
    found = next((TARGET_ARCHITECTURES[a] for a in archs if a in TARGET_ARCHITECTURES), None)
    if found is None and isinstance(model_type, str):
        found = TARGET_MODEL_TYPES.get(model_type)
    if found is None:
        return None
    count = _count(config)
    if count is not None and count < 1:
        return None
    if found == "nemotron_h_mtp" and count is None:
        return None  # vLLM: a Nemotron-H is an MTP checkpoint only with num_nextn_predict_layers > 0
    return found


def mtp_layer_count(config: Mapping[str, Any]) -> int:
    """MTP layers an MTP checkpoint declares (1 where its type gives none: vLLM's default);
    0 for a checkpoint that is not an MTP one."""
    if mtp_type(config) is None:
        return 0
    count = _count(config)
    return 1 if count is None else count
