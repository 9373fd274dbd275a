"""The native drafting chain (``draft_chain.c``: K greedy drafts of a one-layer head in one call, or
a seeded request's drafts racing on its noise) gives the per-op chain's bits: the same target ids and the same keys/values in the drafter's KV,
for EAGLE-3 heads (reduced vocabulary, ``d2t``) and MTP modules (either input order, a
reduced-vocabulary shared head with its bias), bf16 and int8 weights, any history and K; so does
the whole native propose (the ingest of the newly verified positions, then the chain, greedy or
racing), with the head's kept output too, and a batch of requests' proposes in one call is each
request's own; a head off the native kernels has no native form and the chain stays
per-op. An int8 head whose weights keep their AMX-tile copies (dual weights) takes int8 for
passes of fewer than ``TILES_FROM_ROWS`` rows and the tiles for more, the per-op path's bits pass
for pass; without AMX it keeps no copy."""

import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_drafting import coupling
from specpath_drafting.heads import HeadConfig
from specpath_drafting.kv import DrafterKV
from specpath_drafting.vocab import RestrictedLMHead
from specpath_engine.model import LlamaModel
from specpath_engine.model_config import LlamaConfig
from specpath_engine.modeling import native
from specpath_engine.packed_linear import pack_linears_
from specpath_engine.quantization import quantize_model_
from specpath_engine.sample.noise import gumbel_noise
from specpath_eagle3.head import Eagle3Head
from specpath_mtp.module import MTPModule

KERNELS = native.kernels()
needs_kernels = pytest.mark.skipif(KERNELS is None, reason=f"native kernels unavailable: {native.unavailable_reason()}")

VOCAB, ROW_LEN = 96, 64


def _target(seed: int) -> LlamaModel:
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=VOCAB, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=32)
    return LlamaModel(config).to(torch.bfloat16).eval().requires_grad_(False)


def _prepared(head, weights: str):
    """As the drafting loop readies a head: fused, then pre-packed or int8 (the engine's
    ``prepare_module``); norms given random weights so they matter."""
    head = head.to(torch.bfloat16).eval().requires_grad_(False)
    with torch.no_grad():
        for _, p in head.named_parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
    head.layer.fuse_projections()
    return pack_linears_(head) if weights == "bf16" else quantize_model_(head, weights)


def _eagle3(target: LlamaModel, weights: str, seed: int) -> Eagle3Head:
    torch.manual_seed(seed)
    head = Eagle3Head(HeadConfig.for_target("eagle3", target.config.to_hf_dict(), draft_vocab_size=48),
                      embed_tokens=target.embed)
    head.set_vocab_map(torch.randperm(VOCAB)[:48].sort().values)
    return _prepared(head, weights)


def _mtp(target: LlamaModel, weights: str, seed: int, order: tuple[str, str]) -> MTPModule:
    torch.manual_seed(seed)
    ids = torch.randperm(VOCAB)[:32].sort().values
    prepare = pack_linears_ if weights == "bf16" else (lambda m: quantize_model_(m, weights))
    lm_head = RestrictedLMHead(target.lm_head_logits, ids, VOCAB, prepare=prepare)
    head = MTPModule(HeadConfig.for_target("mtp", target.config.to_hf_dict()), order=order, embed_tokens=target.embed,
                     lm_head=lm_head)
    return _prepared(head, weights)


def _kv(head, history: int, seed: int) -> DrafterKV:
    hc = head.config
    kv = DrafterKV(num_rows=2, row_len=ROW_LEN, num_kv_heads=hc.num_key_value_heads, head_dim=hc.head_dim,
                   dtype=torch.bfloat16)
    torch.manual_seed(seed)
    kv.keys.normal_()
    kv.values.normal_()
    return kv


def _per_op_chain(head, kv: DrafterKV, a: torch.Tensor, row: int, last: int, k: int, race=None,
                  log_probs: list[float] | None = None) -> list[int]:
    """What the drafting loop's per-op chain computes for one request (``race = (noise [K, V], T)``:
    its coupled drafts, as ``specpath_drafting.coupling.choose`` picks them); ``log_probs`` (a list,
    or None) gets each draft's log-probability under the head, as the native call computes it
    (:func:`_native_log_probs`)."""
    tokens = []
    for j in range(k):
        logits = head.logits(a)
        if race is None:
            tok = logits.argmax(-1)
        else:
            vd = logits.shape[-1]
            ids = None if vd == VOCAB else head.to_target(torch.arange(vd))
            tok = coupling.race(logits, [race[1]], race[0][j : j + 1], ids)
        tokens.append(int(head.to_target(tok)[0]))
        if log_probs is not None:
            log_probs.append(float(_native_log_probs(logits)[0, int(tok[0])]))
        if j + 1 == k:
            break
        pos = torch.tensor([last + 1 + j])
        a = head.step(head.embed(head.to_target(tok)).to(torch.bfloat16), a, pos,
                      kv.attention(row * ROW_LEN + pos, torch.tensor([row]), pos, int(pos)))
    return tokens


