"""``specpath train METHOD --target MODEL --out DIR``: a drafter for your own target.

Four stages, each resumable from the run directory (``DIR/run/``):

1. **data**: the prompts (``--data FILE.jsonl``, or ``--corpus``: the built-in corpus or the
   wide one of :mod:`specpath_train.prompt_mix`, drawn once into ``DIR/run/prompts-*.jsonl``),
   split into training and held-out prompts, answered by the target (self-distillation,
   batched on the engine);
2. **features**: one target pass over the packed windows keeps the method's layers and the
   target's top-k (``specpath_train.selfdistill``);
3. **train**: the method's recipe (``specpath_train.recipes.*``, flags from
   ``specpath_train.methods``; a ``--variant``'s on top, ``--from`` as its start), its state in ``DIR/run/work/resume.pt`` saved every two
   minutes and on SIGINT/SIGTERM; then the drafter's temperature calibration for sampled
   requests (:mod:`specpath_train.calibrate`, on held-out windows; ``--no-calibrate`` skips it);
4. **evaluate**: ``DIR`` (the checkpoint, written at the end) served as ``{"model": DIR}`` on
   the held-out prompts; τ and acceptance by position printed and written to ``DIR/metrics.json``;
   then with a model-free method beside it (``--model-free``, suffix by default): where that
   raises τ by :data:`COMPANION_GAIN` the checkpoint's ``config.json`` names it
   (``specpath_model_free``) and the configuration layer drafts it beside the drafter by default.

A run is repeatable for a seed and thread count with a ``--steps`` budget (``--minutes`` stops
by the clock). ``DIR/run/run.json`` records the run's config; a directory holding another
config (or no run at all) is never written over without ``--overwrite``. ``--write-prompts FILE``
does none of this: it writes the corpus's prompts as a ``--data`` file and exits.

Only the standard library is imported at module level (the core CLI builds its parser from
here); torch, the engine and the recipes load inside the handler.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

RUN = "run"
"""The run's own files, inside the output (checkpoint) directory."""

CONFIG_KEYS = ("method", "variant", "from", "target", "data", "corpus", "prompts", "heldout", "max_new_tokens",
               "temperature", "seed", "window", "dtype", "max_prompt_tokens", "draft_vocab", "draft_layers",
               "target_quantization", "past_eos")
"""What makes two runs the same run (budget, threads and progress may change on --resume)."""

COMPANION_GAIN = 0.03
"""The held-out τ gain (a share) a model-free method beside the drafter must bring for the
checkpoint to name it as its default companion (``--model-free``)."""

PRECISIONS = ("auto", "float32", "bfloat16")
"""``--precision``: the training steps' arithmetic (``auto``: :func:`train_precision`)."""

TARGET_QUANTIZATIONS = ("int8", "int4")
"""``--target-quantization``: the engine's weight-only formats, spelled out so the CLI imports no torch
(``specpath_engine.quantization.QUANTIZATIONS``; a test keeps them equal)."""

CORPORA = ("builtin", "wide", "wide-write")
"""``--corpus``: where a run without ``--data`` takes its prompts."""

WIDE_PROMPTS = ("prompts-train.jsonl", "prompts-heldout.jsonl")
"""The wide corpus's (training, held-out) prompts in the run directory, as ``--data`` files."""

CALIBRATION_POSITIONS = 2**28
"""The most (held-out position x vocabulary) logits the calibration holds at once (1 GiB of
float32): its windows are as many of :data:`CALIBRATION_WINDOWS` as fit."""

CALIBRATION_WINDOWS = 16
"""Held-out windows the temperature calibration reads (4,080 first drafts of 256-token windows:
the shipped SmolLM2 EAGLE-3 head fits 0.85 on the first 16 of a data round's held-out windows and
on the first 48)."""

SELF_INSTRUCT_DIR = "self-instruct"
"""Where, in the run directory, the wide corpus's self-instructed requests are kept as the target
writes them (a stopped run resumes them: :func:`~specpath_train.prompt_mix.self_instruct`)."""


