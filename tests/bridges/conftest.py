"""Tiny Hugging Face Llama checkpoints written per session (random weights, fixed seeds)."""

from __future__ import annotations

import pytest


def write_llama(path, *, seed: int, vocab: int, hidden: int, layers: int, scale: float = 1.0, head_dim: int = 32):
    import torch
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
        num_attention_heads=hidden // head_dim, num_key_value_heads=1, head_dim=head_dim,
        max_position_embeddings=256, tie_word_embeddings=True, bos_token_id=0, eos_token_id=None, pad_token_id=0,
    )
    model = transformers.LlamaForCausalLM(config)
    with torch.no_grad():  # sharper logits than the default init, so sampling tests have structure
        model.get_input_embeddings().weight.mul_(scale)
    model.save_pretrained(path)
    return str(path)


@pytest.fixture(scope="session")
def tiny_pair(tmp_path_factory):
    """(target dir, draft dir): a 6-token vocabulary target and a smaller draft of the same vocabulary."""
    root = tmp_path_factory.mktemp("tiny-llama")
    target = write_llama(root / "target", seed=0, vocab=6, hidden=64, layers=2, scale=40.0)
    draft = write_llama(root / "draft", seed=1, vocab=6, hidden=32, layers=1, scale=40.0)
    return target, draft
