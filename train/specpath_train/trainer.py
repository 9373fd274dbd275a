"""Training machinery shared by the hidden-state drafters' recipes (EAGLE-1, EAGLE-3 and P-EAGLE,
MTP, DFlash and DSpark): one command line, one data pipeline, one train loop.

- **Data**: byte windows of the stdlib corpus plus text the target generates itself (greedy and
  sampled), since a drafter must predict *the target*, not the corpus.
- **Features**: the target runs once over every window; the chosen layers' outputs are cached to
  disk as float16 safetensors (keyed by the target's weights, so a new target recomputes them).
- **Rollout**: training-time test (EAGLE-3) and P-EAGLE train every depth in one uncached
  pass (:mod:`specpath_drafting.rollout`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F


# -- a run ------------------------------------------------------------------------------------


def start_run(args: Any) -> tuple[Path, Callable[[str], None]]:
    """Common start of every recipe: torch threads and seed from ``args``, the output folder, and
    a ``log(text)`` that prints a timestamped line and appends it to ``<out>/train.log``."""
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    if getattr(args, "device", "cpu") != "cpu":
        # the recipe's modules and the tensors it makes land on the device; only random draws
        # stay on the CPU's generators (repeatable for a seed on any device)
        torch.set_default_device(args.device)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    log_path = out / "train.log"

    def log(text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, flush=True)
        with log_path.open("a", encoding="utf-8") as f:
            f.write(line + "\n")

    return out, log


# -- a recipe's command line and data -----------------------------------------------------


def add_data_arguments(p: argparse.ArgumentParser) -> None:
    from specpath_engine.modeling.named_models import embedded_model_path as embedded_target_path

    p.add_argument("--target", default=str(embedded_target_path()), help="target checkpoint directory")
    p.add_argument("--out", required=True, help="run directory (features cache, log, head)")
    p.add_argument("--export", default=None, help="also write the trained head here")
    p.add_argument("--features", default=None, help="features cache directory (default: OUT/features)")
    p.add_argument("--minutes", type=float, default=10.0, help="wall-clock training budget (0 with --steps: none)")
    p.add_argument("--steps", type=int, default=None,
                   help="optimizer-step budget (the schedule follows steps: runs are repeatable, unlike --minutes)")
    p.add_argument("--progress", action="store_true", help="a progress bar (steps, tokens/s, ETA) on stderr")
    p.add_argument("--window", type=int, default=256)
    p.add_argument("--corpus-windows", type=int, default=480)
    p.add_argument("--generated-windows", type=int, default=320)
    p.add_argument("--heldout-windows", type=int, default=32)
    p.add_argument("--batch", type=int, default=12)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: leave the default)")
    p.add_argument("--data", default=None,
                   help="a specpath_train.target_text cache (a BPE target's own text): replaces the byte-corpus "
                        "windows, the features cache and --heldout-windows")
    p.add_argument("--train-vocab", type=int, default=0,
                   help="score logits and the target's distribution over the N most frequent training tokens "
                        "only (0: the whole vocabulary; SmolLM2: 4096 of 49,152)")
    p.add_argument("--resume", action="store_true", help="checkpoint OUT/resume.pt every 2 min and continue from it")
    p.add_argument("--warmup", type=int, default=50, help="learning-rate warm-up steps")
    p.add_argument("--eval-every", type=float, default=60.0, help="seconds between held-out evaluations (and at the end)")
    p.add_argument("--eval-windows", type=int, default=64,
                   help="held-out windows each evaluation along the way reads (the last one reads all; 0: all)")
    p.add_argument("--vocab-corpus", type=int, default=0,
                   help="rank reduced vocabularies by the training tokens plus N stdlib slices (and N/6 chat "
                        "instructions) tokenised by the target's tokenizer (0: the training tokens only)")
    p.add_argument("--device", default="cpu",
                   help="where the head trains (e.g. cuda); a live --data directory's features are computed "
                        "there by the target as training goes (specpath_train.live)")
    p.add_argument("--bf16", action="store_true",
                   help="run each training step under torch.autocast(bfloat16): ~1.8x faster steps on a CPU "
                        "with AVX512_BF16; weights, optimizer and held-out evaluation stay float32")


def features_dir(args: argparse.Namespace) -> Path:
    """Where the features (and their ``features.json`` key) live: the ``--data`` cache when given."""
    if getattr(args, "data", None):
        return Path(args.data)
    return Path(args.features) if args.features else Path(args.out) / "features"


def training_features(args: argparse.Namespace, layers: Sequence[int],
                      log: Callable[[str], None]) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, taps of ``layers``): the ``--data`` cache when given (its held-out count becomes
    ``args.heldout_windows``), else the byte-corpus recipe's own cache (built on first use)."""
    if getattr(args, "data", None):
        from specpath_train.live import is_live, load_live
        from specpath_train.target_text import load_dataset

        if is_live(args.data):
            dtype = torch.bfloat16 if getattr(args, "bf16", False) else torch.float32
            tokens, taps, args.heldout_windows = load_live(args.data, args.target, layers,
                                                           device=getattr(args, "device", "cpu"), dtype=dtype)
            log(f"data: {args.data}: {tuple(tokens.shape)} windows, {args.heldout_windows} held out, layers "
                f"{list(layers)} computed live on {tokens.device} ({dtype})")
            return tokens, taps
        data = load_dataset(args.data, layers)
        args.heldout_windows = data["heldout"]
        log(f"data: {args.data}: {tuple(data['tokens'].shape)} windows, {data['heldout']} held out, layers {list(layers)}")
        return data["tokens"], data["taps"]
    return cached_features(features_dir(args), args.target, layers, make_windows=make_windows_fn(args), log=log)


