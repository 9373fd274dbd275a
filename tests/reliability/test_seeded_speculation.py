"""A seeded request's speculative output is its plain seeded output, token for token, whatever
the drafter, its trees, the draft length, the batch: for every installed drafting method on the
embedded model (trees and random drafts where a method has them), alone and in a batch of 16
that mixes seeds, temperatures (0 included), top-k/top-p and unseeded rows, with a draft
length drawn at random every step (what a batch-aware draft governor may do), and with the
engine's measured draft-length policy itself.

The race (``specpath_engine.sample.race``) makes the emitted tokens the winners on the request's
(seed, position) noise, so nothing the drafter does can move them; these tests hold the engine
to it end to end, and check that the drafts were verified at all (and trees really verified).
"""

from __future__ import annotations

import random

import pytest

from reliability_helpers import installed_methods
from specpath_engine import runner, tree_layout
from specpath_engine.llm import LLM, SamplingParams

PROMPTS = [f"def f{i}(x):\n    " if i % 2 else f"import m{i}\n" for i in range(16)]
TREES = {"dspark": {"xpress_topc": 3}, "eagle3": {"draft_tree_topk": 3}, "mtp": {"draft_tree_topk": 2},
         "suffix": {"num_speculative_tokens": 6}}
"""What makes a method propose branching trees (suffix: always trees, branching from a longer K)."""
RANDOM_DRAFTS = {"draft_model", "dflash", "dspark", "eagle", "eagle3", "mtp"}
"""Methods with ``draft_sample_method = "random"``: their unseeded rows hand draft probabilities in."""

METHODS = installed_methods()
CONFIGS = (
    [(name, config) for name, config in METHODS]
    + [(f"{name} tree", {**config, **TREES[name]}) for name, config in METHODS if name in TREES]
    + [(f"{name} random", {**config, "draft_sample_method": "random"}) for name, config in METHODS
       if name in RANDOM_DRAFTS]
)
IDS = [name for name, _ in CONFIGS]


def _mixed() -> list[SamplingParams]:
    """16 requests: seeded at several temperatures with and without filters, greedy, unseeded."""
    kinds = [
        dict(temperature=0.8, seed=1),
        dict(temperature=0.0),
        dict(temperature=1.2, top_k=8, seed=2),
        dict(temperature=0.9),  # unseeded: races on the engine's seed for it (random drafts: rejection sampling)
        dict(temperature=0.6, top_p=0.9, seed=3),
        dict(temperature=1.0, top_k=20, top_p=0.8, seed=4),
        dict(temperature=0.8, seed=5),
        dict(temperature=0.7, top_p=0.95),
    ]
    return [SamplingParams(max_tokens=32, ignore_eos=True, **{**kinds[i % 8], **(
        {"seed": kinds[i % 8]["seed"] + 100 * i} if "seed" in kinds[i % 8] else {})}) for i in range(16)]


MIXED = _mixed()
COMPARED = [i for i, p in enumerate(MIXED) if p.seed is not None or not p.samples]
ALONE = [SamplingParams(temperature=0.8, max_tokens=32, seed=77, ignore_eos=True),
         SamplingParams(temperature=1.1, top_k=12, top_p=0.9, max_tokens=32, seed=78, ignore_eos=True)]


@pytest.fixture(scope="module")
def plain() -> dict[str, list[list[int]]]:
    llm = LLM(None, None, max_num_seqs=16)
    return {"mixed": [o.token_ids for o in llm.generate(PROMPTS, MIXED)],
            "alone": [llm.generate([PROMPTS[1]], p)[0].token_ids for p in ALONE]}


@pytest.fixture
def trees_verified(monkeypatch) -> list[int]:
    """How many branching trees were verified with the tree layout."""
    original = tree_layout.apply_tree_attention
    seen = [0]

    def spy(meta, positions, *, trees, **kw):
        seen[0] += sum(1 for t in trees if t is not None and any(p != j - 1 for j, p in enumerate(t.parents)))
        return original(meta, positions, trees=trees, **kw)

    monkeypatch.setattr(tree_layout, "apply_tree_attention", spy)
    return seen


def test_every_drafting_method_is_covered():
    assert {"dflash", "draft_model", "dspark", "eagle", "eagle3", "mtp", "ngram", "suffix"} <= {n for n, _ in METHODS}


