"""specpath methods inside Hugging Face ``generate()``.

    from specpath_engine.bridges.hf import generate as specpath_generate
    out = model.generate(input_ids, max_new_tokens=64, do_sample=False,
                         custom_generate=specpath_generate,
                         speculative_config={"method": "ngram", "num_speculative_tokens": 4})

transformers prepares the inputs, cache, logits processors and stopping criteria as usual and
hands them to :func:`generate`, which runs a chain-speculation loop (batch 1, like HF's own
assisted decoding): the speculator drafts from the token history (and, for EAGLE / EAGLE-3 /
MTP / DFlash / DSpark, from the target hidden states transformers computes, caught by forward
hooks on the decoder layers), one target forward verifies the drafts, ``specpath_engine.sample``
accepts them (argmax for greedy, exact rejection sampling otherwise) on the logits after HF's
processors, and the cache is cropped back to the accepted prefix.

The resolved speculator is kept per model and config, so repeated calls do not rebuild it.
"""

from __future__ import annotations

import itertools
import json
import os
import tempfile
import weakref
from collections.abc import Sequence
from typing import Any

import torch

from specpath_engine.bridges.common import config_data, reference_model_loader, resolve
from specpath.errors import SpeculativeConfigError

_SESSIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
"""model -> {(config json, max_len): _Bridge}: speculators outlive one generate() call."""
_REQUEST_IDS = itertools.count()


class _Bridge:
    """A resolved config and its speculator for one model and one context length."""

    def __init__(self, model: Any, data: dict, max_len: int) -> None:
        from specpath.factory import create_speculator
        from specpath.speculator import SpeculatorContext
        from specpath_engine.draft_overrides import resolve as draft_overrides

        dtype = str(model.dtype).removeprefix("torch.")
        self.spec = resolve(
            data, _checkpoint_dir(model), engine="transformers", hidden_states=True, dtype=dtype, max_model_len=None
        )
        self.k = int(self.spec.num_speculative_tokens)
        config = model.config
        in_embed, out_embed = model.get_input_embeddings(), model.get_output_embeddings()
        # Lent as plain functions, not modules: a drafter must not adopt (or save) the target's weights.
        context = SpeculatorContext(
            device=str(model.device),
            dtype=model.dtype,
            vocab_size=int(config.vocab_size),
            max_model_len=int(max_len),
            max_num_seqs=1,
            target_config=config.to_dict(),
            embed_tokens=lambda ids: in_embed(ids),
            lm_head=(lambda h: out_embed(h).float()) if out_embed is not None else None,
            load_model=reference_model_loader(model.dtype, model.device),
            **draft_overrides(self.spec).context_fields(),
        )
        self.speculator = create_speculator(self.spec, context)
        self.layers: tuple[int, ...] = ()
        if self.spec.speculator_config.uses_target_hidden_states:
            self.layers = tuple(int(i) for i in self.speculator.hidden_state_layers)
            if not self.layers:
                raise SpeculativeConfigError(
                    f"{type(self.speculator).__name__} reads target hidden states but names no layers",
                    field="speculative_config.method",
                )


def _checkpoint_dir(model: Any) -> str:
    """The directory holding the target's ``config.json`` (the core resolves against files);
    a model built in memory gets its config written to a temporary directory."""
    path = getattr(model, "name_or_path", "") or ""
    if path and os.path.isfile(os.path.join(path, "config.json")):
        return path
    folder = tempfile.mkdtemp(prefix="specpath-hf-target-")
    model.config.to_json_file(os.path.join(folder, "config.json"))
    return folder


def _bridge(model: Any, speculative_config: Any, max_len: int) -> _Bridge:
    data = config_data(speculative_config)
    key = (json.dumps(data, sort_keys=True, default=str), max_len)
    per_model = _SESSIONS.setdefault(model, {})
    bridge = per_model.get(key)
    if bridge is None:
        bridge = per_model[key] = _Bridge(model, data, max_len)
    return bridge