def training_head_rows(args: argparse.Namespace, tokens: torch.Tensor, head_w: torch.Tensor,
                       log: Callable[[str], None]) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(rows, ids): the target head's rows the recipe scores and their ids: all (ids None), or
    the ``--train-vocab`` most frequent training tokens. The exported drafter keeps using the
    target's whole head, so recipes record the ids (``training_record(train_vocab_ids=...)``)."""
    n = getattr(args, "train_vocab", 0)
    if not n or n >= head_w.shape[0]:
        return head_w, None
    ids = ranked_vocabulary(args, tokens, head_w.shape[0], n)
    log(f"training vocabulary: {n}/{head_w.shape[0]} ids cover {float(torch.isin(tokens, ids).float().mean()):.2%} "
        "of the training tokens")
    return head_w[ids], ids


def train_vocab_record(ids: torch.Tensor | None) -> dict:
    """The ``train_vocab_ids`` entry of a training record (empty for the whole vocabulary): the
    ids a drafter trained with ``--train-vocab`` was scored on, so serving can keep to them."""
    return {} if ids is None else {"train_vocab_ids": [int(i) for i in ids]}


def heldout_top1(args: argparse.Namespace, held: int) -> torch.Tensor | None:
    """The target's greedy token at every held-out position over its whole vocabulary, from the
    ``--data`` cache (its top-k); None without one."""
    from specpath_train.live import is_live

    if not getattr(args, "data", None) or is_live(args.data):
        return None
    from safetensors import safe_open

    with safe_open(str(Path(args.data) / "features.safetensors"), framework="pt") as f:
        return f.get_slice("topk_ids")[:held, :, 0].long()


