"""What an engine does with the draft-side overrides ``attention_backend``, ``kv_cache_dtype``
and ``moe_backend``: applied, ignored with a reason, or refused.

The core validates and hashes these fields but runs no kernels, so only an engine can say what
they resolve to. An engine distribution declares one callable in the ``specpath.engines``
entry-point group::

    [project.entry-points."specpath.engines"]
    reference = "specpath_engine.draft_overrides:describe"

``describe(spec) -> Sequence[AppliedField]`` (one row per field, importing nothing heavy) is what
``specpath explain`` prints. An engine that cannot apply a field says so in its row; the
policy every engine follows is :data:`WHEN_NOT_APPLICABLE`: a field that would change the
drafter's numerics or memory (the attention kernels, the KV dtype) is **refused** at start-up in
one line, a field with nothing to act on (a MoE backend for a drafter without experts) is
**ignored** with the reason shown.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from importlib import metadata
from typing import Any, Literal

import attrs

GROUP = "specpath.engines"
DRAFT_OVERRIDES = ("attention_backend", "kv_cache_dtype", "moe_backend")
"""The fields an engine applies on the drafter's side (``SpeculativeConfig`` group ``overrides``)."""

Outcome = Literal["applied", "ignored", "refused"]
WHEN_NOT_APPLICABLE: dict[str, Outcome] = {
    "attention_backend": "refused",
    "kv_cache_dtype": "refused",
    "moe_backend": "ignored",
}
"""What an engine does with a value it cannot apply (see the module docstring)."""


@attrs.frozen(kw_only=True)
class AppliedField:
    """One override as an engine resolves it."""

    field: str
    requested: Any
    """The user's value (None: not set, the target's / the drafter's own)."""
    resolved: str
    """What it amounts to in this engine, in words (``"native"``, ``"bfloat16"``...)."""
    outcome: Outcome
    note: str = ""
    """Why (the reason a value is ignored or refused, or how ``auto`` decides)."""

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


Describer = Callable[[Any], Sequence[AppliedField]]
NO_ENGINE = "none"
"""The key of :func:`describe_overrides` when no engine is installed (the core alone)."""


def engines() -> dict[str, Describer]:
    """The installed engines' describers by entry-point name (a broken one is skipped)."""
    found: dict[str, Describer] = {}
    for entry_point in sorted(metadata.entry_points(group=GROUP), key=lambda ep: ep.name):
        try:
            found[entry_point.name] = entry_point.load()
        except Exception:  # noqa: BLE001 - a broken engine must not break `specpath explain`
            continue
    return found


def describe_overrides(spec: Any) -> dict[str, list[dict[str, Any]]]:
    """Each installed engine's rows for ``spec``; with no engine installed, the policy alone."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, describe in engines().items():
        out[name] = [row.as_dict() for row in describe(spec)]
    if not out:
        out[NO_ENGINE] = [
            AppliedField(field=f, requested=getattr(spec, f), resolved="-", outcome=WHEN_NOT_APPLICABLE[f],
                         note=f"an engine that cannot apply it: {WHEN_NOT_APPLICABLE[f]}").as_dict()
            for f in DRAFT_OVERRIDES
        ]
    return out
