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


def training_batch(target: Any, config: DrafterConfig, *, rows: int = 2, length: int = 24,
                   seed: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """``(tokens [rows, length], taps)``: random tokens and the target states a block drafter's
    training loss reads (its tap layers and the last layer), as the recipes cache them."""
    tokens = torch.randint(0, target.config.vocab_size, (rows, length), generator=torch.Generator().manual_seed(seed))
    layers = (*config.target_layer_ids, target.config.num_hidden_layers - 1)
    with torch.no_grad():
        taps = torch.stack([target.forward(t, torch.arange(length), hidden_layers=layers).hidden_states
                            for t in tokens])
    return tokens, taps


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
    """:func:`specpath_drafting.testing.chi_square_of_two_tokens` with a random block drafter."""
    from specpath_drafting.testing import chi_square_of_two_tokens as check

    check(tmp_path, spec_fields, lambda path, target: tiny_drafter(
        spec_fields["method"], path, tmp_path / "d", seed=5, build=build, **drafter_options),
        num_layers=4, head_scale=head_scale)


def native_step_matches_per_op(tmp_path: Path, method: str, *, max_num_seqs: int,
                               build: Callable[[DrafterConfig], Any] | None = None, **drafter_options: Any) -> int:
    """bf16 on a CPU with the native kernels: two engines over the same tiny target and drafter,
    one taking each step's ingest and block pass in one native call (``step_native``), the other
    the per-op path; every proposal (drafts and their counts) and the whole context KV at the end
    must be equal, bit for bit. Returns how many steps ran natively (the caller asserts some did)."""
    from specpath_drafting.testing import TINY_PROMPTS, drafting_target, greedy, tiny_llm

    drafting_target(tmp_path / "target", hidden_size=128, num_layers=3)  # head_dim 32: what the kernels take
    drafter = tiny_drafter(method, tmp_path / "target", tmp_path / "drafter", seed=3, num_layers=2, build=build,
                           **drafter_options)
    spec = {"method": method, "model": drafter, "num_speculative_tokens": 4, "draft_length_policy": "fixed"}
    engines = [tiny_llm(tmp_path / "target", spec, dtype="bfloat16", max_num_seqs=max_num_seqs) for _ in range(2)]
    native_steps = [0]
    inner = engines[0].speculator.step_native

    def counted(*args: Any) -> Any:
        out = inner(*args)
        native_steps[0] += out is not None
        return out

    engines[0].speculator.step_native = counted
    engines[1].speculator.step_native = lambda *args: None  # the per-op ingest and block pass
    proposals: list[list[tuple[list[int], list[int]]]] = [[], []]
    for engine, seen in zip(engines, proposals):
        propose = engine.speculator.propose

        def recorded(batch: Any, propose: Any = propose, seen: list = seen) -> Any:
            out = propose(batch)
            seen.append((out.token_ids.tolist(), list(out.num_draft_tokens)))
            return out

        engine.speculator.propose = recorded
    prompts = [list(p) for p in (TINY_PROMPTS * 2)[: max(2, max_num_seqs)]]
    outputs = [[o.token_ids for o in engine.generate(prompts, greedy())] for engine in engines]
    assert outputs[0] == outputs[1]
    assert proposals[0] == proposals[1] and len(proposals[0]) > 4
    kv = [engine.speculator.kv for engine in engines]
    assert torch.equal(kv[0].keys, kv[1].keys) and torch.equal(kv[0].values, kv[1].values)
    return native_steps[0]
