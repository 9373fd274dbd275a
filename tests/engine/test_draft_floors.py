"""Drafts cut where the drafter's own estimates stop paying (``draft_worth``, ``draft_calibration``
and ``DraftRequest.min_draft_probability``) in a running engine: the output stays plain
decoding's, the drafter stops early and the runner verifies fewer drafts than it allotted."""

import pytest

from specpath_engine.draft_calibration import Calibration
from specpath_engine.llm import LLM, SamplingParams

from engine_helpers import ScriptedGovernor

PROMPTS = ["def fibonacci(n):\n", "class Stack:\n    def __init__(self):\n", "import os\nimport sys\n"]


class Floored(ScriptedGovernor):
    """A governor that allots every request its whole K and prices drafts at fixed floors."""

    def __init__(self, floors):
        super().__init__()
        self.floors = floors
        self.calibration = Calibration()
        self.allotted = 0

    def allocate(self, req_ids, limits, positions, pending, **_):
        self.allotted += sum(limits)
        return list(limits)


def _run(config, floors, dtype="bfloat16"):
    llm = LLM(None, config, dtype=dtype)
    governor = llm.engine.runner.governor = Floored(floors)
    outs = llm.generate(PROMPTS, SamplingParams(max_tokens=32, ignore_eos=True))
    return [o.token_ids for o in outs], sum(o.metrics.num_draft_tokens for o in outs), governor


def _one_module_mtp() -> str:
    """The embedded target's one-module MTP checkpoint (its default has three, drafted per-op)."""
    from pathlib import Path

    import specpath_mtp

    return str(Path(specpath_mtp.__file__).parent / "checkpoints" / "mtp1")


@pytest.mark.parametrize("method", ["eagle3", "mtp"])
def test_drafts_cut_by_their_estimates_leave_the_output_plain(method):
    plain = [o.token_ids for o in LLM(None, None, dtype="bfloat16").generate(
        PROMPTS, SamplingParams(max_tokens=32, ignore_eos=True))]
    config = {"method": method, "num_speculative_tokens": 4}
    if method == "mtp":
        config["model"] = _one_module_mtp()
    whole, drafted_whole, _ = _run(config, (0.0, 0.0))
    cut, drafted_cut, governor = _run(config, (0.6, 0.6))
    assert whole == cut == plain
    # the native propose and the per-op chain both estimate their drafts: the unlikely ones are cut
    assert drafted_cut < drafted_whole <= governor.allotted
    assert governor.calibration.summary() != Calibration().summary()  # verification taught it


@pytest.mark.parametrize("native_propose", [True, False])
def test_the_per_op_chain_estimates_its_drafts_as_the_native_one_does(native_propose):
    """Both paths report each greedy draft's probability under the head (``confidences``)."""
    llm = LLM(None, {"method": "eagle3", "num_speculative_tokens": 4}, dtype="bfloat16")
    speculator = llm.engine.runner.speculator
    drafter = getattr(speculator, "drafter", speculator)
    drafter.native_propose = native_propose
    seen = []
    propose = drafter.propose

    def spy(batch):
        proposal = propose(batch)
        if sum(proposal.num_draft_tokens):
            seen.append(proposal.confidences.tolist())
        return proposal

    drafter.propose = spy
    llm.generate(PROMPTS[:1], SamplingParams(max_tokens=16, ignore_eos=True))
    assert seen and all(len(c) and all(0.0 < p <= 1.0 for p in c) for c in seen)


def test_the_governor_prices_a_pass_and_a_row_after_each_allocation():
    llm = LLM(None, {"method": "eagle3", "num_speculative_tokens": 4}, dtype="float32")
    governor = llm.engine.runner.governor
    seen = []
    allocate = governor.allocate

    def spy(*a, **k):
        ks = allocate(*a, **k)
        seen.append((sum(ks), governor.floors))
        return ks

    governor.allocate = spy
    llm.generate(PROMPTS, SamplingParams(max_tokens=24, ignore_eos=True))
    drafting = [f for n, f in seen if n]
    assert drafting and all(0 <= row <= draft <= 1 and draft > 0 for draft, row in drafting)  # a pass and a row cost more than a row
    assert all(f == (0.0, 0.0) for n, f in seen if not n)


def test_seeded_sampling_is_plain_decodings_with_drafts_cut():
    """A seeded request at T=0.8 emits plain decoding's tokens (the race) whether or not its drafts
    are cut by their estimates; an unseeded one samples from the same distribution either way
    (its drafts are greedy: the cut reads estimates of drafts before it, never the token cut)."""
    params = SamplingParams(max_tokens=32, ignore_eos=True, temperature=0.8, seed=7)
    plain = [o.token_ids for o in LLM(None, None, dtype="bfloat16").generate(PROMPTS, params)]
    config = {"method": "eagle3", "num_speculative_tokens": 4}
    drafted = []
    for floors in ((0.0, 0.0), (0.6, 0.6)):
        llm = LLM(None, config, dtype="bfloat16")
        llm.engine.runner.governor = Floored(floors)
        outs = llm.generate(PROMPTS, params)
        assert [o.token_ids for o in outs] == plain
        drafted.append(sum(o.metrics.num_draft_tokens for o in outs))
    assert drafted[1] < drafted[0]  # the race's drafts were cut too