class _HiddenStates:
    """Forward hooks that keep the outputs of the decoder layers a drafter reads (before the
    final norm, as the specpath contract defines them)."""

    def __init__(self, model: Any, layers: Sequence[int]) -> None:
        decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.model
        blocks = getattr(decoder, "layers", None)
        if blocks is None:
            raise SpeculativeConfigError(
                f"{type(model).__name__} exposes no decoder .layers to read hidden states from", field="speculative_config.method"
            )
        self.outputs: list[torch.Tensor | None] = [None] * len(layers)
        self.handles = [blocks[i].register_forward_hook(self._keeper(j)) for j, i in enumerate(layers)]

    def _keeper(self, j: int):
        def hook(_module: Any, _inputs: Any, output: Any) -> None:
            self.outputs[j] = output[0] if isinstance(output, tuple) else output

        return hook

    def rows(self, count: int) -> torch.Tensor:
        """``[count, layers, hidden]`` of the first ``count`` positions of the last forward."""
        return torch.stack([h[0, :count] for h in self.outputs], dim=1)

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _check_supported(input_ids: torch.Tensor, generation_config: Any, model_kwargs: dict, synced_gpus: bool) -> None:
    if input_ids.shape[0] != 1:
        raise ValueError(f"specpath_engine.bridges.hf.generate runs batch 1 (like HF assisted decoding), got batch {input_ids.shape[0]}")
    if synced_gpus:
        raise ValueError("specpath_engine.bridges.hf.generate does not support synced_gpus")
    mask = model_kwargs.get("attention_mask")
    if mask is not None and not bool((mask == 1).all()):
        raise ValueError("specpath_engine.bridges.hf.generate needs an unpadded prompt (attention_mask all ones)")
    if getattr(generation_config, "num_beams", 1) != 1 or getattr(generation_config, "num_return_sequences", 1) != 1:
        raise ValueError("specpath_engine.bridges.hf.generate decodes one sequence: num_beams and num_return_sequences must be 1")
    if generation_config.return_dict_in_generate and (
        generation_config.output_scores or generation_config.output_logits
        or generation_config.output_attentions or generation_config.output_hidden_states
    ):
        raise ValueError("specpath_engine.bridges.hf.generate returns sequences only (no scores, logits, attentions or hidden states)")


