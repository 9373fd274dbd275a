"""Drafter checkpoints (heads, MTP-free block drafters): ``config.json`` + ``model.safetensors``
in the Hugging Face layout, no pickle, with one-line errors that name the file.

The RoPE tables (``rotary.*`` buffers) are recomputed, never stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import torch
from torch import nn

Config = TypeVar("Config")
Module = TypeVar("Module", bound=nn.Module)

TEMPERATURE_SCALE_KEY = "specpath_temperature_scale"
"""A drafter's temperature calibration in its ``config.json``: a sampled request at temperature T
drafts at ``T * scale`` (a head trained to imitate the target is softer than it: its races with
the target's sample agree most below 1; fitted by ``python -m specpath_train.calibrate``)."""


def recorded_temperature_scale(path: str | Path | None) -> float:
    """The checkpoint's :data:`TEMPERATURE_SCALE_KEY` (1.0 without one, or without a directory);
    a one-line error where it is not a positive finite number."""
    import math

    config_path = Path(path) / "config.json" if path else None
    if config_path is None or not config_path.is_file():
        return 1.0
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return 1.0  # the checkpoint's own loader reports an unreadable config
    value = raw.get(TEMPERATURE_SCALE_KEY, 1.0) if isinstance(raw, Mapping) else 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{config_path}: {TEMPERATURE_SCALE_KEY} must be a positive number, got {value!r}")
    return float(value)


def read_drafter_config(path: str | Path, parse: Callable[[Mapping[str, Any]], Config], what: str) -> Config:
    """``parse(config.json)``; ``what`` names the kind of checkpoint in errors."""
    config_path = Path(path) / "config.json"
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{config_path}: cannot read the {what}'s config: {exc}") from None
    if isinstance(raw, Mapping):
        from specpath_engine.modeling.memory import require_config_memory

        require_config_memory(raw, str(config_path), f"the {what}")  # absurd sizes, before any allocation
    try:
        return parse(raw)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{config_path}: not a {what} config (missing {exc})") from None
    except ValueError as exc:  # a field the architecture cannot honour (hidden_act, rms_norm_eps, ...)
        from specpath.errors import SpeculativeConfigError
        from specpath_engine.modeling.checkpoint import CheckpointError

        if isinstance(exc, SpeculativeConfigError) or str(config_path) in str(exc):
            raise
        raise CheckpointError(f"{config_path}: {' '.join(str(exc).split())}") from None


def _stored_state(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in module.state_dict().items() if not k.startswith("rotary.")}


def save_drafter_checkpoint(module: nn.Module, path: str | Path, *, extra_config: dict | None = None,
                            dtype: torch.dtype | None = None) -> Path:
    """Write ``module.config.to_dict()`` (+ ``extra_config``) and the weights; ``dtype`` casts the
    floating-point ones (shipped drafters are float16: half the bytes, same drafts in practice)."""
    from specpath_engine.modeling.checkpoint import save_checkpoint

    config = {**module.config.to_dict(), **(extra_config or {})}
    state = _stored_state(module)
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        config["torch_dtype"] = str(dtype).removeprefix("torch.")
    return save_checkpoint(path, config=config, state_dict=state)


def load_drafter_weights(module: Module, path: str | Path, what: str, *,
                         rename: Callable[[str], str | None] | None = None,
                         complete: Callable[[dict[str, torch.Tensor]], None] | None = None) -> Module:
    """Load ``model.safetensors`` into ``module`` in its dtype; every tensor must be present with
    its shape (``what`` names the kind of drafter in errors). ``rename`` maps a published
    layout's names onto the module's (None drops a tensor); ``complete`` adds tensors a layout
    leaves out and the module derives (EAGLE-3's ``t2d`` from ``d2t``)."""
    from specpath_engine.modeling.checkpoint import read_safetensors

    weights = Path(path) / "model.safetensors"
    non_float = {k for k, v in module.state_dict().items() if not v.is_floating_point()}  # e.g. EAGLE-3's vocab maps
    if rename is not None:  # a published layout may prefix its vocabulary maps with "model."
        non_float |= {"model." + k for k in non_float}
    tensors = read_safetensors(weights, non_float)  # framing, dtypes and finite values checked, one line each
    if rename is not None:
        tensors = {new: v for k, v in tensors.items() if (new := rename(k)) is not None}
    if complete is not None:
        complete(tensors)
    expected = {k: v.shape for k, v in _stored_state(module).items()}
    missing, extra = sorted(set(expected) - set(tensors)), sorted(set(tensors) - set(expected))
    if missing or extra:
        raise ValueError(f"{weights}: tensors do not match a {what} (missing {missing[:4]}, unexpected {extra[:4]})")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != tuple(shape):
            raise ValueError(f"{weights}: {name} has shape {tuple(tensors[name].shape)}, expected {tuple(shape)}")
    dtype = module.dtype
    module.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}, strict=False)
    return module
