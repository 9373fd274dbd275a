"""Pack the GPU job's inputs for a lent machine whose calls each carry at most LIMIT bytes.

A call of the device tool sends the repository's tracked files plus the folders it names in
``carry``, 64 MiB in all, and a machine stays warm (keeping what earlier calls left in /tmp) only
a few seconds between calls. The job needs more than one call holds: the target's GGUF (98 MB
for SmolLM2-135M), the drafters' starting checkpoints (36-45 MB), template rows, tokenizer and
wheels. So the inputs go out in several calls: every call but the last copies its folder aside,
the last assembles the GGUF and runs ``train/gpu/train_drafters.sh``. The tree travels lean: the
committed weights and result files leave the index for the calls (``lean on``; ``lean off``
puts them back, byte for byte, from a tar kept beside the folders).

    python3 train/gpu/pack.py pack --gguf TARGET.gguf --rows ROWS.jsonl.gz --tokenizer DIR \\
        --wheels DIR [--head DIR ...] [--out .gpu] [--limit 67108864]
    python3 train/gpu/pack.py lean on|off [--out .gpu]

``pack`` writes OUT/a, OUT/b, ... (one folder per call, ``carry`` them in order) and prints each
call's command; OUT must be ignored by git (``.git/info/exclude``).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

LIMIT = 64 << 20  # bytes one call may carry, tree included
SLACK = 1 << 20  # kept free in each call (directory entries, a file the tree gains meanwhile)
LEAN_OUT = ("*.safetensors", "docs/results/*")  # tracked files the calls leave behind
GGUF_PART = "gguf-part-"


def plan(whole: dict[str, int], split_size: int, capacity: int) -> list[list[tuple[str, int, int]]]:
    """Calls of ``(name, offset, length)`` pieces: each of ``whole``'s items (name -> size) in one
    call (largest first, into the first call with room), then ``split_size`` bytes of the split
    item (named ``""``) over the room left, in order, opening calls as needed. Each call carries
    at most ``capacity``; the job runs in the last."""
    if any(size > capacity for size in whole.values()):
        big = max(whole, key=whole.get)
        raise ValueError(f"{big} ({whole[big]} bytes) does not fit one call ({capacity} bytes)")
    calls: list[list[tuple[str, int, int]]] = []
    room: list[int] = []
    for name, size in sorted(whole.items(), key=lambda kv: (-kv[1], kv[0])):
        i = next((i for i, r in enumerate(room) if r >= size), None)
        if i is None:
            calls.append([])
            room.append(capacity)
            i = len(calls) - 1
        calls[i].append((name, 0, size))
        room[i] -= size
    offset, i = 0, 0
    while offset < split_size:
        if i == len(calls):
            calls.append([])
            room.append(capacity)
        take = min(room[i], split_size - offset)
        if take > 0:
            calls[i].append(("", offset, take))
            room[i] -= take
            offset += take
        i += 1
    return calls


def tree_bytes(root: Path) -> int:
    """Bytes of the tracked files that travel with every call (the lean tree when it is on)."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout.split(b"\0")
    return sum((root / f.decode()).stat().st_size for f in files if f and (root / f.decode()).is_file())


def lean(action: str, root: Path, out: Path) -> int:
    """``on``: the tracked files matching :data:`LEAN_OUT` tarred into OUT, out of the index and
    the tree; ``off``: back from the tar, the index as HEAD has them."""
    listing, tar = out / "lean.list", out / "lean.tar"
    git = ["git", "-C", str(root)]
    if action == "on":
        if listing.exists():
            raise SystemExit(f"pack: {listing} exists: the tree is lean already ('lean off' first)")
        names = subprocess.run([*git, "ls-files", "--", *LEAN_OUT], capture_output=True, text=True, check=True).stdout
        out.mkdir(parents=True, exist_ok=True)
        listing.write_text(names)
        subprocess.run(["tar", "-cf", str(tar.resolve()), "-C", str(root), "-T", str(listing.resolve())], check=True)
        subprocess.run([*git, "rm", "--cached", "-q", f"--pathspec-from-file={listing.resolve()}"], check=True)
        for name in names.splitlines():
            (root / name).unlink()
        print(f"lean: {len(names.splitlines())} files left out; the tree carries {tree_bytes(root)} bytes")
    else:
        if not listing.exists():
            raise SystemExit(f"pack: no {listing}: the tree is not lean")
        subprocess.run(["tar", "-xf", str(tar.resolve()), "-C", str(root)], check=True)
        subprocess.run([*git, "reset", "-q", f"--pathspec-from-file={listing.resolve()}"], check=True)
        listing.unlink()
        tar.unlink()
        print("lean: off, every file back")
    return 0