def _native_chain(head, kv: DrafterKV, a: torch.Tensor, row: int, last: int, k: int, race=None) -> list[int]:
    hc = head.config
    cos, sin = head.rope(torch.arange(last + 1, last + k))
    keys, values = kv.row_span(0, row)
    native_head = head.native_draft_head()
    noise = None if race is None else coupling.scaled_noise(race[0][:k], [race[1]] * k, native_head.row_ids)
    out = KERNELS.draft_chain(native_head, a, k, hc.num_attention_heads, hc.num_key_value_heads,
                              hc.head_dim, keys, values, last + 1, cos.contiguous(), sin.contiguous(), noise)
    return out.tolist()


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp", "mtp-hidden-first"]), weights=st.sampled_from(["bf16", "int8"]),
       history=st.integers(0, 40), k=st.integers(1, 8), row=st.integers(0, 1), seed=st.integers(0, 2**16),
       temperature=st.sampled_from([None, 0.3, 0.8, 1.5]))
@settings(max_examples=40, deadline=None)
def test_the_native_chain_is_the_per_op_chain_to_the_bit(kind, weights, history, k, row, seed, temperature):
    """Greedy (``temperature`` None), or a seeded request's race on its noise."""
    target = _target(seed)
    if kind == "eagle3":
        head = _eagle3(target, weights, seed)
    else:
        head = _mtp(target, weights, seed, ("hidden", "embedding") if kind == "mtp-hidden-first" else
                    ("embedding", "hidden"))
    assert head.native_draft_head() is not None
    torch.manual_seed(seed + 1)
    a = (3 * torch.randn(1, head.config.hidden_size)).to(torch.bfloat16)
    last = min(history, ROW_LEN - k - 1)
    with torch.inference_mode():
        kv_ref, kv_native = _kv(head, last, seed), _kv(head, last, seed)
        race = None
        if temperature is not None:
            race = (torch.stack([gumbel_noise(seed, last + 1 + j, VOCAB) for j in range(k)]), temperature)
        want = _per_op_chain(head, kv_ref, a, row, last, k, race)
        got = _native_chain(head, kv_native, a, row, last, k, race)
    assert got == want and len(got) == k
    assert all(0 <= t < VOCAB for t in got)
    if kind == "eagle3":
        assert all(bool(head.t2d[t]) for t in got)  # drafts come from the draft vocabulary
    else:
        assert set(got) <= set(head._lm_head.ids.tolist())  # and from the kept rows only
    assert torch.equal(kv_native.keys, kv_ref.keys) and torch.equal(kv_native.values, kv_ref.values)


def _per_op_ingest(head, kv: DrafterKV, taps: torch.Tensor, ids: torch.Tensor, row: int, start: int) -> torch.Tensor:
    """What the drafting loop's per-op ingest computes for one request's new positions
    ``start ..``: the head's output at the last of them ``[1, d]`` (its KV written on the way)."""
    n = ids.shape[0]
    pos = torch.arange(start, start + n)
    features = head.fuse(taps)
    out = head.step(head.embed(ids).to(torch.bfloat16), features, pos,
                    kv.attention(row * ROW_LEN + pos, torch.full((n,), row), pos, start + n - 1))
    return out[-1:]


def _head(kind: str, weights: str, seed: int):
    target = _target(seed)
    if kind == "eagle3":
        return _eagle3(target, weights, seed)
    return _mtp(target, weights, seed, ("hidden", "embedding") if kind == "mtp-hidden-first" else
                ("embedding", "hidden"))


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp", "mtp-hidden-first"]), weights=st.sampled_from(["bf16", "int8", "int4"]),
       start=st.integers(0, 40), n=st.integers(0, 9), k=st.integers(0, 8), row=st.integers(0, 1),
       seed=st.integers(0, 2**16), temperature=st.sampled_from([None, 0.3, 0.8, 1.5]))
@settings(max_examples=40, deadline=None)
def test_the_native_propose_is_the_per_op_ingest_and_chain_to_the_bit(kind, weights, start, n, k, row, seed,
                                                                      temperature):
    """Ingest of 0..9 new positions (0: the chain from the kept output alone), then K = 0..8
    drafts, greedy (``temperature`` None) or a seeded request's race on its noise, bf16, int8 or
    int4 weights: the same drafts, the same kept output and the same drafter KV as the per-op path."""
    head = _head(kind, weights, seed)
    native_head = head.native_draft_head()
    assert native_head is not None and native_head.ingests
    hc = head.config
    start = min(start, ROW_LEN - n - k - 1)
    torch.manual_seed(seed + 2)
    taps = (2 * torch.randn(n, hc.num_taps, hc.target_hidden_size)).to(torch.bfloat16)  # [n, taps, target d]
    ids = torch.randint(0, VOCAB, (n,))
    a = (3 * torch.randn(1, hc.hidden_size)).to(torch.bfloat16)  # the kept output before this propose
    with torch.inference_mode():
        kv_ref, kv_native = _kv(head, start, seed), _kv(head, start, seed)
        a_ref = _per_op_ingest(head, kv_ref, taps, ids, row, start) if n else a
        race = None  # draft j at position start + n + j
        if temperature is not None and k:
            race = (torch.stack([gumbel_noise(seed, start + n + j, VOCAB) for j in range(k)]), temperature)
        want = _per_op_chain(head, kv_ref, a_ref, row, start + n - 1, k, race) if k else []
        noise = None if race is None else coupling.scaled_noise(race[0], [temperature] * k, native_head.row_ids)
        a_native = a[0].clone()
        cos, sin = head.rope(torch.arange(start, start + n + max(k - 1, 0)))
        keys, values = kv_native.row_span(0, row)
        got = KERNELS.draft_propose(native_head, taps.reshape(n, -1).contiguous() if n else None, ids, a_native, k,
                                    hc.num_attention_heads, hc.num_key_value_heads, hc.head_dim, keys, values, start,
                                    cos.contiguous(), sin.contiguous(), noise).tolist()
    assert got == want and len(got) == k
    assert torch.equal(a_native, a_ref[0])  # the kept output: what the next propose starts from
    assert torch.equal(kv_native.keys, kv_ref.keys) and torch.equal(kv_native.values, kv_ref.values)
    if n:  # the ingest wrote the new positions' KV (not what the cache held before)
        before = _kv(head, start, seed)
        assert not torch.equal(kv_native.keys[0, row * ROW_LEN + start], before.keys[0, row * ROW_LEN + start])


