"""``draft_tree_topk`` for DFlash: best-first trees from the one block pass.

Through ``LLM`` greedy output equals plain decoding for K 1..6 with prefix caching on and off and
the trees branch; trees are proposed only where the engine verifies them (and not for sampled
drafts, which the config rejects); over a reduced draft vocabulary the trees are those of the
whole vocabulary; the option is a hash factor; the SmolLM2 drafter drafts its shipped tree."""

from __future__ import annotations

import pytest

from specpath.errors import SpeculativeConfigError
from specpath_drafting.block.testing import tiny_drafter
from specpath_drafting.testing import (TINY_PROMPTS, baseline_tokens, drafting_target, greedy, resolve, tiny_llm,
                                       with_train_vocab)


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("dflash-trees")
    drafting_target(root / "target", num_layers=4)
    drafter = tiny_drafter("dflash", root / "target", root / "drafter", seed=3, num_layers=2)
    return root, drafter, baseline_tokens(root / "target")


def spied(llm) -> list:
    """The trees ``llm``'s speculator proposes from now on (None for a chain-only step)."""
    proposed = []
    original = llm.speculator.proposal

    def spy(*args):
        out = original(*args)
        proposed.append(out.tree)
        return out

    llm.speculator.proposal = spy
    return proposed


@pytest.mark.parametrize("k", range(1, 7))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_output_with_trees_equals_the_baseline(setup, k, prefix_caching):
    root, drafter, baseline = setup
    llm = tiny_llm(root / "target", {"method": "dflash", "model": drafter, "num_speculative_tokens": k,
                                     "draft_tree_topk": 2, "draft_length_policy": "fixed"},
                   enable_prefix_caching=prefix_caching)
    assert llm.speculator.tree_c == 2
    proposed = spied(llm)
    outputs = llm.generate(TINY_PROMPTS + TINY_PROMPTS[:2], greedy())
    assert [o.token_ids for o in outputs] == baseline + baseline[:2]
    trees = [t for t in proposed if t is not None]
    assert trees and all(len(t.token_ids) == sum(t.num_tree_tokens) == len(t.parents) for t in trees)
    if k >= 2:
        assert any(p != j - 1 for t in trees for j, p in enumerate(t.parents))  # real branching


def test_trees_only_where_the_engine_verifies_them(setup):
    root, drafter, baseline = setup
    spec = {"method": "dflash", "model": drafter, "num_speculative_tokens": 4, "draft_tree_topk": 3}
    chains = tiny_llm(root / "target", spec, tree_verification=False)
    assert chains.speculator.tree_c is None
    assert [o.token_ids for o in chains.generate(TINY_PROMPTS, greedy())] == baseline
    block = tiny_llm(root / "target", {**spec, "rejection_sample_method": "block"})
    assert block.speculator.tree_c is None
    assert "no effect" in block.engine_config.speculative_config.speculator_config.describe()["draft_shape"]
    trees = tiny_llm(root / "target", spec)
    assert "best-first" in trees.engine_config.speculative_config.speculator_config.describe()["draft_shape"]
    with pytest.raises(SpeculativeConfigError, match="draft_tree_topk=3 drafts the top-k"):
        resolve({**spec, "draft_sample_method": "random"}, root / "target")


def test_reduced_vocabulary_trees_are_the_whole_vocabularys(setup, tmp_path):
    """The kept-ids path (a restricted head's logits) proposes the trees the whole-vocabulary path
    does (forced by hiding ``kept_logits``), step by step."""
    root, drafter, baseline = setup
    restricted = with_train_vocab(drafter, tmp_path / "restricted", range(0, 64, 2))
    spec = {"method": "dflash", "model": str(restricted), "num_speculative_tokens": 4, "draft_tree_topk": 2,
            "draft_length_policy": "fixed"}
    runs = []
    for hide in (False, True):
        llm = tiny_llm(root / "target", spec)
        if hide:
            llm.speculator.drafter.kept_logits = lambda hidden: None
        proposed = spied(llm)
        outputs = [o.token_ids for o in llm.generate(TINY_PROMPTS, greedy())]
        assert outputs == baseline
        runs.append([(list(t.token_ids), list(t.parents)) for t in proposed if t is not None])
    assert runs[0] and runs[0] == runs[1]


def test_draft_tree_topk_is_a_hash_factor(setup):
    root, drafter, _ = setup
    a = resolve({"method": "dflash", "model": drafter}, root / "target")
    b = resolve({"method": "dflash", "model": drafter, "draft_tree_topk": 2}, root / "target")
    assert a.compute_hash() != b.compute_hash()


def test_the_smollm2_drafter_drafts_its_shipped_tree(tmp_path):
    from specpath.config.model import ModelConfig
    from specpath.config.speculative import SpeculativeConfig
    from specpath_drafting.testing import smollm2_config_dir

    target = ModelConfig(model=str(smollm2_config_dir(tmp_path / "smollm2")))
    shipped = SpeculativeConfig.from_dict({"method": "dflash"}, target_model_config=target)
    assert (shipped.num_speculative_tokens, shipped.draft_tree_topk) == (4, 2)
    chain = SpeculativeConfig.from_dict({"method": "dflash", "num_speculative_tokens": 4}, target_model_config=target)
    assert chain.draft_tree_topk is None  # a K of one's own: the chain
