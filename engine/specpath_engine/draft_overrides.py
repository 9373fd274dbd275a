"""The reference engine's drafter-side overrides: ``attention_backend``, ``kv_cache_dtype`` and
``moe_backend`` of the speculative config, as this engine applies them.

- ``attention_backend``: the engine has two attention kernels for a drafter's own KV, the native
  CPU one (:mod:`specpath_engine.modeling.native`, bf16, one request per pass) and torch's.
  ``auto`` (None) takes the native one wherever a pass fits it, ``native`` the same but refused at
  start-up where it can never run, ``torch`` / ``torch_sdpa`` torch's only. Any other name is
  refused: running another kernel than the one asked for would be a silent change.
- ``kv_cache_dtype``: the drafter KV's dtype among the engine's float types; ``auto`` (None)
  keeps the drafter's own dtype. Others (``fp8``...) are refused in one line.
- ``moe_backend``: the engine's drafters have no MoE layers, so it is ignored, with that reason.

A model-free method (``model_free``), or one that drafts nothing, has no drafter KV and no
attention: both are ignored. The
bridges run the same drafters inside other engines and lend the same choices.
Resolution (:func:`resolve`) and description (:func:`describe`, the ``specpath.engines`` entry
point ``specpath explain`` reads) import no torch; :func:`kv_settings` is what a speculator calls
when it allocates its KV.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from specpath.config.applied import AppliedField
from specpath.errors import SpeculativeConfigError
from specpath_engine.dtype import _ALIASES, ENGINE_DTYPES

if TYPE_CHECKING:  # pragma: no cover
    import torch

ATTENTION_BACKENDS = {"auto": "auto", "native": "native", "torch": "torch", "torch_sdpa": "torch"}
"""The names this engine applies, and the kernel choice each stands for."""
KV_CACHE_DTYPES = ENGINE_DTYPES
"""``auto`` (the drafter's dtype) and the engine's float types."""
_NO_MOE = "the reference engine's drafters have no MoE layers"
_MODEL_FREE = "a model-free method keeps no drafter KV and runs no attention"
_NO_DRAFTS = "the method drafts nothing, so it keeps no drafter KV"


def _not_applicable(spec: Any) -> str | None:
    """Why a method has no drafter attention or KV to apply the choices to (capability flags)."""
    flags = spec.speculator_config
    if flags.model_free:
        return _MODEL_FREE
    return None if flags.proposes_draft_tokens else _NO_DRAFTS


@attrs.frozen(kw_only=True)
class DraftOverrides:
    """The resolved choices, as the engine lends them in ``SpeculatorContext``."""

    attention: str = "auto"
    """``auto``, ``native`` or ``torch``."""
    kv_cache_dtype: str | None = None
    """A float type name, or None: the drafter's own dtype."""

    def context_fields(self) -> dict[str, Any]:
        """The ``SpeculatorContext`` fields that lend these choices to the speculator."""
        return {"draft_attention": self.attention, "draft_kv_dtype": self.kv_cache_dtype}


def _attention(spec: Any) -> str:
    name = spec.attention_backend or "auto"
    if name not in ATTENTION_BACKENDS:
        raise SpeculativeConfigError(
            "is not an attention backend of the reference engine (it has its native CPU kernel and torch's)",
            field="speculative_config.attention_backend", value=name, allowed=list(ATTENTION_BACKENDS))
    return ATTENTION_BACKENDS[name]


def _kv_cache_dtype(spec: Any) -> str | None:
    name = spec.kv_cache_dtype or "auto"
    name = _ALIASES.get(name, name)
    if name not in KV_CACHE_DTYPES:
        raise SpeculativeConfigError(
            "is not a KV dtype of the reference engine", field="speculative_config.kv_cache_dtype",
            value=spec.kv_cache_dtype, allowed=list(KV_CACHE_DTYPES))
    return None if name == "auto" else name


def resolve(spec: Any) -> DraftOverrides:
    """The choices for ``spec``; a value the engine cannot apply is refused (one line)."""
    if _not_applicable(spec) is not None:
        return DraftOverrides()
    return DraftOverrides(attention=_attention(spec), kv_cache_dtype=_kv_cache_dtype(spec))


def describe(spec: Any) -> list[AppliedField]:
    """One row per override for ``specpath explain`` (the ``specpath.engines`` entry point)."""
    rows = []
    why_not = _not_applicable(spec)
    for field, pick, words in (
        ("attention_backend", _attention, {"auto": "native where a pass fits its kernel, else torch",
                                           "native": "native (one-request bf16 passes), else torch",
                                           "torch": "torch"}),
        ("kv_cache_dtype", _kv_cache_dtype, {None: "the drafter's dtype"}),
    ):
        requested = getattr(spec, field)
        if why_not is not None:
            rows.append(AppliedField(field=field, requested=requested, resolved="-", outcome="ignored",
                                     note=why_not))
            continue
        try:
            value = pick(spec)
        except SpeculativeConfigError as exc:
            allowed = "" if exc.allowed is None else f"; allowed: {', '.join(map(str, exc.allowed))}"
            rows.append(AppliedField(field=field, requested=requested, resolved="-", outcome="refused",
                                     note=exc.problem + allowed))
            continue
        rows.append(AppliedField(field=field, requested=requested, resolved=str(value), outcome="applied",
                                 note=words.get(value, "")))
    rows.append(AppliedField(field="moe_backend", requested=spec.moe_backend, resolved="-", outcome="ignored",
                             note=_NO_MOE))
    return rows


@attrs.frozen(kw_only=True)
class KVSettings:
    """How a speculator allocates and reads its own KV."""

    dtype: torch.dtype
    native: bool
    """The native attention may run (where a pass fits it); False: torch's always."""


def kv_settings(context: Any, dtype: torch.dtype) -> KVSettings:
    """The drafter KV's dtype (``context.draft_kv_dtype``, else ``dtype``, the drafter's) and
    whether its attention may take the native kernel; ``native`` asked for where the kernel can
    never run (no kernels built, a KV that is not bf16, not on the CPU) is refused."""
    import torch

    from specpath_engine.modeling import native
    from specpath_engine.modeling.dtypes import torch_dtype

    choice = getattr(context, "draft_attention", "auto")
    kv_dtype = torch_dtype(getattr(context, "draft_kv_dtype", None), default=dtype)
    if choice == "native":
        why = None
        if kv_dtype is not torch.bfloat16:
            why = f"its kernel reads a bfloat16 KV, this drafter's is {str(kv_dtype).removeprefix('torch.')}"
        elif torch.device(context.device).type != "cpu":
            why = f"its kernel runs on the CPU, this drafter runs on {context.device}"
        elif native.kernels() is None:
            why = f"the native kernels are unavailable: {native.unavailable_reason()}"
        if why is not None:
            raise SpeculativeConfigError(f"'native' cannot run here: {why}",
                                         field="speculative_config.attention_backend", value="native")
    return KVSettings(dtype=kv_dtype, native=choice != "torch")
