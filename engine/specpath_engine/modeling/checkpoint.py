"""Hugging Face checkpoint files: ``config.json`` and ``model.safetensors`` (or a sharded index).

Only safetensors are read (never pickle). Every failure is a one-line error that names the file:
a missing file is a ``FileNotFoundError``, a malformed or mismatched one a ``CheckpointError``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Collection, Mapping

import torch

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
TOKENIZER_CONFIG_NAME = "tokenizer_config.json"

# Buffers some old exporters wrote into checkpoints; they are recomputed here.
IGNORED_SUFFIXES = (".rotary_emb.inv_freq",)


MAX_JSON_BYTES = 64 << 20
"""Largest config/index JSON read (real ones are kilobytes; shard indexes of huge models ~ MBs)."""


class CheckpointError(ValueError):
    """A checkpoint whose files exist but do not fit the model (bad JSON, keys, shapes)."""


def read_json(path: str | os.PathLike[str], what: str = "file") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    if path.stat().st_size > MAX_JSON_BYTES:
        raise CheckpointError(f"{path}: too large for a config file ({path.stat().st_size} bytes)")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"{path}: invalid JSON ({exc.msg} at line {exc.lineno})") from None
    except UnicodeDecodeError as exc:
        raise CheckpointError(f"{path}: not UTF-8 text (bad byte at offset {exc.start})") from None
    except (ValueError, RecursionError) as exc:  # integers past 4,300 digits, absurd nesting
        raise CheckpointError(f"{path}: invalid JSON ({_short_error(exc, 100)})") from None
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


FLOAT_DTYPES = frozenset({"F16", "BF16", "F32", "F64"})
"""safetensors dtypes weights may have (integer or bool weights are a broken export)."""
MAX_HEADER_BYTES = 100 << 20
"""safetensors' own limit on the JSON header."""


def _short_error(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 3] + "..."


def shard_path(directory: Path, name: object, index: Path) -> Path:
    """The file a shard index names, which must be a plain ``*.safetensors`` file name or a
    relative path inside the checkpoint (never absolute, never through ``..``)."""
    if not isinstance(name, str) or not name.endswith(".safetensors"):
        raise CheckpointError(f"{index}: weight_map entries must name .safetensors files, got {name!r:.80}")
    parts = Path(name).parts
    if Path(name).is_absolute() or ".." in parts or not parts or "\\" in name:
        raise CheckpointError(f"{index}: shard {name!r:.80} lies outside the checkpoint directory")
    return directory / name


def check_safetensors_header(file: Path, non_float: Collection[str] = ()) -> dict[str, Any]:
    """The parsed header of a safetensors file, after checking the file's framing: a regular
    file, a header that fits it, tensors inside the data area, floating-point dtypes for every
    tensor except those named in ``non_float`` (index maps and masks some heads carry)."""
    if not file.exists():
        raise FileNotFoundError(f"weights not found: {file}")
    if not file.is_file():
        raise CheckpointError(f"{file}: not a regular file")
    size = file.stat().st_size
    with open(file, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise CheckpointError(f"{file}: not a safetensors file (empty or truncated: {size} bytes)")
        length = int.from_bytes(head, "little")
        if length > min(MAX_HEADER_BYTES, size - 8):
            raise CheckpointError(f"{file}: not a safetensors file (header of {length} bytes in a {size}-byte file)")
        raw = fh.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise CheckpointError(f"{file}: not a safetensors file (unreadable header)") from None
    if not isinstance(header, dict):
        raise CheckpointError(f"{file}: not a safetensors file (header is not an object)")
    data_size = size - 8 - length
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(entry, dict) or not isinstance(entry.get("data_offsets"), list):
            raise CheckpointError(f"{file}: not a safetensors file (bad entry for {name!r:.60})")
        dtype = entry.get("dtype")
        if dtype not in FLOAT_DTYPES and name not in non_float:
            raise CheckpointError(
                f"{file}: tensor {name!r:.60} has dtype {dtype!r:.20}; weights must be floating point "
                f"({', '.join(sorted(FLOAT_DTYPES))})"
            )
        offsets = entry["data_offsets"]
        if len(offsets) != 2 or not all(isinstance(o, int) for o in offsets) or not 0 <= offsets[0] <= offsets[1] <= data_size:
            raise CheckpointError(f"{file}: truncated or corrupt (tensor {name!r:.60} lies outside the file)")
    return header


def read_safetensors(file: str | os.PathLike[str], non_float: Collection[str] = ()) -> dict[str, torch.Tensor]:
    """Every tensor of one safetensors file, checked (:func:`check_safetensors_header`) and
    finite; each problem is one line that names the file."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    file = Path(file)
    check_safetensors_header(file, non_float)
    try:
        tensors = load_file(str(file))
    except (SafetensorError, OSError, ValueError, RuntimeError) as exc:
        raise CheckpointError(f"{file}: not a readable safetensors file ({_short_error(exc)})") from None
    for name, tensor in tensors.items():
        if tensor.is_floating_point() and tensor.numel() and not bool(torch.isfinite(tensor).all()):
            raise CheckpointError(f"{file}: tensor {name!r:.60} has NaN or infinite values")
    return tensors


def _weight_files(path: str | os.PathLike[str]) -> list[Path]:
    """``model.safetensors``, or the shards its index file lists (each inside the checkpoint)."""
    directory = checkpoint_dir(path)
    single, index = directory / WEIGHTS_NAME, directory / WEIGHTS_INDEX_NAME
    if single.exists():
        files = [single]
    elif index.is_file():
        weight_map = read_json(index, WEIGHTS_INDEX_NAME).get("weight_map")
        if not isinstance(weight_map, dict):
            raise CheckpointError(f"{index}: no 'weight_map' object")
        files = [shard_path(directory, name, index) for name in sorted(set(map(str, weight_map.values())))]
    else:
        raise FileNotFoundError(f"no {WEIGHTS_NAME} or {WEIGHTS_INDEX_NAME} in {directory}")
    for file in files:
        if not file.exists():
            raise FileNotFoundError(f"weight shard not found: {file}")
    return files


def load_state_dict(path: str | os.PathLike[str]) -> dict[str, torch.Tensor]:
    """All tensors of ``model.safetensors`` or of the shards listed in its index file."""
    tensors: dict[str, torch.Tensor] = {}
    for file in _weight_files(path):
        tensors.update(read_safetensors(file))
    return tensors


def tensor_shapes(path: str | os.PathLike[str]) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor :func:`load_state_dict` would load, from the checked headers
    alone (no tensor data is read: what a writer checks after writing)."""
    shapes: dict[str, tuple[int, ...]] = {}
    for file in _weight_files(path):
        for name, entry in check_safetensors_header(file).items():
            if name != "__metadata__":
                shapes[name] = tuple(entry.get("shape", ()))
    return shapes


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
