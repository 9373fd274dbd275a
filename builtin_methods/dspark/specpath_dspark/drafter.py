"""The DSpark drafter: the DFlash backbone plus a low-rank Markov head and a confidence head.

- **Markov head**: draft k's distribution is ``softmax(U_k + W1[x_{k-1}] W2)``, where ``U_k`` are
  the backbone's logits at block position k, ``x_0`` is the anchor and ``W1`` [V, r], ``W2``
  [r, V] are low rank. Drafts are sampled left to right, so each draft's distribution is exact
  given the drafts before it and standard verification stays lossless.
- **Confidence head**: ``c_k = sigmoid((w_h . h_k + w_e . W1[x_{k-1}] + b) / T_k)`` estimates
  P(draft k accepted | drafts < k accepted). It reads draft k-1, never draft k, so schedulers
  that truncate on it stay lossless. ``T_k`` are set after training by sequential temperature
  scaling (:func:`specpath_train.recipes.dspark_losses.calibrate_temperatures`).
"""

from __future__ import annotations

import torch
from torch import nn

from specpath_drafting.block.drafter import DFlashDrafter, DrafterConfig


class DSparkDrafter(DFlashDrafter):
    def __init__(self, config: DrafterConfig, **shared) -> None:
        super().__init__(config, **shared)
        r = config.markov_rank
        if r < 1:
            raise ValueError("a DSpark drafter needs markov_rank >= 1")
        d = config.hidden_size
        self.markov_w1 = nn.Parameter(torch.zeros(config.vocab_size, r))
        self.markov_w2 = nn.Parameter(torch.zeros(r, config.vocab_size))
        self.confidence_hidden = nn.Linear(d, 1, bias=True)
        self.confidence_markov = nn.Parameter(torch.zeros(r))
        temps = config.confidence_temperatures or (1.0,) * max(1, config.num_draft_tokens)
        self.register_buffer("confidence_temperatures", torch.tensor(temps, dtype=torch.float32))
        with torch.no_grad():
            nn.init.normal_(self.markov_w1, std=0.02)
        self.markov_columns: torch.Tensor | None = None
        """Training over a reduced vocabulary: the target ids the logits cover (None: all)."""

    def confidence_base(self, hidden: torch.Tensor) -> torch.Tensor:
        """``w_h . h_k + b`` for block outputs ``hidden`` [..., d] (float32)."""
        return self.confidence_hidden(self.norm(hidden)).squeeze(-1).float()

    def temperatures(self, k: int) -> torch.Tensor:
        """Calibration temperature of positions 1..k (the last one repeats past training)."""
        t = self.confidence_temperatures
        if k <= t.shape[0]:
            return t[:k]
        return torch.cat([t, t[-1:].expand(k - t.shape[0])])

    def markov_bias(self, prev: torch.Tensor) -> torch.Tensor:
        """``W1[prev] W2``: the Markov bias over the vocabulary given the previous tokens."""
        w2 = self.markov_w2 if self.markov_columns is None else self.markov_w2[:, self.markov_columns]
        return (self.markov_w1[prev] @ w2).float()

    def confidence_logits(self, base: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """Uncalibrated confidence logits from ``confidence_base`` and the previous tokens."""
        return base + (self.markov_w1[prev] @ self.confidence_markov).float()
