"""Count-annotated suffix tries in flat arrays, compiled with numba (``cache=True``).

Why this shape: an engine step appends a few tokens to each of dozens of requests and asks
each for a draft. Per request that is O(depth) node updates per token and O(depth^2) cheap
pointer walks per draft, which only pays when it runs as one compiled call over the whole
batch, with no Python object per node. Every tree (one per live request, plus the global
tree over finished responses) lives in one :class:`Forest`: a node table, one open-addressing
hash ``(parent, token) -> child`` and a free list, so trees are created and freed without
allocation.

A tree of depth ``D`` over a set of sequences holds every substring ``s`` with ``|s| <= D``;
``count[s]`` is how many positions of the sequences start an occurrence of ``s`` (the
suffix from that position, cut to ``D`` tokens, passes through ``s``). So ``count`` of a
child over ``count`` of its parent estimates how often the child's token followed the
parent's string. Each node also keeps its most frequent child (ties: the smaller token), so
a path-mode draft follows one pointer per token.

Node columns (int32): ``COUNT``, ``TOKEN``, ``PARENT`` (-1 for a root), ``CHILD`` (head of
the child list), ``NEXT``/``PREV`` (siblings), ``BEST`` (most frequent child; not kept for
roots: drafts never start at a root). ``meta`` (int64): next never-used node, free-list
size, hash entries in use (the hash is one ``[capacity, 2]`` int64 table of key, child: one
cache line per probe), and the global tree's epoch (bumped whenever it changes, so a
request's cached match nodes in it are recomputed).

This module builds and updates the trees; :mod:`specpath_suffix.drafts` drafts from them.
"""

from __future__ import annotations

import numba
import numpy as np

from specpath_suffix.prefetch import prefetch

COUNT, TOKEN, PARENT, CHILD, NEXT, PREV, BEST, FANOUT = 0, 1, 2, 3, 4, 5, 6, 7
NODE_FIELDS = 8
META_NEXT, META_FREE, META_HASH_USED, META_EPOCH = 0, 1, 2, 3
EMPTY = -1
HASHED_FANOUT = 2
"""Children of a node with more than this many children are also indexed in the hash; fewer
are found by walking the child list, whose first row is the one an update touches anyway
(most nodes of a deep trie have one child, so most appends never touch the hash)."""

_GOLDEN = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as a signed 64-bit value


@numba.njit(inline="always", cache=True)
def _key(parent, token):
    return (np.int64(parent) << 32) | np.int64(token)


@numba.njit(inline="always", cache=True)
def _slot(key, mask):
    h = key * _GOLDEN
    h ^= h >> 29
    return h & mask


@numba.njit(cache=True, nogil=True)
def _hash_lookup(nodes, table, parent, token):
    mask = table.shape[0] - 1
    key = _key(parent, token)
    i = _slot(key, mask)
    while table[i, 0] != EMPTY:
        if table[i, 0] == key:
            return table[i, 1]
        i = (i + 1) & mask
    return -1


@numba.njit(cache=True, nogil=True)
def lookup(nodes, table, parent, token):
    """The child of ``parent`` for ``token``, or -1."""
    if nodes[parent, FANOUT] > HASHED_FANOUT:
        return _hash_lookup(nodes, table, parent, token)
    child = nodes[parent, CHILD]
    while child != -1:
        if nodes[child, TOKEN] == token:
            return child
        child = nodes[child, NEXT]
    return -1


@numba.njit(inline="always", cache=True)
def _prefetch_lookup(nodes, table, parent, token):
    """Start loading what :func:`lookup` of ``(parent, token)`` reads first."""
    if nodes[parent, FANOUT] > HASHED_FANOUT:
        prefetch(table, _slot(_key(parent, token), table.shape[0] - 1))
    else:
        prefetch(nodes, nodes[parent, CHILD])


@numba.njit(cache=True, nogil=True)
def _hash_insert(table, meta, key, value):
    mask = table.shape[0] - 1
    i = _slot(key, mask)
    while table[i, 0] != EMPTY:
        i = (i + 1) & mask
    table[i, 0] = key
    table[i, 1] = value
    meta[META_HASH_USED] += 1


