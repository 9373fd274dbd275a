"""Plain-torch reference of the ``ngram_gpu`` kernel, with the kernel's signature.

Vectorised over the whole batch: for each window offset ``j < max_n`` one shifted comparison
against the request's ``j``-th last token, AND-ed into a running "still matching" mask, so
``matched[b, e]`` is the match length of the occurrence ending at ``e``. The longest match is
the row maximum and ``argmax`` returns its first (earliest) position: the same tie rule as
the KMP scan. It runs wherever torch runs; the engine uses it off CUDA.
"""

from __future__ import annotations

import torch


def propose_ngram_reference(
    tokens: torch.Tensor,
    rows: torch.Tensor,
    lengths: torch.Tensor,
    ks: torch.Tensor,
    min_n: int,
    max_n: int,
    k_max: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(drafts, counts)`` for a batch held in a padded token buffer.

    ``tokens`` int ``[slots, width]``; request ``i`` is ``tokens[rows[i], :lengths[i]]`` and
    may draft up to ``ks[i] <= k_max`` tokens. Returns int32 ``drafts [batch, k_max]`` (zero
    past ``counts[i]``) and int32 ``counts [batch]``.
    """
    batch = rows.shape[0]
    device = tokens.device
    lengths = lengths.to(device=device, dtype=torch.int64)
    width = max(int(lengths.max()) if batch else 0, 1)
    history = tokens[rows.to(device=device, dtype=torch.int64), :width]
    last = lengths - 1

    suffix_index = (last[:, None] - torch.arange(max_n, device=device)).clamp(min=0)
    suffix = history.gather(1, suffix_index)  # suffix[:, j] = the j-th last token
    ends = torch.arange(width, device=device)
    alive = ends[None, :] < last[:, None]  # the occurrence must end before the last token
    matched = torch.zeros(batch, width, dtype=torch.int32, device=device)
    for j in range(min(max_n, width)):
        same = torch.zeros_like(alive)
        same[:, j:] = history[:, : width - j] == suffix[:, j : j + 1]
        alive &= same
        matched += alive

    best = matched.max(dim=1).values if batch else matched.new_zeros(0)
    follow = matched.argmax(dim=1) + 1 if batch else lengths
    counts = torch.minimum(ks.to(device=device, dtype=torch.int64), lengths - follow)
    counts = torch.where(best >= min_n, counts.clamp(min=0), 0)
    offsets = torch.arange(k_max, device=device)
    draft_index = (follow[:, None] + offsets).clamp(max=width - 1)
    drafts = torch.where(offsets < counts[:, None], history.gather(1, draft_index), 0)
    return drafts.to(torch.int32), counts.to(torch.int32)
