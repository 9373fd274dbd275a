"""Token-tree verification (``specpath_engine.sample.tree_verification``): the mask and greedy acceptance against
naive restatements (hypothesis), and sampled acceptance distributed exactly as the target
(Pearson's chi-square on emitted pairs, as ``test_sample_lossless``)."""

from __future__ import annotations

import pytest
import torch
from _sample_helpers import chi_square_pvalue
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.sample import target_probs
from specpath_engine.sample.tree_verification import accept_greedy, accept_sampled, ancestor_mask, check_tree, depths, verify_trees

ALPHA = 1e-6


@st.composite
def trees(draw, max_nodes: int = 12, vocab: int = 4):
    n = draw(st.integers(0, max_nodes))
    parents = [draw(st.integers(-1, j - 1)) for j in range(n)]
    tokens = draw(st.lists(st.integers(0, vocab - 1), min_size=n, max_size=n))
    return tokens, parents


def naive_ancestors(parents, j):
    out = {j}
    while parents[j] >= 0:
        j = parents[j]
        out.add(j)
    return out


@settings(max_examples=200, deadline=None)
@given(trees())
def test_mask_and_depths_match_a_walk_up_the_parents(tree):
    tokens, parents = tree
    mask = ancestor_mask(parents)
    assert mask.shape == (len(parents), len(parents))
    for j in range(len(parents)):
        assert {a for a in range(len(parents)) if mask[j, a]} == naive_ancestors(parents, j)
        assert depths(parents)[j] == len(naive_ancestors(parents, j)) - 1


def naive_greedy(tokens, parents, argmax):
    """The deepest node all of whose ancestors (and itself) carry the argmax after their parent,
    taking the first such sibling; then the argmax after it."""
    chosen = {}  # parent -> first child with the argmax token
    for j, p in enumerate(parents):
        if tokens[j] == argmax[p + 1] and p not in chosen:
            chosen[p] = j
    path, at = [], -1
    while at in chosen:
        at = chosen[at]
        path.append(at)
    return path, argmax[at + 1]


@settings(max_examples=300, deadline=None)
@given(trees(), st.data())
def test_greedy_acceptance_matches_the_naive_walk(tree, data):
    tokens, parents = tree
    argmax = data.draw(st.lists(st.integers(0, 3), min_size=len(tokens) + 1, max_size=len(tokens) + 1))
    assert accept_greedy(tokens, parents, argmax) == naive_greedy(tokens, parents, argmax)


@settings(max_examples=150, deadline=None)
@given(trees(max_nodes=8), st.data())
def test_sampling_a_deterministic_target_is_greedy(tree, data):
    """With one-hot target rows, recursive rejection sampling must pick exactly the argmax path."""
    tokens, parents = tree
    argmax = data.draw(st.lists(st.integers(0, 3), min_size=len(tokens) + 1, max_size=len(tokens) + 1))
    probs = torch.nn.functional.one_hot(torch.tensor(argmax), 4).float()
    uniforms = torch.tensor(data.draw(st.lists(st.floats(0, 0.999), min_size=len(tokens) + 1, max_size=len(tokens) + 1)))
    assert accept_sampled(tokens, parents, probs, uniforms) == naive_greedy(tokens, parents, argmax)


@settings(max_examples=150, deadline=None)
@given(trees(max_nodes=8), st.integers(0, 2**31 - 1))
def test_sampled_path_is_a_root_path_of_the_tree(tree, seed):
    tokens, parents = tree
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(len(tokens) + 1, 4, generator=g) * 2, -1)
    path, final = accept_sampled(tokens, parents, probs, torch.rand(len(tokens) + 1, generator=g))
    assert [parents[n] for n in path] == [-1, *path[:-1]][: len(path)]
    assert 0 <= final < 4


def test_check_tree_refuses_forward_parents_and_bad_tokens():
    check_tree([-1, 0, 0], [1, 2, 3], 4)
    with pytest.raises(ValueError, match="parent"):
        check_tree([-1, 2, 0], [1, 2, 3], 4)
    with pytest.raises(ValueError, match="outside"):
        check_tree([-1], [9], 4)
    with pytest.raises(ValueError, match="parents"):
        check_tree([-1], [1, 2], 4)


# -- lossless sampling ------------------------------------------------------------------------

VOCAB = 6
# A tree after context token 0: three siblings (one a duplicate), grandchildren, one deeper node.
TOKENS = [2, 4, 2, 1, 5, 0, 3]
PARENTS = [-1, -1, -1, 0, 0, 1, 3]


def markov(seed: int, sharpness: float = 1.5) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(VOCAB, VOCAB, generator=g) * sharpness  # logits of the next token given the last


