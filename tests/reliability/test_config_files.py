"""``--speculative-config`` text and ``@file``: every bad input is one SpeculativeConfigError line,
fast, with bounded memory; never a hang, a blow-up or a traceback."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specpath.config.args import create_speculative_config, load_speculative_config_text
from specpath.config.loading import MAX_CONFIG_BYTES
from specpath.errors import SpeculativeConfigError


def _one_line_error(text: str, match: str | None = None) -> str:
    with pytest.raises(SpeculativeConfigError) as failure:
        load_speculative_config_text(text)
    message = str(failure.value)
    assert "\n" not in message and len(message) < 400, message
    if match is not None:
        assert match in message, message
    return message


def _file(tmp_path, name: str, content: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return "@" + str(path)


def test_only_regular_files(tmp_path):
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    _one_line_error(f"@{fifo}", "not a regular file")  # would block forever if opened for reading
    link = tmp_path / "zero.yaml"
    link.symlink_to("/dev/zero")
    _one_line_error(f"@{link}", "not a regular file")
    (tmp_path / "dir.json").mkdir()
    _one_line_error(f"@{tmp_path / 'dir.json'}", "not a regular file")
    _one_line_error(f"@{tmp_path / 'missing.json'}", "cannot read file")


def test_size_cap(tmp_path):
    _one_line_error(_file(tmp_path, "big.json", b" " * (MAX_CONFIG_BYTES + 1) + b"{}"), "too large")
    _one_line_error(" " * (MAX_CONFIG_BYTES + 1) + "{}", "too large")


def test_not_utf8(tmp_path):
    _one_line_error(_file(tmp_path, "latin.yaml", b'method: "ngr\xe4m"\n'), "not UTF-8")
    _one_line_error(_file(tmp_path, "latin.json", b'{"method": "\xff"}'), "not UTF-8")


@pytest.mark.parametrize("depth", [40, 1_000, 100_000])
def test_deep_json(depth):
    _one_line_error('{"speculator_options": ' + "[" * depth + "]" * depth + "}", "nested too deeply")


@pytest.mark.parametrize("depth", [40, 500, 5_000])
def test_deep_yaml(tmp_path, depth):
    _one_line_error(_file(tmp_path, "deep.yaml", "speculator_options: " + "[" * depth + "]" * depth), "nested too deeply")


def test_yaml_alias_bomb(tmp_path):
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, 10):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    lines.append("speculator_options: {x: *a9}")
    _one_line_error(_file(tmp_path, "lol.yaml", "\n".join(lines)), "aliases")


def test_huge_integers(tmp_path):
    digits = "9" * 5_000
    _one_line_error(f'{{"num_speculative_tokens": {digits}}}', "invalid JSON")
    _one_line_error(_file(tmp_path, "int.yaml", f"num_speculative_tokens: {digits}\n"), "invalid YAML")
    with pytest.raises(SpeculativeConfigError, match="integer too large"):
        create_speculative_config({"method": "ngram", "num_speculative_tokens": 10**5000})


def test_self_referential(tmp_path):
    _one_line_error(_file(tmp_path, "loop.yaml", "method: ngram\nspeculator_options: &o {inner: *o}\n"), "contains itself")
    config: dict = {"method": "ngram"}
    config["speculator_options"] = {"again": config}
    with pytest.raises(SpeculativeConfigError, match="contains itself"):
        create_speculative_config(config)


def test_duplicate_keys(tmp_path):
    _one_line_error('{"method": "ngram", "method": "eagle"}', "key given twice")
    _one_line_error(_file(tmp_path, "dup.yaml", "method: ngram\nmethod: eagle\n"), "key given twice")
    _one_line_error(_file(tmp_path, "dup.json", '{"a": {"x": 1, "x": 2}}'), "key given twice")


def test_nan_literal_is_not_json():
    _one_line_error('{"num_speculative_tokens": NaN}', "invalid JSON")


def test_a_good_file_still_loads(tmp_path):
    assert load_speculative_config_text(_file(tmp_path, "ok.yaml", "method: ngram\nnum_speculative_tokens: 3\n")) == {
        "method": "ngram", "num_speculative_tokens": 3}
    assert load_speculative_config_text(json.dumps({"method": "ngram"})) == {"method": "ngram"}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(content=st.binary(max_size=200) | st.text(max_size=200).map(str.encode), ext=st.sampled_from([".json", ".yaml"]))
def test_fuzzed_files_load_or_fail_in_one_line(tmp_path, content, ext):
    text = _file(tmp_path, "fuzz" + ext, content)
    try:
        data = load_speculative_config_text(text)
    except SpeculativeConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(data, dict)


yaml_fragments = st.lists(st.sampled_from([
    "method: ngram\n", "num_speculative_tokens: 4\n", "a: &x [1, 2]\n", "b: *x\n", "c: {d: *x}\n", "- 1\n", "[",
    "]", "{", "}", ": ", "&y ", "*y", "!!python/object:os.system\n", "method: ngram\n", "\t", "'", '"', "? ", "<<: *x\n",
    "9" * 50, "\xff", ".nan", "~", "e: !!binary aGVsbG8=\n",
]), max_size=12).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=yaml_fragments)
def test_fuzzed_yaml_structures_load_or_fail_in_one_line(tmp_path, text):
    try:
        data = load_speculative_config_text(_file(tmp_path, "frag.yaml", text))
    except SpeculativeConfigError as exc:
        assert "\n" not in str(exc)
    else:
        assert isinstance(data, dict)
