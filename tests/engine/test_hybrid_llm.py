"""The shipped drafters with a model-free method beside them, on the embedded model."""

import pytest
import torch

from specpath_engine.llm import LLM, SamplingParams

PROMPTS = ["def split_lines(text):\n    lines = []\n    for line in text.splitlines():\n",
           "class Queue:\n    def __init__(self, maxsize=0):\n        self.maxsize = maxsize\n"]
GREEDY = SamplingParams(max_tokens=48, ignore_eos=True)


@pytest.fixture(scope="module")
def plain():
    return [o.token_ids for o in LLM(None, None, dtype="float32").generate(PROMPTS, GREEDY)]


@pytest.mark.parametrize(("method", "model_free"), [
    ("eagle3", {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}),
    ("mtp", {"method": "suffix"}),  # suffix proposes token trees: the reference engine verifies them
    ("draft_model", {"method": "suffix", "num_speculative_tokens": 2}),
])
def test_greedy_output_is_the_targets(plain, method, model_free):
    llm = LLM(None, {"method": method, "num_speculative_tokens": 4, "model_free_drafter": model_free},
              dtype="float32")
    llm.speculator.engine_score = 1.0  # where the chains part, the model-free one is verified until a miss
    assert [o.token_ids for o in llm.generate(PROMPTS, GREEDY)] == plain
    assert llm.speculator.num_model_free_drafts > 0
    assert llm.metrics.num_accepted_tokens > 0


def test_sampled_drafts_get_one_hot_rows_beside_the_drafters_probabilities(monkeypatch):
    from specpath import hybrid

    merged_probs = []
    original = hybrid.merge_proposals

    def recording(own, free, taken):
        out = original(own, free, taken)
        merged_probs.append(out.draft_probs)
        return out

    monkeypatch.setattr(hybrid, "merge_proposals", recording)
    # unseeded: the drafter samples and hands its probabilities in (a seeded request's drafts race
    # on its noise and need none); the engine's seed still makes the runs reproducible
    params = SamplingParams(max_tokens=32, temperature=0.8, ignore_eos=True)
    # fixed K: unseeded sampled tokens follow the drafts, and the measured policy's lengths follow timings
    config = {"method": "eagle3", "num_speculative_tokens": 3, "draft_sample_method": "random",
              "draft_length_policy": "fixed",
              "model_free_drafter": {"method": "ngram", "prompt_lookup_min": 1, "prompt_lookup_max": 3},
              "model_free_min_tokens": 1}
    runs = []
    for _ in range(2):
        llm = LLM(None, config, dtype="float32", seed=1)
        llm.speculator.engine_score = 1.0
        runs.append(llm.generate(PROMPTS, params))
    assert [o.token_ids for o in runs[0]] == [o.token_ids for o in runs[1]]  # the engine's seed: reproducible
    assert all(len(o.token_ids) == 32 for o in runs[0])
    # a step where some requests drafted with the drafter carries probabilities for every draft
    # (one-hot rows for the model-free ones); a step drafted model-free alone needs none
    with_probs = [p for p in merged_probs if p is not None]
    assert with_probs and all(torch.allclose(p.sum(-1), torch.ones(p.shape[0])) for p in with_probs)
