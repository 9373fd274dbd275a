"""A drafter with a model-free method beside it (``speculative_config.model_free_drafter``).

Model-free drafts (n-gram, suffix) cost next to nothing and, where the output repeats its
context, are accepted far more often than a small drafter's; elsewhere they are short, absent, or
a match that the text does not follow. So each step both draft, and a request whose model-free
draft is at least ``min_tokens`` long has the two chains arbitrated:

- where one chain is a prefix of the other, the longer one is verified (they agree as far as
  both go);
- where they part at some depth, the side this request's own record favours: after every such
  step the committed tokens say which side (if either) had the token where they parted, and a
  score per request (an average decaying by :data:`RECORD_DECAY`, starting from the engine's
  running score over all requests) keeps the tally. At a tie (no evidence yet) the drafter's
  chain is verified: a parting is tallied whichever side was verified.

Taking the model-free draft whenever it was long enough (the rule before) cost EAGLE-3 4% of its
τ on held-out everyday chat (1.95 against 2.03 alone), where a matched n-gram often continues
differently, while it raised code's from 2.01 to 2.79; the record learns which text it is in
after a few partings (SmolLM2-135M, docs/benchmarks-history.md, 2026-12-05).

Both parts see the same batch, the same removals and every request's verification (but for a
step where no request may draft, which the model-free method skips, and most steps of a stretch
where it predicted nothing, :data:`IDLE_STEPS`: it reads token ids only and catches up when next
asked; its propose is 0.18 ms of an 11 ms SmolLM2 step); the side
whose draft was not verified is told that none of its drafts were accepted (its drafts were
not what the target checked, so none of its speculative state is kept). The composite is
built by :func:`specpath.factory.create_speculator` from the resolved config, so engines and
bridges get it without knowing it is two drafters.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftTree

IDLE_STEPS, IDLE_EVERY = 16, 4
"""After this many steps in which no model-free draft long enough to count had its first token
right (verified or not), the model-free method is asked only every ``IDLE_EVERY``-th step until
one has again (it reads token ids only, so it catches up when asked): on text it does not
predict (everyday chat) its propose, 0.18 ms of an 11 ms SmolLM2 step, is most of what it costs."""

RECORD_DECAY = 0.3
"""Weight of the newest parting in a request's score (+1: the model-free token was the target's,
-1: the drafter's); the engine-wide score that new requests start from moves by a sixth of it."""


@attrs.define
class _Parting:
    """What a request's two chains were at the step they parted (for the next step's tally)."""

    length: int
    """``len(token_ids)`` when drafted: the committed tokens start there."""
    depth: int
    """Where the chains differ."""
    own: int
    free: int
    """The drafter's and the model-free token at ``depth``."""


