"""The closed set of built-in method names, their aliases and who provides them.

``SpeculativeMethod`` is vLLM's ``Literal`` of method names (for typing and documentation). At
run time a method is a plain ``str`` checked against this set *and* the registry, so
third-party methods are first-class. Each built-in name is bound by exactly one installed plugin distribution; the
table :data:`METHOD_DISTRIBUTIONS` says which one to ``pip install`` when it is missing.
"""

from __future__ import annotations

import warnings
from typing import Literal, get_args

MTPModelTypes = Literal[
    "mtp",
    "deepseek_mtp",
    "mimo_mtp",
    "glm4_moe_mtp",
    "glm4_moe_lite_mtp",
    "ernie_mtp",
    "nemotron_h_mtp",
    "exaone_moe_mtp",
    "qwen3_next_mtp",
    "qwen3_5_mtp",
    "longcat_flash_mtp",
    "pangu_ultra_moe_mtp",
    "step3p5_mtp",
]
"""Checkpoint ``model_type`` names of MTP variants; all but ``mtp`` are input aliases."""

DFlashModelTypes = Literal["dflash"]
NgramGPUTypes = Literal["ngram_gpu"]
DSparkModelTypes = Literal["dspark"]
EagleModelTypes = Literal["eagle", "eagle3", "extract_hidden_states", MTPModelTypes, DFlashModelTypes]

SpeculativeMethod = Literal[
    "ngram",
    "draft_model",
    "suffix",
    "custom_class",
    EagleModelTypes,
    NgramGPUTypes,
    DSparkModelTypes,
]

BUILTIN_METHODS: frozenset[str] = frozenset(get_args(SpeculativeMethod))
"""Every built-in name, aliases included."""

MTP_ALIASES: frozenset[str] = frozenset(get_args(MTPModelTypes)) - {"mtp"}
"""MTP model-type names that normalise to ``mtp`` (deprecated as method names)."""

NGRAM_MODEL_NAMES = ("ngram", "[ngram]")
"""Values of ``model`` that mean "the n-gram drafter" in legacy configurations."""

METHOD_DISTRIBUTIONS: dict[str, str | None] = {
    "ngram": "specpath-ngram",
    "ngram_gpu": "specpath-ngram",
    "draft_model": "specpath-draft-model",
    "eagle": "specpath-eagle",
    "extract_hidden_states": "specpath-eagle",
    "eagle3": "specpath-eagle3",
    "mtp": "specpath-mtp",
    "dflash": "specpath-dflash",
    "dspark": "specpath-dspark",
    "suffix": None,
    "custom_class": None,
}
"""Canonical built-in method -> the distribution that provides it (None: no plugin here)."""

CANONICAL_METHODS: tuple[str, ...] = tuple(METHOD_DISTRIBUTIONS)
"""Built-in names after alias normalisation, in table order."""

UNIMPLEMENTED_METHODS: dict[str, str] = {
    "suffix": (
        "suffix decoding (Arctic Inference, a V1-runner-only path in the article) has no "
        "implementation in specpath; a plugin may bind it through specpath_register_methods"
    ),
    "custom_class": (
        "'custom_class' (a proposer given by import path) is not supported by specpath; "
        "register a method with specpath.register_speculative_method or an entry point in "
        "the 'specpath.methods' group instead"
    ),
}
"""Why a built-in name of vLLM's method set has no distribution in this project."""

class MethodAliasWarning(FutureWarning):
    """A deprecated method alias was normalised (shown to end users by default)."""


def normalize_method(name: str) -> str:
    """Map an alias to its canonical built-in name: MTP model types -> ``mtp`` (with a
    deprecation warning), ``[ngram]`` -> ``ngram``. Other names are returned unchanged."""
    if name in MTP_ALIASES:
        warnings.warn(
            f"speculative method {name!r} is deprecated and replaced with 'mtp'",
            MethodAliasWarning,
            stacklevel=3,
        )
        return "mtp"
    if name == "[ngram]":
        return "ngram"
    return name
