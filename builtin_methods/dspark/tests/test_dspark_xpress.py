"""``xpress_topc``: DSpark's best-first trees of top-c candidates.

The tree builder against a naive restatement (enumerate every top-c path, then grow best-first);
c = 1 is the greedy chain; through ``LLM`` greedy output equals plain decoding for K 1..8 with
prefix caching on and off (tiny drafter, and the shipped drafter on the embedded target); trees
are proposed only when the engine verifies them, and the rest of the configuration is unchanged."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.llm import LLM, SamplingParams
from specpath_drafting.block.testing import tiny_drafter
from specpath_drafting.testing import TINY_PROMPTS, baseline_tokens, greedy, resolve, tiny_llm, drafting_target
from specpath_dspark.reference import markov_sample_reference, topk_floor
from specpath_dspark.testing import strong_heads
from specpath_dspark.xpress_tree import best_first_trees

VOCAB, RANK = 7, 3


def random_inputs(seed, r, k, topk):
    g = torch.Generator().manual_seed(seed)
    base = torch.randn(r, k, VOCAB, generator=g) * 2
    w1, w2 = torch.randn(VOCAB, RANK, generator=g), torch.randn(RANK, VOCAB, generator=g)
    anchors = torch.randint(0, VOCAB, (r,), generator=g).tolist()
    return base, topk_floor(base, topk), w1, w2, anchors


def naive_tree(base, floor, w1, w2, anchor, budget, c):
    """Every node of the full top-c tree with its path probability, then best-first selection."""
    k = base.shape[0]
    candidates = []  # (path tuple, prob)

    def grow(path, prev, prob):
        d = len(path)
        if d == k:
            return
        logits = base[d] + w1[prev] @ w2
        logits = logits.masked_fill(base[d] < floor[d], float("-inf"))
        q = torch.softmax(logits, -1)
        values, ids = q.topk(min(c, VOCAB))
        for p, t in zip(values.tolist(), ids.tolist()):
            if p > 0:
                candidates.append((path + (t,), prob * p))
                grow(path + (t,), t, prob * p)

    grow((), anchor, 1.0)
    chosen: list[tuple] = []
    while len(chosen) < budget:
        open_ = [(p, path) for path, p in candidates if path not in chosen and (len(path) == 1 or path[:-1] in chosen)]
        if not open_:
            break
        chosen.append(max(open_, key=lambda x: x[0])[1])
    return chosen


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(1, 3), st.integers(1, 3), st.integers(0, 7),
       st.sampled_from([None, 4]))
def test_best_first_matches_the_naive_restatement(seed, k, c, budget, topk):
    base, floor, w1, w2, anchors = random_inputs(seed, 2, k, topk)
    trees = best_first_trees(base, floor, w1, w2, anchors, [budget, max(budget - 2, 0)], c)
    for i, (tokens, parents, probs) in enumerate(trees):
        paths = []
        for t, p in zip(tokens, parents):
            paths.append((paths[p] if p >= 0 else ()) + (t,))
        expected = naive_tree(base[i], floor[i], w1, w2, anchors[i], [budget, max(budget - 2, 0)][i], c)
        assert paths == expected
        assert all(p < j for j, p in enumerate(parents))
        assert sorted(probs, reverse=True) == pytest.approx(probs)  # best-first: scores never rise
        assert sum(1 for p in parents if p == -1) <= c


def test_top_one_is_the_greedy_chain():
    base, floor, w1, w2, anchors = random_inputs(3, 4, 5, None)
    chain, _, _ = markov_sample_reference(base, floor, w1, w2, torch.tensor(anchors), torch.zeros(4, 5), torch.zeros(RANK),
                                          torch.ones(5), torch.zeros(4), torch.zeros(4, 5))
    trees = best_first_trees(base, floor, w1, w2, anchors, [5, 3, 0, 5], 1)
    for row, budget, (tokens, parents, _) in zip(chain.tolist(), [5, 3, 0, 5], trees):
        assert tokens == row[:budget] and parents == list(range(-1, budget - 1))


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("dspark-xpress")
    drafting_target(root / "target", num_layers=4)
    drafter = tiny_drafter("dspark", root / "target", root / "drafter", seed=3, num_layers=2, markov_rank=8,
                           build=strong_heads)
    return root, drafter, baseline_tokens(root / "target")


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_output_with_trees_equals_the_baseline(setup, k, prefix_caching):
    root, drafter, baseline = setup
    llm = tiny_llm(root / "target", {"method": "dspark", "model": drafter, "num_speculative_tokens": k,
                                     "xpress_topc": 2, "draft_length_policy": "fixed"}, enable_prefix_caching=prefix_caching)
    assert llm.speculator.tree_c == 2
    proposed = []
    original = llm.speculator.proposal

    def spy(*args):
        out = original(*args)
        proposed.append(out.tree)
        return out

    llm.speculator.proposal = spy
    outputs = llm.generate(TINY_PROMPTS + TINY_PROMPTS[:2], greedy())
    assert [o.token_ids for o in outputs] == baseline + baseline[:2]
    trees = [t for t in proposed if t is not None]
    assert trees and all(len(t.token_ids) == sum(t.num_tree_tokens) for t in trees)
    if k >= 2:
        assert any(p != j - 1 for t in trees for j, p in enumerate(t.parents))  # real branching


def test_trees_only_when_the_engine_verifies_them(setup):
    root, drafter, baseline = setup
    spec = {"method": "dspark", "model": drafter, "num_speculative_tokens": 4, "xpress_topc": 3}
    chains = tiny_llm(root / "target", spec, tree_verification=False)
    assert chains.speculator.tree_c is None
    assert [o.token_ids for o in chains.generate(TINY_PROMPTS, greedy())] == baseline
    block = tiny_llm(root / "target", {**spec, "rejection_sample_method": "block"})
    assert block.speculator.tree_c is None
    assert "no effect" in block.engine_config.speculative_config.speculator_config.describe()["draft_shape"]
    trees = tiny_llm(root / "target", spec)
    assert "best-first" in trees.engine_config.speculative_config.speculator_config.describe()["draft_shape"]


def test_xpress_topc_is_a_hash_factor(setup):
    root, drafter, _ = setup
    a = resolve({"method": "dspark", "model": drafter}, root / "target")
    b = resolve({"method": "dspark", "model": drafter, "xpress_topc": 2}, root / "target")
    assert a.compute_hash() != b.compute_hash()


def test_shipped_drafter_with_trees_keeps_greedy_output():
    prompts = ["def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n", "import os\nimport sys\n\n"]
    params = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True)
    plain = [o.token_ids for o in LLM(None, num_threads=1).generate(prompts, params)]
    for extra in ({"xpress_topc": 2}, {"xpress_topc": 3, "num_speculative_tokens": 8, "enable_adaptive_verification": True}):
        llm = LLM(None, {"method": "dspark", **extra}, num_threads=1)
        assert [o.token_ids for o in llm.generate(prompts, params)] == plain
        assert llm.metrics.num_accepted_tokens > 0


def test_reduced_vocabulary_trees_are_the_whole_vocabularys(setup, tmp_path):
    """The kept-ids path (a restricted head's logits, ``w2``'s kept columns) proposes the trees the
    whole-vocabulary path does (forced by hiding ``kept_logits``), step by step."""
    from specpath_drafting.testing import with_train_vocab

    root, drafter, baseline = setup
    restricted = with_train_vocab(drafter, tmp_path / "restricted", range(0, 64, 2))
    spec = {"method": "dspark", "model": str(restricted), "num_speculative_tokens": 4, "xpress_topc": 2,
            "draft_length_policy": "fixed"}
    runs = []
    for hide in (False, True):
        llm = tiny_llm(root / "target", spec)
        if hide:
            llm.speculator.drafter.kept_logits = lambda hidden: None
        proposed = []
        original = llm.speculator.proposal

        def spy(*args, original=original, proposed=proposed):
            out = original(*args)
            proposed.append(out.tree)
            return out

        llm.speculator.proposal = spy
        assert [o.token_ids for o in llm.generate(TINY_PROMPTS, greedy())] == baseline
        runs.append([(list(t.token_ids), list(t.parents)) for t in proposed if t is not None])
    assert runs[0] and runs[0] == runs[1]


def test_a_shipped_tree_would_set_xpress_topc(tmp_path, monkeypatch):
    """DSpark's tree width is ``xpress_topc`` (``tree_option``): a shipped row's tree sets it (the
    SmolLM2 drafter ships its chain: the tree did not pay there), a config's own value wins."""
    from specpath.config.model import ModelConfig
    from specpath.config.shipped import ShippedCheckpoint
    from specpath.config.speculative import SpeculativeConfig
    from specpath_drafting.testing import smollm2_config_dir
    from specpath_dspark.config import DSPARK_SMOLLM2_CHECKPOINT, DSparkSpeculatorConfig

    target = ModelConfig(model=str(smollm2_config_dir(tmp_path / "smollm2")))
    shipped = SpeculativeConfig.from_dict({"method": "dspark"}, target_model_config=target)
    assert (shipped.num_speculative_tokens, shipped.xpress_topc) == (4, None)
    rows = tuple(ShippedCheckpoint(r.target, r.path, variant=r.variant, model_free=r.model_free,
                                   tree=(4, 2) if r.path == DSPARK_SMOLLM2_CHECKPOINT else None)
                 for r in DSparkSpeculatorConfig.shipped_checkpoints)
    monkeypatch.setattr(DSparkSpeculatorConfig, "shipped_checkpoints", rows)
    tree = SpeculativeConfig.from_dict({"method": "dspark"}, target_model_config=target)
    assert (tree.num_speculative_tokens, tree.xpress_topc, tree.draft_tree_topk) == (4, 2, None)
    own = SpeculativeConfig.from_dict({"method": "dspark", "xpress_topc": 3}, target_model_config=target)
    assert (own.num_speculative_tokens, own.xpress_topc) == (4, 3)
