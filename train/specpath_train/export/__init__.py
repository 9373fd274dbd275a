"""``specpath export``: a specpath drafter written in a serving engine's own layout.

:func:`export_checkpoint` reads what the checkpoint says it is (``speculator_config_class`` /
``model_type`` of its ``config.json``, never its path) and hands it to that kind's writer:

- EAGLE-3 heads: :mod:`specpath_train.export.eagle3` (vLLM, SpecForge/SGLang, speculators);
- draft models: :mod:`specpath_train.export.draft_model` (a standalone HF model);
- every other kind: a one-line refusal naming what the engine lacks (:data:`REFUSALS`).

Each writer returns the files it wrote; the export loads back in specpath with the same drafts
(tests/export/test_export_roundtrip.py).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

FORMATS = ("vllm", "sglang", "speculators")
"""Where a drafter can go: vLLM's native layout, SpecForge's (SGLang), the speculators format."""


class ExportError(ValueError):
    """A drafter that cannot be written in the asked format, or bad input; one line."""


REFUSALS: Mapping[str, str] = {
    "eagle": (
        "vLLM's and SGLang's EAGLE-1 (llama_eagle) has no fc bias, no input norm on its layer and "
        "no final norm of its own, and specpath's EAGLE-1 head has all three; speculators has no "
        "EAGLE-1 algorithm; export an EAGLE-3 head instead"
    ),
    "dflash": (
        "vLLM's qwen3_dflash (and SpecForge's DFlash) are Qwen3 layers with per-head q_norm/k_norm, "
        "and specpath's DFlash drafter has Llama layers without them"
    ),
    "dspark": (
        "vLLM's qwen3_dspark (and SpecForge's DSpark) are Qwen3 layers with per-head q_norm/k_norm, "
        "and specpath's DSpark drafter has Llama layers without them"
    ),
    "mtp": (
        "no engine has a Llama MTP module type: vLLM 0.32 and SGLang load MTP modules only inside "
        "their own targets (deepseek_mtp, mimo_mtp, glm4_moe_mtp, qwen3_next_mtp, ...), and "
        "speculators has no MTP algorithm"
    ),
}
"""Why a kind has no engine layout in any format (the end of its one-line refusal)."""


def read_config(path: Path) -> dict[str, Any]:
    """``path/config.json``, one line when it is missing or not JSON."""
    file = path / "config.json"
    if not path.is_dir():
        raise ExportError(f"{path}: not a checkpoint directory")
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except OSError:
        raise ExportError(f"{path}: no config.json (not a specpath checkpoint directory)") from None
    except ValueError as exc:
        raise ExportError(f"{file}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise ExportError(f"{file}: not a JSON object")
    if not (path / "model.safetensors").is_file():
        raise ExportError(f"{path}: no model.safetensors")
    return config


def checkpoint_kind(config: Mapping[str, Any]) -> str:
    """What a specpath checkpoint's config says it is: eagle, eagle3, mtp, dflash, dspark,
    draft_model; one line for anything else (a published layout included)."""
    from specpath_drafting.published_heads import is_published_eagle3

    if "speculators_config" in config or is_published_eagle3(config):
        raise ExportError("this head is already in a published layout (speculators / vLLM / SpecForge); serve it as it is")
    declared = config.get("speculator_config_class") or config.get("model_type")
    if declared in REFUSALS or declared == "eagle3":
        return str(declared)
    archs = [str(a) for a in config.get("architectures") or ()]
    if any(a.endswith("ForCausalLM") for a in archs) and config.get("model_type") in DRAFT_MODEL_TYPES:
        return "draft_model"
    raise ExportError(f"not a specpath drafter checkpoint (architectures {archs}, model_type "
                      f"{config.get('model_type')!r})")


DRAFT_MODEL_TYPES = ("llama", "qwen3")
"""Draft models specpath's engine runs (and so writes back out)."""


def export_checkpoint(src: str | Path, fmt: str, out: str | Path, *, target: str | None = None,
                      num_speculative_tokens: int = 4, overwrite: bool = False) -> list[Path]:
    """Write the drafter at ``src`` in ``fmt`` (:data:`FORMATS`) to ``out``; ``target`` is the
    model the drafter serves (needed to materialise a shared embedding and as speculators'
    verifier). Returns the files written. Nothing is overwritten without ``overwrite``."""
    src, out = Path(src), Path(out)
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r}: unknown (allowed: {', '.join(FORMATS)})")
    if type(num_speculative_tokens) is not int or num_speculative_tokens < 1:
        raise ExportError(f"--num-speculative-tokens {num_speculative_tokens!r}: must be a positive integer")
    config = read_config(src)
    kind = checkpoint_kind(config)
    if kind in REFUSALS:
        raise ExportError(f"cannot export {src.name} (a {kind!r} checkpoint) to {fmt}: {REFUSALS[kind]}")
    if out.resolve() == src.resolve():
        raise ExportError(f"{out}: the output is the checkpoint itself")
    if out.exists() and (not out.is_dir() or any(out.iterdir())) and not overwrite:
        raise ExportError(f"{out} exists and is not empty; pass --overwrite to replace it")
    # written beside OUT and moved in at the end: a refused or failed export leaves OUT as it was
    tmp = out.parent / f".{out.name}.export-tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        if kind == "eagle3":
            from specpath_train.export.eagle3 import write_eagle3

            written = write_eagle3(src, config, fmt, tmp, target=target, num_speculative_tokens=num_speculative_tokens)
        else:
            from specpath_train.export.draft_model import write_draft_model

            written = write_draft_model(src, config, fmt, tmp, target=target)
        if out.is_dir():
            shutil.rmtree(out)
        elif out.exists():
            out.unlink()
        tmp.rename(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [out / p.name for p in written]