def _native_log_probs(logits: torch.Tensor) -> torch.Tensor:
    """The native tree's log-probabilities of ``logits [n, V]`` (its fp32 exp summed in double
    lanes over each row's finite entries: the kept rows of a reduced head)."""
    rows = []
    for r in logits.float():
        top, logsum = KERNELS.log_softmax_terms(r[torch.isfinite(r)])
        rows.append((r.double() - top) - logsum)
    return torch.stack(rows)


def _per_op_tree(head, kv: DrafterKV, a: torch.Tensor, row: int, last: int, budget: int, topk: int, monkeypatch,
                 race: torch.Tensor | None = None):
    """What the drafting loop's per-op tree (``HiddenStateSpeculator._draft_tree``) grows for one
    request from the kept output ``a [1, d]``, scored as the native tree scores: (target ids,
    parents, scores). ``race``: a seeded request's scaled noise per depth (per-op vocabulary order)."""
    import functools
    import types

    from specpath_drafting import loop, tree_search

    monkeypatch.setattr(loop, "grow_tree", functools.partial(tree_search.grow_tree, normalise=_native_log_probs))
    speculator = types.SimpleNamespace(head=head, device=torch.device("cpu"), dtype=torch.bfloat16, kv=kv,
                                       tree_topk=topk)
    tree = loop.HiddenStateSpeculator._draft_tree(speculator, a, row, last, budget, race)
    return head.to_target(torch.tensor(tree.tokens, dtype=torch.int64)).tolist(), tree.parents, tree.scores


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp", "mtp-hidden-first"]), weights=st.sampled_from(["bf16", "int8", "int4"]),
       start=st.integers(0, 40), n=st.integers(0, 9), budget=st.integers(1, 8), topk=st.integers(1, 4),
       row=st.integers(0, 1), seed=st.integers(0, 2**16), temperature=st.sampled_from([None, 0.3, 0.8]))
@settings(max_examples=40, deadline=None)
def test_the_native_tree_is_the_per_op_ingest_and_tree_to_the_bit(kind, weights, start, n, budget, topk, row, seed,
                                                                  temperature):
    """Ingest of 0..9 new positions, then a dynamic tree (``draft_tree_topk`` 1..4, budget 1..8),
    on the head's own logits or (``temperature``) a seeded request's race, its noise added per
    depth: the same nodes, parents and scores, the same kept output and the same drafter KV (the
    tree's scratch slots included) as ``grow_tree`` over the per-op head passes."""
    from specpath_drafting.tree_search import num_passes

    head = _head(kind, weights, seed)
    native_head = head.native_draft_head()
    hc = head.config
    passes = num_passes(budget, topk)
    start = min(start, ROW_LEN - n - passes * topk - 2)
    torch.manual_seed(seed + 2)
    taps = (2 * torch.randn(n, hc.num_taps, hc.target_hidden_size)).to(torch.bfloat16)  # [n, taps, target d]
    ids = torch.randint(0, VOCAB, (n,))
    a = (3 * torch.randn(1, hc.hidden_size)).to(torch.bfloat16)
    head.rotary.ensure_length(ROW_LEN)
    cos, sin = (t.to(torch.bfloat16).contiguous() for t in (head.rotary.cos_cached, head.rotary.sin_cached))
    with torch.inference_mode(), pytest.MonkeyPatch.context() as monkeypatch:
        kv_ref, kv_native = _kv(head, start, seed), _kv(head, start, seed)
        a_ref = _per_op_ingest(head, kv_ref, taps, ids, row, start) if n else a
        race = native_noise = None  # depth d at position start + n + d
        if temperature is not None:
            noise = torch.stack([gumbel_noise(seed, start + n + d, VOCAB) for d in range(passes + 1)])
            vd = head.draft_vocab_size
            race = coupling.scaled_noise(noise, [temperature] * (passes + 1),
                                         None if vd == VOCAB else head.to_target(torch.arange(vd)))
            native_noise = coupling.scaled_noise(noise, [temperature] * (passes + 1), native_head.row_ids)
        want = _per_op_tree(head, kv_ref, a_ref, row, start + n - 1, budget, topk, monkeypatch, race)
        a_native = a[0].clone()
        keys, values = kv_native.row_span(0, row)
        got = KERNELS.draft_tree(native_head, taps.reshape(n, -1).contiguous() if n else None, ids, a_native, budget,
                                 topk, passes, hc.num_attention_heads, hc.num_key_value_heads, hc.head_dim, keys,
                                 values, start, cos, sin, noise=native_noise)
    assert got == want
    tokens, parents, scores = got
    assert 1 <= len(tokens) <= budget and all(-1 <= q < i for i, q in enumerate(parents))
    assert scores == sorted(scores, reverse=True)
    assert torch.equal(a_native, a_ref[0])
    assert torch.equal(kv_native.keys, kv_ref.keys) and torch.equal(kv_native.values, kv_ref.values)


