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
import math
import os
import re
import struct
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from specpath_engine.modeling.checkpoint import CheckpointError, save_checkpoint
from specpath_engine.modeling.gguf_checks import Metadata, check_special_ids, check_tensors, check_tokenizer
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
    match = _LAYER_NAME.fullmatch(gguf_name)
    if match and match.group(2) in _LAYER_TENSORS:
        layer, part, kind = match.groups()
        return f"model.layers.{layer}.{_LAYER_TENSORS[part]}.{kind}"
    match = _GLOBAL_NAME.fullmatch(gguf_name)
    if match and match.group(1) in _GLOBAL_TENSORS:
        return f"{_GLOBAL_TENSORS[match.group(1)]}.{match.group(2)}"
    raise CheckpointError(f"GGUF tensor {gguf_name!r:.80} has no Hugging Face counterpart in this model")


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
        try:  # read_gguf checked the fields' types and merges; the model/pre names are checked here
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
        from gguf import GGMLQuantizationType, quants

        dtype = torch.float32 if dtype is None else dtype
        cfg = self.config
        permute = self.architecture == "llama"
        limit = torch.finfo(dtype).max  # a float32 value above it would become inf in dtype
        data = np.memmap(self.path, dtype=np.uint8, mode="r")
        out: dict[str, torch.Tensor] = {}
        for tensor in self.file.tensors:  # types, shapes and byte ranges were checked by read_gguf
            name = hf_tensor_name(tensor.name)
            qtype = GGMLQuantizationType(tensor.type_id)
            rows = math.prod(tensor.shape[:-1])
            start = self.file.data_offset + tensor.offset
            raw = data[start : start + tensor.nbytes].reshape(rows, tensor.nbytes // rows)  # [rows, row_bytes]
            try:
                values = quants.dequantize(raw, qtype)
            except NotImplementedError:
                raise CheckpointError(
                    f"{self.path}: tensor {tensor.name} has type {qtype.name}, which the gguf package "
                    f"cannot dequantise"
                ) from None
            values = np.array(values, dtype=np.float32).reshape(tensor.shape)  # a writable copy of the map
            peak = float(np.abs(values).max()) if values.size else 0.0  # numpy: one pass, one thread
            if not peak <= limit:  # NaN block scales would generate token 0 forever; inf in dtype too
                problem = "has NaN or infinite values" if not math.isfinite(peak) else f"overflows {str(dtype)[6:]}"
                raise CheckpointError(f"{self.path}: GGUF tensor {tensor.name} {problem}")
            if permute and name.endswith(("q_proj.weight", "q_proj.bias")):
                values = unpermute_rows(values, cfg["num_attention_heads"])
            elif permute and name.endswith(("k_proj.weight", "k_proj.bias")):
                values = unpermute_rows(values, cfg["num_key_value_heads"])
            out[name] = torch.from_numpy(np.ascontiguousarray(values)).to(dtype)
        return out


def _hf_config(md: Metadata, arch: str, tensor_names: set[str]) -> dict[str, Any]:
    path = md.path

    def key(name: str) -> str:
        return f"{arch}.{name}"

    values = {
        "num_hidden_layers": md.int(key("block_count")),
        "hidden_size": md.int(key("embedding_length")),
        "intermediate_size": md.int(key("feed_forward_length")),
        "num_attention_heads": md.int(key("attention.head_count")),
    }
    heads = values["num_attention_heads"]
    kv_heads = md.int(key("attention.head_count_kv"), heads)
    if heads % kv_heads:
        raise md.error(key("attention.head_count_kv"), f"{kv_heads} does not divide the {heads} attention heads")
    head_dim = md.int(key("attention.key_length"), None) or md.int(key("rope.dimension_count"), None)
    if head_dim is None:
        if values["hidden_size"] % heads:
            raise md.error(key("attention.head_count"), f"{heads} heads do not divide the width {values['hidden_size']}")
        head_dim = values["hidden_size"] // heads
    tokens = md.meta.get("tokenizer.ggml.tokens")
    vocab = md.int(key("vocab_size"), None) or (len(tokens) if isinstance(tokens, list) and tokens else None)
    if vocab is None:
        raise CheckpointError(f"{path}: GGUF metadata gives no vocabulary size ({key('vocab_size')} or tokenizer.ggml.tokens)")
    if "rope_freqs.weight" in tensor_names:
        raise CheckpointError(f"{path}: per-frequency RoPE factors (rope_freqs) are not supported")
    scaling_type = md.str(key("rope.scaling.type"))
    rope_scaling = None
    if scaling_type not in (None, "none"):
        if scaling_type not in ("linear", "yarn"):
            raise md.error(key("rope.scaling.type"), f"{scaling_type!r:.40} is not supported; allowed: linear, yarn")
        rope_scaling = {"rope_type": scaling_type, "factor": md.float(key("rope.scaling.factor"), 1.0)}
        original = md.int(key("rope.scaling.original_context_length"), None)
        if original is not None:
            rope_scaling["original_max_position_embeddings"] = original
    special = check_special_ids(md, vocab)
    config: dict[str, Any] = {
        "architectures": ["Qwen3ForCausalLM" if arch == "qwen3" else "LlamaForCausalLM"],
        "model_type": arch,
        "vocab_size": vocab,
        **values,
        "num_key_value_heads": kv_heads,
        "head_dim": head_dim,
        "max_position_embeddings": md.int(key("context_length"), 2048),
        # float32 metadata (9.99999975e-06): round to the float it stands for, as HF configs say
        "rms_norm_eps": float(f"{md.float(key('attention.layer_norm_rms_epsilon'), 1e-6, high=1.0):.6g}"),
        "rope_theta": md.float(key("rope.freq_base"), 10000.0),
        "rope_scaling": rope_scaling,
        "tie_word_embeddings": "output.weight" not in tensor_names,
        "attention_bias": "blk.0.attn_q.bias" in tensor_names,
        "mlp_bias": "blk.0.ffn_up.bias" in tensor_names,
        "hidden_act": "silu",
        "bos_token_id": special["bos"],
        "eos_token_id": special["eos"],
        "pad_token_id": special["pad"],
        # no torch_dtype: the weights are quantised; convert_gguf records the dtype it writes
    }
    name = md.str("general.name")
    if name:
        config["_name_or_path"] = name
    return config


def read_gguf(path: str | os.PathLike[str]) -> GGUFCheckpoint:
    """Parse and check a GGUF file's metadata and tensor table (the tensors themselves are read by
    ``state_dict``); every defect is one ``CheckpointError`` line naming the file and field.

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
    except (GGUFFormatError, OSError) as exc:
        raise CheckpointError(f"{path}: not a readable GGUF file ({exc})") from None
    except (OverflowError, MemoryError, RecursionError, struct.error) as exc:  # the parser bounds these; belt and braces
        raise CheckpointError(f"{path}: not a readable GGUF file ({type(exc).__name__} {str(exc)[:80]})") from None
    md = Metadata(path, file.metadata)
    arch = md.meta.get("general.architecture")
    if arch not in SUPPORTED_ARCHITECTURES:
        raise CheckpointError(
            f"{path}: GGUF architecture {arch!r:.40} is not supported; allowed: {', '.join(SUPPORTED_ARCHITECTURES)}"
        )
    names = {t.name for t in file.tensors}
    for name in names:  # fail now, not halfway through loading
        try:
            hf_tensor_name(name)
        except CheckpointError as exc:
            raise CheckpointError(f"{path}: {exc}") from None
    config = _hf_config(md, arch, names)
    tokens = check_tokenizer(md, config["vocab_size"])
    check_tensors(path, config, file.tensors)
    template = md.str("tokenizer.chat_template")
    special = check_special_ids(md, config["vocab_size"])
    tokenizer_config = tokenizer_config_dict(
        tokens=tokens,
        special_ids=special,
        add_bos=md.bool("tokenizer.ggml.add_bos_token", False),
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


class ConvertError(ValueError):
    """A conversion destination that cannot be written safely (empty name, not empty, a file)."""


def _check_destination(gguf_path: Path, out_dir: str | os.PathLike[str], overwrite: bool) -> Path:
    """The output directory, refused before any work when writing it could lose data."""
    if not str(out_dir).strip():
        raise ConvertError("the output directory is an empty name; give the directory to write")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConvertError(f"{out}: exists and is not a directory")
    if out.is_dir() and any(out.iterdir()):
        if not overwrite:
            raise ConvertError(f"{out}: directory is not empty; pass --overwrite (overwrite=True) to replace it")
        real = out.resolve()
        if Path.cwd().resolve().is_relative_to(real) or gguf_path.resolve().is_relative_to(real):
            raise ConvertError(f"{out}: holds the current directory or the input file; cannot replace it")
    return out


def _validate_written(gguf_path: Path, staged: Path, dtype: "torch.dtype") -> None:
    """What was written, checked as ``run`` loads it: the config, the weight files' framing,
    tensor names, shapes and dtypes (their values were checked finite before writing), the
    tokenizer."""
    from specpath_engine.model import LlamaModel
    from specpath_engine.tokenizer import load_tokenizer

    try:
        LlamaModel.check_pretrained(staged, dtype=dtype)
        if (staged / TOKENIZER_NAME).is_file():
            load_tokenizer(staged)
    except (ValueError, FileNotFoundError) as exc:
        raise CheckpointError(f"{gguf_path}: the converted checkpoint does not load ({' '.join(str(exc).split())})") from None


def convert_gguf(
    gguf_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    dtype: "torch.dtype | None" = None,
    overwrite: bool = False,
) -> Path:
    """Write an HF checkpoint (config.json, model.safetensors, tokenizer files) from a GGUF file.

    The files are written to a staging directory beside ``out_dir`` and loaded back with the
    engine's own checks before they replace it, so a failed conversion leaves ``out_dir`` as it
    was and a replaced one keeps no file of the checkpoint it held. A non-empty ``out_dir`` is
    refused unless ``overwrite``.
    """
    import shutil
    import tempfile

    import torch

    dtype = torch.float32 if dtype is None else dtype
    gguf_path = Path(gguf_path)
    out = _check_destination(gguf_path, out_dir, overwrite)
    checkpoint = read_gguf(gguf_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.convert-", dir=out.parent))
    umask = os.umask(0)
    os.umask(umask)
    staged.chmod(0o777 & ~umask)  # mkdtemp's 0700 would become the checkpoint's mode
    try:
        tensors = checkpoint.state_dict(dtype)
        config = {**checkpoint.config, "torch_dtype": str(dtype).removeprefix("torch.")}
        save_checkpoint(staged, config=config, state_dict=tensors, metadata={"source": f"gguf:{gguf_path.name}"})
        del tensors
        write_tokenizer_files(checkpoint, staged)
        _validate_written(gguf_path, staged, dtype)
        old = None
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
            os.replace(out, old / out.name)
        os.replace(staged, out)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(staged, ignore_errors=True)
    return out
