"""``SpeculativeConfig``: user input in, one fully resolved, read-only execution path out.

This module is the schema: the fields (grouped as in vLLM's speculative config, each with its
documentation and the field rules that check its value), how a config is built from untrusted
input (:meth:`SpeculativeConfig.from_dict`), changed (:meth:`SpeculativeConfig.replace`),
hashed and exported. Construction runs the resolution once (:mod:`specpath.config.resolution`:
a sequence of named steps, each traced for ``specpath explain``); the cross-field rules live
in :mod:`specpath.config.rules`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from specpath.config import rules
from specpath.config.checkpoint import DraftCheckpoint
from specpath.config.frozen import FrozenDict
from specpath.config.model import LoadConfig, ModelConfig, ParallelConfig
from specpath.config.rules import LossyVerificationWarning
from specpath.errors import SpeculativeConfigError, closest_match
from specpath.verification import (
    LOSSY_METHODS,
    RejectionSampleMethod,
    acceptance_length_to_rates,
)

__all__ = [
    "LOSSY_REJECTION_SAMPLE_METHODS",
    "METHOD_SPECIFIC_OPTIONS",
    "DraftCheckpoint",
    "FrozenDict",
    "LossyVerificationWarning",
    "RejectionSampleMethod",
    "SpeculativeConfig",
    "supports_option",
]

LOSSY_REJECTION_SAMPLE_METHODS = LOSSY_METHODS
"""Verification modes that may change the output distribution (warned about, and marked)."""

GROUP, DOC, KIND, CHECK, METHOD_SPECIFIC, APPLIES_IF = (
    "group", "doc", "kind", "check", "method_specific", "applies_if"
)
"""Field metadata keys: the field group, its documentation, derived/injected, its field rules,
whether only some methods accept it, and the capability flags that make a method accept it."""
DERIVED, INJECTED, REFUSED = "derived", "injected", "refused"
"""Field kinds: set during resolution, injected by the engine, or accepted only to be refused
with a pointer to the right option (kept out of ``specpath fields``)."""

_AT_LEAST_1 = (rules.at_least(1),)
_NAME = (rules.plain_text(64),)
_MODEL_DRAFTERS = ("uses_target_hidden_states", "draft_has_own_vocab")
"""Capabilities of drafters with weights (what ``parallel_drafting`` can apply to)."""

DEFAULT_CATCH_UP_WINDOW = 64
"""``catch_up_window`` where none is configured: as long as the longest wait between probes
(``specpath_engine.draft_governor.MAX_WAIT``), so what it cuts is the long catch-ups after the
guard's back-offs (SmolLM2-135M int4, 8 completions: 1,446 positions handed over in one burst)."""

MAX_SPECULATIVE_TOKENS = 1024
"""A sanity cap on K: every request reserves KV slots and sampler rows per draft, so a larger
K is a typo or an attack, never a configuration (published drafters use K <= 16)."""


