"""Shared pieces of the engine tests: a small random-weight Llama and test speculators.

The model runs in float64 so batched verification and one-token decoding agree to ~1e-15 and a
near-tie between two logits can never flip a greedy choice (the tests compare tokens exactly).
"""

from __future__ import annotations

import random

import torch

from specpath.config.model import CacheConfig
from specpath_engine.llm_engine import LLMEngine, SpeculationSettings
from specpath_engine.model import LlamaModel
from specpath_engine.request import SamplingParams
from specpath_engine.scheduler import SchedulerSettings
from specpath.speculator import BaseSpeculator, DraftBatch, DraftProposal
from specpath_engine.testing.engine import random_llama, save_with_byte_tokenizer

VOCAB = 48


def tiny_model(seed: int = 0, *, max_len: int = 256) -> LlamaModel:
    """Sharper logits than at init (a x8 head): greedy continuations less flat."""
    return random_llama(seed, vocab_size=VOCAB, hidden_size=32, max_len=max_len, head_scale=8.0, dtype=torch.float64)


class OracleSpeculator(BaseSpeculator):
    """Knows reference continuations and proposes them with some positions corrupted.

    ``corrupt`` is the probability that a draft position is replaced by a random token, so the
    accepted length varies from 0 to K. Without a reference it drafts random tokens.
    """

    def __init__(self, references, *, corrupt: float = 0.3, seed: int = 0, vocab: int = VOCAB, layers=()):
        self.references = [list(r) for r in references]
        self.corrupt = corrupt
        self.rng = random.Random(seed)
        self.vocab = vocab
        self.layers = tuple(layers)
        self.calls: list[DraftBatch] = []
        self.verified: list[tuple[list[str], list[int]]] = []
        self.removed: list[str] = []

    @property
    def hidden_state_layers(self):
        return self.layers

    def _reference(self, ids):
        n = len(ids)
        for ref in self.references:
            if len(ref) > n and ref[:n] == list(ids):
                return ref
        return None

    def propose(self, batch: DraftBatch) -> DraftProposal:
        self.calls.append(batch)
        tokens, counts = [], []
        for r in batch.requests:
            k = r.max_draft_tokens
            if k == 0:
                counts.append(0)
                continue
            k = self.rng.randint(0, k) if self.rng.random() < 0.2 else k  # sometimes fewer drafts
            ref = self._reference(r.token_ids)
            n = len(r.token_ids)
            out = []
            for i in range(k):
                good = ref is not None and n + i < len(ref) and self.rng.random() >= self.corrupt
                out.append(ref[n + i] if good else self.rng.randrange(self.vocab))
            tokens += out
            counts.append(k)
        return DraftProposal(token_ids=torch.tensor(tokens, dtype=torch.int32), num_draft_tokens=counts)

    def on_verified(self, req_ids, num_accepted):
        self.verified.append((list(req_ids), list(num_accepted)))

    def remove_request(self, req_id):
        self.removed.append(req_id)


def make_engine(model, *, speculator=None, k=4, block_size=4, num_blocks=None, prefix_caching=False,
                max_num_seqs=4, max_num_batched_tokens=64, k_table=None, hidden=False, max_model_len=None,
                **spec_kwargs):
    spec = None
    if speculator is not None:
        spec = SpeculationSettings(
            speculator=speculator,
            num_speculative_tokens=k,
            k_for_batch_size=k_table,
            uses_target_hidden_states=hidden,
            num_prefill_lookahead_tokens=1 if hidden else 0,
            **spec_kwargs,
        )
    return LLMEngine(
        model,
        scheduler=SchedulerSettings(
            max_num_seqs=max_num_seqs,
            max_num_batched_tokens=max_num_batched_tokens,
            max_model_len=max_model_len or model.config.max_position_embeddings,
        ),
        cache=CacheConfig(block_size=block_size, num_blocks=num_blocks, enable_prefix_caching=prefix_caching),
        speculation=spec,
    )


def baseline(model, prompts, max_tokens):
    engine = make_engine(model)
    requests, _ = engine.generate(prompts, SamplingParams(max_tokens=max_tokens))
    return [r.output_token_ids for r in requests]


def random_prompts(n, seed, lo=2, hi=40, vocab=VOCAB):
    rng = random.Random(seed)
    return [[rng.randrange(vocab) for _ in range(rng.randint(lo, hi))] for _ in range(n)]



