"""Which drafts are worth their verification row, from the drafter's own estimates.

A drafter that estimates its drafts (``DraftProposal.confidences``: each chain draft's chance of
being accepted once those before it are; ``DraftTree.probs``: each tree node's chance that its
whole path is) says, every step, where its drafts stop being likely. The governor prices a row
(:attr:`~specpath_engine.draft_governor.DraftGovernor.floors`): a draft whose chance of
acceptance (the drafter's estimate through :class:`~specpath_engine.draft_calibration.Calibration`)
is below the row floor costs more than it is expected to yield, so the step does not verify it.
Greedy verification emits the same tokens whatever is verified, and a chain or tree cut by
estimates of the drafts before the cut (never by the token cut) keeps sampled verification exact
too; sampled drafts (with draft probabilities) are never cut.

The first draft (a tree's best node) is always kept: whether a request drafts at all is the
governor's choice, from the request's running acceptance; the estimates only cut what follows.

Example: chain estimates 0.9, 0.6, 0.3, 0.5 (paths 0.9, 0.54, 0.16, 0.08), taken as they are,
row floor 0.1: the first three are worth their rows, the fourth is not.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from specpath_engine.sample.tree_verification import depths

Chance = Callable[[float, int], float]
"""A drafter's path chance and the draft's depth -> the chance it is accepted."""


def worth_of_chain(confidences: Sequence[float], chance: Chance, floor: float) -> tuple[int, list[float]]:
    """(drafts worth verifying, their path chances by depth): the longest prefix whose drafts'
    chances of acceptance stay at or above ``floor`` (at least one draft). Estimates that are not
    numbers (a draft no estimate covers) keep every draft and estimate nothing."""
    path, paths = 1.0, []
    for j, c in enumerate(confidences):
        if not 0.0 <= c <= 1.0:  # NaN too
            return len(confidences), []
        path *= c
        if j and chance(path, j) < floor:
            break
        paths.append(path)
    return len(paths), paths


def worth_of_tree(probs: Sequence[float], parents: Sequence[int], chance: Chance,
                  floor: float) -> tuple[int, list[float]]:
    """:func:`worth_of_chain` for a tree's nodes (best first, so parents come first and a node's
    path chance is at most its parent's): the nodes to keep (a prefix, at least one) and their
    path chances."""
    kept: list[float] = []
    for j, (p, d) in enumerate(zip(probs, depths(parents))):
        if not 0.0 <= p <= 1.0:
            return len(probs), []
        if j and chance(p, d) < floor:
            break
        kept.append(p)
    return len(kept), kept


def accepted_nodes(tokens: Sequence[int], parents: Sequence[int], emitted: Sequence[int]) -> list[bool]:
    """Which nodes of a verified tree (``tokens``/``parents``) lie on the path the target took
    (``emitted``: its accepted drafts, in order)."""
    on = [False] * len(tokens)
    node = -1
    for t in emitted:
        node = next((c for c, p in enumerate(parents) if p == node and tokens[c] == t), None)
        if node is None:
            break
        on[node] = True
    return on
