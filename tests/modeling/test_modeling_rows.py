"""RowAllocator: a live request owns one row; rows are reused lowest first; errors name the owner."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.modeling.rows import RowAllocator


@settings(max_examples=60, deadline=None)
@given(num_rows=st.integers(1, 6), ops=st.lists(st.tuples(st.booleans(), st.integers(0, 9)), max_size=40))
def test_rows_are_exclusive_and_stable(num_rows, ops):
    rows = RowAllocator(num_rows)
    owned: dict[str, int] = {}
    for take, n in ops:
        req = f"r{n}"
        if take:
            if req not in owned and len(owned) == num_rows:
                with pytest.raises(RuntimeError):
                    rows.row(req)
                continue
            row = rows.row(req)
            assert owned.setdefault(req, row) == row  # stable while live
            assert 0 <= row < num_rows
        else:
            assert rows.release(req) == owned.pop(req, None)
        assert sorted(owned.values()) == sorted(set(owned.values()))  # exclusive
        assert len(rows) == len(owned) and all(r in rows for r in owned)


def test_lowest_free_row_first_and_growth():
    rows = RowAllocator(2, owner="DraftKV")
    assert [rows.row("a"), rows.row("b")] == [0, 1]
    assert not rows.has_free_row
    with pytest.raises(RuntimeError, match="DraftKV"):
        rows.row("c")
    rows.add_rows(2)
    assert rows.num_rows == 4 and rows.row("c") == 2
    rows.release("a")
    assert rows.row("d") == 0 and rows.get("a") is None


def test_grow_doubles_the_rows_when_every_row_is_taken():
    """``row(req, grow=...)``: the owner's buffers double only when no row is free."""
    grown = []
    rows = RowAllocator(2)
    assert [rows.row(r, grow=grown.append) for r in ("a", "b")] == [0, 1] and grown == []
    assert rows.row("c", grow=grown.append) == 2 and grown == [2] and rows.num_rows == 4
    assert rows.row("d", grow=grown.append) == 3 and grown == [2]
    assert rows.row("e", grow=grown.append) == 4 and grown == [2, 4] and rows.num_rows == 8
