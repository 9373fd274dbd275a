"""Refuse what cannot fit before allocating it.

A checkpoint's ``config.json`` decides how much memory a model, its RoPE tables, its drafter
modules and the engine's KV cache take; a config with ``num_hidden_layers`` 1e9 or
``max_position_embeddings`` 1e12 would otherwise hang or die in the allocator. Callers estimate
the bytes from the config's numbers and call :func:`require_memory` first.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from specpath_engine.modeling.checkpoint import CheckpointError


def available_memory_bytes() -> int:
    """Memory this process could still get: ``MemAvailable`` (Linux), else physical memory."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: do not refuse


def _gib(n: float) -> str:
    return f"{n / (1 << 30):.3g} GiB"


def require_memory(num_bytes: float, what: str, source: str) -> None:
    """Raise one :class:`CheckpointError` line when ``num_bytes`` exceeds the available memory."""
    available = available_memory_bytes()
    if num_bytes > available:
        raise CheckpointError(
            f"{source}: {what} would need about {_gib(num_bytes)}, more than the {_gib(available)} "
            "of memory available; check the config's sizes"
        )


LAYER_OVERHEAD_BYTES = 64 << 10
"""Python-side cost of building one decoder layer (module objects, parameter wrappers): what
makes a config with a million tiny layers as impossible as one with huge ones."""


def llama_bytes(config: object, itemsize: int = 4) -> int:
    """Bytes of a Llama-family model's weights and RoPE tables from its config's numbers
    (any object with the ``LlamaConfig`` attributes)."""
    c = config
    hidden, layers = int(c.hidden_size), int(c.num_hidden_layers)
    q = int(c.num_attention_heads) * int(c.head_dim)
    kv = int(c.num_key_value_heads) * int(c.head_dim)
    per_layer = hidden * (2 * q + 2 * kv) + 3 * hidden * int(c.intermediate_size) + 2 * hidden
    heads = 1 if getattr(c, "tie_word_embeddings", False) else 2
    params = layers * per_layer + heads * int(c.vocab_size) * hidden + hidden
    rope = 2 * int(c.max_position_embeddings) * int(c.head_dim) * 4
    return params * itemsize + rope + layers * LAYER_OVERHEAD_BYTES


def _positive_int(raw: Mapping[str, Any], *keys: str, default: int = 1) -> int:
    for key in keys:
        value = raw.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return default


def config_bytes(raw: Mapping[str, Any], itemsize: int = 4) -> int:
    """A lower bound on the bytes a model (or drafter head, or set of MTP modules) built from a
    raw ``config.json`` takes, from the usual Hugging Face size fields; fields that are absent
    count as 1, so the estimate never refuses a plausible config."""
    hidden = _positive_int(raw, "hidden_size")
    heads = _positive_int(raw, "num_attention_heads")
    head_dim = _positive_int(raw, "head_dim", default=max(hidden // heads, 1))
    kv = _positive_int(raw, "num_key_value_heads", default=heads)
    layers = _positive_int(raw, "num_hidden_layers", "num_layers")
    modules = _positive_int(raw, "num_nextn_predict_layers", "n_predict")
    per_layer = hidden * (2 * heads + 2 * kv) * head_dim + 3 * hidden * _positive_int(raw, "intermediate_size")
    vocab = _positive_int(raw, "vocab_size", "draft_vocab_size")
    rope = 2 * _positive_int(raw, "max_position_embeddings") * head_dim * 4
    return (modules * layers * per_layer + vocab * hidden) * itemsize + rope + modules * layers * LAYER_OVERHEAD_BYTES


def require_config_memory(raw: Mapping[str, Any], source: str, what: str = "the model") -> None:
    """:func:`require_memory` for what a raw ``config.json`` declares (drafter heads call it
    before building anything)."""
    require_memory(config_bytes(raw), what, source)