@given(kind=st.sampled_from(["eagle3", "mtp"]), last=st.integers(0, 40), budget=st.integers(1, 6),
       seed=st.integers(0, 2**16), temperature=st.sampled_from([0.3, 0.8, 1.5]))
@settings(max_examples=20, deadline=None)
def test_a_raced_tree_of_one_candidate_a_pass_is_the_raced_chain(kind, last, budget, seed, temperature):
    """A seeded request's tree ranks the head's logits plus its noise at each depth: with one
    candidate a pass it is the chain's race, draft for draft (and so its best depth-0 candidate is
    always the chain's first raced draft); without noise it would be the greedy chain."""
    head = _head(kind, "bf16", seed)
    vd = head.draft_vocab_size
    vocab_ids = None if vd == VOCAB else head.to_target(torch.arange(vd))
    noise = torch.stack([gumbel_noise(seed, last + 1 + d, VOCAB) for d in range(budget)])
    a = (3 * torch.randn(1, head.config.hidden_size, generator=torch.Generator().manual_seed(seed))).to(torch.bfloat16)
    with torch.inference_mode(), pytest.MonkeyPatch.context() as monkeypatch:
        chain = _per_op_chain(head, _kv(head, last + 1, seed), a, 0, last, budget, (noise, temperature))
        race = coupling.scaled_noise(noise, [temperature] * budget, vocab_ids)
        tokens, parents, _ = _per_op_tree(head, _kv(head, last + 1, seed), a, 0, last, budget, 1, monkeypatch, race)
    assert tokens == chain and parents == list(range(-1, budget - 1))


def _kv_rows(head, rows: int, seed: int) -> DrafterKV:
    hc = head.config
    kv = DrafterKV(num_rows=rows, row_len=ROW_LEN, num_kv_heads=hc.num_key_value_heads, head_dim=hc.head_dim,
                   dtype=torch.bfloat16)
    torch.manual_seed(seed)
    kv.keys.normal_()
    kv.values.normal_()
    return kv


_REQUEST = st.tuples(st.integers(0, 40), st.integers(0, 4), st.integers(0, 20),
                     st.sampled_from([None, None, 0.3, 1.5]))
"""One request of a batch: new positions T, drafts K, first new position, None (greedy) or a
seeded request's temperature."""


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp", "mtp-hidden-first"]), weights=st.sampled_from(["bf16", "int8", "int4"]),
       requests=st.lists(_REQUEST, min_size=1, max_size=8), seed=st.integers(0, 2**16), data=st.data())
@settings(max_examples=40, deadline=None)
def test_a_batched_native_propose_is_each_requests_own_propose_to_the_bit(kind, weights, requests, seed, data):
    """R = 1..8 requests, each with 0..40 new positions and 0..4 drafts, greedy or racing on its
    noise, in their own KV rows (in any order): one batched call gives every request the drafts,
    the drafter KV and the kept output that one-request native calls in turn give, and the drafts
    of the per-op ingest and chain."""
    head = _head(kind, weights, seed)
    native_head, hc = head.native_draft_head(), head.config
    rows = data.draw(st.permutations(range(8)))[: len(requests)]
    torch.manual_seed(seed + 3)
    plans = []  # (row, start, n, k, taps [n, taps, td], ids [n], noise [k, Vd] or None)
    for (n, k, start, temperature), row in zip(requests, rows):
        start = min(start, ROW_LEN - n - k - 1)
        taps = (2 * torch.randn(n, hc.num_taps, hc.target_hidden_size)).to(torch.bfloat16)
        ids = torch.randint(0, VOCAB, (n,))
        race = None
        if temperature is not None and k:
            race = (torch.stack([gumbel_noise(seed + row, start + n + j, VOCAB) for j in range(k)]), temperature)
        plans.append((row, start, n, k, taps, ids, race))
    kept = (3 * torch.randn(8, hc.hidden_size)).to(torch.bfloat16)  # the kept outputs before this propose
    cos, sin = (t.contiguous() for t in head.rope(torch.arange(ROW_LEN)))  # [ROW_LEN, D]: row p is position p
    heads = (hc.num_attention_heads, hc.num_key_value_heads, hc.head_dim)
    with torch.inference_mode():
        kv_ref, kv_one, kv_batch = (_kv_rows(head, 8, seed) for _ in range(3))
        want, one, one_kept = [], [], kept.clone()
        for row, start, n, k, taps, ids, race in plans:
            a = _per_op_ingest(head, kv_ref, taps, ids, row, start) if n else kept[row : row + 1]
            want += _per_op_chain(head, kv_ref, a, row, start + n - 1, k, race) if k else []
            noise = None if race is None else coupling.scaled_noise(race[0], [race[1]] * k, native_head.row_ids)
            keys, values = kv_one.row_span(0, row)
            one += KERNELS.draft_propose(native_head, taps.reshape(n, -1).contiguous() if n else None, ids,
                                         one_kept[row], k, *heads, keys, values, start,
                                         cos[start:].contiguous(), sin[start:].contiguous(), noise).tolist()
        got, batch_kept = _native_batch(head, native_head, kv_batch, plans, kept)
    assert got == one == want and len(got) == sum(p[3] for p in plans)
    assert torch.equal(batch_kept, one_kept)
    assert torch.equal(kv_batch.keys, kv_one.keys) and torch.equal(kv_batch.values, kv_one.values)
    assert torch.equal(kv_batch.keys, kv_ref.keys) and torch.equal(kv_batch.values, kv_ref.values)


