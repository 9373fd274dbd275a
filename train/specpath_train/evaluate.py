"""The held-out check of a trained drafter: real speculative decoding, not teacher forcing.

The checkpoint is served the way a user serves it, ``{"model": DIR}`` with the method (and a
parallel variant's ``parallel_drafting``) left for the core to infer from the checkpoint, on the held-out prompts (greedy), and the engine's own
counters give τ (mean acceptance length) and acceptance by position. Serving it this way is
also the proof that the written checkpoint is one every path accepts.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path


def speculative_metrics(target_dir: str | Path, checkpoint: str | Path, prompts: Sequence[Sequence[int]], *,
                        num_speculative_tokens: int, max_tokens: int, dtype: str = "float32",
                        model_free: str | None = None, quantization: str | None = None) -> dict:
    """τ, acceptance by position and what they were measured on: the drafter's own, at K every
    step (the adaptive draft length would measure the policy, not the drafter); with
    ``model_free`` (a model-free method) that method drafting beside it (``model_free_drafter``),
    else the drafter alone. ``quantization``: over the target served weight-only quantised
    (a drafter trained for it: ``specpath train --target-quantization``)."""
    from specpath_engine.llm import LLM, SamplingParams

    t0 = time.time()
    llm = LLM(str(target_dir), {"model": str(checkpoint), "num_speculative_tokens": num_speculative_tokens,
                                "draft_length_policy": "fixed",
                                "model_free_drafter": {"method": model_free} if model_free else {}},
              dtype=dtype, max_num_seqs=max(1, len(prompts)), quantization=quantization)
    method = llm.engine_config.speculative_config.method
    llm.generate([list(p) for p in prompts], SamplingParams(temperature=0.0, max_tokens=max_tokens))
    m = llm.metrics
    return {"method_inferred": method, "tau": round(m.mean_acceptance_length, 4),
            "acceptance_by_position": [round(x, 4) for x in m.acceptance_rate_by_position],
            "num_speculative_tokens": num_speculative_tokens, "model_free": model_free, "prompts": len(prompts),
            "max_tokens": max_tokens, "target_quantization": quantization,
            "generated_tokens": m.num_generated_tokens, "seconds": round(time.time() - t0, 2)}
