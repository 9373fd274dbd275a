"""Checkpoint files, config parsing, the byte tokenizer, the corpus split and the shipped model."""

import json
import math

import pytest
import torch
from safetensors.torch import load_file, save_file

from specpath_engine import corpus
from specpath_engine.modeling.checkpoint import CheckpointError
from specpath_engine.model import LlamaModel, default_model_path
from specpath_engine.model_config import LlamaConfig
from specpath_engine.tokenizer import ByteTokenizer, load_tokenizer

HF_DICT = {
    "model_type": "llama",
    "vocab_size": 40,
    "hidden_size": 32,
    "intermediate_size": 48,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
}


@pytest.fixture
def saved(tmp_path):
    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig.from_hf_dict(HF_DICT))
    model.save_pretrained(tmp_path)
    return tmp_path


def test_config_reads_v4_rope_scaling_and_derives_defaults():
    config = LlamaConfig.from_hf_dict(
        {**HF_DICT, "rope_theta": 500000.0, "rope_scaling": {"type": "linear", "factor": 2.0}}
    )
    assert config.rope_theta == 500000.0
    assert config.rope_scaling == {"rope_type": "linear", "factor": 2.0}
    assert config.head_dim == 8 and not config.tie_word_embeddings and not config.qk_norm
    assert LlamaConfig.from_hf_dict({**HF_DICT, "rope_parameters": {"rope_type": "default"}}).rope_scaling is None
    assert LlamaConfig.from_hf_dict({**HF_DICT, "model_type": "qwen3"}).qk_norm


