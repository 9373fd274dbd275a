"""Self-distillation data: the target answers the prompts, then runs once over its own text.

Generation is batched on the reference engine (``max_num_seqs`` requests in flight; a bf16 target
prepared as the engine serves it, on the native kernels), a chunk of prompts at a time, each chunk written to its own file, so a killed run loses at most the chunk
in flight. The text is packed into windows (held-out prompts' text into windows of their own,
first), and one forward pass per batch of windows captures the recipe's layers and the
target's top-k next tokens: the cache :func:`specpath_train.target_text.load_dataset` reads
and every recipe's ``--data`` takes.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from specpath_train.errors import train_error

GOLDEN = (5 ** 0.5 - 1) / 2
"""The golden ratio's fractional part: its multiples modulo 1 spread evenly (:func:`goes_past_eos`)."""

GENERATION_ENGINE = "native-packed"
"""Part of a shared responses directory's key where the target generates on the native kernels
(:func:`~specpath_train.target_text.generation_model`): responses of the unprepared model, kept
by older runs, are not mixed with these."""


def target_digest(target_dir: str | Path) -> str:
    """A short digest of a checkpoint directory's config and weights (any number of shards)."""
    import hashlib

    from specpath_train.trainer import file_digest

    target_dir = Path(target_dir)
    h = hashlib.sha256((target_dir / "config.json").read_bytes())
    for f in sorted(target_dir.glob("*.safetensors")):
        h.update(file_digest(f).encode())
    return h.hexdigest()[:16]


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


def _bar(enabled: bool, total: int, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, disable=not enabled, dynamic_ncols=True)


class _chunk_lock:
    """An exclusive ``flock`` on ``<chunk>.lock`` (POSIX; elsewhere no lock): ``with`` gives
    whether it is held (``wait=False``: False at once where another run holds it)."""

    def __init__(self, path: Path, wait: bool = True) -> None:
        self.path = path.with_suffix(".lock")
        self.wait = wait

    def __enter__(self) -> bool:
        self.fh = open(self.path, "a")
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            return True
        try:
            fcntl.flock(self.fh, fcntl.LOCK_EX | (0 if self.wait else fcntl.LOCK_NB))
        except BlockingIOError:
            return False
        return True

    def __exit__(self, *exc: Any) -> None:
        self.fh.close()  # releases the lock


def _held_in_turn(paths: dict[int, Path]) -> Iterator[int]:
    """Each key of ``paths`` (chunk files) while its chunk's lock is held: first the chunks no other
    run holds, then, waiting for each, the rest (another run's, read once it has written them), so
    runs sharing a directory split its chunks instead of queueing on each."""
    left = dict(paths)
    for wait in (False, True):
        for key, path in list(left.items()):
            with _chunk_lock(path, wait=wait) as held:
                if held:
                    del left[key]
                    yield key


def goes_past_eos(index: int, share: float) -> bool:
    """Whether prompt ``index`` of a split answers past EOS (``--past-eos``): about ``share`` of
    the prompts, spread evenly through them (the golden ratio's multiples modulo 1), whatever the
    chunk size, so a resumed run picks the same ones."""
    return share > 0 and (index * GOLDEN) % 1.0 < share


def generate_split(target: Callable[[], Any], prompts: Sequence[Sequence[int]], data: Path, split: str, *,
                   max_new_tokens: int, temperature: float, eos_ids: Sequence[int], seed: int, chunk: int,
                   max_num_seqs: int, max_model_len: int, progress: bool, log: Callable[[str], None],
                   past_eos: float = 0.0) -> list[list[int]]:
    """Prompt + response ids of every prompt, one resumable chunk file at a time; ``target()``
    gives the generating model (called only when a chunk is not on disk yet). ``past_eos``: the
    share of prompts whose responses go on past EOS to ``max_new_tokens`` (:func:`goes_past_eos`)."""
    from specpath_train.target_text import generate

    new_total, t_total = 0, 0.0
    paths = {c: data / f"gen-{split}-{c // chunk:04d}.json" for c in range(0, len(prompts), chunk)}
    with _bar(progress, len(prompts), f"generate {split}", "prompt") as bar:
        for c in _held_in_turn(paths):  # runs sharing --generations split the chunks
            path, part = paths[c], prompts[c:c + chunk]
            if not path.is_file():
                t0 = time.time()
                model = target()
                past = [goes_past_eos(c + i, past_eos) for i in range(len(part))]
                if hasattr(model, "generate_ids"):  # a device's generator (specpath_train.device_generate)
                    got = _device_generate(model, part, past, max_new_tokens=max_new_tokens, temperature=temperature,
                                           eos_ids=eos_ids, seed=seed + c)
                else:
                    got = generate(model, part, max_new_tokens=max_new_tokens, temperatures=(temperature,),
                                   eos_token_ids=eos_ids, seed=seed + c, max_num_seqs=max_num_seqs,
                                   max_model_len=max_model_len, past_eos=past)
                _write_json(path, got)
                new_total += sum(len(g) for g in got) - sum(len(p) for p in part)
                t_total += time.time() - t0
                bar.set_postfix(tok_s=f"{new_total / max(t_total, 1e-9):.0f}", refresh=False)
            bar.update(len(part))
    seqs: list[list[int]] = []
    for path in paths.values():
        seqs += json.loads(path.read_text())
    if new_total:
        log(f"data: {split}: {len(prompts)} prompts, {new_total} new tokens in {t_total:.1f}s "
            f"({new_total / max(t_total, 1e-9):.0f} tok/s, batch {max_num_seqs})")
    return seqs


