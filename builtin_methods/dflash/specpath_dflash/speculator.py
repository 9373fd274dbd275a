"""The DFlash speculator: the shared block-drafting loop (:mod:`specpath_drafting.block.speculator`:
context KV, one non-causal pass over [anchor, K masks]) with DFlash's own choice of drafts.

DFlash's K positions are independent: each draft is its position's argmax (or a sample with
``draft_sample_method = "random"``), and the acceptance estimate adaptive verification reads is
the position's top probability (it reads the position's distribution, never the token drafted
there, so truncating on it stays lossless).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from specpath_drafting.block.speculator import BlockSpeculator


class DFlashSpeculator(BlockSpeculator):
    """See the module docstring."""

    kind = "dflash"

    def choose(self, hidden: torch.Tensor, anchors: Sequence[int], temps: Sequence[float], gens: Sequence[Any]):
        """Drafts [R, K], their probabilities [R, K, V] (None: one-hot) and acceptance estimates
        [R, K] from the block outputs ``hidden`` [R, K, d]."""
        logits = self.drafter.logits(hidden)  # [R, K, V]
        if not self.random_drafts or all(t <= 0 for t in temps):
            tokens = logits.argmax(-1)
            conf = torch.softmax(logits, dim=-1).amax(-1) if self.adaptive else None
            return tokens, None, conf
        probs = torch.empty_like(logits)
        tokens = torch.empty(logits.shape[:2], dtype=torch.int64, device=logits.device)
        for i, (t, g) in enumerate(zip(temps, gens)):
            if t <= 0:
                tokens[i] = logits[i].argmax(-1)
                probs[i] = torch.nn.functional.one_hot(tokens[i], logits.shape[-1]).to(probs.dtype)
            else:
                probs[i] = torch.softmax(logits[i] / t, dim=-1)
                tokens[i] = torch.multinomial(probs[i], 1, generator=g)[:, 0]
        return tokens, probs, probs.amax(-1)
