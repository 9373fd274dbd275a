"""The DFlash drafter: target taps fused into context features that every draft layer reads as
extra keys and values, and a block of queries drafted in one non-causal pass.

- **Context**: ``ctx_p = RMSNorm(fc([h^(l1)_p ; ... ; h^(lm)_p]))`` for every committed position
  p (the taps are outputs of chosen target layers, before the final norm). In each draft layer
  the context contributes keys ``W_K ctx_p`` and values ``W_V ctx_p`` (RoPE at p) and no queries:
  it never attends to anything, so it is computed once per position and kept (the context KV).
- **Block**: the queries are the anchor (the last sampled token, not yet committed) and mask
  slots (a learned embedding) at the positions right after the context. They attend to all
  context keys before the anchor and to each other in both directions.
- **Output**: the drafter's final norm, then the target's (frozen, shared) LM head.

Layouts: DFlash's own is ``[anchor, K masks]`` where mask j predicts the token at its own
position; DSpark's anchor-first layout is ``[anchor, K-1 masks]`` where every query predicts
the token after its position (``anchor_sampling``). Nothing else differs, so one module
serves both; the layout is recorded in ``config.json`` and checked at start-up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs
import torch
from torch import nn

from specpath_engine.modeling.layers import DraftLayer, LayerShape, layer_shape
from specpath_engine.modeling.norm import RMSNorm
from specpath_drafting.checkpoints import load_drafter_weights, read_drafter_config, save_drafter_checkpoint

Embed = Callable[[torch.Tensor], torch.Tensor]


@attrs.frozen(kw_only=True)
class DrafterConfig(LayerShape):
    """The architecture fields of a DFlash/DSpark drafter's ``config.json``."""

    kind: str = "dflash"
    """``"dflash"`` or ``"dspark"``; written as ``model_type``."""
    num_hidden_layers: int
    """Draft layers (1-2 here; 5 in the papers)."""
    target_hidden_size: int
    target_num_hidden_layers: int
    target_layer_ids: tuple[int, ...]
    """The target layers fused into the context (0-based decoder-layer outputs)."""
    num_draft_tokens: int = 7
    """K the drafter was trained for (the default ``num_speculative_tokens``)."""
    anchor_sampling: bool = False
    """The block layout (see the module docstring)."""
    markov_rank: int = 0
    """DSpark: rank r of the Markov head (0: none)."""
    confidence_temperatures: tuple[float, ...] | None = None
    """DSpark: per-position temperatures of the confidence head (sequential calibration)."""

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DrafterConfig:
        temps = d.get("confidence_temperatures")
        return cls(
            kind=str(d.get("model_type", "dflash")),
            **layer_shape(d),
            num_hidden_layers=d["num_hidden_layers"],
            target_hidden_size=d.get("target_hidden_size", d["hidden_size"]),
            target_num_hidden_layers=d["target_num_hidden_layers"],
            target_layer_ids=tuple(d["target_layer_ids"]),
            num_draft_tokens=d.get("num_draft_tokens", 7),
            anchor_sampling=bool(d["anchor_sampling"]),
            markov_rank=d.get("markov_rank", 0),
            confidence_temperatures=None if temps is None else tuple(float(t) for t in temps),
        )

    @classmethod
    def for_target(cls, kind: str, target: Mapping[str, Any], *, num_layers: int = 1, num_taps: int = 3,
                   **overrides: Any) -> DrafterConfig:
        """A drafter shaped like the target's layers (what the recipes train)."""
        from specpath_drafting.block.config import build_target_layer_ids

        fields = dict(
            kind=kind,
            **layer_shape(target),
            num_hidden_layers=num_layers,
            target_hidden_size=target["hidden_size"],
            target_num_hidden_layers=target["num_hidden_layers"],
            target_layer_ids=build_target_layer_ids(target["num_hidden_layers"], num_taps),
            anchor_sampling=(kind == "dspark"),
        )
        fields.update(overrides)
        return cls(**fields)

    def to_dict(self) -> dict[str, Any]:
        arch = {"dflash": "DFlashDraftModel", "dspark": "DSparkDraftModel"}[self.kind]
        out = {
            "architectures": [arch],
            "model_type": self.kind,
            "speculator_config_class": self.kind,
            **self.shape_dict(),
            "num_hidden_layers": self.num_hidden_layers,
            "target_hidden_size": self.target_hidden_size,
            "target_num_hidden_layers": self.target_num_hidden_layers,
            "target_layer_ids": list(self.target_layer_ids),
            "num_draft_tokens": self.num_draft_tokens,
            "anchor_sampling": self.anchor_sampling,
            "torch_dtype": "float32",
        }
        if self.markov_rank:
            out["markov_rank"] = self.markov_rank
        if self.confidence_temperatures is not None:
            out["confidence_temperatures"] = list(self.confidence_temperatures)
        return out


