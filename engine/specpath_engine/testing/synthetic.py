"""Play the engine's part for a speculator, without an engine, and check what it answers.

:func:`drive_speculator` walks a speculator through the life of a few requests the way an
engine does (a prefill chunk, the rest of the prompt, decode steps with partial acceptance,
a finished request and a new one) and checks every :class:`DraftProposal` against the
contract with :func:`check_proposal`. Drafts are "verified" by accepting a random prefix, so
a speculator that keeps state (an online model, its own KV) also sees rollbacks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import attrs

from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal, DraftRequest, SpeculatorContext

DEFAULT_VOCAB_SIZE = 64
DEFAULT_HIDDEN_SIZE = 32
DEFAULT_NUM_LAYERS = 4


class ProposalError(AssertionError):
    """A proposal that breaks the speculator contract; the message says which rule."""


def tiny_context(
    vocab_size: int = DEFAULT_VOCAB_SIZE,
    hidden_size: int = DEFAULT_HIDDEN_SIZE,
    num_layers: int = DEFAULT_NUM_LAYERS,
    max_model_len: int = 512,
    max_num_seqs: int = 8,
    seed: int = 0,
) -> SpeculatorContext:
    """A :class:`SpeculatorContext` for a random-weight toy target on CPU: a Llama-style
    ``config.json``, random embedding / head callables of the right shapes, and a
    ``load_model`` that builds the reference engine's model from a local checkpoint."""
    import torch

    def load_model(path: Any, **options: Any) -> Any:
        from specpath_engine.model import LlamaModel

        return LlamaModel.from_pretrained(path, **{"dtype": torch.float32, "device": "cpu", **options})

    gen = torch.Generator().manual_seed(seed)
    embedding = torch.randn(vocab_size, hidden_size, generator=gen) * 0.1
    head = torch.randn(vocab_size, hidden_size, generator=gen) * 0.1
    return SpeculatorContext(
        device="cpu",
        dtype=torch.float32,
        vocab_size=vocab_size,
        max_model_len=max_model_len,
        max_num_seqs=max_num_seqs,
        target_config={
            "model_type": "llama",
            "architectures": ["LlamaForCausalLM"],
            "vocab_size": vocab_size,
            "hidden_size": hidden_size,
            "intermediate_size": 2 * hidden_size,
            "num_hidden_layers": num_layers,
            "num_attention_heads": 4,
            "num_key_value_heads": 4,
            "max_position_embeddings": max_model_len,
            "rms_norm_eps": 1e-5,
            "rope_theta": 10000.0,
            "tie_word_embeddings": False,
        },
        embed_tokens=lambda ids: embedding[ids.long()],
        lm_head=lambda hidden: hidden @ head.T,
        load_model=load_model,
    )


