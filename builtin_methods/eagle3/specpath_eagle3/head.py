"""The EAGLE-3 head (and its P-EAGLE additions).

- Three target taps (low, middle, high layer) are fused: ``g = fc([l ; m ; h])`` (3d -> d, no
  bias).
- One decoder layer attends over ``[input_layernorm(emb(x_{p+1})) ; hidden_norm(g)]`` (2d wide:
  q/k/v project from 2d), with ``g`` as the residual. Its output ``a`` (pre-norm) replaces ``g``
  in the next chain step ("training-time test" teaches it to read its own outputs).
- Its own final norm and ``lm_head`` over a reduced draft vocabulary, mapped to target ids by
  ``d2t`` (offsets: ``target = draft + d2t[draft]``) and back by ``t2d`` (a boolean mask of the
  target ids the draft vocabulary covers), the reference EAGLE-3 conventions.
- P-EAGLE: a learned ``mask_hidden`` (num_taps x d, fused by ``fc`` like real taps) and a learned
  ``mask_embedding`` stand in for the unknown feature and token at masked query slots, so the
  K-1 later drafts come out of the same pass as the first.
"""

from __future__ import annotations

import torch
from torch import nn

from specpath_drafting.heads import Embed, HiddenStateHead
from specpath_engine.modeling.layers import DraftLayer
from specpath_engine.modeling.native import DraftHead, native_linears
from specpath_drafting.heads import HeadConfig
from specpath_engine.modeling.norm import RMSNorm
from specpath_drafting.numerics import quantized_weight


class Eagle3Head(HiddenStateHead):
    kind = "eagle3"

    def __init__(self, config: HeadConfig, *, embed_tokens: Embed | None = None) -> None:
        super().__init__(config, embed_tokens)
        d = config.hidden_size
        td = config.target_hidden_size or d
        self.fc = nn.Linear(config.num_taps * td, d, bias=False)
        self.input_layernorm = RMSNorm(d, config.rms_norm_eps)
        self.hidden_norm = RMSNorm(d, config.rms_norm_eps)
        self.layer = DraftLayer(config, attn_in=2 * d)
        self.norm = RMSNorm(d, config.rms_norm_eps)
        vd = self.draft_vocab_size
        self.lm_head = nn.Linear(d, vd, bias=False)
        self.register_buffer("d2t", torch.zeros(vd, dtype=torch.int64))
        self.register_buffer("t2d", torch.ones(config.vocab_size, dtype=torch.bool) if vd == config.vocab_size
                             else torch.zeros(config.vocab_size, dtype=torch.bool))
        if config.parallel_drafting:
            self.mask_hidden = nn.Parameter(torch.zeros(config.num_taps * td))
            self.mask_embedding = nn.Parameter(torch.zeros(d))

    def set_vocab_map(self, draft_to_target: torch.Tensor) -> None:
        """``draft_to_target[i]`` = the target id of draft id ``i`` (strictly increasing)."""
        ids = draft_to_target.to(torch.int64)
        if ids.shape[0] != self.draft_vocab_size:
            raise ValueError(f"the map has {ids.shape[0]} ids, the draft vocabulary {self.draft_vocab_size}")
        self.d2t.copy_(ids - torch.arange(ids.shape[0]))
        self.t2d.zero_()
        self.t2d[ids] = True

    @property
    def draft_ids(self) -> torch.Tensor:
        """Target id of every draft id."""
        return torch.arange(self.d2t.shape[0], device=self.d2t.device) + self.d2t

    def fuse(self, taps: torch.Tensor) -> torch.Tensor:
        if taps.shape[-2] != self.config.num_taps:
            raise ValueError(f"the EAGLE-3 head fuses {self.config.num_taps} taps, got {taps.shape[-2]}")
        return self.fc(taps.reshape(*taps.shape[:-2], -1))

    def mask_embeds(self, n: int) -> torch.Tensor:
        if not self.config.parallel_drafting:
            raise ValueError("this EAGLE-3 head was not trained for parallel drafting (no mask_hidden / mask_embedding)")
        return self.mask_embedding.expand(n, -1)

    def mask_features(self, n: int) -> torch.Tensor:
        if not self.config.parallel_drafting:
            raise ValueError("this EAGLE-3 head was not trained for parallel drafting (no mask_hidden / mask_embedding)")
        return self.fc(self.mask_hidden)[None, :].expand(n, -1)

    def layer_input(self, embeds, features):
        return torch.cat([self.input_layernorm(embeds), self.hidden_norm(features)], dim=-1), features

    def logits(self, a: torch.Tensor) -> torch.Tensor:
        """float32 logits over the draft vocabulary."""
        return self.lm_head(self.norm(a)).float()

    def to_target(self, draft_ids: torch.Tensor) -> torch.Tensor:
        return draft_ids + self.d2t[draft_ids]

    def probs_to_target(self, probs: torch.Tensor) -> torch.Tensor:
        if probs.shape[-1] == self.config.vocab_size and bool(self.t2d.all()):
            return probs
        out = probs.new_zeros(*probs.shape[:-1], self.config.vocab_size)
        out[..., self.draft_ids] = probs
        return out

    def native_draft_head(self):
        """The chain's native form: EAGLE-3's input stage, its reduced-vocabulary LM head and ``d2t``
        (read when built: a later :meth:`set_vocab_map` needs a rebuild), and ``fc`` where it runs on
        the native kernels (then the ingest runs natively too)."""
        table, layer, lm_head = self.embedding_table(), self.layer.native_linears(), native_linears(self.lm_head)
        fc = native_linears(self.fc)
        norms = (self.input_layernorm, self.hidden_norm, self.norm, self.layer.post_attention_layernorm)
        if table is None or layer is None or lm_head is None or table.dtype is not torch.bfloat16 or any(
                n.weight.dtype is not torch.bfloat16 for n in norms):
            return None
        embed_norm, hidden_norm, final_norm, post_norm = ((n.weight, n.eps) for n in norms)
        return DraftHead.of(embed=table, embed_norm=embed_norm, hidden_norm=hidden_norm, final_norm=final_norm,
                            post_norm=post_norm, layer=layer, lm_head=lm_head[0], ids=self.draft_ids.contiguous(),
                            fc=None if fc is None else fc[0], ingests=fc is not None)

    def quantize_lm_head(self, method: str) -> None:
        with torch.no_grad():
            self.lm_head.weight.copy_(quantized_weight(self.lm_head.weight, method))
