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
    """Recognise an EAGLE(-1) head from ``config.json`` (architectures, ``model_type``);
    EAGLE-3 heads are the eagle3 plugin's to recognise."""
    from specpath_eagle.recognise import is_eagle_checkpoint

    if checkpoint is None:
        return None
    return "eagle" if is_eagle_checkpoint(checkpoint.config) else None


@hookimpl(trylast=True, specname="specpath_detect_method")
def detect_eagle_by_path(checkpoint):
    """The path hint ``eagle-``, asked after every plugin's config evidence, and only for a
    checkpoint whose ``config.json`` says nothing about EAGLE."""
    from specpath_eagle.recognise import path_says_eagle, says_eagle

    if checkpoint is None or says_eagle(checkpoint.config):
        return None
    return "eagle" if path_says_eagle(checkpoint.path) else None


@hookimpl
def specpath_demo(method, config_class, target):
    """The embedded model: the shipped head at K = 4; another target: the method's defaults."""
    from specpath.demo import shipped_or_defaults

    if method != "eagle":
        return None
    return shipped_or_defaults(config_class, target, num_speculative_tokens=config_class.shipped_drafter_k)
