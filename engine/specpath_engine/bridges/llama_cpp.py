"""specpath methods inside llama-cpp-python, as a ``LlamaDraftModel``.

    from llama_cpp import Llama
    from specpath_engine.bridges.llama_cpp import DraftModel
    llm = Llama(model_path="model.gguf",
                draft_model=DraftModel({"method": "ngram", "num_speculative_tokens": 4}, target="model.gguf"))

``Llama`` calls the draft model with its whole token history before each evaluation, appends
the drafts to that evaluation, keeps the prefix its own sampler agrees with and removes the
rest from its KV cache. The bridge runs any installed specpath method that reads no target
hidden states (n-gram family, suffix, plugins, standalone drafts and PARD, the draft model
running in specpath on the CPU).

``target`` (the GGUF file, or the model's Hugging Face checkpoint directory) is what the
config is resolved against: its vocabulary and context length. Without it the config is
resolved against a minimal description, enough for model-free methods.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from typing import Any

import numpy as np
from llama_cpp.llama_speculative import LlamaDraftModel

from specpath_engine.bridges.common import HistoryRows, TokenDrafter, config_data, resolve, token_context, torch_dtype

DEFAULT_CONTEXT = 1 << 16
"""Context length assumed when no target is named (drafters size their buffers from it)."""


def gguf_hf_config(path: str) -> dict[str, Any]:
    """The parts of a Hugging Face ``config.json`` that specpath reads, from a GGUF file's header
    (llama.cpp loads only the vocabulary for this)."""
    from llama_cpp import Llama

    llm = Llama(model_path=path, vocab_only=True, verbose=False)
    meta = dict(llm.metadata)
    arch = meta.get("general.architecture", "llama")

    def number(key: str) -> int | None:
        value = meta.get(f"{arch}.{key}")
        return int(value) if value is not None and str(value).isdigit() else None

    config: dict[str, Any] = {
        "architectures": ["LlamaForCausalLM"] if arch == "llama" else [arch],
        "model_type": arch,
        "vocab_size": int(llm.n_vocab()),
        "max_position_embeddings": number("context_length") or DEFAULT_CONTEXT,
    }
    for hf, key in (
        ("hidden_size", "embedding_length"),
        ("num_hidden_layers", "block_count"),
        ("num_attention_heads", "attention.head_count"),
        ("num_key_value_heads", "attention.head_count_kv"),
        ("intermediate_size", "feed_forward_length"),
    ):
        value = number(key)
        if value is not None:
            config[hf] = value
    return config


def _target_dir(target: str | os.PathLike[str] | Mapping[str, Any] | None) -> str:
    """A directory with the target's ``config.json`` for the core to resolve against."""
    if target is not None and not isinstance(target, Mapping) and os.path.isdir(target):
        return str(target)
    if target is None:
        config: Mapping[str, Any] = {"model_type": "llama", "max_position_embeddings": DEFAULT_CONTEXT}
    elif isinstance(target, Mapping):
        config = target
    elif str(target).endswith(".gguf") and os.path.isfile(target):
        config = gguf_hf_config(str(target))
    else:
        from specpath.errors import SpeculativeConfigError

        raise SpeculativeConfigError("must be a .gguf file, a checkpoint directory or a config mapping", field="target", value=target)
    folder = tempfile.mkdtemp(prefix="specpath-llama-target-")
    with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as fh:
        json.dump(dict(config), fh)
    return folder


class DraftModel(LlamaDraftModel):
    """Drafts with a specpath method for ``Llama(draft_model=...)``.

    Args:
        speculative_config: dict, JSON text or ``@file.json|yaml``; ``num_speculative_tokens``
            is the most drafts per evaluation.
        target: the GGUF file or HF checkpoint directory of the model ``Llama`` serves.
        max_model_len: the context ``Llama`` runs with (``n_ctx``); default: the target's.
    """

    def __init__(
        self,
        speculative_config: Any,
        *,
        target: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        max_model_len: int | None = None,
    ) -> None:
        spec = resolve(config_data(speculative_config), _target_dir(target), engine="llama.cpp", dtype="float32",
                       max_model_len=max_model_len)
        self.spec = spec
        self.k = int(spec.num_speculative_tokens)
        self.max_model_len = int(spec.target_model_config.max_model_len)
        context = token_context(spec, device="cpu", dtype=torch_dtype("float32"), max_model_len=self.max_model_len, max_num_seqs=1)
        self.drafter = TokenDrafter(spec, context)
        self.rows = HistoryRows(self.drafter, 1, prefix="llama")
        self._empty = np.zeros(0, dtype=np.intc)

    def __call__(self, input_ids: np.ndarray, /, **kwargs: Any) -> np.ndarray:
        """Drafts following ``input_ids`` (the whole history; the last token is not evaluated yet)."""
        n = int(input_ids.shape[0])
        budget = min(self.k, self.max_model_len - n)
        if n == 0 or budget <= 0:
            return self._empty
        req_id, history = self.rows.request(0, input_ids)
        drafts = self.drafter.propose([(req_id, history, budget)])[0]
        return np.asarray(drafts, dtype=np.intc) if drafts else self._empty
