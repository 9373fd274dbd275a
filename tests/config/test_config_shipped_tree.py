"""``ShippedCheckpoint.tree``: a shipped drafter's draft tree (K and ``draft_tree_topk``), applied at
resolution where the config sets neither and its verification verifies trees."""

from __future__ import annotations

import pytest

from specpath.config.speculative import SpeculativeConfig

pytestmark = pytest.mark.usefixtures("fake_builtins")


@pytest.fixture
def head(make_checkpoint, monkeypatch):
    """The toy head as a shipped EAGLE-3 checkpoint whose row drafts a tree of 6 nodes, 2 a pass."""
    from specpath.config.shipped import ShippedCheckpoint
    from specpath.lookup import builtin_config_class

    path = make_checkpoint("eagle3-head")
    cls = builtin_config_class("eagle3").config_class
    monkeypatch.setattr(cls, "shipped_checkpoints", (ShippedCheckpoint("toy", path, tree=(6, 2)),))
    monkeypatch.setattr(cls, "shipped_drafter_k", 4)  # its chain's K (the real class's)
    return path


def _resolve(head, **fields):
    return SpeculativeConfig.from_dict({"method": "eagle3", "model": head, **fields})


def test_a_shipped_drafter_drafts_its_rows_tree_where_the_config_sets_neither(head):
    spec = _resolve(head)
    assert (spec.num_speculative_tokens, spec.draft_tree_topk) == (6, 2)
    assert ("configure", "the shipped drafter's tree: K=6 nodes, draft_tree_topk=2 (set num_speculative_tokens or "
                         "draft_tree_topk to choose another shape)") in spec.resolution_trace
    assert spec.speculator_config.describe()["shipped_drafter_tree"] == (6, 2)
    assert spec.inputs["num_speculative_tokens"] is None  # a default, re-derived on every resolution
    assert _resolve(head).compute_hash() == spec.compute_hash() != _resolve(head, draft_tree_topk=1).compute_hash()


@pytest.mark.parametrize("fields, k, topk", [
    ({"num_speculative_tokens": 3}, 3, None),  # K given: the chain the user asked for
    ({"draft_tree_topk": 3}, 4, 3),  # a shape given: the user's, at the chain's K
    ({"draft_tree_topk": 1}, 4, 1),  # the chain, asked for
])
def test_a_config_that_sets_k_or_the_tree_keeps_its_own(head, fields, k, topk):
    spec = _resolve(head, **fields)
    assert (spec.num_speculative_tokens, spec.draft_tree_topk) == (k, topk)
    assert not any("shipped drafter's tree" in detail for _, detail in spec.resolution_trace)


@pytest.mark.filterwarnings("ignore::specpath.config.rules.LossyVerificationWarning")  # the synthetic case
@pytest.mark.parametrize("fields", [
    {"rejection_sample_method": "synthetic", "synthetic_acceptance_length": 2.0},  # verifies chains
    {"parallel_drafting": True},  # P-EAGLE drafts all K in one pass
    {"draft_sample_method": "random"},  # one sampled chain
])
def test_where_trees_are_not_drafted_or_verified_no_tree_is_chosen(head, fields):
    spec = _resolve(head, **fields)
    assert (spec.num_speculative_tokens, spec.draft_tree_topk) == (4, None)
    assert not any("shipped drafter's tree" in detail for _, detail in spec.resolution_trace)


def test_another_checkpoint_gets_no_tree(make_checkpoint, head):
    other = make_checkpoint("eagle3-other")
    spec = SpeculativeConfig.from_dict({"method": "eagle3", "model": other, "num_speculative_tokens": 4})
    assert spec.draft_tree_topk is None and spec.speculator_config.describe()["shipped_drafter_tree"] is None


def test_over_a_quantised_target_the_tree_stays(head):
    """Verified rows cost more over an int4 target, but the engine verifies only the nodes worth
    their rows: the shipped tree all the same."""
    from specpath.config.model import ModelConfig

    target = ModelConfig(model=head, quantization="int4")
    spec = SpeculativeConfig.from_dict({"method": "eagle3", "model": head}, target_model_config=target)
    assert (spec.num_speculative_tokens, spec.draft_tree_topk) == (6, 2)


def test_the_tree_width_goes_to_the_class_tree_option(head, monkeypatch):
    """A class whose tree width is another option (DSpark's ``xpress_topc``) gets the row's width
    there, and a config that sets that option keeps its own shape."""
    from specpath.lookup import builtin_config_class

    cls = builtin_config_class("eagle3").config_class
    monkeypatch.setattr(cls, "tree_option", "xpress_topc")
    monkeypatch.setattr(cls, "supported_options", cls.supported_options | {"xpress_topc"})
    spec = _resolve(head)
    assert (spec.num_speculative_tokens, spec.xpress_topc, spec.draft_tree_topk) == (6, 2, None)
    assert ("configure", "the shipped drafter's tree: K=6 nodes, xpress_topc=2 (set num_speculative_tokens or "
                         "xpress_topc to choose another shape)") in spec.resolution_trace
    own = _resolve(head, xpress_topc=3)
    assert (own.num_speculative_tokens, own.xpress_topc) == (4, 3)
