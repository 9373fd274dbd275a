"""Shared pieces of the reliability suite."""

from __future__ import annotations


def installed_methods() -> list[tuple[str, dict]]:
    """(method, config) of every installed method that drafts, as ``specpath demo`` runs them."""
    from specpath import plugins
    from specpath.engine.cli_run import demo_configs

    plugins.reset()  # scan every installed distribution, whatever another test module narrowed
    return demo_configs(3)[0]