def _device_generate(model: Any, part: Sequence[Sequence[int]], past: Sequence[bool], *, max_new_tokens: int,
                     temperature: float, eos_ids: Sequence[int], seed: int) -> list[list[int]]:
    """A device generator's responses to ``part``, in order: the prompts that stop at EOS in one
    call, those that go on past it (``past``) in another, without EOS ids (one EOS set a batch)."""
    got: list[list[int] | None] = [None] * len(part)
    for beyond, eos in ((False, eos_ids), (True, ())):
        rows = [i for i, p in enumerate(past) if p == beyond]
        if rows:
            out = model.generate_ids([part[i] for i in rows], max_new_tokens=max_new_tokens, temperature=temperature,
                                     eos_token_ids=eos, seed=seed + (len(part) if beyond else 0))
            for i, ids in zip(rows, out):
                got[i] = ids
    return got  # type: ignore[return-value]


@torch.inference_mode()
def capture(target: Any, windows: torch.Tensor, layers: Sequence[int], data: Path, *, top_k: int, batch: int,
            progress: bool, log: Callable[[str], None]) -> list[Path]:
    """The target's ``taps`` [n, W, len(layers), d] float16 and ``topk_ids`` / ``topk_probs``
    [n, W, k] of every ``batch`` windows, one forward and one resumable file each; their paths."""
    from safetensors.torch import save_file

    from specpath_train.target_text import features_with_topk

    paths = {c: data / f"feat-{c // batch:04d}.safetensors" for c in range(0, windows.shape[0], batch)}
    t0, done = time.time(), 0
    with _bar(progress, windows.numel(), "features", "tok") as bar:
        for c in _held_in_turn(paths):  # as generate_split's chunks: runs sharing the directory split the files
            path, rows = paths[c], windows[c:c + batch]
            if not path.is_file():
                taps, ids, probs = features_with_topk(target, rows, layers, k=top_k, batch=batch)
                tmp = path.with_suffix(".tmp")
                save_file({"taps": taps.contiguous(), "topk_ids": ids.contiguous(), "topk_probs": probs.contiguous()},
                          str(tmp))
                os.replace(tmp, path)
                done += rows.numel()
            bar.update(rows.numel())
    if done:
        log(f"data: features of {done} tokens in {time.time() - t0:.1f}s ({done / max(time.time() - t0, 1e-9):.0f} tok/s)")
    return list(paths.values())


