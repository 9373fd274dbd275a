"""Token-tree verification: the attention mask of a flattened tree and lossless acceptance.

A draft tree is flattened in node order (every parent before its children, as
``specpath.speculator.DraftTree`` promises); ``parents[j]`` is the index of node ``j``'s parent,
-1 for the children of the request's last token (the *root*). The target runs once over the
root and the nodes; node ``j`` sees the prefix, the root and its own ancestors only, at position
``prefix + depth``, so its logits are exactly those a chain ending in ``j`` would get.

Acceptance walks from the root. Greedy: follow the child whose token is the target's argmax;
the argmax at the first node without such a child is the corrected (or, at a leaf, bonus) token,
so the output equals plain decoding. Sampling: multi-draft recursive rejection sampling over the
siblings (SpecInfer), with one-hot draft distributions since tree drafts are deterministic
candidates: child ``x_i`` is accepted with probability ``r(x_i) / sum(r)``, where ``r`` is the
target's distribution with the tokens of the rejected earlier siblings removed; when every child
is rejected the token is drawn from what is left. The emitted token at every node therefore
follows the target's distribution exactly (lossless).

Randomness: one uniform per node (its acceptance coin) and one for the final draw, drawn in that
order from the request's generator. A seeded request instead walks its tree on its race winners
(:mod:`specpath_engine.sample.race`): at each depth the target's token is
``argmax processed + G`` with the noise of that depth's position, the walk follows the child
holding it and stops where none does, emitting it. Its tokens are then plain decoding's whatever
the tree, and a node's children are accepted with probability ``sum(p(child))`` (SpecInfer's with
one-hot drafts).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from specpath_engine.sample import reference
from specpath_engine.sample.processing import GREEDY_EPS, target_probs
from specpath_engine.sample.race import race_tokens


def check_tree(parents: Sequence[int], tokens: Sequence[int], vocab_size: int, who: str = "tree") -> None:
    """One-line ``ValueError`` unless ``parents``/``tokens`` form a flattened tree over the vocabulary."""
    if len(parents) != len(tokens):
        raise ValueError(f"{who}: {len(tokens)} tokens but {len(parents)} parents")
    for j, p in enumerate(parents):
        if not -1 <= p < j:
            raise ValueError(f"{who}: node {j} has parent {p}; a parent must come before its child (or be -1)")
    if tokens and (min(tokens) < 0 or max(tokens) >= vocab_size):
        raise ValueError(f"{who}: token ids outside [0, {vocab_size})")


def depths(parents: Sequence[int]) -> list[int]:
    """Per node, its depth below the root (0 for the root's children)."""
    out: list[int] = []
    for p in parents:
        out.append(0 if p < 0 else out[p] + 1)
    return out


def ancestor_mask(parents: Sequence[int], device: str | torch.device = "cpu") -> torch.Tensor:
    """bool ``[N, N]``: ``mask[j, a]`` is True when node ``a`` is node ``j`` or one of its ancestors
    (the nodes ``j`` may attend to among the tree's own)."""
    n = len(parents)
    mask = torch.eye(n, dtype=torch.bool)
    for j, p in enumerate(parents):
        if p >= 0:
            mask[j] |= mask[p]  # parents come first: row p is complete
    return mask.to(device)


def children(parents: Sequence[int]) -> list[list[int]]:
    """``children(parents)[j + 1]``: the children of node ``j`` (index 0: the root's), in node order."""
    out: list[list[int]] = [[] for _ in range(len(parents) + 1)]
    for j, p in enumerate(parents):
        out[p + 1].append(j)
    return out


def accept_greedy(tokens: Sequence[int], parents: Sequence[int], argmax: Sequence[int]) -> tuple[list[int], int]:
    """(accepted nodes root to leaf, the token after them) given the target's argmax at the root
    (``argmax[0]``) and at every node (``argmax[1 + j]``)."""
    kids = children(parents)
    path: list[int] = []
    row = 0
    while True:
        best = argmax[row]
        nxt = next((c for c in kids[row] if tokens[c] == best), None)
        if nxt is None:
            return path, int(best)
        path.append(nxt)
        row = nxt + 1


def accept_sampled(tokens: Sequence[int], parents: Sequence[int], probs: torch.Tensor,
                   uniforms: torch.Tensor) -> tuple[list[int], int]:
    """Recursive rejection sampling over siblings. ``probs`` ``[N + 1, V]``: the target's
    processed distribution at the root (row 0) and after every node (row ``1 + j``);
    ``uniforms`` ``[N + 1]``: node ``j``'s coin at ``j``, the final draw's at ``N``."""
    kids = children(parents)
    coins = uniforms.tolist()
    path: list[int] = []
    row = 0
    while True:
        residual = probs[row].double().clone()
        nxt = None
        for c in kids[row]:
            x = tokens[c]
            mass = float(residual.sum())
            if mass > 0 and coins[c] * mass < float(residual[x]):
                nxt = c
                break
            residual[x] = 0.0
        if nxt is None:
            if float(residual.sum()) <= 0:  # every token was a rejected child: rounding only
                residual = probs[row].double()
            token = reference.recover(residual[None], None, torch.zeros(1, dtype=torch.long), torch.zeros(1, dtype=torch.long),
                                      torch.ones(1, dtype=torch.float64), uniforms[-1:], False)
            return path, int(token[0])
        path.append(nxt)
        row = nxt + 1


def verify_trees(
    trees: Sequence[tuple[Sequence[int], Sequence[int]]],
    logits: torch.Tensor,
    temperature: Sequence[float],
    top_k: Sequence[int] | None = None,
    top_p: Sequence[float] | None = None,
    generators: Sequence[torch.Generator | None] | None = None,
    gumbel: Sequence[torch.Tensor | None] | None = None,
) -> list[tuple[list[int], int]]:
    """Verify a batch of trees: per request (accepted nodes, next token).

    ``trees``: per request ``(tokens, parents)``; ``logits``: ``[sum(N_r + 1), V]``, each request's
    root row then its node rows, requests in order. ``temperature`` 0 = greedy; sampled requests
    draw their uniforms from ``generators[r]`` (torch's default generator when None), except those
    with ``gumbel[r]``: a seeded request's noise by depth (``[D, V]``, row ``d`` at the position of
    the tree's depth-``d`` tokens, ``D`` at least the tree's depth + 1), walked on race winners.
    """
    sizes = [len(t) + 1 for t, _ in trees]
    starts = [0]
    for s in sizes:
        starts.append(starts[-1] + s)
    greedy = [t < GREEDY_EPS for t in temperature]
    out: list[tuple[list[int], int] | None] = [None] * len(trees)
    if any(greedy):
        argmax = logits.argmax(-1).tolist()
        for r, (tokens, parents) in enumerate(trees):
            if greedy[r]:
                out[r] = accept_greedy(tokens, parents, argmax[starts[r] : starts[r + 1]])
    coupled = [r for r in range(len(trees)) if not greedy[r] and gumbel is not None and gumbel[r] is not None]
    if coupled:
        _race_walks(trees, logits, starts, temperature, top_k, top_p, gumbel, coupled, out)
    random = [r for r in range(len(trees)) if not greedy[r] and r not in coupled]
    if random:
        rows = torch.cat([torch.arange(starts[r], starts[r + 1]) for r in random]).to(logits.device)
        per_row = torch.tensor(sizes, dtype=torch.long)[random]

        def expand(values, dtype):
            return torch.tensor([values[r] for r in random], dtype=dtype).repeat_interleave(per_row).to(logits.device)

        probs = target_probs(
            logits.index_select(0, rows), expand(temperature, torch.float32),
            None if top_k is None else expand(top_k, torch.long), None if top_p is None else expand(top_p, torch.float32),
        )
        at = 0
        for r in random:
            g = None if generators is None else generators[r]
            n = sizes[r]
            uniforms = torch.rand(n, generator=g, device=g.device if g is not None else "cpu").cpu()
            tokens, parents = trees[r]
            out[r] = accept_sampled(tokens, parents, probs[at : at + n], uniforms)
            at += n
    return out  # type: ignore[return-value]


def _race_walks(trees, logits, starts, temperature, top_k, top_p, gumbel, coupled, out) -> None:
    """The seeded requests ``coupled``: their race winner at the root and after every node (each
    row with the noise of its token's depth), walked like a greedy tree."""
    rows, noise, temps, ks, ps = [], [], [], [], []
    for r in coupled:
        tokens, parents = trees[r]
        depth = torch.tensor([0] + [d + 1 for d in depths(parents)], dtype=torch.long)
        rows.append(torch.arange(starts[r], starts[r + 1]))
        noise.append(gumbel[r].index_select(0, depth.to(gumbel[r].device)))
        n = len(tokens) + 1
        temps += [temperature[r]] * n
        ks += [0 if top_k is None else top_k[r]] * n
        ps += [1.0 if top_p is None else top_p[r]] * n
    dev = logits.device
    winners = race_tokens(logits.index_select(0, torch.cat(rows).to(dev)), torch.tensor(temps, device=dev),
                          None if top_k is None else torch.tensor(ks, device=dev),
                          None if top_p is None else torch.tensor(ps, device=dev), torch.cat(noise).to(dev)).tolist()
    at = 0
    for r in coupled:
        tokens, parents = trees[r]
        n = len(tokens) + 1
        out[r] = accept_greedy(tokens, parents, winners[at : at + n])
        at += n