@needs_kernels
def test_a_head_off_the_native_kernels_has_no_native_form():
    target = _target(0)
    head = Eagle3Head(HeadConfig.for_target("eagle3", target.config.to_hf_dict(), draft_vocab_size=48),
                      embed_tokens=target.embed).to(torch.bfloat16)
    assert head.native_draft_head() is None  # plain nn.Linear layers, not fused
    float_head = _eagle3(target, "bf16", 0).float()
    assert float_head.native_draft_head() is None  # not bf16
    lm_only = MTPModule(HeadConfig.for_target("mtp", target.config.to_hf_dict()), embed_tokens=target.embed,
                        lm_head=target.lm_head_logits)
    lm_only = _prepared(lm_only, "bf16")
    assert lm_only.native_draft_head() is None  # a full-vocabulary shared head stays per-op


def _dual(head) -> tuple[object, int]:
    """The head's native form with its int8 weights' tile copies (as the drafting loop readies an
    int8 drafter where the CPU has AMX tiles), and the bytes the copies added."""
    added = native.keep_tile_copies(head.native_draft_head())
    return head.native_draft_head(), added


def _grouped_attend(kv: DrafterKV, segments: list[tuple[int, int, int]]):
    """An ``attend`` for one pass over several requests' rows, each request's queries (``(row,
    first position, count)``, in order) attending over its own KV row as it does alone."""

    def attend(q, k, v):
        outs, at = [], 0
        for row, first, count in segments:
            pos = torch.arange(first, first + count)
            part = slice(at, at + count)
            outs.append(kv.attention(row * ROW_LEN + pos, torch.full((count,), row), pos, first + count - 1)(
                q[part], k[part], v[part]))
            at += count
        return torch.cat(outs)

    return attend


