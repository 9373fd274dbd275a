"""``SuffixSpeculator``: suffix decoding behind specpath's speculator contract.

Each step hands the batch's new tokens to :class:`~specpath_suffix.cache.SuffixCache` and
drafts in one compiled call. The engine shows only committed tokens (plus the one just
sampled), so rejected drafts never enter a tree and ``on_verified`` has nothing to undo; a
restarted request (its history shrank or its last known token changed) is rolled back to the
common prefix. A finished or preempted request's output joins the global tree; a preempted
request that resumes replaces it.

Drafts are chains (path mode), the layout every engine verifies. When the engine says it
verifies trees (``SpeculatorContext.verifies_trees``), each proposal also carries the
tree-mode draft of every request in ``DraftProposal.tree``.
"""

from __future__ import annotations

import numpy as np
import torch

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftTree, SpeculatorContext
from specpath_suffix.cache import SuffixCache


class SuffixSpeculator(BaseSpeculator):
    """Drafts the most frequent continuation of each request's context from its own suffix
    tree or the global tree of earlier responses, whichever scores higher."""

    def __init__(self, spec, context: SpeculatorContext) -> None:
        super().__init__(spec, context)
        method = spec.speculator_config
        self.k = int(spec.num_speculative_tokens)
        self.max_model_len = int(context.max_model_len)
        self.cache = SuffixCache(
            max_tree_depth=method.max_tree_depth,
            max_cached_requests=method.max_cached_requests,
            max_spec_factor=method.max_spec_factor,
            min_token_prob=method.min_token_prob,
            slots=max(context.max_num_seqs, 1),
        )
        self.emit_trees = bool(getattr(context, "verifies_trees", False))
        self.cache.append("__warm_up__", [0, 0])  # compile or load the numba cache now
        self.cache.draft("__warm_up__", 1)
        self.cache.stop("__warm_up__")

    def propose(self, batch: DraftBatch) -> DraftProposal:
        requests = batch.requests
        cache = self.cache
        rows, old, new = cache.update(requests)
        ks = np.fromiter((r.max_draft_tokens for r in requests), np.int32, len(requests))
        np.minimum(ks, self.k, out=ks)
        np.minimum(ks, self.max_model_len - new, out=ks)
        counts = cache.step(rows, old, new, ks)
        drafts = cache.drafts[: len(requests)]
        flat = drafts[np.arange(drafts.shape[1]) < counts[:, None]]
        tree = self._trees(requests, ks) if self.emit_trees else None
        return DraftProposal(token_ids=torch.from_numpy(flat.copy()), num_draft_tokens=counts.tolist(), tree=tree)

    def _trees(self, requests, ks) -> DraftTree:
        tokens, parents, probs, sizes = [], [], [], []
        for request, k in zip(requests, ks.tolist()):
            t, p, q, _ = self.cache.tree_draft(request.req_id, k) if k > 0 else ([], [], [], 0.0)
            tokens += t
            parents += p
            probs += q
            sizes.append(len(t))
        return DraftTree(token_ids=tokens, parents=parents, probs=probs, num_tree_tokens=sizes)

    def remove_request(self, req_id: str) -> None:
        self.cache.stop(req_id)

    def forget_responses(self) -> None:
        """Drop every earlier response from the global tree, so the next call's drafts (and
        hence a seeded sampled call's text) do not depend on the calls before it."""
        self.cache.forget_responses()