def add_subcommands(subparsers: Any) -> None:
    """Register ``train`` on the ``specpath`` CLI."""
    p = subparsers.add_parser("train", help="train a drafter for a target (self-distilled data, the method's recipe)",
                              description="Train a drafter for your own target: the target answers the prompts "
                                          "(--data, or a corpus: --corpus), the method's recipe trains on its "
                                          "features, and DIR becomes a checkpoint served as {\"model\": DIR}.")
    p.add_argument("method", metavar="METHOD", nargs="?", help="eagle, eagle3, mtp, dflash, dspark or draft_model "
                                                               "(--variant: PARD, P-EAGLE)")
    p.add_argument("--target", required=True, help="the target: HF checkpoint dir, .gguf file, named model or 'embedded'")
    p.add_argument("--variant", help="a variant of the method's drafter: draft_model --variant pard (all K drafts "
                                     "in one pass from mask tokens), eagle3 --variant p-eagle (drafts 2..K from mask "
                                     "slots in the first draft's pass)")
    p.add_argument("--from", dest="init", metavar="CHECKPOINT",
                   help="start from this drafter (eagle3, mtp, dflash, dspark, draft_model: e.g. the --out of an earlier run) instead of "
                        "from scratch: a variant as a fine-tune of the plain drafter")
    p.add_argument("--out", help="output directory: the checkpoint, metrics.json and run/ (resume state)")
    p.add_argument("--data", help='prompts, one JSON object a line: {"prompt": ...} or {"messages": [...]} '
                                  "(default: --corpus)")
    p.add_argument("--corpus", choices=CORPORA, default=None,
                   help="without --data, the prompts: builtin (default; stdlib code to continue, chat about stdlib "
                        "functions, everyday requests), wide (also function headers to complete, edits of code, "
                        "and requests the target writes itself from an open user turn of its chat template) or "
                        "wide-write (wide plus requests to implement a function from its signature and docstring)")
    p.add_argument("--prompts", type=int, default=240,
                   help="--corpus: training prompts (default 240); the held-out ones (--heldout) come on top")
    p.add_argument("--write-prompts", metavar="FILE",
                   help="only write the corpus's prompts (training, then held-out) to FILE as a --data file, and "
                        "exit: to read or edit them first (no METHOD, --out or budget needed)")
    p.add_argument("--heldout", type=float, default=0.1, help="share of the prompts held out (default 0.1, at least 1)")
    p.add_argument("--max-new-tokens", type=int, default=192, help="response length the target writes (default 192)")
    p.add_argument("--temperature", type=float, default=0.0, help="of the target's responses (default 0: greedy)")
    p.add_argument("--past-eos", type=float, default=None, metavar="SHARE",
                   help="this share of the prompts (0-1) answered past EOS to --max-new-tokens, as benchmarks that "
                        "ignore EOS make the target write (default: none; every response stops at EOS)")
    p.add_argument("--seed", type=int, default=0, help="seeds the prompts, the split, the responses and training (default 0)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1; results repeat per thread count)")
    p.add_argument("--window", type=int, default=256, help="training window in tokens (default 256)")
    p.add_argument("--max-prompt-tokens", type=int, default=512, help="longer prompts keep their first and last halves")
    p.add_argument("--dtype", choices=("auto", "float32", "bfloat16"), default="auto",
                   help="of the target while generating and capturing (default auto: the dtype `specpath run` "
                        "serves it in, so bfloat16 on the native kernels where the CPU has native bf16 and the "
                        "checkpoint is not float32)")
    p.add_argument("--target-quantization", choices=TARGET_QUANTIZATIONS, default=None,
                   help="train for the target as `specpath run --quantization` serves it (weight-only int8 or "
                        "int4): it answers the prompts quantised, the drafter learns its features and "
                        "distributions, and the checkpoint says which target it is for (config.json "
                        "specpath_target_quantization); held-out τ is measured over that target")
    p.add_argument("--max-num-seqs", type=int, default=32, help="requests generated at once (default 32)")
    p.add_argument("--generations", metavar="DIR",
                   help="keep the target's responses here, shared by runs of other methods on the same prompts "
                        "(default: inside --out)")
    p.add_argument("--draft-vocab", type=int, default=None, metavar="N",
                   help="eagle3: the head's draft vocabulary, the N most frequent target tokens of the data "
                        "(default 4096 for a large vocabulary; with --from the head's own, and given, chosen "
                        "again from this run's data: ids the head had keep their rows)")
    p.add_argument("--draft-layers", type=int, default=None, metavar="N",
                   help="dflash, dspark: the drafter's layers (default 1; with --from, the checkpoint's); more than "
                        "a --from drafter has grows it: each new layer starts as a copy of its last with the output "
                        "projections at zero, so it drafts what it did and learns from there")
    p.add_argument("--minutes", type=float, default=None, help="training budget by the clock")
    p.add_argument("--steps", type=int, default=None, help="training budget in optimizer steps (repeatable runs)")
    p.add_argument("--batch", type=int, default=8, help="windows per step (default 8)")
    p.add_argument("--lr", type=float, default=None, help="peak learning rate (default: the method's)")
    p.add_argument("--eval-prompts", type=int, default=8,
                   help="held-out prompts served at the end (default 8; 0: no serving, e.g. on a GPU machine)")
    p.add_argument("--eval-tokens", type=int, default=64, help="tokens generated per held-out prompt (default 64)")
    p.add_argument("--model-free", default="suffix", metavar="METHOD",
                   help="a model-free method measured beside the drafter on the held-out prompts; where it raises τ "
                        f"by {round(COMPANION_GAIN * 100)}%% or more the checkpoint names it as its default companion "
                        "(config.json specpath_model_free). 'none': not measured (default: suffix)")
    p.add_argument("--device", default="cpu",
                   help="cpu (default), or an accelerator (cuda): the target answers the prompts there in batches "
                        "of --max-num-seqs (with transformers) and the head trains there, the target's features "
                        "computed as training goes instead of cached")
    p.add_argument("--precision", choices=PRECISIONS, default="auto",
                   help="the training steps' arithmetic: bfloat16 runs each step under torch.autocast (weights, "
                        "optimizer state and the held-out evaluation stay float32); default auto: bfloat16 on an "
                        "accelerator or a CPU with native bf16 (AVX512_BF16, AMX-BF16), else float32")
    p.add_argument("--more-data", action="append", metavar="DIR", default=[],
                   help="also train on this finished data directory of the same target (an earlier run's "
                        "DIR/run/data, e.g. of a --data-only run); repeatable. Their training windows join this "
                        "run's; their held-out windows are left out (this run's held-out set measures the result)")
    p.add_argument("--data-only", action="store_true",
                   help="stop after the data stage (the responses, and the features on a CPU): runs of several "
                        "methods then share it through --generations")
    p.add_argument("--resume", action="store_true", help="continue the run in --out (after Ctrl-C or a kill)")
    p.add_argument("--overwrite", action="store_true", help="replace the run in --out (of any config)")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--no-calibrate", dest="calibrate", action="store_false",
                   help="leave the drafter's temperature calibration out (specpath_temperature_scale: what "
                        "sampled requests draft at, fitted on held-out windows after training)")
    p.set_defaults(func=cmd_train)


# -- checks ---------------------------------------------------------------------------------------


def _error(text: str) -> Exception:
    from specpath_train.errors import train_error

    return train_error(text)


def check_method(method: str) -> Any:
    """The method's :class:`~specpath_train.methods.MethodRecipe`, or a one-line error."""
    from specpath.errors import closest_match
    from specpath_train.methods import RECIPES

    if method in RECIPES:
        return RECIPES[method]
    from specpath.methods import CANONICAL_METHODS

    hint = closest_match(method, RECIPES)
    known = method in CANONICAL_METHODS
    text = (f"method {method!r} has no trainer" if known else f"unknown method {method!r}")
    text += f"; specpath train trains {', '.join(RECIPES)}"
    raise _error(text + (f" (did you mean {hint!r}?)" if hint and not known else ""))


def check_draft_vocab(recipe: Any, size: int | None) -> None:
    """``--draft-vocab``: a size of at least 2, for a method whose drafter has its own vocabulary."""
    if size is None:
        return
    if not recipe.draft_vocab:
        from specpath_train.methods import RECIPES

        having = ", ".join(m for m, r in RECIPES.items() if r.draft_vocab)
        raise _error(f"--draft-vocab: {recipe.method}'s drafter has no vocabulary of its own (only {having} takes it)")
    if size < 2:
        raise _error(f"--draft-vocab must be at least 2 (got {size})")


