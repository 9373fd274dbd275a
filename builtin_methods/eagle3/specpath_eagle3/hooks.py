"""The entry-point module of ``eagle3``: hook implementations only (no torch import)."""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind ``eagle3`` to its config class."""
    from specpath_eagle3.config import Eagle3SpeculatorConfig

    register("eagle3", Eagle3SpeculatorConfig)


@hookimpl
def specpath_detect_method(checkpoint):
    """Recognise an EAGLE-3 head from ``config.json`` (architectures, ``model_type``,
    ``speculators_model_type``)."""
    from specpath_eagle3.recognise import is_eagle3_checkpoint

    if checkpoint is None:
        return None
    return "eagle3" if is_eagle3_checkpoint(checkpoint.config) else None


@hookimpl(trylast=True, specname="specpath_detect_method")
def detect_eagle3_by_path(checkpoint):
    """The path hint ``eagle3`` (``eagle-`` wins when both appear), asked after every plugin's
    config evidence, and only for a checkpoint whose ``config.json`` says nothing about EAGLE."""
    from specpath_eagle3.recognise import path_says_eagle3, says_eagle

    if checkpoint is None or says_eagle(checkpoint.config):
        return None
    return "eagle3" if path_says_eagle3(checkpoint.path) else None


@hookimpl
def specpath_demo(method, config_class, target):
    """The embedded model: the shipped head at K = 4; another target: the method's defaults."""
    from specpath.demo import shipped_or_defaults

    if method != "eagle3":
        return None
    return shipped_or_defaults(config_class, target, num_speculative_tokens=config_class.shipped_drafter_k)
