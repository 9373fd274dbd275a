"""The entry-point module (``specpath.methods`` -> ``freqgram``): hook implementations only.

specpath imports this module the first time the method is used, so it stays light: the
config class is attrs-only and the speculator (which imports torch) is named by a string.
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind the method name to its config class."""
    from specpath_freqgram.config import FreqgramSpeculatorConfig

    register("freqgram", FreqgramSpeculatorConfig)


@hookimpl
def specpath_demo(method):
    """What ``specpath demo`` runs for the method: its defaults (``specpath.demo.run(**fields)``
    to set some, ``leave_out(reason)`` to stay out of the demo)."""
    from specpath.demo import run

    return run() if method == "freqgram" else None