def pack(args: argparse.Namespace, root: Path) -> int:
    out = Path(args.out)
    sources = {"rows.jsonl.gz": Path(args.rows), "whl": Path(args.wheels)}
    sources.update({f"tokenizer/{p.name}": p for p in Path(args.tokenizer).glob("tokenizer*.json")})
    sources.update({f"heads/{Path(h).name}": Path(h) for h in args.head})
    size = {name: sum(f.stat().st_size for f in ([p] if p.is_file() else p.rglob("*")) if f.is_file())
            for name, p in sources.items()}
    gguf = Path(args.gguf)
    capacity = args.limit - tree_bytes(root) - SLACK
    calls = plan(size, gguf.stat().st_size, capacity)
    if out.exists():
        shutil.rmtree(out)
    letters = "abcdefghijklmnopqrstuvwxyz"
    with gguf.open("rb") as f:
        for c, pieces in enumerate(calls):
            folder = out / letters[c]
            folder.mkdir(parents=True)
            for name, offset, length in pieces:
                if name:
                    dest = folder / name
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    (shutil.copytree if sources[name].is_dir() else shutil.copy)(sources[name], dest)
                else:
                    f.seek(offset)
                    (folder / f"{GGUF_PART}{offset:012d}").write_bytes(f.read(length))
    # every call's command sets G, the machine's folder the inputs are copied aside to
    aside = "G=${{TMPDIR:-/tmp}}/specpath-inputs && mkdir -p $G && cp -r {d}/. $G/ && ls -la $G"
    job = ("cat $G/" + GGUF_PART + "* > $G/target.gguf && H=$G/heads && OUT=$OUT WORK=$G/job "
           "WHL=$G/whl BUDGET=<seconds> " + " ".join(f"{_env(h)}=$H/{Path(h).name}" for h in args.head) +
           " train/gpu/train_drafters.sh $G/target.gguf $G/rows.jsonl.gz 2>&1 | tee $OUT/job.log")
    for c in range(len(calls)):
        d = f"{out}/{letters[c]}"
        print(f"call {c + 1}: carry [{d!r}] ({sum(n for _, _, n in calls[c])} bytes)\n  {aside.format(d=d)}"
              + (f" && {job}" if c == len(calls) - 1 else ""))
    return 0


def _env(head: str) -> str:
    """The train_drafters.sh variable a starting checkpoint goes in: its config's model_type."""
    import json

    kind = json.loads((Path(head) / "config.json").read_text()).get("model_type")
    if kind not in ("eagle3", "mtp", "dflash", "dspark"):
        raise SystemExit(f"pack: {head}: model_type {kind!r}; the GPU job trains eagle3, mtp, dflash and dspark")
    return f"{kind.upper()}_FROM"


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="command", required=True)
    a = sub.add_parser("pack")
    a.add_argument("--gguf", required=True)
    a.add_argument("--rows", required=True)
    a.add_argument("--tokenizer", required=True)
    a.add_argument("--wheels", required=True)
    a.add_argument("--head", action="append", default=[])
    a.add_argument("--out", default=".gpu")
    a.add_argument("--limit", type=int, default=LIMIT)
    b = sub.add_parser("lean")
    b.add_argument("action", choices=("on", "off"))
    b.add_argument("--out", default=".gpu")
    args = p.parse_args(argv)
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    return pack(args, root) if args.command == "pack" else lean(args.action, root, Path(args.out))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