def _per_op_batch(head, kv: DrafterKV, plans, kept: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    """The per-op path over a batch, its passes grouped as the native propose groups them: one
    ingest pass over every request's new positions, then per chain step j one LM-head pass over
    the requests drafting a j-th token and one layer pass over those drafting again (each
    request's attention over its own row); every matmul thus sees the native pass's row count,
    so a dual-weight linear takes the same kernel. Returns the drafts (request after request)
    and the kept outputs."""
    kept = kept.clone()
    ingest = [p for p in plans if p[2]]
    if ingest:
        pos = torch.cat([torch.arange(start, start + n) for _, start, n, *_ in ingest])
        features = head.fuse(torch.cat([p[4] for p in ingest]))
        out = head.step(head.embed(torch.cat([p[5] for p in ingest])).to(torch.bfloat16), features, pos,
                        _grouped_attend(kv, [(row, start, n) for row, start, n, *_ in ingest]))
        ends = torch.tensor([n for _, _, n, *_ in ingest]).cumsum(0) - 1
        kept[[p[0] for p in ingest]] = out[ends]
    drafts: dict[int, list[int]] = {p[0]: [] for p in plans}
    a = {p[0]: kept[p[0] : p[0] + 1] for p in plans}
    for j in range(max(p[3] for p in plans)):
        now = [p for p in plans if p[3] > j]
        logits = head.logits(torch.cat([a[p[0]] for p in now]))
        chosen = []
        for i, (row, _, _, _, _, _, race) in enumerate(now):
            if race is None:
                tok = logits[i : i + 1].argmax(-1)
            else:
                vd = logits.shape[-1]
                ids = None if vd == VOCAB else head.to_target(torch.arange(vd))
                tok = coupling.race(logits[i : i + 1], [race[1]], race[0][j : j + 1], ids)
            drafts[row].append(int(head.to_target(tok)[0]))
            chosen.append(tok)
        again = [i for i, p in enumerate(now) if p[3] > j + 1]
        if not again:
            break
        pos = torch.tensor([now[i][1] + now[i][2] + j for i in again])  # draft j + 1's pass
        toks = head.to_target(torch.cat([chosen[i] for i in again]))
        out = head.step(head.embed(toks).to(torch.bfloat16), torch.cat([a[now[i][0]] for i in again]), pos,
                        _grouped_attend(kv, [(now[i][0], int(p), 1) for i, p in zip(again, pos)]))
        for i, o in zip(again, out.split(1)):
            a[now[i][0]] = o
    return [t for p in plans for t in drafts[p[0]]], kept


def _plans(head, requests, rows, seed: int, temperatures: bool = True):
    hc = head.config
    torch.manual_seed(seed + 3)
    plans = []  # (row, start, n, k, taps [n, taps, td], ids [n], race or None)
    for (n, k, start, temperature), row in zip(requests, rows):
        start = min(start, ROW_LEN - n - k - 1)
        taps = (2 * torch.randn(n, hc.num_taps, hc.target_hidden_size)).to(torch.bfloat16)
        ids = torch.randint(0, VOCAB, (n,))
        race = None
        if temperatures and temperature is not None and k:
            race = (torch.stack([gumbel_noise(seed + row, start + n + j, VOCAB) for j in range(k)]), temperature)
        plans.append((row, start, n, k, taps, ids, race))
    return plans


def _native_batch(head, native_head, kv: DrafterKV, plans, kept: torch.Tensor) -> tuple[list[int], torch.Tensor]:
    hc = head.config
    noises = [coupling.scaled_noise(race[0], [race[1]] * k, native_head.row_ids)
              for _, _, _, k, _, _, race in plans if race is not None]
    noise_rows, at = [], 0
    for _, _, _, k, _, _, race in plans:
        noise_rows.append(-1 if race is None else at)
        at += 0 if race is None else k
    plan = torch.tensor([[p[2] for p in plans], [p[0] for p in plans], [p[3] for p in plans],
                         [p[0] * ROW_LEN for p in plans], [p[1] for p in plans], noise_rows])
    taps = torch.cat([p[4].flatten(1) for p in plans]).contiguous()  # [sum n, taps * td]
    cos, sin = (t.contiguous() for t in head.rope(torch.arange(ROW_LEN)))  # [ROW_LEN, D]: row p is position p
    kept = kept.clone()
    got = KERNELS.draft_propose_batch(native_head, taps if taps.shape[0] else None, torch.cat([p[5] for p in plans]),
                                      plan, kept, hc.num_attention_heads, hc.num_key_value_heads, hc.head_dim,
                                      kv.keys[0], kv.values[0], cos, sin,
                                      torch.cat(noises).contiguous() if noises else None).tolist()
    return got, kept


_DUAL_REQUEST = st.tuples(st.integers(0, 6), st.integers(1, 4), st.integers(0, 20),
                          st.sampled_from([None, None, 0.3, 1.5]))
"""One request of a dual-weight batch: new positions T, drafts K = 1..4, first new position,
None (greedy) or a seeded request's temperature."""


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp", "mtp-hidden-first"]),
       requests=st.lists(_DUAL_REQUEST, min_size=1, max_size=8), seed=st.integers(0, 2**16), data=st.data())
@settings(max_examples=30, deadline=None)
def test_with_dual_weights_a_batched_native_propose_is_the_per_op_path_pass_for_pass(kind, requests, seed, data):
    """An int8 head whose weights keep their tile copies (where the CPU has AMX tiles; without,
    none is kept and this is the int8 test above): R = 1..8 requests with 0..6 new positions and
    K = 1..4 drafts, greedy or racing, give the drafts, kept outputs and drafter KV of the per-op
    path run with the same passes (a pass of few rows on int8, of many on the tiles, either way)."""
    head = _head(kind, "int8", seed)
    native_head, added = _dual(head)
    assert added > 0 if KERNELS.tiles else added == 0
    plans = _plans(head, requests, data.draw(st.permutations(range(8)))[: len(requests)], seed)
    kept = (3 * torch.randn(8, head.config.hidden_size)).to(torch.bfloat16)  # the kept outputs before this propose
    with torch.inference_mode():
        kv_ref, kv_native = _kv_rows(head, 8, seed), _kv_rows(head, 8, seed)
        want, want_kept = _per_op_batch(head, kv_ref, plans, kept)
        got, got_kept = _native_batch(head, native_head, kv_native, plans, kept)
    assert got == want and len(got) == sum(p[3] for p in plans)
    assert torch.equal(got_kept, want_kept)
    assert torch.equal(kv_native.keys, kv_ref.keys) and torch.equal(kv_native.values, kv_ref.values)


