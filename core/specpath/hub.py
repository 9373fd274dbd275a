"""Hub ids (``org/name``) resolved from the local Hugging Face cache, never the network.

Users name published checkpoints the way the ecosystem does (``yuhuili/EAGLE3-LLaMA3.1-
Instruct-8B``); specpath reads them from the cache that ``huggingface-cli download`` (or any
``huggingface_hub`` client) filled, in its documented layout::

    <cache>/models--<org>--<name>/refs/<revision>        -> a commit hash
    <cache>/models--<org>--<name>/snapshots/<hash>/...   -> config.json, model.safetensors

The cache is ``$HF_HUB_CACHE`` (or the legacy ``$HUGGINGFACE_HUB_CACHE``), else
``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else ``~/.cache/huggingface/hub``
-- the order ``huggingface_hub`` uses. A missing entry is one line saying where specpath
looked; nothing is ever downloaded.
"""

from __future__ import annotations

import os
import re

from specpath.errors import SpeculativeConfigError

_HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")
_COMMIT = re.compile(r"[0-9a-f]{40}")
DEFAULT_REVISION = "main"


def hub_cache_dir() -> str:
    """The hub cache directory ``huggingface_hub`` would use in this environment."""
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        value = os.environ.get(name)
        if value:
            return os.path.expanduser(value)
    home = os.environ.get("HF_HOME")
    if not home:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        home = os.path.join(xdg, "huggingface")
    return os.path.join(os.path.expanduser(home), "hub")


def is_hub_id(value: object) -> bool:
    """``org/name`` that is not an existing local path (a local directory always wins)."""
    return (
        isinstance(value, str)
        and _HUB_ID.fullmatch(value) is not None
        and ".." not in value
        and not os.path.exists(value)
    )


def hub_snapshot_dir(repo_id: str, revision: str | None = None, *, field: str = "model",
                     cache_dir: str | None = None) -> str:
    """The local snapshot directory of ``repo_id`` at ``revision`` (a branch/tag name with a
    ``refs/`` entry, or a commit hash) in ``cache_dir`` (default :func:`hub_cache_dir`), or a
    one-line error naming the path looked at."""
    revision = revision or DEFAULT_REVISION
    org, name = repo_id.split("/", 1)
    repo_dir = os.path.join(os.path.expanduser(cache_dir) if cache_dir else hub_cache_dir(), f"models--{org}--{name}")
    ref = os.path.join(repo_dir, "refs", revision)
    if _COMMIT.fullmatch(revision):
        commit = revision
        looked = os.path.join(repo_dir, "snapshots", commit)
    elif os.path.isfile(ref):
        try:
            with open(ref, encoding="utf-8") as fh:
                commit = fh.read().strip()
        except OSError as exc:
            raise SpeculativeConfigError(f"cannot read the hub cache ref {ref}: {exc}", field=field, value=repo_id) from None
        looked = os.path.join(repo_dir, "snapshots", commit)
    else:
        raise SpeculativeConfigError(
            f"is not in the local Hugging Face cache (looked for {ref}); specpath never downloads: "
            f"fetch it first, e.g. `huggingface-cli download {repo_id}`, or pass a local directory",
            field=field,
            value=repo_id,
        )
    if not os.path.isdir(looked):
        raise SpeculativeConfigError(
            f"the local Hugging Face cache has no snapshot {looked} (revision {revision!r}); "
            "specpath never downloads: fetch it first or pass a local directory",
            field=field,
            value=repo_id,
        )
    return looked


def resolve_model_path(value: str, revision: str | None = None, *, field: str = "model",
                       cache_dir: str | None = None) -> str:
    """A local directory as given; a hub id as its cached snapshot directory (in ``cache_dir``,
    e.g. a ``LoadConfig.download_dir``, else the default cache); anything else unchanged (the
    caller reports what is wrong with it)."""
    if is_hub_id(value):
        return hub_snapshot_dir(value, revision, field=field, cache_dir=cache_dir)
    return value
