"""``specpath_train.selfdistill``: runs sharing a data directory split its chunk files (answers and
features) instead of queueing on each one, and every run reads the same data back."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import torch

from specpath_train import selfdistill
from specpath_train.selfdistill import _chunk_lock, generate_split


class _Target:
    """A generator that answers each prompt with its own first id, twice, and records the chunks
    (by their first prompt) it was asked for."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def generate_ids(self, part, **_):
        self.asked.append(part[0][0])
        return [list(p) + [p[0], p[0]] for p in part]


def _split(target: _Target, prompts, data: Path) -> list[list[int]]:
    return generate_split(lambda: target, prompts, data, "train", max_new_tokens=2, temperature=0.0, eos_ids=[],
                          seed=0, chunk=2, max_num_seqs=2, max_model_len=16, progress=False, log=lambda _: None)


def test_a_chunk_another_run_is_answering_is_left_to_it_and_read_once_written(tmp_path):
    prompts = [[i, 100 + i] for i in range(8)]  # chunks of 2: first prompts 0, 2, 4, 6
    target, out = _Target(), {}
    other = _chunk_lock(tmp_path / "gen-train-0000.json")
    assert other.__enter__()  # "another run" answers chunk 0
    worker = threading.Thread(target=lambda: out.setdefault("seqs", _split(target, prompts, tmp_path)))
    worker.start()
    for _ in range(200):  # it answers chunks 1-3 meanwhile, then waits for chunk 0
        if len(target.asked) == 3:
            break
        time.sleep(0.05)
    assert target.asked == [2, 4, 6] and worker.is_alive()
    (tmp_path / "gen-train-0000.json").write_text(json.dumps([[0, 100, 7, 7], [1, 101, 7, 7]]))
    other.__exit__(None, None, None)
    worker.join(10)
    assert not worker.is_alive()
    assert target.asked == [2, 4, 6]  # chunk 0 was read, not answered again
    assert out["seqs"] == [[0, 100, 7, 7], [1, 101, 7, 7]] + [list(p) + [p[0], p[0]] for p in prompts[2:]]
    again = _Target()
    assert _split(again, prompts, tmp_path) == out["seqs"] and again.asked == []  # a resumed run answers nothing


def test_feature_files_another_run_is_capturing_are_left_to_it(tmp_path, monkeypatch):
    calls: list[int] = []

    def features(target, rows, layers, k, batch):  # noqa: ARG001 - the signature capture calls
        calls.append(int(rows[0, 0]))
        n, w = rows.shape
        return torch.zeros(n, w, len(layers), 4), torch.zeros(n, w, k, dtype=torch.int64), torch.zeros(n, w, k)

    import specpath_train.target_text as target_text

    monkeypatch.setattr(target_text, "features_with_topk", features)
    windows = torch.arange(6)[:, None].repeat(1, 3)  # batches of 2: windows 0, 2, 4 first
    with _chunk_lock(tmp_path / "feat-0001.safetensors") as held:
        assert held
        worker = threading.Thread(target=lambda: selfdistill.capture(None, windows, [1], tmp_path, top_k=2, batch=2,
                                                                     progress=False, log=lambda _: None))
        worker.start()
        for _ in range(200):
            if calls == [0, 4]:
                break
            time.sleep(0.05)
        assert calls == [0, 4] and worker.is_alive()  # batch 1 is the other run's
    worker.join(10)  # released without its file: this run captures it after all
    assert not worker.is_alive() and calls == [0, 4, 2]
    assert sorted(p.name for p in tmp_path.glob("feat-*.safetensors")) == [f"feat-000{i}.safetensors" for i in range(3)]


def test_past_eos_picks_about_its_share_spread_evenly_whatever_the_chunks():
    from hypothesis import given, strategies as st

    @given(st.floats(0, 1), st.integers(1, 400))
    def check(share, n):
        picked = [i for i in range(n) if selfdistill.goes_past_eos(i, share)]
        assert abs(len(picked) - share * n) <= 3  # a Weyl sequence's discrepancy: a few at most
        if share == 0:
            assert not picked
        for start in range(0, n, 64):  # every stretch holds its share too
            part = [i for i in picked if start <= i < start + 64]
            assert abs(len(part) - share * min(64, n - start)) <= 3

    check()


class _DeviceTarget:
    """A device generator that records each call's EOS ids and answers each prompt with its first id
    once, and once more where no EOS ids stop it."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[int], tuple]] = []

    def generate_ids(self, part, *, eos_token_ids, **_):
        self.calls.append(([p[0] for p in part], tuple(eos_token_ids)))
        return [list(p) + [p[0]] * (1 if eos_token_ids else 2) for p in part]


def test_a_device_generator_answers_the_past_eos_prompts_in_a_call_without_eos_ids_in_order(tmp_path):
    prompts = [[i, 100 + i] for i in range(6)]
    target = _DeviceTarget()
    share = 0.4
    seqs = generate_split(lambda: target, prompts, tmp_path, "train", max_new_tokens=2, temperature=0.0, eos_ids=[9],
                          seed=0, chunk=6, max_num_seqs=6, max_model_len=16, progress=False, log=lambda _: None,
                          past_eos=share)
    past = [selfdistill.goes_past_eos(i, share) for i in range(6)]
    assert any(past) and not all(past)
    assert seqs == [p + [p[0]] * (2 if beyond else 1) for p, beyond in zip(prompts, past)]
    assert target.calls == [([i for i in range(6) if not past[i]], (9,)), ([i for i in range(6) if past[i]], ())]
