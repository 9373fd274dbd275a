"""The entry-point module of ``eagle`` and ``extract_hidden_states``: hook implementations only.

specpath imports it on first use of either method or when it looks for a plugin that
recognises a draft checkpoint, so it imports nothing heavy (the config classes are attrs-only;
the speculators, which need torch, are named by strings).
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``eagle`` and ``extract_hidden_states`` to their config classes."""
    from specpath_eagle.config import EagleSpeculatorConfig, ExtractHiddenStatesSpeculatorConfig

    register("eagle", EagleSpeculatorConfig)
    register("extract_hidden_states", ExtractHiddenStatesSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise EAGLE and EAGLE-3 heads from ``config.json`` (architectures, ``model_type``).

    Path hints are left to ``EagleSpeculatorConfig.matches`` / ``Eagle3SpeculatorConfig.matches``,
    which the core tries after every plugin's detection hook, in the article's order.
    """
    from specpath_eagle.config import method_from_checkpoint_config

    if checkpoint is None:
        return None
    return method_from_checkpoint_config(checkpoint.config)
