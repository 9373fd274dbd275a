"""specpath methods inside vLLM, through its ``custom_class`` drafter door.

    import os
    os.environ["SPECPATH_SPECULATIVE_CONFIG"] = '{"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}'
    llm = vllm.LLM(model_dir, speculative_config={
        "method": "custom_class", "model": "specpath_engine.bridges.vllm.Proposer", "num_speculative_tokens": 4})

vLLM builds ``Proposer(vllm_config)`` in every worker that drafts (each tensor-parallel rank of
the last pipeline stage; vLLM keeps the output rank's drafts), calls ``load_model`` once and
then ``propose`` every step with the batch's token histories. The specpath config comes from
``SPECPATH_SPECULATIVE_CONFIG`` (JSON or ``@file.json|yaml``, set in the environment the workers
inherit) and is resolved against vLLM's target checkpoint at start-up; K is vLLM's
``num_speculative_tokens``. Any installed method whose config does not read target hidden
states runs here: the n-gram family, suffix, third-party plugins, standalone drafts and PARD
(the draft model runs in specpath, on the worker's device).

vLLM does not hand a custom proposer request ids, only batch rows; a row's request is
recognised by its token history (a history that no longer extends the one seen last time is
a new request), which is exact for drafters whose state is a function of the history.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from specpath.errors import SpeculativeConfigError

from specpath_engine.bridges.common import HistoryRows, TokenDrafter, env_config_data, resolve, token_context, torch_dtype


def _device(vllm_config: Any) -> str:
    """The worker's device ("cuda:<local rank>" on GPU workers, else vLLM's device type)."""
    device = getattr(getattr(vllm_config, "device_config", None), "device", None)
    kind = getattr(device, "type", None) or str(device or "cpu")
    if kind == "cuda":
        import torch

        return f"cuda:{torch.cuda.current_device()}"
    return kind


USAGE = ("vllm.LLM(model, speculative_config={'method': 'custom_class', "
         "'model': 'specpath_engine.bridges.vllm.Proposer', 'num_speculative_tokens': K})")
"""How vLLM must be configured for this proposer (quoted by its start-up errors)."""


def _section(vllm_config: Any, name: str, *attributes: str) -> Any:
    """``vllm_config.<name>``, with ``attributes`` set; a one-line error naming what is missing."""
    section = getattr(vllm_config, name, None)
    missing = [a for a in attributes if getattr(section, a, None) is None]
    if section is None or missing:
        what = f"vllm_config.{name}" + (f" (no {', '.join(missing)})" if section is not None else "")
        raise SpeculativeConfigError(
            f"the specpath vLLM Proposer needs a VllmConfig with {name}, as vLLM builds it from {USAGE}; "
            f"got {what if section is not None else 'none'}",
            field=f"vllm_config.{name}",
        )
    return section


class Proposer:
    """The ``custom_class`` proposer (see the module docstring)."""

    def __init__(self, vllm_config: Any) -> None:
        spec_v = _section(vllm_config, "speculative_config", "num_speculative_tokens")
        model_config = _section(vllm_config, "model_config", "model", "max_model_len", "dtype")
        scheduler = _section(vllm_config, "scheduler_config", "max_num_seqs")
        self.k = int(spec_v.num_speculative_tokens)
        self.max_model_len = int(model_config.max_model_len)
        dtype = torch_dtype(model_config.dtype)
        self.spec = resolve(
            env_config_data(),
            model_config.model,
            engine="vLLM",
            num_speculative_tokens=self.k,
            dtype=str(dtype).removeprefix("torch."),
            max_model_len=self.max_model_len,
        )
        max_num_seqs = int(scheduler.max_num_seqs)
        context = token_context(
            self.spec, device=_device(vllm_config), dtype=dtype, max_model_len=self.max_model_len, max_num_seqs=max_num_seqs
        )
        self.drafter = TokenDrafter(self.spec, context)
        self.rows = HistoryRows(self.drafter, max_num_seqs, prefix="vllm")

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """vLLM's hook to load a draft model; a specpath drafter loaded its own in ``__init__``."""

    def propose(
        self,
        sampled_token_ids: list[list[int]],
        num_tokens_no_spec: np.ndarray,
        token_ids_cpu: np.ndarray,
        slot_mappings: Any = None,
        **_: Any,
    ) -> list[list[int]]:
        """Drafts per batch row; rows that sampled nothing (partial prefill) get none."""
        num_rows = len(sampled_token_ids)
        self.rows.keep(num_rows)  # rows past the batch: their requests left
        entries, picked = [], []
        limit = self.max_model_len
        for row, sampled in enumerate(sampled_token_ids):
            if not sampled:
                continue
            n = int(num_tokens_no_spec[row])
            budget = min(self.k, limit - n)
            if budget <= 0:
                continue
            req_id, history = self.rows.request(row, token_ids_cpu[row, :n])
            entries.append((req_id, history, budget))
            picked.append(row)
        out: list[list[int]] = [[] for _ in range(num_rows)]
        if entries:
            for row, drafts in zip(picked, self.drafter.propose(entries)):
                out[row] = drafts
        return out