def block_attention(q: torch.Tensor, k_ctx: torch.Tensor, v_ctx: torch.Tensor, ctx_visible: torch.Tensor,
                    k_blk: torch.Tensor, v_blk: torch.Tensor) -> torch.Tensor:
    """Block queries over context keys (masked) and their own block (all visible).

    ``q`` [S, A, B, H, D]: S sequences, A blocks each, B queries per block; ``k_ctx``/``v_ctx``
    [S, P, KV, D] the sequence's context; ``ctx_visible`` [S, A, P] which context positions each
    block may see; ``k_blk``/``v_blk`` [S, A, B, KV, D]. Returns [S, A, B, H, D].
    """
    s, a, b, h, d = q.shape
    kv = k_ctx.shape[2]
    g = q.view(s, a, b, kv, h // kv, d)
    scale = 1.0 / math.sqrt(d)
    ctx = torch.einsum("sabkgd,spkd->sakgbp", g, k_ctx) * scale
    ctx = ctx.masked_fill(~ctx_visible[:, :, None, None, None, :], float("-inf"))
    blk = torch.einsum("sabkgd,sackd->sakgbc", g, k_blk) * scale
    w = torch.cat([ctx, blk], dim=-1).softmax(dim=-1)
    p = k_ctx.shape[1]
    out = torch.einsum("sakgbp,spkd->sabkgd", w[..., :p], v_ctx) + torch.einsum("sakgbc,sackd->sabkgd", w[..., p:], v_blk)
    return out.reshape(s, a, b, h, d)


class DFlashDrafter(nn.Module):
    """Weights and passes of the drafter (see the module docstring). The target's embedding and
    LM head are lent (``embed_tokens``, ``lm_head`` on final-normed states), never copied."""

    def __init__(self, config: DrafterConfig, *, embed_tokens: Embed | None = None,
                 lm_head: Callable[[torch.Tensor], torch.Tensor] | None = None) -> None:
        super().__init__()
        self.config = config
        d = config.hidden_size
        self.fc = nn.Linear(len(config.target_layer_ids) * config.target_hidden_size, d, bias=False)
        self.hidden_norm = RMSNorm(d, config.rms_norm_eps)
        self.mask_embedding = nn.Parameter(torch.zeros(d))
        self.input_layernorms = nn.ModuleList(RMSNorm(d, config.rms_norm_eps) for _ in range(config.num_hidden_layers))
        self.layers = nn.ModuleList(DraftLayer(config, attn_in=d) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(d, config.rms_norm_eps)
        self.rotary = config.rotary()
        self._embed = embed_tokens
        self._lm_head = lm_head

    @property
    def dtype(self) -> torch.dtype:
        return self.norm.weight.dtype  # norms keep plain parameters (linears may be pre-packed)

    # -- inputs ----------------------------------------------------------------------------
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        if self._embed is None:
            raise ValueError("the drafter needs the target's embedding (SpeculatorContext.embed_tokens)")
        return self._embed(ids).to(self.dtype)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cos, sin = self.rotary(positions)
        return cos.to(self.dtype), sin.to(self.dtype)

    def context(self, taps: torch.Tensor) -> torch.Tensor:
        """``[..., num_taps, target_hidden]`` target states -> ``[..., d]`` context features."""
        if taps.shape[-2] != len(self.config.target_layer_ids):
            raise ValueError(f"the drafter fuses {len(self.config.target_layer_ids)} taps, got {taps.shape[-2]}")
        return self.hidden_norm(self.fc(taps.reshape(*taps.shape[:-2], -1).to(self.dtype)))

    def context_kv(self, layer: int, ctx: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """Keys (RoPE applied) and values of context features in draft layer ``layer``."""
        from specpath_engine.modeling.rope import apply_rope

        m = self.layers[layer]
        lead = ctx.shape[:-1]
        k = m.k_proj(ctx).view(*lead, m.n_kv_heads, m.head_dim)
        v = m.v_proj(ctx).view(*lead, m.n_kv_heads, m.head_dim)
        return apply_rope(k, cos, sin), v

    def block_embeds(self, ids: torch.Tensor) -> torch.Tensor:
        """Embeddings of block input ids, where a negative id is a mask slot."""
        emb = self.embed(ids.clamp_min(0))
        return torch.where((ids < 0)[..., None], self.mask_embedding.to(emb.dtype), emb)

    # -- the block pass --------------------------------------------------------------------
    def block(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
              context_kv: Callable[[int], tuple[torch.Tensor, torch.Tensor]], ctx_visible: torch.Tensor) -> torch.Tensor:
        """``h`` [S, A, B, d] block inputs -> [S, A, B, d] outputs; ``context_kv(i)`` gives layer
        i's context keys/values [S, P, KV, D]; ``cos``/``sin`` broadcast to [S, A, B, D]."""
        for i, layer in enumerate(self.layers):
            x = self.input_layernorms[i](h)
            k_ctx, v_ctx = context_kv(i)

            def attend(q, k, v, k_ctx=k_ctx, v_ctx=v_ctx):
                return block_attention(q, k_ctx, v_ctx, ctx_visible, k, v)

            h = layer(x, h, cos, sin, attend)
        return h

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """float32 logits over the target vocabulary (the target's head on the drafter's norm)."""
        if self._lm_head is None:
            raise ValueError("the drafter needs the target's LM head (SpeculatorContext.lm_head)")
        return self._lm_head(self.norm(hidden)).float()

    def kept_logits(self, hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
        """``(logits [..., n] float32, ids [n] sorted)``: :meth:`logits` at the ids a reduced
        draft vocabulary keeps (every other logit is ``-inf`` there), or None when the head keeps
        the whole vocabulary (:class:`specpath_drafting.vocab.RestrictedLMHead`)."""
        kept = getattr(self._lm_head, "kept_logits", None)
        return None if kept is None else kept(self.norm(hidden))


# -- checkpoints ---------------------------------------------------------------------------------


def read_config(path: str | Path) -> DrafterConfig:
    return read_drafter_config(path, DrafterConfig.from_dict, "DFlash/DSpark drafter")


def save_drafter(drafter: nn.Module, path: str | Path, *, extra_config: dict | None = None,
                 dtype: torch.dtype | None = None) -> Path:
    """Write the drafter's checkpoint (see :func:`~specpath_drafting.checkpoints.save_drafter_checkpoint`)."""
    return save_drafter_checkpoint(drafter, path, extra_config=extra_config, dtype=dtype)


def load_weights(drafter: nn.Module, path: str | Path, *,
                 complete: Callable[[dict[str, torch.Tensor]], None] | None = None) -> nn.Module:
    """Load ``model.safetensors`` into ``drafter``; every tensor must be present with its shape
    (after ``complete`` adds those the drafter derives: a training run's grown layers)."""
    return load_drafter_weights(drafter, path, f"{drafter.config.kind} drafter", complete=complete)


def random_drafter(config: DrafterConfig, path: str | Path, *, seed: int = 0,
                   build: Callable[[DrafterConfig], nn.Module] | None = None) -> Path:
    """Write a random-weight drafter (tests, conformance); ``build`` makes the module
    (default: :class:`DFlashDrafter`)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        drafter = (build or DFlashDrafter)(config)
        with torch.no_grad():  # parameters that start at zero (mask embedding, Markov W2...) get noise
            for p in drafter.parameters():
                if p.dim() >= 1 and not bool(p.any()):
                    p.normal_(0, 1.0 if p.dim() == 1 else 0.5)
    return save_drafter(drafter, path)
