"""The hidden-state drafting loop, shared by EAGLE-1, EAGLE-3, P-EAGLE and MTP.

Each step, for every request of the batch:

1. *Ingest*: the positions the target committed since the last call (the verified input token
   plus the accepted drafts) run through the head with their real target features and the
   shifted tokens, writing the head's KV there (this overwrites the rejected drafts' KV: the
   rollback is that pointer move). The output at the last committed position is kept.
2. *Draft*: from that output, a chain of K steps, each feeding the head its own output and the
   embedding of the token it just drafted, at the next position; or, with parallel drafting
   (P-EAGLE), K-1 mask queries appended to the ingest pass so all K drafts come out of one pass;
   or, with ``draft_tree_topk`` where the engine verifies trees, a dynamic tree
   (:mod:`specpath_drafting.tree_search`: k nodes per head pass, the best K candidates).

Per step the loop costs one head call for the ingest and one per further chain draft, one
``prepare_drafter_inputs`` and one host sync for the drafted tokens. Where one request drafts a
greedy or coupled (seeded) chain on the native CPU kernels (bf16, a head with a native form),
ingest and chain are one C call instead (:meth:`HiddenStateSpeculator._native_propose`), the per-op path's bits;
so is a batch of such requests (:meth:`HiddenStateSpeculator._native_propose_batch`: each weight read
once per pass for all their rows), and a request's ingest and tree (:meth:`HiddenStateSpeculator._native_trees`:
``grow_tree`` over the per-op head passes, to the bit).

With int8 weights on a CPU with AMX tiles, the weights the native propose reads keep a tile copy
too, made when the speculator is built (so every path, native or per-op, multiplies the same way
from the first step): a pass of few rows (a lone request's chain) takes the int8 kernel, a pass
of many (a batch's, a long ingest) the tiles
(:data:`~specpath_engine.modeling.native.TILES_FROM_ROWS`); a request's drafts may then differ in
a near-tie (rare: the two sum the same products in another order) with the batch it drafts in,
never the output (verification decides it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
import torch

from specpath_engine.draft_overrides import kv_settings
from specpath_engine.modeling.dispatch import triton_or_reference
from specpath_engine.modeling.dtypes import torch_dtype
from specpath_engine.modeling.native import keep_tile_copies, native_kernels, registrations
from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftTree, SpeculatorContext
from specpath_drafting import coupling
from specpath_drafting.checkpoints import recorded_temperature_scale
from specpath_drafting.heads import HiddenStateHead
from specpath_drafting.kv import DrafterKV
from specpath_drafting.numerics import sharded_argmax
from specpath_drafting.reference import prepare_drafter_inputs_reference
from specpath_drafting.tree_search import TreeDraft, ancestor_runs, grow_tree, num_passes


def target_layers(context: SpeculatorContext) -> int:
    """The target's decoder-layer count, from the config the engine lends."""
    n = context.target_config.get("num_hidden_layers")
    if not isinstance(n, int) or n < 1:
        raise ValueError("the target config has no num_hidden_layers: cannot tell which layers to read")
    return n


def prepare_inputs_fn(device: torch.device):
    """The Triton kernel on CUDA, its torch reference elsewhere."""
    return triton_or_reference(device, "specpath_drafting.kernels:prepare_drafter_inputs",
                               prepare_drafter_inputs_reference)


