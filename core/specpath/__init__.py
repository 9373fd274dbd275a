"""specpath: turn a speculative-decoding ``method`` into an execution path.

The public API is imported lazily, so ``import specpath`` stays light (no torch, no
triton, no plugin module): names resolve on first attribute access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from specpath.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS: dict[str, str] = {
    "SpeculativeConfig": "specpath.config.speculative",
    "DraftCheckpoint": "specpath.config.checkpoint",
    "SpeculatorConfig": "specpath.config.speculator",
    "DraftModelSpeculatorConfig": "specpath.config.speculator",
    "ModelConfig": "specpath.config.model",
    "ParallelConfig": "specpath.config.model",
    "CacheConfig": "specpath.config.model",
    "SchedulerConfig": "specpath.config.model",
    "EngineConfig": "specpath.config.engine",
    "create_speculative_config": "specpath.config.args",
    "register_speculative_method": "specpath.registry",
    "registered_speculative_methods": "specpath.lookup",
    "get_custom_speculator_config_class": "specpath.lookup",
    "SpeculativeMethod": "specpath.methods",
    "SpeculativeConfigError": "specpath.errors",
    "create_speculator": "specpath.factory",
    "hookimpl": "specpath.hookspecs",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__ = lazy_exports(__name__, _EXPORTS)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:  # pragma: no cover
    from specpath.config.args import create_speculative_config
    from specpath.config.engine import EngineConfig
    from specpath.config.model import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
    from specpath.config.checkpoint import DraftCheckpoint
    from specpath.config.speculative import SpeculativeConfig
    from specpath.config.speculator import DraftModelSpeculatorConfig, SpeculatorConfig
    from specpath.errors import SpeculativeConfigError
    from specpath.factory import create_speculator
    from specpath.hookspecs import hookimpl
    from specpath.methods import SpeculativeMethod
    from specpath.lookup import get_custom_speculator_config_class, registered_speculative_methods
    from specpath.registry import register_speculative_method
