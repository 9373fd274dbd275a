"""The cross-field rules of a speculative config: combinations checked once the config class is
known (vLLM's ``_verify_args``). Each is called with the :class:`RuleContext` of the resolution
and may fill a default (``fly_window_size``) or note a lossy choice; :data:`CROSS_FIELD_RULES`
is their order. Every failure is one :class:`~specpath.errors.SpeculativeConfigError` line.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import attrs

from specpath.config.rules import LossyVerificationWarning, _where
from specpath.errors import SpeculativeConfigError


class RuleContext(Protocol):
    """What a cross-field rule may read and do (the resolution implements it)."""

    spec: Any
    """The SpeculativeConfig under construction."""
    config_class: type
    """The chosen SpeculatorConfig subclass."""

    def set(self, **updates: Any) -> None: ...

    def note(self, step: str, detail: str) -> None: ...


def _method_name(spec: Any) -> str:
    return spec.custom_method or spec.method


def _lossy(ctx: RuleContext, text: str) -> None:
    warnings.warn(text, LossyVerificationWarning, stacklevel=7)  # the constructor's caller
    ctx.note("lossy", text)


@attrs.frozen
class _KnownK:
    """K must be known by now (given, or from the checkpoint's ``n_predict``)."""

    def __call__(self, ctx: RuleContext) -> None:
        if ctx.spec.num_speculative_tokens is None:
            raise SpeculativeConfigError(
                f"must be provided for method {_method_name(ctx.spec)!r} (the draft checkpoint declares no n_predict)",
                field=_where("num_speculative_tokens"),
            )


@attrs.frozen
class _DynamicKTable:
    """[start, end, K] inclusive batch-size ranges, non-overlapping, 1 <= K <= num_speculative_tokens."""

    def __call__(self, ctx: RuleContext) -> None:
        table, k = ctx.spec.num_speculative_tokens_per_batch_size, ctx.spec.num_speculative_tokens
        if table is None:
            return
        field = _where("num_speculative_tokens_per_batch_size")
        if not table:
            raise SpeculativeConfigError("must list at least one [start, end, K] range", field=field, value=[])
        for i, (start, end, k_i) in enumerate(table):
            if start < 1 or end < start:
                raise SpeculativeConfigError("needs 1 <= start <= end", field=f"{field}[{i}]", value=[start, end, k_i])
            if not 1 <= k_i <= k:
                raise SpeculativeConfigError(
                    f"K must be in 1..num_speculative_tokens ({k})", field=f"{field}[{i}]", value=[start, end, k_i]
                )
        ordered = sorted(table)
        for prev, cur in zip(ordered, ordered[1:]):
            if cur[0] <= prev[1]:
                raise SpeculativeConfigError(
                    f"ranges overlap: {list(prev)} and {list(cur)} (ranges are inclusive)",
                    field=field,
                    value=list(map(list, table)),
                )


@attrs.frozen
class _PromptLookupWindow:
    """prompt_lookup_min <= prompt_lookup_max."""

    def __call__(self, ctx: RuleContext) -> None:
        lo, hi = ctx.spec.prompt_lookup_min, ctx.spec.prompt_lookup_max
        if lo is not None and hi is not None and lo > hi:
            raise SpeculativeConfigError(f"must be <= prompt_lookup_max ({hi})", field=_where("prompt_lookup_min"), value=lo)


@attrs.frozen
class _SyntheticSchedule:
    """synthetic: exactly one of rates (K non-increasing values in [0, 1]) or a length in [1, K+1]."""

    def __call__(self, ctx: RuleContext) -> None:
        spec, k = ctx.spec, ctx.spec.num_speculative_tokens
        rates, length = spec.synthetic_acceptance_rates, spec.synthetic_acceptance_length
        if spec.rejection_sample_method != "synthetic":
            if rates is not None or length is not None:
                raise SpeculativeConfigError(
                    "synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
                    "rejection_sample_method='synthetic'",
                    field=_where("rejection_sample_method"),
                    value=spec.rejection_sample_method,
                )
            return
        if (rates is None) == (length is None):
            raise SpeculativeConfigError(
                "rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates "
                "or synthetic_acceptance_length",
                field=_where("synthetic_acceptance_rates"),
            )
        if rates is not None:
            field = _where("synthetic_acceptance_rates")
            if len(rates) != k:
                raise SpeculativeConfigError(f"must have num_speculative_tokens ({k}) entries", field=field, value=list(rates))
            if any(not (0.0 <= r <= 1.0) for r in rates):
                raise SpeculativeConfigError("every rate must be in [0, 1]", field=field, value=list(rates))
            if any(b > a for a, b in zip(rates, rates[1:])):
                raise SpeculativeConfigError(
                    "must be non-increasing (entry i is P(first i+1 drafts all accepted))", field=field, value=list(rates)
                )
        elif not 1.0 <= length <= k + 1:
            raise SpeculativeConfigError(
                f"must be in [1, num_speculative_tokens + 1] = [1, {k + 1}]",
                field=_where("synthetic_acceptance_length"),
                value=length,
            )
        _lossy(ctx, "synthetic acceptance accepts drafts at preset rates, not by the target distribution")


@attrs.frozen
class _AdaptiveThreshold:
    """adaptive_verification_threshold in (0, 1], and only with enable_adaptive_verification."""

    def __call__(self, ctx: RuleContext) -> None:
        threshold = ctx.spec.adaptive_verification_threshold
        if threshold is None:
            return
        field = _where("adaptive_verification_threshold")
        if not ctx.spec.enable_adaptive_verification:
            raise SpeculativeConfigError("is only valid with enable_adaptive_verification=true", field=field, value=threshold)
        if not (math.isfinite(threshold) and 0.0 < threshold <= 1.0):
            raise SpeculativeConfigError("must be in (0, 1]", field=field, value=threshold)


@attrs.frozen
class _FlyWindow:
    """fly: a drafter that proposes tokens, K >= 2, window 1 <= w < K (default min(6, K-1))."""

    def __call__(self, ctx: RuleContext) -> None:
        spec, k = ctx.spec, ctx.spec.num_speculative_tokens
        if spec.rejection_sample_method != "fly":
            if spec.fly_window_size is not None or spec.fly_entropy_threshold is not None:
                raise SpeculativeConfigError(
                    "fly_window_size / fly_entropy_threshold are only valid with rejection_sample_method='fly'",
                    field=_where("rejection_sample_method"),
                    value=spec.rejection_sample_method,
                )
            return
        if not ctx.config_class.proposes_draft_tokens:
            raise SpeculativeConfigError(
                f"'fly' needs a drafter that proposes tokens; {ctx.config_class.__name__} does not",
                field=_where("rejection_sample_method"),
                value="fly",
            )
        if k < 2:
            raise SpeculativeConfigError(
                "rejection_sample_method='fly' needs num_speculative_tokens >= 2",
                field=_where("num_speculative_tokens"),
                value=k,
            )
        if spec.fly_window_size is None:
            ctx.set(fly_window_size=min(6, k - 1))
            ctx.note("fly", f"fly_window_size defaults to min(6, K-1) = {spec.fly_window_size}")
        elif spec.fly_window_size >= k:
            raise SpeculativeConfigError(
                f"must be less than num_speculative_tokens ({k})", field=_where("fly_window_size"), value=spec.fly_window_size
            )
        if spec.fly_entropy_threshold is not None and spec.fly_entropy_threshold < 0:
            raise SpeculativeConfigError("must be >= 0", field=_where("fly_entropy_threshold"), value=spec.fly_entropy_threshold)
        _lossy(ctx, "FLy verification is lossy: it may change the output distribution")


@attrs.frozen
class _Vocabulary:
    """TLI needs an own-vocabulary drafter, greedy drafts and full logits; otherwise the draft's
    vocabulary must equal the target's; local argmax only drafts greedily."""

    def __call__(self, ctx: RuleContext) -> None:
        spec, cls = ctx.spec, ctx.config_class
        if spec.use_heterogeneous_vocab:
            field = _where("use_heterogeneous_vocab")
            if not cls.draft_has_own_vocab:
                raise SpeculativeConfigError(
                    f"needs a drafter with its own vocabulary (method 'draft_model'); "
                    f"{_method_name(spec)!r} shares the target's",
                    field=field,
                    value=True,
                )
            if spec.draft_sample_method != "greedy":
                raise SpeculativeConfigError(
                    "needs greedy drafts (restricting the vocabulary would change a sampled draft distribution)",
                    field=_where("draft_sample_method"),
                    value=spec.draft_sample_method,
                    allowed=["greedy"],
                )
            if spec.use_local_argmax_reduction:
                raise SpeculativeConfigError(
                    "cannot be combined with use_local_argmax_reduction (the token intersection needs full draft logits)",
                    field=field,
                    value=True,
                )
            return
        if spec.use_local_argmax_reduction and spec.draft_sample_method != "greedy":
            raise SpeculativeConfigError(
                "use_local_argmax_reduction only supports greedy drafts",
                field=_where("draft_sample_method"),
                value=spec.draft_sample_method,
            )
        draft, target = spec.draft_model_config, spec.target_model_config
        if cls.draft_has_own_vocab and draft is not None and target is not None:
            if draft.vocab_size is not None and target.vocab_size is not None and draft.vocab_size != target.vocab_size:
                raise SpeculativeConfigError(
                    f"the draft vocabulary ({draft.vocab_size}) differs from the target's ({target.vocab_size}); "
                    "set use_heterogeneous_vocab=true",
                    field=_where("model"),
                    value=spec.model,
                )


@attrs.frozen
class _DraftParallel:
    """Prefill context parallelism only for classes that support it; the draft fits its parallel config."""

    def __call__(self, ctx: RuleContext) -> None:
        from specpath.config.model import ParallelConfig

        spec, cls = ctx.spec, ctx.config_class
        target_parallel = spec.target_parallel_config or ParallelConfig()
        if target_parallel.prefill_context_parallel_size > 1 and not cls.supports_pcp:
            raise SpeculativeConfigError(
                f"{cls.__name__} does not support prefill context parallelism",
                field="parallel_config.prefill_context_parallel_size",
                value=target_parallel.prefill_context_parallel_size,
            )
        if spec.draft_model_config is not None and spec.draft_parallel_config is not None:
            spec.draft_model_config.verify_with_parallel_config(
                spec.draft_parallel_config, field=_where("draft_parallel_config")
            )


@attrs.frozen
class _AuxLayerRange:
    """Auxiliary layer ids name hidden states of the target as vLLM/SGLang do: id i is the state
    entering decoder layer i, id N the last layer's output: 0 <= id <= num_hidden_layers."""

    def __call__(self, ctx: RuleContext) -> None:
        spec = ctx.spec
        ids = spec.eagle_aux_hidden_state_layer_ids
        if ids is None:
            return
        layers = None if spec.target_model_config is None else spec.target_model_config.num_hidden_layers
        for layer in ids:
            if layer < 0 or (layers is not None and layer > layers):
                raise SpeculativeConfigError(
                    f"layer ids must be in [0, {layers}]" if layers else "layer ids must be >= 0",
                    field=_where("eagle_aux_hidden_state_layer_ids"),
                    value=list(ids),
                )


@attrs.frozen
class _HeadQuantizationDtype:
    """Quantizing the draft's LM head needs that head in the model dtype."""

    def __call__(self, ctx: RuleContext) -> None:
        spec, draft = ctx.spec, ctx.spec.draft_model_config
        if spec.draft_lm_head_quantization is not None and draft is not None and draft.head_dtype != draft.dtype:
            raise SpeculativeConfigError(
                f"needs the draft's LM head in the model dtype ({draft.dtype}), but it is {draft.head_dtype}",
                field=_where("draft_lm_head_quantization"),
                value=spec.draft_lm_head_quantization,
            )


CROSS_FIELD_RULES: tuple[Callable[[RuleContext], None], ...] = (
    _KnownK(),
    _DynamicKTable(),
    _PromptLookupWindow(),
    _SyntheticSchedule(),
    _AdaptiveThreshold(),
    _FlyWindow(),
    _Vocabulary(),
    _DraftParallel(),
    _AuxLayerRange(),
    _HeadQuantizationDtype(),
)
"""Checked in this order after the config class is chosen, before the class's own ``verify``."""


def check_model_free_drafter(outer: Any, inner: Any, field: str) -> None:
    """A ``model_free_drafter`` (``inner``, resolved) must be a model-free method, drafting
    within the outer config's K (the engine reserves K slots per request), beside a drafter
    that proposes drafts and estimates no acceptance of its own."""
    cls = type(inner.speculator_config)
    name = _method_name(inner)
    if not cls.model_free:
        raise SpeculativeConfigError(
            f"method {name!r} is not model-free ({cls.__name__} does not declare model_free): only a drafter "
            "that reads token ids alone can run beside another", field=field, value=name)
    flags = inner.speculator_config
    if (cls.uses_target_hidden_states or cls.uses_separate_workspace_lane or inner.draft_model_config is not None
            or flags.num_lookahead_tokens or flags.max_num_new_slots_for_drafting):
        raise SpeculativeConfigError(
            f"{cls.qualname()} declares model_free but needs more than token ids (hidden states, weights, "
            "KV or query slots)", field=field, value=name)
    if inner.num_speculative_tokens > outer.num_speculative_tokens:
        raise SpeculativeConfigError(
            f"must be <= the speculative config's num_speculative_tokens ({outer.num_speculative_tokens})",
            field=f"{field}.num_speculative_tokens", value=inner.num_speculative_tokens)
    if not outer.speculator_config.proposes_draft_tokens:
        raise SpeculativeConfigError(
            f"method {_method_name(outer)!r} proposes no drafts: use the model-free method on its own",
            field=field, value=name)
    if outer.enable_adaptive_verification:
        raise SpeculativeConfigError(
            "cannot be combined with enable_adaptive_verification (model-free drafts carry no acceptance "
            "estimates)", field=field, value=name)


def check_supported_options(
    spec: Any,
    cls: type,
    given: Mapping[str, Any],
    supports: Callable[[type, str], bool],
) -> None:
    """Every method-specific option the user gave (``given``: name -> value, those that differ
    from their default) must be supported by the class; the error lists its ``supported_options``."""
    for option, value in given.items():
        if not supports(cls, option):
            raise SpeculativeConfigError(
                f"is not supported by method {_method_name(spec)!r} ({cls.__name__})",
                field=_where(option),
                value=value,
                allowed=sorted(cls.supported_options) or ["(no method-specific options)"],
            )
