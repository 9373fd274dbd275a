from types import SimpleNamespace

import numpy as np

from specpath_ngram.history import TokenHistory


def request(req_id, tokens):
    return SimpleNamespace(req_id=req_id, token_ids=tokens)


def test_appends_only_new_tokens_and_grows():
    history = TokenHistory(slots=1, width=2)
    appended = []
    rows, lengths = history.update([request("a", [1, 2, 3])], appended)
    assert lengths.tolist() == [3] and history.tokens[rows[0], :3].tolist() == [1, 2, 3]
    assert [(r, s, new.tolist()) for r, s, new in appended] == [(rows[0], 0, [1, 2, 3])]

    appended.clear()
    rows, lengths = history.update([request("b", [7]), request("a", [1, 2, 3, 4, 5])], appended)
    assert history.tokens.shape[0] >= 2 and rows[0] != rows[1]
    assert [(s, new.tolist()) for _, s, new in appended] == [(0, [7]), (3, [4, 5])]
    assert history.tokens[rows[1], :5].tolist() == [1, 2, 3, 4, 5]

    appended.clear()
    history.update([request("a", [1, 2, 3, 4, 5])], appended)
    assert appended == []  # nothing new: nothing copied


def test_shorter_history_rewrites_the_row_and_removed_rows_are_reused():
    history = TokenHistory(slots=2, width=8)
    (row,), _ = history.update([request("a", [1, 2, 3, 4])])
    _, lengths = history.update([request("a", [9, 8])])
    assert lengths.tolist() == [2] and history.tokens[row, :2].tolist() == [9, 8]
    history.remove("a")
    history.remove("missing")
    assert len(history) == 0
    (again,), _ = history.update([request("c", np.array([5, 6], np.int32))])
    assert again == row and history.tokens[again, :2].tolist() == [5, 6]
