"""``LLM``: the user-facing API of the reference engine.

    llm = LLM()                                        # the embedded default model
    llm = LLM("path/to/checkpoint", {"method": "ngram", "num_speculative_tokens": 4})
    llm = LLM("smollm2-135m")                          # a named model (or any .gguf file)
    outputs = llm.generate(["def main():\\n"], SamplingParams(max_tokens=64))
    outputs = llm.chat([{"role": "user", "content": "Hi!"}])   # the checkpoint's chat template
    outputs[0].text, outputs[0].token_ids, outputs[0].metrics.mean_acceptance_length
    llm.metrics                                        # aggregate of the last generate call

The speculative configuration is resolved by the core (``EngineConfig.create``); the engine
reads only its forwarding properties and the speculator config's capability flags, and builds
the drafter with ``specpath.create_speculator``.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import torch

from specpath.config.model import SchedulerConfig
from specpath_engine.llm_engine import LLMEngine, RequestFailedError, drafter_quantization, speculation_settings  # noqa: F401 (re-exported)
from specpath_engine.metrics import SpecMetrics
from specpath_engine.request import SamplingParams, as_token_lists

SCHEDULER_DEFAULTS = SchedulerConfig()

__all__ = ["LLM", "RequestFailedError", "RequestOutput", "SamplingParams", "SpecMetrics", "StreamChunk"]



@attrs.frozen(kw_only=True)
class RequestOutput:
    """One finished request."""

    request_id: str
    prompt: str | None
    """The prompt text, when it was given as text."""
    prompt_token_ids: list[int]
    text: str
    """Decoded generated text (empty without a tokenizer); a stop string is cut off."""
    token_ids: list[int]
    """Generated tokens only."""
    finish_reason: str
    """"length" (max_tokens or max_model_len) or "stop" (EOS, a stop token or a stop string)."""
    metrics: SpecMetrics


@attrs.frozen(kw_only=True)
class StreamChunk:
    """What one step of a streamed call added to one request (:meth:`LLM.generate_stream`).

    The ``text`` of a request's chunks adds up to its ``RequestOutput.text`` and the
    ``token_ids`` to its ``token_ids``; text is held back while it ends inside a character or
    could still turn into a stop string, so a chunk may carry ids and no text."""

    index: int
    """Position of the request's prompt in the call."""
    request_id: str
    text: str
    token_ids: list[int]
    """Tokens verified in this step (generated tokens only)."""
    finished: bool
    output: RequestOutput | None = None
    """The whole finished request (text, finish reason, its metrics) on its last chunk."""


DEFAULT_MAX_MODEL_LEN = 2048
"""``max_model_len`` when none is given: the checkpoint's context, at most this (SmolLM2 says 8192,
which would size the KV cache for 8k-token requests nobody sends by default)."""

DEFAULT_KV_CACHE_MEMORY = 64 * 2**20
"""Cap of the KV pool when neither ``num_kv_blocks`` nor ``kv_cache_memory`` is given (one request
of ``max_model_len`` always fits; more requests than fit are preempted and resumed)."""


_LOADED_TARGETS: "weakref.WeakValueDictionary[tuple, Any]" = weakref.WeakValueDictionary()


def _load_target(path: Path, dtype: torch.dtype, device: str, quantization: str | None = None) -> Any:
    """The target's weights, shared by every live LLM of the same file, dtype and device.

    Inference never writes the weights (each engine has its own KV cache), so engines built one
    after another (``specpath demo``: one per method) load a real model once, not once each.
    """
    from specpath_engine.model import LlamaModel

    from specpath_engine.packed_linear import packing_enabled

    stat = path.stat() if path.is_file() else (path / "config.json").stat()
    packed = quantization is None and packing_enabled(dtype, device)
    from specpath_engine.modeling.native import kernels

    tiles = kernels() is not None and kernels().tiles  # bf16 weights in the AMX tile layout or not
    key = (str(path.resolve()), stat.st_mtime_ns, str(dtype), str(device), quantization, packed, tiles)
    model = _LOADED_TARGETS.get(key)
    if model is None:
        model = _inference_model(LlamaModel.from_pretrained(path, dtype=dtype, device=device), quantization, packed)
        _LOADED_TARGETS[key] = model
    return model


