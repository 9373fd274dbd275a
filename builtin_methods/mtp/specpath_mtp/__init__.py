"""specpath-mtp: multi-token prediction drafting (method ``mtp``, single- and multi-module).

Light on import: the config classes and the shipped checkpoint paths only; the modules and
speculators (torch) live in :mod:`specpath_mtp.module` and :mod:`specpath_mtp.speculator`.
"""

from specpath_mtp.config import MTP1, MTP3, MTPSpeculatorConfig, MultiModuleMTPSpeculatorConfig

__all__ = ["MTP1", "MTP3", "MTPSpeculatorConfig", "MultiModuleMTPSpeculatorConfig"]
