"""The engine loop over already-built parts: model, paged cache, scheduler, runner, speculator.

:class:`specpath_engine.llm.LLM` resolves user configuration into these parts; tests and
benchmarks may build them directly. The settings here are plain numbers and flags, the values
the resolved configuration forwards (``EngineConfig.num_lookahead_tokens`` and friends), so the
engine never needs to know which method produced them.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import attrs
import torch

from specpath_engine.block_manager import BlockManager
from specpath_engine.draft_governor import DraftGovernor
from specpath_engine.kv_cache import KVCache
from specpath_engine.metrics import SpecMetrics
from specpath_engine.request import Request, SamplingParams
from specpath_engine.runner import ModelRunner
from specpath.config.model import CacheConfig, SchedulerConfig
from specpath_engine.scheduler import Scheduler, SchedulerSettings
from specpath.catch_up import catch_up_window
from specpath.speculator import BaseSpeculator, SpeculatorContext


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    text = text if len(text) <= 300 else text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class RequestFailedError(RuntimeError):
    """A step failed; its requests were aborted (finish_reason "error") and their blocks freed.

    ``requests`` are the requests that were in the failing step; ``all_requests`` every request
    of the ``generate`` call (all aborted). The original exception is ``__cause__``; the engine
    stays usable for later calls.
    """

    def __init__(self, requests: Sequence[Request], cause: BaseException | None, *,
                 all_requests: Sequence[Request] = ()) -> None:
        self.requests = list(requests)
        self.all_requests = list(all_requests) or self.requests
        ids = ", ".join(r.req_id for r in self.requests[:8]) + (", ..." if len(self.requests) > 8 else "")
        what = _one_line(cause) if cause is not None else "unknown error"
        super().__init__(f"generation failed for request(s) {ids}: {what} (the requests were aborted; the engine is still usable)")


@attrs.frozen(kw_only=True)
class SpeculationSettings:
    """What the engine reads from a resolved speculative configuration."""

    speculator: BaseSpeculator
    num_speculative_tokens: int
    k_for_batch_size: Callable[[int], int] | None = None
    """The dynamic-K table as a function of the number of active requests (None: always K)."""
    num_lookahead_tokens: int = 0
    num_prefill_lookahead_tokens: int = 0
    num_hash_lookahead_tokens: int = 0
    use_eagle_block_drop: bool = False
    num_extra_draft_slots: int = 0
    """``max_num_new_slots_for_drafting``, or 0 for drafters in a separate workspace lane."""
    uses_target_hidden_states: bool = False
    verify_method: str = "standard"
    verify_options: dict = attrs.field(factory=dict)
    verify_trees: bool = True
    """Verify the speculator's ``DraftProposal.tree`` where ``verify_method`` allows (standard);
    False: chains only. ``SpeculatorContext.verifies_trees`` must agree
    (``specpath_engine.tree_layout.verifies_trees``)."""
    governor: DraftGovernor | None = None
    """Chooses each request's draft length per step (``draft_length_policy: adaptive``); None: K."""
    skips_backed_off: bool = False
    """A backed-off request is left out of the drafter's step (``tolerates_skipped_steps``)."""
    catch_up_window: int = 0
    """The most positions one hand-over gives the drafter (:mod:`specpath.catch_up`; 0: all)."""
    races_unseeded: bool = True
    """An unseeded sampled request races on noise of the seed the engine gives it, as a seeded one
    does (its drafts coupled to its samples); False under ``draft_sample_method: random``, whose
    unseeded drafts are sampled and verified with their probabilities."""


