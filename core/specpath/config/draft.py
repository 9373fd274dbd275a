"""The draft's derived configs, built from the target's by ``DraftModelSpeculatorConfig.configure``.

Each function is one rule of the draft side (vLLM keeps the same rules as small static
helpers of its speculative config): which ModelConfig fields the draft inherits, when its
``max_position_embeddings`` may follow the target's, K from ``n_predict``, the draft's
tensor-parallel size, its parallel config (expert parallelism only for MoE drafts) and the
runtime overrides it applies on copies of the target's configs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from specpath.config.model import (
    CACHE_ONLY_ROPE_TYPES,
    AttentionConfig,
    CacheConfig,
    KernelConfig,
    LoadConfig,
    ModelConfig,
    ParallelConfig,
    _override_list,
    compose_draft_hf_overrides,
)
from specpath.errors import SpeculativeConfigError

if TYPE_CHECKING:  # pragma: no cover
    from specpath.config.speculative import SpeculativeConfig


def build_draft_model_config(spec: SpeculativeConfig) -> ModelConfig:
    """The draft ModelConfig as vLLM's speculative config builds it: inherited, draft-specific and
    special fields."""
    target = spec.target_model_config
    inherited: dict[str, Any] = {}
    if target is not None:
        inherited = dict(
            tokenizer_mode=target.tokenizer_mode,
            dtype=target.dtype,
            seed=target.seed,
            trust_remote_code=target.trust_remote_code,
            enforce_eager=target.enforce_eager,
            max_logprobs=target.max_logprobs,
            config_format=target.config_format,
        )
    return ModelConfig(
        model=spec.model,
        runner="draft",
        tokenizer=(spec.model if spec.use_heterogeneous_vocab or target is None else target.tokenizer),
        revision=spec.revision,
        code_revision=spec.code_revision,
        quantization=spec.quantization,
        max_model_len=spec.max_model_len,
        spec_target_max_model_len=None if target is None else target.max_model_len,
        hf_overrides=None if target is None else compose_draft_hf_overrides(target.hf_overrides),
        load_config=spec.draft_load_config or (LoadConfig() if target is None else target.load_config),
        **inherited,
    )


def maybe_raise_draft_max_position_embeddings(
    draft: ModelConfig, target: ModelConfig | None, requested_max_model_len: int | None = None
) -> ModelConfig:
    """A draft that shares the target's positions must cover the target's length, but only
    raise ``max_position_embeddings`` when the RoPE type makes that a cache-size change.
    ``requested_max_model_len`` is the user's draft ``max_model_len`` (None = derive)."""
    if target is None or draft.max_position_embeddings >= (target.max_model_len or 0):
        return draft
    if draft.rope_type not in CACHE_ONLY_ROPE_TYPES:
        return draft
    overrides = _override_list(draft.hf_overrides) + [{"max_position_embeddings": target.max_model_len}]
    return attrs.evolve(draft, hf_overrides=overrides, max_model_len=requested_max_model_len)


def resolve_num_speculative_tokens(k: int | None, draft: ModelConfig | None) -> int | None:
    """K from the checkpoint's ``n_predict`` (else a speculators checkpoint's proposal) when
    not given; a larger K must be a multiple of ``n_predict`` (the modules are reused in turn)."""
    n_predict = None if draft is None else draft.hf_config.get("n_predict")
    if not isinstance(n_predict, int) or isinstance(n_predict, bool) or n_predict < 1:
        if k is None and draft is not None:
            from specpath.config.speculators_format import declared_num_speculative_tokens

            return declared_num_speculative_tokens(draft.hf_config)
        return k
    if k is None:
        return n_predict
    if k > n_predict and k % n_predict:
        raise SpeculativeConfigError(
            f"num_speculative_tokens:{k} must be divisible by n_predict={n_predict} "
            "(the draft checkpoint's module count; a larger K reuses the modules in turn)",
            field="speculative_config.num_speculative_tokens",
            value=k,
        )
    return k


def verify_and_get_draft_tp(draft_tp: int | None, target_parallel: ParallelConfig) -> int:
    """The draft runs on the target's devices: unsharded (1) or sharded like the target."""
    target_tp = target_parallel.tensor_parallel_size
    if draft_tp is None:
        return target_tp
    if draft_tp not in (1, target_tp):
        raise SpeculativeConfigError(
            f"must be 1 or the target's tensor_parallel_size ({target_tp})",
            field="speculative_config.draft_tensor_parallel_size",
            value=draft_tp,
            allowed=sorted({1, target_tp}),
        )
    return draft_tp


def create_draft_parallel_config(
    target_parallel: ParallelConfig, draft_tp: int, draft: ModelConfig | None
) -> ParallelConfig:
    """The draft's parallel config: expert parallelism only if the draft itself is MoE."""
    enable_ep = target_parallel.enable_expert_parallel
    if draft is not None:
        enable_ep = enable_ep and draft.is_moe
    return ParallelConfig(
        tensor_parallel_size=draft_tp,
        pipeline_parallel_size=1,
        data_parallel_size=target_parallel.data_parallel_size,
        prefill_context_parallel_size=target_parallel.prefill_context_parallel_size,
        enable_expert_parallel=enable_ep,
    )


@attrs.frozen(kw_only=True)
class DraftRuntimeConfigs:
    """Copies of the target's runtime configs with the draft's overrides applied."""

    cache_config: CacheConfig
    kernel_config: KernelConfig
    attention_config: AttentionConfig


def apply_draft_overrides(
    spec: SpeculativeConfig,
    *,
    cache_config: CacheConfig | None = None,
    kernel_config: KernelConfig | None = None,
    attention_config: AttentionConfig | None = None,
) -> DraftRuntimeConfigs:
    """Overlay ``moe_backend``, ``attention_backend`` and ``kv_cache_dtype`` (only those set)
    on copies of the target's kernel, attention and cache configs."""
    cache = cache_config or CacheConfig()
    kernel = kernel_config or KernelConfig()
    attention = attention_config or AttentionConfig()
    if spec.kv_cache_dtype is not None:
        cache = attrs.evolve(cache, kv_cache_dtype=spec.kv_cache_dtype)
    if spec.moe_backend is not None:
        kernel = attrs.evolve(kernel, moe_backend=spec.moe_backend)
    if spec.attention_backend is not None:
        attention = attrs.evolve(attention, backend=spec.attention_backend)
    return DraftRuntimeConfigs(cache_config=cache, kernel_config=kernel, attention_config=attention)
