"""The MTP speculators.

**One module** (:class:`MTPSpeculator`) is exactly the hidden-state drafting loop of
``specpath_drafting`` with an MTP module as the head: ingest the newly committed positions with the
target's last hidden state and the shifted tokens, then chain K drafts, each step feeding the
module its own output and the token it just drafted, one position further.

**Several modules** (:class:`MultiModuleMTPSpeculator`). Module m at position p reads module
m-1's output at p (the target's hidden state for m = 0) and the token at p+m+1; it predicts the
token at p+m+2. With P the last committed position, draft j (j < number of modules) is module j
at P, so every module keeps its own KV, and module m's entries at P-m+1 .. P were computed from
*drafts* (tokens after P+1). After verification those entries are stale: each module tracks the
last position whose KV came from real tokens only and, next step, recomputes everything after
it from the cached outputs of the module before it and the now-known tokens (the re-fill). A
position whose token is still a draft is recomputed again next time. K above the module count
cycles through the modules again, each module one position further per cycle (its chain stays
contiguous in its own KV; with one module this is the single-module chain).

Drafts are written into the speculator's token table right after the last real token, so every
module reads "the token at p+m+1" from one place, real or drafted; the next step's real tokens
overwrite them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from specpath.speculator import DraftBatch, DraftProposal, SpeculatorContext
from specpath_drafting import coupling
from specpath_drafting.heads import HiddenStateHead
from specpath_drafting.loop import HiddenStateSpeculator, target_layers
from specpath_drafting.vocab import serving_lm_head
from specpath_mtp.module import MTPModule, load_mtp_modules


class MTPSpeculator(HiddenStateSpeculator):
    """One MTP module reused for every draft (see the module docstring)."""

    expected_modules: int | None = 1

    def build_head(self) -> HiddenStateHead:
        lm_head = serving_lm_head(self.context.lm_head, self.spec.model, self.context.vocab_size,
                                  prepare=self.context.prepare_module)
        self.mtp_modules = load_mtp_modules(self.spec.model, embed_tokens=self.context.embed_tokens, lm_head=lm_head)
        n = len(self.mtp_modules)
        if self.expected_modules is not None and n != self.expected_modules:
            raise ValueError(f"{self.spec.model}: {n} MTP modules; {type(self).__name__} drives one")
        return self.mtp_modules[0]

    @property
    def kv_layers(self) -> int:
        """One KV layer per MTP module (module m's KV is layer m of the drafter KV)."""
        return len(self.mtp_modules)

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return (target_layers(self.context) - 1,)


class MultiModuleMTPSpeculator(MTPSpeculator):
    """Module k drafts token k, each module with its own KV (see the module docstring)."""

    expected_modules = None
    native_proposes = False  # its own propose, per-op

    def __init__(self, spec: Any, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        mods: list[MTPModule] = self.mtp_modules
        mods[0] = self.head  # as the base class readied it (prepare_module may return another module)
        for i, module in enumerate(mods[1:], start=1):
            module.to(device=self.device, dtype=self.dtype).eval()
            for p in module.parameters():
                p.requires_grad_(False)
            module.layer.fuse_projections()  # as the base class does for module 0
            if context.prepare_module is not None:
                module = mods[i] = context.prepare_module(module)
            module.rotary.ensure_length(self.row_len)
        hc = self.head.config
        rows = self.kv.num_rows
        self.outputs = torch.zeros(len(mods) - 1, rows * self.row_len, hc.hidden_size, dtype=self.dtype,
                                   device=self.device)
        """Module m's output at each (row, position), the input of module m+1 (m < n-1)."""
        self.valid = [[-1] * rows for _ in mods]
        """Per module and row: the last position whose KV was computed from real tokens only."""

    def remove_request(self, req_id: str) -> None:
        row = self.rows.get(req_id)
        if row is not None:
            for frontier in self.valid:
                frontier[row] = -1
        super().remove_request(req_id)

    def _run(self, m: int, ids: torch.Tensor, features: torch.Tensor, positions: torch.Tensor,
             qrows: torch.Tensor, max_position: int) -> torch.Tensor:
        module = self.mtp_modules[m]
        slots = qrows * self.row_len + positions
        attend = self.kv.attention(slots, qrows, positions, max_position, layer=m)
        return module.step(module.embed(ids.long()).to(self.dtype), features, positions, attend)

    @torch.inference_mode()
    def propose(self, batch: DraftBatch) -> DraftProposal:
        """Kept as one function: it is MTP's drafting hot path, module after module, and on a CPU
        each Python call costs."""
        reqs = batch.requests
        dev, width = self.device, self.row_len
        mods = self.mtp_modules
        n_mod = len(mods)
        rows = [self.rows.row(r.req_id) for r in reqs]
        last = [len(r.token_ids) - 2 for r in reqs]  # P: the last committed position
        counts = [r.num_new_positions for r in reqs]
        budgets = [r.max_draft_tokens for r in reqs]
        flat_index: list[int] = []
        flat_tokens: list[int] = []
        for r, row, p, n in zip(reqs, rows, last, counts):
            if n:
                flat_index.extend(range(row * width + p + 2 - n, row * width + p + 2))
                flat_tokens.extend(r.token_ids[p + 2 - n:p + 2])
        if flat_index:
            self.tokens.view(-1)[torch.tensor(flat_index, device=dev)] = torch.tensor(
                flat_tokens, dtype=torch.int32, device=dev)

        # Module 0 ingests the newly committed positions with the target's hidden states.
        num_tokens = sum(counts)
        if num_tokens:
            cu = self.new_position_inputs(batch, counts)
            i32 = dict(dtype=torch.int32, device=dev)
            ids, pos, slot, _ = self.prepare_inputs(
                self.tokens, torch.tensor(rows, **i32), torch.tensor([p + 1 - n for p, n in zip(last, counts)], **i32),
                torch.tensor(counts, **i32), cu, num_tokens)
            features = self.head.fuse(batch.hidden_states.to(device=dev, dtype=self.dtype))
            qrows = torch.tensor(rows, device=dev).repeat_interleave(torch.tensor(counts, device=dev))
            out = self._run(0, ids, features, pos, qrows, max(p for p, n in zip(last, counts) if n))
            self.outputs[0].index_copy_(0, slot, out)
            for i, n in enumerate(counts):
                if n:
                    self.valid[0][rows[i]] = last[i]

        drafting = [i for i, b in enumerate(budgets) if b > 0]
        if not drafting:
            # Keep the later modules' real KV up to date (what a prefill chunk made known).
            self._refill(rows, last, budgets, drafts=None)
            return DraftProposal(token_ids=torch.zeros(0, dtype=torch.int32, device=dev), num_draft_tokens=[0] * len(reqs))

        k_max = max(budgets)
        slot_of = {i: j for j, i in enumerate(drafting)}
        drafts = torch.zeros(len(drafting), k_max, dtype=torch.int64, device=dev)
        probs: list[torch.Tensor | None] = [None] * k_max
        temps = [self.draft_temperature(reqs[i]) for i in drafting]
        gens = [reqs[i].generator for i in drafting]
        noise = coupling.request_noise([reqs[i] for i in drafting], k_max)  # [k_max, V] per coupled request
        d_rows = torch.tensor([rows[i] for i in drafting], dtype=torch.int64, device=dev)
        d_last = torch.tensor([last[i] for i in drafting], dtype=torch.int64, device=dev)

        def emit(j: int, members: list[int], a: torch.Tensor, module: MTPModule) -> torch.Tensor:
            """Draft j for the drafting requests ``members`` (indices into ``drafting``)."""
            tok, p = self._choose(module.logits(a), [temps[k] for k in members], [gens[k] for k in members],
                                  [None if noise[k] is None else noise[k][j] for k in members])
            idx = torch.tensor(members, dtype=torch.int64, device=dev)
            drafts[idx, j] = tok
            if p is not None:
                if probs[j] is None:
                    probs[j] = torch.zeros(len(drafting), p.shape[-1], dtype=p.dtype, device=dev)
                probs[j][idx] = p
            # The token table holds drafts right after the last real token (read by later modules).
            self.tokens.view(-1)[d_rows[idx] * width + d_last[idx] + 2 + j] = tok.to(torch.int32)
            return tok

        emit(0, list(range(len(drafting))), self.outputs[0][d_rows * width + d_last], mods[0])
        chain = torch.zeros(len(drafting), self.head.config.hidden_size, dtype=self.dtype, device=dev)
        self._refill(rows, last, budgets, drafts=(slot_of, emit, chain))

        if k_max > n_mod:  # cycle through the modules again, one position further per cycle
            members = [j for j, i in enumerate(drafting) if budgets[i] > n_mod]
            idx = torch.tensor(members, dtype=torch.int64, device=dev)
            m_rows, m_last = d_rows[idx], d_last[idx]
            a = chain[idx]
            for j in range(n_mod, k_max):
                m, cycle = j % n_mod, j // n_mod
                pos = m_last + cycle
                a = self._run(m, drafts[idx, j - 1], a, pos, m_rows, int(max(last)) + cycle)
                emit(j, members, a, mods[m])
        tokens = drafts
        stacked = None
        if any(p is not None for p in probs):
            vocab = next(p for p in probs if p is not None).shape[-1]
            one_hot = torch.nn.functional.one_hot  # a position where every drafter was greedy
            stacked = torch.stack([p if p is not None else one_hot(drafts[:, j], vocab).to(torch.float32)
                                   for j, p in enumerate(probs)], dim=1)
        return self._proposal(reqs, drafting, budgets, tokens, stacked)

    def _refill(self, rows: Sequence[int], last: Sequence[int], budgets: Sequence[int], drafts: Any) -> None:
        """Modules 1 .. n-1: recompute every position after each module's real frontier, up to P
        for requests that draft with that module (reading drafts), else up to the last position
        whose inputs are all real (P - m). With ``drafts = (slot_of, emit, chain)`` each drafting
        request's output at P yields its draft m, and the last module's output goes to ``chain``
        (the input of a further cycle)."""
        dev, width = self.device, self.row_len
        n_mod = len(self.mtp_modules)
        for m in range(1, n_mod):
            positions: list[int] = []
            qrows: list[int] = []
            ends: list[tuple[int, int]] = []  # (drafting index, flat index of its output at P)
            for i, (row, p, b) in enumerate(zip(rows, last, budgets)):
                uses_drafts = drafts is not None and b > m
                hi = p if uses_drafts else p - m
                lo = self.valid[m][row] + 1
                if hi >= lo:
                    positions.extend(range(lo, hi + 1))
                    qrows.extend([row] * (hi + 1 - lo))
                    if uses_drafts:
                        ends.append((drafts[0][i], len(positions) - 1))
                self.valid[m][row] = max(self.valid[m][row], p - m)
            if not positions:
                continue
            pos = torch.tensor(positions, dtype=torch.int64, device=dev)
            q = torch.tensor(qrows, dtype=torch.int64, device=dev)
            flat = q * width + pos
            ids = self.tokens.view(-1)[flat + m + 1]
            out = self._run(m, ids, self.outputs[m - 1][flat], pos, q, max(positions))
            if m < n_mod - 1:
                self.outputs[m].index_copy_(0, flat, out)
            if ends:
                members = [k for k, _ in ends]
                a = out[torch.tensor([e for _, e in ends], dtype=torch.int64, device=dev)]
                drafts[1](m, members, a, self.mtp_modules[m])
                if m == n_mod - 1:
                    drafts[2][torch.tensor(members, dtype=torch.int64, device=dev)] = a
