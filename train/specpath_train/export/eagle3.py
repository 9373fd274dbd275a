"""An EAGLE-3 head in vLLM's, SpecForge's (SGLang) or the speculators layout.

The tensors are renamed by :mod:`specpath_drafting.published_heads` (the table the loader reads
them back with) and keep their dtype. The configs say what specpath's head is in each engine's
words: one Llama decoder layer (``num_hidden_layers`` 1) attending over 2d, the residual taken
before ``hidden_norm`` (``norm_before_residual: false``), the taps in the "entering layer i"
convention both engines use (``eagle_aux_hidden_state_layer_ids``), a reduced draft vocabulary
mapped by ``d2t``.

- **vllm** / **sglang**: ``LlamaForCausalLMEagle3`` with ``eagle_config`` (vLLM's
  ``Eagle3LlamaForCausalLM`` and SGLang's ``LlamaForCausalLMEagle3`` both load it); tensors
  under ``midlayer.``.
- **speculators**: ``Eagle3Speculator`` with ``speculators_config`` (algorithm, the proposal's
  ``speculative_tokens``, the verifier) and ``transformer_layer_config``; tensors under
  ``layers.0.``. ``LLM(model=<export>)`` in vLLM serves its verifier with this head.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from specpath_train.export import ExportError

PARALLEL_REFUSAL = (
    "a P-EAGLE head (parallel_drafting): vLLM's and SGLang's parallel drafting embed masked slots "
    "with a token of the target's vocabulary (ptd_token_id / pard_token / mask_token_id), and this "
    "head's learned mask_embedding has no token"
)


def _layer_config(head: Any) -> dict[str, Any]:
    """The decoder layer's shape as a Llama ``config.json`` writes it."""
    shape = head.shape_dict()
    return {**shape, "model_type": "llama", "num_hidden_layers": 1, "attention_bias": False, "mlp_bias": False,
            "tie_word_embeddings": False}


def _verifier(target: str | None) -> dict[str, Any]:
    if not target:
        raise ExportError("--format speculators needs --target (the verifier the checkpoint names)")
    from specpath_engine.modeling.named_models import NAMED_MODELS, hf_checkpoint_dir

    path = str(hf_checkpoint_dir(target)) if target in NAMED_MODELS and not Path(target).exists() else target
    archs = ["LlamaForCausalLM"]
    config = Path(path) / "config.json"
    if config.is_file():
        try:
            archs = list(json.loads(config.read_text(encoding="utf-8")).get("architectures") or archs)
        except ValueError:
            raise ExportError(f"{config}: the target's config.json is not valid JSON") from None
    return {"name_or_path": path, "architectures": archs}


def export_config(head: Any, fmt: str, *, dtype: str, target: str | None, num_speculative_tokens: int,
                  source: str) -> dict[str, Any]:
    """The exported ``config.json`` of head config ``head`` (a ``HeadConfig``)."""
    from specpath_drafting.config import default_aux_layer_ids

    if head.aux_layer_ids is None and head.target_num_hidden_layers is None:
        raise ExportError(f"{source}: the head names neither its taps (eagle_aux_hidden_state_layer_ids) nor its "
                          "target's depth (target_num_hidden_layers)")
    ids = list(head.aux_layer_ids or default_aux_layer_ids(head.target_num_hidden_layers))
    draft_vocab = head.draft_vocab_size or head.vocab_size
    provenance = {"source": source, "format": fmt, "method": "eagle3"}
    if fmt == "speculators":
        return {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "speculators_version": "0.1.0",
            "draft_vocab_size": draft_vocab,
            "target_hidden_size": head.target_hidden_size,
            "target_num_hidden_layers": head.target_num_hidden_layers,
            "norm_before_residual": False,
            "eagle_aux_hidden_state_layer_ids": ids,
            "speculators_config": {
                "algorithm": "eagle3",
                "default_proposal_method": "greedy",
                "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": num_speculative_tokens,
                                      "verifier_accept_k": 1, "accept_tolerance": 0.0}],
                "verifier": _verifier(target),
            },
            "transformer_layer_config": {"architectures": ["LlamaForCausalLM"], **_layer_config(head)},
            "torch_dtype": dtype,
            "specpath_export": provenance,
        }
    return {
        "architectures": ["LlamaForCausalLMEagle3"],
        **_layer_config(head),
        "draft_vocab_size": draft_vocab,
        "target_hidden_size": head.target_hidden_size,
        "target_num_hidden_layers": head.target_num_hidden_layers,
        "num_aux_hidden_states": len(ids),
        "norm_before_residual": False,
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": ids, "use_aux_hidden_state": True},
        "torch_dtype": dtype,
        "specpath_export": provenance,
    }


def write_eagle3(src: Path, config: dict[str, Any], fmt: str, out: Path, *, target: str | None,
                 num_speculative_tokens: int) -> list[Path]:
    from specpath_drafting.heads import HeadConfig
    from specpath_drafting.published_heads import published_name
    from specpath_engine.modeling.checkpoint import read_safetensors, save_checkpoint

    try:
        head = HeadConfig.from_dict(config)
    except (KeyError, TypeError) as exc:
        raise ExportError(f"{src}/config.json: not an EAGLE-3 head config (missing {exc})") from None
    if head.parallel_drafting:
        raise ExportError(f"cannot export {src} to {fmt}: {PARALLEL_REFUSAL}")
    tensors = read_safetensors(src / "model.safetensors", {"d2t", "t2d"})
    prefix = "layers.0." if fmt == "speculators" else "midlayer."
    try:
        state = {published_name(k, prefix): v for k, v in tensors.items()}
    except ValueError as exc:
        raise ExportError(f"{src}/model.safetensors: {exc}") from None
    dtype = str(tensors["fc.weight"].dtype).removeprefix("torch.")
    meta = export_config(head, fmt, dtype=dtype, target=target, num_speculative_tokens=num_speculative_tokens,
                         source=src.name)
    if "specpath_training" in config:
        meta["specpath_training"] = config["specpath_training"]
    save_checkpoint(out, config=meta, state_dict=state)
    return [out / "config.json", out / "model.safetensors"]