FIXED = {"draft_length_policy": "fixed"}
"""Drafts every step, so the drafts are surely verified: the measured draft-length policy may back
off to plain steps on the tiny embedded model (what it does to K is the tests below)."""


@pytest.mark.parametrize(("name", "config"), CONFIGS, ids=IDS)
def test_seeded_speculation_gives_plain_tokens(name, config, plain, trees_verified):
    llm = LLM(None, {**config, **FIXED}, max_num_seqs=16)
    for params, want in zip(ALONE, plain["alone"]):
        assert llm.generate([PROMPTS[1]], params)[0].token_ids == want
    got = [o.token_ids for o in llm.generate(PROMPTS, MIXED)]
    assert [got[i] for i in COMPARED] == [plain["mixed"][i] for i in COMPARED]
    assert all(len(got[i]) == 32 for i in range(16))  # the unseeded rows ran to the end too
    assert llm.metrics.num_draft_tokens > 0
    if name.endswith(" tree"):
        # again: suffix trees branch once the global tree holds the first round's responses
        again = [o.token_ids for o in llm.generate(PROMPTS, MIXED)]
        assert [again[i] for i in COMPARED] == [plain["mixed"][i] for i in COMPARED]
        assert trees_verified[0] > 0


@pytest.mark.parametrize(("name", "config"), METHODS, ids=[n for n, _ in METHODS])
def test_a_random_draft_length_every_step_keeps_seeded_tokens(name, config, plain, monkeypatch):
    """The property a batch-aware governor needs: any K per request and step, plain tokens."""
    rng = random.Random(name)
    drawn: list[int] = []

    def random_budgets(self, scheduled):
        ks = [rng.randint(0, s.max_draft_tokens) for s in scheduled]
        drawn.extend(k for k, s in zip(ks, scheduled) if s.max_draft_tokens)
        return ks

    monkeypatch.setattr(runner.ModelRunner, "_budgets", random_budgets)
    llm = LLM(None, config, max_num_seqs=16)
    got = [o.token_ids for o in llm.generate(PROMPTS, MIXED)]
    assert [got[i] for i in COMPARED] == [plain["mixed"][i] for i in COMPARED]
    assert len(set(drawn)) > 2 and llm.metrics.num_draft_tokens > 0


@pytest.mark.parametrize(("name", "config"), METHODS, ids=[n for n, _ in METHODS])
def test_the_measured_draft_length_policy_keeps_seeded_tokens(name, config, plain):
    """The engine's own batch-wide governor (the default policy), whatever K it picks per step."""
    llm = LLM(None, config, max_num_seqs=16)
    assert llm.engine_config.speculative_config.draft_length_policy == "adaptive"
    for params, want in zip(ALONE, plain["alone"]):
        assert llm.generate([PROMPTS[1]], params)[0].token_ids == want
    got = [o.token_ids for o in llm.generate(PROMPTS, MIXED)]
    assert [got[i] for i in COMPARED] == [plain["mixed"][i] for i in COMPARED]


UNSEEDED = [SamplingParams(max_tokens=24, ignore_eos=True, **kind) for kind in (
    dict(temperature=0.8), dict(temperature=1.1, top_k=12), dict(temperature=0.7, top_p=0.9))]


@pytest.mark.parametrize(("name", "config"), METHODS, ids=[n for n, _ in METHODS])
def test_unseeded_sampled_requests_race_and_repeat_plain_decoding(name, config):
    """An unseeded sampled request races on noise of the seed the engine gives it (the LLM's seed
    and the request's number): with the same engine seed, speculation gives plain decoding's
    tokens whatever the drafts; under random drafts it is verified by rejection sampling (no noise)."""
    params = UNSEEDED * 2
    want = [o.token_ids for o in LLM(None, None, seed=7, max_num_seqs=6).generate(PROMPTS[:6], params)]
    llm = LLM(None, {**config, **FIXED}, seed=7, max_num_seqs=6)
    assert [o.token_ids for o in llm.generate(PROMPTS[:6], params)] == want
    assert llm.metrics.num_draft_tokens > 0
    if name in RANDOM_DRAFTS:
        random_drafts = LLM(None, {**config, **FIXED, "draft_sample_method": "random"}, seed=7)
        assert random_drafts.engine.add_request([1, 2, 3], UNSEEDED[0]).noise is None
        assert llm.engine.add_request([1, 2, 3], UNSEEDED[0]).noise is not None