class LookupSpeculator(BaseSpeculator):
    """Prompt lookup: the continuation of the most recent earlier match of the last 2 tokens.

    With ``hidden_state_layers`` it also checks that hidden states arrive, one row per newly
    committed position (for the engine's capability path)."""

    layers: tuple[int, ...] = ()

    def __init__(self, spec, context):
        super().__init__(spec, context)
        self.rows_seen = 0
        self.positions_announced = 0

    @property
    def hidden_state_layers(self):
        return self.layers

    def propose(self, batch):
        if self.layers:
            assert batch.hidden_states is not None
            assert batch.hidden_states.shape[0] == sum(r.num_new_positions for r in batch.requests)
            assert batch.hidden_states.shape[1:] == (len(self.layers), self.context.target_config["hidden_size"])
            self.rows_seen += batch.hidden_states.shape[0]
        tokens, counts = [], []
        for r in batch.requests:
            self.positions_announced += r.num_new_positions
            ids = list(r.token_ids)
            out = []
            if r.max_draft_tokens and len(ids) >= 3:
                key = ids[-2:]
                for start in range(len(ids) - 3, -1, -1):
                    if ids[start : start + 2] == key:
                        out = ids[start + 2 : start + 2 + r.max_draft_tokens]
                        break
            tokens += out
            counts.append(len(out))
        return DraftProposal(token_ids=torch.tensor(tokens, dtype=torch.int32), num_draft_tokens=counts)


class EarliestLookupSpeculator(LookupSpeculator):
    """Prompt lookup from the earliest match instead of the latest: beside a
    :class:`LookupSpeculator` the two chains part now and then (a hybrid's arbitration)."""

    def propose(self, batch):
        tokens, counts = [], []
        for r in batch.requests:
            ids = list(r.token_ids)
            out = []
            if r.max_draft_tokens and len(ids) >= 3:
                key = ids[-2:]
                for start in range(len(ids) - 2):
                    if ids[start : start + 2] == key:
                        out = ids[start + 2 : start + 2 + r.max_draft_tokens]
                        break
            tokens += out
            counts.append(len(out))
        return DraftProposal(token_ids=torch.tensor(tokens, dtype=torch.int32), num_draft_tokens=counts)


class HiddenLookupSpeculator(LookupSpeculator):
    layers = (0, 1)


def save_tiny_checkpoint(path, seed=0):
    """A random byte-level Llama with the byte tokenizer, as an HF checkpoint directory."""
    # decisive logits (x20 tied embedding): no float32 near-ties
    model = random_llama(seed, hidden_size=32, max_len=256, tie_word_embeddings=True, embed_scale=20.0)
    save_with_byte_tokenizer(model, path, eos=False)
    return path


class HashSpeculator(BaseSpeculator):
    """Drafts a deterministic function of each request's own tokens (independent of the batch and
    of earlier calls), so seeded sampled runs can be compared across engines and batches."""

    def __init__(self, fixed=None, layers=(), drafts=True):
        self.fixed = fixed
        self.layers = tuple(layers)
        self.drafts = drafts

    @property
    def hidden_state_layers(self):
        return self.layers

    def propose(self, batch):
        tokens, counts = [], []
        for r in batch.requests:
            h = sum(r.token_ids) * 31 + len(r.token_ids)
            k = r.max_draft_tokens if self.drafts else 0
            out = [self.fixed if self.fixed is not None else (h + 7 * i) % VOCAB for i in range(k)]
            tokens += out
            counts.append(len(out))
        return DraftProposal(token_ids=torch.tensor(tokens, dtype=torch.int32), num_draft_tokens=counts)


class JitteryClock:
    """A clock whose steps take anything from 0.1 to 30 ms (seeded): the measured governor's
    choices swing from K to plain decoding and back, and the guard backs off and bursts."""

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.now = 0.0

    def __call__(self):
        self.now += self.rng.choice([1e-4, 1e-3, 5e-3, 3e-2])
        return self.now


class ScriptedGovernor:
    """The runner's side of a draft governor with nothing measured or learnt: every request drafts
    its whole K, nothing is cut by the drafter's estimates. Tests subclass it to script the choice."""

    one_pass = False
    calibration = None  # (a draft_calibration.Calibration: drafts are cut by their estimates at `floors`)
    floors = (0.0, 0.0)

    def __init__(self):
        self.clock = lambda: 0.0

    def allocate(self, req_ids, limits, positions, pending, **_):
        return list(limits)

    def observe(self, *_):
        pass

    def observe_step(self, *_):
        pass

    def summary(self):
        return {}

    def remove(self, req_id):
        pass
