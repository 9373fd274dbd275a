"""``CustomClassSpeculatorConfig``: the custom_class row of the method table.

``model`` names the proposer class: ``"pkg.module.Class"`` or ``"pkg.module:Class"`` (a dotted
path with no ``/`` given as ``model`` with no ``method`` is detected as custom_class, as vLLM
does). Importing it runs its code, so resolution refuses it unless the target model config
says ``trust_remote_code``; with it, the class is imported at start-up and checked against
either contract, so a wrong path is a one-line error before any request.

Like vLLM's ngram and custom proposers it reads no hidden states and reserves nothing: the
drafts are known when the step is scheduled (lookahead 0, extra slots 0), one-hot, in the
target's vocabulary, any length up to K per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from specpath.config.speculator import SpeculatorConfig
from specpath.errors import SpeculativeConfigError

FIELD = "speculative_config.model"


def proposer_class(spec: Any) -> type:
    """Import the class ``spec.model`` names (only with trust_remote_code) and check that it
    follows one of the two contracts."""
    from specpath.factory import resolve_qualname
    from specpath.speculator import BaseSpeculator

    path = spec.model
    if not isinstance(path, str) or not path or "/" in path:
        raise SpeculativeConfigError(
            "must name the proposer class by import path ('pkg.module.Class' or 'pkg.module:Class')",
            field=FIELD, value=path,
        )
    target = spec.target_model_config
    if not (target is not None and target.trust_remote_code):
        raise SpeculativeConfigError(
            "method 'custom_class' imports and runs the proposer class named by model; it is only "
            "allowed with trust_remote_code=True (LLM(..., trust_remote_code=True), --trust-remote-code)",
            field=FIELD, value=path,
        )
    cls = resolve_qualname(path, field=FIELD)
    if not isinstance(cls, type):
        raise SpeculativeConfigError("is not a class", field=FIELD, value=path)
    if not issubclass(cls, BaseSpeculator) and not callable(getattr(cls, "propose", None)):
        raise SpeculativeConfigError(
            "is neither a specpath.speculator.BaseSpeculator nor a vLLM custom proposer (a class with "
            "propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=None))",
            field=FIELD, value=path,
        )
    return cls


@attrs.frozen(kw_only=True)
class CustomClassSpeculatorConfig(SpeculatorConfig):
    """A proposer class named by import path, run through specpath's contract or vLLM's."""

    base_method = "custom_class"
    speculator_class = "specpath_custom_class.speculator:CustomClassSpeculator"
    supported_options = frozenset({"speculator_options"})
    """Free-form options for the proposer (it reads them from its config)."""
    supports_variable_draft_length = True

    @classmethod
    def configure(cls, spec: Any) -> Mapping[str, Any]:
        proposer_class(spec)  # fail at start-up, in one line, not at the first step
        return super().configure(spec)

    @property
    def proposer_path(self) -> str:
        """The import path of the proposer class."""
        return self.spec.model
