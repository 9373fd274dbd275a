"""Shared pieces of the reliability suite."""

from __future__ import annotations


def installed_methods() -> list[tuple[str, dict]]:
    """(method, config) of every installed method that drafts, as ``specpath demo`` runs them."""
    from specpath import plugins
    from specpath_engine.cli_run import demo_configs

    plugins.reset()  # scan every installed distribution, whatever another test module narrowed
    return demo_configs(3)[0]


class Boom(RuntimeError):
    """The failure the transaction tests inject."""


def fail_on_call(n: int, original):
    """``original`` wrapped so that its ``n``-th call raises :class:`Boom`."""
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == n:
            raise Boom(f"injected failure on call {n}")
        return original(*args, **kwargs)

    return wrapper


def assert_clean(llm) -> None:
    """Every KV block free and no request left queued: nothing a failed call could leak."""
    engine = llm.engine
    assert engine.blocks.num_free_blocks == engine.blocks.num_blocks
    assert not engine.scheduler.running and not engine.scheduler.waiting
