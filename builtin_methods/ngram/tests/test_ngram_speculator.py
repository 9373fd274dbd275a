"""The speculators against the single-sequence rule, over many steps of a moving batch."""

import numpy as np
import pytest
import torch

from specpath.config.speculative import SpeculativeConfig
from specpath.speculator import DraftBatch, DraftRequest, SpeculatorContext
from specpath_ngram import propose_ngram_tokens
from specpath_ngram.kernels import propose_ngram_triton
from specpath_ngram.speculator import NgramGPUSpeculator, NgramSpeculator

MAX_MODEL_LEN = 700


def make(speculator_class, k=3, **window):
    spec = SpeculativeConfig.from_dict({"method": "ngram", "num_speculative_tokens": k, **window})
    context = SpeculatorContext(vocab_size=8, max_model_len=MAX_MODEL_LEN, max_num_seqs=2)
    return speculator_class(spec, context)


def drive(speculator, steps, seed, vocab=3):
    """Run a batch whose requests grow, join, leave and sometimes get no draft budget;
    check each step against :func:`propose_ngram_tokens`. Returns the drafts seen."""
    rng = np.random.default_rng(seed)
    histories = {}
    next_id = 0
    drafted = 0
    for step in range(steps):
        while len(histories) < 5 or (step % 4 == 0 and len(histories) < 9):
            # new requests: some prompts longer than the buffer's first width (256)
            histories[f"r{next_id}"] = rng.integers(0, vocab, rng.integers(1, 400)).tolist()
            next_id += 1
        requests = tuple(
            DraftRequest(
                req_id=req_id,
                token_ids=list(tokens),
                num_new_positions=1,
                max_draft_tokens=int(rng.integers(0, 5)),
            )
            for req_id, tokens in histories.items()
        )
        proposal = speculator.propose(DraftBatch(requests=requests))
        expected = [
            propose_ngram_tokens(
                r.token_ids,
                speculator.min_n,
                speculator.max_n,
                min(r.max_draft_tokens, speculator.k),
                MAX_MODEL_LEN,
            )
            for r in requests
        ]
        assert list(proposal.num_draft_tokens) == [len(e) for e in expected]
        assert proposal.token_ids.dtype == torch.int32
        assert proposal.token_ids.tolist() == [t for e in expected for t in e]
        assert proposal.draft_probs is None
        drafted += sum(map(len, expected))
        for req_id in list(histories):
            histories[req_id] += rng.integers(0, vocab, rng.integers(1, 4)).tolist()
            if len(histories[req_id]) >= MAX_MODEL_LEN - 2 or rng.random() < 0.08:
                speculator.remove_request(req_id)
                del histories[req_id]
    return drafted


@pytest.mark.parametrize("speculator_class", [NgramSpeculator, NgramGPUSpeculator])
@pytest.mark.parametrize(("window", "seed"), [({}, 0), ({"prompt_lookup_min": 1, "prompt_lookup_max": 3}, 1)])
def test_speculator_follows_the_rule(speculator_class, window, seed):
    speculator = make(speculator_class, **window)
    assert drive(speculator, steps=60, seed=seed) > 0
    assert len(speculator.history) > 0


def test_device_path_with_the_triton_kernel():
    """The CUDA path (device mirror + Triton kernel), run here with the interpreter."""
    speculator = make(NgramGPUSpeculator, prompt_lookup_min=2, prompt_lookup_max=4)
    speculator._propose_kernel = propose_ngram_triton
    assert drive(speculator, steps=4, seed=2) > 0


def test_no_budget_no_drafts_and_removed_requests_free_their_rows():
    speculator = make(NgramSpeculator, prompt_lookup_min=1, prompt_lookup_max=2)
    tokens = [1, 2, 3, 1, 2]
    batch = DraftBatch(
        requests=(
            DraftRequest(req_id="a", token_ids=tokens, num_new_positions=5, max_draft_tokens=0),
            DraftRequest(req_id="b", token_ids=tokens, num_new_positions=5, max_draft_tokens=2),
        )
    )
    proposal = speculator.propose(batch)
    assert list(proposal.num_draft_tokens) == [0, 2]
    assert proposal.token_ids.tolist() == [3, 1]
    speculator.remove_request("a")
    speculator.remove_request("a")  # idempotent
    assert len(speculator.history) == 1