def speculator_context(model: Any, *, device: str | torch.device = "cpu", dtype: torch.dtype | None = None,
                       max_model_len: int | None = None, max_num_seqs: int = SchedulerConfig().max_num_seqs,
                       target_config: dict | None = None, verifies_trees: bool = False,
                       load_model: Callable[..., Any] | None = None,
                       draft_quantization: str | None = None,
                       draft_overrides: Any = None) -> SpeculatorContext:
    """The one ``SpeculatorContext`` a reference-engine target lends its speculator: the target's
    config (its checkpoint's ``config.json`` when given, else the model's), embedding and head on
    final-normed states (per the contract), and a loader of drafter models on the target's
    device and dtype (default: the dtype of its first parameter; ``load_model`` replaces it, e.g.
    ``LLM``'s, which packs drafts like the target), and ``prepare_module``, which pre-packs a
    drafter head's linears where the target's would be (:mod:`specpath_engine.packed_linear`).
    ``verifies_trees``: whether the engine will verify token trees
    (:func:`specpath_engine.tree_layout.verifies_trees`). ``draft_quantization``
    (``speculative_config.quantization``: ``"int8"`` / ``"int4"``): ``prepare_module`` and the default
    loader make the drafter's matrices weight-only quantised instead
    (:mod:`specpath_engine.quantization`); drafts change, the output does not (verification is
    against the target). ``draft_overrides`` (:class:`specpath_engine.draft_overrides.DraftOverrides`):
    the drafter's attention kernel and KV dtype, lent as ``draft_attention`` / ``draft_kv_dtype``."""
    from specpath_engine.draft_overrides import DraftOverrides
    from specpath_engine.model import LlamaModel
    from specpath_engine.packed_linear import pack_linears_, packing_enabled
    from specpath_engine.quantization import quantize_model_

    cfg = model.config
    dtype = dtype if dtype is not None else next(model.parameters()).dtype
    prepare = pack_linears_ if packing_enabled(dtype, device) else None
    if draft_quantization is not None:
        prepare = functools.partial(quantize_model_, method=draft_quantization, int8_where_unfit=True,
                                    int16_activations=True)

    def load(path: Any, **options: Any) -> Any:
        draft = LlamaModel.from_pretrained(path, **{"dtype": dtype, "device": device, **options})
        if draft_quantization is not None:
            draft.fuse_projections()
            quantize_model_(draft, draft_quantization, int8_where_unfit=True, int16_activations=True)
        return draft

    return SpeculatorContext(
        device=str(device),
        dtype=dtype,
        vocab_size=cfg.vocab_size,
        max_model_len=max_model_len or cfg.max_position_embeddings,
        max_num_seqs=max_num_seqs,
        target_config=dict(target_config) if target_config is not None else cfg.to_hf_dict(),
        embed_tokens=model.embed,
        lm_head=model.lm_head_logits,
        load_model=load_model if load_model is not None else load,
        verifies_trees=verifies_trees,
        prepare_module=prepare,
        **(draft_overrides or DraftOverrides()).context_fields(),
    )


AS_LOADED = "none"
"""``speculative_config.quantization`` for drafter weights as loaded (over a shipped default)."""


def checked_draft_quantization(spec: Any) -> str | None:
    """``speculative_config.quantization`` where this engine can apply it (weight-only int8 /
    int4 of the drafter's matrices; ``none``: as loaded, None), else a one-line error."""
    from specpath_engine.quantization import QUANTIZATIONS

    method = spec.quantization
    if method == AS_LOADED:
        return None
    if method is not None and method not in QUANTIZATIONS:
        raise ValueError(f"speculative_config.quantization: {method!r} is not a quantization the reference engine "
                         f"applies to drafters; allowed: {', '.join((*QUANTIZATIONS, AS_LOADED))}")
    return method


def drafter_quantization(spec: Any, dtype: Any, device: Any = "cpu") -> str | None:
    """The drafter weights' quantization: ``speculative_config.quantization`` (checked), else the
    shipped drafter's default (``shipped_drafter_quantization``) where this engine multiplies it on
    the native int8 kernel (bf16 on a CPU with the kernels built), else None (as loaded)."""
    if spec.quantization is not None:
        return checked_draft_quantization(spec)
    default = type(spec.speculator_config).shipped_quantization(spec)
    if default is None or dtype is not torch.bfloat16 or torch.device(device).type != "cpu":
        return None
    from specpath_engine.modeling.native import kernels

    return default if kernels() is not None else None


