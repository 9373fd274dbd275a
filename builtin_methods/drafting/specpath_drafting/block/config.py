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

NON_CAUSAL_ATTENTION_BACKENDS = ("auto", "torch", "torch_sdpa", "flex_attention", "flash_attn")
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
    """"dflash", "dspark" or None from a draft ``config.json`` (``model_type`` / architectures)."""
    kinds = [str(config.get("model_type", "")).lower()] + [str(a).lower() for a in config.get("architectures") or ()]
    if any("dspark" in k for k in kinds):
        return "dspark"
    if any("dflash" in k for k in kinds):
        return "dflash"
    return None


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
    demo_num_speculative_tokens = 4
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
        if updates.get("num_speculative_tokens") is None and isinstance(hf.get("num_draft_tokens"), int):
            updates["num_speculative_tokens"] = hf["num_draft_tokens"]
        taps = hf.get("target_layer_ids")
        if spec.eagle_aux_hidden_state_layer_ids is None and isinstance(taps, Sequence) and taps:
            updates["eagle_aux_hidden_state_layer_ids"] = tuple(int(t) for t in taps)
        return updates

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
        check_attention_backend(spec)
        check_layout(spec, cls.requested_anchor_sampling(spec))
        taps = hf.get("target_layer_ids")
        ids = spec.eagle_aux_hidden_state_layer_ids
        if taps is not None and ids is not None and list(ids) != list(taps):
            raise SpeculativeConfigError(
                f"the {name} drafter {spec.model!r} was trained on target layers {list(taps)}",
                field="speculative_config.eagle_aux_hidden_state_layer_ids", value=list(ids))
        cls.check_declared_inputs(spec)
        target = spec.target_model_config
        want = hf.get("target_hidden_size")
        if target is not None and want is not None and target.hidden_size not in (None, want):
            raise SpeculativeConfigError(
                f"the drafter {spec.model!r} was trained for a target with hidden_size {want}; the target has "
                f"{target.hidden_size}", field="speculative_config.model", value=spec.model)


def max_num_draft_seqs(engine_config: Any) -> int:
    """Engine-facing: requests one draft pass of a block drafter holds, from the engine's token
    budget (``scheduler_config.max_num_batched_tokens``) and the forwarded lookahead."""
    lookahead = max(1, int(engine_config.num_lookahead_tokens))
    return max(1, int(engine_config.scheduler_config.max_num_batched_tokens) // lookahead)


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
    recorded = hf.get(LAYOUT_KEY)
    name = spec.custom_method or spec.method
    if recorded is None:
        raise SpeculativeConfigError(
            f"the {name} drafter {spec.model!r} does not record its block layout (config.json "
            f"'{LAYOUT_KEY}'); refusing to guess, since a wrong layout silently ruins acceptance",
            field="speculative_config.model", value=spec.model)
    if bool(recorded) != bool(requested):
        layout = {True: "anchor-first (anchor sampling)", False: "[anchor, masks] fill-in"}
        raise SpeculativeConfigError(
            f"the drafter {spec.model!r} was trained in the {layout[bool(recorded)]} layout, but the "
            f"{layout[bool(requested)]} layout was requested; a wrong layout silently ruins acceptance",
            field="speculative_config.dspark_anchor_sampling" if spec.dspark_anchor_sampling is not None
            else "speculative_config.model", value=requested)
