"""warmup_cosine, the one learning-rate schedule of every recipe."""

import math

from hypothesis import given
from hypothesis import strategies as st

from specpath_train.trainer import warmup_cosine


@given(peak=st.floats(1e-5, 1.0), warmup=st.integers(1, 200), floor=st.floats(0.0, 1.0, allow_subnormal=False),
       step=st.integers(0, 10_000), progress=st.floats(-1.0, 2.0))
def test_bounds_and_shape(peak, warmup, floor, step, progress):
    lr = warmup_cosine(step, progress, peak=peak, warmup=warmup, floor=floor)
    assert 0 < lr <= peak * (1 + 1e-12) or (floor == 0 and lr >= 0)
    if step < warmup:
        assert math.isclose(lr, peak * (step + 1) / warmup)
    else:
        later = warmup_cosine(step, min(1.0, max(0.0, progress)) + 0.1, peak=peak, warmup=warmup, floor=floor)
        assert later <= lr + 1e-12  # decays with progress
        assert lr >= floor * peak - 1e-12


def test_end_points():
    assert warmup_cosine(50, 0.0, peak=2.0, warmup=50) == 2.0
    assert math.isclose(warmup_cosine(50, 1.0, peak=2.0, warmup=50), 0.2)
    assert math.isclose(warmup_cosine(500, 5.0, peak=1.0, warmup=10, floor=0.0), 0.0, abs_tol=1e-12)


def test_evaluations_along_the_way_read_a_sample_and_the_last_reads_every_held_out_window():
    """``eval_windows``: the periodic held-out evaluations take the first N windows (they come
    out of the budget), the one at the end all of them, so the returned metrics are the whole set's."""
    import torch

    from specpath_train.trainer import train_loop

    seen = []
    head = torch.nn.Linear(4, 1)

    def loss_fn(tokens, taps):
        seen.append(tokens.shape[0])
        loss = head(taps).pow(2).mean()
        return loss, {"windows": float(tokens.shape[0])}

    tokens, taps = torch.zeros(12, 3, dtype=torch.long), torch.randn(12, 3, 4)
    held = (torch.zeros(10, 3, dtype=torch.long), torch.randn(10, 3, 4))
    metrics = train_loop(head, loss_fn, tokens, taps, minutes=0, max_steps=4, batch=2, lr=1e-3, seed=0,
                         log=lambda s: None, eval_every_s=0.0, heldout=held, eval_windows=3)
    evaluations = [n for n in seen if n != 2]  # the training batches have 2 windows
    assert evaluations == [3, 3, 3, 10] and metrics["windows"] == 10.0 and metrics["steps"] == 4