def speculation_settings(engine_config: Any, speculator: BaseSpeculator, *,
                         verify_trees: bool = True, target: Any = None) -> SpeculationSettings:
    """The engine's view of a resolved ``EngineConfig``: forwarding properties and flags only."""
    spec = engine_config.speculative_config
    flags = spec.speculator_config
    proposes = flags.proposes_draft_tokens
    verify_options: dict[str, Any] = {}
    if spec.rejection_sample_method == "synthetic":
        verify_options["acceptance_rates"] = spec.synthetic_rates
    elif spec.rejection_sample_method == "fly":
        if spec.fly_window_size is not None:
            verify_options["window"] = spec.fly_window_size
        if spec.fly_entropy_threshold is not None:
            verify_options["entropy_threshold"] = spec.fly_entropy_threshold
    return SpeculationSettings(
        speculator=speculator,
        num_speculative_tokens=engine_config.num_speculative_tokens if proposes else 0,
        k_for_batch_size=engine_config.num_speculative_tokens_for_batch if proposes else (lambda n: 0),
        num_lookahead_tokens=engine_config.num_lookahead_tokens,
        num_prefill_lookahead_tokens=engine_config.num_prefill_lookahead_tokens,
        num_hash_lookahead_tokens=engine_config.num_hash_lookahead_tokens,
        use_eagle_block_drop=engine_config.use_eagle_block_drop,
        num_extra_draft_slots=0 if flags.uses_separate_workspace_lane else engine_config.max_num_new_slots_for_drafting,
        uses_target_hidden_states=flags.uses_target_hidden_states,
        verify_method=spec.rejection_sample_method,
        verify_options=verify_options,
        verify_trees=verify_trees,
        governor=draft_governor(spec, speculator, engine_config.num_speculative_tokens, target) if proposes else None,
        skips_backed_off=flags.tolerates_skipped_steps,
        catch_up_window=catch_up_window(spec),
        races_unseeded=spec.draft_sample_method != "random",
    )


def draft_governor(spec: Any, speculator: BaseSpeculator, max_k: int, target: Any = None) -> DraftGovernor | None:
    """The adaptive draft-length policy's governor, or None where K stays fixed: ``fixed``, and
    synthetic verification (its acceptance is preset, so there is nothing to adapt to). Its
    costs are measured (:mod:`specpath_engine.step_costs`) from a prior of :func:`draft_pass_cost`;
    a configured ``draft_pass_cost`` pins the drafter's cost (a fraction of the measured plain
    step) instead of measuring it."""
    if spec.draft_length_policy != "adaptive" or spec.rejection_sample_method == "synthetic" or not max_k:
        return None
    return DraftGovernor(max_k, draft_pass_cost(spec, speculator, target),
                         one_pass=spec.speculator_config.drafts_in_one_pass, pinned=spec.draft_pass_cost is not None,
                         row_block=getattr(target, "row_block", 0))


MIN_DRAFT_PASS_COST = 0.03
"""A model-based drafter's pass is never taken to cost less than this (its Python and
kernel-launch work, whatever its size)."""


def draft_pass_cost(spec: Any, speculator: BaseSpeculator, target: Any = None) -> float:
    """``draft_pass_cost`` when configured, else the speculator's own estimate
    (``BaseSpeculator.draft_pass_cost``), else 0 for a model-free method and, for the others, the
    bytes of the drafter's own weights (and of the rows of the target's LM head it reads where it
    drafts through it) over the target's: decode reads every weight once a pass, so bytes are the
    cost. The measured cost model starts from it (its prior), or keeps it where configured (pinned)."""
    if spec.draft_pass_cost is not None:
        return float(spec.draft_pass_cost)
    estimate = getattr(speculator, "draft_pass_cost", None)
    if estimate is not None:
        return float(estimate)
    if spec.speculator_config.model_free or target is None:
        return 0.0 if spec.speculator_config.model_free else MIN_DRAFT_PASS_COST
    target_tensors = _tensors([target])
    target_bytes = sum(target_tensors.values())
    modules = _modules(speculator)
    own = sum(b for ptr, b in _tensors(modules).items() if ptr not in target_tensors)
    rows = _lent_head_rows(modules, target)
    if rows is not None:  # drafting through the target's own LM head reads those of its rows
        own += rows * target.config.hidden_size * next(target.parameters()).element_size()
    return max(MIN_DRAFT_PASS_COST, own / max(1, target_bytes))


