"""Greedy identity through the engine's user API on the embedded default model: with n-gram
speculation, exactly the tokens plain greedy decoding gives (the kit's ``greedy_identity``)."""

import pytest

from specpath_engine.testing.engine import greedy_identity

PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    "import os\nimport sys\nimport os.path\n\nfor name in os.listdir('.'):\n    print(name)\n",
    "the cat sat on the mat. the cat sat on the mat. the",
]


@pytest.mark.slow  # a few seconds: the default model decodes 3 x 40 tokens twice
@pytest.mark.parametrize(
    "speculative_config",
    [
        {"method": "ngram", "num_speculative_tokens": 4},
        {"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3},
    ],
)
def test_greedy_output_is_identical(speculative_config):
    # A small batch budget: prompts are prefilled in chunks while others decode.
    run = greedy_identity(speculative_config, prompts=PROMPTS, max_tokens=40, model="embedded",
                          max_num_batched_tokens=24, max_num_seqs=8)
    assert run.num_draft_tokens > 0
    assert run.speculative == run.plain, run.describe()
