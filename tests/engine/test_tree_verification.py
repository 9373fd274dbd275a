"""Token-tree verification through the engine: greedy output equals plain decoding for trees of
every shape (the accepted path anywhere in the node order, so its KV must be compacted), the
drafter features of committed positions equal plain decoding's, seeded sampling stays
batch-invariant, trees are used only where the engine verifies them, and bad trees are one-line
errors that abort only their step's requests."""

from __future__ import annotations

import random

import pytest
import torch

from engine_helpers import VOCAB, baseline, make_engine, random_prompts
from specpath_engine import tree_layout
from specpath_engine.llm_engine import RequestFailedError
from specpath_engine.request import SamplingParams
from specpath.speculator import BaseSpeculator, DraftProposal, DraftTree

MAX_TOKENS = 24


class TreeOracleSpeculator(BaseSpeculator):
    """Knows reference continuations; proposes, within each request's budget, a tree holding the
    (sometimes corrupted) reference path among random distractor branches, nodes shuffled into a
    random parents-first order. The chain it also returns is random tokens (never verified when
    the engine verifies trees)."""

    def __init__(self, references, *, corrupt=0.25, seed=0, layers=(), per_request=False):
        self.per_request = per_request
        """Draw each tree from a generator seeded by the request's tokens (batch-independent trees)."""
        self.references = [list(r) for r in references]
        self.corrupt = corrupt
        self.rng = random.Random(seed)
        self.layers = tuple(layers)
        self.features: dict[tuple[str, int], torch.Tensor] = {}
        self.num_trees = 0

    @property
    def hidden_state_layers(self):
        return self.layers

    def _reference(self, ids):
        n = len(ids)
        return next((ref for ref in self.references if len(ref) > n and ref[:n] == list(ids)), None)

    def _tree(self, ids, budget):
        rng = random.Random(hash(tuple(ids))) if self.per_request else self.rng
        ref, n = self._reference(ids), len(ids)
        true_len = rng.randint(0, budget)
        nodes = []  # (token, parent index in nodes)
        parent = -1
        for i in range(true_len):
            good = ref is not None and n + i < len(ref) and rng.random() >= self.corrupt
            nodes.append((ref[n + i] if good else rng.randrange(VOCAB), parent))
            parent = len(nodes) - 1
        while len(nodes) < budget:
            nodes.append((rng.randrange(VOCAB), rng.randint(-1, len(nodes) - 1)))
        # A random order in which parents still come first.
        order, placed, pending = [], set(), list(range(len(nodes)))
        while pending:
            ready = [j for j in pending if nodes[j][1] == -1 or nodes[j][1] in placed]
            j = rng.choice(ready)
            order.append(j)
            placed.add(j)
            pending.remove(j)
        index = {old: new for new, old in enumerate(order)}
        return [nodes[j][0] for j in order], [-1 if nodes[j][1] == -1 else index[nodes[j][1]] for j in order]

    def propose(self, batch):
        if self.layers:
            at = 0
            for r in batch.requests:
                first = len(r.token_ids) - 1 - r.num_new_positions
                for i in range(r.num_new_positions):
                    self.features[(r.req_id, first + i)] = batch.hidden_states[at + i].clone()
                at += r.num_new_positions
        chain, counts, tokens, parents, sizes = [], [], [], [], []
        for r in batch.requests:
            k = r.max_draft_tokens
            t, p = self._tree(r.token_ids, k) if k else ([], [])
            self.num_trees += bool(t)
            tokens += t
            parents += p
            sizes.append(len(t))
            chain += [(7 * len(r.token_ids) + i) % VOCAB for i in range(k)]
            counts.append(k)
        tree = DraftTree(token_ids=tokens, parents=parents, probs=[1.0] * len(tokens), num_tree_tokens=sizes)
        return DraftProposal(token_ids=torch.tensor(chain, dtype=torch.int32), num_draft_tokens=counts, tree=tree)


@pytest.fixture(scope="module")
def workload(model):
    prompts = random_prompts(6, seed=11, lo=1, hi=37)
    return prompts, baseline(model, prompts, MAX_TOKENS)


