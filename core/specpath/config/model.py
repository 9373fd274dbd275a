"""Target and draft model configs, and the runtime configs a draft derives from the target's.

A :class:`ModelConfig` reads a *local* Hugging Face checkpoint directory (``config.json``; no
hub access) into a read-only :class:`HFConfig`. The draft's ModelConfig is built from three
kinds of fields (the categories of vLLM's speculative config):

1. inherited from the target: tokenizer_mode, dtype, seed, trust_remote_code, enforce_eager,
   max_logprobs, config_format (and the tokenizer, unless the vocabularies differ);
2. the draft's own: model, revision, code_revision, quantization;
3. special: ``runner="draft"``, ``max_model_len`` from the speculative config (capped by the
   target's), ``spec_target_max_model_len``, and only the *callable* part of the target's
   ``hf_overrides`` (dict overrides change the target's structure; callables are runtime
   switches both should see).
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from specpath.config import rules
from specpath.config.checkpoint import load_hf_config
from specpath.errors import SpeculativeConfigError
from specpath.hub import resolve_model_path

CACHE_ONLY_ROPE_TYPES = frozenset({"default", "linear", "llama3", "ntk", "proportional"})
"""RoPE types whose ``max_position_embeddings`` only sizes the cos/sin cache; raising it
changes no rotary frequency (yarn/deepseek size from the original length, dynamic/longrope
derive frequencies from it, so those are left alone)."""

DTYPES = ("auto", "float32", "float16", "bfloat16", "float", "half")
_DTYPE_ALIASES = {"float": "float32", "half": "float16"}

class HFConfig(Mapping[str, Any]):
    """A checkpoint's ``config.json`` as a read-only mapping with attribute access
    (``hf_config.n_predict``), so config code reads it like a transformers config without
    importing transformers."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]) -> None:
        object.__setattr__(self, "_data", copy.deepcopy(dict(data)))

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_data":  # not yet set (copy, unpickle)
            raise AttributeError(name)
        try:
            return self._data[name]
        except KeyError:
            raise AttributeError(name) from None

    def __reduce__(self) -> tuple[Any, ...]:
        return (HFConfig, (self._data,))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("HFConfig is read-only")

    def __repr__(self) -> str:
        return f"HFConfig({self._data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HFConfig) and self._data == other._data

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        return copy.deepcopy(self._data)