def check_proposal(
    batch: DraftBatch, proposal: Any, vocab_size: int, *, proposes_draft_tokens: bool = True
) -> None:
    """Raise :class:`ProposalError` unless ``proposal`` answers ``batch`` by the contract."""
    import torch

    def fail(rule: str) -> None:
        raise ProposalError(f"proposal breaks the contract: {rule}")

    if not isinstance(proposal, DraftProposal):
        fail(f"propose() returned {type(proposal).__name__}, expected DraftProposal")
    counts = list(proposal.num_draft_tokens)
    if len(counts) != len(batch.requests):
        fail(f"num_draft_tokens has {len(counts)} entries for {len(batch.requests)} requests")
    for req, n in zip(batch.requests, counts):
        if not isinstance(n, int) or isinstance(n, bool):
            fail(f"num_draft_tokens[{req.req_id!r}] is {type(n).__name__}, expected int")
        if not 0 <= n <= req.max_draft_tokens:
            fail(f"request {req.req_id!r} got {n} drafts, allowed 0..{req.max_draft_tokens}")
    total = sum(counts)
    if not proposes_draft_tokens and total:
        fail(f"{total} drafts from a config that declares proposes_draft_tokens = False")
    ids = proposal.token_ids
    if not isinstance(ids, torch.Tensor):
        fail(f"token_ids is {type(ids).__name__}, expected a torch.Tensor")
    if ids.dtype != torch.int32:
        fail(f"token_ids dtype is {ids.dtype}, expected torch.int32")
    if ids.dim() != 1 or ids.numel() != total:
        fail(f"token_ids shape is {tuple(ids.shape)}, expected ({total},) = sum(num_draft_tokens)")
    if total and (int(ids.min()) < 0 or int(ids.max()) >= vocab_size):
        fail(f"token ids outside [0, {vocab_size}): min {int(ids.min())}, max {int(ids.max())}")
    probs = proposal.draft_probs
    if probs is not None:
        if not isinstance(probs, torch.Tensor) or tuple(probs.shape) != (total, vocab_size):
            fail(f"draft_probs shape is {tuple(getattr(probs, 'shape', ()))}, expected ({total}, {vocab_size})")
        if not probs.is_floating_point():
            fail(f"draft_probs dtype is {probs.dtype}, expected a floating type")
        if total:
            p = probs.double()
            if bool((p < 0).any()) or not torch.allclose(p.sum(-1), torch.ones(total, dtype=p.dtype), atol=1e-3):
                fail("draft_probs rows are not probability distributions (non-negative, sum 1)")
            if bool((p.gather(1, ids.long()[:, None]) <= 0).any()):
                fail("a drafted token has probability 0 under its own draft_probs row")
    conf = proposal.confidences
    if conf is not None:
        if not isinstance(conf, torch.Tensor) or tuple(conf.shape) != (total,):
            fail(f"confidences shape is {tuple(getattr(conf, 'shape', ()))}, expected ({total},)")
        if total and (bool((conf < 0).any()) or bool((conf > 1).any())):
            fail("confidences outside [0, 1]")


@attrs.define
class _Request:
    req_id: str
    token_ids: list[int]
    committed: int  # positions whose KV the "target" has written
    temperature: float = 0.0
    generator: Any = None


@attrs.frozen
class Step:
    """One call of :func:`drive_speculator`: what the speculator was asked and answered."""

    batch: DraftBatch
    proposal: DraftProposal


def _prompt(rng: random.Random, vocab_size: int, length: int) -> list[int]:
    """Text with some repetition (so drafters that copy have something to copy)."""
    phrase = [rng.randrange(vocab_size) for _ in range(rng.randint(3, 6))]
    out: list[int] = []
    while len(out) < length:
        out += phrase if rng.random() < 0.6 else [rng.randrange(vocab_size)]
    return out[:length]