def emitted_pairs(logits_table, temperature, top_k, n, seed):
    """The first two tokens emitted after context token 0 for ``n`` independent requests: tree
    verification, then plain sampling from the target when it emitted only one."""
    torch.manual_seed(seed)
    prev = [0] + TOKENS
    rows = logits_table[torch.tensor(prev)]
    out = verify_trees([(TOKENS, PARENTS)] * n, rows.repeat(n, 1), [temperature] * n,
                       None if top_k is None else [top_k] * n, None, None)
    first = torch.tensor([(path and TOKENS[path[0]]) if path else final for path, final in out])
    second = torch.tensor([TOKENS[path[1]] if len(path) > 1 else (final if len(path) == 1 else -1)
                           for path, final in out])
    short = second < 0
    if bool(short.any()):
        p = target_probs(logits_table[first[short]], torch.full((int(short.sum()),), temperature),
                         None if top_k is None else torch.full((int(short.sum()),), top_k))
        second[short] = torch.multinomial(p, 1).squeeze(1)
    return first, second


@pytest.mark.slow
@pytest.mark.parametrize("temperature, top_k, seed", [(1.0, None, 0), (0.6, None, 1), (1.3, 4, 2)])
def test_sampled_tree_verification_is_lossless(temperature, top_k, seed):
    table = markov(seed)
    n = 20_000
    first, second = emitted_pairs(table, temperature, top_k, n, seed)
    p = target_probs(table, torch.full((VOCAB,), temperature), None if top_k is None else torch.full((VOCAB,), top_k))
    assert chi_square_pvalue(torch.bincount(first, minlength=VOCAB), p[0]) > ALPHA
    pairs = torch.bincount(first * VOCAB + second, minlength=VOCAB * VOCAB)
    assert chi_square_pvalue(pairs, p[0][:, None] * p) > ALPHA


def test_a_sampler_that_forgets_rejected_siblings_is_caught():
    """The check has power: accepting each sibling against the full target (no residual) is biased."""
    table = markov(3)
    p = torch.softmax(table, -1)
    g = torch.Generator().manual_seed(0)
    n, emitted = 20_000, []
    for _ in range(n):
        u = torch.rand(4, generator=g).tolist()
        token = next((x for x, c in zip([2, 4], u) if c < float(p[0, x])), None)
        emitted.append(token if token is not None else int(torch.multinomial(p[0], 1, generator=g)))
    assert chi_square_pvalue(torch.bincount(torch.tensor(emitted), minlength=VOCAB), p[0]) < ALPHA


def test_greedy_batch_rows_follow_the_argmax():
    table = markov(4)
    rows = table[torch.tensor([0] + TOKENS)]
    (path, final), = verify_trees([(TOKENS, PARENTS)], rows, [0.0])
    assert (path, final) == naive_greedy(TOKENS, PARENTS, rows.argmax(-1).tolist())


# -- seeded requests: the race walk ------------------------------------------------------------


def race_noise(tokens, parents, seed, first=30, vocab=VOCAB):
    """A seeded request's noise by depth (``verify_trees``' ``gumbel``): the root's row, then one
    per depth of the tree."""
    from specpath_engine.sample.noise import gumbel_noise

    return torch.stack([gumbel_noise(seed, first + d, vocab) for d in range(max(depths(parents), default=-1) + 2)])


@settings(max_examples=150, deadline=None)
@given(trees(max_nodes=8, vocab=VOCAB), st.integers(0, 2**20), st.floats(0.3, 1.5))
def test_a_seeded_tree_walks_its_race_winners(tree, seed, temperature):
    """The walk is the greedy walk on each row's race winner, the row's noise that of its token's
    depth; on a chain it is the chain's race verification."""
    from specpath_engine.sample.race import race_tokens, verify_chains

    tokens, parents = tree
    logits = torch.randn(len(tokens) + 1, VOCAB, generator=torch.Generator().manual_seed(seed)) * 2
    noise = race_noise(tokens, parents, seed)
    (got,) = verify_trees([(tokens, parents)], logits, [temperature], gumbel=[noise])
    row_depth = torch.tensor([0] + [d + 1 for d in depths(parents)])
    winners = race_tokens(logits, torch.full((len(tokens) + 1,), temperature), None, None, noise[row_depth]).tolist()
    assert got == accept_greedy(tokens, parents, winners)
    if parents == list(range(-1, len(tokens) - 1)):  # a chain
        path, final = got
        assert verify_chains([tokens], logits, [temperature], None, None, noise) == [[tokens[n] for n in path] + [final]]


def test_a_seeded_root_accepts_one_of_its_children_with_their_total_probability():
    """Children {2, 4} of the root: P(a child is accepted) = p(2) + p(4), SpecInfer's with one-hot drafts."""
    table = markov(5)
    tokens, parents = [2, 4, 1], [-1, -1, 0]
    rows = table[torch.tensor([0] + tokens)]  # the root row, then the row after each node
    n = 20_000
    out = verify_trees([(tokens, parents)] * n, rows.repeat(n, 1), [0.9] * n,
                       gumbel=[race_noise(tokens, parents, s) for s in range(n)])
    p = target_probs(table[:1], torch.tensor([0.9]))[0]
    want = float(p[2] + p[4])
    got = sum(bool(path) for path, _ in out) / n
    assert abs(got - want) < 5 * (want * (1 - want) / n) ** 0.5
    first = torch.tensor([tokens[path[0]] if path else final for path, final in out])
    assert chi_square_pvalue(torch.bincount(first, minlength=VOCAB), p) > ALPHA  # the emitted token is p's
