"""``SpeculatorConfig``: what a method *is*, declared once and read by every consumer.

A speculator config is not the drafter; it describes it. ``ClassVar`` flags state static
capabilities (does it read target hidden states? does it run in its own workspace lane?),
properties state values that depend on the resolved fields (how many lookahead KV slots per
request for this K?). The scheduler, the KV manager, the runner and the sampler read these,
never the method name.

Writing a method plugin
-----------------------
Subclass :class:`SpeculatorConfig` (or :class:`DraftModelSpeculatorConfig` when the drafter
has weights of its own, or a built-in plugin's class to reuse its behaviour)::

    @attrs.frozen(kw_only=True)
    class MyConfig(DraftModelSpeculatorConfig):
        base_method = "eagle3"                      # the built-in shape it builds on
        speculator_class = "my_pkg.speculator:MySpeculator"   # imported lazily
        uses_target_hidden_states = True
        supported_options = frozenset({"speculator_options"})

        @property
        def num_lookahead_tokens(self) -> int:
            return self.spec.num_speculative_tokens

A drafter trained for a known target ships with the plugin and becomes the default ``model``
for that target by one row in ``shipped_checkpoints``::

        shipped_checkpoints = (
            ShippedCheckpoint(EMBEDDED_TARGET, HEADS / "my-byte-llama"),
            ShippedCheckpoint(SMOLLM2_135M, HEADS / "my-smollm2"),     # adding a target: one line
        )

and register it: ``register(name, MyConfig)`` from a ``specpath_register_methods`` hook (the
plugin's entry point), or ``specpath.register_speculative_method(name, MyConfig)``.
What ``specpath demo`` runs for the method is the plugin's ``specpath_demo`` hook
(:mod:`specpath.demo`), not part of this class.

How the class hooks change the configuration
--------------------------------------------
The resolved :class:`~specpath.config.speculative.SpeculativeConfig` is frozen, so hooks never
mutate it. Resolution calls them in order on the partially resolved config ``spec`` and applies
what they *return*:

* ``default_model(spec) -> str | None`` - the draft weights when the user gave no ``model``
  (by default: the ``shipped_checkpoints`` row for the target and ``shipped_variant(spec)``);
* ``configure(spec) -> Mapping[str, Any]`` - field updates (defaults, ``draft_model_config``,
  a resolved ``num_speculative_tokens``...); a subclass merges ``super().configure(spec)``;
* ``specialize(spec) -> type`` - pick a subclass for this configuration (e.g. multi-module MTP);
* ``verify(spec) -> None`` - method-specific checks after the generic ones; raise
  :class:`~specpath.errors.SpeculativeConfigError`;
* ``accepts_checkpoint_of(method, checkpoint) -> bool`` - with a requested method, whether it
  can serve a checkpoint another plugin recognised as ``method`` (default: only its own).

A draft checkpoint is recognised (when no method was given) by the plugin's
``specpath_detect_method`` hook, not by the config class. Updates are applied before the
object is published; afterwards it is read-only. The resolved
instance (``spec.speculator_config``) holds a back reference ``spec`` that its properties read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

import attrs

from specpath.config.shipped import (
    DEFAULT_VARIANT,
    ShippedCheckpoint,
    find_shipped,
    target_fingerprint,
)
from specpath.errors import SpeculativeConfigError

if TYPE_CHECKING:  # pragma: no cover
    from specpath.config.checkpoint import DraftCheckpoint
    from specpath.config.model import ModelConfig
    from specpath.config.speculative import SpeculativeConfig

CAPABILITY_FLAGS: tuple[str, ...] = (
    "uses_target_hidden_states",
    "uses_aux_hidden_states",
    "uses_separate_workspace_lane",
    "prefer_dense_token_history",
    "proposes_draft_tokens",
    "adaptive_verification_uses_draft_logits",
    "draft_has_own_vocab",
    "supports_watermarking",
    "supports_pcp",
    "draft_kv_depends_on_next_token",
    "supports_variable_draft_length",
    "model_free",
    "tolerates_skipped_steps",
)
"""The boolean ``ClassVar`` capabilities, in the order listings show them."""


@attrs.frozen(kw_only=True)
class SpeculatorConfig:
    """Capabilities of a drafter with no checkpoint and no special needs (the defaults)."""

    spec: SpeculativeConfig = attrs.field(repr=False, eq=False)
    """The resolved speculative config this instance describes."""

    base_method: ClassVar[str | None] = None
    """The built-in method this class implements, or that a custom method builds on."""
    speculator_class: ClassVar[str | None] = None
    """``"module:Class"`` of the :class:`specpath.speculator.BaseSpeculator`; imported lazily."""
    supported_options: ClassVar[frozenset[str]] = frozenset()
    """Which method-specific options (``METHOD_SPECIFIC_OPTIONS``) this method accepts."""
    uses_target_hidden_states: ClassVar[bool] = False
    """The runner must return target hidden states (``BaseSpeculator.hidden_state_layers``)."""
    uses_aux_hidden_states: ClassVar[bool] = False
    """The target returns auxiliary intermediate-layer states (a different graph: hashed)."""
    uses_separate_workspace_lane: ClassVar[bool] = False
    """Drafts run in their own workspace instead of adding rows to the target batch."""
    prefer_dense_token_history: ClassVar[bool] = False
    """Keep each request's full token history dense on the device (n-gram scans it)."""
    proposes_draft_tokens: ClassVar[bool] = True
    """False for helpers such as ``extract_hidden_states`` that draft nothing."""
    adaptive_verification_uses_draft_logits: ClassVar[bool] = True
    """Adaptive verification estimates acceptance from draft logits (not a confidence head)."""
    draft_has_own_vocab: ClassVar[bool] = False
    """The drafter has a vocabulary of its own (must equal the target's unless
    ``use_heterogeneous_vocab``)."""
    supports_watermarking: ClassVar[bool] = False
    """Drafts can carry a watermark (EAGLE, DFlash)."""
    supports_pcp: ClassVar[bool] = False
    """Compatible with prefill context parallelism."""
    draft_kv_depends_on_next_token: ClassVar[bool] = False
    """Draft KV at position p is built from p's hidden state *and the token after p* (EAGLE,
    EAGLE-3, MTP): a prefix-cache block is unstable until the next token is known, so the
    tail block is dropped (or hashes look ahead)."""
    supports_variable_draft_length: ClassVar[bool] = False
    """The speculator itself copes with a per-step K (needed by runners that do not trim
    drafts centrally, such as the "v1" preset, unless the runner whitelists the method)."""
    model_free: ClassVar[bool] = False
    """The drafter reads the requests' token ids and nothing else: no weights, no target
    states, no KV slots, no extra query rows (n-gram, suffix). Such a method can also draft
    beside another drafter (``speculative_config.model_free_drafter``)."""
    tolerates_skipped_steps: ClassVar[bool] = False
    """The speculator copes with a decoding request left out of some steps' ``DraftBatch`` and then
    handed every position since at once (``num_new_positions`` > 1, their hidden states together):
    where the engine backs a request off to plain decoding (``draft_length_policy``), the drafter
    then costs nothing for it. False: such a request is still handed over each step, with
    ``max_draft_tokens`` 0."""
    accelerator_only: ClassVar[bool] = False
    """Built for an accelerator (its state kept on the device): on a CPU it only repeats a host
    method, so CPU listings and ``specpath demo`` leave it out there."""
    example_plugin: ClassVar[bool] = False
    """A teaching example (the plugin template's method), labelled so in listings;
    ``specpath new-plugin`` copies turn it off."""
    supports_parallel_drafting: ClassVar[bool | None] = None
    """``parallel_drafting`` is accepted (P-EAGLE, PARD); False: rejected by
    :meth:`check_declared_inputs`; None: the class checks it itself."""

    shipped_checkpoints: ClassVar[tuple[ShippedCheckpoint, ...]] = ()
    """Drafters packaged with the plugin, one row per (target, variant); the default ``model``
    for a target that has one (see the module docstring)."""
    shipped_drafter_k: ClassVar[int | None] = None
    """The K a shipped drafter was tuned at: its K when neither the config nor the checkpoint
    gives one (None: the user picks K). The demo is the plugin's ``specpath_demo`` hook."""
    tree_option: ClassVar[str] = "draft_tree_topk"
    """The option that sets this method's draft tree width (children per node): what a shipped
    checkpoint's :attr:`ShippedCheckpoint.tree` sets, and what turns it off when given."""
    shipped_drafter_quantization: ClassVar[str | None] = None
    """The weight-only quantization (``"int8"``) a shipped drafter runs with when the config
    gives no ``quantization``, where the engine multiplies it on a native kernel (else as
    loaded): measured cheaper to draft with at the same acceptance. An explicit
    ``speculative_config.quantization`` wins; other checkpoints run as loaded."""

    # -- values that depend on the resolved fields --------------------------------------

    @property
    def num_speculative_tokens(self) -> int:
        """K, the resolved number of drafts per step."""
        return self.spec.num_speculative_tokens

    @property
    def num_lookahead_tokens(self) -> int:
        """Extra KV slots per request for what the drafter writes (target-side lookahead)."""
        return 0

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        """Tokens past a prefill chunk the drafter reads before it can draft."""
        return 1 if self.uses_target_hidden_states else 0

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """Query slots the drafter adds to the batch beyond each request's one (drafter side)."""
        return 0

    @property
    def max_model_len(self) -> int | None:
        """The longest context the drafter supports (None: no limit of its own)."""
        return None

    # -- class hooks (see the module docstring) -----------------------------------------

    @classmethod
    def default_model(cls, spec: SpeculativeConfig) -> str | None:
        """The shipped checkpoint for this target and variant (None: none shipped or installed)."""
        path = find_shipped(cls.shipped_checkpoints, cls.shipped_target(spec), cls.shipped_variant(spec))
        return None if path is None else str(path)

    @classmethod
    def shipped_target(cls, spec: SpeculativeConfig) -> str:
        """The fingerprint the shipped checkpoints are looked up by (the target's)."""
        return target_fingerprint(spec.target_model_config)

    @classmethod
    def shipped_variant(cls, spec: SpeculativeConfig) -> str:
        """Which shipped variant this configuration asks for (one shape: ``"default"``)."""
        return DEFAULT_VARIANT

    @classmethod
    def configure(cls, spec: SpeculativeConfig) -> Mapping[str, Any]:
        return {}

    @classmethod
    def accepts_checkpoint_of(cls, method: str, checkpoint: DraftCheckpoint) -> bool:
        """Whether this method can serve a draft checkpoint that another plugin recognised (from
        its ``config.json``) as ``method``; by default only its own method's checkpoints."""
        return method == cls.base_method

    @classmethod
    def specialize(cls, spec: SpeculativeConfig) -> type[SpeculatorConfig]:
        return cls

    @classmethod
    def verify(cls, spec: SpeculativeConfig) -> None:
        return None

    @classmethod
    def check_declared_inputs(cls, spec: SpeculativeConfig) -> None:
        """Reject the inputs the declared flags rule out: ``parallel_drafting`` where
        ``supports_parallel_drafting`` is False, auxiliary layers where the method does not
        read them (``uses_aux_hidden_states``). One line each."""
        method = spec.custom_method or spec.method
        if spec.parallel_drafting and cls.supports_parallel_drafting is False:
            raise SpeculativeConfigError(
                f"method {method!r} has no parallel drafting mode; it is for P-EAGLE (eagle3) and PARD (draft_model)",
                field="speculative_config.parallel_drafting",
                value=True,
            )
        if spec.eagle_aux_hidden_state_layer_ids is not None and not cls.uses_aux_hidden_states:
            raise SpeculativeConfigError(
                f"method {method!r} reads only the target's final feature; auxiliary layers are for "
                "eagle3 and extract_hidden_states",
                field="speculative_config.eagle_aux_hidden_state_layer_ids",
                value=list(spec.eagle_aux_hidden_state_layer_ids),
            )

    @property
    def drafts_in_one_pass(self) -> bool:
        """All of a step's drafts come from one drafter pass (``parallel_drafting``; block drafters
        always): drafting costs about the same for any K, which the adaptive draft length weighs."""
        return bool(self.spec.parallel_drafting)

    def hash_factors(self) -> tuple[Any, ...]:
        """Fields of this method that change the computation graph (see ``compute_hash``)."""
        return ()

    # -- helpers ------------------------------------------------------------------------

    @classmethod
    def qualname(cls) -> str:
        return f"{cls.__module__}:{cls.__qualname__}"

    @property
    def notes(self) -> tuple[str, ...]:
        """What a user of this configuration should know that no flag says (``specpath explain``
        prints each as a ``note:`` line), e.g. state that outlives a call; default none."""
        return ()

    def describe(self) -> dict[str, Any]:
        """Flags and resolved values, for listings and ``specpath explain``."""
        out: dict[str, Any] = {
            "config_class": self.qualname(),
            "base_method": self.base_method,
            "speculator_class": self.speculator_class,
            "supported_options": sorted(self.supported_options),
            "notes": list(self.notes),
            "shipped_drafter_quantization": type(self).shipped_quantization(self.spec),
            "shipped_drafter_model_free": type(self).shipped_model_free(self.spec),
            "shipped_drafter_tree": type(self).shipped_row_tree(self.spec),
        }
        out.update({flag: bool(getattr(self, flag)) for flag in CAPABILITY_FLAGS})
        for name in (
            "num_lookahead_tokens",
            "num_prefill_lookahead_tokens",
            "max_num_new_slots_for_drafting",
            "max_model_len",
        ):
            try:
                out[name] = getattr(self, name)
            except Exception:  # noqa: BLE001 - a probe without a checkpoint may not answer
                out[name] = None
        return out


    @classmethod
    def shipped_quantization(cls, spec: SpeculativeConfig) -> str | None:
        """``shipped_drafter_quantization`` when ``spec`` runs a shipped drafter and sets no
        ``quantization`` itself, else None (the engine may still not apply it: see the field)."""
        if cls.shipped_drafter_quantization is None or spec.quantization is not None:
            return None
        return cls.shipped_drafter_quantization if cls.is_shipped_drafter(spec) else None

    @classmethod
    def shipped_model_free(cls, spec: SpeculativeConfig) -> str | None:
        """The model-free method of the shipped checkpoint ``spec`` runs
        (:attr:`ShippedCheckpoint.model_free`), where ``spec`` names no ``model_free_drafter``
        (``{}``: none); else None. Its drafts are verified where they extend the drafter's or
        the request's record favours them (:mod:`specpath.hybrid`)."""
        from pathlib import Path

        if spec.model is None or spec.model_free_drafter is not None:
            return None
        model = Path(spec.model).resolve()
        return next((row.model_free for row in cls.shipped_checkpoints if row.path.resolve() == model), None)

    @classmethod
    def shipped_tree(cls, spec: SpeculativeConfig) -> tuple[int, int] | None:
        """``(num_speculative_tokens, tree width)`` of the shipped checkpoint ``spec`` runs
        (:attr:`ShippedCheckpoint.tree`; the width goes to :attr:`tree_option`) where ``spec`` sets neither, drafts chains one draft at a
        time (no ``parallel_drafting``, no sampled drafts) and its verification verifies trees;
        else None. Over a quantised target too: there a verified row costs far more, but an engine
        that verifies only the nodes worth their rows (``DraftRequest.min_draft_probability``)
        keeps the tree's gain (SmolLM2 over int4, 24 held-out prompts: MTP's tree 1.24x against
        its chain's 1.11x, EAGLE-3's 1.26-1.30x against 1.22-1.25x; without that cut EAGLE-3's tree
        read 1.23x, and 1.06 / 1.15x against the chain's 1.15 / 1.23x on code and code chat)."""
        from specpath.verification import TREE_VERIFY_METHODS

        if spec.num_speculative_tokens is not None or getattr(spec, cls.tree_option) is not None or spec.parallel_drafting \
                or spec.draft_sample_method == "random" or spec.rejection_sample_method not in TREE_VERIFY_METHODS:
            return None
        return cls.shipped_row_tree(spec)

    @classmethod
    def shipped_row_tree(cls, spec: SpeculativeConfig) -> tuple[int, int] | None:
        """The :attr:`ShippedCheckpoint.tree` of the shipped checkpoint ``spec.model`` is, or None."""
        from pathlib import Path

        if spec.model is None:
            return None
        model = Path(spec.model).resolve()
        return next((row.tree for row in cls.shipped_checkpoints if row.path.resolve() == model), None)

    @classmethod
    def is_shipped_drafter(cls, spec: SpeculativeConfig) -> bool:
        """``spec.model`` is one of the class's shipped checkpoints."""
        from pathlib import Path

        if spec.model is None:
            return False
        return Path(spec.model).resolve() in {row.path.resolve() for row in cls.shipped_checkpoints}

