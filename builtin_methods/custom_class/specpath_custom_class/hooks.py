"""The entry-point module of ``custom_class``: hook implementations only."""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind the built-in name ``custom_class`` to its config class."""
    from specpath_custom_class.config import CustomClassSpeculatorConfig

    register("custom_class", CustomClassSpeculatorConfig)


@hookimpl
def specpath_demo(method):
    """Left out of ``specpath demo``: the proposer is the user's own code."""
    from specpath.demo import leave_out

    return leave_out("the proposer is the user's own code") if method == "custom_class" else None