def check_draft_layers(recipe: Any, layers: int | None, init_config: dict | None) -> None:
    """``--draft-layers``: at least 1, for a method whose drafter's depth the recipe sets, and no
    fewer than a ``--from`` drafter has (its ``init_config``: a run adds layers, it does not drop
    trained ones)."""
    if layers is None:
        return
    if recipe.layers_flag is None:
        from specpath_train.methods import RECIPES

        having = ", ".join(m for m, r in RECIPES.items() if r.layers_flag is not None)
        raise _error(f"--draft-layers: {recipe.method}'s drafter has a fixed depth here (only {having} takes it)")
    if layers < 1:
        raise _error(f"--draft-layers must be at least 1 (got {layers})")
    have = (init_config or {}).get("num_hidden_layers", 1)
    if isinstance(have, int) and layers < have:
        raise _error(f"--draft-layers {layers}: the --from drafter has {have} layers; a run may add layers, "
                     "not drop them")


def check_variant(method: str, variant: str | None) -> Any:
    """The :class:`~specpath_train.methods.Variant` asked for (None for none), or a one-line error."""
    from specpath.errors import closest_match
    from specpath_train.methods import VARIANTS

    if variant is None:
        return None
    if (method, variant) in VARIANTS:
        return VARIANTS[method, variant]
    mine = [name for (m, name) in VARIANTS if m == method]
    every = ", ".join(f"{m} --variant {name}" for (m, name) in VARIANTS)
    if not mine:
        raise _error(f"--variant {variant}: method {method!r} has no variants; specpath train has {every}")
    hint = closest_match(variant, mine)
    raise _error(f"--variant {variant}: {method}'s variants are {', '.join(mine)}"
                 + (f" (did you mean {hint!r}?)" if hint else ""))


def check_from(recipe: Any, init: str | None, target_config: dict | None) -> str | None:
    """``--from``: a checkpoint of this method that fits the target (``target_config``; None:
    not checked yet), or a one-line error. Returns what identifies it in the run config (its
    path and weights' digest)."""
    if init is None:
        return None
    if recipe.init_flag is None:
        from specpath_train.methods import RECIPES

        able = ", ".join(m for m, r in RECIPES.items() if r.init_flag is not None)
        raise _error(f"--from: {recipe.method}'s recipe cannot start from a checkpoint ({able} can)")
    path = Path(init)
    weights = sorted(path.glob("*.safetensors")) if path.is_dir() else []
    if not (path / "config.json").is_file() or not weights:
        raise _error(f"--from {init}: not a drafter checkpoint (config.json and *.safetensors)")
    try:
        config = json.loads((path / "config.json").read_text())
    except ValueError as exc:
        raise _error(f"--from {init}: config.json is not JSON ({exc})") from None
    from specpath import plugins
    from specpath.config.checkpoint import DraftCheckpoint
    from specpath.methods import normalize_method

    found = plugins.detect_method(DraftCheckpoint(str(path), config))
    method = normalize_method(found.method) if found is not None and isinstance(found.method, str) else "draft_model"
    if method != recipe.method:
        raise _error(f"--from {init}: a checkpoint of {method}, not {recipe.method} (a run starts from a drafter of "
                     "its own method)")
    why = None if target_config is None else recipe.init_fits(config, target_config)
    if why is not None:
        raise _error(f"--from {init}: does not fit the target: {why}")
    from specpath_train.trainer import file_digest

    return f"{path.resolve()}:{file_digest(weights[0])}"


def train_dtype(requested: str, target: str) -> str:
    """``--dtype``: as given, or for ``auto`` the dtype the serving engine runs the target in by
    default (its ``dtype="auto"``: a GGUF file or a named model's, a bf16 checkpoint in bfloat16
    where the CPU computes it natively, a float32 checkpoint in float32), so the drafter learns
    the features it will be served with. A target that cannot be read resolves to float32 (its
    own check says what is wrong)."""
    if requested != "auto":
        return requested
    from specpath.config.model import load_hf_config
    from specpath_engine.dtype import resolve_dtype
    from specpath_engine.llm import _model_path

    try:
        raw = load_hf_config(str(_model_path(None if target == "embedded" else target)))
    except Exception:  # noqa: BLE001 - resolve_target reports a bad target in one line
        return "float32"
    dtype = resolve_dtype("auto", raw.get("torch_dtype") or raw.get("dtype"))
    return dtype if dtype in ("float32", "bfloat16") else "float32"


def train_precision(requested: str, device: str) -> str:
    """``--precision``: as given, or for ``auto`` bfloat16 where the steps run natively in it (an
    accelerator, a CPU with AVX512_BF16 or AMX-BF16), else float32: on a 2-core AVX512-BF16 EPYC
    an EAGLE-3 step for SmolLM2-135M took 1.2 s under bf16 autocast against 3.0 s in float32
    (8 windows of 256, 2 threads), and the head's weights stay float32 either way."""
    if requested != "auto":
        return requested
    if not str(device).startswith("cpu"):
        return "bfloat16"
    from specpath_engine.dtype import cpu_has_native_bf16

    return "bfloat16" if cpu_has_native_bf16() else "float32"


def check_prompt_args(args: argparse.Namespace) -> None:
    """Where the prompts come from: ``--data`` or ``--corpus``, not both; ``--prompts`` and
    ``--heldout`` in range."""
    if args.corpus is not None and args.data:
        raise _error(f"--corpus {args.corpus} with --data: --data is the prompts; give one of the two")
    if args.write_prompts and args.data:
        raise _error(f"--write-prompts with --data: {args.data} already is a prompt file")
    if not 0 < args.heldout < 1:
        raise _error(f"--heldout must be a share between 0 and 1 (got {args.heldout})")
    if args.prompts < 1:
        raise _error(f"--prompts must be at least 1 (got {args.prompts})")


