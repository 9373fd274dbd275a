"""The EAGLE-1 head (the interface it implements: :mod:`specpath_drafting.heads`).

EAGLE-1 (:class:`EagleHead`): ``z = fc([emb(x_{p+1}) ; f_p])`` (with bias) -> one decoder
layer -> ``a_p``, a prediction of the target's final feature ``f_{p+1}``; logits come from the
target's final norm (a frozen copy, ``norm.weight``) and the target's LM head (shared).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from specpath_engine.modeling.layers import DraftLayer
from specpath_engine.modeling.norm import RMSNorm
from specpath_drafting.heads import Embed, HeadConfig, HiddenStateHead
from specpath_drafting.numerics import quantized_weight


class EagleHead(HiddenStateHead):
    """EAGLE-1 (see the module docstring). ``lm_head`` is the target's head on normed states."""

    kind = "eagle"

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
