"""Test helpers: an independent from-scratch computation of the drafts MTP should propose, and a
driver that runs a speculator through prefill chunks and verify steps with chosen acceptances.

The reference recomputes every module over every position it has seen, with plain masked
attention and no cache, so stale or missing entries in the speculators' incremental KV show up
as different drafts.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from typing import Any

import torch

from specpath_mtp.module import MTPModule


def module_forward(module: MTPModule, embeds: torch.Tensor, features: torch.Tensor,
                   positions: torch.Tensor) -> torch.Tensor:
    """One module over ``[T]`` entries; entry i attends to every entry at a position <= its own."""
    x, residual = module.layer_input(embeds, features.to(embeds.dtype))
    cos, sin = module.rope(positions)
    q, k, v = module.layer.qkv(x, cos, sin)
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill((positions[None, :] > positions[:, None])[None], float("-inf"))
    attn = torch.einsum("hts,shd->thd", scores.softmax(-1), v)
    return module.layer.finish(attn, residual)


@torch.inference_mode()
def reference_drafts(modules: Sequence[MTPModule], target: Any, token_ids: Sequence[int], k: int) -> list[int]:
    """Greedy drafts after ``token_ids`` (last one pending): draft j < n is module j at the last
    committed position P over positions 0..P (later tokens: the drafts); draft j >= n is module
    j % n at P + j // n, attending to its entries at 0..P and its earlier cycles."""
    n_mod = len(modules)
    last = len(token_ids) - 2
    dtype = modules[0].dtype
    layer = target.config.num_hidden_layers - 1
    ids = torch.tensor(list(token_ids), dtype=torch.int64)
    hidden = target.forward(ids[:last + 1], torch.arange(last + 1), hidden_layers=(layer,)).hidden_states[:, 0].to(dtype)
    tokens = list(token_ids)
    positions = torch.arange(last + 1)
    entries: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []  # per module: embeds, features, positions
    features, drafts = hidden, []
    for m in range(min(n_mod, k)):
        module = modules[m]
        embeds = module.embed(torch.tensor(tokens[m + 1:last + m + 2])).to(dtype)
        out = module_forward(module, embeds, features, positions)
        entries.append((embeds, features, positions))
        drafts.append(int(module.logits(out[-1]).argmax()))
        tokens.append(drafts[-1])
        features = out
    a = features[-1:]
    for j in range(n_mod, k):
        m, cycle = j % n_mod, j // n_mod
        module = modules[m]
        embeds, feats, pos = entries[m]
        embeds = torch.cat([embeds, module.embed(torch.tensor([drafts[-1]])).to(dtype)])
        feats = torch.cat([feats, a])
        pos = torch.cat([pos, torch.tensor([last + cycle])])
        entries[m] = (embeds, feats, pos)
        a = module_forward(module, embeds, feats, pos)[-1:]
        drafts.append(int(module.logits(a[0]).argmax()))
    return drafts


def drive(speculator: Any, target: Any, prompts: Sequence[Sequence[int]], budgets: Sequence[int], *,
          steps: int, chunk: int, vocab_size: int, seed: int = 0, check: Any = None) -> int:
    """Run ``speculator`` over requests (prefilled in chunks of ``chunk`` positions, budget 0),
    then ``steps`` verify steps: each accepts a random prefix of its drafts and appends a random
    bonus token. ``check(i, token_ids, drafts)`` sees every drafting request's proposal.
    Returns how many proposals were checked."""
    from specpath.speculator import DraftBatch, DraftRequest

    rng = random.Random(seed)
    layer = target.config.num_hidden_layers - 1
    tokens = [list(p) for p in prompts]
    delivered = [0] * len(prompts)
    dtype = next(target.parameters()).dtype
    checked = 0

    def call(views: list[list[int]], budget: list[int]) -> Any:
        reqs, states = [], []
        for i, ids in enumerate(views):
            committed = len(ids) - 1
            n = committed - delivered[i]
            if n:
                t = torch.tensor(ids[:committed])
                h = target.forward(t, torch.arange(committed), hidden_layers=(layer,)).hidden_states
                states.append(h[delivered[i]:committed].to(dtype))
            reqs.append(DraftRequest(req_id=f"r{i}", token_ids=list(ids), num_new_positions=n, max_draft_tokens=budget[i]))
            delivered[i] = committed
        hidden = torch.cat(states) if states else None
        return speculator.propose(DraftBatch(requests=tuple(reqs), hidden_states=hidden))

    with torch.inference_mode():
        longest = max(len(t) for t in tokens)
        for end in range(chunk + 1, longest, chunk):  # prefill chunks: nothing drafted
            views = [t[:min(end, len(t) - 1)] for t in tokens]
            proposal = call(views, [0] * len(tokens))
            assert sum(proposal.num_draft_tokens) == 0
        for _ in range(steps):
            proposal = call(tokens, list(budgets))
            flat = proposal.token_ids.tolist()
            start = 0
            for i, count in enumerate(proposal.num_draft_tokens):
                assert count == budgets[i], (count, budgets[i])
                mine = flat[start:start + count]
                start += count
                if count and check is not None:
                    check(i, list(tokens[i]), mine)
                    checked += 1
                accepted = rng.randint(0, count)
                tokens[i].extend(mine[:accepted] + [rng.randrange(vocab_size)])
    return checked