def generate(
    model: Any,
    input_ids: torch.LongTensor,
    logits_processor: Any,
    stopping_criteria: Any,
    generation_config: Any,
    synced_gpus: bool = False,
    streamer: Any = None,
    speculative_config: Any = None,
    **model_kwargs: Any,
) -> Any:
    """The ``custom_generate`` decoding loop; ``speculative_config`` is a dict, JSON or ``@file``
    (as for the specpath engine). Greedy output equals ``generate()``'s greedy output; sampled
    output follows the same distribution (exact rejection sampling).

    Kept as one function: transformers calls it whole (``custom_generate``), and its stages
    (arguments, prefill, the decode loop feeding the streamer) share the loop's state."""
    from specpath_engine.sample import rejection_sample
    from specpath.speculator import DraftBatch, DraftRequest

    if speculative_config is None:
        raise SpeculativeConfigError("is required with custom_generate=specpath_engine.bridges.hf.generate", field="speculative_config")
    if streamer is None:
        streamer = _callers_streamer()
    _check_supported(input_ids, generation_config, model_kwargs, synced_gpus)
    max_length = int(generation_config.max_length)
    bridge = _bridge(model, speculative_config, max_length)
    speculator, k_max = bridge.speculator, bridge.k
    sample = bool(generation_config.do_sample)
    device = input_ids.device
    generator = None
    if sample:  # drafts and verification draw from a generator seeded by torch's global RNG
        generator = torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**62, (1,)).item()))
    temperature = torch.ones(1, device=device)  # the processors already applied the request's temperature
    draft_temperature = float(generation_config.temperature or 1.0) if sample else 0.0
    cache = model_kwargs.get("cache")
    if cache is None:
        from transformers import DynamicCache

        cache = DynamicCache(config=model.config)
    hidden = _HiddenStates(model, bridge.layers) if bridge.layers else None
    req_id = f"hf-{next(_REQUEST_IDS)}"
    try:
        logits = model(input_ids=input_ids, cache=cache, use_cache=True, logits_to_keep=1).logits
        num_new = input_ids.shape[1]
        features = hidden.rows(num_new) if hidden else None
        scores = logits_processor(input_ids, logits[:, -1, :].to(dtype=torch.float32))
        if sample:
            token = torch.multinomial(torch.softmax(scores, dim=-1), 1, generator=generator)[0]
        else:
            token = scores.argmax(dim=-1)
        ids = input_ids
        tokens = ids[0].tolist()
        done, ids = _append(ids, [int(token)], scores, stopping_criteria, streamer)
        tokens.append(int(token))
        while not done:
            cur = len(tokens)
            budget = max(0, min(k_max, max_length - cur - 1))
            drafts: list[int] = []
            draft_probs = None
            if budget > 0 or features is not None:
                proposal = speculator.propose(
                    DraftBatch(
                        requests=(
                            DraftRequest(
                                req_id=req_id,
                                token_ids=tokens,
                                num_new_positions=num_new,
                                max_draft_tokens=budget,
                                temperature=draft_temperature,
                                generator=generator,
                            ),
                        ),
                        hidden_states=features,
                    )
                )
                count = min(int(proposal.num_draft_tokens[0]), budget)
                if count:
                    drafts = proposal.token_ids[:count].tolist()
                    if proposal.draft_probs is not None:
                        draft_probs = proposal.draft_probs[:count]
            k = len(drafts)
            step = torch.tensor([[tokens[-1], *drafts]], dtype=torch.long, device=device)
            logits = model(input_ids=step, cache=cache, use_cache=True, logits_to_keep=k + 1).logits[0].float()
            if len(logits_processor):  # HF applies processors per position, on the prefix before it
                candidate = torch.cat([ids, step[:, 1:]], dim=1)
                processed = torch.stack(
                    [logits_processor(candidate[:, : cur + i], logits[i : i + 1])[0] for i in range(k + 1)]
                )
            else:
                processed = logits
            if not sample:  # greedy: the longest prefix of drafts equal to the argmax, then the argmax
                choice = processed.argmax(dim=-1).tolist()
                accepted = 0
                while accepted < k and drafts[accepted] == choice[accepted]:
                    accepted += 1
                emitted = drafts[:accepted] + [choice[accepted]]
            else:
                bonus = torch.multinomial(torch.softmax(processed[k], dim=-1), 1, generator=generator)
                if k:
                    out = rejection_sample(
                        torch.tensor(drafts, dtype=torch.int32, device=device),
                        [k],
                        processed[:k],
                        bonus.to(torch.int32),
                        temperature,
                        draft_probs=draft_probs,
                        generators=[generator],
                    )
                    emitted = [t for t in out[0].tolist() if t >= 0]
                else:
                    emitted = [int(bonus[0])]
            accepted = len(emitted) - 1
            if budget > 0:
                speculator.on_verified([req_id], [accepted])
            if k > accepted:  # v5 crop takes the (negative) count to remove
                cache.crop(accepted - k)
            num_new = accepted + 1
            features = hidden.rows(num_new) if hidden else None
            done, ids = _append(ids, emitted, processed[min(accepted, k)][None], stopping_criteria, streamer)
            tokens.extend(emitted)
    finally:
        if hidden is not None:
            hidden.close()
        speculator.remove_request(req_id)
    if streamer is not None:
        streamer.end()
    if generation_config.return_dict_in_generate:
        from transformers.generation.utils import GenerateDecoderOnlyOutput

        return GenerateDecoderOnlyOutput(sequences=ids, past_key_values=cache)
    return ids


def _callers_streamer() -> Any:
    """The ``streamer`` given to ``model.generate()``: transformers hands a callable
    ``custom_generate`` only the keyword arguments ``_sample`` lacks, so it puts the prompt into
    the streamer and then drops it; read it from the calling ``generate`` frame (None elsewhere)."""
    import sys

    frame = sys._getframe(2)  # 0: here, 1: our generate, 2: transformers' generate
    if frame.f_code.co_name != "generate" or "transformers" not in frame.f_code.co_filename:
        return None
    streamer = frame.f_locals.get("streamer")
    return streamer if hasattr(streamer, "put") and hasattr(streamer, "end") else None


def _append(ids: torch.Tensor, emitted: Sequence[int], scores: torch.Tensor, stopping_criteria: Any, streamer: Any):
    """Append tokens one at a time, as plain decoding would, stopping where it would stop."""
    for t in emitted:
        token = torch.tensor([[t]], dtype=ids.dtype, device=ids.device)
        ids = torch.cat([ids, token], dim=1)
        if streamer is not None:
            streamer.put(token[0].cpu())
        if bool(stopping_criteria(ids, scores).all()):
            return True, ids
    return False, ids