def build(target_dir: str | Path, data_dir: str | Path, layers: Sequence[int], *, train: Sequence[Sequence[int]],
          heldout: Sequence[Sequence[int]], window: int, max_new_tokens: int, temperature: float, seed: int,
          dtype: torch.dtype = torch.float32, top_k: int = 8, chunk: int = 64, max_num_seqs: int = 32,
          feature_batch: int = 8, progress: bool = False, log: Callable[[str], None] = print,
          generations: str | Path | None = None, device: str = "cpu", quantization: str | None = None,
          past_eos: float = 0.0) -> dict:
    """Generate, pack and capture into ``data_dir`` (skipped when its ``features.json`` exists);
    returns that file's contents. Too little text for one held-out and one training window is
    a CommandError saying what to change. ``generations``: a directory whose subdirectory per
    (target, prompts, length, temperature, seed) holds the responses, shared by the runs of
    several methods (only the features depend on the method). On another ``device`` than the CPU
    the target answers there (:mod:`specpath_train.device_generate`, ``max_num_seqs`` prompts a
    chunk) and the directory is a live one (:mod:`specpath_train.live`): windows, no features.
    ``quantization`` (``"int8"``, ``"int4"``): the target as the engine serves it quantised
    answers, and its features and distributions are that target's
    (:func:`~specpath_engine.quantization.quantized_weights_`); ``features.json`` records it in
    its key (``key.quantization``), so such data neither merges with another target's nor
    trains against the unquantised head. ``past_eos``: the share of prompts (each split's) whose
    responses go on past EOS to ``max_new_tokens``, as a benchmark that ignores EOS makes the target
    write (SmolLM2-135M-Instruct then invents a next user turn): a drafter measured so has seen it."""
    from specpath_engine.model import LlamaModel
    from specpath_engine.packed_linear import packing_enabled
    from specpath_train.target_text import generation_model, pack_windows, write_features

    data = Path(data_dir)
    meta_path = data / "features.json"
    if meta_path.is_file():
        return json.loads(meta_path.read_text())
    data.mkdir(parents=True, exist_ok=True)
    config = json.loads((Path(target_dir) / "config.json").read_text())
    eos = config.get("eos_token_id")
    eos_ids = [eos] if isinstance(eos, int) else list(eos or ())
    loaded: list[Any] = []

    def generator() -> Any:  # loaded once, and only where a chunk is still to generate (a resumed run may have all)
        if not loaded:
            if device != "cpu":
                from specpath_train.device_generate import DeviceGenerator

                loaded.append(DeviceGenerator(target_dir, device=device))
            else:
                loaded.append(generation_model(target_dir, dtype, quantization))
        return loaded[0]

    if device != "cpu":
        chunk = max(chunk, max_num_seqs)

    longest = max(len(p) for p in (*train, *heldout))
    max_model_len = longest + max_new_tokens + 8
    gen_dir = data
    if generations is not None:
        import hashlib

        engine = [GENERATION_ENGINE] if packing_enabled(dtype, "cpu") else []  # float32 keys as they were
        if device != "cpu":
            engine = [f"transformers-{device}-bf16"]
        if quantization is not None:
            engine.append(quantization)
        if past_eos:
            engine.append(f"past-eos-{past_eos:g}")
        key = json.dumps([target_digest(target_dir), [list(map(int, p)) for p in heldout], [list(map(int, p)) for p in train],
                          max_new_tokens, temperature, seed, chunk, str(dtype), *engine])
        gen_dir = Path(generations) / hashlib.sha256(key.encode()).hexdigest()[:16]
        gen_dir.mkdir(parents=True, exist_ok=True)
        log(f"data: responses in {gen_dir}")
    seqs = {}
    for split, prompts, s in (("heldout", heldout, seed + 7), ("train", train, seed)):
        seqs[split] = generate_split(generator, prompts, gen_dir, split, max_new_tokens=max_new_tokens,
                                     temperature=temperature, eos_ids=eos_ids, seed=s, chunk=chunk,
                                     max_num_seqs=max_num_seqs, max_model_len=max_model_len, progress=progress, log=log,
                                     past_eos=past_eos)
    held, rest = pack_windows(seqs["heldout"], window), pack_windows(seqs["train"], window)
    if held.shape[0] < 1 or rest.shape[0] < 1:
        tokens = {k: sum(len(s) for s in v) for k, v in seqs.items()}
        raise train_error(f"too little text for windows of {window} tokens: {tokens['train']} training and "
                           f"{tokens['heldout']} held-out tokens make {rest.shape[0]} and {held.shape[0]} windows; "
                           "give more prompts, a larger --max-new-tokens or a smaller --window")
    rest = rest[torch.randperm(rest.shape[0], generator=torch.Generator().manual_seed(seed))]
    windows = torch.cat([held, rest])
    loaded.clear()  # the generating copy goes before the capturing one loads
    if device != "cpu":
        from specpath_train.live import write_live

        log(f"data: {held.shape[0]} held-out + {rest.shape[0]} training windows x {window} tokens; features "
            f"computed live on {device} while training")
        return write_live(data, windows, {
            "key": {"target": target_digest(target_dir), "layers": list(layers)}, "heldout": int(held.shape[0]),
            "window": window, "seed": seed, "dtype": "bfloat16", "temperature": temperature,
            "max_new_tokens": max_new_tokens, "sequences": {k: len(v) for k, v in seqs.items()},
            **({"past_eos": past_eos} if past_eos else {})})
    target = LlamaModel.from_pretrained(target_dir, dtype=dtype)
    key = {"target": target_digest(target_dir), "layers": list(layers)}
    if quantization is not None:
        from specpath_engine.quantization import quantized_weights_

        quantized_weights_(target, quantization)
        key["quantization"] = quantization
    log(f"data: {held.shape[0]} held-out + {rest.shape[0]} training windows x {window} tokens")
    parts = capture(target, windows, layers, data, top_k=min(top_k, config["vocab_size"]), batch=feature_batch,
                    progress=progress, log=log)
    with _chunk_lock(meta_path):  # a run sharing the directory may be writing it: one writes, the other reads it
        if meta_path.is_file():
            return json.loads(meta_path.read_text())
        write_features(data / "features.safetensors", windows, parts)  # a part at a time, then renamed
        meta = {"key": key, "heldout": int(held.shape[0]), "window": window, "top_k": top_k, "seed": seed,
                "dtype": str(dtype).removeprefix("torch."), "temperature": temperature,
                "max_new_tokens": max_new_tokens, "sequences": {k: len(v) for k, v in seqs.items()},
                **({"past_eos": past_eos} if past_eos else {})}
        _write_json(meta_path, meta)
        for f in (*data.glob("feat-*.safetensors"), *data.glob("feat-*.lock")):
            f.unlink()
    return meta
