"""Greedy identity through the engine's user API on the embedded default model: with suffix
speculation, exactly the tokens plain greedy decoding gives, for K 1..8, with prefix caching
on and off; and the global tree carries one request's output into the next."""

import pytest
import torch

from specpath_engine.llm import LLM, SamplingParams

PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    "import os\nimport sys\nimport os.path\n\nfor name in os.listdir('.'):\n    print(name)\n",
    "the cat sat on the mat. the cat sat on the mat. the",
    "the cat sat on the mat. the cat sat on the mat. the",  # the same prompt again: shared blocks
]


def generate(speculative_config, prefix_caching):
    threads = torch.get_num_threads()
    try:
        llm = LLM(speculative_config=speculative_config, max_num_batched_tokens=24, num_threads=1,
                  enable_prefix_caching=prefix_caching, max_num_seqs=3)
        outputs = llm.generate(PROMPTS, SamplingParams(temperature=0.0, max_tokens=40))
    finally:
        torch.set_num_threads(threads)
    return [o.token_ids for o in outputs], sum(o.metrics.num_draft_tokens for o in outputs)


@pytest.fixture(scope="module")
def plain():
    tokens, drafted = generate(None, False)
    assert drafted == 0
    return tokens


@pytest.mark.slow  # ~1 s per K on the embedded model
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_output_is_identical_for_every_k(plain, prefix_caching):
    for k in range(1, 9):
        config = {"method": "suffix", "num_speculative_tokens": k}
        tokens, drafted = generate(config, prefix_caching)
        assert drafted > 0, k
        assert tokens == plain, k
    tokens, _ = generate({"method": "suffix", "suffix_decoding_max_cached_requests": 0}, prefix_caching)
    assert tokens == plain


def test_tree_drafts_are_offered_when_the_engine_verifies_trees():
    from specpath.config.speculative import SpeculativeConfig
    from specpath.factory import create_speculator
    from specpath.speculator import DraftBatch, DraftRequest, SpeculatorContext

    spec = SpeculativeConfig.from_dict({"method": "suffix", "num_speculative_tokens": 4})
    context = SpeculatorContext(vocab_size=16, max_model_len=64, max_num_seqs=2, verifies_trees=True)
    speculator = create_speculator(spec, context)
    tokens = (1, 2, 3, 1, 2, 4, 1, 2, 3, 1, 2)
    request = DraftRequest(req_id="a", token_ids=tokens, num_new_positions=10, max_draft_tokens=4)
    proposal = speculator.propose(DraftBatch(requests=(request,)))
    assert proposal.token_ids.tolist() == [4, 1, 2, 3]  # "3 1 2" was followed by "4 1 2 3"
    tree = proposal.tree
    assert list(tree.num_tree_tokens) == [len(tree.token_ids)] and len(tree.token_ids) <= 4
    assert all(-1 <= p < i for i, p in enumerate(tree.parents))
    plain = create_speculator(spec, SpeculatorContext(vocab_size=16, max_model_len=64, max_num_seqs=2))
    assert plain.propose(DraftBatch(requests=(request,))).tree is None
