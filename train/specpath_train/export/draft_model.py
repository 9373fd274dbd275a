"""A draft model as a standalone Hugging Face model (what vLLM's and SGLang's draft-model
speculation load): the same config and tensors, with an embedding the draft borrowed from its
target (``shares_target_embeddings``) materialised from the target's checkpoint in the target's
dtype (the values specpath lent it), and PARD's mask token also under vLLM's key ``pard_token``.

specpath-only keys stay (``specpath_training`` etc.: reading the export back, specpath drafts
over the same reduced vocabulary); the engines ignore them. speculators has no draft-model
algorithm: the plain HF directory is what vLLM serves.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from specpath_train.export import ExportError

SHARES = "shares_target_embeddings"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model")


def _target_dir(target: str | None, src: Path) -> Path:
    if not target:
        raise ExportError(f"{src} borrows its target's embedding ({SHARES}); pass --target MODEL to materialise it")
    from specpath_engine.modeling.named_models import NAMED_MODELS, hf_checkpoint_dir

    if target in NAMED_MODELS and not Path(target).exists():
        return hf_checkpoint_dir(target)
    path = Path(target)
    if not (path / "config.json").is_file():
        raise ExportError(f"--target {target}: not a Hugging Face checkpoint directory or a named model "
                          f"(known: {', '.join(NAMED_MODELS)})")
    return path


def write_draft_model(src: Path, config: dict[str, Any], fmt: str, out: Path, *, target: str | None) -> list[Path]:
    from specpath_engine.modeling.checkpoint import load_state_dict, read_json, read_safetensors, save_checkpoint

    if fmt == "speculators":
        raise ExportError("speculators has no draft-model algorithm; use --format vllm (a plain HF model "
                          "directory, served with speculative_config method draft_model)")
    if (src / "tokenizer.json").is_file():
        raise ExportError(f"cannot export {src} to {fmt}: the draft has its own tokenizer (vocabulary "
                          f"{config.get('vocab_size')}), and vLLM's and SGLang's draft models share the target's")
    tensors = read_safetensors(src / "model.safetensors")
    meta = {k: v for k, v in config.items() if k != SHARES}
    target_dir = None
    if config.get(SHARES):
        target_dir = _target_dir(target, src)
        target_config = read_json(target_dir / "config.json", "config.json")
        if target_config.get("vocab_size") != config.get("vocab_size"):
            raise ExportError(f"--target {target}: vocabulary {target_config.get('vocab_size')}, the draft's "
                              f"{config.get('vocab_size')}")
        embed = load_state_dict(target_dir).get("model.embed_tokens.weight")
        if embed is None:
            raise ExportError(f"--target {target}: no model.embed_tokens.weight in its checkpoint")
        tensors["model.embed_tokens.weight"] = embed  # the target's dtype: exactly what specpath lent
        meta["tie_word_embeddings"] = True
    elif target is not None:
        target_dir = _target_dir(target, src)
    if "pard_token_id" in config:
        meta.setdefault("pard_token", config["pard_token_id"])  # the key vLLM's parallel drafting reads
    meta["specpath_export"] = {"source": src.name, "format": fmt, "method": "draft_model"}
    save_checkpoint(out, config=meta, state_dict=tensors)
    written = [out / "config.json", out / "model.safetensors"]
    for name in TOKENIZER_FILES:  # the draft's own tokenizer, else its target's
        for where in (src, target_dir):
            if where is not None and (where / name).is_file():
                shutil.copyfile(where / name, out / name)
                written.append(out / name)
                break
    return written