@numba.njit(cache=True, nogil=True)
def _hash_delete(table, meta, key):
    """Linear-probing delete by backward shift (no tombstones, so lookups stay short)."""
    mask = table.shape[0] - 1
    i = _slot(key, mask)
    while table[i, 0] != key:
        if table[i, 0] == EMPTY:
            return
        i = (i + 1) & mask
    j = i
    while True:
        j = (j + 1) & mask
        if table[j, 0] == EMPTY:
            break
        home = _slot(table[j, 0], mask)
        # Move entry j into the hole at i unless its home lies cyclically in (i, j].
        if (i <= j and (home <= i or home > j)) or (i > j and (home <= i and home > j)):
            table[i, 0] = table[j, 0]
            table[i, 1] = table[j, 1]
            i = j
    table[i, 0] = EMPTY
    meta[META_HASH_USED] -= 1


@numba.njit(cache=True, nogil=True)
def rehash(table, new_table):
    """Copy every entry of one table into an empty, larger one."""
    mask = new_table.shape[0] - 1
    for i in range(table.shape[0]):
        key = table[i, 0]
        if key != EMPTY:
            j = _slot(key, mask)
            while new_table[j, 0] != EMPTY:
                j = (j + 1) & mask
            new_table[j, 0] = key
            new_table[j, 1] = table[i, 1]


@numba.njit(cache=True, nogil=True)
def _take_node(nodes, free, meta):
    if meta[META_FREE] > 0:
        meta[META_FREE] -= 1
        return free[meta[META_FREE]]
    node = meta[META_NEXT]
    meta[META_NEXT] += 1
    return node


@numba.njit(cache=True, nogil=True)
def new_root(nodes, free, meta):
    """A fresh empty tree; returns its root."""
    node = _take_node(nodes, free, meta)
    nodes[node, COUNT] = 0
    nodes[node, TOKEN] = -1
    nodes[node, PARENT] = -1
    nodes[node, CHILD] = -1
    nodes[node, NEXT] = -1
    nodes[node, PREV] = -1
    nodes[node, BEST] = -1
    nodes[node, FANOUT] = 0
    return node


@numba.njit(cache=True, nogil=True)
def _new_child(nodes, free, meta, table, parent, token):
    node = _take_node(nodes, free, meta)
    head = nodes[parent, CHILD]
    nodes[node, COUNT] = 0
    nodes[node, TOKEN] = token
    nodes[node, PARENT] = parent
    nodes[node, CHILD] = -1
    nodes[node, NEXT] = head
    nodes[node, PREV] = -1
    nodes[node, BEST] = -1
    nodes[node, FANOUT] = 0
    if head != -1:
        nodes[head, PREV] = node
    nodes[parent, CHILD] = node
    nodes[parent, FANOUT] += 1
    fanout = nodes[parent, FANOUT]
    if fanout == HASHED_FANOUT + 1:  # index every child from now on
        child = node
        while child != -1:
            _hash_insert(table, meta, _key(parent, nodes[child, TOKEN]), child)
            child = nodes[child, NEXT]
    elif fanout > HASHED_FANOUT + 1:
        _hash_insert(table, meta, _key(parent, token), node)
    return node


@numba.njit(inline="always", cache=True)
def _new_leaf(nodes, free, meta, parent, token):
    """The first child of a childless non-root ``parent``, counted once: what
    :func:`_new_child` then :func:`_increment` do, without their checks."""
    node = _take_node(nodes, free, meta)
    nodes[node, COUNT] = 1
    nodes[node, TOKEN] = token
    nodes[node, PARENT] = parent
    nodes[node, CHILD] = -1
    nodes[node, NEXT] = -1
    nodes[node, PREV] = -1
    nodes[node, BEST] = -1
    nodes[node, FANOUT] = 0
    nodes[parent, CHILD] = node
    nodes[parent, FANOUT] = 1
    nodes[parent, BEST] = node
    return node


@numba.njit(inline="always", cache=True)
def _better(nodes, a, b):
    ca = nodes[a, COUNT]
    cb = nodes[b, COUNT]
    return ca > cb or (ca == cb and nodes[a, TOKEN] < nodes[b, TOKEN])


@numba.njit(cache=True, nogil=True)
def _increment(nodes, node):
    nodes[node, COUNT] += 1
    parent = nodes[node, PARENT]
    if nodes[parent, PARENT] == -1:  # a root's best child is never read
        return
    best = nodes[parent, BEST]
    if best != node and (best == -1 or _better(nodes, node, best)):
        nodes[parent, BEST] = node


