"""Hugging Face checkpoint files: ``config.json`` and ``model.safetensors`` (or a sharded index).

Only safetensors are read (never pickle). Every failure is a one-line error that names the file:
a missing file is a ``FileNotFoundError``, a malformed or mismatched one a ``CheckpointError``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping

import torch

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"

# Buffers some old exporters wrote into checkpoints; they are recomputed here.
IGNORED_SUFFIXES = (".rotary_emb.inv_freq",)


class CheckpointError(ValueError):
    """A checkpoint whose files exist but do not fit the model (bad JSON, keys, shapes)."""


def read_json(path: str | os.PathLike[str], what: str = "file") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: expected a JSON object, got {type(data).__name__}")
    return data


def checkpoint_dir(path: str | os.PathLike[str]) -> Path:
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"checkpoint directory not found: {path}")
    return path


def read_config(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The raw ``config.json`` dict of a checkpoint directory."""
    return read_json(checkpoint_dir(path) / CONFIG_NAME, "config.json")


def load_state_dict(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """All tensors of ``model.safetensors`` or of the shards listed in its index file."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    directory = checkpoint_dir(path)
    single, index = directory / WEIGHTS_NAME, directory / WEIGHTS_INDEX_NAME
    if single.is_file():
        files = [single]
    elif index.is_file():
        weight_map = read_json(index, WEIGHTS_INDEX_NAME).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index}: no 'weight_map' object")
        files = [directory / name for name in sorted(set(weight_map.values()))]
    else:
        raise FileNotFoundError(f"no {WEIGHTS_NAME} or {WEIGHTS_INDEX_NAME} in {directory}")
    tensors: dict[str, torch.Tensor] = {}
    for file in files:
        if not file.is_file():
            raise FileNotFoundError(f"weight shard not found: {file}")
        try:
            tensors.update(load_file(str(file)))
        except (SafetensorError, OSError) as exc:
            raise CheckpointError(f"{file}: not a readable safetensors file ({exc})") from None
    return tensors


def check_state_dict(
    expected: Mapping[str, torch.Size],
    found: Mapping[str, torch.Tensor],
    *,
    optional: frozenset[str] = frozenset(),
    source: str = "checkpoint",
) -> dict[str, torch.Tensor]:
    """Keep the tensors the model expects; raise one line for missing, unexpected or misshaped ones."""
    found = {k: v for k, v in found.items() if not k.endswith(IGNORED_SUFFIXES)}
    missing = sorted(set(expected) - set(found) - optional)
    if missing:
        raise CheckpointError(f"{source}: missing {len(missing)} tensor(s), e.g. {', '.join(missing[:3])}")
    unexpected = sorted(set(found) - set(expected))
    if unexpected:
        raise CheckpointError(
            f"{source}: {len(unexpected)} unexpected tensor(s), e.g. {', '.join(unexpected[:3])}"
        )
    for name, tensor in found.items():
        if tuple(tensor.shape) != tuple(expected[name]):
            raise CheckpointError(
                f"{source}: {name} has shape {tuple(tensor.shape)}, config expects {tuple(expected[name])}"
            )
    return dict(found)


def save_checkpoint(
    path: str | os.PathLike[str],
    *,
    config: Mapping[str, Any],
    state_dict: Mapping[str, torch.Tensor],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Write ``config.json`` + ``model.safetensors`` atomically (readers never see half a file)."""
    from safetensors.torch import save_file

    directory = Path(path)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().contiguous().cpu() for k, v in state_dict.items()}
    tmp_weights = directory / (WEIGHTS_NAME + ".tmp")
    save_file(tensors, str(tmp_weights), metadata={"format": "pt", **(metadata or {})})
    tmp_config = directory / (CONFIG_NAME + ".tmp")
    tmp_config.write_text(json.dumps(dict(config), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp_weights, directory / WEIGHTS_NAME)
    os.replace(tmp_config, directory / CONFIG_NAME)
    return directory