def _deep_merge(base: dict, update: Mapping) -> dict:
    for key, value in update.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _deep_merge(base[key], value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def _override_list(overrides: Any) -> list[Any]:
    if overrides is None:
        return []
    if isinstance(overrides, Mapping) or callable(overrides):
        return [overrides]
    if isinstance(overrides, Sequence) and not isinstance(overrides, str):
        return list(overrides)
    raise SpeculativeConfigError("must be a dict, a callable or a list of them", field="hf_overrides", value=overrides)


def apply_hf_overrides(config: dict, overrides: Any) -> dict:
    """Apply dict (deep merge) and callable overrides, in order."""
    for override in _override_list(overrides):
        if isinstance(override, Mapping):
            _deep_merge(config, override)
        elif callable(override):
            result = override(config)
            if result is not None:
                config = dict(result)
        else:
            raise SpeculativeConfigError(
                "each override must be a dict or a callable", field="hf_overrides", value=override
            )
    return config


def compose_draft_hf_overrides(target_overrides: Any) -> Callable[[dict], dict] | None:
    """Only the callable overrides of the target carry over to the draft."""
    callables = [o for o in _override_list(target_overrides) if callable(o) and not isinstance(o, Mapping)]
    if not callables:
        return None

    def composed(config: dict) -> dict:
        for fn in callables:
            result = fn(config)
            if result is not None:
                config = dict(result)
        return config

    composed.parts = tuple(callables)  # type: ignore[attr-defined]
    return composed


_HF_INTEGER_KEYS = (
    "vocab_size", "hidden_size", "n_embd", "d_model", "num_hidden_layers", "n_layer", "num_layers",
    "num_attention_heads", "n_head", "num_key_value_heads", "max_position_embeddings", "n_positions",
    "max_seq_len", "seq_length", "num_experts", "n_routed_experts", "num_local_experts", "n_predict",
)


def _check_hf_numbers(config: Mapping[str, Any], field: str, path: str) -> None:
    """The sizes config code computes with must be integers, so a damaged config.json is a
    one-line error here rather than a TypeError deep inside."""
    for key in _HF_INTEGER_KEYS:
        value = config.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise SpeculativeConfigError(
                f"config.json of {path!r}: {key!r} must be a non-negative integer", field=field, value=value
            )


def _positive(owner: str) -> Callable[[Any, Any, Any], None]:
    """An integer >= 1, errors naming ``<owner>.<field>`` (the core's one validator style)."""
    return rules.validator(rules.positive_integer(), owner=owner)


def _name(owner: str) -> Callable[[Any, Any, Any], None]:
    """A short plain name (a backend, a dtype), as the speculative config's overrides are checked."""
    return rules.validator(rules.plain_text(64), owner=owner)


def _model_owner(config: Any) -> str:
    return "speculative_config" if config.runner == "draft" else "model_config"


@attrs.frozen(kw_only=True)
class ParallelConfig:
    """How a model is split over devices."""

    tensor_parallel_size: int = attrs.field(default=1, validator=_positive("parallel_config"))
    pipeline_parallel_size: int = attrs.field(default=1, validator=_positive("parallel_config"))
    data_parallel_size: int = attrs.field(default=1, validator=_positive("parallel_config"))
    prefill_context_parallel_size: int = attrs.field(default=1, validator=_positive("parallel_config"))
    """Prefill context parallelism (PCP); > 1 needs a drafter that ``supports_pcp``."""
    enable_expert_parallel: bool = False
    """Shard MoE experts over the TP x DP ranks."""

    @property
    def world_size(self) -> int:
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.prefill_context_parallel_size


@attrs.frozen(kw_only=True)
class CacheConfig:
    """The paged KV cache."""

    block_size: int = attrs.field(default=16, validator=_positive("cache_config"))
    enable_prefix_caching: bool = False
    kv_cache_dtype: str = attrs.field(default="auto", validator=_name("cache_config"))
    """``auto`` = the model dtype."""
    kv_connector: str | None = None
    """An external KV transfer connector; it keeps the plain block hashes (no lookahead)."""
    num_blocks: int | None = None
    """KV blocks to allocate; None lets the engine size the pool: ``max_num_seqs`` requests of
    ``max_model_len`` always fit, capped by ``kv_cache_memory_bytes``."""
    kv_cache_memory_bytes: int | None = None
    """Most bytes the pool may take when ``num_blocks`` is None (at least one request of
    ``max_model_len`` always fits: the scheduler preempts when more do not); None: no cap."""


@attrs.frozen(kw_only=True)
class SchedulerConfig:
    """Batching limits: specpath's one set of scheduler defaults (the reference engine's
    ``LLM``, its settings and the speculator context all take theirs from here)."""

    max_num_seqs: int = attrs.field(default=8, validator=_positive("scheduler_config"))
    """Requests in flight at once."""
    max_num_batched_tokens: int = attrs.field(default=1024, validator=_positive("scheduler_config"))
    """Tokens one engine step may schedule (prefill chunks, decode tokens and drafts)."""
    enable_chunked_prefill: bool = True


@attrs.frozen(kw_only=True)
class LoadConfig:
    """How weights are read."""

    load_format: Literal["auto", "safetensors"] = "auto"
    download_dir: str | None = None
    """The Hugging Face hub cache that hub ids are read from (default: ``HF_HUB_CACHE`` /
    ``HF_HOME/hub`` / ``~/.cache/huggingface/hub``); nothing is ever downloaded into it."""


@attrs.frozen(kw_only=True)
class KernelConfig:
    """Kernel choices that a draft may override."""

    moe_backend: str = attrs.field(default="auto", validator=_name("kernel_config"))


@attrs.frozen(kw_only=True)
class AttentionConfig:
    """Attention backend choice (a draft such as DFlash may need a non-causal one)."""

    backend: str = attrs.field(default="auto", validator=_name("attention_config"))


@attrs.frozen(kw_only=True)
class ModelConfig:
    """One model read from a local Hugging Face checkpoint directory."""

    model: str
    """Local checkpoint directory (``config.json`` + ``model.safetensors``), or a hub id
    (``org/name``) read from the local Hugging Face cache (resolved to its snapshot
    directory; the id is kept in ``model_weights``)."""
    model_weights: str | None = None
    """Where the weights came from if ``model`` was rewritten (e.g. to a cache dir);
    defaults to ``model``. MTP drafts default to this path."""
    runner: Literal["generate", "draft"] = "generate"
    tokenizer: str | None = None
    """Defaults to ``model``."""
    tokenizer_mode: str = "auto"
    revision: str | None = None
    code_revision: str | None = None
    dtype: str = attrs.field(default="auto", validator=rules.validator(rules.one_of(DTYPES, "unknown dtype"),
                                                                       owner=_model_owner))
    """Resolved: ``auto`` becomes the checkpoint's ``torch_dtype`` (or float32)."""
    seed: int = 0
    trust_remote_code: bool = False
    """Also allows a draft checkpoint to declare its config class by import path."""
    enforce_eager: bool = False
    max_logprobs: int = 20
    config_format: Literal["auto", "hf"] = "auto"
    quantization: str | None = None
    max_model_len: int | None = attrs.field(default=None, validator=rules.validator(rules.positive_integer(),
                                                                                   owner=_model_owner))
    """Resolved: defaults to the checkpoint's context length; a draft is capped by the target."""
    spec_target_max_model_len: int | None = None
    """For a draft: the target's ``max_model_len``."""
    hf_overrides: Any = attrs.field(default=None, eq=False)
    """Dict (deep-merged), callable ``f(config) -> config``, or a list of them."""
    load_config: LoadConfig = attrs.field(factory=LoadConfig)
    """How this model's weights are read (its hub cache: ``download_dir``). A draft inherits
    the target's unless ``speculative_config.draft_load_config`` is given."""
    hf_config: HFConfig = attrs.field(init=False, repr=False, hash=False)
    """``config.json`` after ``hf_overrides``."""

    def __attrs_post_init__(self) -> None:
        owner = "speculative_config" if self.runner == "draft" else "model_config"
        local = resolve_model_path(self.model, self.revision, field=f"{owner}.model",
                                   cache_dir=self.load_config.download_dir)
        if local != self.model:  # a hub id: read its cached snapshot, remember where it came from
            if self.model_weights is None:
                object.__setattr__(self, "model_weights", self.model)
            object.__setattr__(self, "model", local)
        raw = load_hf_config(self.model, field=f"{owner}.model")
        data = apply_hf_overrides(raw, self.hf_overrides)
        _check_hf_numbers(data, f"{owner}.model", self.model)
        hf = HFConfig(data)
        set_ = object.__setattr__
        set_(self, "hf_config", hf)
        if self.model_weights is None:
            set_(self, "model_weights", self.model)
        if self.tokenizer is None:
            set_(self, "tokenizer", self.model)
        dtype = _DTYPE_ALIASES.get(self.dtype, self.dtype)
        if dtype == "auto":
            dtype = str(hf.get("torch_dtype") or hf.get("dtype") or "float32")
        set_(self, "dtype", dtype)
        derived = self.max_position_embeddings
        limit = derived if self.spec_target_max_model_len is None else min(derived, self.spec_target_max_model_len)
        if self.max_model_len is None:
            set_(self, "max_model_len", limit)
        elif self.runner == "draft":
            set_(self, "max_model_len", min(self.max_model_len, limit))
        elif self.max_model_len > derived:
            raise SpeculativeConfigError(
                f"exceeds the model's context length {derived}",
                field=f"{owner}.max_model_len",
                value=self.max_model_len,
            )

    # -- views of the checkpoint ------------------------------------------------------

    def _get(self, *names: str, default: Any = None) -> Any:
        for name in names:
            value = self.hf_config.get(name)
            if value is not None:
                return value
        return default

    @property
    def model_type(self) -> str | None:
        return self.hf_config.get("model_type")

    @property
    def architectures(self) -> tuple[str, ...]:
        return tuple(self.hf_config.get("architectures") or ())

    @property
    def vocab_size(self) -> int | None:
        return self._get("vocab_size")

    @property
    def hidden_size(self) -> int | None:
        return self._get("hidden_size", "n_embd", "d_model")

    @property
    def num_hidden_layers(self) -> int | None:
        return self._get("num_hidden_layers", "n_layer", "num_layers")

    @property
    def num_attention_heads(self) -> int | None:
        return self._get("num_attention_heads", "n_head")

    @property
    def num_key_value_heads(self) -> int | None:
        return self._get("num_key_value_heads", default=self.num_attention_heads)

    @property
    def num_experts(self) -> int:
        return int(self._get("num_experts", "n_routed_experts", "num_local_experts", default=0) or 0)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def max_position_embeddings(self) -> int:
        return int(self._get("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", default=2048))

    @property
    def rope_type(self) -> str:
        scaling = self._get("rope_scaling", "rope_parameters") or {}
        if not isinstance(scaling, Mapping):
            return "default"
        return str(scaling.get("rope_type") or scaling.get("type") or "default")

    @property
    def head_dtype(self) -> str:
        """dtype of the LM head (checkpoints may keep it in another precision)."""
        return str(self.hf_config.get("head_dtype") or self.dtype)

    # -- checks and hashing -------------------------------------------------------------

    def verify_with_parallel_config(self, parallel: ParallelConfig, field: str = "parallel_config") -> None:
        """The model must split evenly over the parallel config."""
        tp = parallel.tensor_parallel_size
        heads = self.num_attention_heads
        if heads is not None and heads % tp:
            raise SpeculativeConfigError(
                f"{self.model!r} has {heads} attention heads, not divisible by tensor_parallel_size",
                field=f"{field}.tensor_parallel_size",
                value=tp,
            )
        kv = self.num_key_value_heads
        if kv is not None and kv % tp and tp % kv:
            raise SpeculativeConfigError(
                f"{self.model!r} has {kv} KV heads; tensor_parallel_size must divide it or be a multiple",
                field=f"{field}.tensor_parallel_size",
                value=tp,
            )
        if parallel.enable_expert_parallel:
            ep = tp * parallel.data_parallel_size
            if not self.is_moe:
                raise SpeculativeConfigError(
                    f"{self.model!r} has no experts", field=f"{field}.enable_expert_parallel", value=True
                )
            if self.num_experts % ep:
                raise SpeculativeConfigError(
                    f"{self.model!r} has {self.num_experts} experts, not divisible by the expert-parallel size",
                    field=f"{field}.enable_expert_parallel",
                    value=ep,
                )

    def compute_hash(self) -> str:
        """Everything that changes this model's computation graph."""
        factors = [
            self.model,
            self.revision,
            self.runner,
            self.dtype,
            self.quantization,
            self.hf_config.to_dict(),
        ]
        return hashlib.sha256(json.dumps(factors, sort_keys=True, default=repr).encode()).hexdigest()
