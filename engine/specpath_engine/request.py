"""A request as the engine tracks it, and the sampling parameters users give it."""

from __future__ import annotations

import enum
import math
import numbers
from collections.abc import Sequence
from typing import Any

import attrs

from specpath_engine.block_manager import BlockTable
from specpath_engine.metrics import SpecMetrics
from specpath_engine.sample.processing import GREEDY_EPS


class SamplingParamsError(ValueError):
    """An invalid ``SamplingParams`` field, rejected when the params are built (one line)."""


def _fail(name: str, problem: str, value: Any) -> SamplingParamsError:
    if isinstance(value, int) and value.bit_length() > 200:
        text = f"an integer of {value.bit_length()} bits"  # repr() itself fails past 4,300 digits
    else:
        text = repr(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return SamplingParamsError(" ".join(f"SamplingParams.{name}: {problem} (got {text})".split()))


def _real(name: str, value: Any, *, lo: float, lo_open: bool = False, hi: float | None = None) -> float:
    """A finite real in the range; bools and strings are refused (``True`` is not a temperature)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise _fail(name, "must be a number", value)
    try:
        number = float(value)
    except OverflowError:
        raise _fail(name, "is too large", value) from None
    if not math.isfinite(number):
        raise _fail(name, "must be finite", value)
    if number < lo or (lo_open and number == lo) or (hi is not None and number > hi):
        bounds = f"{'(' if lo_open else '['}{lo:g}, {'inf)' if hi is None else f'{hi:g}]'}"
        raise _fail(name, f"must lie in {bounds}", value)
    return number


def _integer(name: str, value: Any, *, lo: int, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise _fail(name, "must be an integer", value)
    number = int(value)
    if number < lo or (hi is not None and number > hi):
        raise _fail(name, f"must lie in [{lo}, {'inf)' if hi is None else f'{hi}]'}", value)
    return number


def _stop_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = (value,)
    elif not isinstance(value, (list, tuple)):
        raise _fail("stop", "must be a string or a list of strings", value)
    for s in value:
        if not isinstance(s, str) or not s:
            raise _fail("stop", "every stop string must be a non-empty string", s)
    return tuple(value)


def _token_ids(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple, set, frozenset)):
        raise _fail("stop_token_ids", "must be a list of token ids", value)
    return tuple(_integer("stop_token_ids", t, lo=0) for t in value)


_SEED_RANGE = (-(1 << 63), (1 << 64) - 1)


@attrs.frozen(kw_only=True)
class SamplingParams:
    """How to sample one request's continuation.

    Every field is checked when the params are built (type, finiteness, range), so a bad value
    is one :class:`SamplingParamsError` line at the call site, never a failure mid-step.
    """

    temperature: float = attrs.field(default=0.0, converter=lambda v: _real("temperature", v, lo=0.0))
    """0 = greedy."""
    top_k: int = attrs.field(default=0, converter=lambda v: _integer("top_k", v, lo=0))
    """Keep the k most likely tokens; 0 disables."""
    top_p: float = attrs.field(default=1.0, converter=lambda v: _real("top_p", v, lo=0.0, lo_open=True, hi=1.0))
    """Keep the smallest nucleus with this much mass; 1 disables."""
    max_tokens: int = attrs.field(default=64, converter=lambda v: _integer("max_tokens", v, lo=1))
    """Most tokens to generate."""
    seed: int | None = attrs.field(
        default=None, converter=lambda v: None if v is None else _integer("seed", v, lo=_SEED_RANGE[0], hi=_SEED_RANGE[1])
    )
    """Seed of the request's own random numbers: they depend only on the seed and the position,
    so the same seed gives the same tokens in any batch, with any drafter and draft length and
    across preemption: under lossless standard verification a seeded request's speculative
    output is its plain output, token for token (``specpath_engine.sample.race``). Without a
    seed, sampled output follows the target's distribution exactly, but its tokens depend on
    the drafts."""
    stop: tuple[str, ...] = attrs.field(default=(), converter=_stop_list)
    """Strings that end generation; the text excludes the stop string."""
    stop_token_ids: tuple[int, ...] = attrs.field(default=(), converter=_token_ids)
    """Token ids that end generation (excluded from the output)."""
    ignore_eos: bool = attrs.field(default=False)
    """Keep generating past the model's end-of-sequence token."""

    @property
    def samples(self) -> bool:
        """Whether tokens are drawn at random: temperatures below the verifier's greedy threshold
        (``specpath_engine.sample.processing.GREEDY_EPS``) are argmax, on every path alike."""
        return self.temperature >= GREEDY_EPS

    @ignore_eos.validator
    def _check_ignore_eos(self, attribute, value) -> None:
        if not isinstance(value, bool):
            raise _fail("ignore_eos", "must be True or False", value)


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@attrs.define(kw_only=True, eq=False)
class Request:
    """Mutable engine-side state of one request."""

    req_id: str
    prompt_token_ids: list[int]
    params: SamplingParams
    token_ids: list[int] = attrs.field(factory=list)
    """Prompt then generated tokens: only final tokens, never unverified drafts."""
    num_computed_tokens: int = 0
    """Positions whose KV is final. Rolling back rejected drafts only moves this pointer."""
    num_delivered_positions: int = 0
    """Committed positions already handed to the speculator."""
    table: BlockTable = attrs.field(factory=BlockTable)
    status: RequestStatus = RequestStatus.WAITING
    finish_reason: str | None = None
    """"length", "stop", "abort", "error" or None while running."""
    error: str | None = None
    """One line (``Type: message``) when a step failed under the request (finish_reason "error")."""
    generator: Any = None
    """A ``torch.Generator`` when the request samples (None when greedy). The drafter and the
    verifier each get a fresh generator per step keyed by ``seed`` and the step's position
    instead (``specpath_engine.sample.randomness``), so a step re-run after preemption draws
    the same numbers."""
    seed: int = 0
    """The request's seed; the verifier's random numbers at a step depend only on it and the
    step's first position (``specpath_engine.sample.randomness.position_generator``)."""
    noise: Any = None
    """A :class:`~specpath_engine.sample.noise.SeededNoise` of ``seed`` when the request samples
    (with a seed of its own, or, unless the drafts are random, the engine's): its tokens are then
    the race winners on that noise, the same whatever drafted them
    (``specpath_engine.sample.race``); None otherwise."""
    stop_token_ids: frozenset[int] = frozenset()
    arrival_time: float = 0.0
    finish_time: float = 0.0
    metrics: SpecMetrics = attrs.field(factory=SpecMetrics)
    num_preemptions: int = 0

    def __attrs_post_init__(self) -> None:
        if not self.token_ids:
            self.token_ids = list(self.prompt_token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def output_token_ids(self) -> list[int]:
        return self.token_ids[len(self.prompt_token_ids) :]

    @property
    def num_output_tokens(self) -> int:
        return len(self.token_ids) - len(self.prompt_token_ids)

    @property
    def num_uncomputed(self) -> int:
        """Tokens not yet in the KV cache; 1 means the request is decoding."""
        return len(self.token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status is RequestStatus.FINISHED


def as_token_lists(prompts: Any) -> list[Sequence[int] | str]:
    """Normalise ``generate``'s prompts: one str, one id list, or a list of either."""
    if isinstance(prompts, str):
        return [prompts]
    if callable(getattr(prompts, "tolist", None)):  # a tensor or an array of ids (1-d: one prompt)
        prompts = prompts.tolist()
        if not isinstance(prompts, list):
            prompts = [prompts]
    prompts = list(prompts)
    if prompts and all(isinstance(t, numbers.Number) for t in prompts):
        return [prompts]  # one list of ids (a non-integer among them is refused when checked)
    return prompts
