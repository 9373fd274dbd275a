"""GGUF reading and conversion: tiny files written with gguf.GGUFWriter, checked against transformers."""

import json

import numpy as np
import pytest
import torch
import transformers
from hypothesis import given, settings
from hypothesis import strategies as st

import gguf_helpers
from specpath_engine.modeling.checkpoint import CheckpointError
from specpath_engine.testing.fixtures import one_torch_thread  # noqa: F401  (autouse)
from specpath_engine.modeling.gguf import convert_gguf, hf_tensor_name, is_gguf, read_gguf, unpermute_rows


IDS = torch.tensor([5, 70, 3, 100, 262, 1, 44, 9, 200, 17, 63, 2])


@given(heads=st.integers(1, 6), half=st.integers(1, 8), cols=st.integers(1, 5))
@settings(max_examples=40, deadline=None)
def test_unpermute_inverts_llama_cpp_permutation(heads, half, cols):
    w = np.arange(heads * 2 * half * cols, dtype=np.float32).reshape(heads * 2 * half, cols)
    assert np.array_equal(unpermute_rows(gguf_helpers.llama_cpp_permute(w, heads), heads), w)
    b = torch.arange(heads * 2 * half, dtype=torch.float32)  # biases too, and torch tensors
    permuted = torch.from_numpy(gguf_helpers.llama_cpp_permute(b.numpy(), heads))
    assert torch.equal(unpermute_rows(permuted, heads), b)


def test_tensor_names():
    assert hf_tensor_name("blk.12.attn_q.weight") == "model.layers.12.self_attn.q_proj.weight"
    assert hf_tensor_name("blk.0.attn_k_norm.weight") == "model.layers.0.self_attn.k_norm.weight"
    assert hf_tensor_name("token_embd.weight") == "model.embed_tokens.weight"
    assert hf_tensor_name("output.weight") == "lm_head.weight"
    with pytest.raises(CheckpointError, match="blk.0.ssm_a"):
        hf_tensor_name("blk.0.ssm_a.weight")


@pytest.mark.parametrize(
    "arch,tied,matrix_type,embed_type",
    [
        ("llama", True, "Q4_1", "Q8_0"),  # the real SmolLM2 file's layout
        ("llama", False, "Q4_0", "F16"),
        ("qwen3", False, "BF16", "Q8_0"),
        ("qwen3", True, "F32", "F32"),
    ],
)
def test_convert_loads_in_transformers_with_the_same_logits(tmp_path, arch, tied, matrix_type, embed_type):
    file = tmp_path / "tiny.gguf"
    reference = gguf_helpers.write_tiny_gguf(file, arch=arch, tied=tied, matrix_type=matrix_type, embed_type=embed_type)
    out = convert_gguf(file, tmp_path / "hf")
    loaded = transformers.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert type(loaded) is type(reference)
    ref_state = reference.state_dict()
    for name, tensor in loaded.state_dict().items():
        assert torch.equal(tensor, ref_state[name]), name
    with torch.no_grad():
        assert torch.equal(loaded(IDS[None]).logits, reference(IDS[None]).logits)


def test_engine_model_loads_the_converted_checkpoint(tmp_path):
    from specpath_engine.model import LlamaModel

    file = tmp_path / "tiny.gguf"
    reference = gguf_helpers.write_tiny_gguf(file)
    ours = LlamaModel.from_pretrained(convert_gguf(file, tmp_path / "hf"))
    with torch.no_grad():
        theirs = reference(IDS[None]).logits[0]
        mine = ours(IDS, torch.arange(len(IDS))).logits
    torch.testing.assert_close(mine, theirs, rtol=1e-4, atol=1e-4)


def test_config_from_metadata(tmp_path):
    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file, arch="qwen3", tied=False)
    ck = read_gguf(file)
    c = ck.config
    assert is_gguf(file) and not is_gguf(tmp_path)
    assert (c["model_type"], c["architectures"]) == ("qwen3", ["Qwen3ForCausalLM"])
    assert (c["num_hidden_layers"], c["hidden_size"], c["intermediate_size"]) == (2, 64, 96)
    assert (c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]) == (4, 2, 32)
    assert (c["vocab_size"], c["max_position_embeddings"]) == (gguf_helpers.VOCAB, 128)
    assert c["rms_norm_eps"] == 1e-5 and c["rope_theta"] == 10000.0
    assert c["tie_word_embeddings"] is False
    assert (c["bos_token_id"], c["eos_token_id"], c["pad_token_id"]) == (1, 2, 2)
    assert ck.chat_template == gguf_helpers.CHAT_TEMPLATE
    assert ck.tensor_types()["blk.0.attn_q.weight"] == "Q4_1"


