"""A request as the engine tracks it, and the sampling parameters users give it."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Any

import attrs

from specpath.engine.block_manager import BlockTable
from specpath.engine.metrics import SpecMetrics


def _stop_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.frozen(kw_only=True)
class SamplingParams:
    """How to sample one request's continuation."""

    temperature: float = attrs.field(default=0.0, validator=attrs.validators.ge(0.0))
    """0 = greedy."""
    top_k: int = attrs.field(default=0, validator=attrs.validators.ge(0))
    """Keep the k most likely tokens; 0 disables."""
    top_p: float = attrs.field(default=1.0, validator=[attrs.validators.gt(0.0), attrs.validators.le(1.0)])
    """Keep the smallest nucleus with this much mass; 1 disables."""
    max_tokens: int = attrs.field(default=64, validator=attrs.validators.ge(1))
    """Most tokens to generate."""
    seed: int | None = None
    """Seed of the request's own generator: the same seed gives the same tokens in any batch."""
    stop: tuple[str, ...] = attrs.field(default=(), converter=_stop_list)
    """Strings that end generation; the text excludes the stop string."""
    stop_token_ids: tuple[int, ...] = attrs.field(default=(), converter=tuple)
    """Token ids that end generation (excluded from the output)."""
    ignore_eos: bool = False
    """Keep generating past the model's end-of-sequence token."""


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
    """"length", "stop" or None while running."""
    generator: Any = None
    """The request's ``torch.Generator`` when it samples (temperature > 0)."""
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
    prompts = list(prompts)
    if prompts and all(isinstance(t, int) for t in prompts):
        return [prompts]
    return prompts
