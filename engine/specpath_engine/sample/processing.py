"""Turn target logits into the distribution a token is sampled from.

The verifier must judge a draft against exactly the distribution the target would have
sampled the token from, so temperature, top-k and top-p are applied here, in the same way
and in the same order as for the bonus token: scale by temperature, mask outside the top-k,
mask outside the top-p nucleus, softmax. Engines sample their bonus tokens from
:func:`target_probs` too, so both sides can never drift apart.
"""

from __future__ import annotations

import torch

GREEDY_EPS = 1e-5
"""Temperatures below this are greedy (argmax); dividing by them would overflow anyway."""


def is_greedy(temperature: torch.Tensor) -> torch.Tensor:
    """Bool mask of the greedy rows of a temperature vector."""
    return temperature < GREEDY_EPS


def target_probs(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor | None = None,
    top_p: torch.Tensor | None = None,
) -> torch.Tensor:
    """float32 probabilities ``[rows, vocab]`` from logits and per-row sampling parameters.

    ``temperature``, ``top_k`` and ``top_p`` hold one value per row. ``top_k`` of 0 (or >= vocab)
    and ``top_p`` of 1 disable those filters. Greedy rows get the plain softmax (temperature 1,
    no filters): verification decides them by argmax and reads their probabilities only for
    FLy's entropy gate.
    """
    return torch.softmax(processed_logits(logits, temperature, top_k, top_p), dim=-1)


def processed_logits(
    logits: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor | None = None,
    top_p: torch.Tensor | None = None,
) -> torch.Tensor:
    """float32 ``[rows, vocab]``: what :func:`target_probs` takes the softmax of (logits over the
    temperature, ``-inf`` outside the top-k and the top-p nucleus): the log-probabilities up to
    a constant per row, which is all the seeded race (:mod:`specpath_engine.sample.race`) needs."""
    greedy = is_greedy(temperature)
    scale = torch.where(greedy, torch.ones_like(temperature), temperature).float()
    if bool((scale != 1).any()):
        logits = logits.float() / scale[:, None]
    else:  # the filters below write in place: never into the caller's tensor
        logits = logits.float().clone() if top_k is not None or top_p is not None else logits.float()
    vocab = logits.shape[-1]
    if top_k is not None:
        k = torch.where(greedy | (top_k <= 0) | (top_k >= vocab), 0, top_k).long()
        rows = (k > 0).nonzero().squeeze(1)
        if rows.numel():
            sub = logits[rows]
            kth = sub.topk(int(k[rows].max()), dim=-1).values.gather(1, (k[rows] - 1)[:, None])
            logits[rows] = sub.masked_fill(sub < kth, float("-inf"))
    if top_p is not None:
        rows = ((top_p < 1.0) & ~greedy).nonzero().squeeze(1)
        if rows.numel():
            logits[rows] = _mask_top_p(logits[rows], top_p[rows].float())
    return logits


NUCLEUS_CANDIDATES = (256, 4096)
"""How many of the most likely tokens the top-p filter ranks first, then next; past both, the
whole vocabulary. Ranking a whole vocabulary is dear (SmolLM2's 49,152 logits: 3.5 ms a row to
sort on two cores of an AMD EPYC, half a plain bf16 decode step; 90 ms for a batch of 48; their
top 256 0.11 ms, top 4,096 0.51 ms), and a language model's nucleus is nearly always small:
SmolLM2 on chat, top-p 0.95, the nucleus past 256 tokens in 0.7% of rows at temperature 0.8 and
7% at 1.0, never past 4,096; at 1.3, 62% and 29%. A flat row pays the stages before the last too
(at most ~1.5x the sort); a plain decode step at T=0.8, top-p 0.95 went from 0.80x to ~1.0x of
one at top-p 1 (``benchmarks/top_p.py``)."""


def _mask_top_p(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Keep the smallest set of most likely tokens whose mass reaches ``top_p`` (at least one).
    ``logits [rows, vocab]``; a token is dropped where the mass of the tokens ranked before it
    already reaches ``top_p``. Ranked in stages (:data:`NUCLEUS_CANDIDATES`); a row goes past a
    stage it cannot finish in: each token past the ranked ones is at most as likely as the last."""
    rows, vocab = logits.shape
    log_total = torch.logsumexp(logits, dim=-1, keepdim=True)  # [rows, 1]
    out = torch.full_like(logits, float("-inf"))
    stages = [c for c in NUCLEUS_CANDIDATES if c < vocab] + [vocab]
    pending, hopeless = torch.arange(rows), torch.arange(0)  # rows for the next stage; for the last
    for i, k in enumerate(stages):
        if k == vocab:
            pending = torch.cat([pending, hopeless])
        if not pending.numel():
            continue
        values, order = logits[pending].topk(k, dim=-1)  # [n, k], most likely first
        probs = (values - log_total[pending]).exp()
        mass_before = probs.cumsum(dim=-1) - probs
        p = top_p[pending]
        mass = mass_before[:, -1] + probs[:, -1]  # [n]: of the k ranked
        found = (mass >= p) | (k == vocab)  # every token past the k ranked is dropped
        keep = mass_before < p[:, None]
        keep[:, 0] = True
        done = found.nonzero().squeeze(1)
        if done.numel():
            kept = values[done].masked_fill(~keep[done], float("-inf"))
            out[pending[done]] = out[pending[done]].scatter_(1, order[done], kept)
        if k < vocab and stages[i + 1] < vocab:  # rows the next stage cannot finish go to the last
            short = ~found & (mass + probs[:, -1] * (stages[i + 1] - k) < p)
            hopeless = torch.cat([hopeless, pending[short]])
            found |= short
        pending = pending[~found]
    return out
