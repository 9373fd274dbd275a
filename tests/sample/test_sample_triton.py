"""Every Triton kernel equals its torch reference on the same inputs and randomness
(interpreted on CPU, so shapes stay tiny)."""

import pytest
import torch
from _sample_helpers import layout, random_step
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine.sample import reference, rejection_sample
from specpath_engine.sample import triton_kernels as tk

pytestmark = pytest.mark.filterwarnings("ignore:rejection_sample.method=")

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True, database=None)

steps = st.fixed_dictionaries({
    "counts": st.lists(st.integers(0, 5), min_size=1, max_size=4),
    "vocab": st.sampled_from([2, 5, 37]),
    "seed": st.integers(0, 2**16),
    "draft_probs": st.booleans(),
})


def inputs(counts, vocab, seed, draft_probs):
    drafts, logits, _, q = random_step(counts, vocab, seed, match=0.6, draft_probs=draft_probs)
    g = torch.Generator().manual_seed(seed + 1)
    probs = torch.softmax(logits * 0.3, -1)
    greedy = torch.rand(len(counts), generator=g) < 0.3
    uniforms = torch.rand(sum(counts), generator=g)
    return (drafts, layout(counts), probs.argmax(-1), probs, q, uniforms, greedy), g


@pytest.mark.slow
@SETTINGS
@given(steps)
def test_accept_kernels(step):
    args, g = inputs(**step)
    assert torch.equal(tk.accept_standard(*args), reference.accept_standard(*args))
    num, scale = tk.accept_block(*args)
    ref_num, ref_scale = reference.accept_block(*args)
    assert torch.equal(num, ref_num) and torch.allclose(scale, ref_scale, rtol=0, atol=1e-6)
    high = torch.rand(args[0].numel(), generator=g) < 0.6
    window = torch.randint(0, 4, (len(step["counts"]),), generator=g, dtype=torch.int32)
    assert torch.equal(tk.accept_fly(*args, high, window), reference.accept_fly(*args, high, window))
    rates = torch.rand(max(step["counts"]), generator=g)
    assert torch.equal(tk.accept_synthetic(args[1], rates, args[5]), reference.accept_synthetic(args[1], rates, args[5]))


@SETTINGS
@given(steps, st.booleans())
def test_recover_kernel(step, subtract):
    args, g = inputs(**step)
    drafts, probs, q = args[0], args[3], args[4]
    if drafts.numel() == 0:
        return
    rows = torch.randint(0, drafts.numel(), (3,), generator=g)
    scale = torch.rand(3, generator=g)
    uniforms = torch.rand(3, generator=g)
    assert torch.equal(tk.recover(probs, q, drafts, rows, scale, uniforms, subtract),
                       reference.recover(probs, q, drafts, rows, scale, uniforms, subtract))


def test_recover_kernel_tiles_and_fallback():
    """Vocabulary wider than one tile, and a row whose residual is empty (falls back to p)."""
    g = torch.Generator().manual_seed(0)
    vocab = tk.BLOCK_V + 77
    probs = torch.softmax(torch.randn(2, vocab, generator=g), -1)
    q = probs.clone()
    q[1] = torch.softmax(torch.randn(vocab, generator=g), -1)
    drafts = torch.tensor([3, 4], dtype=torch.int32)
    rows, scale = torch.tensor([0, 1]), torch.tensor([1.0, 0.5])
    uniforms = torch.rand(2, generator=g)
    assert torch.equal(tk.recover(probs, q, drafts, rows, scale, uniforms, True),
                       reference.recover(probs, q, drafts, rows, scale, uniforms, True))


@SETTINGS
@given(st.integers(1, 4), st.integers(2, 20), st.integers(2, 20), st.integers(0, 2**16))
def test_lift_kernel(rows, draft_vocab, target_vocab, seed):
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(rows, draft_vocab, generator=g), -1)
    t2d = torch.full((target_vocab,), -1)
    shared = torch.randperm(min(draft_vocab, target_vocab), generator=g)
    t2d[torch.randperm(target_vocab, generator=g)[: shared.numel()]] = shared
    assert torch.allclose(tk.lift_probs(probs, t2d), reference.lift_probs(probs, t2d), atol=1e-6)


@pytest.mark.parametrize("method", ["standard", "block", "fly", "synthetic"])
def test_rejection_sample_backends_agree(method):
    counts = [3, 0, 5, 2]
    drafts, logits, bonus, q = random_step(counts, 11, 4, match=0.5)
    temperature = torch.tensor([1.0, 1.0, 0.0, 0.8])
    options = {"acceptance_length": 2.2} if method == "synthetic" else {}
    q = q.t().contiguous().t()  # same values, column-major: kernels must not assume the layout
    outs = [rejection_sample(drafts, counts, logits * 0.4, bonus, temperature, draft_probs=q, generators=[5, 6, 7, 8],
                             top_k=[0, 0, 0, 4], method=method, backend=backend, **options)
            for backend in ("torch", "triton")]
    assert torch.equal(outs[0], outs[1])
