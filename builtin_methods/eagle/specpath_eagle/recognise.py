"""How an EAGLE-1 head is recognised: from its ``config.json`` (architectures, ``model_type``,
the speculators-format ``speculators_model_type``), else from vLLM's path hint ``eagle-``.

An EAGLE-3 head also says "eagle" (``Eagle3LlamaForCausalLM``), so EAGLE-1 is the EAGLE
evidence of a checkpoint that names none of EAGLE-3's markers (``eagle3``, P-EAGLE's
``peagle``): those heads are the eagle3 plugin's to recognise. Pure functions: no torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specpath_drafting.config import checkpoint_names


def names_eagle3(config: Mapping[str, Any]) -> bool:
    """Whether the checkpoint says it is an EAGLE-3 (or P-EAGLE) head: never EAGLE-1's."""
    kinds, archs = checkpoint_names(config)
    return bool({"eagle3", "peagle"} & set(kinds)) or any("eagle3" in a or a.startswith("peagle") for a in archs)


def is_eagle_checkpoint(config: Mapping[str, Any]) -> bool:
    """An EAGLE-1 head from its ``config.json`` alone; no path guessing."""
    kinds, archs = checkpoint_names(config)
    return not names_eagle3(config) and ("eagle" in kinds or any("eagle" in a for a in archs))


def says_eagle(config: Mapping[str, Any]) -> bool:
    """Whether the ``config.json`` names any EAGLE head (1 or 3): then no path hint is asked."""
    return is_eagle_checkpoint(config) or names_eagle3(config)


def path_says_eagle(path: str | None) -> bool:
    """vLLM's path hint for EAGLE-1 (``"eagle-"``); it wins over ``"eagle3"`` in the same path."""
    return "eagle-" in str(path or "").lower()
