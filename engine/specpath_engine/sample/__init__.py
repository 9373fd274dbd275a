"""Verification of drafts: rejection sampling in several modes, and TLI vocabulary maps.

Imported by engines and plugins only (it imports torch); ``import specpath`` never loads it.
"""

from specpath_engine.sample.metrics import accepted_per_position, num_accepted
from specpath_engine.sample.processing import target_probs
from specpath_engine.sample.rejection import LOSSLESS_METHODS, METHOD_OPTIONS, PLACEHOLDER_TOKEN_ID, rejection_sample
from specpath_engine.sample.tli import VocabMapping

__all__ = [
    "LOSSLESS_METHODS",
    "METHOD_OPTIONS",
    "PLACEHOLDER_TOKEN_ID",
    "VocabMapping",
    "accepted_per_position",
    "num_accepted",
    "rejection_sample",
    "target_probs",
]
