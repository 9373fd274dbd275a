"""Malformed GGUF files: every defect is one ``CheckpointError`` line naming the file and the
field, raised by ``read_gguf`` (before any weight is read) or, for bad weight values, by
``state_dict`` (before any weight is used); never another exception, never garbage weights."""

from __future__ import annotations

import math
import re
import struct

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gguf_bytes
from gguf_bytes import ARRAY, FLOAT32, INT32, STRING, UINT32, UINT64, Value
from specpath_engine.modeling.checkpoint import CheckpointError
from specpath_engine.modeling.gguf import read_gguf
from specpath_engine.modeling.gguf_file import GGML_BLOCKS, GGUFFormatError, parse_gguf

EMBED = "token_embd.weight"


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """The typed parts of a valid tiny llama GGUF (F32 weights, so values are easy to poison)."""
    return gguf_bytes.tiny_parts(tmp_path_factory.mktemp("gguf"))


@pytest.fixture
def parts(base):
    return gguf_bytes.decode(base.encode())  # a private copy to edit


def _write(tmp_path, raw: bytes):
    file = tmp_path / "bad.gguf"
    file.write_bytes(raw)
    return file


def _refused(file, *fields: str) -> str:
    with pytest.raises(CheckpointError) as info:
        read_gguf(file).state_dict()
    message = str(info.value)
    assert "\n" not in message and len(message) < 400, message
    assert str(file) in message, message
    for field in fields:
        assert field in message, message
    return message


def test_the_base_file_loads(tmp_path, parts):
    file = _write(tmp_path, parts.encode())
    checkpoint = read_gguf(file)
    assert checkpoint.state_dict()["model.embed_tokens.weight"].shape == (checkpoint.config["vocab_size"], 64)


def test_ggml_block_table_matches_the_gguf_package():
    from gguf import GGML_QUANT_SIZES

    assert GGML_BLOCKS == {int(k): v for k, v in GGML_QUANT_SIZES.items()}


# -- the container ----------------------------------------------------------------------------


@pytest.mark.parametrize("value", [Value(UINT32, 0), Value(INT32, -32), Value(UINT32, 33), Value(UINT32, 7),
                                   Value(UINT32, 48), Value(UINT32, 4), Value(STRING, "32"), Value(FLOAT32, 32.0)])
def test_bad_alignment(tmp_path, parts, value):
    parts.metadata["general.alignment"] = value
    _refused(_write(tmp_path, parts.encode(pad_to=64)), "general.alignment")


def test_unaligned_tensor_offset(tmp_path, parts):
    parts.tensor(EMBED).offset += 4
    _refused(_write(tmp_path, parts.encode()), EMBED, "not a multiple of the alignment")


def test_duplicate_tensor_entry(tmp_path, parts):
    parts.tensors.append(attrs.evolve(parts.tensor(EMBED)))
    _refused(_write(tmp_path, parts.encode()), EMBED, "appears twice")


def test_duplicate_metadata_key(tmp_path, parts):
    raw = parts.encode(num_kv=len(parts.metadata) + 1)
    key = gguf_bytes._string("general.architecture") + struct.pack("<I", STRING) + gguf_bytes._string("llama")
    at = 24  # right after the header: the same key twice
    _refused(_write(tmp_path, raw[:at] + key + raw[at:] + b"\0" * 64), "general.architecture", "appears twice")


def test_overlapping_tensors(tmp_path, parts):
    parts.tensors[-1].offset = parts.tensors[0].offset
    _refused(_write(tmp_path, parts.encode()), "overlaps")


@pytest.mark.parametrize("ne", [[], [64, 0], [2**32, 2**32], [2**63, 2], [2**64 - 1], [1, 1, 1, 1, 64]])
def test_impossible_dims(tmp_path, parts, ne):
    parts.tensor(EMBED).ne = ne
    _refused(_write(tmp_path, parts.encode()), EMBED, "dimensions")