def _inference_model(model: Any, quantization: str | None = None, packed: bool = False, *,
                     drafter: bool = False) -> Any:
    """A loaded model made ready for inference: weight-only quantised, or its low-precision
    weights pre-packed for the CPU's matmul (``specpath_engine.packed_linear``); either way with
    its projections fused (fewer calls per step). ``drafter``: int8 where the method cannot hold
    a layer, and int16 activations on the int8 layers where the CPU has AVX512-VNNI
    (:func:`~specpath_engine.quantization.quantize_model_`)."""
    if (quantization is not None or packed) and hasattr(model, "fuse_projections"):
        model.fuse_projections()
    if quantization is not None:
        from specpath_engine.quantization import quantize_model_

        quantize_model_(model, quantization, int8_where_unfit=drafter, int16_activations=drafter)
    elif packed:
        from specpath_engine.packed_linear import pack_linears_

        pack_linears_(model)
    return model


def _thread_adapter(choice: Any, dtype: torch.dtype, device: str) -> Any:
    """A :class:`~specpath_engine.adaptive_threads.ThreadAdapter` between the chosen count and
    its alternative, where the count is not fixed (``ThreadChoice.fixed``) and the target's
    logits do not depend on it; else None."""
    from specpath_engine import adaptive_threads
    from specpath_engine.threads import available_cpus

    if choice.fixed or device != "cpu" or not adaptive_threads.thread_invariant(dtype):
        return None
    other = adaptive_threads.other_count(choice.num_threads, available_cpus())
    if other == choice.num_threads:
        return None
    return adaptive_threads.ThreadAdapter((choice.num_threads, other))


def _load_draft(path: Any, *, dtype: torch.dtype, device: str, quantization: str | None = None, **options: Any) -> Any:
    """``SpeculatorContext.load_model``: a drafter's own decoder, packed like the target, or
    weight-only quantised (``speculative_config.quantization``)."""
    from specpath_engine.model import LlamaModel
    from specpath_engine.packed_linear import packing_enabled

    model = LlamaModel.from_pretrained(path, **{"dtype": dtype, "device": device, **options})
    weight = next(model.parameters())
    return _inference_model(model, quantization, packed=packing_enabled(weight.dtype, weight.device), drafter=True)


SMALL_MODEL_PARAMETERS = 20_000_000
"""Below about this many layer parameters one thread beats several (the embedded model: 2.4M)."""


def _is_small(raw_config: dict) -> bool:
    hidden, layers = raw_config.get("hidden_size"), raw_config.get("num_hidden_layers")
    inner = raw_config.get("intermediate_size") or 4 * (hidden or 0)
    if not all(isinstance(v, int) and v > 0 for v in (hidden, layers, inner)):
        return False
    return layers * (4 * hidden * hidden + 3 * hidden * inner) < SMALL_MODEL_PARAMETERS


def _model_path(model: str | os.PathLike[str] | None) -> Path:
    """Checkpoint directory or GGUF file of a path, a model name or None (the embedded model)."""
    from specpath_engine.modeling.gguf import is_gguf
    from specpath_engine.modeling.named_models import resolve_model_path

    path = resolve_model_path(model)
    if not path.exists() and model is not None:
        from specpath.hub import is_hub_id
        from specpath.hub import resolve_model_path as resolve_hub_id

        if not is_hub_id(os.fspath(model)):
            from specpath_engine.arguments import EngineArgumentError
            from specpath_engine.modeling.named_models import unknown_model_message

            raise EngineArgumentError(unknown_model_message(os.fspath(model)))
        path = Path(resolve_hub_id(os.fspath(model)))  # org/name from the local Hugging Face cache, never the network
    if is_gguf(path):
        return path
    if not (path / "config.json").is_file():
        what = "embedded default model" if model is None else "model"
        raise FileNotFoundError(f"{what} not found: {path} has no config.json (nor is it a .gguf file or a named model)")
    return path


def _eos_ids(model_config: Any, tokenizer: Any) -> tuple[int, ...]:
    eos = getattr(model_config, "eos_token_id", None)
    if eos is None and tokenizer is not None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return ()
    return tuple(eos) if isinstance(eos, (list, tuple)) else (int(eos),)


