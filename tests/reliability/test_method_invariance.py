"""Every installed method: a seeded sampled request gives the same tokens alone and batched with
drafting requests, and stop strings end the output exactly where plain decoding ends it."""

from __future__ import annotations

import pytest

from reliability_helpers import installed_methods
from specpath_engine.llm import LLM, SamplingParams

PROMPTS = [
    "def main(argv=None):\n    ",
    "import os\nimport sys\n\n",
    "class Queue:\n    def put(self, item):\n",
    "    def __repr__(self):\n        return ",
]
# Suffix decoding's global tree drafts from earlier requests' responses, so a request's drafts depend
# on what ran before it; a seeded request's tokens do not (they are the race winners on its noise,
# whatever was drafted), so suffix runs with its global tree here like any other method.
METHODS = installed_methods()


@pytest.fixture(scope="module", params=METHODS, ids=[name for name, _ in METHODS])
def llm(request):
    # drafts every step (K fixed): the measured policy may back off to plain steps on the tiny
    # embedded model, and these tests need drafts verified (any K: tests/reliability/test_seeded_speculation.py)
    return LLM(None, {**request.param[1], "draft_length_policy": "fixed"}, max_num_seqs=8)


def test_seeded_output_does_not_depend_on_the_batch(llm):
    seeded = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=20, seed=1234)
    alone = llm.generate(PROMPTS[:1], seeded)[0].token_ids
    drafting = SamplingParams(max_tokens=20)  # greedy requests draft and verify in the same steps
    mixed = [drafting, SamplingParams(temperature=1.1, max_tokens=12, seed=9), seeded, drafting]
    batched = llm.generate([PROMPTS[1], PROMPTS[2], PROMPTS[0], PROMPTS[3]], mixed)
    assert batched[2].token_ids == alone
    first = llm.generate(PROMPTS[:1] + PROMPTS[1:], [seeded, drafting, drafting, drafting])[0].token_ids
    assert first == alone
    assert llm.metrics.num_draft_tokens > 0
    assert llm.engine.blocks.num_free_blocks == llm.engine.blocks.num_blocks


@pytest.mark.parametrize("stop", ["\n", "  ", "e"])
def test_stop_strings_end_output_like_plain_decoding(llm, plain_llm, stop):
    params = SamplingParams(max_tokens=32, stop=[stop])
    expected = plain_llm.generate(PROMPTS, params)
    got = llm.generate(PROMPTS, params)
    assert [o.token_ids for o in got] == [o.token_ids for o in expected]
    assert [o.text for o in got] == [o.text for o in expected]
    assert [o.finish_reason for o in got] == [o.finish_reason for o in expected]