class HybridSpeculator(BaseSpeculator):
    """Both drafters every step; the model-free chain where it is at least ``min_tokens`` long
    and either extends the drafter's or this request's record favours it."""

    def __init__(self, drafter: BaseSpeculator, model_free: BaseSpeculator, min_tokens: int) -> None:
        super().__init__(drafter.spec, drafter.context)
        self.drafter = drafter
        self.model_free = model_free
        self.min_tokens = int(min_tokens)
        self.num_model_free_drafts = 0
        """Request-steps verified with the model-free draft (for benchmarks and tests)."""
        self.score: dict[str, float] = {}
        """Per request, > 0 where the model-free token was the target's more often at partings."""
        self.engine_score = 0.0
        """What a new request's score starts from: the running tally over all requests."""
        self._partings: dict[str, _Parting] = {}
        self._taken: dict[str, bool] = {}
        self.idle_steps = IDLE_STEPS
        """:data:`IDLE_STEPS` for this instance (a benchmark may turn the throttle off)."""
        self._idle = 0  # steps since a long enough model-free draft had its first token right
        self._offers: dict[str, tuple[int, int]] = {}  # req id -> (len(token_ids), first model-free token)
        self._asked_free = False  # the model-free method drafted last step
        self._budgeted = 0  # steps where some request may draft

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        return self.drafter.hidden_state_layers

    def propose(self, batch: DraftBatch) -> DraftProposal:
        self._tally(batch)
        own = self.drafter.propose(batch)
        self._taken = {}
        if not any(r.max_draft_tokens > 0 for r in batch.requests):
            return own  # a model-free method reads token ids only: it catches up when next asked
        self._budgeted += 1
        if self._idle >= self.idle_steps and self._budgeted % IDLE_EVERY:
            self._idle += 1
            return own
        free = self.model_free.propose(DraftBatch(requests=batch.requests))
        self._asked_free = True
        taken = self._choose(batch, own, free)
        self._taken = {r.req_id: t for r, t in zip(batch.requests, taken)}
        if not any(taken):
            return own
        self.num_model_free_drafts += sum(taken)
        return merge_proposals(own, free, taken)

    def _choose(self, batch: DraftBatch, own: DraftProposal, free: DraftProposal) -> list[bool]:
        """Per request, whether its model-free chain is verified (module docstring); records
        where the two chains part."""
        own_counts, free_counts = [int(n) for n in own.num_draft_tokens], [int(n) for n in free.num_draft_tokens]
        if not any(n >= self.min_tokens for n in free_counts):
            return [False] * len(free_counts)
        own_ids, free_ids = own.token_ids.tolist(), free.token_ids.tolist()
        taken, a, b = [], 0, 0
        for request, n_own, n_free in zip(batch.requests, own_counts, free_counts):
            mine, theirs = own_ids[a:a + n_own], free_ids[b:b + n_free]
            a, b = a + n_own, b + n_free
            if n_free < self.min_tokens:
                taken.append(False)
                continue
            self._offers[request.req_id] = (len(request.token_ids), theirs[0])
            depth = _common_prefix(mine, theirs)
            if depth == min(n_own, n_free):  # one extends the other
                taken.append(n_free > n_own)
                continue
            self._partings[request.req_id] = _Parting(length=len(request.token_ids), depth=depth,
                                                      own=mine[depth], free=theirs[depth])
            taken.append(self.score.get(request.req_id, self.engine_score) > 0.0)
        return taken

    def _tally(self, batch: DraftBatch) -> None:
        """Score the last step's partings against the tokens the target committed, and whether
        the model-free method predicted anything (:data:`IDLE_STEPS`)."""
        if self._asked_free:
            self._asked_free = False
            offers = [(r.token_ids, self._offers.get(r.req_id)) for r in batch.requests]
            right = any(o is not None and len(ids) > o[0] and ids[o[0]] == o[1] for ids, o in offers)
            self._idle = 0 if right else self._idle + 1
            self._offers.clear()
        if not self._partings:
            return
        for request in batch.requests:
            parting = self._partings.pop(request.req_id, None)
            if parting is None or len(request.token_ids) <= parting.length + parting.depth:
                continue
            token = request.token_ids[parting.length + parting.depth]
            if (token == parting.free) == (token == parting.own):
                continue  # neither (or, impossibly, both): no evidence
            verdict = 1.0 if token == parting.free else -1.0
            score = self.score.get(request.req_id, self.engine_score)
            self.score[request.req_id] = score + RECORD_DECAY * (verdict - score)
            self.engine_score += RECORD_DECAY / 6 * (verdict - self.engine_score)
        self._partings.clear()

    def on_verified(self, req_ids: Sequence[str], num_accepted: Sequence[int]) -> None:
        taken = [self._taken.get(r, False) for r in req_ids]
        self.drafter.on_verified(req_ids, [0 if t else int(n) for n, t in zip(num_accepted, taken)])
        self.model_free.on_verified(req_ids, [int(n) if t else 0 for n, t in zip(num_accepted, taken)])

    def remove_request(self, req_id: str) -> None:
        self.score.pop(req_id, None)
        self._partings.pop(req_id, None)
        self._offers.pop(req_id, None)
        self._taken.pop(req_id, None)
        self.drafter.remove_request(req_id)
        self.model_free.remove_request(req_id)

    def forget_responses(self) -> None:
        self.engine_score = 0.0
        self._idle = self._budgeted = 0
        self._offers.clear()
        self._asked_free = False
        self.drafter.forget_responses()
        self.model_free.forget_responses()


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def merge_proposals(own: DraftProposal, free: DraftProposal, taken: Sequence[bool]) -> DraftProposal:
    """Per request, ``free``'s drafts (and tree) where ``taken``, else ``own``'s. Draft
    probabilities, when ``own`` has them, are one-hot rows for the model-free drafts; its
    confidences, NaN (no estimate) for them."""
    own_counts, free_counts = [int(n) for n in own.num_draft_tokens], [int(n) for n in free.num_draft_tokens]
    own_ids, free_ids = own.token_ids.tolist(), free.token_ids.tolist()
    ids: list[int] = []
    counts: list[int] = []
    own_rows: list[tuple[int, int]] = []  # (merged row, own row) of each kept drafter draft
    free_rows: list[tuple[int, int]] = []  # (merged row, model-free token) of each model-free draft
    a = b = 0
    for n_own, n_free, t in zip(own_counts, free_counts, taken):
        if t:
            free_rows += [(len(ids) + j, free_ids[b + j]) for j in range(n_free)]
            ids += free_ids[b:b + n_free]
            counts.append(n_free)
        else:
            own_rows += [(len(ids) + j, a + j) for j in range(n_own)]
            ids += own_ids[a:a + n_own]
            counts.append(n_own)
        a += n_own
        b += n_free
    probs = None
    if own.draft_probs is not None and ids:
        probs = own.draft_probs.new_zeros((len(ids), own.draft_probs.shape[-1]))
        if own_rows:
            dst, src = zip(*own_rows)
            probs[list(dst)] = own.draft_probs[list(src)]
        if free_rows:
            dst, token = zip(*free_rows)
            probs[list(dst), list(token)] = 1.0
    confidences = None
    if own.confidences is not None and ids:  # the drafter's estimates; none for model-free drafts (NaN)
        confidences = own.confidences.new_full((len(ids),), float("nan"))
        if own_rows:
            dst, src = zip(*own_rows)
            confidences[list(dst)] = own.confidences[list(src)]
    tree = None
    if own.tree is not None or free.tree is not None:
        tree = _merge_trees(own.tree, free.tree, taken)
    return DraftProposal(token_ids=own.token_ids.new_tensor(ids).int(),  # int32, on the drafts' device
                         num_draft_tokens=counts, draft_probs=probs, confidences=confidences, tree=tree)


def _merge_trees(own: DraftTree | None, free: DraftTree | None, taken: Sequence[bool]) -> DraftTree:
    """Per request the chosen side's tree; none (0 nodes: its chain is verified) where that side
    drafted no tree."""
    pieces = [_split_tree(own, len(taken)), _split_tree(free, len(taken))]
    tokens: list[int] = []
    parents: list[int] = []
    probs: list[float] = []
    sizes: list[int] = []
    for i, t in enumerate(taken):
        node_tokens, node_parents, node_probs = pieces[t][i]
        tokens += node_tokens
        parents += node_parents
        probs += node_probs
        sizes.append(len(node_tokens))
    return DraftTree(token_ids=tokens, parents=parents, probs=probs, num_tree_tokens=sizes)


def _split_tree(tree: DraftTree | None, num_requests: int) -> list[tuple[list, list, list]]:
    if tree is None:
        return [([], [], [])] * num_requests
    out, start = [], 0
    tokens, parents, probs = list(tree.token_ids), list(tree.parents), list(tree.probs)
    for n in tree.num_tree_tokens:
        out.append((tokens[start:start + n], parents[start:start + n], probs[start:start + n]))
        start += n
    return out