class LLM:
    """A target model, an optional speculator and the engine that serves them.

    Args:
        model: local HF checkpoint directory, GGUF file, named model (``smollm2-135m``, see
            ``specpath_engine.modeling.named_models``) or a hub id in the local Hugging Face cache; None
            or ``"embedded"`` = the embedded model. A speculators checkpoint serves its verifier
            with itself as the draft (method and K from its ``speculators_config``, unless given).
        speculative_config: dict, JSON string, ``@file.yaml`` or ``SpeculativeConfig``; None = no
            speculation.
        dtype / device: of the target weights, activations and KV cache; ``"auto"`` keeps float32
            checkpoints in float32 and runs bf16/fp16/quantised ones in bfloat16 where the CPU has
            native bf16 (else float32), see ``specpath_engine.dtype``.
        max_num_seqs / max_num_batched_tokens / enable_chunked_prefill: scheduler budgets.
        max_model_len: longest context (default: the checkpoint's, at most ``DEFAULT_MAX_MODEL_LEN``).
        block_size / num_kv_blocks / enable_prefix_caching: the paged KV cache.
        kv_cache_memory: most bytes of the KV pool (int or ``"64MiB"``); default
            ``DEFAULT_KV_CACHE_MEMORY`` unless ``num_kv_blocks`` is given.
        tree_verification: verify the token trees of drafters that build them (suffix, DSpark
            with ``xpress_topc``) in standard verification; False (or another verification mode):
            every drafter proposes chains.
        quantization: ``"int8"`` / ``"int4"``: weight-only target matrices
            (``specpath_engine.quantization``); speculation is then lossless with respect to the
            quantised model. None: the weights as loaded.
        seed: base seed of requests that give none.
        num_threads: torch's intra-op threads, shared with the native kernels (at most 4 per CPU this
            process may use). None: ``$SPECPATH_NUM_THREADS`` or ``$OMP_NUM_THREADS``, else 1 for
            tiny models (their steps lose more in barriers than they gain), else the CPUs the load
            leaves free (``specpath_engine.threads``); :attr:`threads` says what was chosen and why.
            Unless fixed (here or by either variable), the count then adapts at run time where
            outputs do not depend on it (bf16 targets: ``specpath_engine.adaptive_threads``);
            :meth:`thread_stats` says what it did.
        runner: ``"v2"`` (this runner trims drafts to each step's K centrally) or ``"v1"``.
        trust_remote_code: allow code named by configuration or shipped with a checkpoint to run
            (a ``custom_class`` proposer, a checkpoint-declared config class, a tokenizer
            ``auto_map``); off, nothing from a checkpoint is imported.

    A bad argument here, or a bad prompt to :meth:`generate`, is one
    ``specpath_engine.arguments.EngineArgumentError`` line (a ``ValueError``), raised before any
    work; a bad conversation or checkpoint template in :meth:`chat` is one
    ``specpath_engine.chat.ChatTemplateError`` line. Both are ``specpath.errors.InputError``.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] | None = None,
        speculative_config: Any = None,
        *,
        dtype: str = "auto",
        device: str = "cpu",
        max_num_seqs: int = SCHEDULER_DEFAULTS.max_num_seqs,
        max_num_batched_tokens: int = SCHEDULER_DEFAULTS.max_num_batched_tokens,
        enable_chunked_prefill: bool = True,
        max_model_len: int | None = None,
        block_size: int = 16,
        num_kv_blocks: int | None = None,
        enable_prefix_caching: bool = False,
        kv_cache_memory: int | str | None = None,
        seed: int = 0,
        num_threads: int | None = None,
        runner: str = "v2",
        trust_remote_code: bool = False,
        quantization: str | None = None,
        tree_verification: bool = True,
    ) -> None:
        """Kept as one function: the arguments are checked, then the target, the drafter and the
        engine are built, each from the one before; split, that order would be scattered."""
        from specpath.config.engine import EngineConfig
        from specpath.config.model import CacheConfig, ModelConfig, load_hf_config
        from specpath_engine.dtype import parse_size, resolve_dtype
        from specpath_engine.quantization import QUANTIZATIONS
        from specpath_engine.tokenizer import load_tokenizer

        from specpath_engine import threads
        from specpath_engine.arguments import EngineArgumentError, check_device, check_dtype, check_seed, check_threads

        num_threads, seed = check_threads(num_threads), check_seed(seed)  # a bad value fails before anything loads
        dtype, device = check_dtype(dtype), check_device(device)
        from specpath.config.speculative import SpeculativeConfig

        if model is not None and not isinstance(speculative_config, SpeculativeConfig):
            from specpath.config.args import load_speculative_config_text
            from specpath.config.speculators_format import maybe_override_with_speculators

            if isinstance(speculative_config, str):
                speculative_config = load_speculative_config_text(speculative_config)
            model, speculative_config = maybe_override_with_speculators(os.fspath(model), speculative_config)
        if quantization is not None and quantization not in QUANTIZATIONS:
            raise EngineArgumentError(f"quantization: {quantization!r} is not supported; allowed: {', '.join(QUANTIZATIONS)}")
        path = _model_path(model)
        raw_config = load_hf_config(str(path))
        self.threads = threads.machine_threads(num_threads, small_model=_is_small(raw_config))
        """The intra-op thread count (:class:`~specpath_engine.threads.ThreadChoice`) and why."""
        threads.apply(self.threads)
        dtype = resolve_dtype(dtype, raw_config.get("torch_dtype") or raw_config.get("dtype"), device)
        if max_model_len is None:
            context = raw_config.get("max_position_embeddings")
            max_model_len = min(context, DEFAULT_MAX_MODEL_LEN) if isinstance(context, int) else None
        if kv_cache_memory is None and num_kv_blocks is None:
            kv_bytes: int | None = DEFAULT_KV_CACHE_MEMORY
        else:
            try:
                kv_bytes = None if kv_cache_memory is None else parse_size(kv_cache_memory)
            except ValueError as exc:
                raise EngineArgumentError(f"kv_cache_memory: {exc}") from None
        engine_config = EngineConfig.create(
            ModelConfig(
                model=str(path),
                max_model_len=max_model_len,
                dtype=dtype,
                seed=seed,
                trust_remote_code=trust_remote_code,
                quantization=quantization,
            ),
            speculative_config,
            cache_config=CacheConfig(
                block_size=block_size, enable_prefix_caching=enable_prefix_caching, num_blocks=num_kv_blocks,
                kv_cache_memory_bytes=kv_bytes,
            ),
            scheduler_config=SchedulerConfig(
                max_num_seqs=max_num_seqs,
                max_num_batched_tokens=max_num_batched_tokens,
                enable_chunked_prefill=enable_chunked_prefill,
            ),
            runner=runner,
        )
        self.engine_config = engine_config
        self.model_path = path
        torch_dtype = getattr(torch, engine_config.model_config.dtype)  # resolved: "auto" -> the checkpoint's
        self.model = _load_target(path, torch_dtype, device, quantization)
        self.tokenizer = load_tokenizer(path, trust_remote_code=trust_remote_code)

        spec = engine_config.speculative_config
        draft_quantization = None if spec is None else drafter_quantization(spec, torch_dtype, device)
        self.engine = LLMEngine.from_config(
            self.model,
            engine_config,
            tree_verification=tree_verification,
            load_model=lambda p, **options: _load_draft(p, **{"dtype": torch_dtype, "device": device,
                                                             "quantization": draft_quantization, **options}),
            tokenizer=self.tokenizer,
            eos_token_ids=_eos_ids(self.model.config, self.tokenizer),
            seed=seed,
            device=device,
            thread_adapter=_thread_adapter(self.threads, torch_dtype, device),
            num_threads=self.threads.num_threads if device == "cpu" else None,
        )
        self.metrics = SpecMetrics()
        """Aggregate metrics of the last :meth:`generate` call."""

    def thread_stats(self) -> dict[str, Any]:
        """The intra-op thread count now and how it got there: ``num_threads``, ``adaptive``
        (whether it adapts at run time) and, when it does, ``num_switches`` / ``num_probes``."""
        adapter = self.engine.thread_adapter
        if adapter is None:
            return {"num_threads": torch.get_num_threads(), "adaptive": False}
        return {**adapter.stats(), "adaptive": True}

    @property
    def speculator(self) -> Any:
        return self.engine.runner.speculator

    def generate(
        self,
        prompts: str | Sequence[int] | Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        *,
        stream: bool = False,
    ) -> Any:
        """Generate for each prompt (text or token ids); outputs in prompt order.

        A call succeeds or fails as a whole, as in other engines' offline APIs: when a step
        raises (drafter, sampler or model), every request of the call is aborted, its KV blocks
        and drafter state freed, and :class:`RequestFailedError` (a ``RuntimeError`` with the
        original exception as ``__cause__``) is raised; the ``LLM`` stays usable.
        ``stream=True``: the iterator of :meth:`generate_stream` instead of the list.
        """
        if stream:
            return self.generate_stream(prompts, sampling_params)
        items, token_lists, params = self._prepare(prompts, sampling_params)
        requests, self.metrics = self.engine.generate(token_lists, params)
        return [self._output(r, p if isinstance(p, str) else None) for r, p in zip(requests, items)]

    def generate_stream(
        self,
        prompts: str | Sequence[int] | Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> Iterator[StreamChunk]:
        """:meth:`generate` as an iterator of :class:`StreamChunk`: after every engine step,
        one chunk per request that gained verified tokens (a whole accepted draft at a time),
        its text decoded incrementally (:mod:`specpath_engine.detokenizer`). Bad input fails
        here, before the first chunk; ``metrics`` is the call's aggregate once the iterator is
        exhausted; breaking out early aborts the call's unfinished requests."""
        from specpath_engine.detokenizer import IncrementalDetokenizer

        items, token_lists, params = self._prepare(prompts, sampling_params)
        steps = self.engine.stream(token_lists, params)

        def chunks() -> Iterator[StreamChunk]:
            seen: list[int] = []
            decoders: list[IncrementalDetokenizer] = []
            done: set[int] = set()
            for requests in steps:
                for i, r in enumerate(requests):
                    if i == len(seen):
                        seen.append(0)
                        decoders.append(IncrementalDetokenizer(self.tokenizer, stop=r.params.stop))
                    if i in done:
                        continue
                    new = list(r.output_token_ids[seen[i]:])
                    seen[i] += len(new)
                    text = decoders[i].add(new) if new else ""
                    output = None
                    if r.is_finished:
                        done.add(i)
                        output = self._output(r, items[i] if isinstance(items[i], str) else None)
                        text += decoders[i].finish(output.text)
                    if new or output is not None:
                        yield StreamChunk(index=i, request_id=r.req_id, text=text, token_ids=new,
                                          finished=output is not None, output=output)
            self.metrics = self.engine.last_metrics

        return chunks()

    def encode_prompts(self, prompts: str | Sequence[int] | Sequence[str | Sequence[int]]) -> list[list[int]]:
        """The token ids :meth:`generate` would run for ``prompts`` (checked as it checks them)."""
        return self._prepare(prompts, None)[1]

    def _prepare(self, prompts: Any, sampling_params: Any) -> tuple[list[Any], list[list[int]], Any]:
        """Prompts as given, as token lists, and the sampling params (default: greedy)."""
        from specpath_engine.arguments import EngineArgumentError, check_prompt_text, check_token_ids

        if prompts is None or isinstance(prompts, bytes) or not hasattr(prompts, "__iter__"):
            raise EngineArgumentError(f"prompts: expected a string, a list of token ids or a list of either, "
                                      f"got {type(prompts).__name__}")
        items = as_token_lists(prompts)
        if not items:
            raise EngineArgumentError("prompts: the list is empty; give at least one prompt")
        vocab = self.model.config.vocab_size
        token_lists = []
        for i, p in enumerate(items):
            name = "prompt" if len(items) == 1 else f"prompts[{i}]"
            if isinstance(p, str):
                token_lists.append(check_token_ids(name, self.tokenizer.encode(check_prompt_text(name, p)), vocab))
            else:
                token_lists.append(check_token_ids(name, p, vocab))
        params = sampling_params if sampling_params is not None else SamplingParams()
        return items, token_lists, params

    def chat(
        self,
        messages: Sequence[Any],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
        *,
        add_generation_prompt: bool = True,
        stream: bool = False,
    ) -> Any:
        """Generate the assistant's reply to one conversation (a list of ``{"role", "content"}``
        dicts) or to each of several, through the checkpoint's chat template. Generation stops at
        the model's EOS unless ``ignore_eos`` is set; ``RequestOutput.prompt`` is the rendered text.
        ``stream=True``: an iterator of :class:`StreamChunk` (see :meth:`generate_stream`)."""
        return self.generate(self.chat_prompts(messages, add_generation_prompt=add_generation_prompt),
                             sampling_params, stream=stream)

    def chat_prompts(self, messages: Sequence[Any], *, add_generation_prompt: bool = True) -> list[str]:
        """The prompt text :meth:`chat` generates from, one per conversation in ``messages``."""
        from specpath_engine.chat import render_chat, split_conversations

        tok = self.tokenizer
        return [render_chat(tok.chat_template, conversation, bos_token=tok.bos_token, eos_token=tok.eos_token,
                            add_generation_prompt=add_generation_prompt)
                for conversation in split_conversations(messages)]

    def _output(self, r: Any, prompt: str | None) -> RequestOutput:
        text = self.tokenizer.decode(r.output_token_ids)
        for stop in r.params.stop:
            cut = text.find(stop)
            if cut >= 0:
                text = text[:cut]
        return RequestOutput(
            request_id=r.req_id,
            prompt=prompt,
            prompt_token_ids=list(r.prompt_token_ids),
            text=text,
            token_ids=list(r.output_token_ids),
            finish_reason=r.finish_reason or "length",
            metrics=r.metrics,
        )
