"""What the core reads of a draft checkpoint: its ``config.json``, and what it declares.

A leaf module (it imports only :mod:`specpath.errors`), so the hook specs, the config classes
and the resolution can all name :class:`DraftCheckpoint` without importing each other.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import attrs

from specpath.errors import SpeculativeConfigError

DECLARED_CLASS_KEY = "speculator_config_class"
"""Key of a draft ``config.json`` that declares its config class (a registered method name,
or with ``trust_remote_code`` a ``module:Class`` path)."""


@attrs.frozen
class DraftCheckpoint:
    """What detection hooks see of a draft checkpoint: its path and ``config.json``."""

    path: str | None
    config: Mapping[str, Any] = attrs.field(factory=dict)

    @property
    def model_type(self) -> str | None:
        value = self.config.get("model_type")
        return value if isinstance(value, str) else None

    @property
    def declared_class(self) -> Any:
        """The raw ``speculator_config_class`` value (None when the checkpoint declares none)."""
        return self.config.get(DECLARED_CLASS_KEY)

    @property
    def declared_field(self) -> str:
        """How errors name the declaration: ``<path>/config.json:speculator_config_class``."""
        return f"{self.path}/config.json:{DECLARED_CLASS_KEY}"


def load_hf_config(path: str, field: str = "model") -> dict[str, Any]:
    """``<path>/config.json`` as a dict, or a one-line error saying what is missing.

    Anything else an installed model source knows (a GGUF file, a named model: see
    :mod:`specpath.model_sources`) gives the HF config it describes.
    """
    if not isinstance(path, str) or not path:
        raise SpeculativeConfigError("must be a path to a local checkpoint directory", field=field, value=path)
    if not os.path.exists(path) or path.lower().endswith(".gguf"):
        gguf_config = _model_source_config(path, field)
        if gguf_config is not None:
            return gguf_config
    if not os.path.isdir(path):
        raise SpeculativeConfigError(
            "no such local checkpoint directory (specpath reads local Hugging Face checkpoints "
            "and never downloads)",
            field=field,
            value=path,
        )
    file = os.path.join(path, "config.json")
    if not os.path.isfile(file):
        raise SpeculativeConfigError("checkpoint directory has no config.json", field=field, value=path)
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise SpeculativeConfigError(f"cannot read config.json: {exc}", field=field, value=path) from None
    if not isinstance(data, dict):
        raise SpeculativeConfigError("config.json must hold a JSON object", field=field, value=path)
    return data


def _model_source_config(path: str, field: str) -> dict[str, Any] | None:
    """The HF config an installed model source gives ``path`` (a GGUF file, a named model: see
    :mod:`specpath.model_sources`); None when no source knows it."""
    from specpath import model_sources

    try:
        return model_sources.hf_config(path)
    except (FileNotFoundError, ValueError) as exc:  # a source's one-line error (CheckpointError is a ValueError)
        raise SpeculativeConfigError(str(exc), field=field, value=path) from None


def read_draft_checkpoint(model: str | None, draft_hf_config: Mapping[str, Any] | None = None) -> DraftCheckpoint | None:
    """The checkpoint behind ``model``: the already-read draft config when there is one, else
    ``<model>/config.json`` (an empty config when ``model`` has none, e.g. a path hint)."""
    if draft_hf_config is not None:
        return DraftCheckpoint(model, dict(draft_hf_config))
    if model is None:
        return None
    config: dict[str, Any] = {}
    if os.path.isfile(os.path.join(model, "config.json")):
        config = load_hf_config(model, field="speculative_config.model")
    return DraftCheckpoint(model, config)
