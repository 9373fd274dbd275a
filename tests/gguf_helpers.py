"""Tiny GGUF files written the way llama.cpp's converter writes them, for tests of the GGUF path.

``write_tiny_gguf`` takes a random ``transformers`` Llama/Qwen3 model, quantises its matrices
(Q/K rows permuted for llama, as ``convert_hf_to_gguf`` does) and writes a byte-level BPE
vocabulary with ChatML special tokens and a chat template. It returns the HF model holding the
*dequantised* weights in HF order: the model a correct reader must reproduce exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import transformers

from specpath_engine.testing.engine import tiny_llama_config

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = ["Ġ t", "h e", "Ġt he", "1 2", "d e", "de f"]
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's printable stand-in character for each byte (the byte-level BPE alphabet)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    n = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + n)
            n += 1
    return dict(zip(printable, (chr(c) for c in chars)))


def tiny_vocab() -> tuple[list[str], list[int]]:
    """Tokens and llama.cpp token types: 3 control tokens, 256 bytes, one token per merge."""
    tokens = SPECIALS + [bytes_to_unicode()[b] for b in range(256)] + [m.replace(" ", "") for m in MERGES]
    types = [3] * len(SPECIALS) + [1] * (len(tokens) - len(SPECIALS))
    return tokens, types


VOCAB = len(tiny_vocab()[0])


def llama_cpp_permute(weights: np.ndarray, n_head: int) -> np.ndarray:
    """``convert_hf_to_gguf``'s Q/K row order (the inverse of what the reader undoes)."""
    return weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:]).swapaxes(1, 2).reshape(weights.shape)


def hf_model(*, arch: str = "llama", tied: bool = True, seed: int = 0) -> torch.nn.Module:
    base = tiny_llama_config(vocab_size=VOCAB, rope_theta=10000.0, tie_word_embeddings=tied, bos_token_id=1,
                             eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    if arch == "qwen3":
        model = transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=32, **base))
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**base))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(1 + 0.2 * torch.randn(p.shape) if p.dim() == 1 else 0.15 * torch.randn(p.shape))
    return model.eval()


_NAMES = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf_name: str) -> str:
    if hf_name == "model.embed_tokens.weight":
        return "token_embd.weight"
    if hf_name == "model.norm.weight":
        return "output_norm.weight"
    if hf_name == "lm_head.weight":
        return "output.weight"
    _, _, layer, rest = hf_name.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{_NAMES[module]}.{kind}"


def write_tiny_gguf(
    path: str | Path,
    *,
    arch: str = "llama",
    tied: bool = True,
    matrix_type: str = "Q4_1",
    embed_type: str = "Q8_0",
    pre: str = "smollm",
    seed: int = 0,
    architecture_name: str | None = None,
    chat_template: str | None = CHAT_TEMPLATE,
) -> torch.nn.Module:
    """Write a GGUF file; return the HF model with the dequantised weights (see module doc)."""
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf import quants

    model = hf_model(arch=arch, tied=tied, seed=seed)
    cfg = model.config
    writer = gguf.GGUFWriter(str(path), architecture_name or arch)
    writer.add_block_count(cfg.num_hidden_layers)
    writer.add_context_length(cfg.max_position_embeddings)
    writer.add_embedding_length(cfg.hidden_size)
    writer.add_feed_forward_length(cfg.intermediate_size)
    writer.add_head_count(cfg.num_attention_heads)
    writer.add_head_count_kv(cfg.num_key_value_heads)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(cfg.vocab_size)
    if arch == "qwen3":
        writer.add_key_length(cfg.head_dim)
        writer.add_value_length(cfg.head_dim)
    else:
        writer.add_rope_dimension_count(cfg.hidden_size // cfg.num_attention_heads)
    tokens, types = tiny_vocab()
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(MERGES)
    writer.add_bos_token_id(1)
    writer.add_eos_token_id(2)
    writer.add_unk_token_id(0)
    writer.add_pad_token_id(2)
    writer.add_add_bos_token(False)
    if chat_template:
        writer.add_chat_template(chat_template)

    expected = {}
    state = model.state_dict()
    if tied:
        state.pop("lm_head.weight", None)
    for name, tensor in state.items():
        values = tensor.detach().float().numpy()
        if values.ndim == 1:
            qtype = Q.F32
        elif name == "model.embed_tokens.weight":
            qtype = Q[embed_type]
        else:
            qtype = Q[matrix_type]
        stored = values
        if arch == "llama" and "q_proj" in name:
            stored = llama_cpp_permute(values, cfg.num_attention_heads)
        elif arch == "llama" and "k_proj" in name:
            stored = llama_cpp_permute(values, cfg.num_key_value_heads)
        if qtype == Q.F32:
            writer.add_tensor(gguf_name(name), np.ascontiguousarray(stored, dtype=np.float32))
            expected[name] = values
        elif qtype == Q.F16:
            writer.add_tensor(gguf_name(name), np.ascontiguousarray(stored, dtype=np.float16))
            expected[name] = values.astype(np.float16).astype(np.float32)
        else:
            packed = quants.quantize(np.ascontiguousarray(stored, dtype=np.float32), qtype)
            writer.add_tensor(gguf_name(name), packed, raw_dtype=qtype)
            # quantisation works on rows, so it commutes with the row permutation
            expected[name] = quants.dequantize(quants.quantize(values, qtype), qtype).reshape(values.shape)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with torch.no_grad():
        for name, values in expected.items():
            model.get_parameter(name).copy_(torch.from_numpy(np.array(values, dtype=np.float32)))
    return model