def _field(
    default: Any = None,
    *,
    group: str,
    doc: str,
    kind: str | None = None,
    check: Sequence[rules.FieldRule] = (),
    method_specific: bool = False,
    applies_if: Sequence[str] = (),
    **kw: Any,
) -> Any:
    """A schema field. A ``method_specific`` option is accepted only by a config class that
    lists it in ``supported_options`` or has one of the ``applies_if`` capability flags."""
    metadata = {
        GROUP: group,
        DOC: doc,
        KIND: kind,
        CHECK: tuple(check),
        METHOD_SPECIFIC: method_specific or bool(applies_if),
        APPLIES_IF: tuple(applies_if),
    }
    return attrs.field(default=default, metadata=metadata, **kw)


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
        group="source", doc="Draft model, EAGLE head or extra weights: a local HF checkpoint directory.",
        check=(rules.not_blank(),),
    )
    revision: str | None = _field(group="source", doc="Revision of the draft checkpoint.")
    code_revision: str | None = _field(group="source", doc="Code revision of the draft checkpoint.")
    custom_method: str | None = _field(
        group="source", kind=DERIVED, doc="The registered custom method name; set from `method` during resolution."
    )
    draft_tensor_parallel_size: int | None = _field(
        group="source", doc="Draft tensor-parallel size: 1 or the target's (default: the target's).",
        check=_AT_LEAST_1,
    )
    tensor_parallel_size: int | None = _field(
        group="source",
        kind=REFUSED,
        doc="Not a valid option: present only to point to `draft_tensor_parallel_size` when misused.",
        check=(
            rules.refused(
                "is not a valid argument in the speculative config; pass draft_tensor_parallel_size instead",
                suggestion="draft_tensor_parallel_size",
            ),
        ),
    )
    draft_parallel_config: ParallelConfig | None = _field(
        group="source", kind=DERIVED, doc="Derived from the target's parallel config (EP only for MoE drafts)."
    )
    draft_load_config: LoadConfig | None = _field(
        group="source", doc="How draft weights are loaded; None: as the target's."
    )
    max_model_len: int | None = _field(
        group="source", doc="Draft context length; capped by the target's and by the draft checkpoint.",
        check=_AT_LEAST_1,
    )
    target_model_config: ModelConfig | None = _field(
        group="source", kind=INJECTED, doc="The target model (injected by create_speculative_config).", eq=False
    )
    target_parallel_config: ParallelConfig | None = _field(
        group="source", kind=INJECTED, doc="The target's parallel config (injected).", eq=False
    )
    model_free_drafter: Mapping[str, Any] | None = _field(
        group="source",
        doc="A model-free method beside the drafter, e.g. {'method': 'suffix'}: both draft each step, and "
        "a request's model-free draft (at least `model_free_min_tokens` long) is verified instead of the "
        "drafter's where it extends it or, where the two part, where the request's record of such "
        "partings favours it. Keys: `method`, `num_speculative_tokens` (<= K; default K) and that "
        "method's own options. Default: the shipped drafter's companion where it has one (suffix "
        "beside SmolLM2's EAGLE-3, MTP, DFlash and DSpark); `{}`: none.",
        hash=False,
    )
    model_free_min_tokens: int | None = _field(
        group="source",
        doc="With `model_free_drafter`: the shortest model-free draft that replaces the drafter's "
        "(default 2).",
        check=_AT_LEAST_1,
    )
    model_free_config: SpeculativeConfig | None = _field(
        group="source", kind=DERIVED,
        doc="`model_free_drafter` resolved as a speculative config of its own (same target).",
        eq=False, repr=False,
    )

    # -- 2. budget and dynamic speculation ----------------------------------------------
    num_speculative_tokens: int | None = _field(
        group="budget",
        doc=f"K, drafts per step (1..{MAX_SPECULATIVE_TOKENS}); may come from the checkpoint's n_predict.",
        check=(rules.greater_than_zero(), rules.at_most(MAX_SPECULATIVE_TOKENS)),
    )
    num_speculative_tokens_per_batch_size: tuple[tuple[int, int, int], ...] | None = _field(
        group="budget",
        doc="Dynamic K: [start, end, K] inclusive batch-size ranges, non-overlapping, 1 <= K <= "
        "num_speculative_tokens.",
    )
    draft_length_policy: Literal["adaptive", "fixed"] = _field(
        "adaptive",
        group="budget",
        doc="adaptive: each step the engine chooses every request's draft length for the whole batch, "
        "as many tokens as their running acceptance makes pay against the step's measured costs (the "
        "target's per extra row, the drafter's per call, request and pass), down to plain decoding "
        "(lossless: verification accepts any length); fixed: always up to K.",
    )
    draft_pass_cost: float | None = _field(
        group="budget",
        doc="adaptive: pins the cost of one drafter pass relative to a plain target step (0..10; a pass "
        "drafts one token, or all K for drafters that draft in one pass): the drafter is priced at "
        "this fraction of the measured plain step instead of being timed; None: timed, starting from "
        "the drafter's own estimate (the bytes of its weights against the target's).",
        check=(rules.finite(), rules.at_least(0, "must be >= 0"), rules.at_most(10)),
    )
    catch_up_window: int | None = _field(
        group="budget",
        doc="A drafter with weights is handed a request only in steps where it drafts, then every position "
        "since: a catch-up of more than this many positions (after a back-off) restarts the request in the "
        "drafter from its newest this many, so no exploration burst or probe costs more than that many "
        "drafter rows a request; a prompt is handed over whole (drafts stay verified: output never "
        f"changes). None: {DEFAULT_CATCH_UP_WINDOW}; 0: every position.",
        check=(rules.at_least(0, "must be >= 0"),),
        applies_if=_MODEL_DRAFTERS,
    )
    parallel_drafting: bool | None = _field(
        None,
        group="budget",
        doc="Draft all K tokens in one pass (P-EAGLE, PARD); DFlash/DSpark do it built in. None: what "
        "the draft checkpoint declares (config.json `parallel_drafting: true`: trained for it, as "
        "`specpath train --variant` writes), else False; resolved to a bool.",
        applies_if=_MODEL_DRAFTERS,
    )
    disable_padded_drafter_batch: bool = _field(
        False, group="budget", doc="Do not pad the drafter batch (only some attention backends support it)."
    )

    # -- 3. draft-side overrides ---------------------------------------------------------
    quantization: str | None = _field(group="overrides", doc="Quantization of the draft weights.", check=_NAME)
    moe_backend: str | None = _field(
        group="overrides", doc="MoE backend of the draft; None: the target's.", check=_NAME
    )
    attention_backend: str | None = _field(
        group="overrides",
        doc="Attention backend of the draft (DFlash needs a non-causal one); None: the target's.",
        check=_NAME,
    )
    kv_cache_dtype: str | None = _field(
        group="overrides", doc="dtype of the draft KV cache; None: the target's.", check=_NAME
    )
    draft_lm_head_quantization: Literal["fp8", "nvfp4"] | None = _field(
        group="overrides",
        doc="Quantize the LM head the draft shares; the target verifies with its own head, so only "
        "the acceptance length can change.",
        method_specific=True,
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
        check=(rules.finite(),),
    )
    fly_window_size: int | None = _field(
        group="verification", doc="fly: deferred window, 1 <= w < K; default min(6, K-1).",
        check=_AT_LEAST_1,
    )
    fly_entropy_threshold: float | None = _field(
        group="verification", doc="fly: target entropy (nats) under which a mismatch may be deferred; None: sampler default.",
        check=(rules.finite(),),
    )
    draft_sample_method: Literal["greedy", "random"] = _field(
        "greedy",
        group="verification",
        doc="greedy drafts (one-hot for verification) or random drafts sampled from the draft distribution; "
        "a sampled request's drafts race on its sampling noise where the engine lends it (seeded: under either; "
        "unseeded: under greedy, on noise of the seed the engine gives it).",
    )
    enable_adaptive_verification: bool = _field(
        False,
        group="verification",
        doc="Adapt how many drafts to verify from estimated acceptance.",
        method_specific=True,
    )
    adaptive_verification_threshold: float | None = _field(
        group="verification",
        doc="Adaptive verification: verify drafts up to the first whose estimated acceptance is below "
        "this (0 < t <= 1); None: the method's cost-based scheduler.",
        method_specific=True,
    )

    # -- 5. special modes and method-specific options -------------------------------------
    use_heterogeneous_vocab: bool = _field(
        False,
        group="special",
        doc="Draft and target vocabularies differ (TLI): draft_model-like methods with greedy drafts only.",
    )
    suffix_decoding_max_tree_depth: int | None = _field(
        group="special",
        doc="suffix: deepest match plus draft the suffix trees hold (default 24; the default K).",
        check=_AT_LEAST_1,
        method_specific=True,
    )
    suffix_decoding_max_cached_requests: int | None = _field(
        group="special",
        doc="suffix: finished responses kept in the global tree, FIFO (default 10000; 0: no global tree).",
        method_specific=True,
    )
    suffix_decoding_max_spec_factor: float | None = _field(
        group="special",
        doc="suffix: a match of p tokens drafts at most factor * p tokens (default 1.0).",
        method_specific=True,
    )
    suffix_decoding_min_token_prob: float | None = _field(
        group="special",
        doc="suffix: stop drafting once the estimated probability falls below this (default 0.1).",
        method_specific=True,
    )
    disable_eagle_block_drop: bool = _field(
        False,
        group="special",
        doc="Keep the unstable tail prefix-cache block of EAGLE-style drafters.",
        applies_if=("draft_kv_depends_on_next_token",),
    )
    disable_lookahead_block_hashes: bool = _field(
        False, group="special", doc="Do not extend prefix-cache block hashes over the tokens the drafter reads ahead."
    )
    prompt_lookup_min: int | None = _field(
        group="special",
        doc="ngram: shortest n-gram to match (default 5).",
        check=_AT_LEAST_1,
        applies_if=("prefer_dense_token_history",),
    )
    prompt_lookup_max: int | None = _field(
        group="special",
        doc="ngram: longest n-gram to match (default 5).",
        check=_AT_LEAST_1,
        applies_if=("prefer_dense_token_history",),
    )
    eagle_aux_hidden_state_layer_ids: tuple[int, ...] | None = _field(
        group="special",
        doc="eagle3 / extract_hidden_states: target layers whose states the draft reads.",
        applies_if=("uses_target_hidden_states",),
    )
    index_share_for_mtp_iteration: bool | None = _field(
        group="special", doc="mtp: share the sparse index across MTP iterations.",
        method_specific=True,
    )
    dspark_draft_topk: int | None = _field(
        group="special", doc="dspark: top-k of the draft block.", check=_AT_LEAST_1, method_specific=True
    )
    dspark_anchor_sampling: bool | None = _field(
        group="special", doc="dspark: anchor-sampling mode (K lookahead slots instead of K+1).",
        method_specific=True,
    )
    xpress_topc: int | None = _field(
        group="special",
        doc="dspark: propose a token tree with the top-c candidates of each node (best-first, at most K nodes) "
            "when the engine verifies trees (the reference engine does in standard verification); "
            "otherwise, or with c = 1, the top-1 chain.",
        check=_AT_LEAST_1, method_specific=True
    )
    draft_tree_topk: int | None = _field(
        group="special",
        doc="eagle, eagle3, mtp, dflash: propose a dynamic token tree (EAGLE-2): each drafting pass runs the "
            "best k nodes so far and scores their top-k children; the best K of all candidates are verified "
            "(dflash: best-first, each node's children the top-k tokens of the next block position), "
            "when the engine verifies trees (the reference engine does in standard verification); "
            "otherwise, or with k = 1, the top-1 chain.",
        check=_AT_LEAST_1, method_specific=True
    )
    speculator_options: Mapping[str, Any] | None = _field(
        group="special",
        doc="Free-form options of a third-party method (declare 'speculator_options' as supported).",
        hash=False,
        method_specific=True,
    )


    # -- resolved, not input ---------------------------------------------------------------
    draft_model_config: ModelConfig | None = _field(
        group="source", kind=DERIVED, doc="The draft's ModelConfig, built by the config class's configure."
    )
    speculator_config: Any = attrs.field(init=False, repr=False, eq=False)
    """The resolved `SpeculatorConfig` subclass instance (reads this object)."""
    resolution_trace: tuple[tuple[str, str], ...] = attrs.field(init=False, repr=False, eq=False)
    """(step, what happened) pairs, shown by ``specpath explain``."""
    inputs: Mapping[str, Any] = attrs.field(init=False, repr=False, eq=False)
    """The user's input fields as given (what :meth:`replace` starts from)."""

    # ---------------------------------------------------------------------------------------

    @classmethod
    def user_fields(cls) -> tuple[attrs.Attribute, ...]:
        """Fields a user may set (not derived, not injected)."""
        return tuple(f for f in attrs.fields(cls) if f.init and f.metadata.get(KIND) not in (DERIVED, INJECTED))

    @classmethod
    def from_dict(
        cls,
        data: Mapping[str, Any],
        *,
        target_model_config: ModelConfig | None = None,
        target_parallel_config: ParallelConfig | None = None,
    ) -> SpeculativeConfig:
        """Build from untrusted input: unknown keys and derived or injected fields are one-line
        errors here; values are then checked exactly as keyword construction checks them."""
        if not isinstance(data, Mapping):
            raise SpeculativeConfigError("must be a mapping of fields", field="speculative_config", value=data)
        user = {f.name for f in cls.user_fields()}
        known = attrs.fields_dict(cls)
        for key in data:
            if not isinstance(key, str):
                raise SpeculativeConfigError("keys must be strings", field="speculative_config", value=key)
            if key in user:
                continue
            if key in known and known[key].metadata.get(KIND) == INJECTED:
                raise SpeculativeConfigError(
                    "comes from the target model (create_speculative_config injects it), not from the "
                    "speculative config",
                    field=f"speculative_config.{key}",
                )
            if key in known:
                raise SpeculativeConfigError(
                    "is set during resolution, not given as input", field=f"speculative_config.{key}"
                )
            suggestion = closest_match(key, user)
            raise SpeculativeConfigError(
                f"unknown key {key!r}",
                field="speculative_config",
                suggestion=suggestion,
                allowed=None if suggestion else sorted(user),
            )
        return cls(
            **dict(data), target_model_config=target_model_config, target_parallel_config=target_parallel_config
        )

    def replace(self, **changes: Any) -> SpeculativeConfig:
        """A new config resolved from this one's inputs with ``changes`` applied."""
        kwargs = dict(self.inputs)
        kwargs.update(changes)
        kwargs.setdefault("target_model_config", self.target_model_config)
        kwargs.setdefault("target_parallel_config", self.target_parallel_config)
        return type(self)(**kwargs)

    def __attrs_post_init__(self) -> None:
        from specpath.config.loading import check_shape
        from specpath.config.resolution import resolve

        # the one gate every entry passes (keywords, from_dict, create_speculative_config, replace):
        # nothing below may meet a value too deep, too large or containing itself
        for f in self.user_fields():
            value = getattr(self, f.name)
            if value is not None:
                check_shape(value, f"speculative_config.{f.name}")
        resolve(self)

    # -- derived values --------------------------------------------------------------------

    @property
    def synthetic_rates(self) -> tuple[float, ...] | None:
        """Unconditional per-position acceptance rates for ``synthetic`` (given or scheduled)."""
        if self.synthetic_acceptance_rates is not None:
            return self.synthetic_acceptance_rates
        if self.synthetic_acceptance_length is not None:
            return tuple(acceptance_length_to_rates(self.synthetic_acceptance_length, self.num_speculative_tokens))
        return None

    @property
    def is_lossy(self) -> bool:
        return self.rejection_sample_method in LOSSY_METHODS

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


attrs.resolve_types(SpeculativeConfig)  # real types on the fields: the converter structures by them

METHOD_SPECIFIC_OPTIONS: tuple[str, ...] = tuple(
    f.name for f in attrs.fields(SpeculativeConfig) if f.metadata.get(METHOD_SPECIFIC)
)
"""Options that only some methods accept (fields declared ``method_specific`` or
``applies_if``): when given, the resolved class must support them (:func:`supports_option`).
Adding a method's own option: declare the field ``method_specific=True`` here and list it in
the method's ``supported_options``."""


def supports_option(config_class: type, option: str) -> bool:
    """Whether ``config_class`` accepts the method-specific ``option``: it lists it in
    ``supported_options`` or has one of the field's ``applies_if`` capabilities."""
    if option in config_class.supported_options:
        return True
    gates = attrs.fields_dict(SpeculativeConfig)[option].metadata[APPLIES_IF]
    return any(getattr(config_class, flag, False) for flag in gates)
