"""The engine's model source (see :mod:`specpath.model_sources`): GGUF files and named models
(``embedded``, the engine's default model, among them)."""

from __future__ import annotations

import json
import os
from typing import Any

from specpath_engine.modeling.named_models import EMBEDDED, NAMED_MODELS, named_model, resolve_model_path


def hf_config(model: str) -> dict[str, Any] | None:
    """The HF config a GGUF file or a named model's file describes; None for anything else."""
    name = None if os.path.exists(model) else named_model(model)
    if name == EMBEDDED:
        return json.loads((resolve_model_path(None) / "config.json").read_text())
    if not os.path.isfile(model) and name not in NAMED_MODELS:
        return None
    resolved = resolve_model_path(model)
    if resolved.is_dir():
        return None
    from specpath_engine.modeling.gguf import read_gguf

    return read_gguf(resolved).config
