"""How an EAGLE-3 head (and a P-EAGLE one: EAGLE-3 plus parallel drafting) is recognised: from
its ``config.json`` (architectures, ``model_type``, the speculators-format
``speculators_model_type``), else from vLLM's path hint ``eagle3``. Pure functions: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specpath_drafting.config import checkpoint_names


def is_eagle3_checkpoint(config: Mapping[str, Any]) -> bool:
    """An EAGLE-3 head from its ``config.json`` alone (SpecForge's ``PEagleDraftModel`` and
    speculators' ``peagle`` included); no path guessing."""
    kinds, archs = checkpoint_names(config)
    return bool({"eagle3", "peagle"} & set(kinds)) or any("eagle3" in a or a.startswith("peagle") for a in archs)


def says_eagle(config: Mapping[str, Any]) -> bool:
    """Whether the ``config.json`` names any EAGLE head (1 or 3; every EAGLE-3 marker contains
    ``eagle``): then no path hint is asked."""
    kinds, archs = checkpoint_names(config)
    return bool({"eagle", "eagle3", "peagle"} & set(kinds)) or any("eagle" in a for a in archs)


def path_says_eagle3(path: str | None) -> bool:
    """vLLM's path hint for EAGLE-3: ``"eagle3"``, unless ``"eagle-"`` (EAGLE-1's, tried first)
    is in the same path."""
    name = str(path or "").lower()
    return "eagle3" in name and "eagle-" not in name
