"""specpath's embedded default target: where it lives, and whether a configuration targets it
(the model the shipped drafters were trained for). Torch-free, so config code can ask."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def embedded_target_path() -> Path:
    """The embedded byte-level model's directory (package data of the core)."""
    return Path(__file__).resolve().parent.parent / "assets" / "default_model"


def is_embedded_target(path: Any) -> bool:
    """``path`` is the embedded model's directory."""
    try:
        return Path(path).resolve() == embedded_target_path()
    except (OSError, TypeError):
        return False


def targets_embedded_model(spec: Any) -> bool:
    """True when no target is known yet or the target is the embedded model."""
    target = spec.target_model_config
    return target is None or is_embedded_target(target.model)
