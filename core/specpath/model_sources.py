"""Model sources: where a ``model`` that is not a ``config.json`` directory gets its HF config.

An engine distribution that can read other kinds of checkpoints (a GGUF file, a model known by
name) declares a callable in the ``specpath.model_sources`` entry-point group::

    [project.entry-points."specpath.model_sources"]
    gguf = "specpath_engine.modeling.source:hf_config"

``hf_config(model: str) -> dict | None`` returns the HF ``config.json`` the model amounts to, or
None when it is not one of its kinds; it raises ``ValueError`` or ``FileNotFoundError`` with a
one-line message for one of its kinds that cannot be read. Sources are asked in entry-point name
order; the core itself imports no engine.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from importlib import metadata
from typing import Any

GROUP = "specpath.model_sources"

Source = Callable[[str], "dict[str, Any] | None"]


@cache
def sources() -> tuple[Source, ...]:
    """The installed sources, loaded once, in entry-point name order (a broken one is skipped)."""
    loaded = []
    for entry_point in sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name):
        try:
            loaded.append(entry_point.load())
        except Exception:  # noqa: BLE001 - a broken source must not break config resolution
            continue
    return tuple(loaded)


def hf_config(model: str) -> dict[str, Any] | None:
    """The HF config the first source that knows ``model`` gives, or None when none does."""
    for source in sources():
        config = source(model)
        if config is not None:
            return config
    return None
