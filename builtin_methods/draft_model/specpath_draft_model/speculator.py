"""``DraftModelSpeculator``: a small causal LM drafts for the target, in its own KV space.

Three drafting shapes, chosen by the resolved config (never by a method name):

* autoregressive: one pass ingests what the target committed since the last step (accepted drafts
  and the bonus token) and drafts ``d1``; each further pass feeds the previous draft. All
  requests share every pass, so a step costs K draft forwards whatever the batch. A lone greedy
  (or seeded, racing) request on bf16 CPU runs its K passes in one native call (``model_draft.c``: the per-op passes'
  KV and drafts to the bit; SmolLM2's 2-layer draft at K=4, 2 threads: 2.79 -> 1.15 ms a step).
* PARD (``parallel_drafting``): one pass over the new tokens followed by K-1 mask tokens; the
  logits at the last real token and at each mask give ``d1..dK``. The mask entries are dropped
  from the draft KV afterwards (they stand for no real token).
* heterogeneous vocabulary (``use_heterogeneous_vocab``, byte-level target): greedy drafts in the
  draft's BPE vocabulary, lifted to their bytes (see :mod:`specpath_draft_model.vocab`).

Drafts are greedy, or sampled from the draft's softmax at the request's temperature when
``draft_sample_method="random"``; then the probabilities ``q`` are returned so the target's
rejection sampling stays exact. A seeded request that samples races on its sampling noise
instead (``specpath_drafting.coupling``), except with a heterogeneous vocabulary (greedy there).

The draft model comes from ``SpeculatorContext.load_model`` (the engine builds it); from the
engine this module takes the drafter-KV settings it resolved (``kv_cache_dtype``,
``attention_backend``: :func:`specpath_engine.draft_overrides.kv_settings`) and its native kernels.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import attrs
import torch

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, SpeculatorContext
from specpath.config.parallel_drafting import parallel_drafting_token_id
from specpath_drafting import coupling
from specpath_drafting.kv import DrafterKV
from specpath_engine.draft_overrides import kv_settings

BYTE_VOCAB_SIZE = 256


@attrs.define
class _RequestState:
    cached: int = 0
    """Positions ``0..cached-1`` of the draft KV hold this request's verified tokens."""
    pending: tuple[int, int] | None = None
    """(context length, drafts) of the last proposal, until ``on_verified`` settles it."""
    ids: list[int] = attrs.field(factory=list)
    """Heterogeneous vocabulary: the draft token ids whose KV is valid, in order."""


SHARES_TARGET_EMBEDDINGS = "shares_target_embeddings"
"""config.json key of a draft without an embedding of its own (it borrows the target's)."""


def load_draft(context: SpeculatorContext, path: str, hf_config: Any = None) -> Any:
    """The draft model, built by the engine's ``load_model`` (the engine owns model code). A
    draft whose config.json declares ``shares_target_embeddings`` gets the target's embedding
    matrix (tied to its head), read through the context's ``embed_tokens``."""
    if context.load_model is None:
        raise ValueError(
            "the draft_model speculator needs SpeculatorContext.load_model to build its draft; "
            "this engine lends none"
        )
    if hf_config is not None and hf_config.get(SHARES_TARGET_EMBEDDINGS):
        if context.embed_tokens is None:
            raise ValueError(f"the draft {path} borrows the target's embedding, and this engine lends none")
        with torch.no_grad():
            weight = context.embed_tokens(torch.arange(context.vocab_size, device=context.device))
        return context.load_model(path, shared_tensors={"model.embed_tokens.weight": weight})
    return context.load_model(path)


def restrict_draft_head(model: Any, path: str, vocab_size: int, prepare: Any = None, *,
                        compact: bool = False) -> torch.Tensor | None:
    """A draft trained on a reduced vocabulary (``train_shared --train-vocab``: its training
    record names the ids) drafts over those ids only: the other logits were never trained, and
    the kept rows are a fraction of the head's cost per draft token. ``compact``: the head
    returns the kept ids' logits alone (no scatter into, and no argmax over, the whole
    vocabulary). Returns the kept ids (sorted target ids), or None: the whole vocabulary."""
    from specpath_drafting.vocab import RestrictedLMHead, serving_lm_head

    head = getattr(model, "lm_head", None)
    if not isinstance(head, torch.nn.Module):
        return None
    model.lm_head = head = serving_lm_head(head, path, vocab_size, prepare=prepare)
    if not isinstance(head, RestrictedLMHead):
        return None
    head.compact = compact
    return head.ids


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    i = 0
    while a[i] == b[i]:
        i += 1
    return i


