"""Drafts from the suffix tries of :mod:`specpath_suffix.forest`, and the batched engine step.

Drafting only reads the trees: from a request's match nodes (one per match length) it walks
the most frequent children (path mode, :func:`speculate_path`) or grows a best-first token
tree (:func:`speculate_tree`); :func:`step` appends a batch's new tokens to their trees,
refreshes their global-tree matches, and drafts, all in one compiled call.
"""

from __future__ import annotations

import numba
import numpy as np

from specpath_suffix.forest import (
    BEST,
    CHILD,
    COUNT,
    META_EPOCH,
    NEXT,
    TOKEN,
    advance_matches,
    extend,
    match_nodes,
)
from specpath_suffix.prefetch import prefetch


@numba.njit(inline="always", cache=True)
def _matched(matches, limit):
    """How many match lengths ``1..limit`` have a node (they stop at the first that has none)."""
    m = 0
    while m < limit and matches[m + 1] != -1:
        m += 1
    return m


@numba.njit(inline="always", cache=True)
def _wins(score, n, best_score, best_n):
    """Whether a later (longer) match's draft replaces the best so far: a score at least as
    high, and an empty draft never replaces a draft."""
    return score >= best_score and (n > 0 or best_n == 0)


WALK_NODE, WALK_LEN, WALK_BUDGET, WALK_ORDER, WALK_ROWS = 0, 1, 2, 3, 4
"""Rows of :func:`speculate_path`'s integer workspace: per match length its walk's node,
length and budget; ``WALK_ORDER`` lists the match lengths still walking."""


@numba.njit(cache=True, nogil=True)
def speculate_path(nodes, matches, limit, max_tokens, factor, min_prob, out, paths, walk, walk_prob):
    """Path-mode draft from the match nodes ``matches[1..limit]``: for each match length m,
    follow the most frequent child for at most ``min(max_tokens, floor(factor * m))`` tokens
    while the running probability stays >= ``min_prob``; keep the best score (sum of the
    probabilities; ties: the longer match). Returns ``(num_tokens, score, match_length)``;
    the draft is ``out[:num_tokens]``.

    The walks of all match lengths advance together, one token each per round: they are
    independent, so their cache misses overlap. Workspace (any contents): ``paths``
    ``[limit + 1, max_tokens]`` int32 (each walk's tokens), ``walk`` ``[WALK_ROWS, limit + 1]`` int32
    (the ``WALK_*`` rows) and ``walk_prob`` ``[2, limit + 1]`` float64
    (running probability, score)."""
    found = _matched(matches, limit)
    live = 0
    for m in range(1, found + 1):
        walk[WALK_NODE, m] = matches[m]
        walk[WALK_LEN, m] = 0
        walk[WALK_BUDGET, m] = min(max_tokens, int(factor * m))
        walk_prob[0, m] = 1.0
        walk_prob[1, m] = 0.0
        if walk[WALK_BUDGET, m] > 0:
            walk[WALK_ORDER, live] = m
            live += 1
    while live > 0:
        kept = 0
        for i in range(live):
            m = walk[WALK_ORDER, i]
            node = walk[WALK_NODE, m]
            child = nodes[node, BEST]
            if child == -1:
                continue
            prob = walk_prob[0, m] * (nodes[child, COUNT] / nodes[node, COUNT])
            if prob < min_prob:
                continue
            n = walk[WALK_LEN, m]
            paths[m, n] = nodes[child, TOKEN]
            walk_prob[0, m] = prob
            walk_prob[1, m] += prob
            walk[WALK_NODE, m] = child
            walk[WALK_LEN, m] = n + 1
            if n + 1 < walk[WALK_BUDGET, m]:
                prefetch(nodes, nodes[child, BEST])
                walk[WALK_ORDER, kept] = m
                kept += 1
        live = kept
    best_n = 0
    best_score = 0.0
    best_m = 0
    for m in range(1, found + 1):
        n = walk[WALK_LEN, m]
        if _wins(walk_prob[1, m], n, best_score, best_n):
            best_score = walk_prob[1, m]
            best_m = m
            best_n = n
    for i in range(best_n):
        out[i] = paths[best_m, i]
    return best_n, best_score, best_m


