"""What a GGUF file's metadata must say before any of its weights are read.

:mod:`~specpath_engine.modeling.gguf_file` checks the container (counts, alignment, offsets);
this module checks the meaning: every number has the right type and a sane range, the special
token ids lie inside the vocabulary, the tokenizer's merges name tokens it has, and every tensor
is one the architecture has, with the shape the numbers give. Each failure is one
``CheckpointError`` line naming the file and the metadata key or tensor, so a broken file never
loads as garbage weights (llama.cpp's own loader trusts most of these fields).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping

from specpath_engine.modeling.checkpoint import CheckpointError
from specpath_engine.modeling.gguf_file import TensorInfo

MAX_SIZE = 1 << 31
"""Largest value of a size field (layers, widths, heads, vocabulary, context)."""
_MISSING: Any = object()


class Metadata:
    """Typed reads of a GGUF file's metadata, each failure one line naming the file and key."""

    def __init__(self, path: Path, meta: Mapping[str, Any]) -> None:
        self.path, self.meta = path, meta

    def error(self, key: str, problem: str) -> CheckpointError:
        return CheckpointError(f"{self.path}: GGUF metadata {key}: {problem}")

    def int(self, key: str, default: Any = _MISSING, *, low: int = 1, high: int = MAX_SIZE) -> Any:
        value = self.meta.get(key, default)
        if value is _MISSING:
            raise self.error(key, "missing")
        if value is None or value is default:
            return value
        if isinstance(value, list):
            raise self.error(key, "per-layer values (an array) are not supported")
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise self.error(key, f"must be an integer from {low} to {high}, got {value!r:.40}")
        return value

    def float(self, key: str, default: float, *, low: float = 0.0, high: float = math.inf) -> float:
        """A finite float with ``low < value <= high`` (a NaN epsilon or zero RoPE base is garbage)."""
        value = self.meta.get(key, default)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(key, f"must be a finite number, got {value!r:.40}")
        if not low < value <= high:
            raise self.error(key, f"must be above {low:g}{'' if high == math.inf else f' and at most {high:g}'}, got {value!r:.40}")
        return float(value)

    def str(self, key: str, default: Any = None) -> Any:
        value = self.meta.get(key, default)
        if value is not None and not isinstance(value, str):
            raise self.error(key, f"must be a string, got {type(value).__name__}")
        if value is not None:
            self._utf8(key, [value])
        return value

    def _utf8(self, key: str, texts: list[Any]) -> None:
        """The parser keeps invalid UTF-8 as surrogates; text the tokenizer or a template reads must
        be real UTF-8 (the tokenizers library fails on it with a message about something else)."""
        try:
            "".join(texts).encode("utf-8")
        except UnicodeEncodeError:
            at = next(i for i, t in enumerate(texts) if not _encodes(t))
            raise self.error(key if len(texts) == 1 else f"{key}[{at}]", "is not valid UTF-8") from None

    def bool(self, key: str, default: bool) -> bool:
        value = self.meta.get(key, default)
        if not isinstance(value, bool):
            raise self.error(key, f"must be a boolean, got {value!r:.40}")
        return value

    def list(self, key: str, item: type) -> list[Any] | None:
        value = self.meta.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not set(map(type, value)) <= {item}:  # exact types: no bool for int
            raise self.error(key, f"must be an array of {item.__name__}")
        if item is str:
            self._utf8(key, value)
        return value


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_tokenizer(md: Metadata, vocab_size: int) -> list[str]:
    """The vocabulary (possibly empty), after checking it against the other tokenizer fields."""
    tokens = md.list("tokenizer.ggml.tokens", str)
    types = md.list("tokenizer.ggml.token_type", int)
    merges = md.list("tokenizer.ggml.merges", str)
    md.str("tokenizer.ggml.model")
    md.str("tokenizer.ggml.pre")
    if tokens is None:
        return []
    if len(tokens) > vocab_size:
        raise md.error("tokenizer.ggml.tokens", f"{len(tokens)} tokens for a model vocabulary (vocab_size) of {vocab_size}")
    index = {token: i for i, token in enumerate(tokens)}
    if len(index) != len(tokens):
        duplicate = next(t for i, t in enumerate(tokens) if index[t] != i)
        raise md.error("tokenizer.ggml.tokens", f"token {duplicate!r:.40} appears twice")
    if types is not None and len(types) != len(tokens):
        raise md.error("tokenizer.ggml.token_type", f"{len(types)} types for {len(tokens)} tokens")
    for i, merge in enumerate(merges or ()):
        left, sep, right = merge.partition(" ")
        if left in index and right in index and left + right in index:
            continue
        if not sep or not left or not right:
            raise md.error(f"tokenizer.ggml.merges[{i}]", f"{merge!r:.60} is not two tokens separated by a space")
        part = next(p for p in (left, right, left + right) if p not in index)
        raise md.error(f"tokenizer.ggml.merges[{i}]", f"{merge!r:.60} names {part!r:.40}, which is not in "
                       f"tokenizer.ggml.tokens")
    return tokens