@numba.njit(cache=True, nogil=True)
def _rescan_best(nodes, parent):
    best = -1
    child = nodes[parent, CHILD]
    while child != -1:
        if best == -1 or _better(nodes, child, best):
            best = child
        child = nodes[child, NEXT]
    nodes[parent, BEST] = best


@numba.njit(cache=True, nogil=True)
def _free_node(nodes, free, meta, table, node):
    parent = nodes[node, PARENT]
    prev = nodes[node, PREV]
    nxt = nodes[node, NEXT]
    if prev != -1:
        nodes[prev, NEXT] = nxt
    else:
        nodes[parent, CHILD] = nxt
    if nxt != -1:
        nodes[nxt, PREV] = prev
    fanout = nodes[parent, FANOUT]
    if fanout > HASHED_FANOUT:
        _hash_delete(table, meta, _key(parent, nodes[node, TOKEN]))
        if fanout == HASHED_FANOUT + 1:  # back to the list alone
            child = nodes[parent, CHILD]
            while child != -1:
                _hash_delete(table, meta, _key(parent, nodes[child, TOKEN]))
                child = nodes[child, NEXT]
    nodes[parent, FANOUT] = fanout - 1
    free[meta[META_FREE]] = node
    meta[META_FREE] += 1


@numba.njit(cache=True, nogil=True)
def _decrement(nodes, free, meta, table, node):
    """One occurrence fewer through ``node``; frees it at zero (its children are gone by
    then: a child never counts more than its parent)."""
    nodes[node, COUNT] -= 1
    parent = nodes[node, PARENT]
    if nodes[node, COUNT] == 0:
        _free_node(nodes, free, meta, table, node)
    if nodes[parent, PARENT] != -1 and nodes[parent, BEST] == node:
        _rescan_best(nodes, parent)


@numba.njit(cache=True, nogil=True)
def extend(nodes, free, meta, table, root, active, nact, tokens, start, end, depth):
    """Append ``tokens[start:end]`` to the sequence whose open suffixes end at
    ``active[1..nact]`` (``active[j]``: the node of its last ``j`` tokens; ``active[0]`` is
    the root). Each token extends at most ``depth`` suffixes by one node: O(depth).
    Returns the new ``nact``."""
    active[0] = root
    for pos in range(start, end):
        token = tokens[pos]
        top = min(nact + 1, depth)
        # A suffix seen once (count 1: only here, at the end) has no children yet, nor has any
        # longer one: from the shortest such level up, every child is a new chain node.
        fresh = top + 1
        while fresh > 2 and nodes[active[fresh - 2], COUNT] == 1:
            fresh -= 1
        for j in range(top, fresh - 1, -1):
            active[j] = _new_leaf(nodes, free, meta, active[j - 1], token)
        # The other levels are independent (distinct parents) and their nodes older, so far
        # apart in memory: start every level's first load before the lookups wait on them.
        for j in range(fresh - 1, 0, -1):
            _prefetch_lookup(nodes, table, active[j - 1], token)
        for j in range(fresh - 1, 0, -1):
            parent = active[j - 1]
            child = lookup(nodes, table, parent, token)
            if child == -1:
                child = _new_child(nodes, free, meta, table, parent, token)
            _increment(nodes, child)
            active[j] = child
        nodes[root, COUNT] += 1
        nact = top
    return nact


@numba.njit(cache=True, nogil=True)
def truncate(nodes, free, meta, table, root, active, nact, tokens, length, new_length, depth):
    """Roll the sequence held in ``tokens[:length]`` back to ``new_length`` tokens, undoing
    :func:`extend` one token at a time (O(depth) each). Returns the new ``nact``."""
    for n in range(length, new_length, -1):  # pop tokens[n - 1]
        for j in range(nact, 0, -1):  # deepest first: a node's children go before it
            _decrement(nodes, free, meta, table, active[j])
        nodes[root, COUNT] -= 1
        # Each open suffix of tokens[:n-1] is an old one without its last token. Freed
        # nodes keep their PARENT until reused, and nothing is allocated here.
        for j in range(1, nact):
            active[j] = nodes[active[j + 1], PARENT]
        new_nact = min(n - 1, depth)
        if new_nact == nact:  # the longest open suffix starts before every old one
            node = root
            for i in range(n - 1 - depth, n - 1):
                node = lookup(nodes, table, node, tokens[i])
            active[depth] = node
        for j in range(new_nact + 1, depth + 1):
            active[j] = -1
        nact = new_nact
    active[0] = root
    return nact


