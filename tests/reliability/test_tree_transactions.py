"""Tree verification keeps steps transactional: a failure in tree acceptance, in the KV
compaction of the accepted path, or in a tree-building drafter aborts only that call's requests,
frees their blocks and drafter state, and the next call gives plain decoding's tokens again."""

from __future__ import annotations

import pytest

from specpath_engine import tree_layout
from specpath_engine.llm import LLM, RequestFailedError, SamplingParams
import specpath_engine.sample.tree_verification as tree_module
from reliability_helpers import Boom, assert_clean, fail_on_call

# Prompts with several continuations of the same context, so both drafters propose branching trees.
PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    "import os\nimport sys\nimport json\nimport os.path\nimport sys\nimport ",
    "for i in range(10):\n    print(i)\nfor j in range(20):\n    print(j)\nfor k in range(",
]
GREEDY = SamplingParams(max_tokens=24)
SAMPLED = SamplingParams(max_tokens=48, temperature=0.9, seed=5)  # long enough for suffix to branch


@pytest.fixture(scope="module", params=[{"method": "dspark", "xpress_topc": 2},
                                        # no global tree: drafts depend on the request alone
                                        {"method": "suffix", "num_speculative_tokens": 6,
                                         "suffix_decoding_max_cached_requests": 0}],
                ids=["dspark-xpress", "suffix"])
def tree_llm(request):
    llm = LLM(None, request.param, num_threads=1)
    assert llm.engine.runner.verifies_trees
    return llm


@pytest.fixture(scope="module")
def expected():
    return [o.token_ids for o in LLM(None, None, num_threads=1).generate(PROMPTS, GREEDY)]


@pytest.mark.parametrize("where", ["verify_trees", "compact_path", "propose"])
def test_a_failure_mid_step_aborts_the_call_and_the_engine_recovers(tree_llm, expected, monkeypatch, where):
    # every step drafts (K fixed): the measured draft-length policy may back off on the tiny
    # embedded model, and the failures are injected into drafting steps
    monkeypatch.setattr(tree_llm.engine.runner, "governor", None)
    if where == "verify_trees":
        monkeypatch.setattr(tree_module, "verify_trees", fail_on_call(1, tree_module.verify_trees))
    elif where == "compact_path":
        monkeypatch.setattr(tree_layout, "compact_path", fail_on_call(1, tree_layout.compact_path))
    else:
        spec = tree_llm.speculator
        monkeypatch.setattr(spec, "propose", fail_on_call(4, spec.propose))
    params = SAMPLED if where == "verify_trees" else GREEDY
    with pytest.raises(RequestFailedError, match="injected failure") as failure:
        tree_llm.generate(PROMPTS, params)
    assert isinstance(failure.value.__cause__, Boom) and "\n" not in str(failure.value)
    assert failure.value.requests and all(r.finish_reason == "error" for r in failure.value.requests)
    assert all(r.is_finished for r in failure.value.all_requests)  # finished earlier, or aborted
    assert_clean(tree_llm)
    monkeypatch.undo()
    assert [o.token_ids for o in tree_llm.generate(PROMPTS, GREEDY)] == expected
    assert_clean(tree_llm)


def test_seeded_sampling_with_trees_does_not_depend_on_the_batch(tree_llm, monkeypatch):
    # every step drafts (K fixed): the measured draft-length policy may price every draft out on a
    # busy machine (CI once saw a call with no drafts at all), and then nothing here is tested
    monkeypatch.setattr(tree_llm.engine.runner, "governor", None)
    alone = tree_llm.generate(PROMPTS[:1], SAMPLED)[0].token_ids
    mixed = [GREEDY, SamplingParams(max_tokens=12, temperature=1.1, seed=9), SAMPLED]
    assert tree_llm.generate([PROMPTS[1], PROMPTS[2], PROMPTS[0]], mixed)[2].token_ids == alone
    assert tree_llm.generate(PROMPTS, [SAMPLED, GREEDY, GREEDY])[0].token_ids == alone
    assert tree_llm.metrics.num_draft_tokens > 0
