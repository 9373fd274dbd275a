"""The entry-point module of ``ngram`` and ``ngram_gpu``: hook implementations only.

specpath imports it on first use of either method, so it imports nothing heavy: the config
classes are attrs-only and the speculators (torch, numba, triton) are named by strings.
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind both built-in names to their config classes."""
    from specpath_ngram.config import NgramGPUSpeculatorConfig, NgramSpeculatorConfig

    register("ngram", NgramSpeculatorConfig)
    register("ngram_gpu", NgramGPUSpeculatorConfig)


@hookimpl
def specpath_demo(method):
    """Model-free: the demo runs it with its defaults, on any target."""
    from specpath.demo import run

    return run() if method in ("ngram", "ngram_gpu") else None