def test_dims_within_int64_but_past_the_file(tmp_path, parts):
    parts.tensor(EMBED).ne = [64, 2**40]  # 2**46 elements: an int64 product, but not in a small file
    _refused(_write(tmp_path, parts.encode()), EMBED, "past the end of the file")


def test_unknown_tensor_type(tmp_path, parts):
    parts.tensor(EMBED).type_id = 4  # Q4_2: removed from ggml
    _refused(_write(tmp_path, parts.encode()), EMBED, "unknown ggml type 4")


@pytest.mark.parametrize("count", ["num_kv", "num_tensors"])
@pytest.mark.parametrize("value", [2**40, 2**63, 2**64 - 1])
def test_huge_header_counts(tmp_path, parts, count, value):
    _refused(_write(tmp_path, parts.encode(**{count: value})), "count")


def test_huge_array_count(tmp_path, parts):
    raw = parts.encode()
    key = gguf_bytes._string("tokenizer.ggml.tokens")
    at = raw.index(key) + len(key) + 4 + 4  # past the key, its value type and the item type
    raw = raw[:at] + struct.pack("<Q", 2**62) + raw[at + 8:]
    _refused(_write(tmp_path, raw), "tokenizer.ggml.tokens", "cannot fit")


def test_huge_string_length(tmp_path, parts):
    raw = parts.encode()
    key = gguf_bytes._string("general.architecture")
    at = raw.index(key) + len(key) + 4  # the value's length field
    raw = raw[:at] + struct.pack("<Q", 2**63) + raw[at + 8:]
    _refused(_write(tmp_path, raw), "general.architecture", "truncated")


def test_deeply_nested_arrays(tmp_path, parts):
    parts.metadata["general.x"] = gguf_bytes.nested_array(5000)
    _refused(_write(tmp_path, parts.encode()), "general.x", "nested")


def test_shallow_nested_arrays_are_fine(tmp_path, parts):
    parts.metadata["general.x"] = gguf_bytes.nested_array(3)
    assert read_gguf(_write(tmp_path, parts.encode())).file.metadata["general.x"] == [[[1]]]


@pytest.mark.parametrize("cut", [0, 3, 10, 30, 200, -1])
def test_truncated_files(tmp_path, parts, cut):
    raw = parts.encode()
    _refused(_write(tmp_path, raw[:cut]))


# -- the metadata -------------------------------------------------------------------------------


@pytest.mark.parametrize("key,value", [
    ("llama.attention.layer_norm_rms_epsilon", Value(FLOAT32, math.nan)),
    ("llama.attention.layer_norm_rms_epsilon", Value(FLOAT32, 0.0)),
    ("llama.attention.layer_norm_rms_epsilon", Value(FLOAT32, -1e-5)),
    ("llama.attention.layer_norm_rms_epsilon", Value(STRING, "1e-5")),
    ("llama.rope.freq_base", Value(FLOAT32, 0.0)),
    ("llama.rope.freq_base", Value(FLOAT32, -10000.0)),
    ("llama.rope.freq_base", Value(FLOAT32, math.inf)),
    ("llama.rope.freq_base", Value(FLOAT32, math.nan)),
    ("tokenizer.ggml.bos_token_id", Value(UINT32, 10**6)),
    ("tokenizer.ggml.eos_token_id", Value(UINT32, 265)),  # the vocabulary has 265 tokens
    ("tokenizer.ggml.eos_token_id", Value(INT32, -1)),
    ("tokenizer.ggml.eos_token_id", Value(STRING, "x")),
    ("tokenizer.ggml.padding_token_id", Value(UINT64, 2**63)),
    ("llama.block_count", Value(STRING, "2")),
    ("llama.block_count", Value(UINT32, 0)),
    ("llama.block_count", Value(UINT64, 2**62)),
    ("llama.attention.head_count", Value(UINT32, 0)),
    ("llama.attention.head_count", Value(ARRAY, (UINT32, [4, 4]))),
    ("llama.attention.head_count_kv", Value(UINT32, 3)),
    ("llama.embedding_length", Value(FLOAT32, 64.0)),
    ("llama.context_length", Value(UINT64, 2**40)),
    ("llama.vocab_size", Value(UINT32, 100)),  # fewer than the tokens
    ("tokenizer.ggml.add_bos_token", Value(UINT32, 1)),
    ("tokenizer.chat_template", Value(UINT32, 1)),
    ("tokenizer.ggml.tokens", Value(ARRAY, (UINT32, [1, 2, 3]))),
    ("tokenizer.ggml.token_type", Value(ARRAY, (INT32, [1] * 300))),
])
def test_bad_metadata_values(tmp_path, parts, key, value):
    parts.metadata[key] = value
    message = _refused(_write(tmp_path, parts.encode()))
    assert key in message or key.split(".")[-1] in message, message


