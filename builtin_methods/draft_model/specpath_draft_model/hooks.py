"""The entry-point module of ``draft_model``: hook implementations only.

specpath imports it on first use of the method, so it imports nothing heavy: the config class is
attrs-only and the speculator (torch) is named by a string.
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind the built-in name to its config class."""
    from specpath_draft_model.config import StandaloneARSpeculatorConfig

    register("draft_model", StandaloneARSpeculatorConfig)


@hookimpl
def specpath_demo(method, config_class, target):
    """What ``specpath demo`` runs (:func:`specpath_draft_model.config.demo`)."""
    from specpath_draft_model.config import demo

    return demo(config_class, target) if method == "draft_model" else None
