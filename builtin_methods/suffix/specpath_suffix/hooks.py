"""The entry-point module of ``suffix``: hook implementations only (imports nothing heavy;
the speculator, which loads numba, is named by a string)."""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind the built-in name ``suffix`` to its config class."""
    from specpath_suffix.config import SuffixSpeculatorConfig

    register("suffix", SuffixSpeculatorConfig)


@hookimpl
def specpath_demo(method):
    """Model-free: the demo runs it with its defaults, on any target."""
    from specpath.demo import run

    return run() if method in ("suffix",) else None