class HiddenStateSpeculator(BaseSpeculator):
    """Drives a :class:`~specpath_drafting.heads.HiddenStateHead` (see the module docstring).
    Subclasses say which head to build (:meth:`build_head`) and which target layers it reads
    (:attr:`hidden_state_layers`)."""

    native_proposes: ClassVar[bool] = True
    """Its :meth:`propose` takes the native propose where it can (a subclass with a propose of its
    own says False: its head's int8 weights keep no tile copy, which only the native form reads)."""

    def __init__(self, spec: Any, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        self.device = torch.device(context.device)
        self.dtype = torch_dtype(context.dtype)
        self.k = int(spec.num_speculative_tokens)
        self.parallel = bool(spec.parallel_drafting)
        self.random_drafts = spec.draft_sample_method == "random"
        self.temperature_scale = recorded_temperature_scale(getattr(spec, "model", None))
        """A sampled request drafts at its temperature times this (the checkpoint's calibration)."""
        self.num_argmax_shards = int(spec.draft_tensor_parallel_size or 1) if spec.use_local_argmax_reduction else 1
        self.head = self.build_head().to(device=self.device, dtype=self.dtype).eval()
        for p in self.head.parameters():
            p.requires_grad_(False)
        self.head.layer.fuse_projections()
        if spec.draft_lm_head_quantization is not None:
            self.head.quantize_lm_head(spec.draft_lm_head_quantization)
        if context.prepare_module is not None:  # e.g. pre-packed bf16 linears, like the target's
            self.head = context.prepare_module(self.head)
        hc = self.head.config
        target_hidden = context.target_config.get("hidden_size")
        if target_hidden is not None and hc.target_hidden_size not in (None, target_hidden):
            raise ValueError(
                f"the head was trained for a target with hidden_size {hc.target_hidden_size}; this target has {target_hidden}"
            )
        if hc.vocab_size != context.vocab_size:
            raise ValueError(f"the head's vocabulary ({hc.vocab_size}) differs from the target's ({context.vocab_size})")
        topk = getattr(spec, "draft_tree_topk", None)
        self.tree_topk = int(topk) if topk is not None and context.verifies_trees and not self.parallel else 1
        """Nodes per drafting pass and children per node of a draft tree (``draft_tree_topk``,
        where the engine verifies trees); 1: the chain."""
        rows = max(1, int(context.max_num_seqs))
        self.row_len = int(context.max_model_len) + self.k + self.tree_topk + 2  # + a tree's extra scratch
        self.kv_settings = kv_settings(context, self.dtype)
        """The KV dtype and attention kernel the engine resolved (``kv_cache_dtype``, ``attention_backend``)."""
        self.kv = DrafterKV(num_layers=self.kv_layers, num_rows=rows, row_len=self.row_len,
                            num_kv_heads=hc.num_key_value_heads, head_dim=hc.head_dim,
                            dtype=self.kv_settings.dtype, device=self.device, owner=type(self).__name__,
                            native=self.kv_settings.native)
        self.tokens = torch.zeros(rows, self.row_len, dtype=torch.int32, device=self.device)
        self.last_hidden = torch.zeros(rows, hc.hidden_size, dtype=self.dtype, device=self.device)
        self.rows = self.kv.rows
        self._chain_head: Any = None
        """The head's native chain form (:meth:`_native_chain`), built on first use."""
        self.native_propose = True
        """A greedy or coupled propose runs as one native call where it can (:meth:`_native_propose`,
        :meth:`_native_propose_batch`); False keeps it on the per-op path (the reference, for side-by-side measurements)."""
        self.prepare_inputs = prepare_inputs_fn(self.device)
        self.head.rotary.ensure_length(self.row_len)
        if self.native_proposes:
            with torch.inference_mode():  # the native form now: its int8 weights' tile copies before any pass
                self._native_head(self.last_hidden)
        if self.parallel:  # constant inputs of the mask slots, computed once (weights are frozen)
            with torch.inference_mode():
                self.mask_embed = self.head.mask_embeds(1).to(self.dtype).clone()
                self.mask_feature = self.head.mask_features(1).to(self.dtype).clone()

    def draft_temperature(self, request: Any) -> float:
        """The temperature ``request``'s drafts are drawn (or raced) at: its own times the
        checkpoint's calibration (0 stays 0: greedy)."""
        return request.temperature * self.temperature_scale

    # -- what subclasses provide ------------------------------------------------------------
    def build_head(self) -> HiddenStateHead:
        raise NotImplementedError

    @property
    def kv_layers(self) -> int:
        """Decoder layers whose KV the drafter keeps: a head has one (MTP: one per module)."""
        return 1

    # -- bookkeeping --------------------------------------------------------------------------
    def remove_request(self, req_id: str) -> None:
        self.rows.release(req_id)

    # on_verified: nothing to undo, the next call's new positions overwrite the rejected drafts' KV.

    def new_position_inputs(self, batch: DraftBatch, counts: Sequence[int]) -> torch.Tensor:
        """Check that the batch brings one hidden-state row per newly committed position
        (``sum(counts)``); return the exclusive prefix sum of ``counts`` (int32, on the device)
        that the input-preparation kernel takes."""
        num_tokens = sum(counts)
        if batch.hidden_states is None or batch.hidden_states.shape[0] != num_tokens:
            got = None if batch.hidden_states is None else tuple(batch.hidden_states.shape)
            raise ValueError(f"{type(self).__name__} needs hidden states for {num_tokens} new positions, got {got}")
        cu = [0]
        for n in counts:
            cu.append(cu[-1] + n)
        return torch.tensor(cu, dtype=torch.int32, device=self.device)

    # -- drafting -----------------------------------------------------------------------------
    @torch.inference_mode()
    def propose(self, batch: DraftBatch) -> DraftProposal:
        """Kept as one function: it is the drafting loop's hot path, and on a CPU each Python call
        costs (the per-step work stays in one frame)."""
        reqs = batch.requests
        if self.native_propose and (proposal := (self._native_propose(batch) if len(reqs) == 1 else
                                                 self._native_propose_batch(batch))) is not None:
            return proposal
        dev = self.device
        rows, starts, counts, lasts = [], [], [], []
        flat_index: list[int] = []
        flat_tokens: list[int] = []
        for r in reqs:
            row = self.rows.row(r.req_id)
            length = len(r.token_ids)
            n = r.num_new_positions
            start = length - 1 - n
            if n:
                base = row * self.row_len
                flat_index.extend(range(base + start + 1, base + length))
                flat_tokens.extend(r.token_ids[start + 1:length])
            rows.append(row)
            starts.append(start)
            counts.append(n)
            lasts.append(length - 2)  # the last committed position
        budgets = [r.max_draft_tokens for r in reqs]
        drafting = [i for i, b in enumerate(budgets) if b > 0]
        if flat_index:
            self.tokens.view(-1)[torch.tensor(flat_index, device=dev)] = torch.tensor(
                flat_tokens, dtype=torch.int32, device=dev)
        num_tokens = sum(counts)
        k_max = max(budgets, default=0)
        parallel = self.parallel and k_max > 1 and drafting
        rows_t = torch.tensor(rows, dtype=torch.int32, device=dev)

        embeds, features, positions, slots, qrows = [], [], [], [], []
        last_index = None
        if num_tokens:
            cu = self.new_position_inputs(batch, counts)
            ids, pos, slot, last_index = self.prepare_inputs(
                self.tokens, rows_t, torch.tensor(starts, dtype=torch.int32, device=dev),
                torch.tensor(counts, dtype=torch.int32, device=dev), cu,
                num_tokens)
            embeds.append(self.head.embed(ids.long()).to(self.dtype))
            features.append(self.head.fuse(batch.hidden_states.to(device=dev, dtype=self.dtype)))
            positions.append(pos)
            slots.append(slot)
            qrows.append(rows_t.long().repeat_interleave(torch.tensor(counts, device=dev)))
        if parallel:  # P-EAGLE: K-1 mask queries after each drafting request's last position
            m = k_max - 1
            d_rows = torch.tensor([rows[i] for i in drafting], dtype=torch.int64, device=dev)
            d_pos = torch.tensor([lasts[i] for i in drafting], dtype=torch.int64, device=dev)
            mask_pos = (d_pos[:, None] + torch.arange(1, m + 1, device=dev)[None, :]).reshape(-1)
            mask_rows = d_rows.repeat_interleave(m)
            embeds.append(self.mask_embed.expand(mask_pos.shape[0], -1))
            features.append(self.mask_feature.expand(mask_pos.shape[0], -1))
            positions.append(mask_pos)
            slots.append(mask_rows * self.row_len + mask_pos)
            qrows.append(mask_rows)
        out = None
        if embeds:
            pos_all = torch.cat(positions)
            out = self._step(torch.cat(embeds), torch.cat(features), pos_all, torch.cat(slots), torch.cat(qrows))
        if num_tokens:
            has_new = [i for i, n in enumerate(counts) if n]
            self.last_hidden[rows_t[has_new].long()] = out[last_index[has_new]]
        if not drafting:
            return DraftProposal(token_ids=torch.zeros(0, dtype=torch.int32, device=dev), num_draft_tokens=[0] * len(reqs))

        d_idx = torch.tensor([rows[i] for i in drafting], dtype=torch.int64, device=dev)
        temps = [self.draft_temperature(reqs[i]) for i in drafting]
        gens = [reqs[i].generator for i in drafting]
        noise = coupling.request_noise([reqs[i] for i in drafting], k_max)  # [k_max, V] per coupled request
        a = self.last_hidden[d_idx]
        if parallel:
            m = k_max - 1
            masked = out[num_tokens:].view(len(drafting), m, -1)
            hidden = torch.cat([a[:, None, :], masked], dim=1).reshape(len(drafting) * k_max, -1)
            tokens, probs = self._choose(self.head.logits(hidden), [t for t in temps for _ in range(k_max)],
                                         [g for g in gens for _ in range(k_max)],
                                         [None if n is None else n[j] for n in noise for j in range(k_max)])
            tokens = tokens.view(len(drafting), k_max)
            probs = None if probs is None else probs.view(len(drafting), k_max, -1)
        elif self.tree_topk > 1:
            return self._tree_proposal(reqs, drafting, budgets, a, [rows[i] for i in drafting],
                                       [lasts[i] for i in drafting])
        else:
            if len(drafting) == 1 and (not self.random_drafts or temps[0] <= 0 or noise[0] is not None) and (
                    chain := self._native_chain(a, rows[drafting[0]], lasts[drafting[0]], k_max,
                                                None if noise[0] is None else (noise[0], temps[0]))) is not None:
                return self._proposal(reqs, drafting, budgets, chain[0][None], None, mapped=True, logps=chain[1][None])
            steps, step_probs, step_logps = [], [], []
            pos = torch.tensor([lasts[i] for i in drafting], dtype=torch.int64, device=dev)
            for j in range(k_max):
                logits = self.head.logits(a)
                tok, p = self._choose(logits, temps, gens, [None if n is None else n[j] for n in noise])
                steps.append(tok)
                step_probs.append(p)
                if p is None:  # one-hot drafts: each one's log-probability under the head (its estimate)
                    step_logps.append(logits.float().log_softmax(-1).gather(-1, tok.long()[:, None])[:, 0])
                if j + 1 == k_max:
                    break
                pos = pos + 1
                a = self._step(self.head.embed(self.head.to_target(tok).long()).to(self.dtype), a, pos,
                               d_idx * self.row_len + pos, d_idx)
            tokens = torch.stack(steps, dim=1)
            probs = None if step_probs[0] is None else torch.stack(step_probs, dim=1)
            if probs is None and len(step_logps) == k_max:
                return self._proposal(reqs, drafting, budgets, tokens, None, logps=torch.stack(step_logps, dim=1))
        return self._proposal(reqs, drafting, budgets, tokens, probs)

    def _draft_tree(self, a0: torch.Tensor, row: int, last: int, budget: int,
                    race: torch.Tensor | None = None) -> TreeDraft:
        """One request's tree (:mod:`specpath_drafting.tree_search`) from the ingest's output ``a0 [1, d]``
        at its last committed position ``last``: a node of depth ``d`` runs at position
        ``last + 1 + d`` (as the chain's draft there), its k/v in scratch slots after ``last``.
        ``race``: a seeded request's scaled noise (:meth:`_tree_race`), row d added to the
        logits of depth d."""
        head, dev = self.head, self.device

        def raced(logits: torch.Tensor, depth: int) -> torch.Tensor:
            return logits if race is None else logits.float() + race[depth]

        outputs: list[torch.Tensor] = []
        parents_so_far: list[int] = []

        def run(tokens: Sequence[int], parents: Sequence[int], depth: int) -> torch.Tensor:
            first = len(parents_so_far)
            parents_so_far.extend(parents)
            length = last + 1 + len(parents_so_far)
            mask = torch.zeros(len(tokens), length, dtype=torch.bool, device=dev)
            mask[:, : last + 1] = True
            for j, runs in enumerate(ancestor_runs(parents_so_far)[first:]):
                mask[j, [last + 1 + r for r in runs]] = True
            ids = head.to_target(torch.tensor(tokens, dtype=torch.int64, device=dev))
            features = torch.cat([a0 if p < 0 else outputs[p] for p in parents])
            positions = torch.full((len(tokens),), last + 1 + depth, dtype=torch.int64, device=dev)
            out = head.step(head.embed(ids).to(self.dtype), features, positions, self.kv.tree_attention(row, length, mask))
            outputs.extend(out.split(1))
            return raced(head.logits(out), depth + 1)

        return grow_tree(raced(head.logits(a0)[0], 0), run, k=self.tree_topk, budget=budget)

    def _tree_race(self, request: Any, budget: int, vocab_ids: torch.Tensor | None) -> torch.Tensor | None:
        """A coupled request's tree races on its sampling noise, as its chain does: float32
        ``[depths, Vd]``, ``T G`` at each depth's position in the order of the head's rows
        (``vocab_ids``, :func:`coupling.scaled_noise`), added to the drafter's logits before a
        node's children are chosen and scored. Its candidates are then the best of the head's
        perturbed logits, the tokens the target's own race is likeliest to pick (at T = 0.8 a
        sampled request's drafts were accepted more often from the race than from the head's own
        best: docs/benchmarks-history.md). None for a request that does not race."""
        if not coupling.coupled(request):
            return None
        depths = num_passes(budget, self.tree_topk) + 1
        noise = request.noise.gumbel(len(request.token_ids), depths)
        return coupling.scaled_noise(noise, [self.draft_temperature(request)] * depths, vocab_ids)

    def _tree_proposal(self, reqs, drafting, budgets, a, rows, lasts) -> DraftProposal:
        """Each drafting request's tree (in head passes of its own: trees are for the latency
        setting, one request or a few)."""
        trees = []
        coupled = any(coupling.coupled(reqs[i]) for i in drafting)
        vocab_ids = self.vocab_ids(self.head.draft_vocab_size) if coupled else None
        for j, i in enumerate(drafting):
            race = self._tree_race(reqs[i], budgets[i], vocab_ids)
            tree = self._draft_tree(a[j : j + 1], rows[j], lasts[j], budgets[i],
                                    None if race is None else race.to(self.device))
            ids = self.head.to_target(torch.tensor(tree.tokens, dtype=torch.int64, device=self.device)).tolist()
            trees.append((i, ids, tree.parents, tree.scores))
        return _proposal_of_trees(trees, len(reqs), self.device)

    def _native_head(self, x: torch.Tensor) -> tuple[Any, Any] | tuple[None, None]:
        """The native kernels and the head's native form
        (:meth:`~specpath_drafting.heads.HiddenStateHead.native_draft_head`, rebuilt when stale), or
        Nones where the native chain does not run: no native head, a KV off the native attention
        or not bf16, a vocabulary-sharded argmax, ``x`` (what the chain reads) not bf16 on the CPU."""
        if not self.kv.native or self.kv.dtype is not torch.bfloat16 or self.num_argmax_shards > 1:
            return None, None
        if (native := native_kernels(x)) is None or self.kv.head_dim % 32:
            return None, None
        head = self._chain_head
        if head is None or not head.valid():
            head = self.head.native_draft_head()
            if head is not None and head.ingests and native.tiles and keep_tile_copies(head):
                head = self.head.native_draft_head()  # its int8 descriptors now carry the tile copies
            head = self._chain_head = head or _NoNativeHead(registrations())
        if isinstance(head, _NoNativeHead):
            return None, None
        return native, head

    def _native_propose(self, batch: DraftBatch) -> DraftProposal | None:
        """A one-request chain propose, greedy or coupled (a seeded request's race,
        :mod:`specpath_drafting.coupling`), its ingest included, in one native call
        (:meth:`~specpath_engine.modeling.native.NativeKernels.draft_propose`: the per-op path's
        drafter KV, output and drafts, to the bit), or with ``draft_tree_topk`` its ingest and tree
        (:meth:`_native_trees`), or None where the per-op path runs (P-EAGLE, sampled drafts, a head
        without a native ingest, hidden states that do not match)."""
        r = batch.requests[0]
        k, n = r.max_draft_tokens, r.num_new_positions
        race = k > 0 and coupling.coupled(r) and self.tree_topk == 1
        if self.parallel or (n == 0 and k == 0) or (self.random_drafts and r.temperature > 0 and not race):
            return None
        hidden, hc = batch.hidden_states, self.head.config
        if n and (hidden is None or hidden.device.type != "cpu" or tuple(hidden.shape[:1] + hidden.shape[-2:]) != (
                n, hc.num_taps, hc.target_hidden_size or hc.hidden_size)):
            return None  # the per-op path says what is wrong
        native, head = self._native_head(self.last_hidden)
        if head is None or not head.ingests:
            return None
        row = self.rows.row(r.req_id)
        length = len(r.token_ids)
        start = length - 1 - n  # the first new position (the last committed one: start + n - 1)
        ids = torch.tensor(r.token_ids[start + 1 : length], dtype=torch.int64)  # [n]: shifted by one
        if n:
            # as per-op leaves it; through numpy: a torch index-assign costs more than the rest of this frame
            self.tokens.numpy()[row, start + 1 : length] = r.token_ids[start + 1 : length]
            taps = hidden  # [n, num_taps, target d], read flat: [n, num_taps * target d]
            if hidden.dtype is not self.dtype or not hidden.is_contiguous():
                taps = hidden.to(dtype=self.dtype).contiguous()
        else:
            taps = None
        if self.tree_topk > 1 and k:
            return self._native_trees(native, head, [(0, row, start, taps, ids)], batch.requests)
        end = start + n + max(k - 1, 0)  # positions start .. end - 1 run the layer
        rotary = self.head.rotary
        if rotary.rope_type != "dynamic" and rotary.cos_cached.dtype is self.dtype and rotary.cache_len >= end:
            cos, sin = rotary.cos_cached[start:end], rotary.sin_cached[start:end]  # [n + K-1, D]: the rows rope() gathers
        else:
            cos, sin = (t.contiguous() for t in self.head.rope(torch.arange(start, end, device=self.device)))
        keys, values = self.kv.row_span(0, row)  # [row_len, KV, D]
        # [K, Vd]: T G in the head's row order, draft j at position length + j (the per-op chain's)
        noise = coupling.scaled_noise(r.noise.gumbel(length, k), [self.draft_temperature(r)] * k, head.row_ids) if race else None
        logps = torch.empty(k, dtype=torch.float64)  # each draft's log-probability under the head
        tokens = native.draft_propose(head, taps, ids, self.last_hidden[row], k, hc.num_attention_heads,
                                      hc.num_key_value_heads, hc.head_dim, keys, values, start, cos, sin, noise,
                                      floor=_log_floor(r.min_draft_probability), logps=logps)
        drafted = tokens.shape[0]  # fewer than k where the floor stopped it
        return DraftProposal(token_ids=tokens.to(torch.int32), num_draft_tokens=[drafted],  # on the CPU, as the kernels
                             confidences=logps[:drafted].exp() if drafted else None)

    def _native_propose_batch(self, batch: DraftBatch) -> DraftProposal | None:
        """:meth:`_native_propose` for a batch of requests in one native call (with
        ``draft_tree_topk``, a tree where one request drafts, else the batched chain: a tree's
        passes are its own, so trees for many would read the head's weights once per request)
        (:meth:`~specpath_engine.modeling.native.NativeKernels.draft_propose_batch`: each weight
        read once per pass for every request's rows; each request's drafter KV, output and drafts
        the bits of its own call, but for dual weights: see the module docstring), or None where the per-op path runs: as there, plus a
        request with sampled drafts anywhere in the batch, or a RoPE whose rows are not its cache's
        (dynamic)."""
        reqs = batch.requests
        if self.parallel:
            return None
        hidden, hc = batch.hidden_states, self.head.config
        counts = [r.num_new_positions for r in reqs]
        ks = [r.max_draft_tokens for r in reqs]
        trees = [i for i, k in enumerate(ks) if k] if self.tree_topk > 1 else []
        if len(trees) > 1:  # several draft: one batched chain (each weight read once a pass for all)
            trees = []
        elif trees:  # the batch's ingest in one call, then the drafting request's tree
            ks = [0] * len(reqs)
        races = [k > 0 and coupling.coupled(r) for r, k in zip(reqs, ks)]
        if self.random_drafts and any(r.temperature > 0 and not race for r, race in zip(reqs, races)):
            return None
        total = sum(counts)
        if total and (hidden is None or hidden.device.type != "cpu" or tuple(hidden.shape[:1] + hidden.shape[-2:]) != (
                total, hc.num_taps, hc.target_hidden_size or hc.hidden_size)):
            return None  # the per-op path says what is wrong
        rotary = self.head.rotary
        if rotary.rope_type == "dynamic" or rotary.cos_cached.dtype is not self.dtype:
            return None
        native, head = self._native_head(self.last_hidden)
        if head is None or not head.ingests:
            return None
        row_len, token_table = self.row_len, self.tokens.numpy()
        plan = np.empty((6, len(reqs)), dtype=np.int64)  # per request: T, row, K, first slot, p0, noise row
        ids: list[int] = []
        noise, noise_rows, end = [], 0, 0
        for i, r in enumerate(reqs):
            row, n, k = self.rows.row(r.req_id), counts[i], ks[i]
            length = len(r.token_ids)
            start = length - 1 - n  # the first new position
            if n:
                new = r.token_ids[start + 1 : length]  # the tokens one position ahead
                ids += new
                token_table[row, start + 1 : length] = new  # as per-op leaves it
            end = max(end, start + n + k)
            plan[:, i] = (n, row, k, row * row_len, start, noise_rows if races[i] else -1)
            if races[i]:  # [K, Vd]: T G in the head's row order, draft j at position length + j
                noise.append(coupling.scaled_noise(r.noise.gumbel(length, k), [self.draft_temperature(r)] * k,
                                                   head.row_ids))
                noise_rows += k
        if rotary.cache_len < end:  # past the table built at start-up (row_len): not reached
            return None
        taps = None
        if total:
            taps = hidden  # [sum T, num_taps, target d], read flat
            if hidden.dtype is not self.dtype or not hidden.is_contiguous():
                taps = hidden.to(dtype=self.dtype).contiguous()
        floors = np.array([_log_floor(r.min_draft_probability, -math.inf) for r in reqs], dtype=np.float64)
        kept = np.array(ks, dtype=np.int64)
        logps = torch.empty(sum(ks), dtype=torch.float64)  # each draft's log-probability under the head
        tokens = native.draft_propose_batch(
            head, taps, torch.tensor(ids, dtype=torch.int64), plan, self.last_hidden, hc.num_attention_heads,
            hc.num_key_value_heads, hc.head_dim, self.kv.keys[0], self.kv.values[0], rotary.cos_cached,
            rotary.sin_cached, torch.cat(noise).contiguous() if noise else None,
            floors=floors if (floors > -math.inf).any() else None, logps=logps, kept=kept)
        if trees:
            return self._native_trees(native, head, [(i, int(plan[1, i]), len(reqs[i].token_ids) - 1, None, None)
                                                     for i in trees], reqs)
        counts = kept.tolist()  # per request: its first counts[i] of its ks[i] slots (a floor may stop it early)
        if counts != ks:
            slots = torch.cat([torch.arange(s, s + c) for s, c in zip(np.cumsum([0] + ks[:-1]).tolist(), counts)])
            tokens, logps = tokens[slots], logps[slots]
        return DraftProposal(token_ids=tokens.to(torch.int32), num_draft_tokens=counts,  # on the CPU, as the kernels
                             confidences=logps.exp() if len(logps) else None)

    def _native_trees(self, native: Any, head: Any, work: Sequence[tuple], reqs: Sequence[Any]) -> DraftProposal | None:
        """Each drafting request's ingest and tree in one native call
        (:meth:`~specpath_engine.modeling.native.NativeKernels.draft_tree`: ``grow_tree`` over the
        per-op head passes); ``work``: per drafting request its index in ``reqs``, its row, its first
        new position and its ingest's taps and ids (None: already ingested). None where the rotary
        table does not hold the tree's positions (the per-op path runs)."""
        rotary, hc = self.head.rotary, self.head.config
        if rotary.rope_type == "dynamic" or rotary.cos_cached.dtype is not self.dtype:
            return None
        empty = torch.zeros(0, dtype=torch.int64)
        trees = []
        for i, row, start, taps, ids in work:
            budget = reqs[i].max_draft_tokens
            passes = num_passes(budget, self.tree_topk)
            if rotary.cache_len < len(reqs[i].token_ids) + passes * self.tree_topk:
                return None  # past the table built at start-up (row_len): not reached
            keys, values = self.kv.row_span(0, row)  # [row_len, KV, D]
            trees.append((i, *native.draft_tree(
                head, taps, empty if ids is None else ids, self.last_hidden[row], budget, self.tree_topk, passes,
                hc.num_attention_heads, hc.num_key_value_heads, hc.head_dim, keys, values, start, rotary.cos_cached,
                rotary.sin_cached, min_score=_log_floor(reqs[i].min_draft_probability, -math.inf),
                noise=self._tree_race(reqs[i], budget, head.row_ids))))
        return _proposal_of_trees(trees, len(reqs), self.device)

    def _native_chain(self, a: torch.Tensor, row: int, last: int, k: int,
                      race: tuple[torch.Tensor, float] | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
        """One request's K greedy drafts (target ids ``[K]``), or with ``race = (noise [K, V],
        temperature)`` its coupled drafts (:mod:`specpath_drafting.coupling`), in one native call
        (:meth:`~specpath_engine.modeling.native.NativeKernels.draft_chain`: the per-op chain's
        tokens and KV, to the bit), with each draft's log-probability under the head (float64
        ``[K]``), or None where it does not run (:meth:`_native_head`)."""
        native, head = self._native_head(a)
        if head is None:
            return None
        cos, sin = self.head.rope(torch.arange(last + 1, last + k, device=self.device))  # [K-1, D] each
        keys, values = self.kv.row_span(0, row)  # [row_len, KV, D]
        hc = self.head.config
        noise = None
        if race is not None:
            noise = coupling.scaled_noise(race[0][:k], [race[1]] * k, head.row_ids)
        logps = torch.empty(k, dtype=torch.float64)
        tokens = native.draft_chain(head, a.contiguous(), k, hc.num_attention_heads, hc.num_key_value_heads,
                                    hc.head_dim, keys, values, last + 1, cos.contiguous(), sin.contiguous(), noise,
                                    logps=logps)
        return tokens, logps

    def _step(self, embeds, features, positions, slots, qrows) -> torch.Tensor:
        attend = self.kv.attention(slots, qrows, positions, int(positions.max()))
        return self.head.step(embeds, features, positions, attend)

    def _choose(self, logits: torch.Tensor, temps: Sequence[float], gens: Sequence[Any],
                noise: Sequence[torch.Tensor | None]):
        """Draft-vocab ids (:func:`specpath_drafting.coupling.choose`: raced, greedy or sampled per
        request) and their target-vocab probabilities (None when no draft was sampled: one-hot)."""
        if all(n is None for n in noise) and (not self.random_drafts or all(t <= 0 for t in temps)):
            ids = sharded_argmax(logits, self.num_argmax_shards) if self.num_argmax_shards > 1 else logits.argmax(-1)
            return ids, None
        argmax = (lambda x: sharded_argmax(x, self.num_argmax_shards)) if self.num_argmax_shards > 1 else None
        return coupling.choose(logits, temps, gens, noise, sample=self.random_drafts,
                               vocab_ids=self.vocab_ids(logits.shape[-1]), argmax=argmax)

    def vocab_ids(self, vd: int) -> torch.Tensor | None:
        """The target id of each of a head's ``vd`` draft-vocabulary ids (its logits' width), None
        when the head drafts over the target's own vocabulary."""
        if vd == self.context.vocab_size:
            return None
        return self.head.to_target(torch.arange(vd, device=self.device))

    def _proposal(self, reqs, drafting, budgets, tokens, probs, mapped: bool = False,
                  logps: torch.Tensor | None = None) -> DraftProposal:
        """Cut each request's drafts to its budget; map to target ids (unless ``mapped``); flatten.
        ``logps`` [R, K]: each one-hot draft's log-probability under the head (its confidence)."""
        target_ids = (tokens if mapped else self.head.to_target(tokens)).to(torch.int32).cpu()
        lists = target_ids.tolist()
        flat: list[int] = []
        counts = [0] * len(reqs)
        keep: list[int] = []
        width = tokens.shape[1]
        for j, i in enumerate(drafting):
            n = budgets[i]
            counts[i] = n
            flat.extend(lists[j][:n])
            keep.extend(range(j * width, j * width + n))
        draft_probs = None
        if probs is not None:
            flat_probs = probs.reshape(-1, probs.shape[-1])[torch.tensor(keep, device=probs.device)]
            draft_probs = self.head.probs_to_target(flat_probs)
        confidences = None
        if logps is not None and keep:
            confidences = logps.reshape(-1)[torch.tensor(keep, device=logps.device)].double().exp().cpu()
        return DraftProposal(token_ids=torch.tensor(flat, dtype=torch.int32, device=self.device),
                             num_draft_tokens=counts, draft_probs=draft_probs, confidences=confidences)


def _log_floor(probability: float, none: float | None = None) -> float | None:
    """``DraftRequest.min_draft_probability`` as the native calls take it: a summed
    log-probability (``none`` where there is no floor)."""
    return math.log(probability) if probability > 0 else none


def _proposal_of_trees(trees: Sequence[tuple[int, list[int], list[int], list[float]]], num_requests: int,
                       device: torch.device) -> DraftProposal:
    """The proposal of ``trees`` (per drafting request: its index, its nodes' target ids, parents
    and path log-probabilities, best first), with each tree's top-1 path as the request's chain
    (for engines that verify chains)."""
    sizes, counts = [0] * num_requests, [0] * num_requests
    tokens: list[int] = []
    parents: list[int] = []
    probs: list[float] = []
    chain: list[int] = []
    for i, ids, tree_parents, scores in trees:
        sizes[i] = len(ids)
        tokens += ids
        parents += tree_parents
        probs += [math.exp(s) for s in scores]
        node, path = -1, []
        while (node := next((n for n, p in enumerate(tree_parents) if p == node), None)) is not None:
            path.append(ids[node])  # nodes are best-first: a node's first child is its best
        chain += path
        counts[i] = len(path)
    return DraftProposal(token_ids=torch.tensor(chain, dtype=torch.int32, device=device), num_draft_tokens=counts,
                         tree=DraftTree(token_ids=tokens, parents=parents, probs=probs, num_tree_tokens=sizes))


class _NoNativeHead:
    """A head without a native chain form, remembered until a module or weight is assigned
    anywhere (``registrations`` changes): the per-op chain runs meanwhile."""

    def __init__(self, generation: int) -> None:
        self.generation = generation

    def valid(self) -> bool:
        return self.generation == registrations()
