"""The config side of block drafting (DFlash, DSpark): the rules both methods share.

A block drafter drafts a whole block in one non-causal pass of a small drafter whose keys and
values include the target's fused features ("KV injection"). So it reads target hidden states,
runs its block apart from the target batch (0 extra draft slots), reserves the block's positions
as lookahead, and its draft KV at position p is built from p's hidden state alone (no tail-block
drop: nothing depends on the token after p).

Two start-up checks protect acceptance from silent ruin:

- the drafter's **layout** (``anchor_sampling``: does the anchor position itself predict the
  next token, or only the masks?) is recorded in the checkpoint and must match the method's;
- the draft **attention backend** must be able to attend non-causally within the block.

Attrs only: importing this module must not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import attrs

from specpath.config.speculator import DraftModelSpeculatorConfig
from specpath.errors import SpeculativeConfigError

NON_CAUSAL_ATTENTION_BACKENDS = ("auto", "native", "torch", "torch_sdpa", "flex_attention", "flash_attn")
"""Draft attention backends that can attend bidirectionally within a query block. ``auto``
and ``torch`` are the plugin's own masked-matmul path (the one this package runs)."""

CAUSAL_ONLY_ATTENTION_BACKENDS = ("paged_causal", "flash_decoding", "xformers_causal")
"""Backends that only implement causal (decode-style) attention: a block drafter cannot use them."""

LAYOUT_KEY = "anchor_sampling"
"""``config.json`` key recording the drafter's block layout (true: anchor-first, DSpark)."""


def build_target_layer_ids(num_target_layers: int, num_taps: int) -> tuple[int, ...]:
    """Taps spaced uniformly over the target (0-based decoder-layer outputs): from layer 1 to
    N-3 as the DFlash reference does for deep targets (36 layers, 5 taps: 1, 9, 17, 25, 33), to
    N-2 for shallow ones (N < 8), where N-3 would leave the upper half unread. Never the last
    layer: its state is what the target's head reads."""
    n = num_target_layers
    if n < 3:
        return tuple(range(min(num_taps, n)))
    lo, hi = 1, (n - 3 if n >= 8 else n - 2)
    if num_taps == 1:
        return (hi,)
    return tuple(sorted({round(lo + (hi - lo) * i / (num_taps - 1)) for i in range(num_taps)}))


def draft_config_dict(spec: Any) -> Mapping[str, Any]:
    draft = spec.draft_model_config
    return {} if draft is None else draft.hf_config


def checkpoint_kind(config: Mapping[str, Any]) -> str | None:
    """"dflash", "dspark" or None from a draft ``config.json`` in any published format
    (``specpath_drafting.block.published.block_kind``)."""
    from specpath_drafting.block.published import block_kind

    return block_kind(config)


def aux_ids(target_layer_ids: Sequence[int]) -> tuple[int, ...]:
    """DFlash taps (the output of layer i) named as vLLM/SGLang name them in
    ``eagle_aux_hidden_state_layer_ids`` (the state entering layer i + 1)."""
    return tuple(int(i) + 1 for i in target_layer_ids)


def recorded_layout_of(spec: Any, hf: Mapping[str, Any]) -> bool | None:
    """The layout the drafter records (``anchor_sampling``, or the ecosystem's
    ``sample_from_anchor``), or None: then the method's documented default layout applies."""
    from specpath_drafting.block.published import recorded_layout

    return recorded_layout(hf) if hf else None


