"""``EngineConfig``: the one place consumers read speculative values from.

The scheduler, the KV manager and warm-up all reserve KV slots for speculation; if each
re-derived "how many" per method they would drift apart. So they read the forwarding
properties here (``num_lookahead_tokens``, ``num_prefill_lookahead_tokens``,
``num_hash_lookahead_tokens``, ``use_eagle_block_drop``), which read the resolved
``SpeculatorConfig``.

vLLM's engine-side rules for speculation are expressed as declared capabilities of the model
runner (:class:`RunnerCapabilities`); vLLM's V1 and V2 model runners are the two presets in
:data:`RUNNER_PRESETS`:

* dynamic K with a full CUDA graph: a runner that cannot replay a full graph with a per-step
  K downgrades ``cudagraph_mode`` from ``full`` to ``piecewise`` (with a warning);
* dynamic K needs either a runner that trims drafts centrally, a speculator that declares
  ``supports_variable_draft_length``, or a method on the runner's whitelist; otherwise the
  table is dropped (static K, with a warning);
* dynamic K is off under data parallelism unless the runner keeps DP ranks in step.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal

import attrs

from specpath.config.model import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
from specpath.config.speculative import SpeculativeConfig
from specpath.errors import SpeculativeConfigError


class EngineConfigWarning(UserWarning):
    """The engine changed a setting to keep a combination safe (e.g. a graph downgrade)."""


@attrs.frozen(kw_only=True)
class RunnerCapabilities:
    """What a model runner can do, as the config layer needs to know it."""

    name: str
    trims_drafts_centrally: bool
    """The runner clips every speculator's drafts to the step's K itself (V2)."""
    full_graph_with_dynamic_k: bool
    """A full CUDA graph stays valid when K changes from step to step."""
    dynamic_k_methods: frozenset[str] | None = None
    """When the runner does not trim centrally: the base methods whose proposers it knows
    handle a per-step K (the article's V1 whitelist); None defers to each speculator's
    ``supports_variable_draft_length``."""
    dynamic_k_with_data_parallel: bool = False
    """DP ranks may choose different K without diverging."""

    def supports_dynamic_k(self, speculator_cls: type) -> bool:
        if self.trims_drafts_centrally:
            return True
        if self.dynamic_k_methods is not None:
            return speculator_cls.base_method in self.dynamic_k_methods
        return bool(speculator_cls.supports_variable_draft_length)


RUNNER_PRESETS: dict[str, RunnerCapabilities] = {
    "v1": RunnerCapabilities(
        name="v1",
        trims_drafts_centrally=False,
        full_graph_with_dynamic_k=False,
        dynamic_k_methods=frozenset({"ngram", "eagle", "eagle3", "mtp", "draft_model", "dflash"}),
    ),
    "v2": RunnerCapabilities(name="v2", trims_drafts_centrally=True, full_graph_with_dynamic_k=True),
}
"""vLLM's two model runners (V1, V2), as capability presets."""


@attrs.frozen(kw_only=True)
class CompilationConfig:
    """Graph capture mode (the reference engine runs eager on CPU; the rules still apply)."""

    cudagraph_mode: Literal["none", "piecewise", "full"] = "none"


def _runner(value: Any) -> RunnerCapabilities:
    if isinstance(value, RunnerCapabilities):
        return value
    if value in RUNNER_PRESETS:
        return RUNNER_PRESETS[value]
    raise SpeculativeConfigError("unknown model runner", field="runner", value=value, allowed=sorted(RUNNER_PRESETS))


@attrs.frozen(kw_only=True)
class EngineConfig:
    """Every config an engine needs, with speculative values forwarded from one place."""

    model_config: ModelConfig | None = None
    parallel_config: ParallelConfig = attrs.field(factory=ParallelConfig)
    cache_config: CacheConfig = attrs.field(factory=CacheConfig)
    scheduler_config: SchedulerConfig = attrs.field(factory=SchedulerConfig)
    compilation_config: CompilationConfig = attrs.field(factory=CompilationConfig)
    speculative_config: SpeculativeConfig | None = None
    runner: RunnerCapabilities = attrs.field(default="v2", converter=_runner)
    """A :class:`RunnerCapabilities` or a preset name (``"v1"``, ``"v2"``)."""
    dynamic_k_table: tuple[tuple[int, int, int], ...] | None = attrs.field(init=False)
    """The dynamic-K table in effect (None: static K), after the runner rules."""

    def __attrs_post_init__(self) -> None:
        spec = self.speculative_config
        table = None if spec is None else spec.num_speculative_tokens_per_batch_size
        if table is not None:
            speculator_cls = type(spec.speculator_config)
            if not self.runner.supports_dynamic_k(speculator_cls):
                warnings.warn(
                    f"dynamic speculation (num_speculative_tokens_per_batch_size) is not supported for "
                    f"method {spec.custom_method or spec.method!r} on the {self.runner.name} runner; "
                    f"using static num_speculative_tokens={spec.num_speculative_tokens}",
                    EngineConfigWarning,
                    stacklevel=3,
                )
                table = None
            elif self.parallel_config.data_parallel_size > 1 and not self.runner.dynamic_k_with_data_parallel:
                warnings.warn(
                    "dynamic speculation is disabled under data parallelism (ranks could pick different K "
                    "and diverge); using static num_speculative_tokens",
                    EngineConfigWarning,
                    stacklevel=3,
                )
                table = None
        if (
            table is not None
            and self.compilation_config.cudagraph_mode == "full"
            and not self.runner.full_graph_with_dynamic_k
        ):
            warnings.warn(
                f"dynamic speculation with a full CUDA graph is not supported by the {self.runner.name} "
                "runner; cudagraph_mode downgraded to 'piecewise' (use the v2 runner to keep 'full')",
                EngineConfigWarning,
                stacklevel=3,
            )
            object.__setattr__(self, "compilation_config", CompilationConfig(cudagraph_mode="piecewise"))
        object.__setattr__(self, "dynamic_k_table", table)

    @classmethod
    def create(
        cls,
        model: str | ModelConfig,
        speculative_config: SpeculativeConfig | Mapping[str, Any] | str | None = None,
        *,
        parallel_config: ParallelConfig | None = None,
        **kwargs: Any,
    ) -> EngineConfig:
        """Build the target ModelConfig (local checkpoint) and resolve the speculative config
        against it. ``speculative_config`` may be a dict, a JSON string or ``@file.yaml``."""
        from specpath.config.args import create_speculative_config, load_speculative_config_text
        from specpath.config.speculators_format import maybe_override_with_speculators

        if isinstance(model, str) and not isinstance(speculative_config, SpeculativeConfig):
            if isinstance(speculative_config, str):
                speculative_config = load_speculative_config_text(speculative_config)
            model, speculative_config = maybe_override_with_speculators(model, speculative_config)
        model_config = model if isinstance(model, ModelConfig) else ModelConfig(model=model)
        parallel_config = parallel_config or ParallelConfig()
        if not isinstance(speculative_config, SpeculativeConfig):
            speculative_config = create_speculative_config(
                speculative_config, target_model_config=model_config, target_parallel_config=parallel_config
            )
        return cls(
            model_config=model_config,
            parallel_config=parallel_config,
            speculative_config=speculative_config,
            **kwargs,
        )

    # -- forwarding properties (read these; never re-derive per method) ----------------

    @property
    def speculator(self) -> Any:
        """The resolved SpeculatorConfig, or None without speculation."""
        return None if self.speculative_config is None else self.speculative_config.speculator_config

    @property
    def num_speculative_tokens(self) -> int:
        return 0 if self.speculative_config is None else self.speculative_config.num_speculative_tokens

    @property
    def num_lookahead_tokens(self) -> int:
        """KV slots to reserve per request beyond its tokens. Consumers must read this property
        rather than re-deriving a per-method lookahead, so scheduler and warm-up agree."""
        return 0 if self.speculator is None else self.speculator.num_lookahead_tokens

    @property
    def num_prefill_lookahead_tokens(self) -> int:
        """A chunked prefill must not end within this many tokens of what the drafter reads;
        the last ``n - 1`` prefilled tokens count as re-prefillable, not final."""
        return 0 if self.speculator is None else self.speculator.num_prefill_lookahead_tokens

    @property
    def max_num_new_slots_for_drafting(self) -> int:
        """Query slots the drafter adds per request beyond its own (drafter side)."""
        return 0 if self.speculator is None else self.speculator.max_num_new_slots_for_drafting

    @property
    def use_eagle_block_drop(self) -> bool:
        """Drop the tail prefix-cache block whose draft KV is not yet stable."""
        return self.speculative_config is not None and self.speculative_config.use_eagle_block_drop()

    @property
    def num_hash_lookahead_tokens(self) -> int:
        """Tokens after each block that prefix-cache block hashes cover: non-zero only with
        prefix caching, the tail-block drop in effect, lookahead hashes not disabled and no
        KV connector (a connector keeps the plain hashes)."""
        spec = self.speculative_config
        if (
            spec is None
            or not self.cache_config.enable_prefix_caching
            or not self.use_eagle_block_drop
            or spec.disable_lookahead_block_hashes
            or self.cache_config.kv_connector is not None
        ):
            return 0
        return self.speculator.num_prefill_lookahead_tokens

    def num_speculative_tokens_for_batch(self, batch_size: int) -> int:
        """K for a step with ``batch_size`` running requests: the dynamic table's entry whose
        inclusive range holds it, else the static ``num_speculative_tokens``."""
        if self.speculative_config is None:
            return 0
        for start, end, k in self.dynamic_k_table or ():
            if start <= batch_size <= end:
                return k
        return self.speculative_config.num_speculative_tokens
