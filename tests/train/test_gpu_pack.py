"""train/gpu/pack.py: the GPU job's inputs spread over the device tool's calls, the lean tree."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "train" / "gpu"))
import pack  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text("abc", min_size=1, max_size=3), st.integers(1, 100), max_size=6),
       st.integers(0, 500), st.integers(100, 160))
def test_plan_carries_every_byte_once_within_each_call(whole, split_size, capacity):
    calls = pack.plan(whole, split_size, capacity)
    assert all(sum(n for _, _, n in call) <= capacity for call in calls)
    pieces = [p for call in calls for p in call]
    assert sorted((name, n) for name, _, n in pieces if name) == sorted(whole.items())
    split = sorted((o, n) for name, o, n in pieces if not name)
    assert sum(n for _, n in split) == split_size
    assert all(a + n == b for (a, n), (b, _) in zip(split, split[1:]))  # contiguous, in order
    # no call opened while an earlier one had room for the split item's next byte
    total = sum(whole.values()) + split_size
    assert len(calls) <= max(1, -(-total // capacity)) + len(whole)


def test_plan_refuses_an_item_larger_than_a_call():
    with pytest.raises(ValueError, match="does not fit one call"):
        pack.plan({"head": 200}, 10, 100)


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    r = tmp_path / "repo"
    (r / "docs" / "results").mkdir(parents=True)
    (r / "w").mkdir()
    (r / "code.py").write_text("x = 1\n")
    (r / "w" / "model.safetensors").write_bytes(b"\1" * 5000)
    (r / "docs" / "results" / "r.json").write_text("{}")
    _git(r.parent, "init", "-q", str(r))
    _git(r, "add", ".")
    _git(r, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    return r


def test_lean_on_leaves_weights_out_and_off_restores_them(repo, tmp_path):
    out = tmp_path / "gpu"
    assert pack.lean("on", repo, out) == 0
    assert not (repo / "w" / "model.safetensors").exists()
    assert _git(repo, "ls-files").split() == ["code.py"]
    assert pack.tree_bytes(repo) == len("x = 1\n")
    with pytest.raises(SystemExit, match="lean already"):
        pack.lean("on", repo, out)
    assert pack.lean("off", repo, out) == 0
    assert (repo / "w" / "model.safetensors").read_bytes() == b"\1" * 5000
    assert _git(repo, "status", "--porcelain") == ""
    with pytest.raises(SystemExit, match="not lean"):
        pack.lean("off", repo, out)


def test_pack_splits_the_gguf_and_reassembles_it(repo, tmp_path, capsys):
    gguf = tmp_path / "t.gguf"
    gguf.write_bytes(bytes(range(256)) * 40)  # 10,240 bytes
    rows, tok, whl = tmp_path / "rows.jsonl.gz", tmp_path / "tok", tmp_path / "whl"
    rows.write_bytes(b"r" * 300)
    tok.mkdir()
    (tok / "tokenizer.json").write_bytes(b"t" * 200)
    whl.mkdir()
    (whl / "x.whl").write_bytes(b"w" * 100)
    head = tmp_path / "eagle3-smollm2"
    head.mkdir()
    (head / "model.safetensors").write_bytes(b"h" * 2980)
    (head / "config.json").write_text('{"model_type": "eagle3"}')  # 24 bytes
    args = argparse.Namespace(
        gguf=str(gguf), rows=str(rows), tokenizer=str(tok), wheels=str(whl), head=[str(head)],
        out=str(tmp_path / "gpu"), limit=pack.tree_bytes(repo) + pack.SLACK + 6000)
    assert pack.pack(args, repo) == 0
    folders = sorted((tmp_path / "gpu").iterdir())
    assert len(folders) == 3  # 13,840 bytes in calls of 6,000
    for f in folders:
        assert sum(p.stat().st_size for p in f.rglob("*") if p.is_file()) <= 6000
    parts = sorted(p for f in folders for p in f.glob(pack.GGUF_PART + "*"))
    assert b"".join(p.read_bytes() for p in sorted(parts, key=lambda p: p.name)) == gguf.read_bytes()
    assert (folders[0] / "heads" / "eagle3-smollm2" / "model.safetensors").exists()
    printed = capsys.readouterr().out
    assert printed.count("call ") == 3 and "EAGLE3_FROM=$H/eagle3-smollm2" in printed.splitlines()[-1]
