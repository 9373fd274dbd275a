"""A Llama-family decoder that loads Hugging Face checkpoints (Llama, Qwen3-style q/k-norm).

RMSNorm, RoPE (default/linear/llama3/dynamic/ntk/yarn, see ``rope.py``), grouped-query attention,
SwiGLU MLP, tied or untied ``lm_head``. Parameter names are the Hugging Face ones
(``model.embed_tokens.weight``, ``model.layers.N.self_attn.q_proj.weight``, ...,
``model.norm.weight``, ``lm_head.weight``) so ``state_dict()`` is a valid checkpoint as is.

The interface the engine and the drafters rely on:

- ``LlamaModel.from_pretrained(path, *, dtype=torch.float32, device="cpu")`` (an HF directory or a
  GGUF file) and ``LlamaModel(config)``.
- ``model.forward(input_ids [T], positions [T], attention=None, *, hidden_layers=(),
  logits_indices=None, hidden_store=None) -> ModelOutput``: tokens of one flattened batch (any
  number of requests, several query tokens each). ``attention(layer_idx, q, k, v) -> out``
  receives q [T, n_heads, head_dim] and k/v [T, n_kv_heads, head_dim] after RoPE and returns
  [T, n_heads, head_dim]; the engine passes its paged-KV attention, ``None`` means plain causal
  attention over the T tokens as one sequence. An attention object whose ``one_request()``
  returns the step's KV (:class:`RequestKV`: one request in a contiguous bf16 cache) lets the
  native kernels run every layer in one call (``NativeKernels.decoder_stack``), with the same bits
  as the per-layer path. ``ModelOutput.logits`` is float32 [len(logits_indices) or T, vocab];
  ``ModelOutput.hidden_states`` is [T, len(hidden_layers), hidden]: the outputs of those decoder
  layers (0-based) before the final norm, i.e. ``transformers``' ``hidden_states[i + 1]``. With
  ``hidden_store=(data [rows, len(hidden_layers), hidden], slots [T] int64)`` they go to those rows
  of ``data`` instead (the engine's feature store; ``hidden_states`` is None): the native stack
  writes them in its call, so no copy follows the pass.
- ``model.embed(ids)``, ``model.final_norm(h)``, ``model.lm_head_logits(normed_h)``: the target's
  embedding and head, for drafters that share them.
- ``causal_attention`` and ``BlockCausalAttention(block_size)``: reference attention callables;
  the block form attends bidirectionally inside each block (block-parallel drafters).
- ``model.forward_batch(input_ids [B, T]) -> logits [B, T, V]`` for training and perplexity.
- :class:`LlamaConfig` lives in :mod:`specpath_engine.model_config`.
- ``default_model_path()``: the embedded byte-level model shipped in ``specpath_engine/assets``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs
import torch
import torch.nn.functional as F
from torch import nn

from specpath_engine.modeling import checkpoint
from specpath_engine.modeling.gguf import is_gguf, read_gguf
from specpath_engine.modeling.layers import fused_linear
from specpath_engine.modeling.native import MAX_ROWS, TILE_ROWS, DecoderStack, native_kernels, native_linears
from specpath_engine.model_config import LlamaConfig, positive
from specpath_engine.modeling.norm import RMSNorm
from specpath_engine.modeling.rope import RotaryEmbedding, apply_rope

Attention = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


FEW_ROWS = 8
"""Rows up to which a float32 CPU head takes :meth:`LlamaModel.lm_head_logits`'s ``W @ h.T``
(a verification's K+1; from 8 rows on the two products take about the same time)."""


@attrs.frozen
class RequestKV:
    """A step's KV history as the native decoder stack takes it: one request in a contiguous
    bf16 cache."""

    kv: torch.Tensor
    """The whole cache, ``[layers, 2, slots, kv_heads, head_dim]``."""
    first_slot: int
    """The slot of the request's position 0 where its positions are one run of slots."""
    slots: torch.Tensor | None
    """int64 ``[length]``: each position's slot where they are not (a paged request); ``None``:
    one run from ``first_slot``."""
    length: int
    """Positions after this step, the step's new tokens last."""
    mask: torch.Tensor | None
    """``None`` (causal) or bool ``[T, length]``: the keys each new token sees (a token tree)."""


def default_model_path() -> Path:
    """Directory of the embedded default model (HF format, byte-level vocabulary)."""
    from specpath_engine.modeling.named_models import embedded_model_path

    return embedded_model_path()


@attrs.frozen
class ModelOutput:
    #: float32 [len(logits_indices) or T, vocab]
    logits: torch.Tensor
    #: [T, len(hidden_layers), hidden] outputs of the requested decoder layers, or None
    hidden_states: torch.Tensor | None = None


def _sdpa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kwargs: Any) -> torch.Tensor:
    """SDPA over [..., T, heads, head_dim] tensors with grouped KV heads."""
    groups = q.shape[-2] // k.shape[-2]
    if groups > 1:
        k = k.repeat_interleave(groups, dim=-2)
        v = v.repeat_interleave(groups, dim=-2)
    out = F.scaled_dot_product_attention(q.transpose(-3, -2), k.transpose(-3, -2), v.transpose(-3, -2), **kwargs)
    return out.transpose(-3, -2)


