"""The block-drafting loop DFlash and DSpark share: per request, a position-indexed context KV
in every draft layer, and each step one non-causal pass over the block.

Each step, for the whole batch at once:

1. *Ingest*: the positions the target committed since the last call (their target taps) are
   fused into context features and projected into every layer's keys and values at their
   slots (``row * row_len + position``). Rejected drafts never entered this KV (only committed
   positions do), so rollback is nothing more than the next ingest starting where the target
   stopped.
2. *Draft*: the block inputs (anchor = the last sampled token, then mask slots, at the positions
   after the context) go through the drafter once; block keys/values live only inside that pass.
   The method's :meth:`BlockSpeculator.choose` turns the K predictions into drafts
   (``specpath_dflash.speculator``: independent positions; ``specpath_dspark.speculator``: left to
   right through the Markov head); with adaptive verification only a prefix is proposed.

On bf16 CPU with the native kernels steps 1 and 2 are one C call (:meth:`BlockSpeculator.step_native`,
``block_draft.c``), the per-op path's KV and block outputs to the bit; the per-op path stays the
reference and runs everywhere else.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch

from specpath_engine.draft_overrides import kv_settings
from specpath_engine.modeling.dispatch import triton_or_reference
from specpath_engine.modeling.dtypes import torch_dtype
from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, SpeculatorContext
from specpath_drafting import coupling
from specpath_drafting.block.adaptive import VerifyCost, schedule
from specpath_drafting.block.drafter import DFlashDrafter, DrafterConfig, load_weights, read_config
from specpath_drafting.block.reference import build_block_queries_reference
from specpath_drafting.checkpoints import recorded_temperature_scale
from specpath_drafting.heads import lent_table
from specpath_drafting.kv import DrafterKV
from specpath_drafting.vocab import serving_lm_head


def _block_prepared(prepare: Any, module: torch.nn.Module) -> torch.nn.Module:
    """``prepare(module)`` with its int8 layers on bf16 activations: a block pass runs K + 1 rows
    (and its context ingest the new positions), where the int16-activation kernel a drafter's
    int8 layers take by default loses to the bf16 one (it pays at one to three rows: a chain's)."""
    module = prepare(module)
    for layer in module.modules():
        if callable(use := getattr(layer, "use_int16_activations", None)):
            use(False)
    return module


def block_queries_fn(device: torch.device):
    """The Triton kernel on CUDA, its torch reference elsewhere."""
    return triton_or_reference(device, "specpath_drafting.block.kernels:build_block_queries",
                               build_block_queries_reference)


class BlockSpeculator(BaseSpeculator):
    """See the module docstring. Subclasses name the drafter ``kind`` (as its ``config.json``
    records it) and implement :meth:`choose`."""

    kind: str

    def __init__(self, spec: Any, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        self.device = torch.device(context.device)
        self.dtype = torch_dtype(context.dtype)
        flags = spec.speculator_config
        self.k = int(spec.num_speculative_tokens)
        self.anchor_first = bool(flags.anchor_sampling)
        self.random_drafts = spec.draft_sample_method == "random"
        self.temperature_scale = recorded_temperature_scale(spec.model)
        """A sampled request drafts (or races) at its temperature times this (the checkpoint's
        calibration, ``specpath_temperature_scale``); greedy stays greedy."""
        self.prepare = None if context.prepare_module is None else functools.partial(_block_prepared,
                                                                                       context.prepare_module)
        """The engine's ``prepare_module`` for this drafter's passes (:func:`_block_prepared`)."""
        self.drafter = self.build_drafter().to(device=self.device, dtype=self.dtype).eval()
        for p in self.drafter.parameters():
            p.requires_grad_(False)
        for layer in self.drafter.layers:  # q/k/v and gate/up as one matmul each (the native layer halves)
            layer.fuse_projections()
        if self.prepare is not None:  # e.g. pre-packed bf16 linears, like the target's
            self.drafter = self.prepare(self.drafter)
        dc = self.drafter.config
        self.check_target(dc, context)
        self.adaptive = bool(spec.enable_adaptive_verification)
        self.threshold = spec.adaptive_verification_threshold
        self.cost = VerifyCost.from_config(dict(spec.draft_model_config.hf_config).get("verify_cost")
                                           if spec.draft_model_config is not None else None)
        rows = max(1, int(context.max_num_seqs))
        block = self.k if self.anchor_first else self.k + 1
        self.row_len = int(context.max_model_len) + block + 2
        self.kv_settings = kv_settings(context, self.dtype)
        """The KV dtype and attention kernel the engine resolved (``kv_cache_dtype``, ``attention_backend``)."""
        self.kv = DrafterKV(num_layers=dc.num_hidden_layers, num_rows=rows, row_len=self.row_len,
                            num_kv_heads=dc.num_key_value_heads, head_dim=dc.head_dim,
                            dtype=self.kv_settings.dtype, device=self.device, owner=type(self).__name__,
                            native=self.kv_settings.native)
        """The context KV: committed positions' keys/values in every draft layer."""
        self.rows = self.kv.rows
        self.last_block_width = self.k
        """The last propose's block width: the longest draft any of its requests could keep."""
        self.build_queries = block_queries_fn(self.device)
        self._block_head: Any = None
        """The drafter as the native step reads it (:meth:`_native_block_head`), built on first use."""
        self.drafter.rotary.ensure_length(self.row_len)

    # -- construction ------------------------------------------------------------------------
    def build_drafter(self) -> DFlashDrafter:
        path = self.spec.model
        dc = read_config(path)
        if dc.kind != self.kind:
            raise ValueError(f"{path}: a {dc.kind!r} drafter; method {self.kind!r} needs a {self.kind} drafter")
        lm_head = serving_lm_head(self.context.lm_head, path, self.context.vocab_size, prepare=self.prepare)
        drafter = self.drafter_class()(dc, embed_tokens=self.context.embed_tokens, lm_head=lm_head)
        return load_weights(drafter, path)

    def drafter_class(self) -> type[DFlashDrafter]:
        return DFlashDrafter

    @staticmethod
    def check_target(dc: DrafterConfig, context: SpeculatorContext) -> None:
        target = context.target_config
        hidden, layers = target.get("hidden_size"), target.get("num_hidden_layers")
        if hidden is not None and dc.target_hidden_size != hidden:
            raise ValueError(f"the drafter was trained for a target with hidden_size {dc.target_hidden_size}; "
                             f"this target has {hidden}")
        if layers is not None and max(dc.target_layer_ids) >= layers:
            raise ValueError(f"the drafter reads target layers {list(dc.target_layer_ids)}; this target has {layers}")
        if dc.vocab_size != context.vocab_size:
            raise ValueError(f"the drafter's vocabulary ({dc.vocab_size}) differs from the target's ({context.vocab_size})")

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return tuple(self.drafter.config.target_layer_ids)

    # -- bookkeeping ---------------------------------------------------------------------------
    def remove_request(self, req_id: str) -> None:
        self.rows.release(req_id)

    # on_verified: nothing to undo, only committed positions ever enter the context KV.

    # -- drafting --------------------------------------------------------------------------------
    @torch.inference_mode()
    def propose(self, batch: DraftBatch) -> DraftProposal:
        reqs = batch.requests
        dev = self.device
        rows = [self.rows.row(r.req_id) for r in reqs]
        budgets = [int(r.max_draft_tokens) for r in reqs]
        drafting = [i for i, b in enumerate(budgets) if b > 0]
        # The block is as wide as the longest draft any request may keep (positions past it would
        # never be chosen from: a draft and its estimate read only the positions before it), not
        # the K the drafter was trained for: its first draft reads the same from a narrower block
        # (SmolLM2 DFlash, 24 held-out prompts, greedy: first drafts accepted 0.542 from a block
        # of 1, 0.522 from blocks of 4), and one draft a request at batch 8 passes 8 rows, not 32.
        width = max(budgets) if drafting else 0
        anchors = [int(reqs[i].token_ids[-1]) for i in drafting]
        anchor_pos = [len(reqs[i].token_ids) - 1 for i in drafting]
        hidden = self.step_native(batch, rows, anchors, anchor_pos, [rows[i] for i in drafting], width)
        if hidden is None:  # the per-op ingest and block pass
            self.ingest(batch, rows)
            if drafting:
                hidden = self.draft_block(anchors, anchor_pos, [rows[i] for i in drafting], width)
        if not drafting:
            return DraftProposal(token_ids=torch.zeros(0, dtype=torch.int32, device=dev), num_draft_tokens=[0] * len(reqs))
        self.last_block_width = width
        temps = [float(reqs[i].temperature) * self.temperature_scale for i in drafting]
        gens = [reqs[i].generator for i in drafting]
        noise = coupling.request_noise([reqs[i] for i in drafting], width)
        tokens, probs, conf = self.choose(hidden[:, :width], anchors, temps, gens, noise)
        counts = [budgets[i] for i in drafting]
        if self.adaptive:
            counts = schedule(conf, counts, threshold=self.threshold, cost=self.cost)
        return self.proposal(len(reqs), drafting, counts, tokens, probs, conf)

    def ingest(self, batch: DraftBatch, rows: Sequence[int]) -> None:
        """Write the context KV of every newly committed position."""
        slots: list[int] = []
        positions: list[int] = []
        for r, row in zip(batch.requests, rows):
            n = r.num_new_positions
            if n:
                last = len(r.token_ids) - 2
                first = last - n + 1
                positions.extend(range(first, last + 1))
                slots.extend(range(row * self.row_len + first, row * self.row_len + last + 1))
        if not slots:
            return
        hs = batch.hidden_states
        if hs is None or hs.shape[0] != len(slots):
            got = None if hs is None else tuple(hs.shape)
            raise ValueError(f"{type(self).__name__} needs hidden states for {len(slots)} new positions, got {got}")
        ctx = self.drafter.context(hs.to(device=self.device, dtype=self.dtype))
        cos, sin = self.drafter.rope(torch.tensor(positions, device=self.device))
        index = torch.tensor(slots, device=self.device)
        for i in range(len(self.drafter.layers)):
            self.kv.write(i, index, *self.drafter.context_kv(i, ctx, cos, sin))

    def step_native(self, batch: DraftBatch, rows: Sequence[int], anchors: Sequence[int], anchor_pos: Sequence[int],
                    block_rows: Sequence[int], k: int) -> torch.Tensor | None:
        """The ingest and the block pass (:meth:`ingest`, :meth:`draft_block`) in one native call
        (:meth:`~specpath_engine.modeling.native.NativeKernels.block_propose`: their KV and outputs,
        to the bit): ``[R, k, d]`` as :meth:`draft_block` returns it (an empty ``[0, k, d]`` when no
        request drafts), or None where the per-op path runs (not bf16 CPU, a dynamic RoPE, hidden
        states that do not match: the per-op path says what is wrong)."""
        head = self._native_block_head()
        if head is None:
            return None
        native, head = head
        slots: list[int] = []
        positions: list[int] = []
        for r, row in zip(batch.requests, rows):
            if n := r.num_new_positions:
                first = len(r.token_ids) - 1 - n
                positions.extend(range(first, first + n))
                slots.extend(range(row * self.row_len + first, row * self.row_len + first + n))
        hs, dc = batch.hidden_states, self.drafter.config
        taps = None
        if slots:
            if hs is None or hs.device.type != "cpu" or tuple(hs.shape) != (
                    len(slots), len(dc.target_layer_ids), dc.target_hidden_size):
                return None
            taps = hs if hs.dtype is self.dtype and hs.is_contiguous() else hs.to(dtype=self.dtype).contiguous()
        block = k if self.anchor_first else k + 1
        rotary = self.drafter.rotary
        if rotary.cache_len < max([p + block for p in anchor_pos] + positions + [0]):
            return None  # past the table built at start-up (row_len): not reached
        ids = torch.full((len(anchors), block), -1, dtype=torch.int64)  # the anchor, then mask slots
        ids[:, 0] = torch.tensor(anchors, dtype=torch.int64)
        out = native.block_propose(
            head, taps, torch.tensor(slots, dtype=torch.int64), torch.tensor(positions, dtype=torch.int64), ids,
            torch.tensor(block_rows, dtype=torch.int64) * self.row_len, torch.tensor(anchor_pos, dtype=torch.int64),
            self.kv.keys, self.kv.values, rotary.cos_cached, rotary.sin_cached, dc.num_attention_heads,
            dc.num_key_value_heads, dc.head_dim)
        return out[:, :k] if self.anchor_first else out[:, 1:]

    def _native_block_head(self) -> tuple[Any, Any] | None:
        """The native kernels and the drafter as ``specpath_block_propose`` reads it (rebuilt when a
        weight it points at changed), or None where the step stays per-op."""
        from specpath_engine.modeling.native import BlockHead, native_kernels, native_linears

        d = self.drafter
        if not self.kv.native or self.kv.keys.dtype is not torch.bfloat16 or d.dtype is not torch.bfloat16:
            return None
        if (native := native_kernels(self.kv.keys)) is None or d.rotary.rope_type == "dynamic" or (
                d.rotary.cos_cached.dtype is not torch.bfloat16) or d.config.head_dim % 32:
            return None
        head = self._block_head
        if head is not None and head.valid():
            return native, head
        table = lent_table(d._embed)
        fc = native_linears(d.fc)
        layers = [layer.native_linears() for layer in d.layers]
        norms = (d.hidden_norm, *d.input_layernorms, *(layer.post_attention_layernorm for layer in d.layers))
        if (table is None or table.dtype is not torch.bfloat16 or fc is None or any(l is None for l in layers)
                or d.mask_embedding.dtype is not torch.bfloat16 or any(n.weight.dtype is not torch.bfloat16 for n in norms)):
            return None
        self._block_head = BlockHead.of(
            embed=table, mask_embedding=d.mask_embedding.data, fc=fc[0], hidden_norm=(d.hidden_norm.weight, d.hidden_norm.eps),
            layers=[(norm.weight, norm.eps, layer.post_attention_layernorm.weight, layer.post_attention_layernorm.eps, linears)
                    for norm, layer, linears in zip(d.input_layernorms, d.layers, layers)])
        return native, self._block_head

    def draft_block(self, anchors: Sequence[int], anchor_pos: Sequence[int], rows: Sequence[int], k: int) -> torch.Tensor:
        """One non-causal pass; returns ``[R, k, d]``: the outputs that predict drafts 1..k."""
        dev = self.device
        block = k if self.anchor_first else k + 1
        ids, positions, ctx_slots, visible = self.build_queries(
            torch.tensor(anchors, dtype=torch.int64, device=dev), torch.tensor(anchor_pos, dtype=torch.int64, device=dev),
            torch.tensor(rows, dtype=torch.int64, device=dev), block, self.row_len, max(1, max(anchor_pos)))
        if len(rows) == 1 and (out := self.draft_block_native(ids[0], positions[0], rows[0], anchor_pos[0])) is not None:
            return out[None, :k] if self.anchor_first else out[None, 1:]
        if len(rows) > 1 and (out := self.draft_blocks_native(ids, positions, rows, anchor_pos)) is not None:
            return out[:, :k] if self.anchor_first else out[:, 1:]
        h = self.drafter.block_embeds(ids)[:, None]  # [R, 1, B, d]
        cos, sin = self.drafter.rope(positions[:, None])

        def context_kv(layer: int):
            keys, values = self.kv.gather(layer, ctx_slots)  # [R, P, KV, D] each, in the KV's dtype
            return keys.to(self.dtype), values.to(self.dtype)

        out = self.drafter.block(h, cos, sin, context_kv, visible[:, None])[:, 0]
        return out[:, :k] if self.anchor_first else out[:, 1:]

    def _native_ready(self) -> bool:
        """Whether the block passes may run on the native kernels (bf16 CPU KV, every draft
        layer's linears native), decided before any work."""
        from specpath_engine.modeling.native import native_kernels

        return self.kv.native and native_kernels(self.kv.keys) is not None and all(
            layer.native_linears() is not None for layer in self.drafter.layers)

    def draft_block_native(self, ids: torch.Tensor, positions: torch.Tensor, row: int, anchor_pos: int) -> torch.Tensor | None:
        """One request's block pass on the native kernels (bf16 CPU): ``[B, d]``, or None where
        they do not run. The block's keys/values are written into the request's context row
        right after its committed positions (scratch that the next ingest overwrites) and every
        query attends to the whole row up to the block's end: the non-causal block attention."""
        from specpath_engine.modeling.native import attention_kernels

        d = self.drafter
        if not self._native_ready():
            return None  # decided before any work: the batched torch pass runs instead
        h = d.block_embeds(ids)  # [B, d]
        cos, sin = d.rope(positions)
        block = ids.shape[0]
        length = anchor_pos + block
        visible = torch.ones(block, length, dtype=torch.bool, device=h.device)
        for i, layer in enumerate(d.layers):
            q, k, v = layer.qkv(d.input_layernorms[i](h), cos, sin)
            if (native := attention_kernels(q, k, v, self.kv.keys[i])) is None:
                return None
            attn = native.attention(q, k, v, *self.kv.row_span(i, row), length, visible)
            h = layer.finish(attn, h)
        return h

    def draft_blocks_native(self, ids: torch.Tensor, positions: torch.Tensor, rows: Sequence[int],
                            anchor_pos: Sequence[int]) -> torch.Tensor | None:
        """Several requests' block passes at once on the native kernels (bf16 CPU): ``[R, B, d]``,
        or None where they do not run. :meth:`draft_block_native`'s pass with every request's
        block in one linear call per layer and one batched attention call (each block's keys
        after its request's committed positions, each query seeing its request's whole row up to
        the block's end). The batched torch pass it replaces gathers every request's context
        each step: at batch 8 (SmolLM2 DFlash, ~200 positions a request) a block pass cost
        2.2 ms there, a one-token-a-request step ~1.5-1.8 plain steps, so the drafter lost."""
        from specpath_engine.modeling.native import attention_kernels

        d = self.drafter
        if not self._native_ready():
            return None
        num, block = ids.shape  # ids, positions [R, B]
        h = d.block_embeds(ids.reshape(-1))  # [R * B, d]
        cos, sin = d.rope(positions.reshape(-1))
        dev = h.device
        starts = torch.arange(0, (num + 1) * block, block, dtype=torch.int64, device=dev)  # [R + 1]
        lengths = torch.tensor(anchor_pos, dtype=torch.int64, device=dev) + block  # [R]
        span = int(lengths.max())
        slots = (torch.tensor(rows, dtype=torch.int64, device=dev)[:, None] * self.row_len
                 + torch.arange(span, dtype=torch.int64, device=dev)[None, :])  # [R, span]
        visible = torch.ones(num, block, span, dtype=torch.bool, device=dev)  # non-causal within a block
        for i, layer in enumerate(d.layers):
            q, k, v = layer.qkv(d.input_layernorms[i](h), cos, sin)
            if (native := attention_kernels(q, k, v, self.kv.keys[i])) is None:
                return None
            attn = native.attention_batch(q, k, v, self.kv.keys[i], self.kv.values[i], starts, lengths, slots, visible)
            h = layer.finish(attn, h)
        return h.view(num, block, -1)

    def choose(self, hidden: torch.Tensor, anchors: Sequence[int], temps: Sequence[float], gens: Sequence[Any],
               noise: Sequence[torch.Tensor | None]):
        """Drafts [R, K], their probabilities [R, K, V] (None: one-hot) and acceptance estimates
        [R, K] (None unless adaptive verification reads them) from the block outputs ``hidden``
        [R, K, d]: the method's own rule. ``noise``: per request its sampling noise at the K
        positions (``[K, V]``, :mod:`specpath_drafting.coupling`: its drafts race on it) or None."""
        raise NotImplementedError

    def proposal(self, num_reqs: int, drafting: Sequence[int], counts: Sequence[int], tokens: torch.Tensor,
                 probs: torch.Tensor | None, conf: torch.Tensor | None) -> DraftProposal:
        """Each drafting request keeps its first ``counts`` drafts; flattened in batch order."""
        lists = tokens.to(torch.int32).cpu().tolist()
        flat: list[int] = []
        keep: list[int] = []
        num = [0] * num_reqs
        width = tokens.shape[1]
        for j, i in enumerate(drafting):
            n = int(counts[j])
            num[i] = n
            flat.extend(lists[j][:n])
            keep.extend(range(j * width, j * width + n))
        index = torch.tensor(keep, dtype=torch.int64, device=tokens.device)
        draft_probs = None if probs is None else probs.reshape(-1, probs.shape[-1])[index].float()
        confidences = None if conf is None else conf.reshape(-1)[index].float()
        return DraftProposal(token_ids=torch.tensor(flat, dtype=torch.int32, device=self.device), num_draft_tokens=num,
                             draft_probs=draft_probs, confidences=confidences)
