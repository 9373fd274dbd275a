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
        from specpath_engine.harness import first_difference

        for i, (a, b) in enumerate(zip(self.plain, self.speculative)):
            at = first_difference(a, b)
            if at is not None:
                return (f"prompt {i}: first difference at output token {at}: plain {a[at:at + 8]} vs "
                        f"speculative {b[at:at + 8]} ({self.num_accepted_tokens}/{self.num_draft_tokens} "
                        "drafts accepted)")
        return f"identical ({self.num_accepted_tokens}/{self.num_draft_tokens} drafts accepted)"


def tiny_llama_config(**overrides: Any) -> dict[str, Any]:
    """The ``config.json`` fields of a tiny Llama (64 wide, 2 layers, 4 query and 2 KV heads),
    with ``overrides``: the one shape table the tests' random models start from, for
    ``specpath_engine.model_config.LlamaConfig`` and ``transformers.LlamaConfig`` alike."""
    return {"vocab_size": 256, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
            "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 128,
            "rms_norm_eps": 1e-5, **overrides}


def random_llama(seed: int = 0, *, vocab_size: int = 256, hidden_size: int = 64, num_layers: int = 2,
                 num_heads: int = 4, num_kv_heads: int = 2, max_len: int = 512, head_scale: float = 1.0,
                 embed_scale: float = 1.0, tie_word_embeddings: bool = False, rms_norm_eps: float = 1e-6,
                 dtype: Any = None) -> Any:
    """A random-weight Llama (the one builder of tiny targets for the core's and the plugins'
    tests): ``head_scale`` / ``embed_scale`` sharpen the logits (greedy continuations less flat
    than at init, no near-ties), ``dtype`` float64 makes batched and one-token passes agree to
    ~1e-15. Seeded without touching the caller's torch RNG."""
    import torch

    from specpath_engine.model import LlamaModel
    from specpath_engine.model_config import LlamaConfig

    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=2 * hidden_size, num_hidden_layers=num_layers,
        num_attention_heads=num_heads, num_key_value_heads=num_kv_heads, head_dim=hidden_size // num_heads,
        max_position_embeddings=max_len, rms_norm_eps=rms_norm_eps, tie_word_embeddings=tie_word_embeddings,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaModel(config)
    with torch.no_grad():
        if head_scale != 1.0:
            model.lm_head.weight.mul_(head_scale)
        if embed_scale != 1.0:
            model.model.embed_tokens.weight.mul_(embed_scale)
    return (model if dtype is None else model.to(dtype)).eval()


def save_with_byte_tokenizer(model: Any, path: Any, *, eos: bool = True) -> str:
    """Write ``model`` as an HF checkpoint with specpath's byte tokenizer (EOS off: ``eos=False``)."""
    import json
    from pathlib import Path

    from specpath_engine.tokenizer import TOKENIZER_CONFIG_NAME, ByteTokenizer

    tokenizer = ByteTokenizer() if eos else ByteTokenizer(eos_token_id=None)
    extra = {"bos_token_id": tokenizer.bos_token_id, "eos_token_id": tokenizer.eos_token_id} if eos else None
    model.save_pretrained(path, extra_config=extra)
    (Path(path) / TOKENIZER_CONFIG_NAME).write_text(json.dumps(tokenizer.config_dict()), encoding="utf-8")
    return str(path)


def tiny_target(seed: int = 0, vocab_size: int = 256, max_model_len: int = 512) -> Any:
    """A random-weight 2-layer Llama over bytes: fast on CPU, and its greedy output repeats
    itself quickly, so drafters that copy get drafts accepted."""
    return random_llama(seed, vocab_size=vocab_size, max_len=max_model_len)


_TINY_CHECKPOINTS: dict[int, Any] = {}


def tiny_checkpoint(seed: int = 0) -> str:
    """A local HF checkpoint of :func:`tiny_target` with the byte tokenizer, written once per
    process to a temporary folder (removed at exit)."""
    import tempfile

    if seed not in _TINY_CHECKPOINTS:
        folder = tempfile.TemporaryDirectory(prefix="specpath-tiny-target-")
        save_with_byte_tokenizer(tiny_target(seed), folder.name)
        _TINY_CHECKPOINTS[seed] = folder
    return _TINY_CHECKPOINTS[seed].name


_TARGETS: dict[str, Any] = {}


def target_context(model: str | None = None, max_num_seqs: int = 8) -> Any:
    """A ``SpeculatorContext`` lent by the target checkpoint ``model`` (default:
    :func:`tiny_checkpoint`), as ``specpath_engine.LLM`` builds it: the target's config,
    embedding, head and a model loader. The target is loaded once per process."""
    import torch

    from specpath_engine.llm_engine import speculator_context
    from specpath_engine.model import LlamaModel

    path = model if model is not None else tiny_checkpoint()
    if path not in _TARGETS:
        _TARGETS[path] = LlamaModel.from_pretrained(path, dtype=torch.float32, device="cpu")
    return speculator_context(_TARGETS[path], max_num_seqs=max_num_seqs)


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
    """Decode ``prompts`` greedily through ``specpath_engine.LLM`` with and without
    ``speculative_config``, on the checkpoint ``model`` (default: :func:`tiny_checkpoint`);
    ``llm_options`` go to both engines (e.g. ``trust_remote_code=True``)."""
    import torch

    from specpath_engine.llm import LLM, SamplingParams

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
