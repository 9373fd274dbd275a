"""The DFlash speculator: the shared block-drafting loop (:mod:`specpath_drafting.block.speculator`:
context KV, one non-causal pass over [anchor, K masks]) with DFlash's own choice of drafts.

DFlash's K positions are independent: each draft is its position's argmax (or a sample with
``draft_sample_method = "random"``; a seeded request's race on its sampling noise), and the acceptance estimate adaptive verification reads is
the position's top probability (it reads the position's distribution, never the token drafted
there, so truncating on it stays lossless).

With ``draft_tree_topk = c`` and an engine that verifies trees (``SpeculatorContext.verifies_trees``),
each proposal also carries a best-first tree of at most K nodes whose children are the top-c
tokens of the next block position (:mod:`specpath_drafting.block.trees`: the positions are
independent, so the tree costs no extra pass); otherwise the option has no effect.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from specpath.speculator import DraftProposal, DraftTree
from specpath_drafting import coupling
from specpath_drafting.block import trees
from specpath_engine.sample.greedy import greedy_ids
from specpath_drafting.block.speculator import BlockSpeculator


class DFlashSpeculator(BlockSpeculator):
    """See the module docstring."""

    kind = "dflash"

    def __init__(self, spec: Any, context: Any) -> None:
        super().__init__(spec, context)
        c = spec.draft_tree_topk
        self.tree_c = int(c) if c is not None and c > 1 and getattr(context, "verifies_trees", False) \
            and not self.random_drafts else None
        """Children per tree node (``draft_tree_topk``) when the engine verifies trees and drafts are
        not sampled, else None: chains."""
        self._tree_inputs: tuple[torch.Tensor, torch.Tensor | None] | None = None
        """This step's block logits ``[R, K, n]`` and their kept ids (None: the whole vocabulary)."""

    def choose(self, hidden: torch.Tensor, anchors: Sequence[int], temps: Sequence[float], gens: Sequence[Any],
               noise: Sequence[torch.Tensor | None]):
        """Drafts [R, K], their probabilities [R, K, V] (None: one-hot) and acceptance estimates
        [R, K] from the block outputs ``hidden`` [R, K, d]; each position on its own
        (:func:`specpath_drafting.coupling.choose`: raced, greedy or sampled per request)."""
        greedy = all(n is None for n in noise) and (not self.random_drafts or all(t <= 0 for t in temps))
        if greedy and not self.adaptive and (kept := self.drafter.kept_logits(hidden)) is not None:
            # a reduced draft vocabulary: the argmax over its kept ids' logits alone (sorted ids, every
            # other logit -inf: the same drafts), not over the whole vocabulary's scatter (SmolLM2:
            # 4,096 of 49,152)
            logits, ids = kept
            self._tree_inputs = (logits, ids) if self.tree_c is not None else None
            return ids[greedy_ids(logits)], None, None
        logits = self.drafter.logits(hidden)  # [R, K, V]
        self._tree_inputs = (logits, None) if self.tree_c is not None else None
        if greedy:
            tokens = greedy_ids(logits)  # argmax's ids at a third of its time
            conf = torch.softmax(logits, dim=-1).amax(-1) if self.adaptive else None
            return tokens, None, conf
        r, k, v = logits.shape
        tokens, probs = coupling.choose(
            logits.reshape(r * k, v), [t for t in temps for _ in range(k)], [g for g in gens for _ in range(k)],
            [None if n is None else n[j] for n in noise for j in range(k)], sample=self.random_drafts)
        tokens = tokens.view(r, k)
        probs = None if probs is None else probs.view(r, k, v)
        conf = None
        if self.adaptive or probs is not None:  # the top probability of what each position drafts from
            drafts_at = [t if t > 0 and (n is not None or self.random_drafts) else 1.0 for t, n in zip(temps, noise)]
            scale = torch.tensor(drafts_at, dtype=torch.float32, device=logits.device)
            conf = torch.softmax(logits.float() / scale[:, None, None], dim=-1).amax(-1)
        return tokens, probs, conf

    def proposal(self, num_reqs: int, drafting: Sequence[int], counts: Sequence[int], tokens: torch.Tensor,
                 probs: torch.Tensor | None, conf: torch.Tensor | None) -> DraftProposal:
        """The chain proposal, plus (``draft_tree_topk``) each drafting request's tree of as many nodes."""
        chain = super().proposal(num_reqs, drafting, counts, tokens, probs, conf)
        if self._tree_inputs is None:
            return chain
        logits, ids = self._tree_inputs
        self._tree_inputs = None
        grown = trees.best_first_trees(logits, [0] * len(drafting), [int(n) for n in counts], self.tree_c, ids=ids)
        flat, parents, path_probs, sizes = trees.flatten(num_reqs, drafting, grown)
        return attrs.evolve(chain, tree=DraftTree(token_ids=flat, parents=parents, probs=path_probs,
                                                  num_tree_tokens=sizes))
