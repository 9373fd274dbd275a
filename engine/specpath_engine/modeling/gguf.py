"""GGUF files (llama.cpp's format) read as Hugging Face checkpoints: config, weights, tokenizer.

A GGUF file holds metadata (architecture numbers, the tokenizer's vocabulary and merges, the chat
template) and tensors under llama.cpp's names, possibly block-quantised. This module turns it into
what the rest of specpath reads from an HF directory:

- :func:`read_gguf` -> :class:`GGUFCheckpoint` with the HF ``config.json`` dict, the
  ``tokenizer_config.json`` dict and the chat template (metadata only: the tokenizer is built by
  :meth:`GGUFCheckpoint.tokenizer` and the tensors are read by :meth:`GGUFCheckpoint.state_dict`
  when asked for);
- :meth:`GGUFCheckpoint.state_dict` -> HF-named torch tensors, dequantised (F32, F16, BF16, Q8_0,
  Q4_0, Q4_1 and every other type the ``gguf`` package dequantises) and cast to one dtype, with
  llama.cpp's Q/K row permutation undone for the llama architecture;
- :func:`convert_gguf` writes an HF checkpoint directory that ``transformers`` loads.

Supported architectures: ``llama`` and ``qwen3``. Anything else is a one-line ``CheckpointError``.
The container is parsed by :mod:`specpath_engine.modeling.gguf_file`; the ``gguf`` package is imported
only to dequantise tensors, torch only by the tensor functions.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from specpath_engine.modeling.checkpoint import CheckpointError, save_checkpoint
from specpath_engine.modeling.gguf_file import GGUFFile, GGUFFormatError, parse_gguf
from specpath_engine.modeling.gguf_tokenizer import build_tokenizer, tokenizer_config_dict

if TYPE_CHECKING:  # pragma: no cover
    import torch

GGUF_SUFFIX = ".gguf"
SUPPORTED_ARCHITECTURES = ("llama", "qwen3")
TOKENIZER_NAME = "tokenizer.json"

# llama.cpp tensor name (after "blk.N.") -> HF name (after "model.layers.N.")
_LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_TENSORS = {
    "token_embd": "model.embed_tokens",
    "output_norm": "model.norm",
    "output": "lm_head",
}
_LAYER_NAME = re.compile(r"^blk\.(\d+)\.([a-z_]+)\.(weight|bias)$")
_GLOBAL_NAME = re.compile(r"^([a-z_]+)\.(weight|bias)$")


def is_gguf(path: str | os.PathLike[str]) -> bool:
    """True for an existing file whose name ends in ``.gguf`` (the one test every loader uses)."""
    path = Path(path)
    return path.suffix.lower() == GGUF_SUFFIX and path.is_file()


def hf_tensor_name(gguf_name: str) -> str:
    """The HF parameter name of a llama.cpp tensor name; CheckpointError for an unknown one."""
    match = _LAYER_NAME.match(gguf_name)
    if match and match.group(2) in _LAYER_TENSORS:
        layer, part, kind = match.groups()
        return f"model.layers.{layer}.{_LAYER_TENSORS[part]}.{kind}"
    match = _GLOBAL_NAME.match(gguf_name)
    if match and match.group(1) in _GLOBAL_TENSORS:
        return f"{_GLOBAL_TENSORS[match.group(1)]}.{match.group(2)}"
    raise CheckpointError(f"GGUF tensor {gguf_name!r} has no Hugging Face counterpart in this model")


def unpermute_rows(weight: Any, n_heads: int) -> Any:
    """Undo llama.cpp's Q/K row order (it interleaves the two RoPE halves of each head).

    ``convert_hf_to_gguf`` reorders the rows of each head from ``[half0, half1]`` to pairs
    ``(x0, x_{d/2}), (x1, x_{d/2+1}), ...`` for its rotate-adjacent RoPE. Works on numpy arrays
    and torch tensors of shape [n_heads * head_dim, ...] (weights and biases).
    """
    rows = weight.shape[0]
    if rows % (2 * n_heads):
        raise CheckpointError(f"cannot un-permute {rows} rows into {n_heads} heads")
    rest = tuple(weight.shape[1:])
    out = weight.reshape(n_heads, rows // n_heads // 2, 2, *rest).swapaxes(1, 2)
    return out.reshape(rows, *rest)


@attrs.frozen(kw_only=True)
class GGUFCheckpoint:
    """What a GGUF file holds, in Hugging Face terms (see the module docstring)."""

    path: Path
    architecture: str
    #: the HF ``config.json`` dict (``LlamaForCausalLM`` or ``Qwen3ForCausalLM``)
    config: dict[str, Any]
    #: ``tokenizer_config.json`` (special tokens, chat template, tokenizer class)
    tokenizer_config: dict[str, Any]
    chat_template: str | None
    file: GGUFFile = attrs.field(repr=False, eq=False)

    @property
    def tensor_names(self) -> list[str]:
        return [t.name for t in self.file.tensors]

    def tensor_types(self) -> dict[str, str]:
        """llama.cpp tensor name -> quantisation type name (``Q4_1``, ``F32``, ...)."""
        from gguf import GGMLQuantizationType

        return {t.name: GGMLQuantizationType(t.type_id).name for t in self.file.tensors}

    def tokenizer(self) -> Any:
        """The ``tokenizers.Tokenizer`` of the vocabulary metadata (built on demand: ~1 s for 49k)."""
        meta = self.file.metadata
        if "tokenizer.ggml.tokens" not in meta:
            raise CheckpointError(f"{self.path}: GGUF file has no tokenizer vocabulary")
        try:
            return build_tokenizer(
                model=meta.get("tokenizer.ggml.model"),
                pre=meta.get("tokenizer.ggml.pre"),
                tokens=meta["tokenizer.ggml.tokens"],
                token_types=meta.get("tokenizer.ggml.token_type") or [],
                merges=meta.get("tokenizer.ggml.merges") or [],
            )
        except ValueError as exc:
            raise CheckpointError(f"{self.path}: {exc}") from None

    def tokenizer_json(self) -> dict[str, Any]:
        """:meth:`tokenizer` as the ``tokenizer.json`` dict."""
        return json.loads(self.tokenizer().to_str())

    def state_dict(self, dtype: "torch.dtype | None" = None) -> dict[str, "torch.Tensor"]:
        """HF-named tensors, dequantised to float32 and cast to ``dtype`` one at a time.

        Casting tensor by tensor keeps the peak memory at one float32 copy of the largest
        tensor above the result. Q and K rows are put back in HF order for ``llama``.
        """
        import numpy as np
        import torch
        from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, quants

        dtype = torch.float32 if dtype is None else dtype
        cfg = self.config
        permute = self.architecture == "llama"
        data = np.memmap(self.path, dtype=np.uint8, mode="r")
        out: dict[str, torch.Tensor] = {}
        for tensor in self.file.tensors:
            name = hf_tensor_name(tensor.name)
            try:
                qtype = GGMLQuantizationType(tensor.type_id)
                block, block_bytes = GGML_QUANT_SIZES[qtype]
            except (ValueError, KeyError):
                raise CheckpointError(f"{self.path}: tensor {tensor.name} has unknown type {tensor.type_id}") from None
            cols = tensor.shape[-1]
            rows = int(np.prod(tensor.shape[:-1], dtype=np.int64))
            if cols % block:
                raise CheckpointError(f"{self.path}: tensor {tensor.name} rows are not whole {qtype.name} blocks")
            row_bytes = cols // block * block_bytes
            start = self.file.data_offset + tensor.offset
            if start + rows * row_bytes > data.size:
                raise CheckpointError(f"{self.path}: tensor {tensor.name} runs past the end of the file")
            raw = data[start : start + rows * row_bytes].reshape(rows, row_bytes)
            try:
                values = quants.dequantize(raw, qtype)
            except NotImplementedError:
                raise CheckpointError(
                    f"{self.path}: tensor {tensor.name} has type {qtype.name}, which the gguf package "
                    f"cannot dequantise"
                ) from None
            values = np.array(values, dtype=np.float32).reshape(tensor.shape)  # a writable copy of the map
            if permute and name.endswith(("q_proj.weight", "q_proj.bias")):
                values = unpermute_rows(values, cfg["num_attention_heads"])
            elif permute and name.endswith(("k_proj.weight", "k_proj.bias")):
                values = unpermute_rows(values, cfg["num_key_value_heads"])
            out[name] = torch.from_numpy(np.ascontiguousarray(values)).to(dtype)
        return out


def _hf_config(path: Path, meta: Mapping[str, Any], arch: str, tensor_names: set[str]) -> dict[str, Any]:
    def get(key: str, default: Any = None) -> Any:
        return meta.get(f"{arch}.{key}", default)

    required = {
        "num_hidden_layers": "block_count",
        "hidden_size": "embedding_length",
        "intermediate_size": "feed_forward_length",
        "num_attention_heads": "attention.head_count",
    }
    values: dict[str, Any] = {}
    for hf_key, key in required.items():
        value = get(key)
        if value is None:
            raise CheckpointError(f"{path}: GGUF metadata has no {arch}.{key}")
        values[hf_key] = int(value)
    heads = values["num_attention_heads"]
    head_dim = int(get("attention.key_length") or get("rope.dimension_count") or values["hidden_size"] // heads)
    tokens = meta.get("tokenizer.ggml.tokens")
    vocab = get("vocab_size") or (len(tokens) if tokens is not None else None)
    if vocab is None:
        raise CheckpointError(f"{path}: GGUF metadata gives no vocabulary size")
    if "rope_freqs.weight" in tensor_names:
        raise CheckpointError(f"{path}: per-frequency RoPE factors (rope_freqs) are not supported")
    scaling_type = get("rope.scaling.type")
    rope_scaling = None
    if scaling_type not in (None, "none"):
        if scaling_type not in ("linear", "yarn"):
            raise CheckpointError(f"{path}: rope scaling type {scaling_type!r} is not supported")
        rope_scaling = {"rope_type": scaling_type, "factor": float(get("rope.scaling.factor", 1.0))}
        original = get("rope.scaling.original_context_length")
        if original is not None:
            rope_scaling["original_max_position_embeddings"] = int(original)
    eos = meta.get("tokenizer.ggml.eos_token_id")
    config: dict[str, Any] = {
        "architectures": ["Qwen3ForCausalLM" if arch == "qwen3" else "LlamaForCausalLM"],
        "model_type": arch,
        "vocab_size": int(vocab),
        **values,
        "num_key_value_heads": int(get("attention.head_count_kv") or heads),
        "head_dim": head_dim,
        "max_position_embeddings": int(get("context_length", 2048)),
        # float32 metadata (9.99999975e-06): round to the float it stands for, as HF configs say
        "rms_norm_eps": float(f"{float(get('attention.layer_norm_rms_epsilon', 1e-6)):.6g}"),
        "rope_theta": float(get("rope.freq_base", 10000.0)),
        "rope_scaling": rope_scaling,
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "attention_bias": "blk.0.attn_q.bias" in tensor_names,
        "mlp_bias": "blk.0.ffn_up.bias" in tensor_names,
        "hidden_act": "silu",
        "bos_token_id": meta.get("tokenizer.ggml.bos_token_id"),
        "eos_token_id": None if eos is None else int(eos),
        "pad_token_id": meta.get("tokenizer.ggml.padding_token_id"),
        # no torch_dtype: the weights are quantised; convert_gguf records the dtype it writes
    }
    name = meta.get("general.name")
    if name:
        config["_name_or_path"] = str(name)
    return config


def read_gguf(path: str | os.PathLike[str]) -> GGUFCheckpoint:
    """Parse a GGUF file's metadata (tensors are read by ``state_dict``); one-line errors for bad files.

    Parsed once per file version: one ``LLM()`` reads the metadata for its config, tokenizer and
    weights (~0.4 s each for SmolLM2's 49k-token vocabulary)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GGUF file not found: {path}")
    stat = path.stat()
    parsed = _read_gguf(path.resolve(), stat.st_size, stat.st_mtime_ns)
    # Each caller gets its own dicts: the parse is shared, not what callers do with it.
    return attrs.evolve(parsed, path=path, config=copy.deepcopy(parsed.config),
                        tokenizer_config=copy.deepcopy(parsed.tokenizer_config))


@functools.lru_cache(maxsize=8)
def _read_gguf(path: Path, size: int, mtime_ns: int) -> GGUFCheckpoint:
    try:
        file = parse_gguf(path)
    except (GGUFFormatError, OSError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{path}: not a readable GGUF file ({exc})") from None
    meta = file.metadata
    arch = meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise CheckpointError(
            f"{path}: GGUF architecture {arch!r} is not supported; allowed: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    names = {t.name for t in file.tensors}
    for name in names:
        hf_tensor_name(name)  # fail now, not halfway through loading
    config = _hf_config(path, meta, arch, names)
    template = meta.get("tokenizer.chat_template")
    tokens = meta.get("tokenizer.ggml.tokens") or []
    special = {
        role: meta.get(f"tokenizer.ggml.{key}_token_id")
        for role, key in (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding"))
    }
    tokenizer_config = tokenizer_config_dict(
        tokens=tokens,
        special_ids=special,
        add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        chat_template=template,
        max_length=config["max_position_embeddings"],
    )
    return GGUFCheckpoint(
        path=path, architecture=arch, config=config, tokenizer_config=tokenizer_config, chat_template=template, file=file
    )


def write_tokenizer_files(checkpoint: GGUFCheckpoint, out_dir: str | os.PathLike[str]) -> None:
    """``tokenizer.json`` + ``tokenizer_config.json`` of a GGUF checkpoint into ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    if "tokenizer.ggml.tokens" in checkpoint.file.metadata:
        checkpoint.tokenizer().save(str(out / TOKENIZER_NAME))
    (out / "tokenizer_config.json").write_text(
        json.dumps(checkpoint.tokenizer_config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )


def convert_gguf(
    gguf_path: str | os.PathLike[str], out_dir: str | os.PathLike[str], *, dtype: "torch.dtype | None" = None
) -> Path:
    """Write an HF checkpoint (config.json, model.safetensors, tokenizer files) from a GGUF file."""
    import torch

    dtype = torch.float32 if dtype is None else dtype
    checkpoint = read_gguf(gguf_path)
    tensors = checkpoint.state_dict(dtype)
    config = {**checkpoint.config, "torch_dtype": str(dtype).removeprefix("torch.")}
    out = save_checkpoint(
        out_dir, config=config, state_dict=tensors, metadata={"source": f"gguf:{Path(gguf_path).name}"}
    )
    write_tokenizer_files(checkpoint, out)
    return out
