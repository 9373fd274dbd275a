"""Test-only methods for engine tests that must not depend on any installed method plugin."""

import attrs
import pytest

from specpath.config.speculator import DraftModelSpeculatorConfig, SpeculatorConfig
from specpath.registry import get_registry, register_speculative_method

LOOKUP = "real_model_test_lookup"
NEEDS_DRAFT = "real_model_test_needs_draft"


@attrs.frozen(kw_only=True)
class LookupConfig(SpeculatorConfig):
    base_method = "ngram"
    speculator_class = "engine_helpers:LookupSpeculator"


@attrs.frozen(kw_only=True)
class NeedsDraftConfig(DraftModelSpeculatorConfig):
    """A draft-model method with no drafter for any target (its default_model is None)."""

    base_method = "draft_model"
    speculator_class = "engine_helpers:LookupSpeculator"


@pytest.fixture
def test_methods():
    registry = get_registry()
    saved = registry.snapshot()
    register_speculative_method(LOOKUP, LookupConfig)
    register_speculative_method(NEEDS_DRAFT, NeedsDraftConfig)
    yield LOOKUP, NEEDS_DRAFT
    registry.restore(saved)