def ranked_vocabulary(args: argparse.Namespace, tokens: torch.Tensor, vocab_size: int, size: int) -> torch.Tensor:
    """The ``size`` ids a reduced vocabulary keeps: by frequency in ``tokens``, plus the
    ``--vocab-corpus`` sample's counts when asked for (cached in the data directory)."""
    extra = None
    if getattr(args, "vocab_corpus", 0):
        from specpath_train.target_text import corpus_token_counts

        cache = Path(args.data) / f"corpus_counts_{args.vocab_corpus}.pt" if getattr(args, "data", None) else None
        extra = corpus_token_counts(args.target, num_code=args.vocab_corpus, num_chat=max(1, args.vocab_corpus // 6),
                                    cache=cache)
    return vocab_by_frequency(tokens, vocab_size, size, extra_counts=extra)


def resume_file(args: argparse.Namespace) -> Path | None:
    """``OUT/resume.pt`` with ``--resume`` (the loop's checkpoint), else None."""
    return Path(args.out) / "resume.pt" if getattr(args, "resume", False) else None


def data_quantization(data: str | Path | None) -> str | None:
    """The target quantization a ``--data`` cache was captured under (``features.json``
    ``key.quantization``: ``specpath train --target-quantization``), or None."""
    meta = Path(data) / "features.json" if data else None
    if meta is None or not meta.is_file():
        return None
    return json.loads(meta.read_text()).get("key", {}).get("quantization")


def load_target_parts(target_path: str, data: str | Path | None = None) -> tuple[dict, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The target's config and its frozen embedding, final-norm and head weights; where the
    ``data`` cache was captured from a quantised target, its head as that target multiplies by
    (the recipes score drafts against the head over the cached final layer)."""
    from specpath_engine.model import LlamaModel

    target = LlamaModel.from_pretrained(target_path)
    quantization = data_quantization(data)
    if quantization is not None:
        from specpath_engine.quantization import quantized_weights_

        quantized_weights_(target, quantization)
    config = json.loads((Path(target_path) / "config.json").read_text())
    device = torch.get_default_device()  # a run on a device (``--device``) keeps them there
    return (config, *(w.detach().clone().to(device) for w in (target.model.embed_tokens.weight,
                                                              target.model.norm.weight, target.lm_head.weight)))


def start_last_layer_run(args: argparse.Namespace, name: str, detail: str) -> tuple:
    """The start of a recipe that reads the target's last layer: :func:`start_run`, the target's
    parts (:func:`load_target_parts`) and that layer's features. Returns ``(out, log, config,
    embed, norm, head, tokens, taps)``."""
    out, log = start_run(args)
    config, emb_w, norm_w, head_w = load_target_parts(args.target, getattr(args, "data", None))
    layers = (config["num_hidden_layers"] - 1,)
    log(f"{name}: target {args.target} layers {layers} {detail}args {vars(args)}")
    return (out, log, config, emb_w, norm_w, head_w, *training_features(args, layers, log))


def make_windows_fn(args: argparse.Namespace):
    def make(target):
        parts = [corpus_windows(args.corpus_windows, args.window, seed=args.seed)]
        if args.generated_windows:
            parts.append(generated_windows(target, args.generated_windows, args.window, seed=args.seed))
        windows = torch.cat(parts)
        return windows[torch.randperm(windows.shape[0], generator=torch.Generator().manual_seed(args.seed))]
    return make



# -- data -------------------------------------------------------------------------------------


def corpus_windows(num_windows: int, window: int, *, split: str = "train", seed: int = 0) -> torch.Tensor:
    """``[num_windows, window]`` int64 byte windows at random offsets of the stdlib corpus."""
    from specpath_engine.corpus import stdlib_stream

    data = stdlib_stream(split)
    rng = random.Random(seed)
    starts = [rng.randrange(0, len(data) - window) for _ in range(num_windows)]
    return torch.tensor([list(data[s:s + window]) for s in starts], dtype=torch.int64)


def generated_windows(target: Any, num_windows: int, window: int, *, prompt_len: int | None = None,
                      temperatures: Sequence[float] = (0.0, 0.7), seed: int = 0, max_num_seqs: int = 32) -> torch.Tensor:
    """Windows of the target's own continuations of corpus snippets: ``prompt_len`` corpus
    bytes (default: a quarter of the window) then the rest generated (half greedy, half sampled)."""
    from specpath_engine.llm_engine import LLMEngine
    from specpath_engine.request import SamplingParams
    from specpath_engine.scheduler import SchedulerSettings

    prompt_len = prompt_len or max(1, window // 4)
    prompts = corpus_windows(num_windows, prompt_len, seed=seed + 1).tolist()
    engine = LLMEngine(target, scheduler=SchedulerSettings(max_num_seqs=max_num_seqs, max_num_batched_tokens=2048,
                                                           max_model_len=window + 8), seed=seed)
    params = [SamplingParams(temperature=temperatures[i % len(temperatures)], max_tokens=window - prompt_len,
                             ignore_eos=True) for i in range(num_windows)]
    requests, _ = engine.generate(prompts, params)
    return torch.tensor([list(r.prompt_token_ids) + list(r.output_token_ids) for r in requests], dtype=torch.int64)


# -- features ---------------------------------------------------------------------------------


def file_digest(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()[:16]


@torch.inference_mode()
def target_features(target: Any, windows: torch.Tensor, layers: Sequence[int], *, batch: int = 16) -> torch.Tensor:
    """``[N, W, len(layers), d]`` float16 outputs of ``layers`` (before the final norm)."""
    out = []
    positions = torch.arange(windows.shape[1])
    for i in range(0, windows.shape[0], batch):
        ids = windows[i:i + batch]
        result = target.forward(ids, positions, hidden_layers=tuple(layers), logits_indices=torch.zeros(1, dtype=torch.int64))
        out.append(result.hidden_states.to(torch.float16))
    return torch.cat(out)


def cached_features(cache_dir: str | Path, target_path: str | Path, layers: Sequence[int], *,
                    make_windows: Callable[[Any], torch.Tensor], log: Callable[[str], None] = print) -> tuple[torch.Tensor, torch.Tensor]:
    """(windows, taps) from ``cache_dir/features.safetensors`` when it was made from the same
    target weights and holds the layers; otherwise build the windows, run the target, and cache."""
    from safetensors.torch import load_file, save_file

    from specpath_engine.model import LlamaModel

    cache = Path(cache_dir) / "features.safetensors"
    meta_path = Path(cache_dir) / "features.json"
    key = {"target": file_digest(Path(target_path) / "model.safetensors"), "layers": list(layers)}
    if cache.exists() and meta_path.exists():
        cached = json.loads(meta_path.read_text()).get("key", {})
        if cached.get("target") == key["target"] and set(layers) <= set(cached.get("layers", ())):
            data = load_file(str(cache))
            pick = [cached["layers"].index(i) for i in layers]  # a cache of more layers serves a subset
            log(f"features: reusing {cache} ({tuple(data['taps'].shape)}), layers {list(layers)}")
            return data["tokens"].long(), data["taps"][:, :, pick]
    target = LlamaModel.from_pretrained(target_path)
    t0 = time.time()
    windows = make_windows(target)
    log(f"features: {windows.shape[0]} windows x {windows.shape[1]} bytes built in {time.time() - t0:.0f}s")
    t0 = time.time()
    taps = target_features(target, windows, layers)
    log(f"features: target ran over them in {time.time() - t0:.0f}s; taps {tuple(taps.shape)} float16")
    Path(cache_dir).mkdir(parents=True, exist_ok=True)
    save_file({"tokens": windows.to(torch.int32), "taps": taps.contiguous()}, str(cache))
    meta_path.write_text(json.dumps({"key": key, "target_path": str(target_path)}) + "\n")
    return windows, taps


# -- the loop -------------------------------------------------------------------------------------


def soft_cross_entropy(logits: torch.Tensor, target_probs: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
    loss = -(target_probs * F.log_softmax(logits.float(), dim=-1)).sum(-1)
    if mask is None:
        return loss.mean()
    return (loss * mask).sum() / mask.sum().clamp_min(1)


def warmup_cosine(step: int, progress: float, *, peak: float, warmup: int, floor: float = 0.1) -> float:
    """The learning rate every recipe uses: linear warm-up over ``warmup`` steps, then a cosine
    from ``peak`` down to ``floor * peak`` as ``progress`` (of the time or step budget) goes 0 -> 1."""
    if step < warmup:
        return peak * (step + 1) / warmup
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, max(0.0, progress)))))


def train_loop(head: torch.nn.Module, loss_fn: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict]],
               tokens: torch.Tensor, taps: torch.Tensor, *, minutes: float, batch: int, lr: float, seed: int,
               log: Callable[[str], None] = print, eval_every_s: float = 60.0,
               heldout: tuple[torch.Tensor, torch.Tensor] | None = None, warmup: int = 50,
               resume: str | Path | None = None, save_every_s: float = 120.0, bf16: bool = False,
               max_steps: int | None = None, progress: bool = False, eval_windows: int | None = None) -> dict:
    """AdamW with warm-up and cosine decay over a wall-clock budget; ``loss_fn(tokens, taps)``
    returns the loss and float metrics of one batch. Returns the last held-out metrics.

    ``max_steps``: a step budget as well (``minutes`` <= 0: the only one); the schedule then
    follows ``step / max_steps``, so a run is repeatable for a seed and thread count.
    With ``resume`` (a file), the weights, optimizer, step, elapsed time and sampler state (and
    the states of ``loss_fn.generators``, the loss's own random draws, when it lists them) are
    saved there every ``save_every_s`` seconds, after the step in flight when SIGINT/SIGTERM
    arrives (then :class:`TrainingInterrupted` is raised), and picked up again by a restarted
    run, which then only spends what is left of the budget. ``bf16``: the steps' forward runs
    under ``torch.autocast`` (bfloat16 matmuls, float32 master weights). ``eval_windows``: the
    evaluations along the way read only the first this many held-out windows (they come out of the
    budget: a few hundred windows in float32 cost a CPU run a third of its time); the last reads all."""
    gen = torch.Generator().manual_seed(seed)
    sample = heldout if heldout is None or not eval_windows else (heldout[0][:eval_windows], heldout[1][:eval_windows])
    loss_generators = list(getattr(loss_fn, "generators", ()))  # the loss's own draws (anchors, noise)
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    budget = minutes * 60.0 if minutes and minutes > 0 else math.inf
    if max_steps is None and budget == math.inf:
        raise ValueError("train_loop: give a time budget (minutes > 0) or max_steps")
    step, spent = _resumed(resume, head, opt, gen, loss_generators, log)

    def save() -> None:
        tmp = Path(str(resume) + ".tmp")
        torch.save({"model": head.state_dict(), "optimizer": opt.state_dict(), "generator": gen.get_state(),
                    "loss_generators": [g.get_state() for g in loss_generators],
                    "step": step, "elapsed": time.time() - start}, tmp)
        tmp.replace(resume)

    def done() -> bool:
        return (max_steps is not None and step >= max_steps) or time.time() - start >= budget

    def schedule() -> float:
        if max_steps is not None:
            return step / max_steps
        return (time.time() - start) / budget

    start = last_eval = last_save = time.time() - spent
    metrics: dict = {}
    window = tokens.shape[1] if tokens.dim() > 1 else 1
    first_step = step
    bar = _progress_bar(progress, max_steps, step, budget, spent)
    with _deferred_signals() as stop:
        while not done():
            for group in opt.param_groups:
                group["lr"] = warmup_cosine(step, schedule(), peak=lr, warmup=warmup)
            idx = torch.randint(0, tokens.shape[0], (batch,), generator=gen, device="cpu")
            with torch.autocast(tokens.device.type, dtype=torch.bfloat16, enabled=bf16):
                loss, info = loss_fn(tokens[idx], taps[idx].float())
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            step += 1
            if bar is not None:  # steps (or seconds of a clock budget) done, training tokens per second
                bar.update(1 if max_steps is not None else min(budget, time.time() - start) - bar.n)
                _show_step(bar, step, loss, (step - first_step) * batch * window)
            if stop:
                _stop(stop[0], step, resume, save, bar)
            if resume is not None and time.time() - last_save >= save_every_s:
                last_save = time.time()
                save()
            if time.time() - last_eval >= eval_every_s or done():
                last_eval = time.time()
                metrics = _log_eval(loss_fn, heldout if done() else sample, info, metrics, log,
                                    f"step {step} {time.time() - start:.0f}s loss={loss.item():.4f}")
    if bar is not None:
        bar.close()
    if heldout is not None and not metrics:  # a resumed run with nothing left to train
        with torch.no_grad():
            _, metrics = loss_fn(heldout[0], heldout[1].float())
    if resume is not None:
        save()
    metrics["steps"] = step
    return metrics


def _stop(signal_name: str, step: int, resume: str | Path | None, save: Callable[[], None], bar: Any) -> None:
    """After the step in flight when a signal came: save the state (with ``resume``) and raise."""
    if resume is not None:
        save()
    if bar is not None:
        bar.close()
    raise TrainingInterrupted(f"stopped by {signal_name} at step {step}"
                              + (f"; state saved in {resume}" if resume is not None else ""))


def _resumed(resume: str | Path | None, head: torch.nn.Module, opt: torch.optim.Optimizer, gen: torch.Generator,
             loss_generators: list[torch.Generator], log: Callable[[str], None]) -> tuple[int, float]:
    """Load ``resume``'s saved state into the run's objects when the file exists; ``(step, seconds spent)``."""
    if resume is None or not Path(resume).is_file():
        return 0, 0.0
    state = torch.load(resume, weights_only=False)
    head.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    gen.set_state(state["generator"])
    for g, saved in zip(loss_generators, state.get("loss_generators", ())):
        g.set_state(saved)
    step, spent = state["step"], state["elapsed"]
    log(f"resumed from {resume}: step {step}, {spent:.0f}s spent")
    return step, spent


def _show_step(bar: Any, step: int, loss: torch.Tensor, tokens_trained: int) -> None:
    """The progress bar's postfix: step, loss and training tokens per second so far."""
    bar.set_postfix(step=step, loss=f"{loss.item():.3f}",
                    tok_s=f"{tokens_trained / max(bar.format_dict['elapsed'], 1e-9):.0f}", refresh=False)


def _log_eval(loss_fn: Callable[[torch.Tensor, torch.Tensor], tuple[torch.Tensor, dict]],
              heldout: tuple[torch.Tensor, torch.Tensor] | None, info: dict, metrics: dict,
              log: Callable[[str], None], prefix: str) -> dict:
    """Log the batch's metrics and, with ``heldout``, the held-out ones (returned; else ``metrics``)."""
    text = " ".join(f"{k}={v:.3f}" for k, v in info.items())
    if heldout is not None:
        with torch.no_grad():
            _, metrics = loss_fn(heldout[0], heldout[1].float())
        text += " | heldout " + " ".join(f"{k}={v:.3f}" for k, v in metrics.items())
    log(f"{prefix} {text}")
    return metrics


class TrainingInterrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped :func:`train_loop` between two steps (its state saved)."""


def run_recipe(main: Callable[[], int], prog: str) -> int:
    """A recipe module's ``python -m`` entry: ``main()``'s code, or where SIGINT/SIGTERM stopped
    its training (state saved under ``--resume``) one line saying so on stderr and 130, not a
    traceback (``specpath train`` says the same of its own runs)."""
    try:
        return main()
    except TrainingInterrupted as exc:
        print(f"{prog}: {exc}; run the same command to continue", file=sys.stderr)
        return 130


def _progress_bar(enabled: bool, max_steps: int | None, step: int, budget: float, spent: float):
    """A bar over the steps, or over the seconds of a clock budget (so either way it has an ETA)."""
    if not enabled:
        return None
    from tqdm import tqdm

    if max_steps is not None:
        return tqdm(total=max_steps, initial=step, unit="step", desc="train", dynamic_ncols=True)
    return tqdm(total=budget, initial=min(spent, budget), unit="s", desc="train", dynamic_ncols=True,
                bar_format="{l_bar}{bar}| {n:.0f}/{total:.0f}s [{elapsed}<{remaining}{postfix}]")


class _deferred_signals:
    """SIGINT/SIGTERM set a flag (the list holds the signal's name) instead of stopping the
    process mid-step, so the loop saves a consistent state; the old handlers come back after.
    Off the main thread (where handlers cannot be set) signals keep their usual effect."""

    def __enter__(self) -> list[str]:
        import signal
        import threading

        self.flag: list[str] = []
        self.old: dict = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.old[sig] = signal.signal(sig, lambda num, _frame: self.flag.append(signal.Signals(num).name))
        return self.flag

    def __exit__(self, *exc: Any) -> None:
        import signal

        for sig, handler in self.old.items():
            signal.signal(sig, handler)


def vocab_by_frequency(tokens: torch.Tensor, vocab_size: int, size: int,
                       extra_counts: torch.Tensor | None = None) -> torch.Tensor:
    """The ``size`` most frequent ids of ``tokens``, ascending (ties: lower id first): a reduced
    draft vocabulary (EAGLE-3), or the training vocabulary of a head that shares a large target
    vocabulary (its logits and the target's distribution are computed over these rows only).

    ``extra_counts`` [vocab_size] (e.g. token counts of a larger text sample) are added after
    scaling them to the same total, so ids the training windows never show can still rank."""
    counts = torch.bincount(tokens.reshape(-1), minlength=vocab_size).float()
    if extra_counts is not None and float(extra_counts.sum()) > 0:
        extra = extra_counts.float().to(counts.device)
        counts = counts + extra * (counts.sum() / extra.sum())
    counts = counts - torch.arange(vocab_size, device=counts.device) * 1e-6  # deterministic tie-break
    return counts.topk(size).indices.sort().values


def target_probs_from_final(target_norm: torch.Tensor, target_head: torch.Tensor, final: torch.Tensor,
                            eps: float) -> torch.Tensor:
    """The target's next-token distribution from its final-layer output (norm, head, softmax)."""
    x = final.float()
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * target_norm
    return torch.softmax(x @ target_head.T, dim=-1)


@torch.no_grad()
def target_argmax(target_norm: torch.Tensor, target_head: torch.Tensor, final: torch.Tensor, eps: float,
                  *, chunk: int = 2048) -> torch.Tensor:
    """The target's greedy next token over its whole vocabulary, a few thousand positions at a
    time (held-out agreement stays honest when training scores a reduced vocabulary)."""
    x = final.float().reshape(-1, final.shape[-1])
    out = torch.empty(x.shape[0], dtype=torch.int64)
    for i in range(0, x.shape[0], chunk):
        h = x[i:i + chunk]
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps) * target_norm
        out[i:i + chunk] = (h @ target_head.T).argmax(-1)
    return out.view(final.shape[:-1])


# -- the end of every recipe ------------------------------------------------------------------


def fit(name: str, model: torch.nn.Module, loss_fn: Callable, tokens: torch.Tensor, taps: torch.Tensor,
        args: Any, log: Callable[[str], None]) -> dict:
    """:func:`train_loop` over all but the first ``args.heldout_windows`` windows, which are the
    held-out set; logs the time taken. Returns the held-out metrics."""
    held = args.heldout_windows
    t0 = time.time()
    metrics = train_loop(model, loss_fn, tokens[held:], taps[held:], minutes=args.minutes, batch=args.batch,
                         lr=args.lr, seed=args.seed, log=log, heldout=(tokens[:held], taps[:held]),
                         resume=resume_file(args), warmup=getattr(args, "warmup", 50),
                         eval_every_s=getattr(args, "eval_every", 60.0), bf16=getattr(args, "bf16", False),
                         max_steps=getattr(args, "steps", None), progress=getattr(args, "progress", False),
                         eval_windows=getattr(args, "eval_windows", None))
    log(f"{name}: trained {metrics.get('steps')} steps in {time.time() - t0:.0f}s; held-out {metrics}")
    return metrics


def training_record(script: str, args: Any, metrics: dict, *, argv: Sequence[str] | None = None,
                    **more: Any) -> dict:
    """The ``specpath_training`` entry of a trained checkpoint's config: the script, its seed,
    budget and command line, the target's digest (from the features cache) and the held-out
    metrics, so the weights say how they were made."""
    import sys

    digest = json.loads((features_dir(args) / "features.json").read_text())["key"]["target"]
    return {"script": script, "seed": args.seed, "minutes": args.minutes,
            "argv": list(sys.argv[1:] if argv is None else argv), "target_digest": digest, "heldout": metrics, **more}


def save_and_export(save: Callable[..., Any], model: Any, path: Path, args: Any, log: Callable[[str], None],
                    name: str, *, extra: dict, dtype: torch.dtype = torch.float16) -> None:
    """``save(model, path, extra_config=extra)`` (the run's copy, full precision), and with
    ``--export`` the shipped copy in ``dtype``. A model trained on a device is saved from the CPU."""
    for part in model if isinstance(model, (list, tuple)) else (model,):  # MTP saves its module list
        part.to("cpu")
    save(model, path, extra_config=extra)
    if args.export:
        save(model, args.export, extra_config=extra, dtype=dtype)
        log(f"{name}: exported to {args.export}")


def fit_and_save(name: str, script: str, model: torch.nn.Module, loss_fn: Callable, tokens: torch.Tensor,
                 taps: torch.Tensor, args: Any, log: Callable[[str], None], *, save: Callable[..., Any], path: Path,
                 argv: Sequence[str] | None = None) -> dict:
    """The end of a recipe with nothing between training and saving: :func:`fit`, then
    :func:`save_and_export` with the :func:`training_record`. Returns the held-out metrics."""
    metrics = fit(name, model, loss_fn, tokens, taps, args, log)
    extra = {"specpath_training": training_record(script, args, metrics, argv=argv)}
    save_and_export(save, model, path, args, log, name, extra=extra)
    return metrics