def _lent_head_rows(modules: Sequence[Any], target: Any) -> int | None:
    """The rows of the target's LM head a drafting pass reads, where a drafter module holds one
    of the target's bound methods (its LM head, lent through ``SpeculatorContext.lm_head``): the
    module's ``lent_head_rows`` (a head restricted to the ids the drafter was trained on multiplies
    only those: for SmolLM2's MTP 4,096 of 49,152, which the whole head's bytes overstated twelve
    times, and over an int4 target priced every draft out), else all of them; None where none does."""
    for module in modules:
        for m in module.modules():
            for v in vars(m).values():
                if getattr(v, "__self__", None) is target and getattr(v, "__name__", "") != "embed":
                    return int(getattr(m, "lent_head_rows", target.config.vocab_size))
    return None


def _modules(speculator: Any) -> list[Any]:
    """The torch modules a speculator holds (one level into lists, tuples and dicts)."""
    values = list(vars(speculator).values())
    for v in list(values):
        if isinstance(v, (list, tuple)):
            values.extend(v)
        elif isinstance(v, dict):
            values.extend(v.values())
    return [v for v in values if isinstance(v, torch.nn.Module)]


def _tensors(modules: Sequence[Any]) -> dict[int, int]:
    """Bytes of each distinct weight storage, by data pointer: parameters, and buffers named as
    weights (the engine's packed and quantised matrices); never caches (rotary tables, KV), whose
    size follows max_model_len and would make the estimate depend on the engine's settings."""
    out: dict[int, int] = {}
    for m in modules:
        named = [*m.named_parameters()] + [(n, b) for n, b in m.named_buffers() if "weight" in n.rsplit(".", 1)[-1]]
        for _, t in named:
            out.setdefault(t.data_ptr(), t.numel() * t.element_size())
    return out