class DraftModelSpeculator(BaseSpeculator):
    """See the module docstring."""

    def __init__(self, spec: Any, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        draft = spec.draft_model_config
        hf = draft.hf_config
        self.k_max = int(spec.num_speculative_tokens)
        self.parallel = bool(spec.parallel_drafting)
        self.heterogeneous = bool(spec.use_heterogeneous_vocab)
        self.sample_random = spec.draft_sample_method == "random"
        self.device = torch.device(context.device)
        self.vocab = None
        if self.heterogeneous:
            if context.vocab_size != BYTE_VOCAB_SIZE:
                raise ValueError(
                    "use_heterogeneous_vocab: the draft_model speculator lifts draft tokens to their bytes, so "
                    f"it needs a byte-level target (vocab {BYTE_VOCAB_SIZE}); this target has {context.vocab_size}"
                )
            from specpath_draft_model.vocab import ByteStringVocab

            self.vocab = ByteStringVocab.from_checkpoint(draft.tokenizer or draft.model)
        self.mask_token = parallel_drafting_token_id(hf) if self.parallel else None
        self.model = load_draft(context, draft.model, hf)
        self.vocab_size = int(hf.get("vocab_size") or context.vocab_size)
        kept = restrict_draft_head(self.model, draft.model, self.vocab_size, prepare=context.prepare_module,
                                   compact=not self.heterogeneous)
        self.vocab_ids = None if self.heterogeneous or kept is None else kept.to(self.device)
        """The kept ids of a reduced draft vocabulary (sorted target ids; the draft's logits cover
        only these, in this order), or None: logits over the whole vocabulary."""
        heads = hf["num_attention_heads"]
        head_dim = hf.get("head_dim") or hf["hidden_size"] // heads
        max_len = context.max_model_len + self.k_max + 2
        rotary = getattr(getattr(self.model, "model", None), "rotary_emb", None)
        if hasattr(rotary, "ensure_length"):
            rotary.ensure_length(max_len)
        self.kv_settings = settings = kv_settings(context, next(self.model.parameters()).dtype)
        """The KV dtype and attention kernel the engine resolved (``kv_cache_dtype``, ``attention_backend``)."""
        self.kv = DrafterKV(
            num_layers=hf["num_hidden_layers"],
            num_kv_heads=hf.get("num_key_value_heads") or heads,
            head_dim=head_dim,
            row_len=max_len,
            num_rows=context.max_num_seqs,
            initial_rows=4,  # a whole model's layers: rows double on demand up to max_num_seqs
            dtype=settings.dtype,
            device=self.device,
            owner="draft KV",
            native=settings.native,
        )
        self.state: dict[str, _RequestState] = {}
        self._chain_head: Any = None
        """The draft as the native chain reads it (:meth:`_native_head`), built on first use."""

    # ------------------------------------------------------------------------- contract
    @torch.inference_mode()
    def propose(self, batch: DraftBatch) -> DraftProposal:
        counts = [0] * len(batch.requests)
        active = [i for i, r in enumerate(batch.requests) if r.max_draft_tokens > 0 and r.token_ids]
        if not active:
            return self._empty(counts)
        if self.heterogeneous:
            return self._propose_strings(batch, active, counts)
        if self.parallel:
            return self._propose_parallel(batch, active, counts)
        return self._propose_autoregressive(batch, active, counts)

    def on_verified(self, req_ids: Sequence[str], num_accepted: Sequence[int]) -> None:
        for req_id, accepted in zip(req_ids, num_accepted):
            state = self.state.get(req_id)
            if state is None or state.pending is None:
                continue
            n, k = state.pending
            # Autoregressive: d1..d_{k-1} were fed at positions n.. and the accepted ones stay valid.
            # PARD: positions n.. hold mask tokens, never valid.
            state.cached = n if self.parallel else n + min(int(accepted), k - 1)
            state.pending = None

    def remove_request(self, req_id: str) -> None:
        self.state.pop(req_id, None)
        self.kv.release(req_id)

    # -------------------------------------------------------------------------- helpers
    def _empty(self, counts: list[int]) -> DraftProposal:
        return DraftProposal(token_ids=torch.zeros(0, dtype=torch.int32, device=self.device), num_draft_tokens=counts)

    def _request(self, req_id: str) -> tuple[_RequestState, int]:
        state = self.state.get(req_id)
        if state is None:
            state = self.state[req_id] = _RequestState()
        return state, self.kv.row(req_id)

    def _forward(self, ids: list[int] | torch.Tensor, rows: list[int], starts: list[int], lengths: list[int],
                 logits_indices: torch.Tensor | None = None) -> torch.Tensor:
        attention = self.kv.row_attention(rows, starts, lengths)
        if not isinstance(ids, torch.Tensor):
            ids = torch.tensor(ids, dtype=torch.long, device=self.device)
        out = self.model.forward(ids, attention.positions, attention, logits_indices=logits_indices)
        return out.logits

    def _choose(self, logits: torch.Tensor, temperatures: Sequence[float], generators: Sequence[Any],
                noise: Sequence[torch.Tensor | None]):
        """Draft tokens ``[R]`` (target ids) from logits ``[R, V]``, or ``[R, n]`` over
        :attr:`vocab_ids` (:func:`specpath_drafting.coupling.choose`: raced, greedy or sampled
        per request) and, when any row was sampled, the probabilities ``[R, V]`` each was drawn
        from (one-hot for the other rows). Greedy and raced rows pick over the kept ids directly
        (the same ids: every other logit is ``-inf``); sampled rows get the whole vocabulary's
        logits back, so their distributions and draws are what they were."""
        ids = self.vocab_ids
        sampled = self.sample_random and any(t > 0 and n is None for t, n in zip(temperatures, noise))
        if ids is not None and sampled:
            whole = logits.new_full((*logits.shape[:-1], self.vocab_size), float("-inf"))
            whole[..., ids] = logits
            logits, ids = whole, None
        if all(n is None for n in noise) and not sampled:
            tokens, probs = logits.argmax(dim=-1), None
        else:
            tokens, probs = coupling.choose(logits, temperatures, generators, noise, sample=self.sample_random,
                                            vocab_ids=ids)
        return (tokens if ids is None else ids[tokens]), probs

    def _claim(self, batch: DraftBatch, active: list[int],
               counts: list[int]) -> Iterator[tuple[Any, int, int, int, int]]:
        """The active requests of ``batch`` that can draft now, as ``(request, KV row, length n,
        k, start)``: their drafts run from ``n``, their KV is re-read from ``start`` (at least the
        last token, to get its logits); their state and ``counts`` are updated as they are claimed."""
        for i in active:
            r = batch.requests[i]
            state, row = self._request(r.req_id)
            n = len(r.token_ids)
            k = min(r.max_draft_tokens, self.k_max, self.kv.row_len - n + 1)
            if k <= 0:
                continue
            start = min(state.cached, n - 1)
            state.cached, state.pending = n, (n, k)
            counts[i] = k
            yield r, row, n, k, start

    # ------------------------------------------------------------------ autoregressive
    def _propose_autoregressive(self, batch: DraftBatch, active: list[int], counts: list[int]) -> DraftProposal:
        ids: list[int] = []
        rows, starts, lengths, ends, ks, temps, gens, claimed = [], [], [], [], [], [], [], []
        for r, row, n, k, start in self._claim(batch, active, counts):
            ids.extend(r.token_ids[start:n])
            rows.append(row), starts.append(start), lengths.append(n - start), ends.append(n), ks.append(k)
            temps.append(r.temperature), gens.append(r.generator), claimed.append(r)
        if not rows:
            return self._empty(counts)
        if len(rows) == 1 and (drafts := self._native_chain(claimed[0], rows[0], starts[0], ends[0], ks[0])) is not None:
            return DraftProposal(token_ids=drafts.to(torch.int32), num_draft_tokens=counts)
        last = torch.tensor(lengths, device=self.device).cumsum(0) - 1
        logits = self._forward(ids, rows, starts, lengths, last)
        k_top = max(ks)
        noise = coupling.request_noise(claimed, k_top)
        token, probs = self._choose(logits, temps, gens, [None if n is None else n[0] for n in noise])
        drafts = [token]
        all_probs = [probs]
        live = list(range(len(rows)))
        live_rows = torch.tensor(rows, device=self.device)
        live_ends = torch.tensor(ends, device=self.device)
        for j in range(1, k_top):
            if any(ks[b] <= j for b in live):  # some requests are done: shrink the pass
                keep_list = [p for p, b in enumerate(live) if ks[b] > j]
                keep = torch.tensor(keep_list, device=self.device)
                token, live_rows, live_ends = token[keep], live_rows[keep], live_ends[keep]
                live = [live[p] for p in keep_list]
            num_keys = max(ends[b] for b in live) + j
            attention = self.kv.decode_attention(live_rows, live_ends + (j - 1), num_keys)
            logits = self.model.forward(token, attention.positions, attention).logits
            token, probs = self._choose(logits, [temps[b] for b in live], [gens[b] for b in live],
                                        [None if noise[b] is None else noise[b][j] for b in live])
            if len(live) < len(rows):
                index = torch.tensor(live, device=self.device)
                token_all = torch.zeros(len(rows), dtype=token.dtype, device=self.device).index_copy_(0, index, token)
                if probs is not None:
                    probs = torch.zeros(len(rows), probs.shape[1], device=self.device).index_copy_(0, index, probs)
            else:
                token_all = token
            drafts.append(token_all)
            all_probs.append(probs)
        table = torch.stack(drafts, dim=1)  # [B, k_top]
        keep = torch.arange(k_top, device=self.device)[None, :] < torch.tensor(ks, device=self.device)[:, None]
        flat = table[keep].to(torch.int32)
        draft_probs = None
        if any(p is not None for p in all_probs):
            vocab = self.vocab_size
            stacked = torch.stack(
                [p if p is not None else torch.nn.functional.one_hot(t, vocab).float() for p, t in zip(all_probs, drafts)],
                dim=1,
            )
            draft_probs = stacked[keep]
        return DraftProposal(token_ids=flat, num_draft_tokens=counts, draft_probs=draft_probs)

    def _native_chain(self, request: Any, row: int, start: int, end: int, k: int) -> torch.Tensor | None:
        """One request's K greedy or raced drafts (int64 target ids) in one native call
        (:meth:`~specpath_engine.modeling.native.NativeKernels.model_propose`: the per-op passes'
        KV and drafts, to the bit), or None where the per-op passes run (sampled drafts, not bf16
        CPU, a head or layers off the native kernels)."""
        race = coupling.coupled(request)
        if request.temperature > 0 and self.sample_random and not race:
            return None
        found = self._native_head()
        if found is None:
            return None
        native, head, rotary = found
        if rotary.cache_len < end + k:
            return None
        cfg = self.model.config
        keys, values = self.kv.keys, self.kv.values
        span = slice(row * self.kv.row_len, (row + 1) * self.kv.row_len)
        tokens = torch.tensor(request.token_ids[start:end], dtype=torch.int64)
        # [K, n]: T G in the head's row order, draft j at position end + j (the per-op passes' race)
        noise = coupling.scaled_noise(request.noise.gumbel(end, k), [request.temperature] * k,
                                      self.vocab_ids) if race else None
        return native.model_propose(head, tokens, k, start, keys[:, span], values[:, span], rotary.cos_cached,
                                    rotary.sin_cached, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                                    noise)

    def _native_head(self) -> tuple[Any, Any, Any] | None:
        """The native kernels, the draft as ``specpath_model_propose`` reads it (rebuilt when a weight
        it points at changed) and its rotary table, or None where the chain stays per-op."""
        from specpath_engine.modeling.native import DraftModelHead, native_kernels, native_linears

        head = self._chain_head
        if head is not None and head.valid():
            return head.found
        kv, model = self.kv, self.model
        backbone = getattr(model, "model", None)
        rotary = getattr(backbone, "rotary_emb", None)
        table = model.embedding_table() if callable(getattr(model, "embedding_table", None)) else None
        if (not kv.native or kv.keys.dtype is not torch.bfloat16 or table is None or table.dtype is not torch.bfloat16
                or rotary is None or getattr(rotary, "rope_type", "dynamic") == "dynamic"
                or rotary.cos_cached.dtype is not torch.bfloat16 or self.vocab_size != table.shape[0]):
            return None
        if (native := native_kernels(kv.keys)) is None:
            return None
        norm = backbone.norm
        if callable(rows := getattr(model.lm_head, "native_rows", None)):  # a reduced vocabulary's kept rows
            kept = rows(norm.weight.new_empty(1, norm.weight.shape[0]))
        else:  # the whole head: row i is id i
            whole = native_linears(model.lm_head)
            kept = None if whole is None or getattr(model.lm_head, "bias", None) is not None else (whole[0], None, None)
        layers = [layer.native_linears() for layer in backbone.layers]
        if kept is None or any(linears is None for linears in layers) or norm.weight.dtype is not torch.bfloat16:
            return None
        head = DraftModelHead.of(
            embed=table, layers=[(layer.input_layernorm.weight, layer.input_layernorm.eps,
                                  layer.post_attention_layernorm.weight, layer.post_attention_layernorm.eps, linears)
                                 for layer, linears in zip(backbone.layers, layers)],
            final_norm=(norm.weight, norm.eps), lm_head=kept[0], lm_bias=kept[1], ids=kept[2])
        head.found = (native, head, rotary)
        self._chain_head = head
        return head.found

    # ---------------------------------------------------------------------------- PARD
    def _propose_parallel(self, batch: DraftBatch, active: list[int], counts: list[int]) -> DraftProposal:
        ids: list[int] = []
        rows, starts, lengths, picks, temps, gens, noise = [], [], [], [], [], [], []
        offset = 0
        for r, row, n, k, start in self._claim(batch, active, counts):
            ids.extend(r.token_ids[start:n])
            ids.extend([self.mask_token] * (k - 1))
            length = n - start + k - 1
            picks.extend(range(offset + n - 1 - start, offset + length))
            offset += length
            rows.append(row), starts.append(start), lengths.append(length)
            temps.extend([r.temperature] * k), gens.extend([r.generator] * k)
            (own,) = coupling.request_noise([r], k)
            noise.extend([None] * k if own is None else own.unbind(0))
        if not rows:
            return self._empty(counts)
        logits = self._forward(ids, rows, starts, lengths, torch.tensor(picks, device=self.device))
        tokens, probs = self._choose(logits, temps, gens, noise)
        return DraftProposal(token_ids=tokens.to(torch.int32), num_draft_tokens=counts, draft_probs=probs)

    # ---------------------------------------------------------- heterogeneous vocabulary
    def _propose_strings(self, batch: DraftBatch, active: list[int], counts: list[int]) -> DraftProposal:
        vocab = self.vocab
        requests = [batch.requests[i] for i in active]
        encodings = vocab.encode_batch([list(r.token_ids) for r in requests])
        ids: list[int] = []
        rows, starts, lengths, ends, heals, ks, slots, states = [], [], [], [], [], [], [], []
        for i, r, tokens in zip(active, requests, encodings):
            if len(tokens) < 2:
                continue
            state, row = self._request(r.req_id)
            context = tokens[:-1]
            start = common_prefix(state.ids, context)
            start = min(start, len(context) - 1)  # re-read at least one token to get its logits
            k = min(r.max_draft_tokens, self.k_max, self.kv.row_len - len(context) - 1)
            if k <= 0:
                continue
            ids.extend(context[start:])
            state.ids = context
            rows.append(row), starts.append(start), lengths.append(len(context) - start)
            ends.append(len(context)), heals.append(vocab.bytes[tokens[-1]]), ks.append(k)
            slots.append(i), states.append(state)
        if not rows:
            return self._empty(counts)
        last = torch.tensor(lengths, device=self.device).cumsum(0) - 1
        logits = self._forward(ids, rows, starts, lengths, last)
        allowed = torch.stack([vocab.prefix_mask(h, logits.device) for h in heals])
        token = logits.masked_fill(~allowed, float("-inf")).argmax(dim=-1)
        produced = [vocab.bytes[t][len(h):] for t, h in zip(token.tolist(), heals)]
        live = list(range(len(rows)))
        fed = 0
        while True:
            keep = [p for p, b in enumerate(live) if len(produced[b]) < ks[b]]
            if not keep or fed >= self.k_max:
                break
            if len(keep) < len(live):
                token = token[torch.tensor(keep, device=self.device)]
                live = [live[p] for p in keep]
            logits = self._forward(token, [rows[b] for b in live], [ends[b] + fed for b in live], [1] * len(live))
            previous = token.tolist()
            token = logits.argmax(dim=-1)
            for b, prev, t in zip(live, previous, token.tolist()):
                states[b].ids.append(prev)
                produced[b] += vocab.bytes[t]
            fed += 1
        flat: list[int] = []
        for b, i in enumerate(slots):
            drafts = produced[b][: ks[b]]
            counts[i] = len(drafts)
            flat.extend(drafts)
        return DraftProposal(token_ids=torch.tensor(flat, dtype=torch.int32, device=self.device), num_draft_tokens=counts)
