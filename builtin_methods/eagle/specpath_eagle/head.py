"""Hidden-state heads: the interface the drafting loop drives, and the EAGLE-1 head.

A head turns (target feature of position p, embedding of token p+1) into its own output
``a_p`` (pre-norm, d wide), from which it predicts token p+2. The drafting loop
(:mod:`specpath_eagle.speculator`) only calls:

- ``fuse(taps)``: target hidden states ``[T, num_taps, d]`` -> the feature the layer reads;
- ``embed(ids)``: the (frozen, shared) target embedding;
- ``step(embeds, features, positions, attend)``: one pass of the decoder layer -> ``a``;
  during a chain, ``a`` of draft j is the feature of draft j+1;
- ``logits(a)``: float32 logits over the draft vocabulary; ``to_target(ids)`` and
  ``probs_to_target(p)`` map the draft vocabulary onto the target's (identity unless reduced);
- for P-EAGLE, ``mask_embeds(n)`` / ``mask_features(n)``: what masked query slots read.

EAGLE-1 (:class:`EagleHead`): ``z = fc([emb(x_{p+1}) ; f_p])`` (with bias) -> one decoder
layer -> ``a_p``, a prediction of the target's final feature ``f_{p+1}``; logits come from the
target's final norm (a frozen copy, ``norm.weight``) and the target's LM head (shared).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn

from specpath_eagle.layers import Attend, DraftLayer, HeadConfig, RMSNorm, quantized_weight

Embed = Callable[[torch.Tensor], torch.Tensor]


class HiddenStateHead(nn.Module):
    """What the drafting loop needs from a head (see the module docstring)."""

    config: HeadConfig

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
        return self.fc.weight.dtype  # every head fuses its inputs through ``fc``

    def quantize_lm_head(self, method: str) -> None:
        """Apply ``draft_lm_head_quantization`` to the head the drafts use."""
        raise NotImplementedError


class EagleHead(HiddenStateHead):
    """EAGLE-1 (see the module docstring). ``lm_head`` is the target's head on normed states."""

    def __init__(self, config: HeadConfig, *, embed_tokens: Embed | None = None,
                 lm_head: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__(config, embed_tokens)
        d = config.hidden_size
        self.fc = nn.Linear(2 * d, d, bias=True)
        self.input_layernorm = RMSNorm(d, config.rms_norm_eps)
        self.layer = DraftLayer(config, attn_in=d)
        self.norm = RMSNorm(d, config.rms_norm_eps)
        """A frozen copy of the target's final norm (the head predicts pre-norm features)."""
        self._lm_head = lm_head
        self._quantized_head: torch.Tensor | None = None

    def layer_input(self, embeds, features):
        z = self.fc(torch.cat([embeds, features], dim=-1))
        return self.input_layernorm(z), z

    def logits(self, a: torch.Tensor) -> torch.Tensor:
        normed = self.norm(a)
        if self._quantized_head is not None:
            return (normed @ self._quantized_head.T).float()
        if self._lm_head is None:
            raise ValueError("EagleHead needs the target's LM head (SpeculatorContext.lm_head)")
        return self._lm_head(normed).float()

    def quantize_lm_head(self, method: str) -> None:
        """fp8 / nvfp4 over the shared head: its weight is read back by applying the (bias-free,
        linear) head to the identity, then rounded (fp8: per-row scales; nvfp4: 16-element
        blocks, simulated)."""
        quantized_weight(torch.zeros(1, 1), method)  # an unknown method fails before any work
        d = self.config.hidden_size
        eye = torch.eye(d, dtype=self.dtype)
        with torch.no_grad():
            weight = self._lm_head(eye).T.to(self.dtype).contiguous()  # lm_head(I) = I @ W.T
            probe = torch.randn(2, d, dtype=self.dtype, generator=torch.Generator().manual_seed(0))
            if not torch.allclose(self._lm_head(probe).double(), (probe @ weight.T).double(), atol=1e-3, rtol=1e-3):
                raise ValueError("draft_lm_head_quantization needs a linear, bias-free target LM head")
        self._quantized_head = quantized_weight(weight, method)


# -- checkpoints ----------------------------------------------------------------------------


def read_head_config(path: str | Path) -> HeadConfig:
    config_path = Path(path) / "config.json"
    try:
        raw = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{config_path}: cannot read the head's config: {exc}") from None
    try:
        return HeadConfig.from_dict(raw)
    except (KeyError, TypeError) as exc:
        raise ValueError(f"{config_path}: not a hidden-state head config ({exc})") from None


def save_head(head: HiddenStateHead, path: str | Path, *, extra_config: dict | None = None,
              dtype: torch.dtype | None = None) -> Path:
    """Write ``config.json`` + ``model.safetensors`` (HF layout, no pickle); ``dtype`` casts the
    floating-point weights (shipped heads are float16: half the bytes, same drafts in practice)."""
    from specpath.modeling.checkpoint import save_checkpoint

    config = {**head.config.to_dict(), **(extra_config or {})}
    state = {k: v for k, v in head.state_dict().items() if not k.startswith("rotary.")}
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
        config["torch_dtype"] = str(dtype).removeprefix("torch.")
    return save_checkpoint(path, config=config, state_dict=state)


def load_head_weights(head: HiddenStateHead, path: str | Path) -> HiddenStateHead:
    """Load ``model.safetensors`` into ``head``; every parameter must be present with its shape."""
    from safetensors.torch import load_file

    weights = Path(path) / "model.safetensors"
    tensors = load_file(str(weights))
    expected = {k: v.shape for k, v in head.state_dict().items() if not k.startswith("rotary.")}
    missing = sorted(set(expected) - set(tensors))
    extra = sorted(set(tensors) - set(expected))
    if missing or extra:
        raise ValueError(f"{weights}: tensors do not match a {head.config.kind} head (missing {missing[:4]}, unexpected {extra[:4]})")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != tuple(shape):
            raise ValueError(f"{weights}: {name} has shape {tuple(tensors[name].shape)}, expected {tuple(shape)}")
    dtype = head.dtype
    head.load_state_dict({k: v.to(dtype) if v.is_floating_point() else v for k, v in tensors.items()}, strict=False)
    return head
