"""Test-only config classes for the core's tests: each built-in's behaviour reduced to what the
core's rules need (no real drafter, toy checkpoints recognised by path), with its capability
table -- flags, ``base_method``, ``supported_options`` -- taken from the installed built-in's
real config class (:func:`capabilities_of`), so there is one table, the plugins'."""

from __future__ import annotations

from typing import Any

import attrs

from specpath.config.speculator import CAPABILITY_FLAGS, DraftModelSpeculatorConfig, SpeculatorConfig
from specpath.hookspecs import hookimpl
from specpath.methods import MTP_ALIASES
from specpath.speculator import BaseSpeculator, DraftProposal
from specpath_dflash.config import DFlashSpeculatorConfig
from specpath_draft_model.config import StandaloneARSpeculatorConfig
from specpath_dspark.config import DSparkSpeculatorConfig
from specpath_eagle.config import EagleSpeculatorConfig, ExtractHiddenStatesSpeculatorConfig
from specpath_eagle3.config import Eagle3SpeculatorConfig
from specpath_mtp.config import MTPSpeculatorConfig, MultiModuleMTPSpeculatorConfig
from specpath_ngram.config import NgramGPUSpeculatorConfig, NgramSpeculatorConfig

CAPABILITIES = (*CAPABILITY_FLAGS, "base_method", "supported_options", "supports_parallel_drafting")
"""The ``ClassVar`` declarations a fake takes from the real class."""


def capabilities_of(real: type) -> Any:
    """Class decorator: the fake declares ``real``'s capabilities (never its own copy), then is
    frozen like every config class."""

    def apply(cls: type) -> type:
        for name in CAPABILITIES:
            setattr(cls, name, getattr(real, name))
        return attrs.frozen(kw_only=True)(cls)

    return apply


def _path_hint(word: str) -> Any:
    """The fakes' own recognition (their ``specpath_detect_method`` hook asks it): a toy checkpoint
    by a word in its path, as the tests name them."""
    return classmethod(lambda cls, checkpoint: word in (checkpoint.path or "").lower())


_K_AHEAD = property(lambda self: self.spec.num_speculative_tokens, doc="K: the drafter's KV runs K ahead.")


class FakeSpeculator(BaseSpeculator):
    def propose(self, batch):
        return DraftProposal(token_ids=None, num_draft_tokens=[0] * len(batch.requests))


@capabilities_of(NgramSpeculatorConfig)
class FakeNgram(SpeculatorConfig):
    speculator_class = "core_fakes:FakeSpeculator"

    @classmethod
    def configure(cls, spec):
        return {
            **super().configure(spec),
            "prompt_lookup_min": spec.prompt_lookup_min or 5,
            "prompt_lookup_max": spec.prompt_lookup_max or 5,
        }


@capabilities_of(NgramGPUSpeculatorConfig)
class FakeNgramGPU(FakeNgram):
    """The n-gram fake under the GPU method's name."""


@capabilities_of(StandaloneARSpeculatorConfig)
class FakeStandalone(DraftModelSpeculatorConfig):
    num_lookahead_tokens = _K_AHEAD

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        return self.spec.num_speculative_tokens if self.spec.parallel_drafting else 1


@capabilities_of(EagleSpeculatorConfig)
class FakeEagle(DraftModelSpeculatorConfig):
    num_lookahead_tokens = _K_AHEAD
    matches = _path_hint("eagle-")


@capabilities_of(Eagle3SpeculatorConfig)
class FakeEagle3(FakeEagle):
    @property
    def max_num_new_slots_for_drafting(self) -> int:
        return self.spec.num_speculative_tokens - 1 if self.spec.parallel_drafting else 0

    matches = _path_hint("eagle3")


@capabilities_of(ExtractHiddenStatesSpeculatorConfig)
class FakeExtractHiddenStates(SpeculatorConfig):
    """Captures target states, drafts nothing (all in its flags)."""


@capabilities_of(MTPSpeculatorConfig)
class FakeMTP(DraftModelSpeculatorConfig):
    num_lookahead_tokens = _K_AHEAD

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


@capabilities_of(MultiModuleMTPSpeculatorConfig)
class FakeMultiModuleMTP(FakeMTP):
    @property
    def num_prefill_lookahead_tokens(self) -> int:
        return self.spec.num_speculative_tokens


@capabilities_of(DFlashSpeculatorConfig)
class FakeDFlash(DraftModelSpeculatorConfig):
    @property
    def num_lookahead_tokens(self) -> int:
        return self.spec.num_speculative_tokens + 1

    matches = _path_hint("dflash")


@capabilities_of(DSparkSpeculatorConfig)
class FakeDSpark(FakeDFlash):
    @property
    def num_lookahead_tokens(self) -> int:
        k = self.spec.num_speculative_tokens
        return k if self.spec.dspark_anchor_sampling else k + 1

    matches = _path_hint("dspark")

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
