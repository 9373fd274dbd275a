"""The engine's arguments checked where they enter (``LLM(...)``, ``specpath run``), so a bad one is
one :class:`EngineArgumentError` line instead of an ``AssertionError`` from torch, a libgomp abort
or a failure several calls later."""

from __future__ import annotations

import os
from typing import Any

from specpath.errors import InputError, closest_match

MAX_THREADS_PER_CPU = 4
"""``num_threads`` may oversubscribe the CPUs this process may use at most this many times:
beyond that, OpenMP thread creation fails (and kills the process) long before it helps."""


class EngineArgumentError(InputError):
    """A bad argument to the engine (``LLM(...)``, ``specpath run``): the message names it, the
    value and what is allowed."""


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def check_int(name: str, value: Any, *, lo: int, hi: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]``: bools, floats and strings are refused, not converted."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise EngineArgumentError(f"{name}: expected an integer, got {type(value).__name__} {_short(value)}")
    if value < lo or (hi is not None and value > hi):
        bound = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
        raise EngineArgumentError(f"{name}: expected an integer {bound}, got {_short(value)}")
    return value


def check_threads(num_threads: Any) -> int | None:
    """None (leave torch's setting) or a thread count the machine can run."""
    if num_threads is None:
        return None
    cpus = usable_cpus()
    limit = MAX_THREADS_PER_CPU * cpus
    if isinstance(num_threads, int) and not isinstance(num_threads, bool) and num_threads > limit:
        raise EngineArgumentError(
            f"num_threads: {_short(num_threads)} is more than {MAX_THREADS_PER_CPU} per CPU of the {cpus} "
            f"this process may use (at most {limit}; 1 is best for small models)"
        )
    return check_int("num_threads", num_threads, lo=1, hi=limit)


SEED_RANGE = (0, 2**63 - 1)


def check_seed(seed: Any) -> int:
    return check_int("seed", seed, lo=SEED_RANGE[0], hi=SEED_RANGE[1])


def check_device(device: Any) -> str:
    """A device torch can run here: ``cpu``, or ``cuda``/``cuda:N``/``xpu``/``mps`` when present."""
    import torch

    if not isinstance(device, (str, torch.device)):
        raise EngineArgumentError(f"device: expected a string such as 'cpu' or 'cuda', got {type(device).__name__}")
    text = str(device)
    try:
        parsed = torch.device(text)
    except (RuntimeError, ValueError):
        raise EngineArgumentError(f"device: {text!r} is not a torch device (e.g. 'cpu', 'cuda', 'cuda:1')") from None
    if parsed.type == "cpu":
        return text
    backend = getattr(torch, parsed.type, None)
    available = getattr(backend, "is_available", None)
    if available is None or not available():
        raise EngineArgumentError(
            f"device: {text!r} is not available in this torch build or on this machine (use device='cpu')"
        )
    count = getattr(backend, "device_count", lambda: 1)()
    if parsed.index is not None and parsed.index >= count:
        raise EngineArgumentError(f"device: {text!r} does not exist; this machine has {count} {parsed.type} device(s)")
    return text


def check_dtype(dtype: Any) -> str:
    """A dtype name the engine runs (``specpath_engine.dtype.ENGINE_DTYPES`` and its aliases)."""
    from specpath_engine.dtype import _ALIASES, ENGINE_DTYPES

    if not isinstance(dtype, str):
        raise EngineArgumentError(f"dtype: expected a string, one of {', '.join(ENGINE_DTYPES)}; got {type(dtype).__name__}")
    if _ALIASES.get(dtype, dtype) not in ENGINE_DTYPES:
        hint = "float32" if dtype.startswith("float") else closest_match(dtype, ENGINE_DTYPES)  # float64: the widest
        mean = f"; did you mean {hint!r}?" if hint else ""
        raise EngineArgumentError(f"dtype: {dtype!r} is not supported (allowed: {', '.join(ENGINE_DTYPES)}{mean})")
    return dtype


def _short(value: Any) -> str:
    from specpath.errors import _short as short

    return short(value)


def check_token_ids(name: str, ids: Any, vocab_size: int) -> list[int]:
    """A non-empty list of token ids in ``[0, vocab_size)``: floats, strings and bools are refused
    (``1.7`` is not token 1), integer-like types (numpy, 0-d tensors) taken as ints."""
    import operator

    if isinstance(ids, (str, bytes)) or not hasattr(ids, "__iter__"):
        raise EngineArgumentError(f"{name}: expected a string or a list of token ids, got {type(ids).__name__}")
    out: list[int] = []
    for i, t in enumerate(ids):
        try:
            if isinstance(t, bool):
                raise TypeError
            value = operator.index(t)
        except TypeError:
            raise EngineArgumentError(
                f"{name}[{i}]: token ids are integers, got {type(t).__name__} {_short(t)}"
            ) from None
        if not 0 <= value < vocab_size:
            raise EngineArgumentError(f"{name}[{i}]: token id {_short(value)} is outside [0, {vocab_size})")
        out.append(value)
    if not out:
        raise EngineArgumentError(f"{name} is empty: give at least one token")
    return out


def check_prompt_text(name: str, text: str) -> str:
    """A prompt string that has text and can be encoded (no lone surrogates)."""
    if not text:
        raise EngineArgumentError(f"{name} is empty: give some text to continue")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EngineArgumentError(
            f"{name}: not valid text ({exc.reason} at character {exc.start}: {text[exc.start]!r})"
        ) from None
    return text
