"""The Triton kernel (interpreted on CPU), its torch reference and the CPU batch proposer
agree with the single-sequence rule on thousands of random requests, batched into a few
launches because interpreted Triton pays per launch."""

import numpy as np
import pytest
import torch

from specpath_ngram import propose_ngram_tokens
from specpath_ngram.batch import pad_sequences, propose_batch_into
from specpath_ngram.kernels import propose_ngram_triton
from specpath_ngram.reference import propose_ngram_reference


def random_batch(seed, requests, max_length):
    """Requests of assorted lengths, vocabularies (1 to 6 tokens: many ties and periodic
    runs, plus a few wide ones) and k, stored at shuffled rows of a wider buffer."""
    rng = np.random.default_rng(seed)
    sequences = []
    for _ in range(requests):
        vocab = int(rng.choice([1, 2, 3, 4, 6, 1000]))
        sequences.append(rng.integers(0, vocab, rng.integers(0, max_length + 1)).tolist())
    tokens, lengths = pad_sequences(sequences, width=max_length + 3)
    rows = rng.permutation(requests).astype(np.int32)
    buffer = np.zeros_like(tokens)
    buffer[rows] = tokens
    ks = rng.integers(0, 6, requests).astype(np.int32)
    return sequences, buffer, rows, lengths, ks


def expected_drafts(sequences, ks, min_n, max_n):
    return [propose_ngram_tokens(s, min_n, max_n, int(k)) for s, k in zip(sequences, ks)]


def as_lists(drafts, counts):
    return [row[:count].tolist() for row, count in zip(drafts, counts)]


PATHS = pytest.mark.parametrize(
    ("seed", "min_n", "max_n"), [(0, 1, 1), (1, 1, 3), (2, 2, 5), (3, 3, 4)]
)


def as_tensors(*arrays):
    """The kernels' torch view of a numpy batch (no copy)."""
    return [torch.from_numpy(a) for a in arrays]


@pytest.mark.slow  # several seconds each: 550 interpreted programs
@PATHS
def test_triton_kernel_matches_rule(seed, min_n, max_n):
    sequences, buffer, rows, lengths, ks = random_batch(seed, 550, 60)
    drafts, counts = propose_ngram_triton(
        *as_tensors(buffer, rows, lengths, ks), min_n, max_n, k_max=5,
        block=32,  # several blocks per request, so the cross-block tie rule is exercised
    )
    assert drafts.dtype == counts.dtype == torch.int32
    expected = expected_drafts(sequences, ks, min_n, max_n)
    assert as_lists(drafts.numpy(), counts.numpy()) == expected
    assert sum(map(len, expected)) > 150


@PATHS
def test_torch_reference_and_batch_proposer_match_rule(seed, min_n, max_n):
    sequences, buffer, rows, lengths, ks = random_batch(seed + 100, 1000, 70)
    expected = expected_drafts(sequences, ks, min_n, max_n)
    drafts, counts = propose_ngram_reference(*as_tensors(buffer, rows, lengths, ks), min_n, max_n, k_max=5)
    assert as_lists(drafts.numpy(), counts.numpy()) == expected
    drafts, counts = np.zeros((1000, 5), np.int32), np.zeros(1000, np.int32)
    propose_batch_into(buffer, rows, lengths, ks, min_n, max_n, drafts, counts)
    assert as_lists(drafts, counts) == expected


@pytest.mark.parametrize("propose", [propose_ngram_triton, propose_ngram_reference])
def test_empty_batch(propose):
    empty = torch.zeros(0, dtype=torch.int32)
    drafts, counts = propose(torch.zeros(2, 4, dtype=torch.int32), empty, empty, empty, 1, 3, 4)
    assert drafts.shape == (0, 4) and counts.shape == (0,)


COMPILE_FOR_GPUS = """
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from specpath_ngram.kernels import _ngram_propose_kernel

pointers = ["tokens_ptr", "rows_ptr", "lengths_ptr", "ks_ptr", "drafts_ptr", "counts_ptr"]
signature = dict.fromkeys(pointers, "*i32") | {"token_row_stride": "i32", "min_n": "i32"}
constants = {"MAX_N": 5, "K_MAX": 4, "K_BLOCK": 4, "BLOCK": 128}
signature |= dict.fromkeys(constants, "constexpr")
source = ASTSource(_ngram_propose_kernel, signature, constexprs=constants)
for target in [GPUTarget("cuda", 90, 32), GPUTarget("hip", "gfx942", 64)]:
    print(target.backend, sorted(triton.compile(source, target=target).asm))
"""


@pytest.mark.slow  # ~3 s: a real (not interpreted) Triton compile in a subprocess
def test_kernel_compiles_for_gpu_targets():
    """The interpreter accepts code a GPU compile rejects; compile for real targets too (no GPU
    is needed to compile)."""
    import os
    import subprocess
    import sys

    env = {key: value for key, value in os.environ.items() if key != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", COMPILE_FOR_GPUS], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "cuda" in done.stdout and "cubin" in done.stdout
    assert "hip" in done.stdout and "hsaco" in done.stdout
