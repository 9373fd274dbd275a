"""How many tokens to draft for a request this step: as many as pay, and none when drafting does not.

Verification is lossless for any draft length, so the engine may choose each request's K every
step without changing what is generated. Drafting ``k`` tokens costs the drafter ``k`` token
passes and the target ``k`` more query rows, and returns the accepted prefix. With ``P(j)``
the chance that the first ``j`` drafts are all accepted, a step yields on average
``E(k) = 1 + P(1) + ... + P(k)`` tokens for a relative cost
``C(k) = 1 + call + pass + k * verify`` for a drafter that drafts all K in one pass, or
``1 + call + k * (pass + verify)`` for one that drafts a token a pass (a plain step costs 1; the
drafter's ``pass`` cost is static: see ``llm_engine.draft_pass_cost``), so the governor picks
``k = argmax E(k) / C(k)`` over ``0..K``; ``k = 0`` is plain decoding.

``P(j)`` comes from the request's own recent verifications (conditional acceptance at each
depth, decayed so it follows the text as it changes, starting from an optimistic prior so every
request tries drafting). A backed-off request is probed again after a wait that doubles while
probes keep failing, so a request that becomes predictable (a quoted block, a repetition) is
picked up again. Every input is the request's own history and fixed costs, never timings, and
the back-off is counted in output positions, not calls: the same request gives the same drafts,
and a seeded request the same text, in every run, whatever the batch, and across preemption (a
resumed request re-asked at a position gets the same answer).

Worked example: K=4, a pass of 0.10 per token (verify 0.02, call 0.03). A request whose
conditional acceptance is 0.8 at every depth has P = 0.8, 0.64, 0.51, 0.41: E(4)/C(4) =
3.36/1.51 = 2.2, so it drafts 4. At 0.3 per depth P = 0.3, 0.09, ...: E(1)/C(1) = 1.3/1.15 =
1.13 beats E(2)/C(2) = 1.39/1.27, so it drafts 1; at 0.1 nothing beats 1.0 and it decodes plainly.
"""

from __future__ import annotations

import attrs

PRIOR_ACCEPTANCE = 0.7
"""Conditional acceptance a request starts from at every depth (optimistic: it tries drafting)."""

PRIOR_WEIGHT = 2.0
"""How many verifications the prior counts as."""

DECAY = 0.9
"""Weight of past verifications after each new one: about the last ten steps count."""

VERIFY_COST = 0.02
"""Target cost of one more query row, relative to a plain step (decode is memory-bound: the
weights are read once whatever the rows)."""

CALL_COST = 0.03
"""Fixed cost of a drafting step (the drafter's call, the verification set-up)."""

FIRST_WAIT, MAX_WAIT = 4, 64
"""Positions a backed-off request waits before a probe; doubled per failed probe, at most MAX_WAIT."""


@attrs.define(kw_only=True, slots=True)
class RequestAcceptance:
    """One request's decayed acceptance counts by depth and its back-off state."""

    accepted: list[float]
    """Decayed count of drafts accepted at depth j (given depths < j accepted)."""
    tried: list[float]
    """Decayed count of drafts verified at depth j."""
    probe_at: int = -1
    """While backed off, the position from which the next probe drafts (-1: not backed off)."""
    next_wait: int = FIRST_WAIT
    """Positions the next back-off waits."""
    probing: bool = False

    def conditional(self, depth: int) -> float:
        return (self.accepted[depth] + PRIOR_ACCEPTANCE * PRIOR_WEIGHT) / (self.tried[depth] + PRIOR_WEIGHT)


def best_length(conditional: list[float], max_k: int, pass_cost: float, one_pass: bool = False) -> int:
    """``argmax_k E(k) / C(k)`` (see the module docstring); 0 when no draft pays."""
    best_k, best, reach, expected = 0, 1.0, 1.0, 1.0
    fixed = 1.0 + CALL_COST + (pass_cost if one_pass else 0.0)
    per_token = VERIFY_COST + (0.0 if one_pass else pass_cost)
    for k in range(1, max_k + 1):
        reach *= conditional[k - 1]
        expected += reach
        value = expected / (fixed + k * per_token)
        if value > best:
            best_k, best = k, value
    return best_k


class DraftGovernor:
    """Per-request draft lengths (``choose``) and their outcomes (``observe``)."""

    def __init__(self, max_k: int, pass_cost: float, *, one_pass: bool = False) -> None:
        self.max_k = max_k
        self.pass_cost = pass_cost
        """Cost of one drafter pass relative to a plain target step."""
        self.one_pass = one_pass
        """The drafter drafts all K in one pass (else one token a pass)."""
        self._requests: dict[str, RequestAcceptance] = {}

    def _state(self, req_id: str) -> RequestAcceptance:
        state = self._requests.get(req_id)
        if state is None:
            state = self._requests[req_id] = RequestAcceptance(accepted=[0.0] * self.max_k, tried=[0.0] * self.max_k)
        return state

    def choose(self, req_id: str, max_draft_tokens: int, position: int) -> int:
        """Drafts for this request this step, at most ``max_draft_tokens``; ``position`` is the
        request's length (what the drafts would follow)."""
        if max_draft_tokens <= 0:
            return 0
        state = self._state(req_id)
        limit = min(max_draft_tokens, self.max_k)
        if state.probe_at >= 0:
            if position < state.probe_at:
                return 0
            state.probing = True
            return limit
        k = best_length([state.conditional(j) for j in range(limit)], limit, self.pass_cost, self.one_pass)
        if k == 0:
            state.probe_at = position + state.next_wait
        return k

    def observe(self, req_id: str, num_drafted: int, num_accepted: int) -> None:
        """The verification of a step in which this request drafted ``num_drafted`` tokens."""
        if num_drafted <= 0:
            return
        state = self._state(req_id)
        for j in range(self.max_k):
            state.accepted[j] *= DECAY
            state.tried[j] *= DECAY
        for j in range(min(num_drafted, num_accepted + 1, self.max_k)):
            state.tried[j] += 1.0
            if j < num_accepted:
                state.accepted[j] += 1.0
        if state.probing:
            state.probing = False
            state.probe_at = -1
            pays = best_length([state.conditional(j) for j in range(self.max_k)], self.max_k, self.pass_cost, self.one_pass) > 0
            state.next_wait = FIRST_WAIT if pays else min(MAX_WAIT, state.next_wait * 2)

    def remove(self, req_id: str) -> None:
        self._requests.pop(req_id, None)
