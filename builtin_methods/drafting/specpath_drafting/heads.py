"""Hidden-state heads: their ``config.json`` fields, the interface the drafting loop drives,
and their checkpoint files.

A head turns (target feature of position p, embedding of token p+1) into its own output
``a_p`` (pre-norm, d wide), from which it predicts token p+2. The drafting loop
(:mod:`specpath_drafting.loop`) only calls:

- ``fuse(taps)``: target hidden states ``[T, num_taps, d]`` -> the feature the layer reads;
- ``embed(ids)``: the (frozen, shared) target embedding;
- ``step(embeds, features, positions, attend)``: one pass of the decoder layer -> ``a``;
  during a chain, ``a`` of draft j is the feature of draft j+1;
- ``logits(a)``: float32 logits over the draft vocabulary; ``to_target(ids)`` and
  ``probs_to_target(p)`` map the draft vocabulary onto the target's (identity unless reduced);
- for P-EAGLE, ``mask_embeds(n)`` / ``mask_features(n)``: what masked query slots read.

The heads themselves (EAGLE-1, EAGLE-3, MTP modules) live in their method plugins.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs
import torch
from torch import nn

from specpath_engine.modeling.layers import Attend, LayerShape, layer_shape
from specpath_drafting.checkpoints import load_drafter_weights, read_drafter_config, save_drafter_checkpoint

Embed = Callable[[torch.Tensor], torch.Tensor]


@attrs.frozen(kw_only=True)
class HeadConfig(LayerShape):
    """The architecture fields of a head's ``config.json``."""

    kind: str
    """``"eagle"`` (EAGLE-1) or ``"eagle3"``; written as ``model_type``."""
    target_hidden_size: int | None = None
    target_num_hidden_layers: int | None = None
    num_taps: int = 1
    """Target layers fused into the feature (EAGLE-1: 1, the last; EAGLE-3: 3)."""
    draft_vocab_size: int | None = None
    """EAGLE-3: size of the reduced draft vocabulary (None: the target's)."""
    parallel_drafting: bool = False
    """The head carries P-EAGLE's mask embedding and mask hidden vector."""
    aux_layer_ids: tuple[int, ...] | None = None
    """EAGLE-3: the taps it was trained on."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> HeadConfig:
        from specpath_drafting.published_heads import head_config_dict, is_published_eagle3

        if is_published_eagle3(d):  # vLLM / SpecForge / speculators: the same head, other keys
            d = head_config_dict(d)
        ids = d.get("eagle_aux_hidden_state_layer_ids")
        return cls(
            kind=str(d.get("model_type", "eagle")),
            **layer_shape(d),
            target_hidden_size=d.get("target_hidden_size", d["hidden_size"]),
            target_num_hidden_layers=d.get("target_num_hidden_layers"),
            num_taps=d.get("num_taps", 3 if d.get("model_type") == "eagle3" else 1),
            draft_vocab_size=d.get("draft_vocab_size"),
            parallel_drafting=bool(d.get("parallel_drafting", False)),
            aux_layer_ids=None if ids is None else tuple(ids),
        )

    @classmethod
    def for_target(cls, kind: str, target: Mapping[str, Any], **overrides: Any) -> HeadConfig:
        """A one-layer head shaped like the target's layers (what the recipes train)."""
        fields = dict(
            kind=kind,
            **layer_shape(target),
            target_hidden_size=target["hidden_size"],
            target_num_hidden_layers=target["num_hidden_layers"],
            num_taps=3 if kind == "eagle3" else 1,
        )
        fields.update(overrides)
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        arch = {"eagle": "EagleLlamaForCausalLM", "eagle3": "Eagle3LlamaForCausalLM"}[self.kind]
        out = {
            "architectures": [arch],
            "model_type": self.kind,
            "speculator_config_class": self.kind,
            **self.shape_dict(),
            "num_hidden_layers": 1,
            "target_hidden_size": self.target_hidden_size,
            "target_num_hidden_layers": self.target_num_hidden_layers,
            "num_taps": self.num_taps,
            "parallel_drafting": self.parallel_drafting,
            "torch_dtype": "float32",
        }
        if self.draft_vocab_size is not None:
            out["draft_vocab_size"] = self.draft_vocab_size
        if self.aux_layer_ids is not None:
            out["eagle_aux_hidden_state_layer_ids"] = list(self.aux_layer_ids)
        return out


def lent_table(embed: Callable[[torch.Tensor], torch.Tensor] | None) -> torch.Tensor | None:
    """The ``[vocab, d]`` table behind a lent embedding function where it is a target's bound method
    whose model lends it (``LlamaModel.embedding_table``), for a native step that looks rows up
    itself; else None."""
    owner = getattr(embed, "__self__", None)
    lend = getattr(owner, "embedding_table", None)
    return lend() if callable(lend) else None


