"""Greedy identity through the reference engine: with speculation, the same tokens as without.

For every lossless method, greedy decoding with speculation must emit exactly the tokens plain
greedy decoding emits. :func:`greedy_identity` runs both on the same target (a tiny
random-weight Llama by default, so the check needs no checkpoint and runs in a second or two on
CPU) through the public ``LLM`` API, with chunked prefill and several requests in one batch, and
reports the first difference.
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


_TINY_CHECKPOINTS: dict[int, Any] = {}


def tiny_checkpoint(seed: int = 0) -> str:
    """A local HF checkpoint of :func:`tiny_target` with the byte tokenizer, written once per
    process to a temporary folder (removed at exit)."""
    import json
    import tempfile

    from specpath.engine.tokenizer import TOKENIZER_CONFIG_NAME, ByteTokenizer

    if seed not in _TINY_CHECKPOINTS:
        folder = tempfile.TemporaryDirectory(prefix="specpath-tiny-target-")
        tokenizer = ByteTokenizer()
        tiny_target(seed).save_pretrained(
            folder.name, extra_config={"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id}
        )
        with open(f"{folder.name}/{TOKENIZER_CONFIG_NAME}", "w", encoding="utf-8") as f:
            json.dump(tokenizer.config_dict(), f)
        _TINY_CHECKPOINTS[seed] = folder
    return _TINY_CHECKPOINTS[seed].name


_TARGETS: dict[str, Any] = {}


def target_context(model: str | None = None, max_num_seqs: int = 8) -> Any:
    """A ``SpeculatorContext`` lent by the target checkpoint ``model`` (default:
    :func:`tiny_checkpoint`), as ``specpath.engine.LLM`` builds it: the target's config,
    embedding, head and a model loader. The target is loaded once per process."""
    import torch

    from specpath.engine.model import LlamaModel
    from specpath.speculator import SpeculatorContext

    path = model if model is not None else tiny_checkpoint()
    if path not in _TARGETS:
        _TARGETS[path] = LlamaModel.from_pretrained(path, dtype=torch.float32, device="cpu")
    target = _TARGETS[path]
    return SpeculatorContext(
        device="cpu",
        dtype=torch.float32,
        vocab_size=target.config.vocab_size,
        max_model_len=target.config.max_position_embeddings,
        max_num_seqs=max_num_seqs,
        target_config=target.config.to_hf_dict(),
        embed_tokens=target.embed,
        lm_head=target.lm_head_logits,
        load_model=lambda p, **options: LlamaModel.from_pretrained(
            p, **{"dtype": torch.float32, "device": "cpu", **options}
        ),
    )


def greedy_identity(
    speculative_config: Mapping[str, Any],
    *,
    prompts: Sequence[str],
    max_tokens: int = 24,
    model: str | None = None,
    max_num_seqs: int = 4,
    max_num_batched_tokens: int = 48,
    **llm_options: Any,
) -> GreedyIdentity:
    """Decode ``prompts`` greedily through ``specpath.engine.LLM`` with and without
    ``speculative_config``, on the checkpoint ``model`` (default: :func:`tiny_checkpoint`);
    ``llm_options`` go to both engines (e.g. ``trust_remote_code=True``)."""
    import torch

    from specpath.engine.llm import LLM, SamplingParams

    path = model if model is not None else tiny_checkpoint()
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    options = dict(max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,  # small: chunked prefill
                   **llm_options)

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a toy model's matmuls are far faster on one thread (restored below)
    try:
        plain = [o.token_ids for o in LLM(path, None, **options).generate(list(prompts), params)]
        llm = LLM(path, dict(speculative_config), **options)
        speculative = [o.token_ids for o in llm.generate(list(prompts), params)]
    finally:
        torch.set_num_threads(threads)
    return GreedyIdentity(
        plain=plain,
        speculative=speculative,
        num_draft_tokens=int(llm.metrics.num_draft_tokens),
        num_accepted_tokens=int(llm.metrics.num_accepted_tokens),
    )
