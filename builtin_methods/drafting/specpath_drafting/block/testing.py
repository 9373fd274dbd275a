"""Test helpers for block drafters (used by the dflash and dspark tests): tiny random drafters
on disk, and an independent from-scratch computation of the block a drafter should produce
(full recompute of the context from target taps, no KV cache), to check the incremental loop."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from specpath_drafting.block.drafter import DFlashDrafter, DrafterConfig, random_drafter


def tiny_drafter(kind: str, target_path: str | Path, out: str | Path, *, seed: int = 1, num_layers: int = 1,
                 num_taps: int = 2, build: Callable[[DrafterConfig], Any] | None = None, **overrides: Any) -> str:
    """A random drafter for the checkpoint at ``target_path`` written to ``out``."""
    import json

    target = json.loads((Path(target_path) / "config.json").read_text())
    config = DrafterConfig.for_target(kind, target, num_layers=num_layers, num_taps=num_taps, **overrides)
    return str(random_drafter(config, out, seed=seed, build=build))


@torch.inference_mode()
def reference_block(drafter: DFlashDrafter, target: Any, token_ids: Sequence[int], k: int) -> torch.Tensor:
    """The block outputs ``[k, d]`` that predict drafts 1..k after ``token_ids`` (the last one
    pending), computed from scratch: the target runs over the committed prefix, its taps
    become the context, and the block attends to all of it."""
    n = len(token_ids)
    layers = tuple(drafter.config.target_layer_ids)
    ids = torch.tensor(list(token_ids), dtype=torch.int64)
    taps = target.forward(ids[: n - 1], torch.arange(n - 1), hidden_layers=layers).hidden_states
    ctx = drafter.context(taps.to(drafter.dtype))  # [n-1, d]
    cos_c, sin_c = drafter.rope(torch.arange(n - 1))
    anchor_first = drafter.config.anchor_sampling
    block = k if anchor_first else k + 1
    block_ids = torch.full((1, 1, block), -1, dtype=torch.int64)
    block_ids[0, 0, 0] = token_ids[-1]
    cos, sin = drafter.rope(torch.arange(n - 1, n - 1 + block)[None, None])

    def context_kv(i: int):
        k_, v_ = drafter.context_kv(i, ctx, cos_c, sin_c)
        return k_[None], v_[None]

    visible = torch.ones(1, 1, n - 1, dtype=torch.bool)
    out = drafter.block(drafter.block_embeds(block_ids), cos, sin, context_kv, visible)[0, 0]
    return out[:k] if anchor_first else out[1:]


def chi_square_of_two_tokens(tmp_path: Path, spec_fields: dict, build: Callable[[DrafterConfig], Any] | None = None,
                             head_scale: float = 0.25, **drafter_options: Any) -> None:
    """Random drafts at temperature 1: the (2nd, 3rd) output tokens, which pass through
    speculative verification, must follow the target's exact joint distribution."""
    from specpath.engine.llm import LLM
    from specpath.engine.request import SamplingParams
    from specpath_drafting.testing import tiny_target

    vocab = 6
    target = tiny_target(tmp_path / "t", vocab_size=vocab, num_layers=4, hidden_size=16)
    with torch.no_grad():
        target.lm_head.weight.mul_(head_scale)
    target.save_pretrained(tmp_path / "t")
    drafter = tiny_drafter(spec_fields["method"], tmp_path / "t", tmp_path / "d", seed=5, build=build,
                           **drafter_options)
    prompt = [1, 2, 3]
    engine = LLM(str(tmp_path / "t"), {"model": drafter, "num_speculative_tokens": 3,
                                       "draft_sample_method": "random", **spec_fields},
                 num_threads=1, max_num_seqs=64, seed=11)
    n = 1200
    outputs = engine.generate([prompt] * n, SamplingParams(temperature=1.0, max_tokens=3, ignore_eos=True))
    assert engine.metrics.num_draft_tokens > 0 and engine.metrics.num_accepted_tokens > 0
    counts = torch.zeros(vocab, vocab, dtype=torch.float64)
    for o in outputs:
        counts[o.token_ids[1], o.token_ids[2]] += 1
    target = target.double()
    with torch.no_grad():
        p1 = torch.softmax(target(torch.tensor(prompt), torch.arange(3)).logits[-1], -1)
        one = torch.tensor([prompt + [a] for a in range(vocab)])
        p2 = torch.softmax(target.forward_batch(one)[:, 3].double(), -1)
        two = torch.tensor([prompt + [a, b] for a in range(vocab) for b in range(vocab)])
        p3 = torch.softmax(target.forward_batch(two)[:, 4].double(), -1).view(vocab, vocab, vocab)
    joint = torch.einsum("a,ab,abc->bc", p1.double(), p2, p3)  # P(t2, t3)
    expected = joint * n
    keep = expected >= 5
    chi2 = float((((counts - expected) ** 2) / expected)[keep].sum())
    dof = int(keep.sum()) - 1
    critical = dof * (1 - 2 / (9 * dof) + 3.09 * (2 / (9 * dof)) ** 0.5) ** 3  # 0.999 quantile (Wilson-Hilferty)
    assert chi2 < critical, (chi2, critical, dof)
