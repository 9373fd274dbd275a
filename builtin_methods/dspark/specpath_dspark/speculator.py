"""The DSpark speculator: the shared block-drafting loop (context KV, one block pass), with drafts
chosen left to right through the Markov head and confidences from the confidence head.

Greedy requests take the argmax of each Markov-corrected distribution (one-hot for
verification); with ``draft_sample_method = "random"`` a request with temperature t samples
from ``softmax((U_k + W1[x_{k-1}] W2) / t)`` and hands that exact distribution to the
verifier. A seeded request that samples races on its sampling noise instead
(``specpath_drafting.coupling``; :func:`~specpath_dspark.reference.markov_race`, in torch on every
device), whatever ``draft_sample_method`` says. ``enable_adaptive_verification`` keeps the prefix the scheduler picks from the
confidences (:mod:`specpath_drafting.block.adaptive`).

With ``xpress_topc = c`` and an engine that verifies trees (``SpeculatorContext.verifies_trees``),
each proposal also carries a best-first tree of the top-c candidates per node
(:mod:`specpath_dspark.xpress_tree`), with as many nodes as the chain has drafts; otherwise the
option has no effect and the top-1 chain is verified.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import torch

from specpath_engine.modeling.dispatch import triton_or_reference
from specpath_drafting.block.speculator import BlockSpeculator
from specpath_drafting.block.trees import flatten
from specpath_dspark.drafter import DSparkDrafter
from specpath.speculator import DraftProposal, DraftTree
from specpath_dspark.reference import markov_greedy, markov_race, markov_sample_reference, topk_floor
from specpath_dspark.xpress_tree import best_first_trees


def markov_sample_fn(device: torch.device):
    """The Triton kernel on CUDA, its torch reference elsewhere."""
    return triton_or_reference(device, "specpath_dspark.kernels:markov_sample", markov_sample_reference)


class DSparkSpeculator(BlockSpeculator):
    kind = "dspark"

    def __init__(self, spec: Any, context: Any) -> None:
        super().__init__(spec, context)
        self.topk = spec.dspark_draft_topk
        self.sample = markov_sample_fn(self.device)
        self.temps = self.drafter.temperatures(self.k).float()
        topc = spec.xpress_topc
        self.tree_c = int(topc) if topc is not None and getattr(context, "verifies_trees", False) else None
        """Children per tree node (``xpress_topc``) when the engine verifies trees, else None: chains."""
        self._tree_inputs: tuple | None = None
        self._markov_f: tuple | None = None
        """(the weights' identities, their float32 copies): see :meth:`_float_markov`."""
        self._kept_w2: tuple | None = None
        """(the float32 ``w2``, the kept ids, ``w2``'s kept columns): see :meth:`_kept_markov`."""

    def _float_markov(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The Markov head's ``w1``, ``w2`` and confidence weights in float32, converted once
        (again when a weight is replaced): the walk reads them in float32 every call."""
        d = self.drafter
        weights = (d.markov_w1, d.markov_w2, d.confidence_markov)
        key = tuple((w.data_ptr(), w._version) for w in weights)
        if self._markov_f is None or self._markov_f[0] != key:
            self._markov_f = (key, tuple(w.float() for w in weights))
        return self._markov_f[1]

    def _kept_markov(self, w2: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """``w2``'s columns of the kept ids [r, n] (contiguous float32), taken once per weight."""
        if self._kept_w2 is None or self._kept_w2[0] is not w2 or self._kept_w2[1] is not ids:
            self._kept_w2 = (w2, ids, w2[:, ids].contiguous())
        return self._kept_w2[2]

    def drafter_class(self) -> type[DSparkDrafter]:
        return DSparkDrafter

    def choose(self, hidden: torch.Tensor, anchors: Sequence[int], temps: Sequence[float], gens: Sequence[Any],
               noise: Sequence[torch.Tensor | None]):
        d = self.drafter
        raced = [i for i, n in enumerate(noise) if n is not None]
        random_rows = [self.random_drafts and t > 0 and noise[i] is None for i, t in enumerate(temps)]
        if (not any(random_rows) and self.sample is markov_sample_reference
                and (kept := d.kept_logits(hidden)) is not None):
            return self._choose_kept(hidden, anchors, temps, noise, *kept)
        logits = d.logits(hidden)  # [R, K, V] base logits U_k
        r, k, _ = logits.shape
        dev = logits.device
        floor = topk_floor(logits, self.topk)
        self._tree_inputs = (logits, floor, list(anchors), None) if self.tree_c is not None else None
        anchors_t = torch.tensor(list(anchors), dtype=torch.int64, device=dev)
        conf_base = d.confidence_base(hidden)
        if len(raced) < r and not any(random_rows) and self.sample is markov_sample_reference:
            # greedy rows on the torch path: their tokens without the distributions they do not use
            w1, w2, cw = self._float_markov()
            tokens, conf = markov_greedy(logits, floor if self.topk else None, w1, w2, anchors_t, conf_base, cw,
                                         self.temps[:k])
            probs = None
        elif len(raced) < r:  # the kernel: greedy and sampled rows (raced rows ride along as greedy)
            inv_t = torch.tensor([1.0 / t if rnd else 0.0 for t, rnd in zip(temps, random_rows)], device=dev)
            uniforms = torch.zeros(r, k, device=dev)
            for i, (rnd, g) in enumerate(zip(random_rows, gens)):
                if rnd:
                    uniforms[i] = torch.rand(k, generator=g, device=dev)
            tokens, probs, conf = self.sample(logits, floor, d.markov_w1, d.markov_w2, anchors_t, conf_base,
                                              d.confidence_markov, self.temps[:k], inv_t, uniforms)
        else:
            tokens = torch.empty(r, k, dtype=torch.int64, device=dev)
            probs, conf = None, torch.empty(r, k, dtype=torch.float32, device=dev)
        if raced:  # seeded requests race on their sampling noise, left to right (specpath_drafting.coupling)
            idx = torch.tensor(raced, dtype=torch.int64, device=dev)
            inv_t = torch.tensor([1.0 / temps[i] for i in raced], device=dev)
            tokens[idx], conf[idx] = markov_race(
                logits[idx], floor[idx], d.markov_w1, d.markov_w2, anchors_t[idx], conf_base[idx], d.confidence_markov,
                self.temps[:k], inv_t, torch.stack([noise[i] for i in raced]))
        if not any(random_rows):
            return tokens, None, conf
        for i, rnd in enumerate(random_rows):
            if not rnd:  # greedy and raced rows verify as one-hot drafts
                probs[i] = torch.nn.functional.one_hot(tokens[i], probs.shape[-1]).to(probs.dtype)
        return tokens, probs, conf

    def _choose_kept(self, hidden: torch.Tensor, anchors: Sequence[int], temps: Sequence[float],
                     noise: Sequence[torch.Tensor | None], logits: torch.Tensor, ids: torch.Tensor):
        """Greedy and raced drafts over a reduced draft vocabulary: the walks over the kept ids'
        logits ``logits`` [R, K, n], ``w2``'s kept columns and the noise at the kept ids; the same
        drafts and confidences as over the whole vocabulary (where every other logit is ``-inf``
        and never wins) at a twelfth of the work."""
        d = self.drafter
        r, k, _ = logits.shape
        dev = logits.device
        w1, w2, cw = self._float_markov()
        w2 = self._kept_markov(w2, ids)
        floor = topk_floor(logits, self.topk) if self.topk else None
        self._tree_inputs = (logits, floor, list(anchors), ids) if self.tree_c is not None else None
        anchors_t = torch.tensor(list(anchors), dtype=torch.int64, device=dev)
        conf_base = d.confidence_base(hidden)
        raced = [i for i, n in enumerate(noise) if n is not None]
        if len(raced) < r:
            tokens, conf = markov_greedy(logits, floor, w1, w2, anchors_t, conf_base, cw, self.temps[:k], ids=ids)
        else:
            tokens = torch.empty(r, k, dtype=torch.int64, device=dev)
            conf = torch.empty(r, k, dtype=torch.float32, device=dev)
        if raced:  # as in choose: seeded requests race on their noise, here at the kept ids
            idx = torch.tensor(raced, dtype=torch.int64, device=dev)
            inv_t = torch.tensor([1.0 / temps[i] for i in raced], device=dev)
            at = ids.to(noise[raced[0]].device)
            gumbel = torch.stack([noise[i].index_select(-1, at) for i in raced])  # [raced, K, n]: no whole-vocabulary copy
            tokens[idx], conf[idx] = markov_race(
                logits[idx], None if floor is None else floor[idx], w1, w2, anchors_t[idx], conf_base[idx], cw,
                self.temps[:k], inv_t, gumbel, ids=ids)
        return tokens, None, conf

    def proposal(self, num_reqs: int, drafting: Sequence[int], counts: Sequence[int], tokens: torch.Tensor,
                 probs: torch.Tensor | None, conf: torch.Tensor | None) -> DraftProposal:
        """The chain proposal, plus (``xpress_topc``) each drafting request's tree of as many nodes."""
        chain = super().proposal(num_reqs, drafting, counts, tokens, probs, conf)
        if self._tree_inputs is None:
            return chain
        logits, floor, anchors, ids = self._tree_inputs
        self._tree_inputs = None
        w1, w2, _ = self._float_markov()
        if ids is not None:
            w2 = self._kept_markov(w2, ids)
        grown = best_first_trees(logits, floor, w1, w2, anchors, [int(n) for n in counts], self.tree_c, ids=ids)
        flat_tokens, flat_parents, flat_probs, sizes = flatten(num_reqs, drafting, grown)
        tree = DraftTree(token_ids=flat_tokens, parents=flat_parents, probs=flat_probs, num_tree_tokens=sizes)
        return attrs.evolve(chain, tree=tree)
