"""Tree proposals through ``LLM`` on the embedded model: suffix decoding's tree drafts, DSpark's
``xpress_topc`` trees and the hidden-state drafters' ``draft_tree_topk`` trees (EAGLE-3, MTP) give
plain decoding's greedy tokens for K 1..8 with prefix caching on and off, and the trees verified
really branch."""

from __future__ import annotations

import pytest

from specpath_engine import tree_layout
from specpath_engine.llm import LLM, SamplingParams

PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    "import os\nimport sys\nimport json\nimport os.path\nimport sys\nimport ",
    "for i in range(10):\n    print(i)\nfor j in range(20):\n    print(j)\nfor k in range(",
]
PARAMS = SamplingParams(temperature=0.0, max_tokens=32, ignore_eos=True)
TREE_OPTIONS = {"dspark": {"xpress_topc": 3}, "eagle3": {"draft_tree_topk": 3}, "mtp": {"draft_tree_topk": 2}}
"""What makes each method propose trees (suffix always does)."""
BRANCHES_FROM_K = {"suffix": 4}
"""The smallest K from which these prompts give a method's trees a branch (default 2)."""


@pytest.fixture(scope="module", autouse=True)
def _installed_plugins():
    """The real installed plugins (other engine tests narrow the plugin scan to their fakes)."""
    from specpath import plugins

    plugins.reset()
    yield


@pytest.fixture(scope="module")
def plain():
    return [o.token_ids for o in LLM(None, None, num_threads=1).generate(PROMPTS + PROMPTS[:1], PARAMS)]


@pytest.fixture
def branching(monkeypatch):
    """Counts trees verified with the tree layout, and those that branch."""
    original = tree_layout.apply_tree_attention
    seen = {"trees": 0, "branching": 0}

    def spy(meta, positions, *, trees, **kw):
        for t in trees:
            if t is not None:
                seen["trees"] += 1
                seen["branching"] += any(p != j - 1 for j, p in enumerate(t.parents))
        return original(meta, positions, trees=trees, **kw)

    monkeypatch.setattr(tree_layout, "apply_tree_attention", spy)
    return seen


@pytest.mark.parametrize("method", ["suffix", "dspark", "eagle3", "mtp"])
@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_tree_proposals_keep_greedy_output(plain, branching, method, k, prefix_caching):
    config = {"method": method, "num_speculative_tokens": k, "draft_length_policy": "fixed",  # trees every step
              **TREE_OPTIONS.get(method, {})}
    llm = LLM(None, config, num_threads=1, enable_prefix_caching=prefix_caching, max_num_seqs=4)
    assert [o.token_ids for o in llm.generate(PROMPTS + PROMPTS[:1], PARAMS)] == plain
    if k >= BRANCHES_FROM_K.get(method, 2):  # these prompts have several continuations
        assert branching["branching"] > 0
    assert branching["branching"] == branching["trees"]  # paths are verified as chains


@pytest.mark.parametrize("method", ["dspark", "eagle3"])  # suffix builds no branching tree for one request here
def test_bf16_trees_keep_greedy_output_on_the_native_kernels(branching, method):
    """On the native kernels a tree row attends over just the keys it sees, row-invariantly, so in
    bf16 too a verified tree gives plain decoding's tokens (one request at a time)."""
    from specpath_engine.modeling.native import kernels

    if kernels() is None:
        pytest.skip("native kernels unavailable here")
    config = {"method": method, "num_speculative_tokens": 6, "draft_length_policy": "fixed",  # trees every step
              **TREE_OPTIONS[method]}  # (adaptive, the step's costs may cut the branches: draft_worth)
    plain = LLM(None, None, dtype="bfloat16", num_threads=1)
    llm = LLM(None, config, dtype="bfloat16", num_threads=1)
    for prompt in PROMPTS:
        assert llm.generate([prompt], PARAMS)[0].token_ids == plain.generate([prompt], PARAMS)[0].token_ids
    assert branching["branching"] > 0