def _store(store: tuple[torch.Tensor, torch.Tensor], hidden: torch.Tensor) -> None:
    """Write ``hidden [T, L, hidden]`` to rows ``slots`` of ``data`` (``forward``'s ``hidden_store``)."""
    data, slots = store
    data.index_copy_(0, slots, hidden.to(data.dtype))


def _writable_in_place(store: tuple[torch.Tensor, torch.Tensor], h: torch.Tensor, layers: int) -> bool:
    """Whether the native stack may write ``store`` itself: it writes raw rows, so ``data`` must be
    contiguous ``[rows, layers, hidden]`` of h's dtype and the slots contiguous int64 (else the
    pass's outputs are copied in by :func:`_store`)."""
    data, slots = store
    return (data.dtype == h.dtype and data.dim() == 3 and data.shape[1:] == (layers, h.shape[-1])
            and data.is_contiguous() and slots.dtype == torch.int64 and slots.is_contiguous())


def causal_attention(layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Plain causal attention over the T tokens of one sequence (the ``attention=None`` default)."""
    return _sdpa(q, k, v, is_causal=True)


@attrs.frozen
class BlockCausalAttention:
    """Reference block mode: token i attends to every token of its own and of earlier blocks.

    ``block_size=1`` is causal attention; ``block_size >= T`` is fully bidirectional, the mask
    of block-parallel drafters that fill a whole block of draft positions in one pass.
    """

    block_size: int = attrs.field(validator=positive)

    def mask(self, num_tokens: int, device: torch.device | str = "cpu") -> torch.Tensor:
        block = torch.arange(num_tokens, device=device) // self.block_size
        return block[None, :] <= block[:, None]

    def __call__(self, layer_idx: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return _sdpa(q, k, v, attn_mask=self.mask(q.shape[-3], q.device))


class SelfAttention(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        c = config
        self.n_heads, self.n_kv_heads, self.head_dim = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.q_proj = nn.Linear(c.hidden_size, c.num_attention_heads * c.head_dim, bias=c.attention_bias)
        self.k_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=c.attention_bias)
        self.v_proj = nn.Linear(c.hidden_size, c.num_key_value_heads * c.head_dim, bias=c.attention_bias)
        self.o_proj = nn.Linear(c.num_attention_heads * c.head_dim, c.hidden_size, bias=c.attention_bias)
        if c.qk_norm:
            self.q_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
            self.k_norm = RMSNorm(c.head_dim, c.rms_norm_eps)
        self.qk_norm = c.qk_norm
        self.qkv_proj: nn.Linear | None = None

    def fuse(self) -> None:
        """q/k/v as one matmul (``qkv_proj``); the three layers are dropped."""
        self.qkv_proj = fused_linear(self.q_proj, self.k_proj, self.v_proj)
        del self.q_proj, self.k_proj, self.v_proj

    def qkv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
        """q [..., T, H, D], k/v [..., T, KV, D], RoPE applied to q and k."""
        lead = x.shape[:-1]
        h, kv, d = self.n_heads, self.n_kv_heads, self.head_dim
        if self.qkv_proj is not None:
            q, k, v = self.qkv_proj(x).split([h * d, kv * d, kv * d], dim=-1)
        else:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        q, k, v = q.view(*lead, h, d), k.view(*lead, kv, d), v.reshape(*lead, kv, d)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


class MLP(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        d, f, bias = config.hidden_size, config.intermediate_size, config.mlp_bias
        self.gate_proj = nn.Linear(d, f, bias=bias)
        self.up_proj = nn.Linear(d, f, bias=bias)
        self.down_proj = nn.Linear(f, d, bias=bias)
        self.gate_up_proj: nn.Linear | None = None

    def fuse(self) -> None:
        """gate/up as one matmul (``gate_up_proj``); the two layers are dropped."""
        self.gate_up_proj = fused_linear(self.gate_proj, self.up_proj)
        del self.gate_proj, self.up_proj

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate_up_proj is None:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        gate_up = self.gate_up_proj(x)
        if gate_up.shape[-1] % 32 == 0 and (native := native_kernels(gate_up)) is not None:
            return self.down_proj(native.silu_mul(gate_up.contiguous()))
        gate, up = gate_up.chunk(2, dim=-1)
        return self.down_proj(F.silu(gate) * up)


class DecoderLayer(nn.Module):
    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.self_attn = SelfAttention(config)
        self.mlp = MLP(config)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)

    def forward(
        self,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        attend: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor],
    ) -> torch.Tensor:
        if h.dim() == 2 and (native := native_kernels(h, cos, sin)) is not None:
            if (linears := self.native_linears()) is not None:
                return self._native_forward(native, linears, h.contiguous(), cos.contiguous(), sin.contiguous(), attend)
        q, k, v = self.self_attn.qkv(self.input_layernorm(h), cos, sin)
        out = attend(q, k, v)
        h, x = self.post_attention_layernorm.add_and_norm(h, self.self_attn.o_proj(out.reshape(*h.shape[:-1], -1)))
        return h + self.mlp(x)

    def native_linears(self) -> tuple[Any, ...] | None:
        """The four projections as native descriptors when the fused native halves can run this
        layer (fused native weights, no biases, no q/k norm, bf16 norms), else ``None``; asked every
        call, so a replaced or moved weight is never read through a stale pointer."""
        attn, mlp = self.self_attn, self.mlp
        if attn.qk_norm or attn.qkv_proj is None or mlp.gate_up_proj is None or attn.head_dim % 32:
            return None
        if self.input_layernorm.weight.dtype is not torch.bfloat16:
            return None
        return native_linears(attn.qkv_proj, attn.o_proj, mlp.gate_up_proj, mlp.down_proj)

    def _native_forward(self, native: Any, linears: tuple[Any, ...], h: torch.Tensor, cos: torch.Tensor,
                        sin: torch.Tensor, attend: Any) -> torch.Tensor:
        """Norm-QKV-RoPE and o_proj-MLP as one native call each; the attention between stays the
        caller's (the engine's paged attention)."""
        qkv, o_proj, gate_up, down = linears
        attn, norm = self.self_attn, self.input_layernorm
        heads, kv_heads = attn.n_heads, attn.n_kv_heads
        out = native.layer_pre(h, norm.weight, norm.eps, qkv, cos, sin, heads, kv_heads, attn.head_dim)
        out = attend(out[:, :heads], out[:, heads : heads + kv_heads], out[:, heads + kv_heads :])
        norm = self.post_attention_layernorm
        return native.layer_post(h, out.reshape(h.shape[0], -1).contiguous(), o_proj, norm.weight, norm.eps,
                                 gate_up, down)


class Backbone(nn.Module):
    """The ``model.`` prefix of HF names: embedding, decoder layers, final norm, rotary table."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        skeleton = torch.empty(()).device.type == "meta"
        if skeleton:  # from_pretrained's skeleton: weights come next
            # normal_ on a meta tensor runs torch's Python reference, whose import pulls in dynamo
            # (~1.5 s of a cold start); a skeleton needs no initial values.
            self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size,
                                             _weight=torch.empty(config.vocab_size, config.hidden_size))
        else:
            self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(config) for _ in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        if skeleton:  # the caller builds the rotary table outside the meta context (as above: dynamo)
            self.rotary_emb = None
            return
        self.rotary_emb = RotaryEmbedding(
            theta=config.rope_theta,
            head_dim=config.head_dim,
            scaling=config.rope_scaling,
            max_position_embeddings=config.max_position_embeddings,
        )


