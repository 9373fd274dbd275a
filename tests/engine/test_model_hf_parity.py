"""Logits and hidden states match transformers on the same (random, tiny) checkpoint."""

import pytest
import torch
import transformers

from specpath_engine.model import LlamaModel
from specpath_engine.testing.engine import tiny_llama_config

VOCAB = 97


def _randomise(model: torch.nn.Module, seed: int) -> None:
    """Large enough weights that logits are far from uniform (so relative error means something)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.copy_(1 + 0.2 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.15 * torch.randn(p.shape, generator=gen))


def _hf_checkpoint(tmp_path, *, qwen3=False, seed=0, **overrides):
    base = tiny_llama_config(**{"vocab_size": VOCAB, "num_hidden_layers": 3, "max_position_embeddings": 64,
                                "rms_norm_eps": 1e-6, "tie_word_embeddings": False, **overrides})
    if qwen3:
        hf = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=16, **base))
    else:
        hf = transformers.LlamaForCausalLM(transformers.LlamaConfig(**base))
    _randomise(hf, seed)
    hf.eval()
    hf.save_pretrained(tmp_path)
    return hf


def _assert_rel_close(ours: torch.Tensor, theirs: torch.Tensor, rel: float = 1e-4) -> None:
    err = (ours - theirs).abs().max().item()
    scale = theirs.abs().max().item()
    assert err <= rel * scale, f"max abs error {err:.3g} > {rel} x max |logit| {scale:.3g}"


ROPE_CASES = {
    "default": dict(),
    "gqa-4to1": dict(num_key_value_heads=1),
    "mha": dict(num_key_value_heads=4),
    "tied": dict(tie_word_embeddings=True),
    "linear": dict(rope_parameters={"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}),
    "llama3": dict(
        rope_parameters={
            "rope_type": "llama3",
            "factor": 8.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 64,
            "rope_theta": 10000.0,
        },
        max_position_embeddings=512,
    ),
    # 40 tokens past max_position_embeddings=24: the dynamic base actually grows.
    "dynamic": dict(
        rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}, max_position_embeddings=24
    ),
    "yarn": dict(
        rope_parameters={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 16,
            "rope_theta": 10000.0,
        }
    ),
    "yarn-mscale": dict(
        rope_parameters={
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 16,
            "mscale": 0.8,
            "mscale_all_dim": 0.5,
            "beta_fast": 16,
            "rope_theta": 5000.0,
        }
    ),
    "theta-bias": dict(rope_theta=500.0, attention_bias=True, mlp_bias=True),
}


@pytest.mark.parametrize("case", sorted(ROPE_CASES))
def test_logits_match_transformers_llama(tmp_path, case):
    hf = _hf_checkpoint(tmp_path, seed=len(case), **ROPE_CASES[case])
    ours = LlamaModel.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (40,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        expected = hf(ids[None]).logits[0]
        got = ours(ids, torch.arange(40)).logits
    assert got.dtype == torch.float32 and got.shape == (40, VOCAB)
    _assert_rel_close(got, expected)


@pytest.mark.parametrize("tied", [False, True])
def test_logits_match_transformers_qwen3_qk_norm(tmp_path, tied):
    hf = _hf_checkpoint(tmp_path, qwen3=True, seed=3, tie_word_embeddings=tied)
    ours = LlamaModel.from_pretrained(tmp_path)
    assert ours.config.qk_norm and ours.config.head_dim == 16
    ids = torch.randint(0, VOCAB, (33,), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        _assert_rel_close(ours(ids, torch.arange(33)).logits, hf(ids[None]).logits[0])


def test_static_ntk_equals_default_rope_with_the_scaled_base(tmp_path):
    """Static NTK has no transformers type: it is plain RoPE with base theta * factor^(d/(d-2))."""
    head_dim, factor = 16, 4.0
    hf = _hf_checkpoint(tmp_path, rope_theta=10000.0 * factor ** (head_dim / (head_dim - 2)))
    config = dict(transformers.AutoConfig.from_pretrained(tmp_path).to_dict())
    config["rope_parameters"] = {"rope_type": "ntk", "factor": factor, "rope_theta": 10000.0}
    (tmp_path / "config.json").write_text(__import__("json").dumps(config))
    ours = LlamaModel.from_pretrained(tmp_path)
    assert ours.config.rope_scaling == {"rope_type": "ntk", "factor": factor}
    ids = torch.randint(0, VOCAB, (30,), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        _assert_rel_close(ours(ids, torch.arange(30)).logits, hf(ids[None]).logits[0])


def test_hidden_layers_are_decoder_outputs_before_the_final_norm(tmp_path):
    hf = _hf_checkpoint(tmp_path, num_hidden_layers=4)
    ours = LlamaModel.from_pretrained(tmp_path)
    ids = torch.randint(0, VOCAB, (12,), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        theirs = hf(ids[None], output_hidden_states=True).hidden_states  # (embeddings, layer 0, ..., normed last)
        out = ours(ids, torch.arange(12), hidden_layers=(2, 0, 3, 1))
    assert out.hidden_states.shape == (12, 4, 64)
    for slot, layer in enumerate((2, 0, 3, 1)):
        if layer < 3:  # transformers' hidden_states[layer + 1] is the output of decoder layer `layer`
            _assert_rel_close(out.hidden_states[:, slot], theirs[layer + 1][0])
        else:  # its last entry is the final layer after the final norm
            _assert_rel_close(ours.final_norm(out.hidden_states[:, slot]), theirs[-1][0])
    assert ours(ids, torch.arange(12)).hidden_states is None


def test_our_export_loads_in_transformers_with_the_same_logits(tmp_path):
    _hf_checkpoint(tmp_path / "src", tie_word_embeddings=True)
    ours = LlamaModel.from_pretrained(tmp_path / "src")
    ours.save_pretrained(tmp_path / "dst", extra_config={"specpath": {"note": "round trip"}})
    assert "lm_head.weight" not in __import__("safetensors.torch").torch.load_file(tmp_path / "dst/model.safetensors")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "dst").eval()
    ids = torch.randint(0, VOCAB, (20,), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        _assert_rel_close(ours(ids, torch.arange(20)).logits, hf(ids[None]).logits[0])