@attrs.frozen(kw_only=True)
class BlockDrafterConfig(DraftModelSpeculatorConfig):
    """Block drafters (DFlash, DSpark): target taps fused into KV-injected context, a block
    drafted in one non-causal pass. ``model`` is the drafter's checkpoint directory; subclasses
    name the method, the speculator, the layout and the shipped checkpoints."""

    supported_options = frozenset({"enable_adaptive_verification", "adaptive_verification_threshold"})
    uses_target_hidden_states = True
    uses_aux_hidden_states = True
    """The target returns several intermediate layers (the taps), not only its last one."""
    draft_kv_depends_on_next_token = False
    """Context KV at p is a projection of p's target features alone: no tail-block drop."""
    supports_variable_draft_length = True
    """Each request keeps only its own ``max_draft_tokens`` of the block."""
    supports_parallel_drafting = False
    """The block is always one pass; ``parallel_drafting`` (P-EAGLE/PARD) does not apply."""
    shipped_drafter_k = 4
    shipped_drafter_quantization = "int8"
    """Measured cheaper to draft with than bf16 (benchmarks/draft_cost.py); drafts may change, output not."""
    tolerates_skipped_steps = True
    """Catches up on every position since in one pass (tests/engine/test_draft_governor.py)."""

    @property
    def drafts_in_one_pass(self) -> bool:
        """A block of K drafts from one denoising pass."""
        return True

    anchor_sampling_default: ClassVar[bool] = False
    """The layout: False, the anchor is context and the K masks are the predictions (DFlash);
    True, the anchor position predicts the first draft (DSpark's anchor-first layout)."""

    # -- the method table ----------------------------------------------------------------

    @property
    def anchor_sampling(self) -> bool:
        """True when the anchor position predicts the first draft (DSpark's anchor-first layout)."""
        return self.anchor_sampling_default

    @property
    def block_size(self) -> int:
        """Queries per request in the draft pass: K+1 ([anchor, K masks]), K when anchor-first."""
        k = self.spec.num_speculative_tokens
        return k if self.anchor_sampling else k + 1

    @property
    def num_lookahead_tokens(self) -> int:
        """The block's positions past the last committed token: K+1 (anchor + K masks)."""
        return self.block_size

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """The block runs in the drafter's own pass: no rows added to the target batch."""
        return 0

    def max_num_draft_seqs(self, max_num_batched_tokens: int) -> int:
        """How many requests one draft pass holds within the token budget: each request brings
        ``num_lookahead_tokens`` queries, more than its share of a target decode step."""
        return max(1, int(max_num_batched_tokens) // self.num_lookahead_tokens)

    def hash_factors(self) -> tuple[Any, ...]:
        spec = self.spec
        return (("anchor_sampling", self.anchor_sampling),
                ("enable_adaptive_verification", spec.enable_adaptive_verification),
                ("adaptive_verification_threshold", spec.adaptive_verification_threshold))

    # -- class hooks -----------------------------------------------------------------------

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        updates = dict(super().configure(spec))
        draft = updates.get("draft_model_config")
        hf = {} if draft is None else draft.hf_config
        from specpath_drafting.block.published import block_size, target_layer_ids

        if updates.get("num_speculative_tokens") is None and hf:
            if isinstance(hf.get("num_draft_tokens"), int):
                updates["num_speculative_tokens"] = hf["num_draft_tokens"]
            elif block_size(hf) is not None:  # the trained block: [anchor, K masks], or K anchor-first
                recorded = recorded_layout_of(spec, hf)
                anchor_first = cls.requested_anchor_sampling(spec) if recorded is None else recorded
                k = block_size(hf) - (0 if anchor_first else 1)
                if k > 0:
                    updates["num_speculative_tokens"] = k
        taps = target_layer_ids(hf) if hf else None
        if spec.eagle_aux_hidden_state_layer_ids is None and taps:
            updates["eagle_aux_hidden_state_layer_ids"] = aux_ids(taps)
        return updates

    @classmethod
    def serves_unmarked_checkpoint(cls, hf: Mapping[str, Any]) -> bool:
        """Whether a checkpoint that does not say it is a block drafter can still be served
        (DFlash: never; DSpark: a target that carries its DSpark stages)."""
        return False

    @classmethod
    def requested_anchor_sampling(cls, spec: Any) -> bool:
        """The layout this configuration serves (by default: always the class's own)."""
        return cls.anchor_sampling_default

    @classmethod
    def verify(cls, spec: Any) -> None:
        name = spec.custom_method or spec.method
        hf = draft_config_dict(spec)
        found = checkpoint_kind(hf)
        if found is not None and found != cls.base_method:
            raise SpeculativeConfigError(
                f"requested method={name!r}, but the draft model {spec.model!r} is a {found!r} checkpoint "
                f"(model_type {hf.get('model_type')!r}); drop 'method' or use a matching checkpoint",
                field="speculative_config.method", value=name)
        path_says = cls.base_method in str(spec.model or "").lower()  # vLLM's path hint, as in detection
        if hf and found is None and not path_says and not cls.serves_unmarked_checkpoint(hf):
            raise SpeculativeConfigError(
                f"the draft model {spec.model!r} is not a block drafter: its config.json has no DFlash/DSpark "
                f"architecture, model_type or dflash_config (architectures {list(hf.get('architectures') or [])}, "
                f"model_type {hf.get('model_type')!r}, and no {cls.base_method!r} in its path); method {name!r} needs one",
                field="speculative_config.model", value=spec.model)
        check_attention_backend(spec)
        check_layout(spec, cls.requested_anchor_sampling(spec))
        from specpath_drafting.block.published import target_layer_ids

        taps = target_layer_ids(hf) if hf else None
        ids = spec.eagle_aux_hidden_state_layer_ids
        if taps is not None and ids is not None and tuple(ids) != aux_ids(taps):
            raise SpeculativeConfigError(
                f"the {name} drafter {spec.model!r} was trained on the outputs of target layers {list(taps)}, "
                f"i.e. eagle_aux_hidden_state_layer_ids {list(aux_ids(taps))} (the states entering layers i)",
                field="speculative_config.eagle_aux_hidden_state_layer_ids", value=list(ids))
        cls.check_declared_inputs(spec)
        target = spec.target_model_config
        want = hf.get("target_hidden_size")
        if target is not None and want is not None and target.hidden_size not in (None, want):
            raise SpeculativeConfigError(
                f"the drafter {spec.model!r} was trained for a target with hidden_size {want}; the target has "
                f"{target.hidden_size}", field="speculative_config.model", value=spec.model)


def check_attention_backend(spec: Any) -> None:
    """The block attends to itself bidirectionally: refuse a causal-only backend at start-up."""
    backend = spec.attention_backend
    if backend is None or backend in NON_CAUSAL_ATTENTION_BACKENDS:
        return
    name = spec.custom_method or spec.method
    field = "speculative_config.attention_backend"
    if backend in CAUSAL_ONLY_ATTENTION_BACKENDS:
        raise SpeculativeConfigError(
            f"is causal-only; method {name!r} drafts its block non-causally and needs one of "
            f"{list(NON_CAUSAL_ATTENTION_BACKENDS)}", field=field, value=backend)
    raise SpeculativeConfigError(
        f"is not a known non-causal attention backend for method {name!r}", field=field, value=backend,
        allowed=list(NON_CAUSAL_ATTENTION_BACKENDS))


def check_layout(spec: Any, requested: bool) -> None:
    """A drafter served in the other layout drafts garbage with no error: refuse it."""
    hf = draft_config_dict(spec)
    if not hf:
        return
    recorded = recorded_layout_of(spec, hf)
    if recorded is None:
        return  # unrecorded: the method's documented layout (DFlash fill-in, DSpark anchor-first) is served
    if bool(recorded) != bool(requested):
        layout = {True: "anchor-first (anchor sampling)", False: "[anchor, masks] fill-in"}
        raise SpeculativeConfigError(
            f"the drafter {spec.model!r} was trained in the {layout[bool(recorded)]} layout, but the "
            f"{layout[bool(requested)]} layout was requested; a wrong layout silently ruins acceptance",
            field="speculative_config.dspark_anchor_sampling" if spec.dspark_anchor_sampling is not None
            else "speculative_config.model", value=requested)
