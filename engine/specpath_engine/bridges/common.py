"""What every bridge shares: reading and resolving the specpath config against the engine's
target, the speculator context, and per-request bookkeeping for engines that hand a drafter
only token histories (vLLM's ``custom_class`` door, llama-cpp-python's ``LlamaDraftModel``).

Everything here goes through the core's public API (``create_speculative_config``,
``create_speculator``, the capability flags); no method is named.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from typing import Any

from specpath.config.args import load_speculative_config_text, normalize_keys
from specpath.errors import SpeculativeConfigError

ENV_VAR = "SPECPATH_SPECULATIVE_CONFIG"
"""Environment variable holding the specpath speculative config (JSON or ``@file``), for
engines whose own configuration has no room for it (vLLM's ``custom_class``)."""


def config_data(source: Any, *, field: str = "speculative_config") -> dict[str, Any]:
    """A config given as a mapping, JSON text or ``@path`` (.json/.yaml), as a normalised dict."""
    if isinstance(source, str):
        data = load_speculative_config_text(source.strip(), source=field)
    elif isinstance(source, Mapping):
        data = dict(source)
    else:
        raise SpeculativeConfigError("must be a JSON string, @file or a mapping", field=field, value=source)
    return normalize_keys(data, source=field)


def env_config_data() -> dict[str, Any]:
    """The config in ``SPECPATH_SPECULATIVE_CONFIG``; a one-line error when it is unset."""
    text = os.environ.get(ENV_VAR)
    if not text or not text.strip():
        raise SpeculativeConfigError(
            'is not set: give the specpath config as JSON (\'{"method": "ngram"}\') or @file.yaml', field=ENV_VAR
        )
    return config_data(text, field=ENV_VAR)


def resolve(
    data: Mapping[str, Any],
    target_dir: str,
    *,
    engine: str,
    num_speculative_tokens: int | None = None,
    hidden_states: bool = False,
    dtype: str = "auto",
    max_model_len: int | None = None,
) -> Any:
    """Resolve ``data`` against the target checkpoint ``target_dir`` and check that ``engine``
    can run what it names: drafts from token histories (and hidden states only where the
    engine hands them over), verified by standard rejection sampling, the drafter unsharded.

    ``num_speculative_tokens`` is the engine's K when the engine owns it; the config must then
    agree (or leave K out). ``hidden_states`` says whether the engine hands the drafter the
    target's hidden states. Every problem is a one-line ``SpeculativeConfigError``.
    """
    from specpath.config.args import create_speculative_config
    from specpath.config.model import ModelConfig

    data = dict(data)
    if num_speculative_tokens is not None:
        given = data.get("num_speculative_tokens")
        if given is not None and given != num_speculative_tokens:
            raise SpeculativeConfigError(
                f"disagrees with {engine}'s num_speculative_tokens ({num_speculative_tokens}); leave it out or make them equal",
                field="speculative_config.num_speculative_tokens",
                value=given,
            )
        data["num_speculative_tokens"] = num_speculative_tokens
    if not data.get("method") and not data.get("model"):
        raise SpeculativeConfigError("names no method: give at least 'method'", field="speculative_config.method")
    target = ModelConfig(model=str(target_dir), dtype=dtype, max_model_len=max_model_len)
    spec = create_speculative_config(data, target_model_config=target)
    flags = spec.speculator_config
    name = spec.custom_method or spec.method
    if not flags.proposes_draft_tokens:
        raise SpeculativeConfigError(f"method {name!r} drafts no tokens; nothing for {engine} to verify", field="speculative_config.method", value=name)
    if flags.uses_target_hidden_states and not hidden_states:
        raise SpeculativeConfigError(
            f"method {name!r} reads the target's hidden states, which {engine} does not hand a drafter; "
            "run it through specpath_engine.bridges.hf or the specpath engine",
            field="speculative_config.method",
            value=name,
        )
    if spec.rejection_sample_method != "standard":  # never run as standard under another name
        who = "the transformers bridge verifies drafts with" if engine == "transformers" else f"{engine} verifies drafts itself,"
        raise SpeculativeConfigError(
            f"{who} standard rejection sampling only; other verification methods need the specpath engine",
            field="speculative_config.rejection_sample_method",
            value=spec.rejection_sample_method,
            allowed=["standard"],
        )
    if spec.draft_tensor_parallel_size not in (None, 1):
        raise SpeculativeConfigError(
            f"{engine} runs the specpath drafter unsharded, on one device; leave it out or give 1",
            field="speculative_config.draft_tensor_parallel_size",
            value=spec.draft_tensor_parallel_size,
            allowed=[1],
        )
    return spec


def reference_model_loader(dtype: Any, device: Any):
    """``SpeculatorContext.load_model`` for drafters with a model of their own: the reference
    engine's decoder (local HF Llama-family checkpoints), built on the engine's device."""

    def load_model(path: str, **options: Any) -> Any:
        from specpath_engine.model import LlamaModel

        return LlamaModel.from_pretrained(path, **{"dtype": dtype, "device": device, **options})

    return load_model


def torch_dtype(name: Any) -> Any:
    import torch

    if isinstance(name, torch.dtype):
        return name
    value = getattr(torch, str(name).removeprefix("torch."), None)
    return value if isinstance(value, torch.dtype) else torch.float32


def token_context(spec: Any, *, device: Any, dtype: Any, max_model_len: int, max_num_seqs: int) -> Any:
    """The speculator context of an engine that lends only token histories (no embeddings, no
    head); drafters with their own model get the reference loader."""
    from specpath.speculator import SpeculatorContext
    from specpath_engine.draft_overrides import resolve

    hf = spec.target_model_config.hf_config if getattr(spec, "target_model_config", None) is not None else {}
    vocab = int(hf.get("vocab_size") or 0)
    return SpeculatorContext(
        device=str(device),
        dtype=dtype,
        vocab_size=vocab,
        max_model_len=int(max_model_len),
        max_num_seqs=max(1, int(max_num_seqs)),
        target_config=dict(hf),
        load_model=reference_model_loader(dtype, device),
        **resolve(spec).context_fields(),
    )


def _accepted(new_tokens: Sequence[int], drafts: Sequence[int]) -> int:
    """How many drafts the engine kept: the common prefix of what it appended (all but the
    last, which is the corrected or bonus token) and what was drafted."""
    n = 0
    limit = min(len(new_tokens) - 1, len(drafts))
    while n < limit and new_tokens[n] == drafts[n]:
        n += 1
    return n


class TokenDrafter:
    """A speculator driven from token histories only.

    Engines that hand a drafter just each request's tokens (no acceptance report) still need
    the speculator contract kept: ``num_new_positions`` per call and ``on_verified`` before the
    next proposal. Both follow from comparing a request's history with the drafts proposed
    for it last time.
    """

    def __init__(self, spec: Any, context: Any) -> None:
        from specpath.factory import create_speculator

        self.spec = spec
        self.k = int(spec.num_speculative_tokens)
        self.speculator = create_speculator(spec, context)
        self._pending: dict[str, tuple[int, list[int]]] = {}
        """req_id -> (history length when drafted, drafts), until the next call settles it."""

    def propose(self, requests: Sequence[tuple[str, Sequence[int], int]]) -> list[list[int]]:
        """Drafts for each ``(req_id, token_ids, max_draft_tokens)``, in order."""
        from specpath.speculator import DraftBatch, DraftRequest

        settled_ids: list[str] = []
        settled_counts: list[int] = []
        entries = []
        pending = self._pending
        k = self.k
        for req_id, ids, budget in requests:
            n = len(ids)
            last = pending.pop(req_id, None)
            new_positions = n - 1
            if last is not None:
                length, drafts = last
                if n < length:  # the engine restarted the request (preemption, a new prompt)
                    self.speculator.remove_request(req_id)
                else:
                    settled_ids.append(req_id)
                    settled_counts.append(_accepted(ids[length:n], drafts) if drafts else 0)
                    new_positions = n - length
            entries.append(
                DraftRequest(
                    req_id=req_id, token_ids=ids, num_new_positions=new_positions, max_draft_tokens=min(budget, k)
                )
            )
        if settled_ids:
            self.speculator.on_verified(settled_ids, settled_counts)
        proposal = self.speculator.propose(DraftBatch(requests=tuple(entries)))
        counts = proposal.num_draft_tokens
        if len(counts) != len(entries):
            raise ValueError(f"{type(self.speculator).__name__}.propose returned {len(counts)} draft counts for {len(entries)} requests")
        flat = proposal.token_ids.tolist() if sum(counts) else []
        out: list[list[int]] = []
        start = 0
        for e, count in zip(entries, counts):
            count = int(count)
            drafts = flat[start : start + min(count, e.max_draft_tokens)]
            start += count
            out.append(drafts)
            pending[e.req_id] = (len(e.token_ids), drafts)
        return out

    def remove(self, req_id: str) -> None:
        """Forget a finished request."""
        self._pending.pop(req_id, None)
        self.speculator.remove_request(req_id)


class HistoryRows:
    """Request identity for engines that show a drafter only numbered rows of token histories.

    A row keeps its request while its history extends the one seen there last time; anything
    else (a shorter history, a changed token) is a new request, and the old one is forgotten.
    That is exact for drafters whose state is a function of the history, and costs one vector
    compare and a copy of the new tokens per row and step.
    """

    _serial = itertools.count()

    def __init__(self, drafter: TokenDrafter, rows: int = 1, *, prefix: str = "row") -> None:
        import numpy as np

        self._np = np
        self.drafter = drafter
        self.prefix = prefix
        rows = max(int(rows), 1)
        self._mirror = np.zeros((rows, 256), dtype=np.int32)
        self._seen = [0] * rows
        self._histories: list[list[int]] = [[] for _ in range(rows)]
        self._ids: list[str | None] = [None] * rows
        self._top = 0
        """One past the highest row holding a request."""

    def request(self, row: int, tokens: Any) -> tuple[str, list[int]]:
        """``(req_id, token list)`` of ``row`` whose history is now ``tokens`` (int array)."""
        np = self._np
        if row >= len(self._ids):
            self._grow(row + 1)
        n = int(tokens.shape[0])
        seen = self._seen[row]
        req_id = self._ids[row]
        if req_id is None or n < seen or not np.array_equal(tokens[:seen], self._mirror[row, :seen]):
            self.drop(row)
            req_id = self._ids[row] = f"{self.prefix}-{row}-{next(self._serial)}"
            self._top = max(self._top, row + 1)
            seen = 0
        history = self._histories[row]
        if n > seen:
            if n > self._mirror.shape[1]:
                wider = np.zeros((self._mirror.shape[0], max(2 * self._mirror.shape[1], n)), dtype=np.int32)
                wider[:, : self._mirror.shape[1]] = self._mirror
                self._mirror = wider
            self._mirror[row, seen:n] = tokens[seen:n]
            history.extend(tokens[seen:n].tolist())
            self._seen[row] = n
        return req_id, history

    def drop(self, row: int) -> None:
        """Forget the request living in ``row`` (if any)."""
        req_id = self._ids[row]
        if req_id is not None:
            self.drafter.remove(req_id)
        self._ids[row] = None
        self._seen[row] = 0
        self._histories[row] = []

    def keep(self, num_rows: int) -> None:
        """Forget the requests of rows ``num_rows`` and beyond."""
        for row in range(num_rows, self._top):
            if self._ids[row] is not None:
                self.drop(row)
        self._top = min(self._top, num_rows)

    def _grow(self, rows: int) -> None:
        np = self._np
        extra = rows - len(self._ids)
        self._mirror = np.concatenate([self._mirror, np.zeros((extra, self._mirror.shape[1]), np.int32)])
        self._seen += [0] * extra
        self._histories += [[] for _ in range(extra)]
        self._ids += [None] * extra
