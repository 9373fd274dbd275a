"""SpecDecodeMetadata: the step's drafts and logits rows, computed once (property tests)."""

from hypothesis import given
from hypothesis import strategies as st

from specpath_engine.spec_decode_metadata import SpecDecodeMetadata

requests = st.lists(st.tuples(st.integers(1, 5), st.booleans(), st.lists(st.integers(0, 99), max_size=4)),
                    min_size=1, max_size=6)


def build(reqs):
    return SpecDecodeMetadata.build([n for n, _, _ in reqs], [s for _, s, _ in reqs],
                                    [d if s else [] for _, s, d in reqs], None)


def test_the_docstring_example():
    meta = SpecDecodeMetadata.build([1, 4, 1], [True, False, True], [[5, 6], [], [7]], None)
    assert meta.num_query_tokens == (3, 4, 2) and meta.sampling == (0, 2)
    assert meta.logits_indices == (0, 1, 2, 7, 8) and meta.num_draft_tokens == [2, 1]
    assert meta.logits_start == [0, 3]
    assert meta.target_logits_indices.tolist() == [0, 1, 3] and meta.bonus_logits_indices.tolist() == [2, 4]
    assert meta.flat_draft_token_ids.tolist() == [5, 6, 7]


@given(requests)
def test_logits_rows_are_the_last_new_token_and_the_drafts_of_each_sampling_request(reqs):
    meta = build(reqs)
    flat: list[tuple[int, str]] = []  # (request, kind) of each flattened row
    for i, (n, s, d) in enumerate(reqs):
        flat += [(i, "new")] * n + [(i, "draft")] * (len(d) if s else 0)
    assert sum(meta.num_query_tokens) == len(flat)
    picked = [flat[r] for r in meta.logits_indices]
    expected = [(i, k) for i, (n, s, d) in enumerate(reqs) if s for k in ["new"] + ["draft"] * len(d)]
    assert picked == expected


@given(requests)
def test_target_and_bonus_rows_partition_the_logits(reqs):
    meta = build(reqs)
    target, bonus = meta.target_logits_indices.tolist(), meta.bonus_logits_indices.tolist()
    assert sorted(target + bonus) == list(range(len(meta.logits_indices)))
    assert bonus == [s + n for s, n in zip(meta.logits_start, meta.num_draft_tokens)]
    assert len(target) == sum(meta.num_draft_tokens) == len(meta.flat_draft_token_ids)


@given(requests, st.data())
def test_a_selection_reads_its_own_rows(reqs, data):
    meta = build(reqs)
    js = data.draw(st.lists(st.sampled_from(range(len(meta.sampling))), unique=True).map(sorted)) if meta.sampling else []
    sub = meta.select(js)
    rows = meta.logits_rows_of(js).tolist()
    assert len(rows) == sum(n + 1 for n in sub.num_draft_tokens)
    # the sub-metadata's target rows, read through the selection, are the full metadata's
    full_target = meta.target_logits_indices.tolist()
    mine = [rows[r] for r in sub.target_logits_indices.tolist()]
    assert set(mine) <= set(full_target) and sub.draft_token_ids == tuple(meta.draft_token_ids[j] for j in js)