class HiddenStateHead(nn.Module):
    """What the drafting loop needs from a head (see the module docstring)."""

    kind: ClassVar[str] = ""
    """The ``HeadConfig.kind`` this class builds (``"eagle"``, ``"eagle3"``)."""
    config: HeadConfig
    norm: nn.Module
    """The final norm before the head's logits (every head has one; a plain parameter, read
    for :attr:`dtype` because the linears may be pre-packed)."""

    def __init__(self, config: HeadConfig, embed_tokens: Embed | None) -> None:
        super().__init__()
        self.config = config
        self._embed = embed_tokens
        self.rotary = config.rotary()

    # -- inputs --------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        if self._embed is None:
            raise ValueError(f"{type(self).__name__} needs the target's embedding (SpeculatorContext.embed_tokens)")
        return self._embed(ids)

    def fuse(self, taps: torch.Tensor) -> torch.Tensor:
        """``[T, num_taps, d]`` target states -> ``[T, d]`` feature."""
        if taps.shape[-2] != self.config.num_taps:
            raise ValueError(f"{type(self).__name__} fuses {self.config.num_taps} taps, got {taps.shape[-2]}")
        return taps[..., 0, :]

    def embedding_table(self) -> torch.Tensor | None:
        """The embedding's ``[vocab, d]`` table where ``embed`` is a target's (:func:`lent_table`)."""
        return lent_table(self._embed)

    def native_draft_head(self) -> Any:
        """The head as :meth:`~specpath_engine.modeling.native.NativeKernels.draft_chain` reads it
        (:class:`~specpath_engine.modeling.native.DraftHead`), or None where the chain must stay on
        the per-op path (another head, weights not on the native kernels, not bf16)."""
        return None

    def mask_embeds(self, n: int) -> torch.Tensor:
        raise ValueError(f"{type(self).__name__} has no mask embedding (parallel drafting needs an EAGLE-3 head)")

    def mask_features(self, n: int) -> torch.Tensor:
        raise ValueError(f"{type(self).__name__} has no mask hidden vector")

    # -- the layer -----------------------------------------------------------------------
    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.rotary(positions)
        return cos.to(self.dtype), sin.to(self.dtype)

    def layer_input(self, embeds: torch.Tensor, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What the decoder layer's attention reads, and its residual stream."""
        raise NotImplementedError

    def step(self, embeds: torch.Tensor, features: torch.Tensor, positions: torch.Tensor, attend: Attend) -> torch.Tensor:
        """One pass of the decoder layer: the head's output ``a`` for each query."""
        x, residual = self.layer_input(embeds, features.to(embeds.dtype))
        cos, sin = self.rope(positions)
        return self.layer(x, residual, cos, sin, attend)

    # -- outputs -------------------------------------------------------------------------
    def logits(self, a: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    @property
    def draft_vocab_size(self) -> int:
        return self.config.draft_vocab_size or self.config.vocab_size

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids

    def probs_to_target(self, probs: torch.Tensor) -> torch.Tensor:
        return probs

    @property
    def dtype(self) -> torch.dtype:
        return self.norm.weight.dtype  # norms keep plain parameters (linears may be pre-packed)

    def quantize_lm_head(self, method: str) -> None:
        """Apply ``draft_lm_head_quantization`` to the head the drafts use."""
        raise NotImplementedError


# -- checkpoints ----------------------------------------------------------------------------


HEAD_NAMES = {"eagle": "EAGLE-1", "eagle3": "EAGLE-3"}
"""What each head ``kind`` is called in errors."""


def read_head_config(path: str | Path, kind: str | None = None) -> HeadConfig:
    """The head checkpoint's config; with ``kind``, a head of another kind is refused (the
    method ``kind`` cannot run it)."""
    config = read_drafter_config(path, HeadConfig.from_dict, "hidden-state head")
    if kind is not None and config.kind != kind:
        raise ValueError(f"{path}: an {config.kind!r} head; method {kind!r} needs an {HEAD_NAMES.get(kind, kind)} "
                         "head")
    return config


def save_head(head: HiddenStateHead, path: str | Path, *, extra_config: dict | None = None,
              dtype: torch.dtype | None = None) -> Path:
    """Write the head's checkpoint (see :func:`~specpath_drafting.checkpoints.save_drafter_checkpoint`)."""
    return save_drafter_checkpoint(head, path, extra_config=extra_config, dtype=dtype)


def load_head_weights(head: HiddenStateHead, path: str | Path) -> HiddenStateHead:
    """Load ``model.safetensors`` into ``head``; every parameter must be present with its shape.
    An EAGLE-3 head may be in a published layout (:mod:`specpath_drafting.published_heads`)."""
    if head.config.kind != "eagle3":
        return load_drafter_weights(head, path, f"{head.config.kind} head")
    from specpath_drafting.published_heads import specpath_name

    vocab = head.config.vocab_size

    def complete(tensors: dict[str, torch.Tensor]) -> None:
        if "t2d" not in tensors and "d2t" in tensors:  # vLLM skips t2d; it is d2t's image
            d2t = tensors["d2t"].to(torch.int64)
            t2d = torch.zeros(vocab, dtype=torch.bool)
            t2d[torch.arange(d2t.shape[0]) + d2t] = True
            tensors["t2d"] = t2d
        if "d2t" not in tensors and "lm_head.weight" in tensors and tensors["lm_head.weight"].shape[0] == vocab:
            tensors["d2t"] = torch.zeros(vocab, dtype=torch.int64)  # full vocabulary: the identity map
            tensors.setdefault("t2d", torch.ones(vocab, dtype=torch.bool))

    return load_drafter_weights(head, path, f"{head.config.kind} head", rename=specpath_name, complete=complete)
