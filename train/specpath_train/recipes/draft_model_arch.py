"""The draft_model recipes' architecture: a small byte-level ``LlamaModel``, built fresh, loaded
from ``--init`` or grown by identity layers, and run over windows with a custom mask (PARD's
layout) outside the serving engine."""

from __future__ import annotations

import argparse
from typing import Any

import torch
import torch.nn.functional as F


def new_draft(vocab_size: int, layers: int, hidden: int, ffn: int, max_positions: int, **extra: Any):
    """A fresh draft of ``layers`` decoder layers, 32-dim heads, tied embeddings."""
    from specpath_engine.model import LlamaModel
    from specpath_engine.model_config import LlamaConfig

    heads = max(1, hidden // 32)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
        num_attention_heads=heads, num_key_value_heads=max(1, heads // 2), head_dim=32,
        max_position_embeddings=max_positions, tie_word_embeddings=True, rms_norm_eps=1e-5,
        bos_token_id=0, eos_token_id=0, pad_token_id=0, **extra,
    )
    return LlamaModel(config)


def initial_draft(args: argparse.Namespace, vocab_size: int, log):
    """A fresh draft, or ``--init``'s weights (e.g. trained against an earlier export of the target)."""
    if not args.init:
        return new_draft(vocab_size, args.layers, args.hidden, args.ffn, args.max_positions)
    from specpath_engine.model import LlamaModel

    model = LlamaModel.from_pretrained(args.init)
    if model.config.vocab_size != vocab_size:
        raise SystemExit(f"--init {args.init}: vocab_size {model.config.vocab_size}, expected {vocab_size}")
    log(f"initialised from {args.init}")
    if args.layers > model.config.num_hidden_layers:
        model = grow_draft(model, args.layers)
        log(f"grown to {args.layers} layers (new layers start as the identity)")
    return model


def grow_draft(model, layers: int):
    """``model`` with extra decoder layers on top whose output projections are zero, so the grown
    model computes exactly what ``model`` did and training starts from there."""
    import attrs

    from specpath_engine.model import LlamaModel

    old = model.config.num_hidden_layers
    grown = LlamaModel(attrs.evolve(model.config, num_hidden_layers=layers))
    missing, unexpected = grown.load_state_dict(model.state_dict(), strict=False)
    assert not unexpected and all(".layers." in name for name in missing), (missing, unexpected)
    with torch.no_grad():
        for layer in grown.model.layers[old:]:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return grown


def hidden_states(draft, tokens: torch.Tensor, positions: torch.Tensor | None = None,
                  mask: torch.Tensor | None = None) -> torch.Tensor:
    """The draft's pre-norm outputs ``[B, N, d]`` over ``tokens`` [B, N]: causal windows, or
    ``positions`` [N] with a boolean ``mask`` [N, N] (True: may attend) such as PARD's layout."""
    backbone = draft.model
    cos, sin = backbone.rotary_emb(torch.arange(tokens.shape[1]) if positions is None else positions)
    h = backbone.embed_tokens(tokens)

    def attend(q, k, v):
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, N, D]
        if mask is None:
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        return out.transpose(1, 2)

    for layer in backbone.layers:
        h = layer(h, cos, sin, attend)
    return h


def batched_logits(model, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Logits ``[B, N, V]`` with a shared ``[N, N]`` boolean mask (None = causal)."""
    return model.lm_head(model.model.norm(hidden_states(model, ids, positions, mask))).float()
