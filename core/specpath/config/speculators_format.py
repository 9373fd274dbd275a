"""The speculators checkpoint format (vllm-project/speculators), read as the ecosystem reads it.

A speculators checkpoint is a draft whose ``config.json`` carries ``speculators_config``:
the ``algorithm`` it implements, the ``proposal_methods`` it was trained for (each with its
``speculative_tokens``; ``default_proposal_method`` names the one to use) and the
``verifier`` (the target: ``name_or_path``, ``architectures``). Two uses follow, as in vLLM:

- **as a draft** (``speculative_config.model``): K defaults to the proposal's
  ``speculative_tokens`` (:func:`declared_num_speculative_tokens`);
- **as the served model** (``LLM(model=<speculator>)``): the target becomes the verifier, and
  the speculative config is filled from the checkpoint -- method = ``algorithm``, model = the
  speculator, K from the proposal -- unless the user gave those fields
  (:func:`maybe_override_with_speculators`, vLLM's function of the same name).

The algorithm name is data from the checkpoint, validated like any method name by the
resolution that follows; nothing here branches on a method.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from specpath.errors import SpeculativeConfigError
from specpath.hub import resolve_model_path

ALGORITHM_METHODS: Mapping[str, tuple[str, dict[str, Any]]] = {
    "peagle": ("eagle3", {"parallel_drafting": True}),
}
"""speculators algorithm names that are a specpath method plus settings (P-EAGLE is EAGLE-3
with parallel drafting, as vLLM's speculators mapping has it); others are method names."""


def speculators_section(config: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ``speculators_config`` mapping of a checkpoint config, or None."""
    section = config.get("speculators_config")
    return section if isinstance(section, Mapping) else None


def _proposal(section: Mapping[str, Any]) -> Mapping[str, Any] | None:
    methods = [m for m in section.get("proposal_methods") or () if isinstance(m, Mapping)]
    if not methods:
        return None
    wanted = section.get("default_proposal_method")
    chosen = next((m for m in methods if wanted is not None and m.get("proposal_type") == wanted), None)
    return chosen or methods[0]


def declared_num_speculative_tokens(config: Mapping[str, Any]) -> int | None:
    """K a speculators checkpoint was trained for (its default proposal), or None."""
    section = speculators_section(config)
    proposal = None if section is None else _proposal(section)
    value = None if proposal is None else proposal.get("speculative_tokens")
    return value if type(value) is int and value > 0 else None


def _read_config(path: str) -> Mapping[str, Any] | None:
    file = os.path.join(path, "config.json")
    if not os.path.isfile(file):
        return None
    try:
        with open(file, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, Mapping) else None


def maybe_override_with_speculators(
    model: str | None, speculative_config: Mapping[str, Any] | None, *, field: str = "model"
) -> tuple[str | None, dict[str, Any] | None]:
    """``(target, speculative_config)`` for a served ``model``: unchanged unless ``model`` is a
    speculators checkpoint, in which case the target is its verifier and the speculative
    config gains ``method``, ``model`` and ``num_speculative_tokens`` from the checkpoint
    (fields the user gave win). ``speculative_config`` must be a mapping or None here."""
    spec = None if speculative_config is None else dict(speculative_config)
    if not isinstance(model, str):
        return model, spec
    local = resolve_model_path(model, field=field)
    config = _read_config(local)
    section = None if config is None else speculators_section(config)
    if section is None:
        return model, spec
    verifier = section.get("verifier")
    target = verifier.get("name_or_path") if isinstance(verifier, Mapping) else None
    if not isinstance(target, str) or not target:
        raise SpeculativeConfigError(
            f"is a speculators checkpoint whose speculators_config.verifier.name_or_path is missing; "
            "pass the target model and give this checkpoint as speculative_config.model",
            field=field,
            value=model,
        )
    algorithm = section.get("algorithm") or config.get("speculators_model_type")
    filled: dict[str, Any] = {"model": local}
    if isinstance(algorithm, str):
        method, extra = ALGORITHM_METHODS.get(algorithm, (algorithm, {}))
        filled.update({"method": method, **extra})
    k = declared_num_speculative_tokens(config)
    if k is not None:
        filled["num_speculative_tokens"] = k
    spec = {**filled, **(spec or {})}
    return target, spec