def check_more_data(dirs: list[str], layers: Any, target_dir: Any) -> None:
    """Every ``--more-data`` directory is a finished data directory holding ``layers`` (when
    known) of ``target_dir``'s weights (when known; a GGUF target is checked once converted, by
    the merge)."""
    digest = None
    if dirs and target_dir is not None:
        from specpath_train.selfdistill import target_digest

        digest = target_digest(target_dir)  # hashes the weights: once for every directory
    for d in dirs:
        meta_path = Path(d) / "features.json"
        if not meta_path.is_file() or not (Path(d) / "features.safetensors").is_file():
            hint = f" (the data of a run is its DIR/run/data: {Path(d) / RUN / 'data'})" \
                if (Path(d) / RUN / "data" / "features.json").is_file() else ""
            raise _error(f"--more-data {d}: not a finished data directory (no features.json and "
                         f"features.safetensors){hint}")
        meta = json.loads(meta_path.read_text())
        if meta.get("live"):
            raise _error(f"--more-data {d}: a live directory (windows only, features computed on a device); "
                         "give directories made on the CPU")
        have = meta.get("key", {}).get("layers", [])
        if layers is not None and not set(layers) <= set(have):
            raise _error(f"--more-data {d}: holds the target's layers {have}, this method needs {list(layers)}")
        if digest is not None and meta.get("key", {}).get("target") != digest:
            raise _error(f"--more-data {d}: made with other target weights than {target_dir}")


def with_more_data(data_dir: Path, more: list[str], layers: Any, merged: Path, log: Any) -> Path:
    """This run's data with the ``--more-data`` directories' training windows (made once, in
    ``merged``; again when the list changed)."""
    from specpath_train.target_text import merge_datasets

    parts = [str(Path(d).resolve()) for d in (data_dir, *more)]
    meta_path = merged / "features.json"
    if meta_path.is_file() and [p["path"] for p in json.loads(meta_path.read_text()).get("parts", [])] == parts:
        return merged
    check_more_data(more, layers, None)
    t0 = time.time()
    try:
        merge_datasets(parts, merged, layers=list(layers), heldout="first")
    except ValueError as e:
        raise _error(f"--more-data: {e}") from None
    meta = json.loads(meta_path.read_text())
    windows = sum(p["windows"] for p in meta["parts"])
    log(f"data: with --more-data: {windows - sum(p['heldout'] for p in meta['parts'][1:])} windows "
        f"({meta['heldout']} held out) from {len(parts)} data directories in {time.time() - t0:.0f}s")
    return merged


def check_budget(args: argparse.Namespace) -> None:
    if args.minutes is None and args.steps is None:
        raise _error("give a training budget: --steps N (repeatable) or --minutes M")
    if args.steps is not None and args.steps < 1:
        raise _error(f"--steps must be at least 1 (got {args.steps})")
    if args.minutes is not None and args.minutes <= 0:
        raise _error(f"--minutes must be positive (got {args.minutes})")
    for flag in ("max_new_tokens", "window", "batch", "threads", "eval_tokens", "max_num_seqs"):
        if getattr(args, flag) < 1:
            raise _error(f"--{flag.replace('_', '-')} must be at least 1 (got {getattr(args, flag)})")
    if args.eval_prompts < 0:
        raise _error(f"--eval-prompts must be 0 or more (got {args.eval_prompts})")
    check_model_free(args.model_free)


def check_model_free(method: str) -> None:
    """``--model-free``: 'none' or an installed model-free method (checked before any work)."""
    if method == "none":
        return
    from specpath import plugins
    from specpath.registry import get_registry

    plugins.load_all()
    free = get_registry().model_free_names()
    if method not in free:
        raise _error(f"--model-free {method!r} is not an installed model-free method; one of: {', '.join(free)}, none")


def resolve_target(target: str, run_dir: Path | None, log: Any) -> tuple[Path, str]:
    """(an HF checkpoint directory of the target, what identifies it in the run config). A GGUF
    file is converted into ``run_dir/target`` once; a named model uses the engine's cached copy."""
    from specpath_engine.modeling.gguf import convert_gguf, is_gguf
    from specpath_engine.modeling.named_models import NAMED_MODELS, ModelNotInstalledError, hf_checkpoint_dir, resolve_model_path

    try:
        path = resolve_model_path(target)
        if not Path(target).exists() and target in NAMED_MODELS:
            return hf_checkpoint_dir(target), f"named:{target}"
        if path.is_file() and is_gguf(path):
            from specpath_train.trainer import file_digest

            out = run_dir / "target"
            if not (out / "config.json").is_file():
                import torch

                log(f"target: converting {path} to {out} (float32)")
                convert_gguf(path, out, dtype=torch.float32)
            return out, f"gguf:{file_digest(path)}"
    except ModelNotInstalledError as exc:
        raise _error(f"--target {target}: {exc}") from None
    except Exception as exc:  # noqa: BLE001 - any failure to read a target is one line
        raise _error(f"--target {target}: cannot load it: {' '.join(str(exc).split())}") from None
    if not (path / "config.json").is_file():
        raise _error(f"--target {target}: not a checkpoint directory (no config.json), .gguf file or named model")
    return path, "dir"


def load_target_checked(target_dir: Path, target: str) -> tuple[dict, Any]:
    """The target's config and tokenizer, after loading its weights once (so a broken or
    unsupported checkpoint fails here, in one line, before any work is done)."""
    from specpath_engine.model import LlamaModel
    from specpath_engine.tokenizer import load_tokenizer

    try:
        LlamaModel.from_pretrained(target_dir)
        tokenizer = load_tokenizer(target_dir)
        config = json.loads((target_dir / "config.json").read_text())
    except Exception as exc:  # noqa: BLE001
        raise _error(f"--target {target}: specpath cannot load it: {' '.join(str(exc).split())}") from None
    return config, tokenizer


def prepare_out(out: Path, config: dict, *, resume: bool, overwrite: bool) -> None:
    """Make ``out`` ready for this run's config, or refuse (see the module docstring)."""
    import shutil

    run_json = out / RUN / "run.json"
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not out.is_dir():
        raise _error(f"--out {out}: exists and is not a directory")
    if not run_json.is_file():
        raise _error(f"--out {out}: exists and is not a specpath train run (no {RUN}/run.json); "
                     "choose another directory (it is never deleted, even with --overwrite)")
    old = json.loads(run_json.read_text())
    if overwrite:
        shutil.rmtree(out)
        return
    differs = [k for k in CONFIG_KEYS if _recorded(old, k) != config.get(k)]
    if differs == ["from"] and not (out / RUN / "work" / "resume.pt").exists():
        differs = []  # the starting drafter matters once training has begun: a --data-only run's data serves any
    if differs:
        raise _error(f"--out {out}: holds a run of another config (differs in {', '.join(differs)}); "
                     "--overwrite to replace it, or another --out")
    if not resume:
        raise _error(f"--out {out}: holds a run of this config; --resume to continue it, --overwrite to start again")


