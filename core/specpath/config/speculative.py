"""``SpeculativeConfig``: user input in, one fully resolved, read-only execution path out.

Construction runs the article's resolution once (``__attrs_post_init__``):

1. early input checks (the ``tensor_parallel_size`` placeholder, K > 0, table shape);
2. method dispatch: a registered custom method becomes ``custom_method`` and ``method`` its
   class's ``base_method``; otherwise ``method`` is inferred from ``model`` (``[ngram]`` ->
   ngram, no model -> draft_model); aliases are normalised (``deepseek_mtp`` -> ``mtp``);
   unknown names fail with the built-in and registered names and the closest match;
3. with no method but a draft checkpoint: its declared class (by registered name), then the
   plugins' ``specpath_detect_method``, then ``matches`` in the order eagle, eagle3, dflash,
   dspark, mtp, else draft_model;
4. config-class lookup (loading only the plugin that provides the method), ``default_model``,
   ``configure`` (its returned field updates are applied);
5. the checkpoint-declared class (must agree with the requested method) or ``specialize``;
6. method-specific options must be in the class's ``supported_options``;
7. ``_verify_args``: every cross-field rule, then the class's own ``verify``.

Build one from untrusted input with :meth:`SpeculativeConfig.from_dict` (strict cattrs
structuring, unknown keys rejected); change one with :meth:`SpeculativeConfig.replace`.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
import re
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from specpath.config.model import LoadConfig, ModelConfig, ParallelConfig, load_hf_config
from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError, closest_match, humanize_structuring_error
from specpath.methods import (
    BUILTIN_METHODS,
    CHECKPOINT_DETECTION_ORDER,
    NGRAM_MODEL_NAMES,
    normalize_method,
)

RejectionSampleMethod = Literal["standard", "synthetic", "block", "fly"]
LOSSY_REJECTION_SAMPLE_METHODS = frozenset({"synthetic", "fly"})
"""Verification modes that may change the output distribution (warned about, and marked)."""

METHOD_SPECIFIC_OPTIONS: tuple[str, ...] = (
    "dspark_draft_topk",
    "dspark_anchor_sampling",
    "draft_lm_head_quantization",
    "index_share_for_mtp_iteration",
    "xpress_topc",
    "speculator_options",
)
"""Options that only some methods accept: when set, the resolved class must list them in
``supported_options``."""

DECLARED_CLASS_KEY = "speculator_config_class"
"""Key of a draft ``config.json`` that declares its config class (a registered method name,
or with ``trust_remote_code`` a ``module:Class`` path)."""

_GROUP = "group"
_DERIVED = "derived"
_INJECTED = "injected"


class LossyVerificationWarning(UserWarning):
    """The chosen verification may change the output distribution."""


def _field(default: Any = None, *, group: str, doc: str, kind: str | None = None, **kw: Any) -> Any:
    return attrs.field(default=default, metadata={_GROUP: group, "doc": doc, "kind": kind}, **kw)


@attrs.frozen
class DraftCheckpoint:
    """What detection hooks see of a draft checkpoint: its path and ``config.json``."""

    path: str | None
    config: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def model_type(self) -> str | None:
        value = self.config.get("model_type")
        return value if isinstance(value, str) else None


@attrs.frozen
class _Declared:
    """What a draft checkpoint says it is."""

    name: str
    base_method: str
    config_class: type[SpeculatorConfig] | None
    """None for a built-in name: the requested class is then used (no plugin is loaded)."""
    how: str


def min_variance_acceptance_rates(mean_acceptance_length: float, num_speculative_tokens: int) -> tuple[float, ...]:
    """Per-position unconditional acceptance rates with the given mean acceptance length
    ``L`` (bonus token included) and the least variance: ``floor(L-1)`` ones, then the
    fractional part, then zeros; ``K`` entries. ``rates[i]`` is the probability that the
    first ``i+1`` drafts are all accepted, so ``sum(rates) == L - 1``."""
    accepted = mean_acceptance_length - 1.0
    whole = int(math.floor(accepted))
    rates = [1.0] * whole + [accepted - whole]
    rates = (rates + [0.0] * num_speculative_tokens)[:num_speculative_tokens]
    return tuple(float(r) for r in rates)


def conditional_acceptance_rates(unconditional: Sequence[float]) -> tuple[float, ...]:
    """Turn "first i+1 all accepted" rates into "draft i accepted given i-1 was" rates."""
    out, prev = [], 1.0
    for rate in unconditional:
        out.append(0.0 if prev <= 0.0 else min(1.0, rate / prev))
        prev = rate
    return tuple(out)


class FrozenDict(dict):
    """A read-only dict (picklable, unlike ``MappingProxyType``) for mapping-valued fields."""

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("this mapping is read-only (resolved configs are immutable)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]
    __ior__ = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))


def _call_hook(cls: type[SpeculatorConfig], hook: str, *args: Any) -> Any:
    """Call a config-class hook; a plugin bug becomes a one-line error naming the hook."""
    try:
        return getattr(cls, hook)(*args)
    except SpeculativeConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - never a raw traceback from plugin code
        text = " ".join(str(exc).split())
        raise SpeculativeConfigError(f"{cls.qualname()}.{hook} failed: {type(exc).__name__}: {text}") from exc


def _is_custom_proposer_path(model: object) -> bool:
    return (
        isinstance(model, str)
        and re.fullmatch(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*", model) is not None
        and not os.path.exists(model)
    )


@attrs.frozen(kw_only=True)
class SpeculativeConfig:
    """How to speculate: the draft source, the budget, draft-side overrides, verification and
    special modes. Construct with keywords (or :meth:`from_dict`); the result is resolved
    and read-only."""

    # -- 1. draft source and parallelism ------------------------------------------------
    method: str | None = _field(
        group="source", doc="Method name (built-in or registered); inferred from `model` when empty."
    )
    model: str | None = _field(
        group="source", doc="Draft model, EAGLE head or extra weights: a local HF checkpoint directory."
    )
    revision: str | None = _field(group="source", doc="Revision of the draft checkpoint.")
    code_revision: str | None = _field(group="source", doc="Code revision of the draft checkpoint.")
    custom_method: str | None = _field(
        group="source", kind=_DERIVED, doc="The registered custom method name; set from `method` during resolution."
    )
    draft_tensor_parallel_size: int | None = _field(
        group="source", doc="Draft tensor-parallel size: 1 or the target's (default: the target's)."
    )
    tensor_parallel_size: int | None = _field(
        group="source",
        doc="Not a valid option: present only to point to `draft_tensor_parallel_size` when misused.",
    )
    draft_parallel_config: ParallelConfig | None = _field(
        group="source", kind=_DERIVED, doc="Derived from the target's parallel config (EP only for MoE drafts)."
    )
    draft_load_config: LoadConfig | None = _field(
        group="source", doc="How draft weights are loaded; None: as the target's."
    )
    max_model_len: int | None = _field(
        group="source", doc="Draft context length; capped by the target's and by the draft checkpoint."
    )
    target_model_config: ModelConfig | None = _field(
        group="source", kind=_INJECTED, doc="The target model (injected by create_speculative_config).", eq=False
    )
    target_parallel_config: ParallelConfig | None = _field(
        group="source", kind=_INJECTED, doc="The target's parallel config (injected).", eq=False
    )

    # -- 2. budget and dynamic speculation ----------------------------------------------
    num_speculative_tokens: int | None = _field(
        group="budget", doc="K, drafts per step (> 0); may come from the checkpoint's n_predict."
    )
    num_speculative_tokens_per_batch_size: tuple[tuple[int, int, int], ...] | None = _field(
        group="budget",
        doc="Dynamic K: [start, end, K] inclusive batch-size ranges, non-overlapping, 1 <= K <= "
        "num_speculative_tokens.",
    )
    parallel_drafting: bool = _field(
        False, group="budget", doc="Draft all K tokens in one pass (P-EAGLE, PARD); DFlash/DSpark do it built in."
    )
    disable_padded_drafter_batch: bool = _field(
        False, group="budget", doc="Do not pad the drafter batch (only some attention backends support it)."
    )

    # -- 3. draft-side overrides ---------------------------------------------------------
    quantization: str | None = _field(group="overrides", doc="Quantization of the draft weights.")
    moe_backend: str | None = _field(group="overrides", doc="MoE backend of the draft; None: the target's.")
    attention_backend: str | None = _field(
        group="overrides", doc="Attention backend of the draft (DFlash needs a non-causal one); None: the target's."
    )
    kv_cache_dtype: str | None = _field(group="overrides", doc="dtype of the draft KV cache; None: the target's.")
    draft_lm_head_quantization: Literal["fp8", "nvfp4"] | None = _field(
        group="overrides",
        doc="Quantize the LM head the draft shares; the target verifies with its own head, so only "
        "the acceptance length can change.",
    )
    use_local_argmax_reduction: bool = _field(
        False,
        group="overrides",
        doc="Draft with a vocab-parallel local argmax instead of gathering full logits (greedy drafts only).",
    )

    # -- 4. verification -----------------------------------------------------------------
    rejection_sample_method: RejectionSampleMethod = _field(
        "standard",
        group="verification",
        doc="standard (token-wise), synthetic (preset rates; lossy), block (joint, lossless), fly (lossy).",
    )
    synthetic_acceptance_rates: tuple[float, ...] | None = _field(
        group="verification",
        doc="synthetic: K non-increasing values in [0,1]; entry i = P(first i+1 drafts all accepted).",
    )
    synthetic_acceptance_length: float | None = _field(
        group="verification",
        doc="synthetic: mean acceptance length L (bonus included, 1 <= L <= K+1); turned into rates "
        "by the minimum-variance schedule.",
    )
    fly_window_size: int | None = _field(
        group="verification", doc="fly: deferred window, 1 <= w < K; default min(6, K-1)."
    )
    fly_entropy_threshold: float | None = _field(
        group="verification", doc="fly: target entropy (nats) under which a mismatch may be deferred; None: sampler default."
    )
    draft_sample_method: Literal["greedy", "random"] = _field(
        "greedy",
        group="verification",
        doc="greedy drafts (one-hot for verification) or random drafts sampled from the draft distribution.",
    )
    enable_adaptive_verification: bool = _field(
        False, group="verification", doc="Adapt how many drafts to verify from estimated acceptance."
    )
    adaptive_verification_threshold: float | None = _field(
        group="verification",
        doc="Adaptive verification: verify drafts up to the first whose estimated acceptance is below "
        "this (0 < t <= 1); None: the method's cost-based scheduler.",
    )

    # -- 5. special modes and method-specific options -------------------------------------
    use_heterogeneous_vocab: bool = _field(
        False,
        group="special",
        doc="Draft and target vocabularies differ (TLI): draft_model-like methods with greedy drafts only.",
    )
    suffix_decoding_max_tree_depth: int | None = _field(
        group="special", doc="suffix: maximum tree depth (the default K of a suffix plugin)."
    )
    disable_eagle_block_drop: bool = _field(
        False, group="special", doc="Keep the unstable tail prefix-cache block of EAGLE-style drafters."
    )
    disable_lookahead_block_hashes: bool = _field(
        False, group="special", doc="Do not extend prefix-cache block hashes over the tokens the drafter reads ahead."
    )
    prompt_lookup_min: int | None = _field(group="special", doc="ngram: shortest n-gram to match (default 5).")
    prompt_lookup_max: int | None = _field(group="special", doc="ngram: longest n-gram to match (default 5).")
    eagle_aux_hidden_state_layer_ids: tuple[int, ...] | None = _field(
        group="special", doc="eagle3 / extract_hidden_states: target layers whose states the draft reads."
    )
    index_share_for_mtp_iteration: bool | None = _field(
        group="special", doc="mtp: share the sparse index across MTP iterations."
    )
    dspark_draft_topk: int | None = _field(group="special", doc="dspark: top-k of the draft block.")
    dspark_anchor_sampling: bool | None = _field(
        group="special", doc="dspark: anchor-sampling mode (K lookahead slots instead of K+1)."
    )
    xpress_topc: int | None = _field(group="special", doc="dspark: top-c candidates of the xpress verifier.")
    speculator_options: Mapping[str, Any] | None = _field(
        group="special",
        doc="Free-form options of a third-party method (declare 'speculator_options' as supported).",
        hash=False,
    )

    # -- resolved, not input ---------------------------------------------------------------
    draft_model_config: ModelConfig | None = _field(
        group="source", kind=_DERIVED, doc="The draft's ModelConfig, built by the config class's configure."
    )
    speculator_config: SpeculatorConfig = attrs.field(init=False, repr=False, eq=False)
    """The resolved :class:`SpeculatorConfig` subclass instance (reads this object)."""
    resolution_trace: tuple[tuple[str, str], ...] = attrs.field(init=False, repr=False, eq=False)
    """(step, what happened) pairs, shown by ``specpath explain``."""
    inputs: Mapping[str, Any] = attrs.field(init=False, repr=False, eq=False)
    """The user's input fields as given (what :meth:`replace` starts from)."""

    # ---------------------------------------------------------------------------------------

    @classmethod
    def user_fields(cls) -> tuple[attrs.Attribute, ...]:
        """Fields a user may set (not derived, not injected)."""
        return tuple(
            f for f in attrs.fields(cls) if f.init and f.metadata.get("kind") not in (_DERIVED, _INJECTED)
        )

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        target_model_config: ModelConfig | None = None,
        target_parallel_config: ParallelConfig | None = None,
    ) -> SpeculativeConfig:
        """Structure untrusted input with the strict converter (unknown keys, wrong types and
        derived fields are one-line errors), then resolve."""
        from specpath.config.converter import get_converter

        if not isinstance(data, Mapping):
            raise SpeculativeConfigError("must be a mapping of fields", field="speculative_config", value=data)
        user = {f.name for f in cls.user_fields()}
        for key in data:
            if not isinstance(key, str):
                raise SpeculativeConfigError("keys must be strings", field="speculative_config", value=key)
            if key in user:
                continue
            known = {f.name: f for f in attrs.fields(cls)}
            if key in known and known[key].metadata.get("kind") == _INJECTED:
                raise SpeculativeConfigError(
                    "comes from the target model (create_speculative_config injects it), not from the "
                    "speculative config",
                    field=f"speculative_config.{key}",
                )
            if key in known:
                raise SpeculativeConfigError(
                    "is set during resolution, not given as input", field=f"speculative_config.{key}"
                )
            raise SpeculativeConfigError(
                f"unknown key {key!r}",
                field="speculative_config",
                suggestion=closest_match(key, user),
                allowed=None if closest_match(key, user) else sorted(user),
            )
        try:
            kwargs = get_converter().structure(dict(data), _Input)
        except SpeculativeConfigError:
            raise
        except Exception as exc:  # noqa: BLE001 - the humaniser is the single exit
            raise humanize_structuring_error(exc, field_names=user) from None
        return cls(
            **attrs.asdict(kwargs, recurse=False),
            target_model_config=target_model_config,
            target_parallel_config=target_parallel_config,
        )

    def replace(self, **changes: Any) -> SpeculativeConfig:
        """A new config resolved from this one's inputs with ``changes`` applied."""
        kwargs = dict(self.inputs)
        kwargs.update(changes)
        kwargs.setdefault("target_model_config", self.target_model_config)
        kwargs.setdefault("target_parallel_config", self.target_parallel_config)
        return type(self)(**kwargs)

    def __attrs_post_init__(self) -> None:
        _Resolver(self).run()

    # -- derived values --------------------------------------------------------------------

    @property
    def synthetic_rates(self) -> tuple[float, ...] | None:
        """Unconditional per-position acceptance rates for ``synthetic`` (given or scheduled)."""
        if self.synthetic_acceptance_rates is not None:
            return self.synthetic_acceptance_rates
        if self.synthetic_acceptance_length is not None:
            return min_variance_acceptance_rates(self.synthetic_acceptance_length, self.num_speculative_tokens)
        return None

    @property
    def is_lossy(self) -> bool:
        return self.rejection_sample_method in LOSSY_REJECTION_SAMPLE_METHODS

    def use_eagle_block_drop(self) -> bool:
        """Drop the unstable tail prefix-cache block (drafters whose KV at p needs token p+1)."""
        return self.speculator_config.draft_kv_depends_on_next_token and not self.disable_eagle_block_drop

    def compute_hash(self) -> str:
        """A hash of every factor that changes the computation graph from input ids to the final
        hidden states, for compile caches. WARNING: a new graph-affecting field must be added
        here (or to the class's ``hash_factors``), or two configs share a cache entry."""
        spec_cls = type(self.speculator_config)
        factors = {
            "method": self.method,
            "custom_method": self.custom_method,
            "config_class": spec_cls.qualname(),
            "uses_aux_hidden_states": spec_cls.uses_aux_hidden_states,
            "uses_target_hidden_states": spec_cls.uses_target_hidden_states,
            "draft_model": None if self.draft_model_config is None else self.draft_model_config.compute_hash(),
            "draft_model_path": self.model,
            "num_speculative_tokens": self.num_speculative_tokens,
            "parallel_drafting": self.parallel_drafting,
            "disable_padded_drafter_batch": self.disable_padded_drafter_batch,
            "draft_tensor_parallel_size": self.draft_tensor_parallel_size,
            "quantization": self.quantization,
            "moe_backend": self.moe_backend,
            "attention_backend": self.attention_backend,
            "kv_cache_dtype": self.kv_cache_dtype,
            "draft_lm_head_quantization": self.draft_lm_head_quantization,
            "use_local_argmax_reduction": self.use_local_argmax_reduction,
            "eagle_aux_hidden_state_layer_ids": self.eagle_aux_hidden_state_layer_ids,
            "speculator_options": sorted((self.speculator_options or {}).items()),
            "hash_factors": list(self.speculator_config.hash_factors()),
        }
        text = json.dumps(factors, sort_keys=True, default=repr)
        return hashlib.sha256(text.encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        """The resolved user-facing fields, JSON-friendly."""
        out = {}
        for f in self.user_fields():
            value = getattr(self, f.name)
            if isinstance(value, Mapping):
                value = dict(value)
            elif isinstance(value, tuple):
                value = json.loads(json.dumps(value))
            elif attrs.has(type(value)):
                value = attrs.asdict(value)
            out[f.name] = value
        out["custom_method"] = self.custom_method
        return out


FIELD_GROUPS: dict[str, str] = {
    "source": "draft source and parallelism",
    "budget": "budget and dynamic speculation",
    "overrides": "draft-side overrides",
    "verification": "rejection sampling and verification",
    "special": "special modes and method-specific options",
}
"""The article's five field groups, in order."""


def field_reference() -> list[dict[str, Any]]:
    """Every field a user may set: group, name, type, default and documentation."""
    attrs.resolve_types(SpeculativeConfig)
    rows = []
    for f in SpeculativeConfig.user_fields():
        type_name = str(f.type).replace("typing.", "").replace("collections.abc.", "")
        rows.append({
            "group": f.metadata[_GROUP],
            "name": f.name,
            "type": type_name,
            "default": f.default,
            "doc": f.metadata["doc"],
            "method_specific": f.name in METHOD_SPECIFIC_OPTIONS,
        })
    order = list(FIELD_GROUPS)
    return sorted(rows, key=lambda r: order.index(r["group"]))


def _make_input_class() -> type:
    """An attrs class holding exactly the user fields, so the strict converter structures
    (and type-checks) input without running resolution."""
    attrs.resolve_types(SpeculativeConfig)
    these = {
        f.name: attrs.field(default=f.default, type=f.type)
        for f in SpeculativeConfig.user_fields()
    }
    return attrs.make_class("SpeculativeConfigInput", these, frozen=True, kw_only=True)


class _Resolver:
    """Runs the resolution steps on a config under construction (object.__setattr__)."""

    def __init__(self, spec: SpeculativeConfig) -> None:
        self.spec = spec
        self.trace: list[tuple[str, str]] = []

    # -- helpers ---------------------------------------------------------------------------

    def set(self, **updates: Any) -> None:
        for name, value in updates.items():
            object.__setattr__(self.spec, name, value)

    def note(self, step: str, detail: str) -> None:
        self.trace.append((step, detail))

    def apply_updates(self, owner: type, hook: str, updates: Mapping[str, Any]) -> None:
        names = {f.name for f in attrs.fields(SpeculativeConfig) if f.init}
        if not isinstance(updates, Mapping):
            raise SpeculativeConfigError(
                f"{owner.qualname()}.{hook} must return a mapping of field updates", value=updates
            )
        for key in updates:
            if key not in names:
                raise SpeculativeConfigError(
                    f"{owner.qualname()}.{hook} returned an unknown field",
                    field="speculative_config",
                    value=key,
                    suggestion=closest_match(key, names),
                )
        who = f"{owner.qualname()}.{hook}"
        fields = attrs.fields_dict(SpeculativeConfig)
        user = {f.name for f in SpeculativeConfig.user_fields()}
        checked = {}
        for key, value in updates.items():
            if key in user:
                checked[key] = self.structure_field(fields[key], value, who)
            elif fields[key].metadata.get("kind") == _INJECTED:
                raise SpeculativeConfigError(f"{who} may not change the injected field {key!r}")
            else:
                expected = {"draft_model_config": ModelConfig, "draft_parallel_config": ParallelConfig}.get(key, str)
                if value is not None and not isinstance(value, expected):
                    raise SpeculativeConfigError(
                        f"{who} set {key} to a {type(value).__name__}, expected {expected.__name__}"
                    )
                checked[key] = value
        changed = {k for k, v in checked.items() if getattr(self.spec, k) != v or k == "draft_model_config"}
        self.set(**checked)
        if changed:
            self.note(hook, f"{owner.__name__}.{hook} set " + ", ".join(sorted(changed)))

    # -- steps -----------------------------------------------------------------------------

    def run(self) -> None:
        spec = self.spec
        self.check_types()
        inputs = {f.name: getattr(spec, f.name) for f in SpeculativeConfig.user_fields()}
        self.set(inputs=FrozenDict(inputs))
        given = {k: v for k, v in inputs.items() if v != attrs.fields_dict(SpeculativeConfig)[k].default}
        self.note("input", json.dumps(given, sort_keys=True, default=repr))
        self.check_inputs()
        config_cls, declared = self.dispatch()
        self.default_model(config_cls)
        self.apply_updates(config_cls, "configure", _call_hook(config_cls, "configure", spec))
        final_cls = self.pick_class(config_cls, declared)
        self.check_supported_options(final_cls)
        self.set(speculator_config=final_cls(spec=spec))
        self.verify_args(final_cls)
        speculator = spec.speculator_config
        values = {}
        for name in ("num_lookahead_tokens", "num_prefill_lookahead_tokens", "max_num_new_slots_for_drafting"):
            try:
                value = getattr(speculator, name)
            except Exception as exc:  # noqa: BLE001 - a property bug is a start-up error too
                raise SpeculativeConfigError(
                    f"{final_cls.qualname()}.{name} failed: {type(exc).__name__}: {' '.join(str(exc).split())}"
                ) from exc
            if type(value) is not int or value < 0:
                raise SpeculativeConfigError(f"{final_cls.qualname()}.{name} must be an int >= 0", value=value)
            values[name] = value
        self.note(
            "result",
            f"method={spec.method!r} custom_method={spec.custom_method!r} K={spec.num_speculative_tokens} "
            f"lookahead={values['num_lookahead_tokens']} prefill_lookahead={values['num_prefill_lookahead_tokens']} "
            f"extra_slots={values['max_num_new_slots_for_drafting']}",
        )
        self.set(resolution_trace=tuple(self.trace))

    def structure_field(self, f: attrs.Attribute, value: Any, who: str = "") -> Any:
        """Strictly type-check one user field's value; lists become tuples, dicts read-only."""
        from specpath.config.converter import get_converter

        if value is None:
            return None
        try:
            structured = get_converter().structure(value, f.type)
        except Exception as exc:  # noqa: BLE001 - the humaniser is the single exit
            err = humanize_structuring_error(exc, root=f"speculative_config.{f.name}")
            if who:
                raise SpeculativeConfigError(f"{who} set an invalid value: {err}") from None
            raise err from None
        if f.name == "num_speculative_tokens_per_batch_size":
            return tuple(tuple(r) for r in structured)
        if isinstance(structured, list):
            return tuple(structured)
        if isinstance(structured, Mapping):
            return FrozenDict(dict(structured))
        return structured

    def check_types(self) -> None:
        """Direct construction gets the same strict type checks as :meth:`from_dict`."""
        for f in SpeculativeConfig.user_fields():
            object.__setattr__(self.spec, f.name, self.structure_field(f, getattr(self.spec, f.name)))
        for f in attrs.fields(SpeculativeConfig):
            if f.metadata.get("kind") == _DERIVED and getattr(self.spec, f.name) is not None:
                raise SpeculativeConfigError(
                    "is set during resolution, not given as input (use SpeculativeConfig.replace to "
                    "derive a new config)",
                    field=f"speculative_config.{f.name}",
                )
        for name, cls in (("target_model_config", ModelConfig), ("target_parallel_config", ParallelConfig)):
            value = getattr(self.spec, name)
            if value is not None and not isinstance(value, cls):
                raise SpeculativeConfigError(f"must be a {cls.__name__}", field=name, value=value)

    def check_inputs(self) -> None:
        spec = self.spec
        if spec.tensor_parallel_size is not None:
            raise SpeculativeConfigError(
                "is not a valid argument in the speculative config; pass draft_tensor_parallel_size instead",
                field="speculative_config.tensor_parallel_size",
                value=spec.tensor_parallel_size,
                suggestion="draft_tensor_parallel_size",
            )
        if spec.model is not None and not spec.model.strip():
            raise SpeculativeConfigError("must not be empty", field="speculative_config.model", value=spec.model)
        k = spec.num_speculative_tokens
        if k is not None and k <= 0:
            raise SpeculativeConfigError(
                "must be greater than 0", field="speculative_config.num_speculative_tokens", value=k
            )
        for name in ("draft_tensor_parallel_size", "max_model_len", "prompt_lookup_min", "prompt_lookup_max",
                     "dspark_draft_topk", "xpress_topc", "suffix_decoding_max_tree_depth", "fly_window_size"):
            value = getattr(spec, name)
            if value is not None and value < 1:
                raise SpeculativeConfigError("must be >= 1", field=f"speculative_config.{name}", value=value)
        for name in ("synthetic_acceptance_length", "fly_entropy_threshold"):
            value = getattr(spec, name)
            if value is not None and not math.isfinite(value):
                raise SpeculativeConfigError("must be finite", field=f"speculative_config.{name}", value=value)

    def dispatch(self) -> tuple[type[SpeculatorConfig], _Declared | None]:
        """Custom method / inference / alias / validation / class lookup."""
        from specpath.registry import (
            builtin_config_class,
            get_custom_speculator_config_class,
            unknown_method_error,
        )

        spec = self.spec
        method, custom = spec.method, None
        custom_cls = get_custom_speculator_config_class(method)
        declared = None
        if custom_cls is not None:
            custom, method = method, custom_cls.base_method
            self.note("custom", f"registered custom method {custom!r} builds on {method!r}")
        elif method is None and _is_custom_proposer_path(spec.model):
            method = "custom_class"
            self.note("infer", f"model {spec.model!r} looks like an import path: method 'custom_class'")
        elif method is None and spec.model in NGRAM_MODEL_NAMES:
            method = "ngram"
            self.note("infer", f"model {spec.model!r}: method 'ngram'")
        elif method is None and spec.model is None:
            method = "draft_model"
            self.note("infer", "no method and no model: method 'draft_model'")
        if method is not None and custom is None:
            normalised = normalize_method(method)
            if normalised != method:
                self.note("alias", f"{method!r} normalised to {normalised!r}")
            method = normalised
            if method not in BUILTIN_METHODS:
                raise unknown_method_error(method)
        if method is None:
            method, custom, declared = self.infer_from_checkpoint()
            if custom is not None:
                custom_cls = get_custom_speculator_config_class(custom)
        self.set(method=method, custom_method=custom)
        if custom_cls is not None:
            self.note("class", f"{custom_cls.qualname()} (registered for custom method {custom!r})")
            return custom_cls, declared
        registration = builtin_config_class(method)
        self.note("class", f"{registration.config_class.qualname()} (bound to {method!r} by {registration.origin})")
        return registration.config_class, declared

    def checkpoint(self) -> DraftCheckpoint | None:
        spec = self.spec
        if spec.draft_model_config is not None:
            return DraftCheckpoint(spec.model, spec.draft_model_config.hf_config.to_dict())
        if spec.model is None:
            return None
        config: dict[str, Any] = {}
        if os.path.isfile(os.path.join(spec.model, "config.json")):
            config = load_hf_config(spec.model, field="speculative_config.model")
        return DraftCheckpoint(spec.model, config)

    def declared_class(self, checkpoint: DraftCheckpoint | None) -> _Declared | None:
        """What the checkpoint's config.json declares: a registered method name, or with
        trust_remote_code a ``module:Class`` import path."""
        from specpath.registry import get_custom_speculator_config_class, unknown_method_error

        if checkpoint is None or DECLARED_CLASS_KEY not in checkpoint.config:
            return None
        value = checkpoint.config[DECLARED_CLASS_KEY]
        field = f"{checkpoint.path}/config.json:{DECLARED_CLASS_KEY}"
        if not isinstance(value, str):
            raise SpeculativeConfigError("must be a method name", field=field, value=value)
        if ":" in value:
            target = self.spec.target_model_config
            if not (target is not None and target.trust_remote_code):
                raise SpeculativeConfigError(
                    "declares its config class by import path; only registered method names are "
                    "allowed unless trust_remote_code=True",
                    field=field,
                    value=value,
                )
            module, _, name = value.partition(":")
            try:
                cls = getattr(importlib.import_module(module), name)
            except Exception as exc:  # noqa: BLE001
                raise SpeculativeConfigError(f"cannot import it: {exc}", field=field, value=value) from None
            if not (isinstance(cls, type) and issubclass(cls, SpeculatorConfig)):
                raise SpeculativeConfigError("is not a SpeculatorConfig subclass", field=field, value=value)
            return _Declared(value, cls.base_method, cls, "checkpoint import path (trust_remote_code)")
        custom = get_custom_speculator_config_class(value)
        if custom is not None:
            return _Declared(value, custom.base_method, custom, "checkpoint declares registered method")
        name = normalize_method(value)
        if name not in BUILTIN_METHODS:
            err = unknown_method_error(value)
            raise SpeculativeConfigError(err.problem, field=field, value=value, suggestion=err.suggestion)
        return _Declared(name, name, None, "checkpoint declares built-in method")

    def infer_from_checkpoint(self) -> tuple[str, str | None, _Declared | None]:
        from specpath import plugins
        from specpath.registry import find_registration, get_custom_speculator_config_class

        checkpoint = self.checkpoint()
        declared = self.declared_class(checkpoint)
        if declared is not None:
            cls = declared.config_class
            custom = declared.name if cls is not None and get_custom_speculator_config_class(declared.name) is cls else None
            self.note("infer", f"{declared.how}: {declared.name!r}")
            return declared.base_method, custom, declared
        detected = plugins.detect_method(checkpoint)
        if detected is not None:
            if not isinstance(detected, str):
                raise SpeculativeConfigError(
                    "a specpath_detect_method hook returned a non-string", field="speculative_config.model", value=detected
                )
            custom_cls = get_custom_speculator_config_class(detected)
            if custom_cls is not None:
                self.note("infer", f"a plugin's specpath_detect_method recognised custom method {detected!r}")
                return custom_cls.base_method, detected, _Declared(detected, custom_cls.base_method, custom_cls, "plugin detection")
            name = normalize_method(detected)
            if name not in BUILTIN_METHODS:
                raise SpeculativeConfigError(
                    "a specpath_detect_method hook returned an unknown method",
                    field="speculative_config.model",
                    value=detected,
                )
            self.note("infer", f"a plugin's specpath_detect_method recognised {name!r}")
            return name, None, None
        for method in CHECKPOINT_DETECTION_ORDER:
            registration = find_registration(method)
            if registration is not None and _call_hook(registration.config_class, "matches", checkpoint):
                self.note("infer", f"{registration.config_class.__name__}.matches recognised the checkpoint: {method!r}")
                return method, None, None
        self.note("infer", "no method given and the checkpoint was not recognised: 'draft_model'")
        return "draft_model", None, None

    def default_model(self, config_cls: type[SpeculatorConfig]) -> None:
        if self.spec.model is None:
            model = _call_hook(config_cls, "default_model", self.spec)
            if model is not None:
                self.set(model=model)
                self.note("default_model", f"{config_cls.__name__}.default_model: {model!r}")

    def pick_class(self, config_cls: type[SpeculatorConfig], declared: _Declared | None) -> type[SpeculatorConfig]:
        """The checkpoint-declared class (which must agree with the requested method), else
        ``specialize``."""
        spec = self.spec
        if declared is None:  # the method was requested: check what the checkpoint says
            declared = self.declared_class(self.checkpoint())
            if declared is not None and declared.base_method != spec.method:
                requested = spec.custom_method or spec.method
                raise SpeculativeConfigError(
                    f"requested method={requested!r}, but the draft model {spec.model!r} is a "
                    f"{declared.base_method!r} checkpoint ({declared.how} {declared.name!r}); drop 'method' "
                    "or use a matching checkpoint",
                    field="speculative_config.method",
                    value=requested,
                )
        cls = None if declared is None else declared.config_class
        if cls is not None and cls is not config_cls:
            if issubclass(cls, config_cls):
                self.note("class", f"{cls.qualname()} ({declared.how} {declared.name!r})")
                return cls
            if not issubclass(config_cls, cls):  # a requested subclass is more specific: keep it
                raise SpeculativeConfigError(
                    f"the checkpoint declares {cls.qualname()}, which does not extend {config_cls.qualname()}",
                    field="speculative_config.model",
                    value=spec.model,
                )
        final = _call_hook(config_cls, "specialize", spec)
        if not (isinstance(final, type) and issubclass(final, config_cls)):
            raise SpeculativeConfigError(
                f"{config_cls.qualname()}.specialize must return a subclass of it", value=final
            )
        if final is not config_cls:
            self.note("class", f"{final.qualname()} ({config_cls.__name__}.specialize)")
        return final

    def check_supported_options(self, cls: type[SpeculatorConfig]) -> None:
        for option in METHOD_SPECIFIC_OPTIONS:
            if getattr(self.spec, option) is not None and option not in cls.supported_options:
                raise SpeculativeConfigError(
                    f"is not supported by method {self.spec.custom_method or self.spec.method!r} "
                    f"({cls.__name__})",
                    field=f"speculative_config.{option}",
                    value=getattr(self.spec, option),
                    allowed=sorted(cls.supported_options) or ["(no method-specific options)"],
                )

    # -- _verify_args ----------------------------------------------------------------------

    def verify_args(self, cls: type[SpeculatorConfig]) -> None:
        spec = self.spec
        name = spec.custom_method or spec.method
        k = spec.num_speculative_tokens
        if k is None:
            raise SpeculativeConfigError(
                f"must be provided for method {name!r} (the draft checkpoint declares no n_predict)",
                field="speculative_config.num_speculative_tokens",
            )
        if k <= 0:
            raise SpeculativeConfigError("must be greater than 0", field="speculative_config.num_speculative_tokens", value=k)
        self.check_inputs()  # again: configure may have filled fields
        self.verify_dynamic_k(k)
        self.verify_prompt_lookup()
        self.verify_synthetic(k)
        self.verify_adaptive()
        self.verify_fly(k, cls)
        self.verify_vocab(cls)
        self.verify_draft_parallel(cls)
        self.verify_aux_layers()
        if spec.draft_lm_head_quantization is not None and spec.draft_model_config is not None:
            draft = spec.draft_model_config
            if draft.head_dtype != draft.dtype:
                raise SpeculativeConfigError(
                    f"needs the draft's LM head in the model dtype ({draft.dtype}), but it is {draft.head_dtype}",
                    field="speculative_config.draft_lm_head_quantization",
                    value=spec.draft_lm_head_quantization,
                )
        _call_hook(cls, "verify", spec)

    def verify_dynamic_k(self, k: int) -> None:
        table = self.spec.num_speculative_tokens_per_batch_size
        if table is None:
            return
        field = "speculative_config.num_speculative_tokens_per_batch_size"
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
                    f"ranges overlap: {list(prev)} and {list(cur)} (ranges are inclusive)", field=field, value=list(map(list, table))
                )

    def verify_prompt_lookup(self) -> None:
        lo, hi = self.spec.prompt_lookup_min, self.spec.prompt_lookup_max
        if lo is not None and hi is not None and lo > hi:
            raise SpeculativeConfigError(
                f"must be <= prompt_lookup_max ({hi})", field="speculative_config.prompt_lookup_min", value=lo
            )

    def verify_adaptive(self) -> None:
        spec = self.spec
        threshold = spec.adaptive_verification_threshold
        if threshold is None:
            return
        field = "speculative_config.adaptive_verification_threshold"
        if not spec.enable_adaptive_verification:
            raise SpeculativeConfigError("is only valid with enable_adaptive_verification=true", field=field, value=threshold)
        if not (math.isfinite(threshold) and 0.0 < threshold <= 1.0):
            raise SpeculativeConfigError("must be in (0, 1]", field=field, value=threshold)

    def verify_synthetic(self, k: int) -> None:
        spec = self.spec
        rates, length = spec.synthetic_acceptance_rates, spec.synthetic_acceptance_length
        if spec.rejection_sample_method != "synthetic":
            if rates is not None or length is not None:
                raise SpeculativeConfigError(
                    "synthetic_acceptance_rates / synthetic_acceptance_length are only valid with "
                    "rejection_sample_method='synthetic'",
                    field="speculative_config.rejection_sample_method",
                    value=spec.rejection_sample_method,
                )
            return
        if (rates is None) == (length is None):
            raise SpeculativeConfigError(
                "rejection_sample_method='synthetic' requires exactly one of synthetic_acceptance_rates "
                "or synthetic_acceptance_length",
                field="speculative_config.synthetic_acceptance_rates",
            )
        if rates is not None:
            field = "speculative_config.synthetic_acceptance_rates"
            if len(rates) != k:
                raise SpeculativeConfigError(f"must have num_speculative_tokens ({k}) entries", field=field, value=list(rates))
            if any(not (0.0 <= r <= 1.0) for r in rates):
                raise SpeculativeConfigError("every rate must be in [0, 1]", field=field, value=list(rates))
            if any(b > a for a, b in zip(rates, rates[1:])):
                raise SpeculativeConfigError(
                    "must be non-increasing (entry i is P(first i+1 drafts all accepted))", field=field, value=list(rates)
                )
        else:
            if not 1.0 <= length <= k + 1:
                raise SpeculativeConfigError(
                    f"must be in [1, num_speculative_tokens + 1] = [1, {k + 1}]",
                    field="speculative_config.synthetic_acceptance_length",
                    value=length,
                )
        self.lossy_warning("synthetic acceptance accepts drafts at preset rates, not by the target distribution")

    def verify_fly(self, k: int, cls: type[SpeculatorConfig]) -> None:
        spec = self.spec
        field = "speculative_config.fly_window_size"
        if spec.rejection_sample_method != "fly":
            if spec.fly_window_size is not None or spec.fly_entropy_threshold is not None:
                raise SpeculativeConfigError(
                    "fly_window_size / fly_entropy_threshold are only valid with rejection_sample_method='fly'",
                    field="speculative_config.rejection_sample_method",
                    value=spec.rejection_sample_method,
                )
            return
        if not cls.proposes_draft_tokens:
            raise SpeculativeConfigError(
                f"'fly' needs a drafter that proposes tokens; {cls.__name__} does not",
                field="speculative_config.rejection_sample_method",
                value="fly",
            )
        if k < 2:
            raise SpeculativeConfigError(
                "rejection_sample_method='fly' needs num_speculative_tokens >= 2",
                field="speculative_config.num_speculative_tokens",
                value=k,
            )
        if spec.fly_window_size is None:
            self.set(fly_window_size=min(6, k - 1))
            self.note("fly", f"fly_window_size defaults to min(6, K-1) = {spec.fly_window_size}")
        elif spec.fly_window_size >= k:
            raise SpeculativeConfigError(
                f"must be less than num_speculative_tokens ({k})", field=field, value=spec.fly_window_size
            )
        if spec.fly_entropy_threshold is not None and spec.fly_entropy_threshold < 0:
            raise SpeculativeConfigError(
                "must be >= 0", field="speculative_config.fly_entropy_threshold", value=spec.fly_entropy_threshold
            )
        self.lossy_warning("FLy verification is lossy: it may change the output distribution")

    def lossy_warning(self, text: str) -> None:
        warnings.warn(text, LossyVerificationWarning, stacklevel=6)
        self.note("lossy", text)

    def verify_vocab(self, cls: type[SpeculatorConfig]) -> None:
        spec = self.spec
        if spec.use_heterogeneous_vocab:
            field = "speculative_config.use_heterogeneous_vocab"
            if not cls.draft_has_own_vocab:
                raise SpeculativeConfigError(
                    f"needs a drafter with its own vocabulary (method 'draft_model'); "
                    f"{spec.custom_method or spec.method!r} shares the target's",
                    field=field,
                    value=True,
                )
            if spec.draft_sample_method != "greedy":
                raise SpeculativeConfigError(
                    "needs greedy drafts (restricting the vocabulary would change a sampled draft distribution)",
                    field="speculative_config.draft_sample_method",
                    value=spec.draft_sample_method,
                    allowed=["greedy"],
                )
            if spec.use_local_argmax_reduction:
                raise SpeculativeConfigError(
                    "cannot be combined with use_local_argmax_reduction (the token intersection needs "
                    "full draft logits)",
                    field=field,
                    value=True,
                )
            return
        if spec.use_local_argmax_reduction and spec.draft_sample_method != "greedy":
            raise SpeculativeConfigError(
                "use_local_argmax_reduction only supports greedy drafts",
                field="speculative_config.draft_sample_method",
                value=spec.draft_sample_method,
            )
        draft, target = spec.draft_model_config, spec.target_model_config
        if cls.draft_has_own_vocab and draft is not None and target is not None:
            if draft.vocab_size is not None and target.vocab_size is not None and draft.vocab_size != target.vocab_size:
                raise SpeculativeConfigError(
                    f"the draft vocabulary ({draft.vocab_size}) differs from the target's ({target.vocab_size}); "
                    "set use_heterogeneous_vocab=true",
                    field="speculative_config.model",
                    value=spec.model,
                )

    def verify_draft_parallel(self, cls: type[SpeculatorConfig]) -> None:
        spec = self.spec
        target_parallel = spec.target_parallel_config or ParallelConfig()
        if target_parallel.prefill_context_parallel_size > 1 and not cls.supports_pcp:
            raise SpeculativeConfigError(
                f"{cls.__name__} does not support prefill context parallelism",
                field="parallel_config.prefill_context_parallel_size",
                value=target_parallel.prefill_context_parallel_size,
            )
        if spec.draft_model_config is not None and spec.draft_parallel_config is not None:
            spec.draft_model_config.verify_with_parallel_config(
                spec.draft_parallel_config, field="speculative_config.draft_parallel_config"
            )

    def verify_aux_layers(self) -> None:
        spec = self.spec
        ids = spec.eagle_aux_hidden_state_layer_ids
        if ids is None:
            return
        field = "speculative_config.eagle_aux_hidden_state_layer_ids"
        layers = None if spec.target_model_config is None else spec.target_model_config.num_hidden_layers
        for layer in ids:  # id i: the state entering layer i (vLLM); N: the last layer's output
            if layer < 0 or (layers is not None and layer > layers):
                raise SpeculativeConfigError(
                    f"layer ids must be in [0, {layers}]" if layers else "layer ids must be >= 0",
                    field=field,
                    value=list(ids),
                )


_Input = _make_input_class()
