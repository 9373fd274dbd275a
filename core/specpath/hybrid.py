"""A drafter with a model-free method beside it (``speculative_config.model_free_drafter``).

Model-free drafts (n-gram, suffix) cost next to nothing and, where the output repeats its
context, are accepted far more often than a small drafter's; elsewhere they are short or absent.
So each step the model-free speculator drafts first, and a request whose model-free draft is at
least ``min_tokens`` long is verified with it; every other request gets the drafter's. The
drafter still sees every request each step, with a budget of 0 where it was not asked: it reads
the newly committed positions (its KV and hidden-state history stay whole) and drafts nothing.

Both parts see the same batch, the same verification results and the same removals; the
composite holds no state of its own. It is built by :func:`specpath.factory.create_speculator`
from the resolved config, so engines and bridges get it without knowing it is two drafters.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftTree


class HybridSpeculator(BaseSpeculator):
    """``drafter`` everywhere but where ``model_free`` drafts at least ``min_tokens`` tokens."""

    def __init__(self, drafter: BaseSpeculator, model_free: BaseSpeculator, min_tokens: int) -> None:
        super().__init__(drafter.spec, drafter.context)
        self.drafter = drafter
        self.model_free = model_free
        self.min_tokens = int(min_tokens)
        self.num_model_free_drafts = 0
        """Request-steps verified with the model-free draft (for benchmarks and tests)."""

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return self.drafter.hidden_state_layers

    def propose(self, batch: DraftBatch) -> DraftProposal:
        free = self.model_free.propose(DraftBatch(requests=batch.requests))
        free_counts = [int(n) for n in free.num_draft_tokens]
        taken = [n >= self.min_tokens for n in free_counts]
        if any(taken):
            requests = tuple(attrs.evolve(r, max_draft_tokens=0) if t else r for r, t in zip(batch.requests, taken))
            batch = DraftBatch(requests=requests, hidden_states=batch.hidden_states)
        own = self.drafter.propose(batch)
        if not any(taken):
            return own
        self.num_model_free_drafts += sum(taken)
        return merge_proposals(own, free, taken)

    def on_verified(self, req_ids: Sequence[str], num_accepted: Sequence[int]) -> None:
        self.drafter.on_verified(req_ids, num_accepted)
        self.model_free.on_verified(req_ids, num_accepted)

    def remove_request(self, req_id: str) -> None:
        self.drafter.remove_request(req_id)
        self.model_free.remove_request(req_id)

    def forget_responses(self) -> None:
        self.drafter.forget_responses()
        self.model_free.forget_responses()


def merge_proposals(own: DraftProposal, free: DraftProposal, taken: Sequence[bool]) -> DraftProposal:
    """Per request, ``free``'s drafts (and tree) where ``taken``, else ``own``'s. Draft
    probabilities, when ``own`` has them, are one-hot rows for the model-free drafts."""
    own_counts, free_counts = [int(n) for n in own.num_draft_tokens], [int(n) for n in free.num_draft_tokens]
    own_ids, free_ids = own.token_ids.tolist(), free.token_ids.tolist()
    ids: list[int] = []
    counts: list[int] = []
    own_rows: list[tuple[int, int]] = []  # (merged row, own row) of each kept drafter draft
    free_rows: list[tuple[int, int]] = []  # (merged row, model-free token) of each model-free draft
    a = b = 0
    for n_own, n_free, t in zip(own_counts, free_counts, taken):
        if t:
            free_rows += [(len(ids) + j, free_ids[b + j]) for j in range(n_free)]
            ids += free_ids[b:b + n_free]
            counts.append(n_free)
        else:
            own_rows += [(len(ids) + j, a + j) for j in range(n_own)]
            ids += own_ids[a:a + n_own]
            counts.append(n_own)
        a += n_own
        b += n_free
    probs = None
    if own.draft_probs is not None and ids:
        probs = own.draft_probs.new_zeros((len(ids), own.draft_probs.shape[-1]))
        if own_rows:
            dst, src = zip(*own_rows)
            probs[list(dst)] = own.draft_probs[list(src)]
        if free_rows:
            dst, token = zip(*free_rows)
            probs[list(dst), list(token)] = 1.0
    tree = None
    if own.tree is not None or free.tree is not None:
        tree = _merge_trees(own.tree, free.tree, taken)
    return DraftProposal(token_ids=own.token_ids.new_tensor(ids).int(),  # int32, on the drafts' device
                         num_draft_tokens=counts, draft_probs=probs, tree=tree)


def _merge_trees(own: DraftTree | None, free: DraftTree | None, taken: Sequence[bool]) -> DraftTree:
    """Per request the chosen side's tree; none (0 nodes: its chain is verified) where that side
    drafted no tree."""
    pieces = [_split_tree(own, len(taken)), _split_tree(free, len(taken))]
    tokens: list[int] = []
    parents: list[int] = []
    probs: list[float] = []
    sizes: list[int] = []
    for i, t in enumerate(taken):
        node_tokens, node_parents, node_probs = pieces[t][i]
        tokens += node_tokens
        parents += node_parents
        probs += node_probs
        sizes.append(len(node_tokens))
    return DraftTree(token_ids=tokens, parents=parents, probs=probs, num_tree_tokens=sizes)


def _split_tree(tree: DraftTree | None, num_requests: int) -> list[tuple[list, list, list]]:
    if tree is None:
        return [([], [], [])] * num_requests
    out, start = [], 0
    tokens, parents, probs = list(tree.token_ids), list(tree.parents), list(tree.probs)
    for n in tree.num_tree_tokens:
        out.append((tokens[start:start + n], parents[start:start + n], probs[start:start + n]))
        start += n
    return out
