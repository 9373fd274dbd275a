"""The built-in method set, aliases and the method -> distribution table."""

from __future__ import annotations

import warnings
from typing import get_args

import pytest

from specpath import methods
from specpath.methods import (
    BUILTIN_METHODS,
    METHOD_DISTRIBUTIONS,
    MTP_ALIASES,
    MethodAliasWarning,
    SpeculativeMethod,
    normalize_method,
)

ARTICLE_NAMES = {
    "ngram", "ngram_gpu", "draft_model", "suffix", "custom_class", "eagle", "eagle3",
    "extract_hidden_states", "mtp", "deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp",
    "nemotron_h_mtp", "qwen3_next_mtp", "dflash", "dspark",
}


def test_literal_holds_every_article_name():
    assert ARTICLE_NAMES <= set(get_args(SpeculativeMethod))
    assert BUILTIN_METHODS == frozenset(get_args(SpeculativeMethod))


@pytest.mark.parametrize("alias", sorted(MTP_ALIASES))
def test_mtp_aliases_normalise_with_a_deprecation_warning(alias):
    with pytest.warns(MethodAliasWarning, match=f"{alias}.*deprecated.*mtp"):
        assert normalize_method(alias) == "mtp"


def test_ngram_bracket_and_canonical_names_normalise_silently():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert normalize_method("[ngram]") == "ngram"
        assert normalize_method("mtp") == "mtp"
        assert normalize_method("eagle3") == "eagle3"
        assert normalize_method("my_method") == "my_method"


def test_distribution_table():
    """Every canonical built-in name has a row, and each row names the distribution whose entry
    point provides the method (checked against what is installed, not a second copy of the table)."""
    from importlib import metadata

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MethodAliasWarning)
        canonical = {normalize_method(m) for m in BUILTIN_METHODS}
    assert set(METHOD_DISTRIBUTIONS) == canonical
    providers = {ep.name: ep.dist.metadata["Name"] for ep in metadata.entry_points(group="specpath.methods")
                 if ep.dist is not None}
    installed = {m: providers[m] for m in METHOD_DISTRIBUTIONS if m in providers}
    assert installed == {m: METHOD_DISTRIBUTIONS[m] for m in installed}
    # aliases reach the table through normalize_method, the one place they are resolved
    assert METHOD_DISTRIBUTIONS[normalize_method("[ngram]")] == "specpath-ngram"


def test_every_canonical_name_is_built_in_and_the_core_names_no_detection_order():
    assert set(methods.CANONICAL_METHODS) <= BUILTIN_METHODS
    assert not hasattr(methods, "CHECKPOINT_DETECTION_ORDER")  # detection is the plugins' hook
    assert methods.UNIMPLEMENTED_METHODS == {}  # every built-in name has a plugin