@pytest.fixture
def moves(monkeypatch):
    """Counts accepted nodes that had to be moved into place."""
    seen = {"moved": 0}
    original = tree_layout.compact_path

    def counting(kv, features, sources, targets):
        seen["moved"] += sum(s != t for s, t in zip(sources, targets))
        return original(kv, features, sources, targets)

    monkeypatch.setattr(tree_layout, "compact_path", counting)
    return seen


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_tree_verification_equals_plain_decoding(model, workload, moves, k, prefix_caching):
    prompts, outputs = workload
    references = [p + o for p, o in zip(prompts, outputs)]
    speculator = TreeOracleSpeculator(references, seed=k)
    engine = make_engine(model, speculator=speculator, k=k, prefix_caching=prefix_caching, max_num_batched_tokens=40)
    requests, metrics = engine.generate(prompts + prompts[:3], SamplingParams(max_tokens=MAX_TOKENS))
    assert [r.output_token_ids for r in requests] == outputs + outputs[:3]
    assert speculator.num_trees > 0 and metrics.num_accepted_tokens > 0
    if k >= 3:
        assert moves["moved"] > 0  # accepted paths off the node order's prefix were compacted
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks


def test_committed_features_equal_plain_decoding(model, workload):
    """The hidden states a drafter reads for committed positions come from the accepted path."""
    prompts, outputs = workload
    references = [p + o for p, o in zip(prompts, outputs)]
    plain = TreeOracleSpeculator(references, layers=(0, 1))
    make_engine(model, speculator=plain, k=4, hidden=True, verify_trees=False).generate(
        prompts, SamplingParams(max_tokens=MAX_TOKENS))
    tree = TreeOracleSpeculator(references, layers=(0, 1), seed=5)
    make_engine(model, speculator=tree, k=4, hidden=True).generate(prompts, SamplingParams(max_tokens=MAX_TOKENS))
    shared = set(plain.features) & set(tree.features)
    assert len(shared) > 0.8 * len(plain.features)
    for key in shared:
        torch.testing.assert_close(tree.features[key], plain.features[key], rtol=1e-9, atol=1e-9)


def test_trees_are_ignored_when_the_engine_does_not_verify_them(model, workload):
    """verify_trees=False (or a chain-only mode): the chain is verified, the tree never."""
    prompts, outputs = workload
    speculator = TreeOracleSpeculator([p + o for p, o in zip(prompts, outputs)])
    engine = make_engine(model, speculator=speculator, k=4, verify_trees=False)
    requests, metrics = engine.generate(prompts, SamplingParams(max_tokens=MAX_TOKENS))
    assert [r.output_token_ids for r in requests] == outputs
    assert metrics.num_accepted_tokens < 0.2 * metrics.num_draft_tokens  # random chains
    assert not make_engine(model, speculator=speculator, verify_method="block").runner.verifies_trees
    assert make_engine(model, speculator=speculator).runner.verifies_trees


def test_seeded_sampling_with_trees_is_batch_invariant(model, workload):
    prompts, outputs = workload
    references = [p + o for p, o in zip(prompts, outputs)]
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.8, seed=7)

    def run(batch):
        spec = TreeOracleSpeculator(references, per_request=True)
        requests, _ = make_engine(model, speculator=spec, k=4).generate(batch, params)
        return [r.output_token_ids for r in requests]

    alone = run(prompts[:1])[0]
    assert run(prompts[:4])[0] == alone
    assert run(prompts[3:1:-1] + prompts[:1])[-1] == alone


@pytest.mark.parametrize("bad, match", [
    ({"parents": [1]}, "parent"),
    ({"token_ids": [VOCAB + 3]}, "outside"),
    ({"num_tree_tokens": [1, 1, 1, 1, 1, 1, 1, 1, 1]}, "tree sizes"),
])
def test_a_malformed_tree_aborts_its_step_and_the_engine_recovers(model, workload, bad, match):
    prompts, outputs = workload

    class Broken(BaseSpeculator):
        def __init__(self):
            self.calls = 0

        def propose(self, batch):
            self.calls += 1
            n = len(batch.requests)
            if self.calls == 3:
                fields = {"token_ids": [1], "parents": [-1], "probs": [1.0], "num_tree_tokens": [1] + [0] * (n - 1)}
                fields.update(bad)
                tree = DraftTree(**fields)
            else:
                tree = None
            return DraftProposal(token_ids=torch.zeros(0, dtype=torch.int32), num_draft_tokens=[0] * n, tree=tree)

    engine = make_engine(model, speculator=Broken(), k=2)
    with pytest.raises(RequestFailedError, match=match) as failure:
        engine.generate(prompts[:2], SamplingParams(max_tokens=MAX_TOKENS))
    assert "\n" not in str(failure.value)
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
    requests, _ = engine.generate(prompts[:2], SamplingParams(max_tokens=MAX_TOKENS))
    assert [r.output_token_ids for r in requests] == outputs[:2]