class LlamaModel(nn.Module):
    """Decoder + head with HF parameter names; see the module docstring for the interface."""

    def __init__(self, config: LlamaConfig) -> None:
        super().__init__()
        self.config = config
        self.model = Backbone(config)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight

    # -- loading -----------------------------------------------------------------------------

    @staticmethod
    def _config_from(raw: Mapping[str, Any], source: Path) -> LlamaConfig:
        try:
            config = LlamaConfig.from_hf_dict(raw)
        except (ValueError, TypeError) as exc:
            raise checkpoint.CheckpointError(f"{source}: {exc}") from None
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                     "num_key_value_heads", "head_dim", "max_position_embeddings"):
            value = getattr(config, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise checkpoint.CheckpointError(f"{source}: {name} must be a positive integer, got {value!r:.40}")
        return config

    @classmethod
    def _expected_tensors(
        cls, config: LlamaConfig, dtype: torch.dtype, source: Path
    ) -> tuple["LlamaModel", dict[str, torch.Size], frozenset[str]]:
        """(the model on meta, name -> shape of every tensor it loads, the optional names), after
        checking the model fits in memory."""
        from specpath_engine.modeling.memory import llama_bytes, require_memory

        itemsize = max(torch.empty((), dtype=dtype).element_size(), 4)  # loaded in float32 first
        require_memory(llama_bytes(config, itemsize), "the model", source)
        with torch.device("meta"):
            model = cls(config)
        expected = {name: p.shape for name, p in model.named_parameters(remove_duplicate=False)}
        optional = frozenset({"lm_head.weight"}) if config.tie_word_embeddings else frozenset()
        if config.tie_word_embeddings:
            expected.pop("lm_head.weight")
        return model, expected, optional

    @classmethod
    def check_pretrained(cls, path: str | os.PathLike[str], *, dtype: torch.dtype = torch.float32) -> LlamaConfig:
        """The checks :meth:`from_pretrained` makes on an HF directory (config, memory, tensor
        names, shapes and dtypes), reading the weight files' headers only: what a writer that
        checked its values runs on what it wrote (``specpath convert``)."""
        config = cls._config_from(checkpoint.read_config(path), Path(path) / checkpoint.CONFIG_NAME)
        _, expected, optional = cls._expected_tensors(config, dtype, Path(path))
        found = {name: torch.empty(shape, device="meta") for name, shape in checkpoint.tensor_shapes(path).items()}
        if config.tie_word_embeddings:
            found.pop("lm_head.weight", None)
        checkpoint.check_state_dict(expected, found, optional=optional, source=str(path))
        return config

    @classmethod
    def from_pretrained(
        cls,
        path: str | os.PathLike[str],
        *,
        dtype: torch.dtype = torch.float32,
        device: torch.device | str = "cpu",
        shared_tensors: Mapping[str, torch.Tensor] | None = None,
    ) -> "LlamaModel":
        """Load an HF-format directory (``config.json`` + safetensors weights) or a GGUF file
        (dequantised straight to ``dtype``, see ``specpath_engine.modeling.gguf``).

        ``shared_tensors``: weights the checkpoint leaves out and the caller lends, by HF name (a
        draft that borrows its target's embedding); the checkpoint's own tensors win."""
        gguf_file = None
        if is_gguf(path):
            gguf_file = read_gguf(path)
            raw, source = gguf_file.config, Path(path)
        else:
            raw, source = checkpoint.read_config(path), Path(path) / checkpoint.CONFIG_NAME
        config = cls._config_from(raw, source)
        model, expected, optional = cls._expected_tensors(config, dtype, source)
        if gguf_file is not None:
            from specpath_engine.modeling.weight_cache import cached_state_dict

            own = cached_state_dict(Path(path), dtype, lambda: gguf_file.state_dict(dtype))
        else:
            own = checkpoint.load_state_dict(path)
        tensors = {**(shared_tensors or {}), **own}
        if config.tie_word_embeddings:
            tensors.pop("lm_head.weight", None)
        tensors = checkpoint.check_state_dict(expected, tensors, optional=optional, source=str(path))
        model.load_state_dict(tensors, strict=False, assign=True)
        if config.tie_word_embeddings:
            model.lm_head.weight = model.model.embed_tokens.weight
        # The RoPE tables (non-persistent buffers) are built here, outside the meta context.
        model.model.rotary_emb = RotaryEmbedding(
            theta=config.rope_theta,
            head_dim=config.head_dim,
            scaling=config.rope_scaling,
            max_position_embeddings=config.max_position_embeddings,
        )
        return model.to(device=device, dtype=dtype).eval()

    def save_pretrained(self, path: str | os.PathLike[str], *, extra_config: Mapping[str, Any] | None = None) -> Path:
        """Write HF ``config.json`` + ``model.safetensors`` (tied head stored once, as HF does)."""
        state = {k: v for k, v in self.state_dict().items()}
        if self.config.tie_word_embeddings:
            state.pop("lm_head.weight", None)
        config = {**self.config.to_hf_dict(), **(extra_config or {})}
        config["torch_dtype"] = str(next(self.parameters()).dtype).removeprefix("torch.")
        return checkpoint.save_checkpoint(path, config=config, state_dict=state)

    def fuse_projections(self) -> "LlamaModel":
        """Inference only: each layer's q/k/v and gate/up projections as one matmul each (a decode
        step on a CPU pays per call; the outputs are the same products). The state dict then has
        ``qkv_proj``/``gate_up_proj`` in place of the HF names: fuse after loading, never before
        saving."""
        for layer in self.model.layers:
            if layer.self_attn.qkv_proj is None:
                layer.self_attn.fuse()
            if layer.mlp.gate_up_proj is None:
                layer.mlp.fuse()
        return self

    # -- pieces shared with drafters ----------------------------------------------------------

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(input_ids)

    def embedding_table(self) -> torch.Tensor | None:
        """The ``[vocab, hidden]`` table :meth:`embed` looks rows up in, for a native drafting chain
        that looks them up itself (None when the embedding is not a plain ``nn.Embedding``)."""
        embedding = self.model.embed_tokens
        return embedding.weight if type(embedding) is nn.Embedding and embedding.weight.is_contiguous() else None

    def final_norm(self, h: torch.Tensor) -> torch.Tensor:
        return self.model.norm(h)

    def lm_head_logits(self, h: torch.Tensor) -> torch.Tensor:
        """float32 logits of already-normed hidden states ``h [T, d]`` -> ``[T, V]``.

        An unpacked float32 head on the CPU (``SPECPATH_PREPACK=0``, a torch without oneDNN: see
        :mod:`specpath_engine.packed_linear`) multiplies a verification's few rows as ``W @ h.T``: MKL's
        ``F.linear`` for 2-3 rows takes 2.4-3.5x its one-row time there (SmolLM2's 49,152-row head
        on an AMD EPYC: 7.1 ms for one row, 17.3 / 25.1 ms for two / three, against 4.7 / 6.5 ms
        as ``W @ h.T``), which priced every draft out of a float32 target."""
        head = self.lm_head
        if (type(head) is nn.Linear and head.bias is None and h.dtype is torch.float32 and h.dim() == 2
                and 1 < h.shape[0] <= FEW_ROWS and h.device.type == "cpu" and head.weight.dtype is torch.float32):
            return torch.mm(head.weight, h.t()).t().contiguous()  # [V, d] @ [d, T] -> [T, V]
        return head(h).float()

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin [T, head_dim] for ``positions`` (for drafters that reuse the target's RoPE)."""
        return self.model.rotary_emb(positions)

    # -- forward passes -----------------------------------------------------------------------

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        attention: Attention | None = None,
        *,
        hidden_layers: Sequence[int] = (),
        logits_indices: torch.Tensor | None = None,
        hidden_store: tuple[torch.Tensor, torch.Tensor] | None = None,
    ) -> ModelOutput:
        """One flattened step of T tokens; see the module docstring for shapes."""
        attention = causal_attention if attention is None else attention
        if hidden_layers:
            self._check_layers(hidden_layers)
        cos, sin = self.model.rotary_emb(positions)
        h = self.model.embed_tokens(input_ids)
        writable = hidden_store is not None and _writable_in_place(hidden_store, h, len(hidden_layers))
        direct = hidden_store if writable else None
        stacked = self._native_stack(h, cos, sin, attention, tuple(hidden_layers), direct)
        if stacked is not None:
            h, hidden = stacked  # (None where the stack wrote the store itself)
        else:
            captured = []
            for i, layer in enumerate(self.model.layers):
                h = layer(h, cos, sin, lambda q, k, v, i=i: attention(i, q, k, v))
                if i in hidden_layers:
                    captured.append(h)
            hidden = None
            if hidden_layers:
                by_layer = dict(zip(sorted(set(hidden_layers)), captured))
                hidden = torch.stack([by_layer[i] for i in hidden_layers], dim=-2)
        if hidden_store is not None and hidden is not None:
            _store(hidden_store, hidden)
            hidden = None
        if logits_indices is not None:
            h = h.index_select(0, logits_indices)
        return ModelOutput(logits=self.lm_head_logits(self.model.norm(h)), hidden_states=hidden)

    def _native_stack(self, h: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, attention: Any,
                      hidden_layers: tuple[int, ...], store: tuple[torch.Tensor, torch.Tensor] | None = None,
                      ) -> tuple[torch.Tensor, torch.Tensor | None] | None:
        """Every layer in one native call where the per-layer path would run each layer natively
        (:meth:`DecoderLayer.native_linears`, bf16) with the native attention (one request);
        ``None`` elsewhere. A step of a small model on a CPU spends a sixth of its time in
        the Python between the layers' native calls."""
        one_request = getattr(attention, "one_request", None)
        if one_request is None or h.dim() != 2 or self.config.head_dim % 32:
            return None
        native = native_kernels(h, cos, sin)
        run = one_request() if native is not None else None
        if run is None:
            return None
        stack = self._decoder_stack()
        if stack is None:
            return None
        attn = self.model.layers[0].self_attn
        return native.decoder_stack(stack, h.contiguous(), cos.contiguous(), sin.contiguous(), attn.n_heads,
                                    attn.n_kv_heads, attn.head_dim, run.kv, run.first_slot, run.length, run.mask,
                                    hidden_layers, run.slots, store)

    @property
    def row_block(self) -> int:
        """Query rows a step multiplies per pass over each weight: the AMX tiles' 16, the native
        rows kernels' 16 (int4, int8, bf16 without tiles), 0 on torch's matmuls (no blocks to
        speak of). A step's rows past a multiple of it cost another pass (the draft governor's
        cost model takes them as blocks)."""
        linears = self.model.layers[0].native_linears() if len(self.model.layers) else None
        if linears is None:
            return 0
        return TILE_ROWS if linears[0].tiled else MAX_ROWS

    def _decoder_stack(self) -> DecoderStack | None:
        """The layers as one native array (``None`` when a layer cannot run natively), kept
        while :meth:`DecoderStack.valid`: a step then skips the walk over every layer's modules."""
        stack = self.__dict__.get("_stack")
        if stack is not None and stack.valid():
            return stack
        parts = []
        for layer in self.model.layers:
            linears = layer.native_linears()
            if linears is None:
                return None
            a, b = layer.input_layernorm, layer.post_attention_layernorm
            parts.append((a.weight.contiguous(), a.eps, b.weight.contiguous(), b.eps, linears))
        stack = self.__dict__["_stack"] = DecoderStack(parts)
        return stack

    def _apply(self, fn: Any, recurse: bool = True) -> "LlamaModel":
        # .to(), .float(), ... may hand buffers new tensors without a registration hook
        self.__dict__.pop("_stack", None)
        return super()._apply(fn, recurse)

    def forward_batch(self, input_ids: torch.Tensor, *, last_only: bool = False) -> torch.Tensor:
        """Causal logits [B, T, V] for equal-length rows starting at position 0 (training, perplexity);
        ``last_only``: [B, 1, V], the last position's only (no head product for the others)."""
        positions = torch.arange(input_ids.shape[-1], device=input_ids.device)
        cos, sin = self.model.rotary_emb(positions)
        h = self.model.embed_tokens(input_ids)
        for layer in self.model.layers:
            h = layer(h, cos, sin, _batched_causal)
        if last_only:
            h = h[:, -1:]
        return self.lm_head(self.model.norm(h)).float()

    def _check_layers(self, hidden_layers: Sequence[int]) -> None:
        n = self.config.num_hidden_layers
        bad = [i for i in hidden_layers if not (isinstance(i, int) and 0 <= i < n)]
        if bad:
            raise ValueError(f"hidden_layers: {bad} out of range; layers are 0..{n - 1}")


def _batched_causal(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return _sdpa(q, k, v, is_causal=True)
