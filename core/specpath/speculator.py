"""The contract between an engine and a speculator (one method's drafter).

An engine builds one speculator per served model from the resolved
``SpeculativeConfig`` and, every step, hands it a :class:`DraftBatch` describing what
changed since the previous step; the speculator answers with a :class:`DraftProposal`.
The engine verifies the drafts in one target pass (``specpath_engine.sample``) and reports
how many were accepted through :meth:`BaseSpeculator.on_verified`.

Speculators never import an engine: whatever they need from the target (its embedding
and head, a way to build a model from a checkpoint, the device) arrives through
:class:`SpeculatorContext`, whose fields are plain callables and values.

This module is imported by the light core, so torch appears only in annotations.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

import attrs

if TYPE_CHECKING:  # pragma: no cover - annotations only
    import torch

    from specpath.config.speculative import SpeculativeConfig


class SamplingNoise(Protocol):
    """A seeded request's sampling noise, lent to drafters so their drafts race on the numbers
    the target's tokens are drawn with.

    The engine samples a seeded request's token at position ``p`` as
    ``argmax_v probs_p[v] / E_p[v]`` (the exponential race; ``E_p ~ Exp(1)`` per vocabulary
    entry, a function of the seed and ``p`` only), which is ``argmax_v log probs_p[v] + G_p[v]``
    with ``G = -log E`` (Gumbel-max). A drafter that drafts ``argmax_v log q_p[v] + G_p[v]`` over
    its own distribution ``q_p`` (at the request's temperature) proposes the target's very token
    whenever ``q_p`` is close to ``probs_p``; any draft stays lossless, since the emitted tokens
    are the target's race winners whatever was drafted."""

    def gumbel(self, first: int, count: int) -> torch.Tensor:
        """float32 ``[count, vocab]``: ``G`` at positions ``first .. first + count - 1`` (target
        vocabulary ids, on the engine's device)."""
        ...


@attrs.frozen(kw_only=True)
class DraftRequest:
    """One request's view of a step."""

    req_id: str
    """Stable id of the request for its whole life."""
    token_ids: Sequence[int]
    """Prompt and generated tokens so far; the last one was just sampled and its KV is not
    computed yet (it is the first query position of the next target pass)."""
    num_new_positions: int
    """How many positions the target committed (KV written, verified) for this request since
    the previous call; their hidden states, if requested, are this request's rows of
    ``DraftBatch.hidden_states``. Those positions are ``len(token_ids) - 1 - num_new_positions``
    to ``len(token_ids) - 2``."""
    max_draft_tokens: int
    """The most drafts the engine will verify for this request this step (the step's K, clipped
    so the request stays within ``max_model_len``). 0 while the request is still in prefill:
    the speculator only ingests the new positions."""
    min_draft_probability: float = 0.0
    """Where the drafter's own estimate that a draft and every draft before it are accepted falls
    below this, that draft does not pay for its pass and its row this step (the engine's measured
    costs, in the drafter's own probability scale as verification has calibrated it): a drafter
    that estimates it may stop before such a draft (after the first), and a tree may leave out
    such nodes. 0: draft the whole budget."""
    temperature: float = 0.0
    """The request's sampling temperature (0 = greedy); drafters may draft greedily anyway."""
    generator: Any = None
    """Per-request ``torch.Generator`` for drafters that sample, or None."""
    noise: SamplingNoise | None = None
    """Set for a seeded request that samples (temperature > 0): its :class:`SamplingNoise`. Its
    draft ``j`` lands at position ``len(token_ids) + j``; a drafter that samples should draft
    ``argmax(logits / temperature + noise.gumbel(len(token_ids), K)[j])`` there (indexing the noise
    by the target ids of a reduced draft vocabulary) and needs no draft probabilities for it:
    ``specpath_drafting.coupling`` does exactly that. None: draft as the drafter otherwise does."""


@attrs.frozen(kw_only=True)
class DraftBatch:
    """Everything a speculator needs for one step, requests in the engine's batch order."""

    requests: tuple[DraftRequest, ...]
    hidden_states: torch.Tensor | None = None
    """``[sum(num_new_positions), len(hidden_state_layers), hidden_size]`` target hidden states of
    the newly committed positions, requests concatenated in order; only for speculators whose
    config declares ``uses_target_hidden_states``."""


@attrs.frozen(kw_only=True)
class DraftProposal:
    """A step's drafts in the flattened layout that ``specpath_engine.sample`` verifies."""

    token_ids: torch.Tensor
    """int32 ``[sum(num_draft_tokens)]``: drafts of all requests, concatenated in batch order."""
    num_draft_tokens: Sequence[int]
    """Drafts per request (0 allowed), one entry per request of the batch."""
    draft_probs: torch.Tensor | None = None
    """``[sum(num_draft_tokens), vocab]`` probabilities the drafts were sampled from, or None for
    one-hot (greedy or model-free) drafts."""
    confidences: torch.Tensor | None = None
    """Optional ``[sum(num_draft_tokens)]`` per-draft acceptance estimates, for adaptive
    verification that does not use draft logits."""
    tree: DraftTree | None = None
    """Optional token trees for engines that verify trees (``SpeculatorContext.verifies_trees``);
    ``token_ids`` stays the chain every engine can verify."""


@attrs.frozen(kw_only=True)
class DraftTree:
    """Per-request draft trees in a flattened layout (nodes in best-first order, so every
    parent comes before its children)."""

    token_ids: Sequence[int]
    """Tree nodes' tokens, requests concatenated in batch order."""
    parents: Sequence[int]
    """Per node, the index of its parent within its own request's nodes; -1: the node follows
    the request's last token directly."""
    probs: Sequence[float]
    """Per node, the drafter's estimate that the target emits the path from the root to it."""
    num_tree_tokens: Sequence[int]
    """Nodes per request, one entry per request of the batch."""


@attrs.frozen(kw_only=True)
class SpeculatorContext:
    """What the engine lends a speculator: values and callables, never engine classes."""

    device: str = "cpu"
    dtype: Any = None
    """``torch.dtype`` of the target's activations."""
    vocab_size: int
    max_model_len: int
    max_num_seqs: int
    target_config: dict = attrs.field(factory=dict)
    """The target checkpoint's ``config.json`` as a dict."""
    embed_tokens: Callable[[torch.Tensor], torch.Tensor] | None = None
    """The target's input embedding (shared by EAGLE/MTP heads)."""
    lm_head: Callable[[torch.Tensor], torch.Tensor] | None = None
    """The target's output head on final-normed hidden states (shared by EAGLE-1/MTP)."""
    load_model: Callable[..., Any] | None = None
    """``load_model(path, **options)`` builds a decoder model from a local HF checkpoint, for
    drafters that run a model of their own."""
    verifies_trees: bool = False
    """The engine verifies ``DraftProposal.tree``: drafters that can build trees fill it."""
    prepare_module: Callable[[Any], Any] | None = None
    """``prepare_module(module) -> module`` readies a drafter's inference module (loaded, in
    ``dtype``, weights final) the way the engine readies its target, e.g. its low-precision
    ``nn.Linear`` layers pre-packed for the CPU's matmul; None: use the module as it is."""
    draft_attention: str = "auto"
    """The drafter's attention kernel, as the engine resolved ``attention_backend``: ``auto`` (the
    engine's fastest where a pass fits it), ``native`` or ``torch``."""
    draft_kv_dtype: str | None = None
    """The drafter KV's dtype name, as the engine resolved ``kv_cache_dtype``; None: the drafter's own."""


class BaseSpeculator(abc.ABC):
    """A method's drafter. Subclasses are named by ``SpeculatorConfig.speculator_class``.

    Keep per-step Python work small: on CPU a step is dominated by per-call overhead.
    """

    draft_pass_cost: float | None = None
    """The cost of one drafting pass relative to a plain target step, for the adaptive draft
    length (``SpeculativeConfig.draft_length_policy``); None: the engine estimates it from the
    drafter's weights. A speculator that knows better (work the weights do not show) says so."""

    def __init__(self, spec: SpeculativeConfig, context: SpeculatorContext) -> None:
        self.spec = spec
        """The resolved speculative config (``spec`` is a ``SpeculativeConfig`` everywhere)."""
        self.context = context
        """What the target lends: its config, embedding, head, device and dtype."""

    @property
    def hidden_state_layers(self) -> tuple[int, ...]:
        """Target layers whose outputs this speculator reads (decoder-layer index, 0-based; the
        output of layer ``i`` before the final norm). Empty when it reads none."""
        return ()

    @abc.abstractmethod
    def propose(self, batch: DraftBatch) -> DraftProposal:
        """Draft up to ``max_draft_tokens`` tokens for each request of ``batch``."""

    def on_verified(self, req_ids: Sequence[str], num_accepted: Sequence[int]) -> None:
        """Called after verification with the number of drafts accepted per request, so a
        drafter with state (its own KV, an online model) can roll back what was rejected."""

    def remove_request(self, req_id: str) -> None:
        """Forget a finished or aborted request and free what it held."""

    def forget_responses(self) -> None:
        """Drop what finished requests taught the drafter (a cache of earlier responses, such as
        suffix decoding's global tree), so the next call drafts as on a fresh engine. A benchmark
        that repeats its prompts calls it between repeats: a drafter that has seen the answer
        would otherwise be timed on it. Default: nothing outlives a request."""