@pytest.mark.parametrize("key", ["llama.block_count", "llama.embedding_length", "llama.attention.head_count"])
def test_missing_required_metadata(tmp_path, parts, key):
    del parts.metadata[key]
    _refused(_write(tmp_path, parts.encode()), key, "missing")


@pytest.mark.parametrize("merge,missing", [("Ġ zz", "zz"), ("h e", None), ("he", None)])
def test_merges_that_name_missing_tokens(tmp_path, parts, merge, missing):
    item, merges = parts.metadata["tokenizer.ggml.merges"].value
    if merge == "h e":  # both halves exist but "he" is not in the vocabulary
        tokens = parts.metadata["tokenizer.ggml.tokens"].value[1]
        tokens[tokens.index("he")] = "hé"
    parts.metadata["tokenizer.ggml.merges"] = Value(ARRAY, (item, merges + [merge] if merge != "h e" else merges))
    message = _refused(_write(tmp_path, parts.encode()), "tokenizer.ggml.merges[")
    if missing:
        assert repr(missing) in message


def test_duplicate_tokens(tmp_path, parts):
    tokens = parts.metadata["tokenizer.ggml.tokens"].value[1]
    tokens[-1] = tokens[-2]
    _refused(_write(tmp_path, parts.encode()), "tokenizer.ggml.tokens", "appears twice")


# -- the tensor table against the metadata -------------------------------------------------------


def test_tensor_of_a_layer_the_metadata_lacks(tmp_path, parts):
    parts.metadata["llama.block_count"] = Value(UINT32, 1)
    _refused(_write(tmp_path, parts.encode()), "blk.1.", "not part of this model")


def test_tensor_shape_that_disagrees_with_the_metadata(tmp_path, parts):
    parts.metadata["llama.feed_forward_length"] = Value(UINT32, 32)
    _refused(_write(tmp_path, parts.encode()), "ffn_", "shape")


def test_missing_tensor(tmp_path, parts):
    dropped = next(t for t in parts.tensors if t.name == "blk.1.ffn_up.weight")
    parts.tensors.remove(dropped)
    _refused(_write(tmp_path, parts.encode()), "missing", "blk.1.ffn_up.weight")


# -- weight values --------------------------------------------------------------------------------


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_weights(tmp_path, parts, bad):
    at = parts.tensor("blk.1.attn_v.weight").offset + 40
    data = bytearray(parts.data)
    data[at : at + 4] = struct.pack("<f", bad)
    parts.data = bytes(data)
    _refused(_write(tmp_path, parts.encode()), "blk.1.attn_v.weight", "NaN or infinite")


def test_nan_block_scale_in_a_quantised_file(tmp_path):
    """The real SmolLM2 failure: a NaN f16 scale in a Q8_0 block dequantises to a NaN row."""
    import gguf_helpers

    file = tmp_path / "q.gguf"
    gguf_helpers.write_tiny_gguf(file)  # Q4_1 matrices, Q8_0 embedding
    parts = gguf_bytes.decode(file.read_bytes())
    at = parts.tensor(EMBED).offset  # the first block's f16 scale
    data = bytearray(parts.data)
    data[at : at + 2] = np.array([np.nan], dtype=np.float16).tobytes()
    parts.data = bytes(data)
    _refused(_write(tmp_path, parts.encode()), EMBED, "NaN or infinite")