def _tokenizer(tmp_path, pre="smollm"):
    file = tmp_path / f"tok-{pre}.gguf"
    gguf_helpers.write_tiny_gguf(file, pre=pre)
    return read_gguf(file).tokenizer()


def test_tokenizer_splits_digits_like_smollm(tmp_path):
    smollm, gpt2 = _tokenizer(tmp_path, "smollm"), _tokenizer(tmp_path, "gpt2")
    tokens, _ = gguf_helpers.tiny_vocab()
    assert [tokens[i] for i in smollm.encode(" the 12").ids] == ["Ġthe", "Ġ", "1", "2"]
    assert [tokens[i] for i in gpt2.encode(" the 12").ids] == ["Ġthe", "Ġ", "12"]
    assert smollm.encode("def<|im_end|>").ids == [tokens.index("def"), 2]  # control tokens are atomic


@pytest.fixture(scope="module")
def smollm_tokenizer(tmp_path_factory):
    return _tokenizer(tmp_path_factory.mktemp("tok"))


@given(text=st.text(max_size=60))
@settings(max_examples=150, deadline=None)
def test_tokenizer_round_trips_any_text(smollm_tokenizer, text):
    ids = smollm_tokenizer.encode(text).ids
    assert smollm_tokenizer.decode(ids, skip_special_tokens=False) == text


def test_transformers_tokenizer_and_chat_template(tmp_path):
    from tokenizers import Tokenizer

    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    out = convert_gguf(file, tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(str(out))
    raw = Tokenizer.from_file(str(out / "tokenizer.json"))
    for text in ["def the 12 34\n\n  x", "<|im_start|>user\nhi 7<|im_end|>"]:
        assert hf_tok.encode(text, add_special_tokens=False) == raw.encode(text).ids
    assert (hf_tok.bos_token_id, hf_tok.eos_token_id, hf_tok.unk_token_id) == (1, 2, 0)
    chat = hf_tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert chat == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_bad_files_are_one_line_errors(tmp_path):
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a gguf file at all")
    with pytest.raises(CheckpointError, match="not a readable GGUF file") as info:
        read_gguf(junk)
    assert "\n" not in str(info.value)
    with pytest.raises(FileNotFoundError):
        read_gguf(tmp_path / "missing.gguf")
    other = tmp_path / "gemma.gguf"
    gguf_helpers.write_tiny_gguf(other, architecture_name="gemma3")
    with pytest.raises(CheckpointError, match="architecture 'gemma3' is not supported; allowed: llama, qwen3"):
        read_gguf(other)
    odd = tmp_path / "odd-pre.gguf"
    gguf_helpers.write_tiny_gguf(odd, pre="chameleon")
    checkpoint = read_gguf(odd)  # the weights stay usable; the tokenizer is refused when asked for
    with pytest.raises(CheckpointError, match="pre-tokeniser 'chameleon' is not supported"):
        checkpoint.tokenizer()


def test_cli_convert(tmp_path, capsys):
    from specpath.cli import main

    file = tmp_path / "tiny.gguf"
    gguf_helpers.write_tiny_gguf(file)
    assert main(["convert", str(file), str(tmp_path / "bf16"), "--dtype", "bfloat16"]) == 0
    assert "wrote" in capsys.readouterr().out
    config = json.loads((tmp_path / "bf16" / "config.json").read_text())
    assert config["torch_dtype"] == "bfloat16"
    assert sorted(p.name for p in (tmp_path / "bf16").iterdir()) == [
        "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"
    ]
    assert main(["convert", str(tmp_path / "nope.gguf"), str(tmp_path / "x")]) == 1
    assert "GGUF file not found" in capsys.readouterr().err
