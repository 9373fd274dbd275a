"""``MTPSpeculatorConfig`` and ``MultiModuleMTPSpeculatorConfig``: the MTP rows of the method table.

An MTP drafter reads the target's hidden states, writes K draft positions into its own KV
(lookahead K), takes shifted input like EAGLE (0 extra slots), and its KV at p depends on the
token after p (the prefix cache drops the tail block). A single module is reused K times and
needs one token past a prefill chunk; with several modules, module k reads the token k+1
positions ahead, so a chunk boundary needs K tokens of lookahead, and the modules' KV does not
split over prefill context parallelism.

Where the weights live. The article's rule is kept: with no ``model``, an MTP draft defaults
to the *target's* weights path (``model_weights`` when the loader rewrote ``model``), because
MTP modules normally ship inside the target checkpoint. The embedded default target carries no
MTP modules (its directory belongs to the core), so this plugin ships them beside it as
package data: ``checkpoints/mtp1`` (one module) and ``checkpoints/mtp3`` (three), each a
``config.json`` with the target's architecture fields plus ``num_nextn_predict_layers`` and
``model_type: "mtp"``, and a ``model.safetensors`` holding only the ``mtp.{i}.*`` tensors (the
embedding and head are the target's). ``default_model`` picks ``mtp1`` for the embedded target.

Attrs only: importing this module must not import torch.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from specpath.config.shipped import EMBEDDED_TARGET, SMOLLM2_135M, ShippedCheckpoint
from specpath.errors import SpeculativeConfigError
from specpath_drafting.config import HiddenStateDrafterConfig
from specpath_mtp.recognise import MTP_MODEL_TYPES, mtp_layer_count  # noqa: F401 (MTP_MODEL_TYPES re-exported)

CHECKPOINTS_DIR = Path(__file__).resolve().parent / "checkpoints"
"""Trained MTP modules for specpath's embedded default target (package data)."""
MTP1 = CHECKPOINTS_DIR / "mtp1"
"""One module (``n_predict`` 1), reused for every draft."""
MTP3 = CHECKPOINTS_DIR / "mtp3"
"""Three modules (``n_predict`` 3), module k drafting token k."""
MTP1_SMOLLM2 = CHECKPOINTS_DIR / "mtp1-smollm2"
"""One module for SmolLM2-135M-Instruct (its embedding and head shared; drafts over the 4,096
training-vocabulary ids its config records)."""



def declared_modules(config: Mapping[str, Any]) -> int:
    """MTP modules a checkpoint config declares: a recognised MTP checkpoint's layer count
    (``num_nextn_predict_layers``, ``mtp_num_hidden_layers``, ... top-level or nested; 1 when
    its type gives none), else ``num_nextn_predict_layers`` / ``n_predict`` (0 when neither is
    a positive int)."""
    count = mtp_layer_count(config)
    if count > 0:
        return count
    for key in ("num_nextn_predict_layers", "n_predict"):
        value = config.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def target_carries_modules(target: Any) -> bool:
    """The target checkpoint declares MTP modules of its own (DeepSeek-style)."""
    return target is not None and declared_modules(target.hf_config) > 0