@pytest.mark.parametrize(
    "change, message",
    [
        ({"model_type": "gpt2"}, "model_type='gpt2' is not supported; allowed: llama, qwen3"),
        ({"hidden_act": "gelu"}, "hidden_act='gelu' is not supported; allowed: silu"),
        ({"num_key_value_heads": 3}, "num_attention_heads=4 is not a multiple of num_key_value_heads=3"),
        ({"rope_scaling": {"rope_type": "longrope"}}, "rope_type='longrope' is not supported"),
        ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, "needs low_freq_factor, high_freq_factor"),
        ({"hidden_size": 0}, "hidden_size must be > 0"),
    ],
)
def test_bad_config_is_a_one_line_value_error(change, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as info:
        LlamaConfig.from_hf_dict({**HF_DICT, **change})
    assert "\n" not in str(info.value)


def test_missing_required_field_names_it():
    with pytest.raises(ValueError, match="missing required field 'vocab_size'"):
        LlamaConfig.from_hf_dict({k: v for k, v in HF_DICT.items() if k != "vocab_size"})


def test_missing_files_are_one_line_file_not_found_errors(tmp_path, saved):
    with pytest.raises(FileNotFoundError, match="checkpoint directory not found"):
        LlamaModel.from_pretrained(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json not found"):
        LlamaModel.from_pretrained(tmp_path / "empty")
    (saved / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="no model.safetensors or model.safetensors.index.json"):
        LlamaModel.from_pretrained(saved)


def test_mismatched_shapes_missing_and_unexpected_tensors_are_named(saved):
    weights = saved / "model.safetensors"
    tensors = load_file(weights)
    tensors["model.layers.1.mlp.up_proj.weight"] = torch.zeros(47, 32)
    save_file(tensors, weights)
    with pytest.raises(CheckpointError, match=r"model.layers.1.mlp.up_proj.weight has shape \(47, 32\), config expects \(48, 32\)"):
        LlamaModel.from_pretrained(saved)
    del tensors["model.layers.1.mlp.up_proj.weight"]
    save_file(tensors, weights)
    with pytest.raises(CheckpointError, match="missing 1 tensor"):
        LlamaModel.from_pretrained(saved)
    tensors["model.layers.1.mlp.up_proj.weight"] = torch.zeros(48, 32)
    tensors["model.layers.9.extra.weight"] = torch.zeros(1)
    save_file(tensors, weights)
    with pytest.raises(CheckpointError, match="unexpected tensor.*model.layers.9.extra.weight"):
        LlamaModel.from_pretrained(saved)


def test_bad_json_and_bad_safetensors_are_checkpoint_errors(saved):
    (saved / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(CheckpointError, match="not a (readable )?safetensors file"):
        LlamaModel.from_pretrained(saved)
    (saved / "config.json").write_text("{oops")
    with pytest.raises(CheckpointError, match="invalid JSON"):
        LlamaModel.from_pretrained(saved)
    (saved / "config.json").write_text(json.dumps({**HF_DICT, "model_type": "bert"}))
    with pytest.raises(CheckpointError, match="config.json: model config: model_type='bert'"):
        LlamaModel.from_pretrained(saved)


def test_sharded_checkpoints_load_through_the_index(saved):
    tensors = load_file(saved / "model.safetensors")
    names = sorted(tensors)
    half = len(names) // 2
    shards = {"a.safetensors": names[:half], "b.safetensors": names[half:]}
    for shard, keys in shards.items():
        save_file({k: tensors[k] for k in keys}, saved / shard)
    index = {"weight_map": {k: shard for shard, keys in shards.items() for k in keys}}
    (saved / "model.safetensors.index.json").write_text(json.dumps(index))
    reference = LlamaModel.from_pretrained(saved)
    (saved / "model.safetensors").unlink()
    sharded = LlamaModel.from_pretrained(saved)
    ids = torch.arange(10)
    with torch.no_grad():
        assert torch.equal(sharded(ids, ids).logits, reference(ids, ids).logits)


def test_byte_tokenizer_round_trips_and_replaces_invalid_utf8(tmp_path):
    tok = ByteTokenizer()
    text = "def f(x):\n    return 'é' + \"日本\"\n"
    ids = tok.encode(text)
    assert max(ids) < 256 and tok.decode(ids) == text
    assert tok.encode("a", add_bos=True) == [0, 97]
    assert tok.decode([0xE6, 0x97, 104, 0, 300]) == "\ufffdh"  # cut UTF-8, EOS and out-of-range ids
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(tok.config_dict()))
    loaded = load_tokenizer(tmp_path)
    assert isinstance(loaded, ByteTokenizer) and loaded.eos_token_id == 0 and loaded.vocab_size == 256


def test_corpus_split_is_a_fixed_function_of_the_path():
    assert corpus.is_heldout("base64.py") and not corpus.is_heldout("os.py")
    rels = [rel for rel, _ in corpus.stdlib_files()]
    assert "os.py" in rels and rels == sorted(rels)
    assert not any(part in corpus.EXCLUDED_DIRS for rel in rels for part in rel.split("/")[:-1])


def test_shipped_heldout_file_is_the_heldout_split():
    docs = corpus.read_heldout_asset()
    assert docs and all(corpus.is_heldout(rel) for rel, _ in docs)
    assert 100_000 < sum(len(text) for _, text in docs) < 2_000_000


def test_default_model_is_a_byte_level_llama_that_predicts_python():
    path = default_model_path()
    model = LlamaModel.from_pretrained(path)
    tok = load_tokenizer(path)
    config = json.loads((path / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["vocab_size"] == 256
    assert config["specpath"]["script"] == "scripts/train_default_model.py"
    assert (path / "model.safetensors").stat().st_size < 15 * 2**20
    # One training-length window of held-out source: far better than 8 bits/byte (uniform guess).
    source = dict(corpus.read_heldout_asset())["gzip.py"]
    text = source[len(source) // 2 :][:513]
    ids = torch.tensor(list(text))
    with torch.no_grad():
        logits = model(ids[:-1], torch.arange(len(ids) - 1)).logits
    bits = torch.nn.functional.cross_entropy(logits, ids[1:]).item() / math.log(2)
    assert bits < 3.0
    assert tok.decode(tok.encode("import os\n")) == "import os\n"


def test_shared_tensors_fill_what_a_checkpoint_leaves_out(tmp_path):
    """A draft that borrows its target's embedding: the checkpoint omits it, the caller lends it."""
    torch.manual_seed(0)
    model = LlamaModel(LlamaConfig.from_hf_dict({**HF_DICT, "tie_word_embeddings": True}))
    model.save_pretrained(tmp_path)
    state = load_file(str(tmp_path / "model.safetensors"))
    embedding = state.pop("model.embed_tokens.weight")
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(CheckpointError):
        LlamaModel.from_pretrained(tmp_path)
    loaded = LlamaModel.from_pretrained(tmp_path, shared_tensors={"model.embed_tokens.weight": embedding})
    ids = torch.tensor([1, 5, 7])
    expected = model.forward(ids, torch.arange(3)).logits
    assert torch.equal(loaded.forward(ids, torch.arange(3)).logits, expected)
    assert loaded.lm_head.weight is loaded.model.embed_tokens.weight
