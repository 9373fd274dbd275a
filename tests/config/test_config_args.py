"""Input normalisation: JSON / YAML files, legacy flags, hyphens, fields given twice."""

from __future__ import annotations

import argparse
import json

import pytest

from specpath.config.args import (
    add_speculative_args,
    create_speculative_config,
    from_namespace,
    load_speculative_config_text,
    normalize_keys,
)
from specpath.config.model import ModelConfig
from specpath.errors import SpeculativeConfigError

pytestmark = pytest.mark.usefixtures("fake_builtins")


def test_json_text_and_files(tmp_path):
    assert load_speculative_config_text('{"method": "ngram"}') == {"method": "ngram"}
    (tmp_path / "c.yaml").write_text("method: ngram\nnum-speculative-tokens: 3\n")
    (tmp_path / "c.json").write_text(json.dumps({"method": "ngram", "num_speculative_tokens": 2}))
    spec = create_speculative_config(f"@{tmp_path / 'c.yaml'}")
    assert (spec.method, spec.num_speculative_tokens) == ("ngram", 3)
    assert create_speculative_config(f"@{tmp_path / 'c.json'}").num_speculative_tokens == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{bad json", "--speculative-config: invalid JSON"),
        ("[1, 2]", "must be a JSON/YAML object"),
        ("@missing.yaml", "cannot read file"),
        ("@config.toml", "must end in .json, .yaml or .yml"),
    ],
)
def test_bad_input_text(text, message):
    with pytest.raises(SpeculativeConfigError, match=message):
        create_speculative_config(text)


def test_bad_yaml(tmp_path):
    (tmp_path / "bad.yaml").write_text("method: [unclosed\n")
    with pytest.raises(SpeculativeConfigError, match="invalid YAML"):
        create_speculative_config(f"@{tmp_path / 'bad.yaml'}")


def test_hyphens_become_underscores_and_a_field_twice_is_an_error():
    assert normalize_keys({"num-speculative-tokens": 3, "method": "ngram"}) == {"num_speculative_tokens": 3, "method": "ngram"}
    with pytest.raises(SpeculativeConfigError, match="given twice \\(as 'prompt_lookup_max' and 'prompt-lookup-max'\\)"):
        normalize_keys({"prompt_lookup_max": 3, "prompt-lookup-max": 4})


def test_legacy_flags_merge_and_conflict():
    spec = create_speculative_config(spec_method="ngram", spec_tokens=4)
    assert (spec.method, spec.num_speculative_tokens) == ("ngram", 4)
    spec = create_speculative_config({"method": "ngram"}, spec_tokens=2)
    assert spec.num_speculative_tokens == 2
    with pytest.raises(SpeculativeConfigError) as info:
        create_speculative_config('{"num_speculative_tokens": 3}', spec_method="ngram", spec_tokens=2)
    assert str(info.value) == (
        "speculative_config.num_speculative_tokens: field given twice: --spec-tokens and --speculative-config"
    )
    spec = create_speculative_config(spec_model="[ngram]", spec_tokens=2)
    assert spec.method == "ngram"


def test_nothing_given_means_no_speculation():
    assert create_speculative_config() is None
    assert create_speculative_config("{}") is None


def test_target_configs_are_injected(make_checkpoint):
    target = ModelConfig(model=make_checkpoint("t"))
    spec = create_speculative_config('{"method": "ngram", "num_speculative_tokens": 2}', target_model_config=target)
    assert spec.target_model_config is target


def test_argparse_helpers():
    parser = argparse.ArgumentParser()
    add_speculative_args(parser)
    args = parser.parse_args(["--speculative-config", '{"method": "ngram"}', "--spec-tokens", "5"])
    assert from_namespace(args).num_speculative_tokens == 5
    with pytest.raises(SystemExit):
        parser.parse_args(["--spec-tokens", "three"])


def test_non_mapping_input():
    with pytest.raises(SpeculativeConfigError, match="must be a JSON string, @file or a mapping"):
        create_speculative_config(3)