@needs_kernels
@pytest.mark.skipif(KERNELS is None or not KERNELS.tiles, reason="no AMX tiles here: int8 weights keep no tile copy")
@pytest.mark.parametrize("kind", ["eagle3", "mtp"])
def test_a_lone_requests_passes_take_int8_and_a_batchs_the_tiles(kind):
    """Which kernel each pass of a dual-weight head took (``dual_weight_passes``, not timing): a
    batch of one with one new position is all one-row passes, on the int8 kernel; eight requests
    at once are all eight-row passes, on the tiles; a lone request's ingest of TILES_FROM_ROWS
    positions and more is on the tiles, its chain on int8. With the copies switched off (``use_tiles_from(None)``),
    every pass is on int8 again, the per-op path's without copies."""
    head = _head(kind, "int8", 7)
    native_head, added = _dual(head)
    assert added > 0

    def passes(requests, seed=7):
        plans = _plans(head, requests, range(len(requests)), seed, temperatures=False)
        before = KERNELS.dual_weight_passes()
        with torch.inference_mode():
            got, _ = _native_batch(head, native_head, _kv_rows(head, 8, seed), plans,
                                   torch.zeros(8, head.config.hidden_size, dtype=torch.bfloat16))
        after = KERNELS.dual_weight_passes()
        return got, (after[0] - before[0], after[1] - before[1])

    lone, batch, ingest = [(1, 4, 10, None)], [(1, 4, 10, None)] * 8, [(native.TILES_FROM_ROWS, 4, 10, None)]
    _, (int8, tiles) = passes(lone)
    assert int8 > 0 and tiles == 0
    _, (int8, tiles) = passes(batch)
    assert int8 == 0 and tiles > 0
    _, (int8, tiles) = passes(ingest)
    assert int8 > 0 and tiles > 0
    dual_batch, _ = passes(batch)
    native.use_tiles_from(native_head, None)
    assert native_head.valid()
    int8_batch, (int8, tiles) = passes(batch)
    assert int8 > 0 and tiles == 0
    with torch.inference_mode():  # what the head gives without the copies: the int8 path's drafts
        plans = _plans(head, batch, range(8), 7, temperatures=False)
        want, _ = _per_op_batch(head, _kv_rows(head, 8, 7), plans, torch.zeros(8, head.config.hidden_size,
                                                                                    dtype=torch.bfloat16))
    assert int8_batch == want and len(dual_batch) == len(int8_batch)


_WITHOUT_TILES = """
import importlib.util, sys, torch
from specpath_engine.modeling import native
from specpath_engine.quantization import Int8Linear
assert native.kernels() is not None and not native.kernels().tiles
layer = Int8Linear(torch.nn.Linear(64, 32, bias=False).to(torch.bfloat16))
assert layer.keep_tiles() == 0 and not hasattr(layer, "tiled_levels") and layer.tiles_from_rows is None
spec = importlib.util.spec_from_file_location("chain_tests", sys.argv[1])
tests = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tests)
tests.test_with_dual_weights_a_batched_native_propose_is_the_per_op_path_pass_for_pass()
print("fell back")
"""


@needs_kernels
def test_without_amx_tiles_no_copy_is_kept_and_batches_stay_the_per_op_path():
    """``SPECPATH_AMX=0`` (as on a CPU without AMX): an int8 layer keeps no tile copy, and the
    dual-weight property test above, run in a fresh process, holds on int8 alone."""
    env = {**os.environ, "SPECPATH_AMX": "0"}
    result = subprocess.run([sys.executable, "-c", _WITHOUT_TILES, __file__], env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0 and "fell back" in result.stdout, result.stderr[-3000:]


def _kept_by_floor(log_probs: list[float], floor: float) -> int:
    """Drafts a chain keeps under ``floor``: the first, then each while the summed log-probability holds."""
    kept, total = 0, 0.0
    for j, lp in enumerate(log_probs):
        if j and total + lp < floor:
            break
        kept, total = j + 1, total + lp
    return kept


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp"]), weights=st.sampled_from(["bf16", "int8"]), n=st.integers(0, 6),
       k=st.integers(1, 6), row=st.integers(0, 1), seed=st.integers(0, 2**16), floor=st.floats(-12.0, 0.0))