@attrs.frozen(kw_only=True)
class MTPSpeculatorConfig(HiddenStateDrafterConfig):
    """MTP with one module (DeepSeek-V3's ``num_nextn_predict_layers = 1``), reused K times,
    each step feeding it its own output hidden state. ``model`` is the directory holding the
    modules (by default the target's own weights path; see the module docstring)."""

    base_method = "mtp"
    speculator_class = "specpath_mtp.speculator:MTPSpeculator"
    supported_options = frozenset({"index_share_for_mtp_iteration", "draft_tree_topk"})
    supports_pcp = True
    """One module with one KV over the target's positions: splits like the target's prefill."""
    shipped_checkpoints = (ShippedCheckpoint(EMBEDDED_TARGET, MTP1),
                           ShippedCheckpoint(SMOLLM2_135M, MTP1_SMOLLM2, model_free="suffix", tree=(6, 2)))
    """SmolLM2-135M's module drafts with suffix decoding beside it: held-out τ at K=4 1.91 -> 2.23
    (24 prompts, bf16; docs/benchmarks-history.md, 2026-12-05); as a tree of 6 nodes, 2 per pass,
    where trees are verified: τ 2.19 -> 2.21-2.31, +1% tokens/s over the K=4 chain."""
    shipped_drafter_k = 4
    shipped_drafter_quantization = "int8"
    """Measured: K=4 drafting costs ~0.7x bf16's at the same acceptance (benchmarks/draft_cost.py)."""
    """The best K = 1..4 measured for the one module."""

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        """The module at p reads the token at p+1."""
        return 1

    @property
    def num_modules(self) -> int:
        """MTP modules in the checkpoint (``n_predict``)."""
        draft = self.spec.draft_model_config
        return 0 if draft is None else declared_modules(draft.hf_config)

    # -- class hooks ----------------------------------------------------------------------

    @classmethod
    def default_model(cls, spec: Any) -> str | None:
        """The target's weights path when the target carries MTP modules (``model_weights``
        first: a loader may have rewritten ``model`` to a cache directory); the shipped
        modules for this target (``mtp1`` for the embedded one, or when no target is known yet); otherwise
        the target's weights path, which ``configure`` then rejects in one line."""
        target = spec.target_model_config
        if target is not None and target_carries_modules(target):
            return target.model_weights or target.model
        shipped = super().default_model(spec)
        if shipped is not None:
            return shipped
        if target is not None:
            return target.model_weights or target.model
        return None

    @classmethod
    def adapt_draft_model_config(cls, spec: Any, draft: Any) -> Any:
        """``n_predict`` = the module count, so the core derives K from it and checks that a
        larger K is a multiple of it (DeepSeek checkpoints only say ``num_nextn_predict_layers``)."""
        n = declared_modules(draft.hf_config)
        if n < 1:
            raise SpeculativeConfigError(
                f"{spec.model!r} has no MTP modules (config.json declares neither "
                "num_nextn_predict_layers nor n_predict); pass model=<a directory with MTP modules>",
                field="speculative_config.model",
                value=spec.model,
            )
        if draft.hf_config.get("n_predict") == n:
            return draft
        existing = draft.hf_overrides
        overrides = [] if existing is None else list(existing) if isinstance(existing, (list, tuple)) else [existing]
        return attrs.evolve(draft, hf_overrides=[*overrides, {"n_predict": n}], max_model_len=spec.max_model_len)

    @classmethod
    def specialize(cls, spec: Any) -> type:
        """Several modules: module k drafts token k (``MultiModuleMTPSpeculatorConfig``)."""
        draft = spec.draft_model_config
        if draft is not None and declared_modules(draft.hf_config) > 1:
            return MultiModuleMTPSpeculatorConfig
        return cls

    def hash_factors(self) -> tuple[Any, ...]:
        """Sharing the sparse-attention index across MTP iterations changes the draft graph
        (None and False are the same graph)."""
        return (*super().hash_factors(),
                ("index_share_for_mtp_iteration", bool(self.spec.index_share_for_mtp_iteration)))


@attrs.frozen(kw_only=True)
class MultiModuleMTPSpeculatorConfig(MTPSpeculatorConfig):
    """MTP with several modules (MiMo, Step-3.5 style): step k uses module k, each with its own
    KV; K above the module count cycles through them again."""

    speculator_class = "specpath_mtp.speculator:MultiModuleMTPSpeculator"
    supported_options = frozenset({"index_share_for_mtp_iteration"})
    """No draft trees: module k drafts depth k in a pass of its own, over its own KV."""
    supports_pcp = False
    """Module k's KV at p needs the token at p+k+1: it does not split with the target's prefill."""

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        """Each module reads one token further ahead than the previous one."""
        return self.spec.num_speculative_tokens