@numba.njit(cache=True, nogil=True)
def speculate_tree(nodes, matches, limit, max_tokens, factor, min_prob,
                   out_tokens, out_parents, out_probs):
    """Tree-mode draft: for each match length, grow a tree best-first (always the most
    probable frontier node next; a child's probability is its parent's times its count
    ratio), at most ``min(max_tokens, floor(factor * m))`` nodes, none below ``min_prob``;
    keep the tree with the best score. Nodes come out in the order they were taken, so a
    parent precedes its children; the frontier keeps at most 64 candidates per node of budget
    (with ``min_prob`` 0.1 a node has at most 10 children worth keeping). Returns
    ``(num_nodes, score)``."""
    cap = max(max_tokens, 1) * 64
    f_node = np.empty(cap, np.int32)
    f_parent = np.empty(cap, np.int32)
    f_prob = np.empty(cap, np.float64)
    t_tokens = np.empty(max(max_tokens, 1), np.int32)
    t_parents = np.empty(max(max_tokens, 1), np.int32)
    t_probs = np.empty(max(max_tokens, 1), np.float64)
    best_n = 0
    best_score = 0.0
    for m in range(1, _matched(matches, limit) + 1):
        start = matches[m]
        budget = min(max_tokens, int(factor * m))
        size = 0
        child = nodes[start, CHILD]
        while child != -1:
            p = nodes[child, COUNT] / nodes[start, COUNT]
            if p >= min_prob and size < cap:
                f_node[size] = child
                f_parent[size] = -1
                f_prob[size] = p
                size += 1
            child = nodes[child, NEXT]
        n = 0
        score = 0.0
        while n < budget and size > 0:
            pick = 0
            for i in range(1, size):  # most probable; ties: the smaller token
                if f_prob[i] > f_prob[pick] or (
                    f_prob[i] == f_prob[pick] and nodes[f_node[i], TOKEN] < nodes[f_node[pick], TOKEN]
                ):
                    pick = i
            node = f_node[pick]
            prob = f_prob[pick]
            t_tokens[n] = nodes[node, TOKEN]
            t_parents[n] = f_parent[pick]
            t_probs[n] = prob
            score += prob
            size -= 1
            f_node[pick] = f_node[size]
            f_parent[pick] = f_parent[size]
            f_prob[pick] = f_prob[size]
            child = nodes[node, CHILD]
            while child != -1:
                p = prob * nodes[child, COUNT] / nodes[node, COUNT]
                if p >= min_prob and size < cap:
                    f_node[size] = child
                    f_parent[size] = n
                    f_prob[size] = p
                    size += 1
                child = nodes[child, NEXT]
            n += 1
        if _wins(score, n, best_score, best_n):
            best_score = score
            best_n = n
            for i in range(n):
                out_tokens[i] = t_tokens[i]
                out_parents[i] = t_parents[i]
                out_probs[i] = t_probs[i]
    return best_n, best_score


@numba.njit(cache=True, nogil=True)
def step(nodes, free, meta, table, depth,
         roots, active, nact, gmatch, gepoch, history,
         slots, old_lengths, new_lengths, budgets,
         global_root, factor, min_prob, out, counts):
    """One engine step for a batch: append each request's new tokens to its tree, bring its
    match nodes in the global tree up to date (recomputed when the global tree changed),
    and draft path-mode from whichever tree scores higher. ``global_root`` -1: no global
    tree. Drafts go to ``out[b, :counts[b]]``."""
    width = max(out.shape[1], 1)
    gdraft = np.empty(width, np.int32)
    paths = np.empty((depth + 1, width), np.int32)
    walk = np.empty((WALK_ROWS, depth + 1), np.int32)
    walk_prob = np.empty((2, depth + 1), np.float64)
    for b in range(slots.shape[0]):
        s = slots[b]
        old = old_lengths[b]
        new = new_lengths[b]
        row = history[s]
        nact[s] = extend(nodes, free, meta, table, roots[s], active[s], nact[s], row, old, new, depth)
        if global_root != -1:
            if gepoch[s] != meta[META_EPOCH]:
                match_nodes(nodes, table, global_root, row, new, depth, gmatch[s])
                gepoch[s] = meta[META_EPOCH]
            else:
                advance_matches(nodes, table, gmatch[s], row, old, new, depth)
        counts[b] = 0
        k = budgets[b]
        if k <= 0:
            continue
        # Suffixes seen once (the longest ones, count 1) occur only here, at the end: no
        # continuation to draft, so their walks are not started.
        limit = nact[s]
        while limit > 0 and nodes[active[s, limit], COUNT] == 1:
            limit -= 1
        n, score, _ = speculate_path(nodes, active[s], limit, k, factor, min_prob, out[b], paths, walk, walk_prob)
        if global_root != -1:
            gn, gscore, _ = speculate_path(nodes, gmatch[s], min(new, depth), k, factor, min_prob, gdraft,
                                           paths, walk, walk_prob)
            if gscore > score:
                n = gn
                for i in range(gn):
                    out[b, i] = gdraft[i]
        counts[b] = n
