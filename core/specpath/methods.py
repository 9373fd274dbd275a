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
    "dots3_note_mtp",
    "mimo_v2_mtp",
    "glm_ocr_mtp",
    "exaone4_5_mtp",
    "qwen4_exp_mtp",
    "bailing_hybrid_mtp",
    "bailing_hybrid_v3_mtp",
    "minimax_m3_mtp",
    "kimi_k3_mtp",
    "hy_v3_mtp",
    "hy_v4_mtp",
    "gemma4_mtp",
    "inkling_mtp",
    "glm5_next_mtp",
]
"""Checkpoint ``model_type`` names of MTP variants; all but ``mtp`` are input aliases. The
article's list plus the newer types vLLM lists (``kimi_k3_mtp``, ``gemma4_mtp``, ...)."""

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
    "suffix": "specpath-suffix",
    "custom_class": "specpath-custom-class",
}
"""Canonical built-in method -> the distribution that provides it (None: no plugin here)."""

def source_dir(distribution: str) -> str:
    """Where ``distribution`` lives in a specpath checkout (``builtin_methods/eagle``, ``engine``)."""
    fixed = {"specpath": ".", "specpath-engine": "engine", "specpath-train": "train",
             "specpath-freqgram": "plugin_template"}
    if distribution in fixed:
        return fixed[distribution]
    return "builtin_methods/" + distribution.removeprefix("specpath-").replace("-", "_")


def install_hint(distribution: str) -> str:
    """A command that installs ``distribution`` from what this project ships (none of its
    distributions is on a public index): the checkout's source directory or the wheels
    ``scripts/build_wheels.sh`` builds."""
    return (f"pip install ./{source_dir(distribution)} from a specpath checkout, or "
            f"pip install --find-links WHEELS_DIR {distribution} with the wheels of scripts/build_wheels.sh")


CANONICAL_METHODS: tuple[str, ...] = tuple(METHOD_DISTRIBUTIONS)
"""Built-in names after alias normalisation, in table order."""

UNIMPLEMENTED_METHODS: dict[str, str] = {}
"""Why a built-in name of vLLM's method set has no distribution in this project (none now)."""

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