class LLMEngine:
    """Continuous-batching engine over one target model and an optional speculator."""

    def __init__(
        self,
        model: Any,
        *,
        scheduler: SchedulerSettings | None = None,
        cache: CacheConfig | None = None,
        speculation: SpeculationSettings | None = None,
        tokenizer: Any = None,
        eos_token_ids: Sequence[int] = (),
        seed: int = 0,
        device: str | torch.device = "cpu",
        thread_adapter: Any = None,
        num_threads: int | None = None,
    ) -> None:
        """Kept as one function: it sizes the KV pool, refuses an impossible one before anything
        allocates, then builds the block manager, scheduler, cache and runner in the order each
        needs the last."""
        cache = cache or CacheConfig()
        cfg = model.config
        base = scheduler or SchedulerSettings(max_model_len=cfg.max_position_embeddings)
        if speculation is not None:
            base = attrs.evolve(
                base,
                speculative=True,
                num_lookahead_tokens=speculation.num_lookahead_tokens,
                num_prefill_lookahead_tokens=speculation.num_prefill_lookahead_tokens,
                num_extra_draft_slots=speculation.num_extra_draft_slots,
            )
        self.config = base
        k_max = speculation.num_speculative_tokens if speculation else 0
        dtype = next(model.parameters()).dtype
        num_blocks = cache.num_blocks
        if num_blocks is None:
            per_request = -(-(base.max_model_len + base.num_lookahead_tokens + k_max + 1) // cache.block_size)
            num_blocks = base.max_num_seqs * per_request
            if cache.kv_cache_memory_bytes is not None:
                block_bytes = KVCache.bytes_per_block(
                    num_layers=cfg.num_hidden_layers,
                    block_size=cache.block_size,
                    num_kv_heads=cfg.num_key_value_heads,
                    head_dim=cfg.head_dim,
                    dtype=dtype,
                )
                num_blocks = min(num_blocks, max(per_request, cache.kv_cache_memory_bytes // block_bytes))
        # Refuse an impossible pool before the block manager or the cache allocates anything.
        from specpath_engine.modeling.memory import require_memory

        kv_bytes = (cfg.num_hidden_layers * 2 * num_blocks * cache.block_size * cfg.num_key_value_heads
                    * cfg.head_dim * dtype.itemsize)
        require_memory(kv_bytes, f"a KV cache of {num_blocks} blocks (max_model_len={base.max_model_len})", "engine")
        self.model = model
        self.tokenizer = tokenizer
        self.eos_token_ids = tuple(eos_token_ids)
        self.seed = seed
        self.races_unseeded = speculation.races_unseeded if speculation is not None else True
        self.device = torch.device(device)
        self.blocks = BlockManager(
            num_blocks,
            cache.block_size,
            enable_prefix_caching=cache.enable_prefix_caching,
            num_hash_lookahead_tokens=speculation.num_hash_lookahead_tokens if speculation else 0,
            use_eagle_block_drop=speculation.use_eagle_block_drop if speculation else False,
        )
        if speculation is None:
            k_for = lambda n: 0  # noqa: E731
        elif speculation.k_for_batch_size is None:
            k_for = lambda n, k=speculation.num_speculative_tokens: k  # noqa: E731
        else:
            k_for = speculation.k_for_batch_size
        self.scheduler = Scheduler(base, self.blocks, k_for)
        self.kv_cache = KVCache(
            num_layers=cfg.num_hidden_layers,
            num_blocks=num_blocks,
            block_size=cache.block_size,
            num_kv_heads=cfg.num_key_value_heads,
            head_dim=cfg.head_dim,
            dtype=dtype,
            device=self.device,
        )
        self.runner = ModelRunner(
            model,
            self.scheduler,
            self.kv_cache,
            speculator=speculation.speculator if speculation else None,
            uses_target_hidden_states=speculation.uses_target_hidden_states if speculation else False,
            verify_method=speculation.verify_method if speculation else "standard",
            verify_options=speculation.verify_options if speculation else None,
            verify_trees=speculation.verify_trees if speculation else False,
            governor=speculation.governor if speculation else None,
            skips_backed_off=speculation.skips_backed_off if speculation else False,
            catch_up_window=speculation.catch_up_window if speculation else 0,
            tokenizer=tokenizer,
            device=self.device,
        )
        self.thread_adapter = thread_adapter
        """A :class:`~specpath_engine.adaptive_threads.ThreadAdapter` fed every step's wall time, or None
        (the thread count stays as it is)."""
        self.num_threads = num_threads
        """Without an adapter, the count each step runs at (None: whatever the process has). The
        count is process-wide and engines in one process take turns (``specpath bench``), so each
        step claims it back, as an adapter's ``claim`` does."""
        self._ids = itertools.count()
        self.last_metrics = SpecMetrics()
        """Aggregate metrics of the last finished ``generate`` / ``stream`` call."""

    @classmethod
    def from_config(
        cls,
        model: Any,
        engine_config: Any,
        *,
        speculator: BaseSpeculator | None = None,
        max_model_len: int | None = None,
        tree_verification: bool = True,
        load_model: Callable[..., Any] | None = None,
        **options: Any,
    ) -> LLMEngine:
        """The one path from an ``EngineConfig`` to the engine's settings: its scheduler budgets
        and context length (``max_model_len`` overrides the model config's, else the target's
        own), its ``cache_config`` as is, and, with a ``speculative_config``, the speculator
        (built with :func:`speculator_context` unless given) and its forwarding properties.
        ``tree_verification``: verify drafters' token trees where the verification mode allows;
        ``load_model``: the drafter-model loader lent to the speculator. ``options`` go to the
        engine (``tokenizer``, ``eos_token_ids``, ``seed``, ``device``, ``thread_adapter``)."""
        budgets = engine_config.scheduler_config
        model_config = engine_config.model_config
        if max_model_len is None and model_config is not None:
            max_model_len = model_config.max_model_len
        scheduler = SchedulerSettings(
            max_num_seqs=budgets.max_num_seqs,
            max_num_batched_tokens=budgets.max_num_batched_tokens,
            max_model_len=max_model_len or model.config.max_position_embeddings,
            enable_chunked_prefill=budgets.enable_chunked_prefill,
        )
        speculation = None
        if engine_config.speculative_config is not None:
            from specpath_engine.tree_layout import verifies_trees

            trees = verifies_trees(engine_config.speculative_config.rejection_sample_method, tree_verification)
            draft_quantization = drafter_quantization(
                engine_config.speculative_config,
                getattr(torch, model_config.dtype) if model_config is not None else next(model.parameters()).dtype,
                options.get("device", "cpu"))
            from specpath_engine import draft_overrides

            overrides = draft_overrides.resolve(engine_config.speculative_config)  # refused: one line, now
            if speculator is None:
                from specpath.factory import create_speculator

                target = {} if model_config is None else dict(
                    dtype=getattr(torch, model_config.dtype), target_config=model_config.hf_config.to_dict())
                context = speculator_context(model, device=options.get("device", "cpu"), **target,
                                             max_model_len=scheduler.max_model_len, max_num_seqs=scheduler.max_num_seqs,
                                             verifies_trees=trees, load_model=load_model,
                                             draft_quantization=draft_quantization, draft_overrides=overrides)
                speculator = create_speculator(engine_config.speculative_config, context)
            speculation = speculation_settings(engine_config, speculator, verify_trees=trees, target=model)
        return cls(model, scheduler=scheduler, cache=engine_config.cache_config, speculation=speculation, **options)

    # ------------------------------------------------------------------------------ API
    def add_request(self, prompt_token_ids: Sequence[int], params: SamplingParams, req_id: str | None = None) -> Request:
        from specpath_engine.arguments import check_token_ids

        prompt = check_token_ids("prompt_token_ids", prompt_token_ids, self.model.config.vocab_size)
        n = next(self._ids)
        generator = None
        if not isinstance(params, SamplingParams):
            raise TypeError(f"sampling params must be SamplingParams, got {type(params).__name__}")
        seed = params.seed if params.seed is not None else (self.seed * 1_000_003 + n) % (1 << 63)
        noise = None
        if params.samples:
            generator = torch.Generator(device=self.device).manual_seed(seed)
            # the race (specpath_engine.sample.race): its noise a function of the seed and the
            # position, so drafts couple to the sample; unseeded, of the seed given above
            if params.seed is not None or self.races_unseeded:
                from specpath_engine.sample.noise import SeededNoise

                noise = SeededNoise(seed, self.model.config.vocab_size, self.device)
        stop_ids = set(params.stop_token_ids)
        if not params.ignore_eos:
            stop_ids.update(self.eos_token_ids)
        request = Request(
            req_id=req_id if req_id is not None else str(n),
            prompt_token_ids=prompt,
            params=params,
            generator=generator,
            seed=seed,
            noise=noise,
            stop_token_ids=frozenset(stop_ids),
            arrival_time=time.perf_counter(),
        )
        self.scheduler.add_request(request)
        return request

    def abort_request(self, request: Request, reason: str = "abort") -> None:
        """Stop ``request`` now: its blocks are freed and the speculator (and the draft-length
        governor) forget it."""
        if request.is_finished:
            return
        self.scheduler.finish(request, reason)
        if self.runner.governor is not None:
            self.runner.governor.remove(request.req_id)
        if self.runner.speculator is not None:
            try:
                self.runner.speculator.remove_request(request.req_id)
            except Exception as exc:  # a failing drafter must not keep the engine from cleaning up
                request.error = request.error or _one_line(exc)

    @property
    def has_unfinished(self) -> bool:
        return self.scheduler.has_unfinished

    def step(self) -> list[Request]:
        """Schedule and run one step; returns the requests that finished."""
        out = self.scheduler.schedule()
        if not out.scheduled and not out.preempted and self.scheduler.has_unfinished:
            raise RuntimeError("scheduler made no progress: KV cache or token budget too small for the waiting request")
        try:
            adapter = self.thread_adapter
            if adapter is None:
                if self.num_threads is not None and torch.get_num_threads() != self.num_threads:
                    torch.set_num_threads(self.num_threads)
                return self.runner.execute(out)
            adapter.claim()
            start = time.perf_counter()
            runner = self.runner
            finished = runner.execute(out)
            if runner.step_rows:
                # keyed by the rows the target ran and whether the drafter was called: that call
                # comes and goes with the governor's choices, and keyed only by the scheduled
                # tokens, a speculative engine's steps looked like a changed machine (DFlash over
                # int4, 6 chat replies: 4 switches and 15 probes, 0.90x of plain decoding, against
                # none at a fixed count); its time stays in (the drafter runs at the count too)
                adapter.observe(runner.step_rows, time.perf_counter() - start, drafted=runner.step_drafted)
            return finished
        except Exception as exc:
            # A step is all-or-nothing for the requests in it: the failing part (speculator,
            # sampler, model) cannot be pinned on one request, so each of them is aborted with
            # its blocks and drafter state freed; every other request and the engine stay usable.
            failed = [s.request for s in out.scheduled if not s.request.is_finished]
            line = _one_line(exc)
            for r in failed:
                r.error = line
                self.abort_request(r, "error")
            raise RequestFailedError(failed, exc) from exc

    def generate(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams | Sequence[SamplingParams]
    ) -> tuple[list[Request], SpecMetrics]:
        """Run ``prompts`` to completion; requests in prompt order and the aggregate metrics."""
        steps = self.stream(prompts, params)
        for requests in steps:
            pass
        return requests, self.last_metrics

    def stream(
        self, prompts: Sequence[Sequence[int]], params: SamplingParams | Sequence[SamplingParams]
    ) -> Iterator[list[Request]]:
        """Run ``prompts`` to completion, yielding the requests (prompt order) after every step,
        so a caller sees each verified chunk as it lands; ``last_metrics`` is the aggregate once
        exhausted. Closing the iterator early aborts the call's unfinished requests."""
        per = list(params) if isinstance(params, (list, tuple)) else [params] * len(prompts)
        if len(per) != len(prompts):
            raise ValueError(f"got {len(per)} SamplingParams for {len(prompts)} prompts")
        return self._run(prompts, per)

    def _run(self, prompts: Sequence[Sequence[int]], per: list[SamplingParams]) -> Iterator[list[Request]]:
        start = time.perf_counter()
        requests: list[Request] = []
        try:
            for p, sp in zip(prompts, per):
                requests.append(self.add_request(p, sp))
            while self.has_unfinished:
                self.step()
                if self.has_unfinished:
                    yield requests
        except BaseException as exc:
            # generate() is one call: when part of it fails, none of it stays queued.
            for r in requests:
                self.abort_request(r)
            if isinstance(exc, RequestFailedError):
                raise RequestFailedError(exc.requests, exc.__cause__, all_requests=requests) from exc.__cause__
            raise
        elapsed = time.perf_counter() - start
        self.last_metrics = SpecMetrics.total((r.metrics for r in requests), elapsed_s=elapsed)
        if self.runner.governor is not None:
            self.last_metrics.step_costs = self.runner.governor.summary()
        yield requests  # the last step's tokens, with last_metrics set
