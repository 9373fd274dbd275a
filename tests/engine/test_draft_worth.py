"""Drafts cut by the drafter's own estimates (``draft_worth``): a prefix, the first always kept,
the expected accepted count the kept paths' chances."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specpath_engine.draft_worth import accepted_nodes, worth_of_chain, worth_of_tree

CHANCES = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8)


def scaled(scale):
    return lambda p, depth: min(1.0, p * scale * (1 + depth))  # any map that grows with the chance


def test_the_docstrings_example():
    keep, paths = worth_of_chain([0.9, 0.6, 0.3, 0.5], lambda p, d: p, 0.1)
    assert keep == 3 and paths == pytest.approx([0.9, 0.54, 0.162])


@given(CHANCES, st.floats(0.1, 3.0), st.floats(0.0, 1.0))
def test_a_chain_keeps_the_prefix_whose_drafts_pay(confidences, scale, floor):
    chance = scaled(scale)
    keep, kept = worth_of_chain(confidences, chance, floor)
    paths = [math.prod(confidences[: j + 1]) for j in range(len(confidences))]
    assert 1 <= keep <= len(confidences)
    assert all(chance(p, j) >= floor for j, p in enumerate(paths[1:keep], 1))
    if keep < len(confidences):
        assert chance(paths[keep], keep) < floor
    assert kept == pytest.approx(paths[:keep])


@given(CHANCES)
def test_no_floor_keeps_every_draft(confidences):
    assert worth_of_chain(confidences, scaled(1.0), 0.0)[0] == len(confidences)


def test_a_draft_without_an_estimate_keeps_the_chain_and_estimates_nothing():
    assert worth_of_chain([0.9, float("nan"), 0.01], scaled(1.0), 0.5) == (3, [])


@given(st.lists(st.floats(0.0, 1.0), min_size=1, max_size=8), st.floats(0.1, 3.0), st.floats(0.0, 1.0))
def test_a_tree_keeps_its_nodes_until_the_first_that_does_not_pay(probs, scale, floor):
    probs = sorted(probs, reverse=True)  # best first, as trees come
    parents = [-1] + list(range(len(probs) - 1))  # any tree: a path here
    chance = scaled(scale)
    keep, kept = worth_of_tree(probs, parents, chance, floor)
    assert 1 <= keep <= len(probs)
    assert all(chance(p, j) >= floor for j, p in enumerate(probs[1:keep], 1))
    assert keep == len(probs) or chance(probs[keep], keep) < floor
    assert kept == probs[:keep]


def test_the_accepted_nodes_are_the_path_the_target_took():
    tokens, parents = [5, 6, 7, 8, 9], [-1, -1, 0, 0, 2]  # 5 -> (7 -> 9, 8); 6
    assert accepted_nodes(tokens, parents, [5, 7, 9]) == [True, False, True, False, True]
    assert accepted_nodes(tokens, parents, [5, 8]) == [True, False, False, True, False]
    assert accepted_nodes(tokens, parents, []) == [False] * 5