def check_special_ids(md: Metadata, vocab_size: int) -> dict[str, int | None]:
    """bos/eos/unk/pad ids, each inside the vocabulary or absent."""
    keys = (("bos", "bos"), ("eos", "eos"), ("unk", "unknown"), ("pad", "padding"))
    return {role: md.int(f"tokenizer.ggml.{key}_token_id", None, low=0, high=vocab_size - 1) for role, key in keys}


def _shapes(config: Mapping[str, Any], names: set[str]) -> tuple[dict[str, tuple[int, ...]], dict[str, tuple[int, ...]]]:
    """(global tensors, one layer's tensors after ``blk.N.``): llama.cpp name -> numpy shape,
    for the HF ``config`` that ``gguf._hf_config`` built."""
    d, f, v = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv, hd = config["num_attention_heads"], config["num_key_value_heads"], config["head_dim"]
    globals_: dict[str, tuple[int, ...]] = {"token_embd.weight": (v, d), "output_norm.weight": (d,)}
    if not config["tie_word_embeddings"]:
        globals_["output.weight"] = (v, d)
    layer = {
        "attn_norm.weight": (d,), "ffn_norm.weight": (d,),
        "attn_q.weight": (heads * hd, d), "attn_k.weight": (kv * hd, d), "attn_v.weight": (kv * hd, d),
        "attn_output.weight": (d, heads * hd),
        "ffn_gate.weight": (f, d), "ffn_up.weight": (f, d), "ffn_down.weight": (d, f),
    }
    if config["model_type"] == "qwen3":
        layer.update({"attn_q_norm.weight": (hd,), "attn_k_norm.weight": (hd,)})
    if config["attention_bias"]:
        layer.update({"attn_q.bias": (heads * hd,), "attn_k.bias": (kv * hd,), "attn_v.bias": (kv * hd,)})
        if any(n.endswith("attn_output.bias") for n in names):
            layer["attn_output.bias"] = (d,)
    if config["mlp_bias"]:
        layer.update({"ffn_gate.bias": (f,), "ffn_up.bias": (f,), "ffn_down.bias": (d,)})
    return globals_, layer


def _expected(name: str, layers: int, globals_: Mapping[str, tuple[int, ...]],
              layer: Mapping[str, tuple[int, ...]]) -> tuple[int, ...] | None:
    if name in globals_:
        return globals_[name]
    block, _, rest = name.partition(".")[2].partition(".")
    if name.startswith("blk.") and block.isdigit() and str(int(block)) == block and int(block) < layers and rest in layer:
        return layer[rest]
    return None


def check_tensors(path: Path, config: Mapping[str, Any], tensors: tuple[TensorInfo, ...]) -> None:
    """Every tensor one the config's architecture has, with its shape; none missing. Works
    tensor by tensor: a layer count of 2**31 costs no more than the file's own tensors."""
    found = {t.name: t for t in tensors}
    layers = config["num_hidden_layers"]
    globals_, layer = _shapes(config, set(found))
    for name, tensor in found.items():
        shape = _expected(name, layers, globals_, layer)
        if shape is None:
            raise CheckpointError(f"{path}: GGUF tensor {name!r:.80} is not part of this model "
                                  f"({layers} layers, {config['model_type']})")
        if tensor.shape != shape:
            raise CheckpointError(f"{path}: GGUF tensor {name}: shape {tensor.shape}, the metadata gives {shape}")
    if len(found) < len(globals_) + layers * len(layer):  # every found name is distinct and expected
        missing = [n for n in globals_ if n not in found]
        for i in range(layers):
            missing += [f"blk.{i}.{n}" for n in layer if f"blk.{i}.{n}" not in found]
            if len(missing) >= 3:
                break
        raise CheckpointError(f"{path}: GGUF file is missing "
                              f"{len(globals_) + layers * len(layer) - len(found)} tensor(s), e.g. {', '.join(missing[:3])}")
