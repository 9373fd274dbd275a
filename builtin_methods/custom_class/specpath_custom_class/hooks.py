"""The entry-point module of ``custom_class``: hook implementations only."""

from specpath.hookspecs import hookimpl


@hookimpl
def specpath_register_methods(register):
    """Bind the built-in name ``custom_class`` to its config class."""
    from specpath_custom_class.config import CustomClassSpeculatorConfig

    register("custom_class", CustomClassSpeculatorConfig)
