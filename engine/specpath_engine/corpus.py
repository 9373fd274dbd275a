"""The corpus of the embedded default model: the Python standard library's own source.

Every machine has it offline. Files are split by a fixed hash of their path relative to the
stdlib root (``sha1(relpath) % 20 == 0`` is held out), so the split does not depend on file order
or on which other files exist. Test directories and site-packages are left out, and so is
``encodings/``: generated codec tables, near-copies of each other, that reward memorising and
would flatter both held-out bits/byte and n-gram drafters. Documents are
joined with NUL (``DOC_SEPARATOR``), the byte tokenizer's BOS/EOS, which never occurs in source.

The held-out files of the Python that trained the shipped model are stored in
``specpath/assets/stdlib_heldout.jsonl.gz``, so evaluation numbers do not depend on the local
Python version; drafter training scripts can use ``stdlib_stream("train")`` and the same file.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sysconfig
from pathlib import Path
from typing import Iterator

DOC_SEPARATOR = b"\x00"
HELDOUT_MODULUS = 20
EXCLUDED_DIRS = frozenset(
    {"site-packages", "dist-packages", "test", "tests", "idle_test", "__pycache__", "encodings"}
)


def stdlib_root() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def is_heldout(relpath: str) -> bool:
    """Fixed split: a file is held out when sha1 of its POSIX relative path is 0 mod 20."""
    return int(hashlib.sha1(relpath.encode("utf-8")).hexdigest(), 16) % HELDOUT_MODULUS == 0


def stdlib_files(root: Path | None = None) -> Iterator[tuple[str, Path]]:
    """(relative POSIX path, path) of every stdlib ``.py`` outside tests and site-packages, sorted."""
    root = stdlib_root() if root is None else Path(root)
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root)
        if not EXCLUDED_DIRS.intersection(rel.parts[:-1]):
            yield rel.as_posix(), path


def stdlib_documents(split: str, root: Path | None = None) -> list[tuple[str, bytes]]:
    """(relpath, source bytes) of the ``"train"`` or ``"heldout"`` split of the local stdlib."""
    if split not in ("train", "heldout"):
        raise ValueError(f"split={split!r}; allowed: train, heldout")
    want_heldout = split == "heldout"
    return [
        (rel, path.read_bytes().replace(DOC_SEPARATOR, b""))
        for rel, path in stdlib_files(root)
        if is_heldout(rel) == want_heldout
    ]


def join_documents(documents: list[tuple[str, bytes]]) -> bytes:
    """One byte stream, each document followed by the separator."""
    return b"".join(text + DOC_SEPARATOR for _, text in documents)


def stdlib_stream(split: str, root: Path | None = None) -> bytes:
    return join_documents(stdlib_documents(split, root))


def heldout_asset_path() -> Path:
    return Path(__file__).resolve().parent / "assets" / "stdlib_heldout.jsonl.gz"


def write_heldout_asset(documents: list[tuple[str, bytes]], path: Path | None = None) -> Path:
    """Store held-out documents as gzip JSON lines ``{"path": ..., "text": ...}`` (UTF-8 text)."""
    path = heldout_asset_path() if path is None else Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=0) as f:  # mtime=0: same bytes on every export
        for rel, text in documents:
            line = json.dumps({"path": rel, "text": text.decode("utf-8", errors="replace")}, ensure_ascii=False)
            f.write(line.encode("utf-8") + b"\n")
    return path


def read_heldout_asset(path: Path | None = None) -> list[tuple[str, bytes]]:
    """The shipped held-out documents as (relpath, bytes)."""
    path = heldout_asset_path() if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"held-out evaluation file not found: {path}")
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [(d["path"], d["text"].encode("utf-8")) for d in map(json.loads, f)]