@attrs.frozen(kw_only=True)
class DraftModelSpeculatorConfig(SpeculatorConfig):
    """Base of drafters with weights of their own: builds the draft ``ModelConfig``, its
    tensor-parallel size and parallel config, and resolves K from ``n_predict``."""

    shares_target_positions: ClassVar[bool] = True
    """The draft uses the target's positions, so its ``max_position_embeddings`` is raised to
    the target's ``max_model_len`` when the RoPE type allows (cache-only types)."""

    @property
    def max_model_len(self) -> int | None:
        draft = self.spec.draft_model_config
        return None if draft is None else draft.max_model_len

    @classmethod
    def configure(cls, spec: SpeculativeConfig) -> Mapping[str, Any]:
        from specpath.config import draft as m

        if spec.model is None:
            raise SpeculativeConfigError(
                f"required for method {spec.custom_method or spec.method!r} (a path to the draft checkpoint)",
                field="speculative_config.model",
            )
        draft = m.build_draft_model_config(spec)
        if cls.shares_target_positions:
            draft = m.maybe_raise_draft_max_position_embeddings(draft, spec.target_model_config, spec.max_model_len)
        draft = cls.adapt_draft_model_config(spec, draft)
        num_tokens = m.resolve_num_speculative_tokens(spec.num_speculative_tokens, draft)
        if num_tokens is None:
            num_tokens = cls.shipped_num_speculative_tokens(spec)
        target_parallel = spec.target_parallel_config or m.ParallelConfig()
        draft_tp = m.verify_and_get_draft_tp(spec.draft_tensor_parallel_size, target_parallel)
        return {
            "draft_model_config": draft,
            "num_speculative_tokens": num_tokens,
            "draft_tensor_parallel_size": draft_tp,
            "draft_parallel_config": m.create_draft_parallel_config(target_parallel, draft_tp, draft),
        }

    @classmethod
    def shipped_num_speculative_tokens(cls, spec: SpeculativeConfig) -> int | None:
        """K for a shipped drafter when none is given (``shipped_drafter_k``, the K it was
        tuned at); None for any other checkpoint, whose K the user picks."""
        from pathlib import Path

        if cls.shipped_drafter_k is None or spec.model is None:
            return None
        shipped = {row.path.resolve() for row in cls.shipped_checkpoints}
        return cls.shipped_drafter_k if Path(spec.model).resolve() in shipped else None

    @classmethod
    def adapt_draft_model_config(cls, spec: SpeculativeConfig, draft: ModelConfig) -> ModelConfig:
        """Adjust the draft ModelConfig (e.g. wrap an EAGLE head's config); default: as is."""
        return draft
