"""Serving a shared-head drafter over the vocabulary it was trained on.

A drafter that borrows the target's LM head (MTP, DFlash, DSpark, EAGLE-1) may be trained with
``--train-vocab N``: its loss scores only the N most frequent training ids of the head (4,096 of
SmolLM2's 49,152), so the other rows' logits were never trained down and can win an argmax
over the whole vocabulary. The recipe records the ids in the checkpoint's training record
(``specpath_training.train_vocab_ids``); serving reads them back here and drafts over them only.

:class:`RestrictedLMHead` still returns logits over the whole vocabulary (``-inf`` outside the
kept ids), so every caller (argmax, sampling, Markov biases) keeps indexing target ids. When the
lent head is affine (``h -> h W^T + b``, as a plain or weight-only-quantised linear is, checked
on a random probe) only the kept rows are multiplied: for SmolLM2 a twelfth of the head's
weight reads per draft, which is most of a draft step's cost. Otherwise the full logits are
computed and masked. The kept rows form a linear layer that ``prepare`` (the engine's
``SpeculatorContext.prepare_module``) readies like the target's own: on a bf16 CPU target that is
a pre-packed oneDNN weight, ~7x faster for one row than a plain ``h @ W`` (which reorders the
weight on every call), with the same products.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import torch

TRAIN_VOCAB_KEY = "train_vocab_ids"
"""Where :func:`specpath_train.trainer.train_vocab_record` puts the ids in the training record."""


def recorded_train_vocab(config: Mapping[str, Any], vocab_size: int, *, where: str = "config.json") -> torch.Tensor | None:
    """The sorted ids (int64) a checkpoint's ``specpath_training`` record says its logits were
    trained on, or None (trained on the whole vocabulary). Bad records are one-line errors."""
    record = config.get("specpath_training")
    if not isinstance(record, Mapping) or record.get(TRAIN_VOCAB_KEY) is None:
        return None
    raw = record[TRAIN_VOCAB_KEY]
    if not isinstance(raw, list) or not raw or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        raise ValueError(f"{where}: specpath_training.{TRAIN_VOCAB_KEY} must be a non-empty list of token ids")
    ids = torch.tensor(raw, dtype=torch.int64)
    if int(ids.min()) < 0 or int(ids.max()) >= vocab_size:
        raise ValueError(f"{where}: specpath_training.{TRAIN_VOCAB_KEY} holds ids outside the vocabulary "
                         f"[0, {vocab_size})")
    ids = ids.unique(sorted=True)
    if ids.numel() != len(raw):
        raise ValueError(f"{where}: specpath_training.{TRAIN_VOCAB_KEY} repeats ids")
    return ids


def checkpoint_train_vocab(path: str | Path, vocab_size: int) -> torch.Tensor | None:
    """:func:`recorded_train_vocab` of the checkpoint directory ``path`` (None without a config)."""
    config_path = Path(path) / "config.json"
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # the checkpoint's own loader reports an unreadable config
    return recorded_train_vocab(config, vocab_size, where=str(config_path)) if isinstance(config, Mapping) else None


class RestrictedLMHead(torch.nn.Module):
    """``lm_head`` with every logit outside ``ids`` at ``-inf`` (see the module docstring). A
    module, so it can also stand in for a draft model's own ``lm_head``; with :attr:`compact`
    set it returns the kept logits only (its owner maps them to target ids)."""

    def __init__(self, lm_head: Callable[[torch.Tensor], torch.Tensor], ids: torch.Tensor, vocab_size: int,
                 prepare: Callable[[torch.nn.Module], torch.nn.Module] | None = None) -> None:
        super().__init__()
        self.lm_head = lm_head
        self.ids = ids
        self.vocab_size = vocab_size
        self.prepare = prepare
        self.compact = False
        """True: :meth:`forward` returns the kept ids' logits alone (``[..., n]``, in ``ids``'
        order), for an owner that maps draft indices to target ids itself (``ids[argmax]``)."""
        self._rows: dict[tuple[torch.dtype, torch.device], tuple[torch.nn.Module, torch.Tensor, torch.Tensor] | None] = {}

    @property
    def lent_head_rows(self) -> int:
        """Rows of the lent head a call multiplies (the kept ids': the head is affine for every
        target specpath loads; the engine prices a drafting pass by it)."""
        return int(self.ids.numel())

    def _kept_linear(self, cols: torch.Tensor) -> torch.nn.Module:
        """The kept rows ``cols`` [d, n] as a bias-free linear layer, readied by ``prepare``."""
        d, n = cols.shape
        linear = torch.nn.Linear(d, n, bias=False, device="meta")
        linear.weight = torch.nn.Parameter(cols.T.contiguous(), requires_grad=False)
        return linear if self.prepare is None else self.prepare(linear)

    def _affine_rows(self, h: torch.Tensor) -> tuple[torch.nn.Module, torch.Tensor, torch.Tensor] | None:
        """(the kept ids' rows as a linear layer [d -> n], their bias [n], the ids on h's device),
        read off the head once per dtype/device by feeding it the identity; None when the head
        is not affine on a random probe (then every call computes the full logits)."""
        key = (h.dtype, h.device)
        if key not in self._rows:
            d = h.shape[-1]
            ids = self.ids.to(h.device)
            zero = torch.zeros(1, d, dtype=h.dtype, device=h.device)
            bias = self.lm_head(zero).float()[0, ids]
            cols = torch.cat([self.lm_head(torch.eye(d, dtype=h.dtype, device=h.device)[i:i + 64]).float()[:, ids] - bias
                              for i in range(0, d, 64)])
            probe = 4 * torch.randn(8, d, generator=torch.Generator().manual_seed(0))  # large: nonlinearity shows
            probe = probe.to(dtype=h.dtype, device=h.device)
            want = self.lm_head(probe).float()[:, ids]
            got = probe.float() @ cols + bias
            tol = (3e-2 if h.element_size() <= 2 else 1e-4) * (float(want.abs().max()) + 1e-6)  # rounding of the dtype
            affine = bool(((got - want).abs() <= tol).all())
            self._rows[key] = (self._kept_linear(cols.to(h.dtype)), bias, ids) if affine else None
        return self._rows[key]

    def native_rows(self, h: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor] | None:
        """For a native drafting chain over hidden states like ``h [.., d]``: (the kept rows as a
        native descriptor, their fp32 bias [n], the ids [n]), what :meth:`forward` computes with;
        None where the head is not affine or the rows are not on the native kernels."""
        from specpath_engine.modeling.native import native_linears

        rows = self._affine_rows(h)
        if rows is None:
            return None
        linear = native_linears(rows[0])
        return None if linear is None else (linear[0], rows[1].contiguous(), rows[2].contiguous())

    def kept_logits(self, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [..., n] float32, ids [n])``: the kept ids' logits alone, the values
        :meth:`forward` scatters into the whole vocabulary. A greedy caller takes ``ids[argmax]``
        (the same draft: ``ids`` is sorted, so ties resolve to the same first id) without writing
        and scanning the whole vocabulary, a twelfth of the work for SmolLM2."""
        rows = self._affine_rows(h)
        if rows is None:
            ids = self.ids.to(h.device)
            return self.lm_head(h).float()[..., ids], ids
        kept_linear, bias, ids = rows
        return kept_linear(h).float() + bias, ids

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        kept, ids = self.kept_logits(h)
        if self.compact:
            return kept
        out = kept.new_full((*h.shape[:-1], self.vocab_size), float("-inf"))
        out[..., ids] = kept
        return out


def serving_lm_head(lm_head: Callable[[torch.Tensor], torch.Tensor] | None, checkpoint: str | Path | None,
                    vocab_size: int, *, prepare: Callable[[torch.nn.Module], torch.nn.Module] | None = None,
                    ) -> Callable[[torch.Tensor], torch.Tensor] | None:
    """The head a shared-head drafter from ``checkpoint`` should draft with: ``lm_head`` itself,
    or a :class:`RestrictedLMHead` over the ids its training record names (its kept rows readied
    by ``prepare``, the engine's ``SpeculatorContext.prepare_module``)."""
    if lm_head is None or checkpoint is None:
        return lm_head
    ids = checkpoint_train_vocab(checkpoint, vocab_size)
    if ids is None or ids.numel() >= vocab_size:
        return lm_head
    return RestrictedLMHead(lm_head, ids, vocab_size, prepare=prepare)