def test_weights_that_overflow_the_requested_dtype(tmp_path, parts):
    import torch

    at = parts.tensor("output_norm.weight").offset
    data = bytearray(parts.data)
    data[at : at + 4] = struct.pack("<f", 1e30)
    parts.data = bytes(data)
    file = _write(tmp_path, parts.encode())
    assert read_gguf(file).state_dict(torch.float32)["model.norm.weight"][0] == pytest.approx(1e30)
    with pytest.raises(CheckpointError, match="output_norm.weight overflows float16"):
        read_gguf(file).state_dict(torch.float16)


def test_engine_model_refuses_a_poisoned_gguf(tmp_path, parts):
    from specpath_engine.model import LlamaModel

    parts.metadata["llama.rope.freq_base"] = Value(FLOAT32, 0.0)
    file = _write(tmp_path, parts.encode())
    with pytest.raises(CheckpointError, match="llama.rope.freq_base"):
        LlamaModel.from_pretrained(file)


# -- fuzz -------------------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(raw=st.one_of(st.binary(max_size=300),
                     st.binary(max_size=300).map(lambda b: b"GGUF" + struct.pack("<I", 3) + b),
                     st.builds(lambda n, k, b: b"GGUF" + struct.pack("<IQQ", 3, n, k) + b,
                               st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.binary(max_size=200))))
def test_any_bytes_parse_or_fail_as_a_format_error(tmp_path, raw):
    file = _write(tmp_path, raw)
    try:
        parse_gguf(file)
    except GGUFFormatError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
    try:
        read_gguf(file)
    except CheckpointError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_header_loads_or_fails_in_one_line(tmp_path, base, data):
    """Random bytes of a valid file's header (and a cut) changed: a valid load or one line."""
    raw = bytearray(base.encode())
    header_end = len(raw) - len(base.data)
    for _ in range(data.draw(st.integers(1, 8))):
        at = data.draw(st.integers(0, header_end - 1))
        raw[at] = data.draw(st.integers(0, 255))
    cut = data.draw(st.one_of(st.none(), st.integers(0, len(raw))))
    file = _write(tmp_path, bytes(raw[:cut] if cut is not None else raw))
    try:
        checkpoint = read_gguf(file)
        tensors = checkpoint.state_dict()
    except CheckpointError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400
    else:
        for name, tensor in tensors.items():  # a file that loads has the metadata's shapes, finite
            assert bool(tensor.isfinite().all()), name
        assert tensors["model.embed_tokens.weight"].shape[0] == checkpoint.config["vocab_size"]


# -- through the public entry points ------------------------------------------------------------


def _poison_merges(parts):
    item, merges = parts.metadata["tokenizer.ggml.merges"].value
    parts.metadata["tokenizer.ggml.merges"] = Value(ARRAY, (item, merges + ["Ġ zz"]))


def _poison_weights(parts):
    at = parts.tensor("output_norm.weight").offset
    parts.data = parts.data[:at] + struct.pack("<f", math.nan) + parts.data[at + 4:]


@pytest.mark.parametrize("poison,field", [(_poison_merges, "tokenizer.ggml.merges[6]"),
                                          (_poison_weights, "output_norm.weight has NaN")])
