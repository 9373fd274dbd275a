"""Greedy identity through the reference engine: with speculation, the same tokens as without.

For every lossless method, greedy decoding with speculation must emit exactly the tokens plain
greedy decoding emits. :func:`greedy_identity` runs both on the same target (a tiny
random-weight Llama by default, so the check needs no checkpoint and runs in a second or two on
CPU) with chunked prefill and several requests in one batch, and reports the first difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs


@attrs.frozen
class GreedyIdentity:
    """Token ids per prompt, without and with speculation, and how much was drafted."""

    plain: list[list[int]]
    speculative: list[list[int]]
    num_draft_tokens: int
    num_accepted_tokens: int

    def describe(self) -> str:
        """Where the two runs first differ (for an assertion message)."""
        for i, (a, b) in enumerate(zip(self.plain, self.speculative)):
            if a != b:
                at = next((j for j, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
                return (f"prompt {i}: first difference at output token {at}: plain {a[at:at + 8]} vs "
                        f"speculative {b[at:at + 8]} ({self.num_accepted_tokens}/{self.num_draft_tokens} "
                        "drafts accepted)")
        return f"identical ({self.num_accepted_tokens}/{self.num_draft_tokens} drafts accepted)"


def tiny_target(seed: int = 0, vocab_size: int = 256, max_model_len: int = 512) -> Any:
    """A random-weight 2-layer Llama over bytes: fast on CPU, and its greedy output repeats
    itself quickly, so drafters that copy get drafts accepted."""
    import torch

    from specpath.engine.model import LlamaConfig, LlamaModel

    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=max_model_len,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaModel(config)
    return model.eval()


def greedy_identity(
    speculative_config: Mapping[str, Any],
    *,
    prompts: Sequence[str],
    max_tokens: int = 24,
    model: Any = None,
    max_num_seqs: int = 4,
    max_num_batched_tokens: int = 48,
) -> GreedyIdentity:
    """Decode ``prompts`` greedily with and without ``speculative_config``; return both."""
    from specpath.config.args import create_speculative_config
    from specpath.config.engine import EngineConfig
    from specpath.engine.llm_engine import LLMEngine, SpeculationSettings
    from specpath.engine.request import SamplingParams
    from specpath.engine.scheduler import SchedulerConfig
    from specpath.engine.tokenizer import ByteTokenizer
    from specpath.factory import create_speculator
    from specpath.speculator import SpeculatorContext

    model = model if model is not None else tiny_target()
    cfg = model.config
    tokenizer = ByteTokenizer()
    token_prompts = [tokenizer.encode(p) for p in prompts]
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    scheduler = SchedulerConfig(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens,  # small: prompts are prefilled in chunks
        max_model_len=cfg.max_position_embeddings,
    )

    spec = create_speculative_config(dict(speculative_config))
    engine_config = EngineConfig(speculative_config=spec)
    speculator_config = engine_config.speculator
    context = SpeculatorContext(
        device="cpu",
        dtype=next(model.parameters()).dtype,
        vocab_size=cfg.vocab_size,
        max_model_len=cfg.max_position_embeddings,
        max_num_seqs=max_num_seqs,
        target_config=cfg.to_hf_dict(),
        embed_tokens=model.embed,
        lm_head=lambda h: model.lm_head_logits(model.final_norm(h)),
    )
    speculation = SpeculationSettings(
        speculator=create_speculator(spec, context),
        num_speculative_tokens=spec.num_speculative_tokens,
        k_for_batch_size=(engine_config.num_speculative_tokens_for_batch
                          if engine_config.dynamic_k_table is not None else None),
        num_lookahead_tokens=engine_config.num_lookahead_tokens,
        num_prefill_lookahead_tokens=engine_config.num_prefill_lookahead_tokens,
        num_hash_lookahead_tokens=engine_config.num_hash_lookahead_tokens,
        use_eagle_block_drop=engine_config.use_eagle_block_drop,
        num_extra_draft_slots=(0 if speculator_config.uses_separate_workspace_lane
                               else engine_config.max_num_new_slots_for_drafting),
        uses_target_hidden_states=speculator_config.uses_target_hidden_states,
        verify_method=spec.rejection_sample_method,
    )

    def run(speculation: SpeculationSettings | None) -> tuple[list[list[int]], Any]:
        engine = LLMEngine(model, scheduler=scheduler, speculation=speculation, tokenizer=tokenizer)
        requests, metrics = engine.generate(token_prompts, params)
        return [list(r.output_token_ids) for r in requests], metrics

    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a toy model's matmuls are far faster on one thread (restored below)
    try:
        plain, _ = run(None)
        speculative, metrics = run(speculation)
    finally:
        torch.set_num_threads(threads)
    return GreedyIdentity(
        plain=plain,
        speculative=speculative,
        num_draft_tokens=int(metrics.num_draft_tokens),
        num_accepted_tokens=int(metrics.num_accepted_tokens),
    )