@settings(max_examples=30, deadline=None)
def test_a_floor_stops_the_native_chain_where_its_summed_log_probability_falls_below_it(kind, weights, n, k, row,
                                                                                          seed, floor):
    """The native propose reports each draft's log-probability under the head (the per-op logits'
    log-softmax at the drafted token), and with a floor it drafts the first draft and then each
    while the drafts' summed log-probability stays at or above the floor: a prefix of the drafts
    it makes without one, the same tokens."""
    head = _head(kind, weights, seed)
    native_head, hc = head.native_draft_head(), head.config
    start = 5
    torch.manual_seed(seed + 2)
    taps = (2 * torch.randn(n, hc.num_taps, hc.target_hidden_size)).to(torch.bfloat16)
    ids = torch.randint(0, VOCAB, (n,))
    a = (3 * torch.randn(1, hc.hidden_size)).to(torch.bfloat16)
    cos, sin = (t.contiguous() for t in head.rope(torch.arange(start, start + n + k)))
    with torch.inference_mode():
        kv_ref = _kv(head, start, seed)
        a_ref = _per_op_ingest(head, kv_ref, taps, ids, row, start) if n else a
        want: list[float] = []
        _per_op_chain(head, kv_ref, a_ref, row, start + n - 1, k, log_probs=want)
        runs = []
        for bound in (None, floor):
            kv = _kv(head, start, seed)
            keys, values = kv.row_span(0, row)
            logps = torch.full((k,), float("nan"), dtype=torch.float64)
            tokens = KERNELS.draft_propose(native_head, taps.reshape(n, -1).contiguous() if n else None, ids,
                                           a[0].clone(), k, hc.num_attention_heads, hc.num_key_value_heads,
                                           hc.head_dim, keys, values, start, cos, sin, None, floor=bound, logps=logps)
            runs.append((tokens.tolist(), logps[: tokens.shape[0]].tolist()))
    (all_tokens, all_logps), (cut_tokens, cut_logps) = runs
    assert len(all_tokens) == k and all_logps == pytest.approx(want, abs=1e-9)
    assert all(lp <= 0 for lp in all_logps)
    m = _kept_by_floor(all_logps, floor)
    assert cut_tokens == all_tokens[:m] and cut_logps == all_logps[:m]


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp"]), requests=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 4),
       st.floats(-10.0, 0.0) | st.just(-float("inf"))), min_size=1, max_size=5), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_in_a_batch_each_request_stops_at_its_own_floor(kind, requests, seed):
    """A batched propose with per-request floors keeps, per request, what its own one-request call
    with that floor keeps (a request that stops rides along in the later passes unseen), and says
    how many each drafted."""
    import numpy as np

    head = _head(kind, "bf16", seed)
    native_head, hc = head.native_draft_head(), head.config
    torch.manual_seed(seed + 3)
    plans = []
    for row, (n, k, _) in enumerate(requests):
        plans.append((row, 3, n, k, (2 * torch.randn(n, hc.num_taps, hc.target_hidden_size)).to(torch.bfloat16),
                      torch.randint(0, VOCAB, (n,)), None))
    kept_rows = (3 * torch.randn(8, hc.hidden_size)).to(torch.bfloat16)
    cos, sin = (t.contiguous() for t in head.rope(torch.arange(ROW_LEN)))
    heads = (hc.num_attention_heads, hc.num_key_value_heads, hc.head_dim)
    floors = np.array([f for _, _, f in requests], dtype=np.float64)
    with torch.inference_mode():
        kv_one, kv_batch = _kv_rows(head, 8, seed), _kv_rows(head, 8, seed)
        one, one_kept = [], kept_rows.clone()
        for (row, start, n, k, taps, ids, _), f in zip(plans, floors):
            keys, values = kv_one.row_span(0, row)
            one.append(KERNELS.draft_propose(native_head, taps.reshape(n, -1).contiguous() if n else None, ids,
                                             one_kept[row], k, *heads, keys, values, start, cos[start:].contiguous(),
                                             sin[start:].contiguous(), None,
                                             floor=None if f == -float("inf") else float(f)).tolist())
        plan = torch.tensor([[p[2] for p in plans], [p[0] for p in plans], [p[3] for p in plans],
                             [p[0] * ROW_LEN for p in plans], [p[1] for p in plans], [-1] * len(plans)])
        taps = torch.cat([p[4].flatten(1) for p in plans]).contiguous()
        drafted = np.zeros(len(plans), dtype=np.int64)
        batch_kept = kept_rows.clone()
        tokens = KERNELS.draft_propose_batch(native_head, taps if taps.shape[0] else None,
                                             torch.cat([p[5] for p in plans]), plan, batch_kept, *heads,
                                             kv_batch.keys[0], kv_batch.values[0], cos, sin, None, floors=floors,
                                             kept=drafted).tolist()
    assert drafted.tolist() == [len(o) for o in one]
    at = 0
    for o, (_, _, _, k, _, _, _) in zip(one, plans):
        assert tokens[at : at + len(o)] == o
        at += k
    assert torch.equal(batch_kept, one_kept)  # the ingests' kept outputs


@needs_kernels
@given(kind=st.sampled_from(["eagle3", "mtp"]), n=st.integers(0, 6), budget=st.integers(1, 8), topk=st.integers(1, 3),
       seed=st.integers(0, 2**16), floor=st.floats(-9.0, 0.0))
@settings(max_examples=30, deadline=None)
def test_a_trees_floor_leaves_out_the_nodes_scored_below_it(kind, n, budget, topk, seed, floor):
    """With ``min_score`` the native tree is the tree without it less the nodes scored below the
    floor (but the first): the passes it skips would only have grown such nodes."""
    from specpath_drafting.tree_search import num_passes

    head = _head(kind, "bf16", seed)
    native_head, hc = head.native_draft_head(), head.config
    passes, start = num_passes(budget, topk), 4
    torch.manual_seed(seed + 2)
    taps = (2 * torch.randn(n, hc.num_taps, hc.target_hidden_size)).to(torch.bfloat16)
    ids = torch.randint(0, VOCAB, (n,))
    a = (3 * torch.randn(1, hc.hidden_size)).to(torch.bfloat16)
    head.rotary.ensure_length(ROW_LEN)
    cos, sin = (t.to(torch.bfloat16).contiguous() for t in (head.rotary.cos_cached, head.rotary.sin_cached))
    got = []
    with torch.inference_mode():
        for bound in (-float("inf"), floor):
            kv = _kv(head, start, seed)
            keys, values = kv.row_span(0, 0)
            got.append(KERNELS.draft_tree(native_head, taps.reshape(n, -1).contiguous() if n else None, ids,
                                          a[0].clone(), budget, topk, passes, hc.num_attention_heads,
                                          hc.num_key_value_heads, hc.head_dim, keys, values, start, cos, sin,
                                          min_score=bound))
    (tokens, parents, scores), cut = got
    m = max(1, sum(s >= floor for s in scores))
    assert cut == (tokens[:m], parents[:m], scores[:m])