def test_run_and_llm_refuse_in_one_line(tmp_path, parts, capsys, poison, field):
    from specpath.cli import main
    from specpath_engine.llm import LLM

    poison(parts)
    file = _write(tmp_path, parts.encode())
    assert main(["run", "--model", str(file), "--prompt", "hi", "--max-tokens", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and str(file) in err and field in err, err
    with pytest.raises(ValueError, match=re.escape(field)) as info:
        LLM(str(file))
    assert "\n" not in str(info.value) and str(file) in str(info.value)


@pytest.mark.parametrize("name", ["blk.01.ffn_up.weight", "blk.1.ffn_up.weight\n", "blk.1.ssm_a.weight", "x" * 5000])
def test_tensor_names_that_are_not_the_models(tmp_path, parts, name):
    parts.tensor("blk.1.ffn_up.weight").name = name
    message = _refused(_write(tmp_path, parts.encode()))
    assert repr(name)[:40] in message


_KEYS = ["general.alignment", "llama.block_count", "llama.embedding_length", "llama.feed_forward_length",
         "llama.attention.head_count", "llama.attention.head_count_kv", "llama.context_length", "llama.vocab_size",
         "llama.rope.dimension_count", "llama.attention.layer_norm_rms_epsilon", "llama.rope.freq_base",
         "llama.rope.scaling.type", "llama.rope.scaling.factor", "tokenizer.ggml.bos_token_id",
         "tokenizer.ggml.eos_token_id", "tokenizer.ggml.padding_token_id", "tokenizer.ggml.add_bos_token",
         "tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.chat_template",
         "general.architecture", "general.name"]
_values = st.one_of(
    st.builds(Value, st.just(UINT32), st.integers(0, 2**32 - 1)),
    st.builds(Value, st.just(UINT32), st.sampled_from([0, 1, 2, 4, 8, 32, 64, 128, 265, 2**31])),
    st.builds(Value, st.just(INT32), st.integers(-(2**31), 2**31 - 1)),
    st.builds(Value, st.just(UINT64), st.integers(0, 2**64 - 1)),
    st.builds(Value, st.just(FLOAT32), st.floats(width=32)),
    st.builds(Value, st.just(STRING), st.sampled_from(["", "llama", "qwen3", "linear", "yarn", "x", "Ġ t"])),
    st.builds(Value, st.just(7), st.booleans()),
    st.builds(Value, st.just(ARRAY), st.tuples(st.just(UINT32), st.lists(st.integers(0, 300), max_size=4))),
    st.builds(Value, st.just(ARRAY), st.tuples(st.just(STRING), st.lists(st.sampled_from(["a", "Ġ t", "h e"]), max_size=4))),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.dictionaries(st.sampled_from(_KEYS), st.one_of(st.none(), _values), min_size=1, max_size=3))
def test_fuzzed_metadata_loads_sanely_or_fails_in_one_line(tmp_path, base, changes):
    """Any typed value (or none) for any key the reader uses: one line, or a config that makes sense."""
    parts = gguf_bytes.decode(base.encode())
    for key, value in changes.items():
        if value is None:
            parts.metadata.pop(key, None)
        else:
            parts.metadata[key] = value
    file = _write(tmp_path, parts.encode(pad_to=64))
    try:
        checkpoint = read_gguf(file)
    except CheckpointError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 400 and str(file) in str(exc)
        return
    c = checkpoint.config
    assert c["rms_norm_eps"] > 0 and math.isfinite(c["rms_norm_eps"])
    assert c["rope_theta"] > 0 and math.isfinite(c["rope_theta"])
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        assert c[key] is None or 0 <= c[key] < c["vocab_size"]
    assert c["num_attention_heads"] % c["num_key_value_heads"] == 0
    tensors = checkpoint.state_dict()
    assert tensors["model.embed_tokens.weight"].shape == (c["vocab_size"], c["hidden_size"])


@pytest.mark.parametrize("key", ["tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.chat_template"])
def test_text_that_is_not_utf8(tmp_path, parts, key):
    value = parts.metadata[key].value
    if key == "tokenizer.chat_template":
        parts.metadata[key] = Value(STRING, value + "\udcff")
        field = key
    else:
        value[1][3] = "\udcff" + value[1][3]
        field = f"{key}[3]"
    _refused(_write(tmp_path, parts.encode()), field, "not valid UTF-8")
