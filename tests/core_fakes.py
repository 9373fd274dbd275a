"""Test-only config classes reproducing the method table of DESIGN.md (no real drafters)."""

from __future__ import annotations

from typing import Any

import attrs

from specpath.config.speculator import DraftModelSpeculatorConfig, SpeculatorConfig
from specpath.hookspecs import hookimpl
from specpath.methods import MTP_ALIASES
from specpath.speculator import BaseSpeculator, DraftProposal


class FakeSpeculator(BaseSpeculator):
    def propose(self, batch):
        return DraftProposal(token_ids=None, num_draft_tokens=[0] * len(batch.requests))


@attrs.frozen(kw_only=True)
class FakeNgram(SpeculatorConfig):
    base_method = "ngram"
    speculator_class = "core_fakes:FakeSpeculator"
    prefer_dense_token_history = True
    supports_variable_draft_length = True

    @classmethod
    def configure(cls, spec):
        return {
            **super().configure(spec),
            "prompt_lookup_min": spec.prompt_lookup_min or 5,
            "prompt_lookup_max": spec.prompt_lookup_max or 5,
        }


@attrs.frozen(kw_only=True)
class FakeNgramGPU(FakeNgram):
    base_method = "ngram_gpu"


@attrs.frozen(kw_only=True)
class FakeStandalone(DraftModelSpeculatorConfig):
    base_method = "draft_model"
    draft_has_own_vocab = True

    @property
    def num_lookahead_tokens(self) -> int:
        return self.spec.num_speculative_tokens

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        return self.spec.num_speculative_tokens if self.spec.parallel_drafting else 1


@attrs.frozen(kw_only=True)
class FakeEagle(DraftModelSpeculatorConfig):
    base_method = "eagle"
    uses_target_hidden_states = True
    draft_kv_depends_on_next_token = True
    supports_watermarking = True
    supported_options = frozenset({"draft_lm_head_quantization"})

    @property
    def num_lookahead_tokens(self) -> int:
        return self.spec.num_speculative_tokens

    @classmethod
    def matches(cls, checkpoint):
        return "eagle-" in (checkpoint.path or "").lower()


@attrs.frozen(kw_only=True)
class FakeEagle3(FakeEagle):
    base_method = "eagle3"
    uses_aux_hidden_states = True

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        return self.spec.num_speculative_tokens - 1 if self.spec.parallel_drafting else 0

    @classmethod
    def matches(cls, checkpoint):
        return "eagle3" in (checkpoint.path or "").lower()


@attrs.frozen(kw_only=True)
class FakeExtractHiddenStates(SpeculatorConfig):
    base_method = "extract_hidden_states"
    uses_target_hidden_states = True
    uses_aux_hidden_states = True
    proposes_draft_tokens = False


@attrs.frozen(kw_only=True)
class FakeMTP(DraftModelSpeculatorConfig):
    base_method = "mtp"
    uses_target_hidden_states = True
    draft_kv_depends_on_next_token = True
    supports_pcp = True
    supported_options = frozenset({"index_share_for_mtp_iteration"})

    @property
    def num_lookahead_tokens(self) -> int:
        return self.spec.num_speculative_tokens

    @classmethod
    def default_model(cls, spec):
        target = spec.target_model_config
        return None if target is None else target.model_weights

    @classmethod
    def matches(cls, checkpoint):
        return checkpoint.model_type in MTP_ALIASES | {"mtp"}

    @classmethod
    def specialize(cls, spec):
        layers = spec.draft_model_config.hf_config.get("num_nextn_predict_layers", 1)
        return FakeMultiModuleMTP if layers > 1 else cls

    def hash_factors(self) -> tuple[Any, ...]:
        return (self.spec.index_share_for_mtp_iteration,)


@attrs.frozen(kw_only=True)
class FakeMultiModuleMTP(FakeMTP):
    supports_pcp = False

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        return self.spec.num_speculative_tokens


@attrs.frozen(kw_only=True)
class FakeDFlash(DraftModelSpeculatorConfig):
    base_method = "dflash"
    uses_target_hidden_states = True
    supports_watermarking = True
    supported_options = frozenset({"enable_adaptive_verification", "adaptive_verification_threshold"})

    @property
    def num_lookahead_tokens(self) -> int:
        return self.spec.num_speculative_tokens + 1

    @classmethod
    def matches(cls, checkpoint):
        return "dflash" in (checkpoint.path or "").lower()


@attrs.frozen(kw_only=True)
class FakeDSpark(FakeDFlash):
    base_method = "dspark"
    uses_separate_workspace_lane = True
    adaptive_verification_uses_draft_logits = False
    supports_watermarking = False
    supports_pcp = True
    supported_options = frozenset({"dspark_draft_topk", "dspark_anchor_sampling", "xpress_topc",
                                   "enable_adaptive_verification", "adaptive_verification_threshold"})

    @property
    def num_lookahead_tokens(self) -> int:
        k = self.spec.num_speculative_tokens
        return k if self.spec.dspark_anchor_sampling else k + 1

    @classmethod
    def matches(cls, checkpoint):
        return "dspark" in (checkpoint.path or "").lower()

    def hash_factors(self) -> tuple[Any, ...]:
        return (self.spec.enable_adaptive_verification,)


BUILTIN_FAKES = {
    "ngram": FakeNgram,
    "ngram_gpu": FakeNgramGPU,
    "draft_model": FakeStandalone,
    "eagle": FakeEagle,
    "eagle3": FakeEagle3,
    "extract_hidden_states": FakeExtractHiddenStates,
    "mtp": FakeMTP,
    "dflash": FakeDFlash,
    "dspark": FakeDSpark,
}


class BuiltinFakesPlugin:
    @hookimpl
    def specpath_register_methods(self, register):
        for name, cls in BUILTIN_FAKES.items():
            register(name, cls)

    @hookimpl
    def specpath_detect_method(self, checkpoint):
        """Config evidence: an MTP checkpoint says so in ``model_type``."""
        return "mtp" if FakeMTP.matches(checkpoint) else None

    @hookimpl(trylast=True, specname="specpath_detect_method")
    def detect_by_path_hint(self, checkpoint):
        """Path hints, after every plugin's config evidence, in the order eagle, eagle3, dflash, dspark."""
        for name in ("eagle", "eagle3", "dflash", "dspark"):
            if BUILTIN_FAKES[name].matches(checkpoint):
                return name
        return None


@attrs.frozen(kw_only=True)
class MyEagle3(FakeEagle3):
    """A third-party method that builds on eagle3."""

    supported_options = frozenset({"speculator_options", "draft_lm_head_quantization"})

    @classmethod
    def verify(cls, spec):
        from specpath.errors import SpeculativeConfigError

        opts = spec.speculator_options or {}
        if "depth" in opts and not isinstance(opts["depth"], int):
            raise SpeculativeConfigError("depth must be an int", field="speculative_config.speculator_options.depth")


@attrs.frozen(kw_only=True)
class MyNgram(FakeNgram):
    """A third-party method that builds on ngram and needs no checkpoint."""

    supported_options = frozenset({"speculator_options"})
