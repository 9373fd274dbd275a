"""Where specpath keeps what it makes on a machine: ``$SPECPATH_CACHE_DIR``, else ``~/.cache/specpath``.

``native/`` the built kernels, ``models/`` named models converted to HF directories,
``venvs/<engine>/`` the peer engines' virtual environments the benchmarks drive (each
``docs/bridges`` page says how to make one). Nothing in a shipped file names a directory of
the machine that made it; defaults point here.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """specpath's cache directory."""
    return Path(os.environ.get("SPECPATH_CACHE_DIR") or Path.home() / ".cache" / "specpath")


def peer_python(engine: str) -> str:
    """The Python of the peer ``engine``'s venv (``vllm``, ``llamacpp``): ``cache_root()/venvs/<engine>``."""
    return str(cache_root() / "venvs" / engine / "bin" / "python")
