"""The specpath conformance kit, applied to both n-gram methods (one table, two entry points)."""

from specpath_engine.testing import MODEL_FREE_FLAGS, conformance_tests
from specpath_ngram.config import NgramGPUSpeculatorConfig, NgramSpeculatorConfig

NGRAM = dict(
    # Model-free: no KV of its own, no extra rows, nothing to read past a prefill chunk.
    lookahead=(0, 0, 0),
    valid=[{"prompt_lookup_min": 1}, {"prompt_lookup_max": 8}, {"prompt_lookup_min": 2, "prompt_lookup_max": 6}],
    invalid=[
        ({"prompt_lookup_min": 6, "prompt_lookup_max": 3}, "prompt_lookup_min"),
        ({"prompt_lookup_min": 0}, "prompt_lookup_min: must be >= 1"),
        ({"prompt_lookup_max": "4"}, "prompt_lookup_max"),
    ],
)


def _flags(method: str) -> dict:
    return {**MODEL_FREE_FLAGS, "prefer_dense_token_history": True, "model_free": True, "base_method": method}


TestNgramConformance = conformance_tests("ngram", NgramSpeculatorConfig, flags=_flags("ngram"), **NGRAM)
TestNgramGPUConformance = conformance_tests("ngram_gpu", NgramGPUSpeculatorConfig, flags=_flags("ngram_gpu"), **NGRAM)
