"""Block-drafter ``config.json`` files as the ecosystem publishes them.

Three formats reach specpath, and each keeps the same facts in different places:

- **z-lab / SpecForge**: architectures ``DFlashDraftModel`` (or ``DSparkDraftModel``), a
  nested ``dflash_config.{target_layer_ids, mask_token_id, block_size}`` (``block_size`` often
  top-level), DSpark marked by ``dflash_config.projector_type: "dspark"``; a SpecForge config
  may give only ``num_target_layers`` (the taps are then the DFlash reference's spacing);
- **speculators** (``speculators_model_type`` ``dflash``/``dspark``): top-level
  ``aux_hidden_state_layer_ids`` in vLLM's convention (the state *entering* layer i, i.e. one
  more than the DFlash index), ``mask_token_id``, ``block_size``, ``sample_from_anchor``;
- **specpath's own**: top-level ``target_layer_ids``, ``anchor_sampling``.

Layer ids returned here use the DFlash convention (the *output* of layer i, HF
``hidden_states[i + 1]``), which is what the drafter reads; vLLM adds one to name the same
states (``eagle_aux_hidden_state_layer_ids``). Pure functions: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

DSPARK_ARCHITECTURES = ("DSparkDraftModel", "Qwen3DSparkModel", "Qwen3OmniDSparkModel", "Gemma4DSparkModel",
                        "K3DSparkModel", "DSparkV41DraftModel")
"""Architectures of published DSpark drafters (SpecForge, vLLM, speculators exports)."""


def _nested(config: Mapping[str, Any]) -> Mapping[str, Any]:
    value = config.get("dflash_config")
    return value if isinstance(value, Mapping) else {}


def _first(config: Mapping[str, Any], key: str) -> Any:
    nested = _nested(config)
    return nested[key] if nested.get(key) is not None else config.get(key)


def _int_list(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, Sequence) and not isinstance(value, str) and value and all(type(v) is int for v in value):
        return tuple(value)
    return None


def block_kind(config: Mapping[str, Any]) -> str | None:
    """"dspark", "dflash" or None: what a draft ``config.json`` says it is (architectures,
    ``model_type``, ``speculators_model_type``, ``dflash_config``); no path guessing."""
    names = [str(config.get("model_type", "")).lower(), str(config.get("speculators_model_type", "")).lower()]
    archs = [str(a) for a in config.get("architectures") or () if isinstance(a, str)]
    nested = _nested(config)
    if (any("dspark" in n for n in names) or any(a in DSPARK_ARCHITECTURES or "dspark" in a.lower() for a in archs)
            or str(nested.get("projector_type", "")).lower() == "dspark"):
        return "dspark"
    if any("dflash" in n for n in names) or any("dflash" in a.lower() for a in archs) or nested:
        return "dflash"
    if config.get("model_type") == "deepseek_v41":
        return "dspark"  # V4.1 ships DSpark stages and no classic MTP (vLLM refuses mtp on it)
    return None


def target_layer_ids(config: Mapping[str, Any], num_taps_default: int | None = None) -> tuple[int, ...] | None:
    """The drafter's taps in the DFlash convention, from wherever the format keeps them; from
    ``num_target_layers`` and the drafter's depth (one tap per draft layer, as SGLang does)
    when only those are given; None when nothing says."""
    ids = _int_list(_first(config, "target_layer_ids"))
    if ids is not None:
        return ids
    ids = _int_list(config.get("dspark_target_layer_ids"))
    if ids is not None:
        return ids
    aux = _int_list(config.get("aux_hidden_state_layer_ids")) or _int_list(config.get("eagle_aux_hidden_state_layer_ids"))
    if aux is not None:
        return tuple(i - 1 for i in aux)  # vLLM's "entering layer i" is DFlash's "output of i - 1"
    n = config.get("num_target_layers") or config.get("target_num_hidden_layers")
    taps = config.get("num_hidden_layers") if num_taps_default is None else num_taps_default
    if type(n) is int and type(taps) is int and n > 0 and taps > 0:
        from specpath_drafting.block.config import build_target_layer_ids

        return build_target_layer_ids(n, taps)
    return None


def mask_token_id(config: Mapping[str, Any]) -> int | None:
    """The mask token: ``dflash_config.mask_token_id``, ``mask_token_id``, then the parallel-
    drafting keys vLLM also reads (``dspark_noise_token_id``, ``pard_token``, ``ptd_token_id``)."""
    for value in (_nested(config).get("mask_token_id"), config.get("mask_token_id"),
                  config.get("dspark_noise_token_id"), config.get("pard_token"), config.get("ptd_token_id")):
        if type(value) is int:
            return value
    return None


def block_size(config: Mapping[str, Any]) -> int | None:
    """The trained block: ``block_size`` (top-level or nested), or a DeepSeek-V4-style target's
    ``dspark_block_size``."""
    for value in (_first(config, "block_size"), config.get("dspark_block_size")):
        if type(value) is int and value > 0:
            return value
    return None


def recorded_layout(config: Mapping[str, Any]) -> bool | None:
    """The recorded block layout (True: anchor-first): specpath's ``anchor_sampling``, else the
    ecosystem's ``sample_from_anchor`` (top-level or nested); None when neither is given."""
    for value in (config.get("anchor_sampling"), _nested(config).get("sample_from_anchor"),
                  config.get("sample_from_anchor")):
        if isinstance(value, bool):
            return value
    return None


def path_names(config: Mapping[str, Any], path: Any, method: str) -> bool:
    """vLLM's path hint for a block drafter: ``method`` in the checkpoint's path, only for a
    checkpoint whose ``config.json`` says nothing about block drafting (a plugin asks this
    after every plugin's config evidence, in a ``trylast`` detection hook)."""
    return block_kind(config) is None and method in str(path or "").lower()
