"""Greedy identity through the engine's user API on the embedded default model: with n-gram
speculation, exactly the tokens plain greedy decoding gives."""

import pytest
import torch

from specpath.engine.llm import LLM, SamplingParams

PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    "import os\nimport sys\nimport os.path\n\nfor name in os.listdir('.'):\n    print(name)\n",
    "the cat sat on the mat. the cat sat on the mat. the",
]


def generate(speculative_config):
    threads = torch.get_num_threads()
    try:
        # A small batch budget: prompts are prefilled in chunks while others decode.
        llm = LLM(speculative_config=speculative_config, max_num_batched_tokens=24, num_threads=1)
        outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=40))
    finally:
        torch.set_num_threads(threads)
    return [o.token_ids for o in outputs], sum(o.metrics.num_draft_tokens for o in outputs)


@pytest.fixture(scope="module")
def plain():
    tokens, drafted = generate(None)
    assert drafted == 0
    return tokens


@pytest.mark.slow  # a few seconds: the default model decodes 3 x 120 tokens
@pytest.mark.parametrize(
    "speculative_config",
    [
        {"method": "ngram", "num_speculative_tokens": 4},
        {"method": "ngram_gpu", "num_speculative_tokens": 3, "prompt_lookup_min": 1, "prompt_lookup_max": 3},
    ],
)
def test_greedy_output_is_identical(plain, speculative_config):
    tokens, drafted = generate(speculative_config)
    assert drafted > 0
    assert tokens == plain
