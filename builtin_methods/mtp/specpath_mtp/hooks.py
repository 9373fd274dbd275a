"""The entry-point module of ``mtp``: hook implementations only.

specpath imports it on first use of ``mtp`` (or of any MTP model-type alias, which the core
normalises to ``mtp`` first) or when it asks the plugins to recognise a draft checkpoint; it
imports nothing heavy (the config classes are attrs-only, the speculators are
named by strings).
"""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``mtp`` to ``MTPSpeculatorConfig`` (its ``specialize`` picks the multi-module class)."""
    from specpath_mtp.config import MTPSpeculatorConfig

    register("mtp", MTPSpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise an MTP checkpoint from its own ``config.json``: an ``*_mtp`` ``model_type``, or
    a target that carries MTP layers (DeepSeek-V3, GLM-4.5, MiMo, Qwen3-Next, ...), renamed as
    vLLM renames it (``specpath_mtp.recognise``)."""
    from specpath_mtp.recognise import mtp_type

    if checkpoint is None:
        return None
    return "mtp" if mtp_type(checkpoint.config) is not None else None


@hookimpl
def specpath_demo(method, config_class, target):
    """The embedded model: the shipped module at K = 4 (the best K = 1..4 measured for one
    module); another target: the method's defaults."""
    from specpath.demo import shipped_or_defaults

    if method != "mtp":
        return None
    return shipped_or_defaults(config_class, target, num_speculative_tokens=config_class.shipped_drafter_k)