@numba.njit(cache=True, nogil=True)
def _push_children(nodes, stack, top, node):
    """Push ``node``'s children onto ``stack`` (grown as needed); returns ``(stack, top)``."""
    child = nodes[node, CHILD]
    while child != -1:
        if top == stack.shape[0]:
            stack = np.concatenate((stack, np.empty_like(stack)))
        stack[top] = child
        top += 1
        child = nodes[child, NEXT]
    return stack, top


@numba.njit(cache=True, nogil=True)
def free_tree(nodes, free, meta, table, root):
    """Free every node of a tree, root included."""
    stack, top = _push_children(nodes, np.empty(64, np.int32), 0, root)
    while top > 0:
        top -= 1
        node = stack[top]
        stack, top = _push_children(nodes, stack, top, node)
        if nodes[nodes[node, PARENT], FANOUT] > HASHED_FANOUT:
            _hash_delete(table, meta, _key(nodes[node, PARENT], nodes[node, TOKEN]))
        free[meta[META_FREE]] = node
        meta[META_FREE] += 1
    free[meta[META_FREE]] = root
    meta[META_FREE] += 1


@numba.njit(cache=True, nogil=True)
def insert_sequence(nodes, free, meta, table, root, tokens, depth):
    """Add a whole sequence's suffixes to a tree (the global tree)."""
    active = np.full(depth + 1, -1, np.int32)
    extend(nodes, free, meta, table, root, active, 0, tokens, 0, tokens.shape[0], depth)
    meta[META_EPOCH] += 1


@numba.njit(cache=True, nogil=True)
def remove_sequence(nodes, free, meta, table, root, tokens, depth):
    """Take back a sequence :func:`insert_sequence` added (FIFO eviction)."""
    path = np.empty(depth, np.int32)
    n = tokens.shape[0]
    for i in range(n):
        stop = min(i + depth, n)
        node = root
        for p in range(i, stop):
            node = lookup(nodes, table, node, tokens[p])
            path[p - i] = node
        for p in range(stop - i - 1, -1, -1):
            _decrement(nodes, free, meta, table, path[p])
    nodes[root, COUNT] -= n
    meta[META_EPOCH] += 1


@numba.njit(cache=True, nogil=True)
def match_nodes(nodes, table, root, tokens, length, depth, out):
    """``out[m]`` = the node of ``tokens[length-m:length]`` in the tree at ``root`` for
    m = 1..min(length, depth), -1 from the first length that does not occur (a longer
    pattern cannot occur when its suffix does not)."""
    out[0] = root
    limit = min(length, depth)
    missing = False
    for m in range(1, depth + 1):
        if missing or m > limit:
            out[m] = -1
            continue
        node = root
        for i in range(length - m, length):
            node = lookup(nodes, table, node, tokens[i])
            if node == -1:
                break
        out[m] = node
        missing = node == -1


@numba.njit(cache=True, nogil=True)
def advance_matches(nodes, table, matches, tokens, start, end, depth):
    """Move a request's match nodes in a tree it does not write to (the global tree) over
    ``tokens[start:end]``: O(depth) lookups per token."""
    for pos in range(start, end):
        token = tokens[pos]
        top = min(pos + 1, depth)
        for j in range(depth, top, -1):
            matches[j] = -1
        for j in range(top, 0, -1):
            if matches[j - 1] != -1:
                _prefetch_lookup(nodes, table, matches[j - 1], token)
        for j in range(top, 0, -1):
            parent = matches[j - 1]
            matches[j] = lookup(nodes, table, parent, token) if parent != -1 else -1
            prefetch(nodes, matches[j])  # the parent of the next token's lookup


@numba.njit(cache=True, nogil=True)
def write_rows(history, rows, old_lengths, new_lengths, tokens):
    """Copy a batch's new tokens, concatenated in ``tokens``, into ``history[rows[b],
    old_lengths[b]:new_lengths[b]]``."""
    at = 0
    for b in range(rows.shape[0]):
        for pos in range(old_lengths[b], new_lengths[b]):
            history[rows[b], pos] = tokens[at]
            at += 1