def _recorded(old: dict, key: str) -> Any:
    """``key`` of a recorded run config; a run made before ``--corpus`` existed took the
    built-in corpus unless it had ``--data``."""
    if key == "corpus" and key not in old:
        return None if old.get("data") else "builtin"
    return old.get(key)


# -- the prompts ----------------------------------------------------------------------------------


def heldout_count(args: argparse.Namespace) -> int:
    """Held-out prompts of a corpus: ``--heldout``'s share of all, with ``--prompts`` training ones."""
    return max(1, round(args.heldout * args.prompts / (1 - args.heldout)))


def builtin_split(args: argparse.Namespace) -> tuple[list, list]:
    """The built-in corpus's (training, held-out) prompts, the held-out ones from held-out files."""
    from specpath_train.prompts import builtin_prompts

    return (builtin_prompts("train", args.prompts, seed=args.seed),
            builtin_prompts("heldout", heldout_count(args), seed=args.seed + 7))


def generation_llm(target_dir: Path, args: argparse.Namespace) -> Any:
    """The target as the data stage generates with it (the run's dtype: bf16 on the native
    kernels where the CPU has it; on a ``--device``, transformers there), behind the engine's
    text API: what writes the wide corpus's self-instructed requests."""
    if args.device != "cpu":
        from specpath_train.device_generate import DeviceGenerator

        return DeviceGenerator(target_dir, device=args.device)
    from specpath_engine.llm import LLM

    return LLM(str(target_dir), dtype=args.dtype, max_num_seqs=args.max_num_seqs, seed=args.seed,
               num_threads=args.threads)


def wide_rows(args: argparse.Namespace, target_dir: Path, tokenizer: Any, log: Any,
              cache: Path | None = None) -> tuple[list[dict], list[dict]]:
    """The wide corpus's (training, held-out) ``--data`` rows (:func:`~specpath_train.prompt_mix.wide_corpus`),
    the self-instructed ones written by the target where its chat template opens a user turn
    (kept in ``cache`` as they are written, where given: a stopped run resumes them)."""
    from specpath_train import prompt_mix

    template, bos = getattr(tokenizer, "chat_template", None), getattr(tokenizer, "bos_token", None)
    able = prompt_mix.can_self_instruct(template, bos_token=bos)
    shares = prompt_mix.CORPUS_SHARES[args.corpus]
    n_held = heldout_count(args)
    if able:
        n_self = sum(prompt_mix.wide_counts(n, self_instructed=True, shares=shares)["self"] for n in (args.prompts, n_held))
        log(f"wide corpus: the target writes {n_self} self-instructed requests ({args.dtype}, batch {args.max_num_seqs})")
    else:
        log("wide corpus: the target has no chat template that opens a user turn, so no self-instructed requests "
            "(the other kinds take their share)")
    t0 = time.time()
    train, held = prompt_mix.wide_corpus(args.prompts, n_held, seed=args.seed, template=template, bos_token=bos,
                                         llm=(lambda: generation_llm(target_dir, args)) if able else None,
                                         cache=cache, shares=shares)
    log(f"wide corpus: {len(train)} training + {len(held)} held-out prompts in {time.time() - t0:.1f}s")
    if not train or not held:
        raise _error(f"--corpus {args.corpus}: drew {len(train)} training and {len(held)} held-out prompts; give more --prompts")
    return train, held


def wide_split(args: argparse.Namespace, run_dir: Path, target_dir: Path, tokenizer: Any, log: Any) -> tuple[list, list]:
    """The wide corpus's (training, held-out) prompts: drawn once into :data:`WIDE_PROMPTS`
    in the run directory, before any response is generated, and read from there ever after, so
    a resumed run never has the target write its requests again (and gets the same data)."""
    from specpath_train.prompts import read_prompts, write_rows

    train_file, held_file = (run_dir / name for name in WIDE_PROMPTS)
    if train_file.is_file():
        log(f"wide corpus: the prompts drawn before, {train_file} and {held_file}")
    else:
        train, held = wide_rows(args, target_dir, tokenizer, log, cache=run_dir / SELF_INSTRUCT_DIR)
        write_rows(held_file, held)
        write_rows(train_file, train)  # last: its presence says both are whole
    return read_prompts(train_file), read_prompts(held_file)


def write_prompts(args: argparse.Namespace) -> int:
    """``--write-prompts FILE``: the corpus's training and held-out prompts (the ones a run of
    these flags would draw) as one ``--data`` file."""
    import tempfile

    from specpath_train.prompts import write_rows

    out = Path(args.write_prompts)
    if not out.parent.is_dir():
        raise _error(f"--write-prompts {out}: no directory {out.parent}")
    corpus = args.corpus or "builtin"
    args.dtype = train_dtype(args.dtype, args.target)
    log = _logger(None)
    with tempfile.TemporaryDirectory() as tmp:  # a GGUF target is converted there
        target_dir, _ = resolve_target(args.target, Path(tmp), log)
        _, tokenizer = load_target_checked(Path(target_dir), args.target)
        if corpus != "builtin":
            train, held = wide_rows(args, Path(target_dir), tokenizer, log)
        else:
            train, held = ([p.as_row() for p in part] for part in builtin_split(args))
    write_rows(out, train + held)
    print(f"{out}: {len(train)} training + {len(held)} held-out prompts of the {corpus} corpus (seed {args.seed}); "
          f"train on them with --data {out} (which holds out its own --heldout share)")
    return 0


# -- the run ------------------------------------------------------------------------------------


def _logger(path: Path | None):
    """A log to stderr and, given a ``path``, to that file."""
    def log(text: str) -> None:
        line = f"[{time.strftime('%H:%M:%S')}] {text}"
        print(line, file=sys.stderr, flush=True)
        if path is not None:
            with path.open("a", encoding="utf-8") as f:
                f.write(line + "\n")

    return log


