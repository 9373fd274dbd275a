"""Command-line and file input -> ``SpeculativeConfig``.

``--speculative-config`` takes JSON, or ``@file.yaml`` / ``@file.json``. The legacy flags
``--spec-method``, ``--spec-model`` and ``--spec-tokens`` are merged into it; a field given
both ways is an error, and ``-`` in keys becomes ``_``. Parsing keeps the value a raw string
until the target model is known, because resolution needs the target's configs.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Mapping
from typing import Any

from specpath.config.model import ModelConfig, ParallelConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError, closest_match

LEGACY_FLAGS: dict[str, str] = {
    "spec_method": "method",
    "spec_model": "model",
    "spec_tokens": "num_speculative_tokens",
}
"""Legacy flag (argparse dest) -> speculative config field."""


def load_speculative_config_text(text: str, source: str = "--speculative-config") -> dict[str, Any]:
    """Parse ``--speculative-config``: a JSON object, or ``@path`` to a .json/.yaml/.yml file.
    ``source`` labels the errors (where the text came from, e.g. an environment variable).

    Files and text are read through :mod:`specpath.config.loading`, so a FIFO, a device, a huge
    or non-UTF-8 file, an alias bomb, duplicate keys or absurd nesting is one line, never a hang,
    a memory blow-up or a traceback."""
    from specpath.config.loading import parse_json, parse_yaml, read_config_file

    if text.startswith("@"):
        path = text[1:]
        ext = os.path.splitext(path)[1].lower()
        if ext not in (".json", ".yaml", ".yml"):
            raise SpeculativeConfigError("a config file must end in .json, .yaml or .yml", field=source, value=text)
        text = read_config_file(path, source)
        source = path
        if ext != ".json":
            return _require_mapping(parse_yaml(text, source), source)
    return _require_mapping(parse_json(text, source), source)


def _require_mapping(data: Any, source: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise SpeculativeConfigError("must be a JSON/YAML object of fields", field=source, value=data)
    return data


def normalize_keys(data: Mapping[str, Any], source: str = "--speculative-config") -> dict[str, Any]:
    """``-`` -> ``_`` in top-level keys; two spellings of one field are an error."""
    out: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in data.items():
        if not isinstance(key, str):
            raise SpeculativeConfigError("keys must be strings", field=source, value=key)
        name = key.replace("-", "_")
        if name in out:
            raise SpeculativeConfigError(
                f"field given twice (as {spelled[name]!r} and {key!r})", field=f"speculative_config.{name}"
            )
        out[name] = value
        spelled[name] = key
    return out


def merge_legacy(data: Mapping[str, Any], **legacy: Any) -> dict[str, Any]:
    """Merge ``spec_method`` / ``spec_model`` / ``spec_tokens`` into the config dict."""
    out = dict(data)
    for flag, value in legacy.items():
        if flag not in LEGACY_FLAGS:
            raise SpeculativeConfigError("unknown legacy flag", field="speculative_config", value=flag,
                                         allowed=sorted(LEGACY_FLAGS), suggestion=closest_match(flag, LEGACY_FLAGS))
        if value is None:
            continue
        name = LEGACY_FLAGS[flag]
        if name in out:
            raise SpeculativeConfigError(
                f"field given twice: --{flag.replace('_', '-')} and --speculative-config",
                field=f"speculative_config.{name}",
            )
        out[name] = value
    return out


def create_speculative_config(
    speculative_config: str | Mapping[str, Any] | None = None,
    *,
    spec_method: str | None = None,
    spec_model: str | None = None,
    spec_tokens: int | None = None,
    target_model_config: ModelConfig | None = None,
    target_parallel_config: ParallelConfig | None = None,
) -> SpeculativeConfig | None:
    """Normalise every input form and resolve a ``SpeculativeConfig`` against the target.
    Returns None when nothing asks for speculation."""
    if isinstance(speculative_config, str):
        data = load_speculative_config_text(speculative_config)
    elif speculative_config is None:
        data = {}
    elif isinstance(speculative_config, Mapping):
        data = dict(speculative_config)  # values are checked where every entry is: SpeculativeConfig's constructor
    else:
        raise SpeculativeConfigError(
            "must be a JSON string, @file or a mapping", field="speculative_config", value=speculative_config
        )
    data = merge_legacy(normalize_keys(data), spec_method=spec_method, spec_model=spec_model, spec_tokens=spec_tokens)
    if not data:
        return None
    return SpeculativeConfig.from_dict(
        data, target_model_config=target_model_config, target_parallel_config=target_parallel_config
    )


def _tokens(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def add_speculative_args(parser: argparse.ArgumentParser) -> None:
    """Add ``--speculative-config`` and the legacy flags to a parser (values stay raw)."""
    group = parser.add_argument_group("speculative decoding")
    group.add_argument(
        "--speculative-config",
        metavar="JSON|@FILE",
        help='speculative config as JSON (\'{"method": "ngram", "num_speculative_tokens": 4}\') '
        "or @file.yaml / @file.json",
    )
    group.add_argument("--spec-method", help="legacy: the method (same as the 'method' field)")
    group.add_argument("--spec-model", help="legacy: the draft model (same as 'model')")
    group.add_argument("--spec-tokens", type=_tokens, help="legacy: K (same as 'num_speculative_tokens')")


def from_namespace(
    args: argparse.Namespace,
    *,
    target_model_config: ModelConfig | None = None,
    target_parallel_config: ParallelConfig | None = None,
) -> SpeculativeConfig | None:
    """``create_speculative_config`` from a namespace built by :func:`add_speculative_args`."""
    return create_speculative_config(
        args.speculative_config,
        spec_method=args.spec_method,
        spec_model=args.spec_model,
        spec_tokens=args.spec_tokens,
        target_model_config=target_model_config,
        target_parallel_config=target_parallel_config,
    )
