"""DSpark's losses and the confidence head's sequential temperature calibration.

Per block position k (teacher forcing: the Markov head reads the true previous token), with
``q_k = softmax(U_k + W1[x*_{k-1}] W2)`` and the target's ``p_k``, three losses weighted by
``exp(-(k-1)/4)``:

- ``0.1 x CE(q_k, x*_k)`` on the data token;
- ``0.9 x ||q_k - p_k||_1`` (twice the total variation: 1 - TV is the acceptance probability of
  a sampled draft);
- ``1.0 x BCE(c_k, 1 - ||q_k - p_k||_1 / 2)`` for the confidence head (soft label, detached).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from specpath_train.block import (
    block_batch,
    expected_tau,
    greedy_acceptance_by_position,
    position_weights,
    sample_anchors,
    target_distribution,
)
from specpath_dspark.drafter import DSparkDrafter


def markov_outputs(drafter: DSparkDrafter, hidden: torch.Tensor, prev: torch.Tensor):
    """Teacher-forced Markov logits and confidence logits (uncalibrated) for a block batch."""
    base = drafter.logits(hidden)
    logits = base + drafter.markov_bias(prev)
    conf = drafter.confidence_logits(drafter.confidence_base(hidden), prev)
    return logits, conf


def dspark_loss(drafter: DSparkDrafter, norm_w: torch.Tensor, head_w: torch.Tensor, eps: float, *, k: int,
                anchors_per_window: int, gamma: float = 4.0, seed: int = 0,
                weights: Sequence[float] = (0.1, 0.9, 1.0), soft_ce: bool = False):
    train_gen = torch.Generator().manual_seed(seed)
    pos_w = position_weights(k, gamma)
    w_ce, w_tv, w_conf = weights

    def loss_fn(tokens: torch.Tensor, taps: torch.Tensor):
        gen = train_gen if torch.is_grad_enabled() else torch.Generator().manual_seed(12345)
        anchors = sample_anchors(tokens.shape[0], tokens.shape[1], k, anchors_per_window, gen)
        b = block_batch(drafter, tokens, taps, anchors, k)
        p = target_distribution(b.target_final, norm_w, head_w, eps)
        logits, conf = markov_outputs(drafter, b.hidden, b.prev)
        logq = F.log_softmax(logits, dim=-1)
        if soft_ce:  # the expectation of the data-token CE when the data are target samples
            ce = -(p * logq).sum(-1)
        else:
            ce = F.nll_loss(logq.reshape(-1, logq.shape[-1]), b.labels.reshape(-1), reduction="none").view(b.labels.shape)
        l1 = (logq.exp() - p).abs().sum(-1)
        soft = (1.0 - 0.5 * l1).detach().clamp(0.0, 1.0)
        bce = F.binary_cross_entropy_with_logits(conf, soft, reduction="none")
        per_pos = (w_ce * ce + w_tv * l1 + w_conf * bce).mean(dim=(0, 1))
        loss = (per_pos * pos_w).sum()
        info = {"ce": float(ce.detach().mean()), "l1": float(l1.detach().mean()), "bce": float(bce.detach().mean()),
                "tau": expected_tau(logits, p)}
        info.update({f"acc{j + 1}": v for j, v in enumerate(greedy_acceptance_by_position(logits, p))})
        return loss, info

    loss_fn.generators = [g for g in (train_gen,) if g is not None]  # saved with the resume state
    return loss_fn


def expected_calibration_error(predicted: torch.Tensor, outcome: torch.Tensor, bins: int = 10) -> float:
    """Mean |confidence - frequency| over equal-width bins, weighted by bin size."""
    edges = torch.linspace(0, 1, bins + 1)
    index = torch.bucketize(predicted.clamp(0, 1 - 1e-9), edges[1:-1])
    total = 0.0
    for b in range(bins):
        sel = index == b
        if sel.any():
            total += float(sel.float().mean()) * abs(float(predicted[sel].mean()) - float(outcome[sel].float().mean()))
    return total


@torch.no_grad()
def calibrate_temperatures(conf_logits: torch.Tensor, accepted: torch.Tensor,
                           grid: Sequence[float] | None = None) -> tuple[list[float], list[float]]:
    """Sequential temperature scaling: left to right, position k's temperature is the grid value
    that minimises the ECE of the cumulative product ``prod_{i<=k} sigmoid(z_i / T_i)`` against
    the event "drafts 1..k all accepted", with T_1..T_{k-1} already fixed.

    ``conf_logits`` [N, K], ``accepted`` [N, K] (bool, per position). Returns the temperatures
    and the ECE reached at each position.
    """
    grid = list(grid) if grid is not None else [float(t) for t in torch.logspace(-1, 1, 41)]
    n, k = conf_logits.shape
    survival = torch.ones(n)
    events = accepted.long().cumprod(dim=1).bool()
    temps, errors = [], []
    for j in range(k):
        best = min(grid, key=lambda t: expected_calibration_error(survival * torch.sigmoid(conf_logits[:, j] / t),
                                                                  events[:, j]))
        temps.append(best)
        survival = survival * torch.sigmoid(conf_logits[:, j] / best)
        errors.append(expected_calibration_error(survival, events[:, j]))
    return temps, errors


@torch.no_grad()
def calibration_data(drafter: DSparkDrafter, tokens: torch.Tensor, taps: torch.Tensor, norm_w: torch.Tensor,
                     head_w: torch.Tensor, eps: float, *, k: int, anchors_per_window: int, batch: int = 8):
    """Confidence logits and greedy acceptance events (teacher forced) on held-out windows."""
    gen = torch.Generator().manual_seed(777)
    logits_all, events_all = [], []
    for i in range(0, tokens.shape[0], batch):
        t, f = tokens[i:i + batch], taps[i:i + batch].float()
        anchors = sample_anchors(t.shape[0], t.shape[1], k, anchors_per_window, gen)
        b = block_batch(drafter, t, f, anchors, k)
        p = target_distribution(b.target_final, norm_w, head_w, eps)
        logits, conf = markov_outputs(drafter, b.hidden, b.prev)
        logits_all.append(conf.reshape(-1, k))
        events_all.append((logits.argmax(-1) == p.argmax(-1)).reshape(-1, k))
    return torch.cat(logits_all), torch.cat(events_all)
