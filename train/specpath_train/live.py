"""Features computed while training instead of read from a cache: for a run on an accelerator.

On a CPU the target runs once over every window and the recipes read its layers from a float16
cache (:mod:`specpath_train.selfdistill`). On a GPU that cache is the wrong trade: ten million
tokens of four 576-wide layers are 46 GB, while the target's forward over a batch of windows
costs less than the drafter's own step. So a ``live`` data directory holds only the windows, and
:class:`LiveTaps` stands where the cached ``taps`` tensor stood: indexing it with a batch's
window ids runs the target over those windows on the run's device.

A recipe cannot tell the two apart; what it does with ``taps`` is all :class:`LiveTaps` has to
support: ``taps[idx]`` (an index tensor: the batch, computed now), ``taps[a:b]`` (a range: still
live), ``.float()`` (all of its windows, computed now) and ``.shape``.

Example::

    taps = LiveTaps(target, windows, layers=(9, 15, 21, 29))
    batch = taps[torch.tensor([3, 7])]  # [2, W, 4, d] float32, on the target's device
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

LIVE_FILE = "windows.safetensors"
"""A live data directory's windows (``tokens`` [N, W] int32; the first ``heldout`` held out)."""


class LiveTaps:
    """The ``[N, W, len(layers), d]`` taps of ``tokens``'s windows, computed on demand by
    ``target`` (a :class:`~specpath_engine.model.LlamaModel`, on the device it trains on)."""

    def __init__(self, target: Any, tokens: torch.Tensor, layers: Sequence[int], *, chunk: int = 64) -> None:
        self.target = target
        self.tokens = tokens  # [N, W] int64, on the target's device
        self.layers = tuple(layers)
        self.chunk = chunk  # windows per forward when computing many at once

    @property
    def shape(self) -> tuple[int, int, int, int]:
        n, w = self.tokens.shape
        return (n, w, len(self.layers), self.target.config.hidden_size)

    def __len__(self) -> int:
        return self.tokens.shape[0]

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return LiveTaps(self.target, self.tokens[key], self.layers, chunk=self.chunk)
        return self.compute(self.tokens[key])

    def float(self) -> torch.Tensor:
        """Every window's taps (float32): the held-out set, or a recipe's calibration slice."""
        if not len(self):
            return self.compute(self.tokens)
        return torch.cat([self.compute(self.tokens[i:i + self.chunk]) for i in range(0, len(self), self.chunk)])

    @torch.no_grad()
    def compute(self, rows: torch.Tensor) -> torch.Tensor:
        """``[B, W, len(layers), d]`` float32 outputs of the layers (before the final norm) for
        ``rows`` [B, W], each row a sequence from position 0."""
        if rows.shape[0] == 0:
            return torch.zeros((0, rows.shape[1], len(self.layers), self.target.config.hidden_size), device=rows.device)
        positions = torch.arange(rows.shape[1], device=rows.device)
        first = torch.zeros(1, dtype=torch.int64, device=rows.device)  # the head runs for one row only
        out = self.target.forward(rows, positions, hidden_layers=self.layers, logits_indices=first)
        return out.hidden_states.float()


def is_live(data_dir: str | Path) -> bool:
    """Whether ``data_dir`` is a live data directory (windows only; see the module docstring)."""
    meta = Path(data_dir) / "features.json"
    return meta.is_file() and bool(json.loads(meta.read_text()).get("live"))


def write_live(data_dir: str | Path, windows: torch.Tensor, meta: dict) -> dict:
    """Save ``windows`` [N, W] and ``features.json`` (``meta`` with ``live: true``); returns it."""
    from safetensors.torch import save_file

    data = Path(data_dir)
    data.mkdir(parents=True, exist_ok=True)
    save_file({"tokens": windows.to(torch.int32).contiguous()}, str(data / LIVE_FILE))
    meta = {**meta, "live": True}
    (data / "features.json").write_text(json.dumps(meta, indent=2) + "\n")
    return meta


def merge_live(parts: Sequence[str | Path], out: str | Path, *, seed: int = 0) -> dict:
    """One live directory from several of the same target (the GPU job's slices of prompts,
    each a ``--data-only`` run): every part's held-out windows first, then all training windows
    shuffled together (``seed``); returns the merged ``features.json``. The live counterpart of
    :func:`specpath_train.target_text.merge_datasets`."""
    from safetensors.torch import load_file

    if not parts:
        raise ValueError("no live data directories to merge")
    metas = [json.loads((Path(d) / "features.json").read_text()) for d in parts]
    if len({m["key"]["target"] for m in metas}) != 1:
        raise ValueError("the parts were made by different targets")
    tokens = [load_file(str(Path(d) / LIVE_FILE))["tokens"] for d in parts]
    held = torch.cat([t[:m["heldout"]] for t, m in zip(tokens, metas)])
    rest = torch.cat([t[m["heldout"]:] for t, m in zip(tokens, metas)])
    rest = rest[torch.randperm(rest.shape[0], generator=torch.Generator().manual_seed(seed))]
    sequences = {k: sum(m["sequences"][k] for m in metas) for k in metas[0].get("sequences", {})}
    meta = {**metas[0], "heldout": int(held.shape[0]), "parts": len(parts), "sequences": sequences}
    return write_live(out, torch.cat([held, rest]), meta)


def load_live(data_dir: str | Path, target_path: str | Path, layers: Sequence[int], *, device: str,
              dtype: torch.dtype) -> tuple[torch.Tensor, LiveTaps, int]:
    """(tokens [N, W] int64 on ``device``, their :class:`LiveTaps` by the target loaded there in
    ``dtype``, how many leading windows are held out)."""
    from safetensors.torch import load_file

    from specpath_engine.model import LlamaModel

    data = Path(data_dir)
    meta = json.loads((data / "features.json").read_text())
    tokens = load_file(str(data / LIVE_FILE))["tokens"].long().to(device)
    target = LlamaModel.from_pretrained(str(target_path), dtype=dtype, device=device)
    return tokens, LiveTaps(target, tokens, layers), int(meta["heldout"])