def drive_speculator(
    speculator: BaseSpeculator,
    *,
    k: int,
    vocab_size: int,
    hidden_size: int = DEFAULT_HIDDEN_SIZE,
    uses_hidden_states: bool = False,
    proposes_draft_tokens: bool = True,
    num_requests: int = 3,
    decode_steps: int = 6,
    seed: int = 0,
) -> list[Step]:
    """Run ``speculator`` through a few requests' lives; check and return every step.

    Every third request has a temperature and its own seeded generator; the same ``seed``
    replays the same steps, so a deterministic speculator answers the same way twice."""
    import torch

    rng = random.Random(seed)
    torch_gen = torch.Generator().manual_seed(seed)
    layers = _declared_layers(speculator, uses_hidden_states)
    steps: list[Step] = []
    live: list[_Request] = []
    next_id = 0

    def new_request() -> None:
        nonlocal next_id
        prompt = _prompt(rng, vocab_size, rng.randint(8, 24))
        # Every third request samples (temperature > 0, its own seeded generator), as a
        # sampling request would reach a drafter that samples too.
        sampled = next_id % 3 == 2
        live.append(_Request(
            f"req-{next_id}", prompt, 0,
            temperature=0.8 if sampled else 0.0,
            generator=torch.Generator().manual_seed(seed * 1000 + next_id) if sampled else None,
        ))
        next_id += 1

    def step(visible: dict[str, int], budgets: dict[str, int]) -> DraftProposal:
        """``visible[req_id]`` = how many tokens of the request the engine shows this step
        (the last one pending); everything before it is committed now."""
        requests = _commit_and_request(live, visible, budgets)
        hidden = None
        if uses_hidden_states:
            rows = sum(r.num_new_positions for r in requests)
            hidden = torch.randn(rows, len(layers), hidden_size, generator=torch_gen)
        batch = DraftBatch(requests=tuple(requests), hidden_states=hidden)
        proposal = speculator.propose(batch)
        check_proposal(batch, proposal, vocab_size, proposes_draft_tokens=proposes_draft_tokens)
        steps.append(Step(batch, proposal))
        return proposal

    for _ in range(num_requests):
        new_request()
    # Chunked prefill: the first chunk of every prompt, no drafts asked.
    chunk = {r.req_id: rng.randint(2, len(r.token_ids) - 2) for r in live}
    step({r.req_id: chunk[r.req_id] + 1 for r in live}, {r.req_id: 0 for r in live})
    # The rest of the prompt plus the first sampled token; drafting starts.
    for r in live:
        r.token_ids.append(rng.randrange(vocab_size))
    for i in range(decode_steps):
        if i == decode_steps // 2:  # one request finishes, a new one arrives (whole prompt at once)
            gone = live.pop(1 % len(live))
            speculator.remove_request(gone.req_id)
            new_request()
            live[-1].token_ids.append(rng.randrange(vocab_size))
        budgets = {r.req_id: [k, k, max(k - 1, 0), 0][j % 4] for j, r in enumerate(live)}
        proposal = step({r.req_id: len(r.token_ids) for r in live}, budgets)
        accepted = _accept_random_prefixes(live, proposal, rng, vocab_size)
        speculator.on_verified([r.req_id for r in live], accepted)
    return steps


def _declared_layers(speculator: BaseSpeculator, uses_hidden_states: bool) -> tuple[int, ...]:
    """The target layers the speculator reads, checked against its config's declaration."""
    layers = tuple(speculator.hidden_state_layers)
    if uses_hidden_states and not layers:
        raise ProposalError(
            "the config declares uses_target_hidden_states but the speculator's "
            "hidden_state_layers is empty"
        )
    if not uses_hidden_states and layers:
        raise ProposalError(
            f"the speculator reads target layers {layers} but its config does not declare "
            "uses_target_hidden_states"
        )
    return layers


def _commit_and_request(live: list[_Request], visible: dict[str, int], budgets: dict[str, int]) -> list[DraftRequest]:
    """One step's requests: ``visible[req_id]`` tokens shown (the last one pending), everything
    before it committed now; ``num_new_positions`` is what became committed since last step."""
    requests = []
    for r in live:
        shown = visible[r.req_id]
        new = (shown - 1) - r.committed
        r.committed = shown - 1
        requests.append(DraftRequest(
            req_id=r.req_id,
            token_ids=tuple(r.token_ids[:shown]),
            num_new_positions=new,
            max_draft_tokens=budgets[r.req_id],
            temperature=r.temperature,
            generator=r.generator,
        ))
    return requests


def _accept_random_prefixes(live: list[_Request], proposal: DraftProposal, rng: random.Random,
                            vocab_size: int) -> list[int]:
    """Accept a random prefix of each request's drafts and append a bonus token; the counts."""
    flat = proposal.token_ids.tolist()
    accepted, start = [], 0
    for r, n in zip(live, proposal.num_draft_tokens):
        drafts = flat[start:start + n]
        start += n
        a = rng.randint(0, n)
        r.token_ids += drafts[:a] + [rng.randrange(vocab_size)]
        accepted.append(a)
    return accepted