def split_prompts(prompts: list, share: float, seed: int) -> tuple[list, list]:
    """(training, held-out): a seeded shuffle, then the first ``share`` (at least one) held out."""
    import random

    if len(prompts) < 2:
        raise _error(f"need at least 2 prompts (one to train on, one held out); got {len(prompts)}")
    order = list(range(len(prompts)))
    random.Random(seed).shuffle(order)
    n_held = min(len(prompts) - 1, max(1, round(share * len(prompts))))
    return [prompts[i] for i in order[n_held:]], [prompts[i] for i in order[:n_held]]


def recipe_argv(recipe: Any, args: argparse.Namespace, target_dir: Path, data_dir: Path, work: Path, out: Path,
                config: dict, variant: Any = None) -> list[str]:
    """The recipe's command line: the run's data and budget, the method's flags for this target,
    a variant's on top of them, and ``--from`` as the recipe's start."""
    from specpath_train.methods import with_flags

    steps = args.steps
    warmup = 50 if steps is None else min(50, max(1, steps // 10))
    lr = args.lr if args.lr is not None else variant.lr_from if variant is not None and args.init else recipe.lr
    argv = ["--target", str(target_dir), "--data", str(data_dir), "--out", str(work), "--export", str(out),
            "--seed", str(args.seed), "--threads", str(args.threads), "--resume", "--batch", str(args.batch),
            "--lr", str(lr), "--warmup", str(warmup), "--minutes", str(args.minutes or 0),
            # about ten held-out evaluations a clock budget (each reads every held-out window)
            "--eval-every", str(max(60.0, round((args.minutes or 0) * 6.0, 1)))]
    if args.device != "cpu":
        argv += ["--device", args.device]
    if train_precision(args.precision, args.device) == "bfloat16":
        argv.append("--bf16")
    if steps is not None:
        argv += ["--steps", str(steps)]
    if not args.no_progress:
        argv.append("--progress")
    flags = recipe.flags(config)
    if variant is not None:
        flags = with_flags(flags, variant.flags(config))
    if args.init:
        argv += [recipe.init_flag, str(Path(args.init).resolve())]
        flags = with_flags(flags, recipe.init_flags(json.loads((Path(args.init) / "config.json").read_text())))
    if args.draft_vocab is not None:
        flags = with_flags(flags, ["--draft-vocab", str(args.draft_vocab)] + (["--revocab"] if args.init else []))
    if args.draft_layers is not None:
        flags = with_flags(flags, [recipe.layers_flag, str(args.draft_layers)])
    return argv + flags


def heldout_record(checkpoint_config: dict) -> dict:
    """The recipe's teacher-forced held-out metrics, from where it recorded them."""
    for key in ("specpath_training", "specpath_draft"):
        record = checkpoint_config.get(key) or {}
        if "heldout" in record:
            return record["heldout"]
    return {}


def prompt_budget(args: argparse.Namespace, target_config: dict) -> int:
    """The most tokens a prompt keeps: ``--max-prompt-tokens``, within the target's context with
    the response after it; or a one-line error."""
    context = target_config.get("max_position_embeddings") or 2048
    budget = min(args.max_prompt_tokens, context - max(args.max_new_tokens, args.eval_tokens) - 8)
    if budget < 1:
        raise _error(f"--max-new-tokens {args.max_new_tokens} / --eval-tokens {args.eval_tokens} leave no room for a "
                     f"prompt in the target's context of {context} tokens")
    return budget


def prompt_ids(split: tuple[list, list], tokenizer: Any, budget: int, source: str) -> tuple[list[list[int]], list[list[int]]]:
    """(training, held-out) prompt ids, each cut to ``budget`` tokens (:func:`prompt_budget`)."""
    from specpath_train.prompts import render

    train_ids, held_ids = (render(part, tokenizer, max_tokens=budget, source=source) for part in split)
    if not train_ids or not held_ids:
        raise _error(f"{source}: every prompt of the {'training' if not train_ids else 'held-out'} split is empty "
                     "once tokenised")
    return train_ids, held_ids


def cmd_train(args: argparse.Namespace) -> int:
    """The command (see the module docstring); SIGTERM is handled as Ctrl-C: the stage in
    flight keeps what it finished (chunk files, the training state) and the error says how to go on."""
    import signal

    def terminate(num: int, _frame: Any) -> None:
        raise KeyboardInterrupt("SIGTERM")

    old = signal.signal(signal.SIGTERM, terminate)
    try:
        return _train(args)
    except KeyboardInterrupt as exc:
        raise _error(f"interrupted ({exc or 'SIGINT'}); what was done is kept in {Path(args.out) / RUN}: "
                     "run the same command with --resume to continue") from None
    finally:
        signal.signal(signal.SIGTERM, old)


def _train(args: argparse.Namespace) -> int:
    import importlib

    check_prompt_args(args)
    if args.write_prompts:
        return write_prompts(args)
    if args.method is None or args.out is None:
        raise _error("give METHOD and --out DIR (or --write-prompts FILE to only write the prompts)")
    recipe = check_method(args.method)
    variant = check_variant(args.method, args.variant)
    if not args.data_only:
        check_budget(args)
    if args.past_eos is not None and not 0 <= args.past_eos <= 1:
        raise _error(f"--past-eos is a share of the prompts, from 0 to 1 (got {args.past_eos})")
    check_draft_vocab(recipe, args.draft_vocab)
    if args.device != "cpu" and args.target_quantization:
        raise _error(f"--target-quantization {args.target_quantization}: the quantised target runs on the CPU "
                     "(the engine's kernels); leave --device out")
    if args.device != "cpu" and not recipe.common:
        raise _error(f"--device {args.device}: {args.method}'s recipe trains on the CPU only (its data has no live "
                     "features); leave --device out")
    from specpath_train.prompts import read_prompts

    corpus = None if args.data else args.corpus or "builtin"
    prompts = read_prompts(args.data) if args.data else None  # bad data fails before anything is written
    # (training, held-out) prompts; the wide corpus's are drawn once the run directory is ours
    split = split_prompts(prompts, args.heldout, args.seed) if prompts is not None else \
        builtin_split(args) if corpus == "builtin" else None
    source = str(args.data) if args.data else "the built-in corpus" if corpus == "builtin" else \
        f"the wide corpus ({Path(args.out) / RUN / WIDE_PROMPTS[0]})"
    out = Path(args.out)
    # a GGUF file is converted into the run directory once that is known to be ours; any other
    # target is loaded (and the prompts rendered) now, so a bad one fails before anything is written
    target_dir, _ = (None, None) if _is_gguf(args.target) else resolve_target(args.target, None, None)
    ids = None
    if target_dir is not None:
        target_config, tokenizer = load_target_checked(Path(target_dir), args.target)
        budget = prompt_budget(args, target_config)
        if split is not None:
            ids = prompt_ids(split, tokenizer, budget, source)
    from_id = check_from(recipe, args.init, target_config if target_dir is not None else None)
    if args.init and out.resolve() in (Path(args.init).resolve(), *Path(args.init).resolve().parents):
        raise _error(f"--from {args.init}: inside --out {out}, which this run writes; give the new run another --out")
    if args.more_data and args.data_only:
        raise _error("--more-data with --data-only: the merge feeds training; give --more-data to the run that trains")
    init_config = json.loads((Path(args.init) / "config.json").read_text()) if args.init else None
    check_draft_layers(recipe, args.draft_layers, init_config)
    check_more_data(args.more_data, recipe.run_layers(target_config, init_config) if target_dir is not None else None,
                    target_dir)
    data_id = _data_id(args.data)
    args.dtype = train_dtype(args.dtype, args.target)  # resolved: the run's config records what ran
    config = {"method": args.method, "variant": args.variant, "from": from_id,
              "target": str(Path(args.target).resolve()) if Path(args.target).exists() else args.target,
              "data": data_id, "corpus": corpus, "prompts": None if args.data else args.prompts,
              "heldout": args.heldout, "max_new_tokens": args.max_new_tokens, "temperature": args.temperature,
              "seed": args.seed, "window": args.window, "dtype": args.dtype, "max_prompt_tokens": args.max_prompt_tokens,
              "more_data": [str(Path(d).resolve()) for d in args.more_data], "draft_vocab": args.draft_vocab,
              "draft_layers": args.draft_layers, "target_quantization": args.target_quantization,
              "past_eos": args.past_eos or None}
    prepare_out(out, config, resume=args.resume, overwrite=args.overwrite)
    run_dir = out / RUN
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps(config, indent=2) + "\n")
    log = _logger(run_dir / "train.log")
    if target_dir is None:
        target_dir, _ = resolve_target(args.target, run_dir, log)
        target_config, tokenizer = load_target_checked(Path(target_dir), args.target)
        budget = prompt_budget(args, target_config)
        check_from(recipe, args.init, target_config)  # a GGUF target's shape is known once converted
    if split is None:
        split = wide_split(args, run_dir, Path(target_dir), tokenizer, log)
    train_ids, held_ids = ids if ids is not None else prompt_ids(split, tokenizer, budget, source)
    import torch

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    progress = not args.no_progress
    timings: dict[str, float] = {}

    # 1-2. data and features
    t0 = time.time()
    log(f"train {args.method}{f' --variant {args.variant}' if variant else ''}"
        f"{f' --from {args.init}' if args.init else ''}: target {args.target} ({target_config.get('num_hidden_layers')} layers, vocab "
        f"{target_config.get('vocab_size')}), {len(train_ids)} training + {len(held_ids)} held-out prompts from {source}")
    (run_dir / "heldout_prompts.json").write_text(json.dumps(held_ids))
    from specpath_train import selfdistill

    layers = recipe.run_layers(target_config, init_config)  # a --from drafter's taps where it has its own
    data_dir = run_dir / "data"
    meta = selfdistill.build(target_dir, data_dir, layers, train=train_ids, heldout=held_ids, window=args.window,
                             max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                             dtype=getattr(torch, args.dtype), max_num_seqs=args.max_num_seqs, progress=progress,
                             log=log, generations=args.generations, device=args.device,
                             quantization=args.target_quantization, past_eos=args.past_eos or 0.0)
    timings["data_s"] = round(time.time() - t0, 2)
    if args.data_only:
        print(f"{data_dir}: the data of {meta.get('sequences')} responses, {meta['heldout']} held-out windows; "
              f"train with the same flags and --generations, without --data-only")
        return 0

    if args.more_data:
        data_dir = with_more_data(data_dir, args.more_data, layers, run_dir / "data-more", log)

    # 3. train
    t0 = time.time()
    argv = recipe_argv(recipe, args, Path(target_dir), data_dir, run_dir / "work", out, target_config, variant)
    log(f"train: specpath_train.recipes.{recipe.module} {' '.join(argv)}")
    module = importlib.import_module(f"specpath_train.recipes.{recipe.module}")
    default_device = torch.get_default_device()
    try:
        module.main(argv)
    finally:  # a --device recipe sets torch's default device: the process gets its own back
        torch.set_default_device(default_device)
    timings["train_s"] = round(time.time() - t0, 2)
    if args.target_quantization:
        declare_target_quantization(out, args.target_quantization)
    calibration = calibrate_trained(out, Path(target_dir), data_dir, meta, log) if args.calibrate else None

    # 4. evaluate
    t0 = time.time()
    ckpt_config = json.loads((out / "config.json").read_text())
    from specpath_train.evaluate import speculative_metrics
    from specpath_train.methods import NUM_SPECULATIVE_TOKENS

    served = beside = None
    if args.eval_prompts:
        over = served_over(args)
        served = speculative_metrics(target_dir, out, held_ids[:args.eval_prompts],
                                     num_speculative_tokens=NUM_SPECULATIVE_TOKENS, max_tokens=args.eval_tokens, **over)
        beside = measure_companion(args.model_free, target_dir, out, held_ids[:args.eval_prompts], served,
                                   max_tokens=args.eval_tokens, **over)
    timings["eval_s"] = round(time.time() - t0, 2)
    state = torch.load(run_dir / "work" / "resume.pt", weights_only=False)
    metrics = {"method": args.method, "variant": args.variant, "from": config["from"], "target": config["target"], "steps": state["step"],
               "train_seconds": round(state["elapsed"], 2), "seed": args.seed, "threads": args.threads,
               "windows": {"heldout": meta["heldout"], "window": meta["window"]},
               "heldout": served, "heldout_with_model_free": beside,
               "model_free": declared_companion(out),
               "heldout_teacher_forced": heldout_record(ckpt_config), "temperature_calibration": calibration,
               "timings": timings}
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    name = f"{args.method} ({variant.summary})" if variant is not None else args.method
    if served is None:
        print(f"{out}: {name} drafter, {state['step']} steps; not served (--eval-prompts 0): measure it with "
              f"specpath bench or benchmarks/smollm2_drafters.py")
        return 0
    accept = " ".join(f"{a:.2f}" for a in served["acceptance_by_position"])
    print(f"{out}: {name} drafter, {state['step']} steps; held-out tau {served['tau']:.2f}, acceptance by "
          f"position {accept} (K={NUM_SPECULATIVE_TOKENS}, {served['prompts']} prompts); serve it with "
          f"--speculative-config '{{\"model\": \"{out}\", \"num_speculative_tokens\": {NUM_SPECULATIVE_TOKENS}}}'")
    if beside is not None:
        companion = metrics["model_free"]
        verdict = (f"the checkpoint names it (config.json specpath_model_free; \"model_free_drafter\": {{}} turns it off)"
                   if companion else f"under the {round(COMPANION_GAIN * 100)}% bar: the drafter drafts alone by default")
        print(f"{out}: with {beside['model_free']} beside it, held-out tau {beside['tau']:.2f}: {verdict}")
    return 0


def calibrate_trained(out: Path, target_dir: Path, data_dir: Path, meta: dict, log: Any) -> dict | None:
    """Fit and write the new drafter's temperature scale (:func:`specpath_train.calibrate.calibrate_checkpoint`)
    on the run's held-out windows; None, said in the log, where its kind has no fit or there are none."""
    from specpath_train import calibrate

    kind = json.loads((out / "config.json").read_text()).get("model_type")
    why = (f"a {kind} drafter has no fit" if kind not in calibrate.CALIBRATED_KINDS else
           "no held-out windows" if not meta.get("heldout") else
           "features computed live: no cached held-out windows (python -m specpath_train.calibrate fits it on a "
           "data directory)" if not (data_dir / "features.safetensors").is_file() else None)
    if why is not None:
        log(f"calibrate: skipped ({why}); sampled requests draft at their own temperature")
        return None
    vocab = json.loads((target_dir / "config.json").read_text()).get("vocab_size") or 1
    windows = max(1, min(CALIBRATION_WINDOWS, CALIBRATION_POSITIONS // (int(meta["window"]) * int(vocab))))
    t0 = time.time()
    try:
        fit = calibrate.calibrate_checkpoint(out, target_dir, data_dir, windows=windows, write=True)
    except (ValueError, RuntimeError, KeyError) as e:  # a drafter layout the fit does not read
        log(f"calibrate: skipped ({e}); sampled requests draft at their own temperature")
        return None
    fit.pop("table")
    t = "0.8" if "0.8" in fit["agreement"] else next(iter(fit["agreement"]))
    log(f"calibrate: specpath_temperature_scale {fit['scale']} on {fit['positions']} held-out first drafts "
        f"(race agreement at T={t}: {fit['agreement_at_1'][t]:.3f} at scale 1, {fit['agreement'][t]:.3f} at "
        f"{fit['scale']}) in {time.time() - t0:.0f} s")
    return fit


def served_over(args: argparse.Namespace) -> dict:
    """How the held-out serving runs the target: as trained for (``--target-quantization``: the
    quantised target, on the bf16 activations its kernels take where the run's dtype is bf16),
    else in float32 (the drafter's own τ, free of bf16 rounding)."""
    if not args.target_quantization:
        return {}
    return {"quantization": args.target_quantization, "dtype": args.dtype}


def measure_companion(method: str, target_dir: Any, out: Path, prompts: list, served: dict, *,
                      max_tokens: int, **over: Any) -> dict | None:
    """The held-out τ with the model-free ``method`` drafting beside the new drafter (None for
    'none', or where that method cannot run beside it: said on stderr); where it beats the
    drafter alone by :data:`COMPANION_GAIN`, ``out/config.json`` names it (``specpath_model_free``,
    what the configuration layer then drafts beside it by default), else names none."""
    from specpath.config.resolution import DECLARED_MODEL_FREE
    from specpath.errors import SpeculativeConfigError
    from specpath_train.evaluate import speculative_metrics
    from specpath_train.methods import NUM_SPECULATIVE_TOKENS

    path = out / "config.json"
    config = json.loads(path.read_text())
    config.pop(DECLARED_MODEL_FREE, None)  # measured alone and beside it now: only this run's verdict counts
    path.write_text(json.dumps(config, indent=2) + "\n")
    if method == "none":
        return None
    try:
        beside = speculative_metrics(target_dir, out, prompts, num_speculative_tokens=NUM_SPECULATIVE_TOKENS,
                                     max_tokens=max_tokens, model_free=method, **over)
    except SpeculativeConfigError as err:
        print(f"specpath train: --model-free {method}: {err}; the drafter drafts alone by default", file=sys.stderr)
        return None
    if beside["tau"] >= served["tau"] * (1 + COMPANION_GAIN):
        config[DECLARED_MODEL_FREE] = method
        path.write_text(json.dumps(config, indent=2) + "\n")
    return beside


def declare_target_quantization(out: Path, quantization: str) -> None:
    """Name in ``out/config.json`` the quantised target the drafter was trained for (what
    ``specpath explain`` compares with the target it serves)."""
    from specpath.config.resolution import DECLARED_TARGET_QUANTIZATION

    path = out / "config.json"
    config = json.loads(path.read_text())
    config[DECLARED_TARGET_QUANTIZATION] = quantization
    path.write_text(json.dumps(config, indent=2) + "\n")


def declared_companion(out: Path) -> str | None:
    """The model-free method ``out/config.json`` names as its companion, or None."""
    from specpath.config.resolution import DECLARED_MODEL_FREE

    return json.loads((out / "config.json").read_text()).get(DECLARED_MODEL_FREE)


def _is_gguf(target: str) -> bool:
    return Path(target).is_file() and Path(target).suffix.lower() == ".gguf"


def _data_id(data: str | None) -> str | None:
    if data is None:
        return None
    from specpath_train.trainer import file_digest

    return f"{Path(data).name}:{file_digest(data)}"
