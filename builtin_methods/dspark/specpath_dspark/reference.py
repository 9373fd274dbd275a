"""Torch reference of the Markov-head sampling kernel (same signature as
:func:`specpath_dspark.kernels.markov_sample`): the CPU path and the kernel's ground truth."""

from __future__ import annotations

import torch


def topk_floor(base_logits: torch.Tensor, topk: int | None) -> torch.Tensor:
    """Per position, the k-th largest base logit (``dspark_draft_topk``); -inf keeps everything.
    Candidates below it get no Markov bias and probability 0."""
    if not topk or topk >= base_logits.shape[-1]:
        return torch.full(base_logits.shape[:-1], float("-inf"), dtype=torch.float32, device=base_logits.device)
    return base_logits.topk(topk, dim=-1).values[..., -1].float().contiguous()


def markov_sample_reference(base_logits: torch.Tensor, floor: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor,
                            anchors: torch.Tensor, conf_base: torch.Tensor, conf_w: torch.Tensor,
                            conf_temp: torch.Tensor, inv_temperature: torch.Tensor, uniforms: torch.Tensor):
    """Left-to-right sampling through the Markov head, R requests x K positions.

    ``base_logits`` [R, K, V] (float32), ``floor`` [R, K] (:func:`topk_floor`), ``w1`` [V, r],
    ``w2`` [r, V], ``anchors`` [R], ``conf_base`` [R, K], ``conf_w`` [r], ``conf_temp`` [K],
    ``inv_temperature`` [R] (0: greedy), ``uniforms`` [R, K] in [0, 1).
    Position k: ``l = U_k + W1[x_{k-1}] W2`` on candidates with ``U_k >= floor`` (else -inf);
    ``q = softmax(l * inv_t)`` (``inv_t = 1`` when greedy); the draft is ``argmax l`` (greedy)
    or the first v with ``cumsum(q)[v] > u``; the confidence is
    ``sigmoid((conf_base + conf_w . W1[x_{k-1}]) / conf_temp[k])``.
    Returns tokens [R, K] int64, q [R, K, V] float32, confidences [R, K] float32.
    """
    greedy = inv_temperature <= 0
    scale = torch.where(greedy, torch.ones_like(inv_temperature), inv_temperature).float()[:, None]

    def pick(j: int, logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        q = torch.softmax(logits * scale, dim=-1)
        sampled = (q.cumsum(dim=-1) <= uniforms[:, j, None]).sum(dim=-1).clamp_max(logits.shape[-1] - 1)
        return torch.where(greedy, logits.argmax(dim=-1), sampled), q

    tokens, probs, conf = _markov_walk(base_logits, floor, w1, w2, anchors, conf_base, conf_w, conf_temp, pick)
    if probs is None:  # no position at all
        probs = torch.empty(*base_logits.shape, dtype=torch.float32, device=base_logits.device)
    return tokens, probs, conf


def markov_race(base_logits: torch.Tensor, floor: torch.Tensor | None, w1: torch.Tensor, w2: torch.Tensor,
                anchors: torch.Tensor, conf_base: torch.Tensor, conf_w: torch.Tensor, conf_temp: torch.Tensor,
                inv_temperature: torch.Tensor, gumbel: torch.Tensor, ids: torch.Tensor | None = None):
    """Coupled drafting through the Markov head (``specpath_drafting.coupling``), in torch on every
    device: the walk of :func:`markov_sample_reference` with position k's draft
    ``argmax(l * inv_t + G_k)`` for ``gumbel`` [R, K, V] (the requests' sampling noise at their
    draft positions; every ``inv_t > 0``). Returns tokens [R, K] int64 and confidences [R, K].
    ``floor`` None: no top-k floor. ``ids``: as :func:`markov_greedy`'s (then ``gumbel`` is
    [R, K, n], the noise at those ids)."""
    inv_t = inv_temperature.float()[:, None]

    def pick(j: int, logits: torch.Tensor) -> tuple[torch.Tensor, None]:
        return (logits * inv_t + gumbel[:, j].to(logits.device)).argmax(dim=-1), None

    tokens, _, conf = _markov_walk(base_logits, floor, w1, w2, anchors, conf_base, conf_w, conf_temp, pick, ids)
    return tokens, conf


def markov_greedy(base_logits: torch.Tensor, floor: torch.Tensor | None, w1: torch.Tensor, w2: torch.Tensor,
                  anchors: torch.Tensor, conf_base: torch.Tensor, conf_w: torch.Tensor, conf_temp: torch.Tensor,
                  ids: torch.Tensor | None = None):
    """The greedy rows of :func:`markov_sample_reference` (``inv_temperature`` 0), without the
    sampling distribution they do not need: the same tokens and confidences, bit for bit, at a
    fraction of the work over a large vocabulary (no softmax or cumulative sum per position).
    ``floor`` None: no top-k floor (what :func:`topk_floor` gives for no ``topk``). Pass ``w1``,
    ``w2`` and ``conf_w`` as float32 to skip their conversion (the speculator keeps them so).

    ``ids`` [n] (sorted target ids): ``base_logits`` [R, K, n] and ``w2`` [r, n] cover only
    these ids (a reduced draft vocabulary, whose other logits are ``-inf``: they can never win
    the argmax); the drafts are still target ids, the same as over the whole vocabulary."""

    def pick(j: int, logits: torch.Tensor) -> tuple[torch.Tensor, None]:
        return logits.argmax(dim=-1), None

    tokens, _, conf = _markov_walk(base_logits, floor, w1, w2, anchors, conf_base, conf_w, conf_temp, pick, ids)
    return tokens, conf


def _markov_walk(base_logits, floor, w1, w2, anchors, conf_base, conf_w, conf_temp, pick, ids=None):
    """Left to right: position k's Markov-biased logits (``-inf`` under the floor; ``floor``
    None: none) go to ``pick(k, logits) -> (tokens [R], q [R, V] or None)``; returns tokens, q
    (None when ``pick`` gives none) and confidences. ``ids``: see :func:`markov_greedy`."""
    r, k, v = base_logits.shape
    prev = anchors.to(torch.int64)
    tokens = torch.empty(r, k, dtype=torch.int64, device=base_logits.device)
    probs = None
    conf = torch.empty(r, k, dtype=torch.float32, device=base_logits.device)
    w1, w2, conf_w = w1.float(), w2.float(), conf_w.float()
    for j in range(k):
        e = w1[prev]  # [R, r]
        base = base_logits[:, j].float()
        logits = base + e @ w2
        if floor is not None:
            logits = logits.masked_fill(base < floor[:, j, None], float("-inf"))
        tok, q = pick(j, logits)
        if ids is not None:
            tok = ids[tok]
        conf[:, j] = torch.sigmoid((conf_base[:, j].float() + e @ conf_w) / conf_temp[j])
        tokens[:, j] = tok
        if q is not None:
            if probs is None:
                probs = torch.empty(r, k, v, dtype=torch.float32, device=base_logits.device)
            probs[:, j] = q
        prev = tok
    return tokens, probs, conf
