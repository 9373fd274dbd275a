"""Bad input is rejected with one clear line, never a traceback from deep inside."""

import pytest
import torch

from specpath_engine.sample import rejection_sample


def good():
    return dict(
        draft_token_ids=torch.tensor([1, 2, 3], dtype=torch.int32), num_draft_tokens=[2, 1],
        target_logits=torch.randn(3, 5), bonus_token_ids=torch.tensor([0, 4], dtype=torch.int32),
        temperature=torch.tensor([0.0, 1.0]),
    )


CASES = [
    ({"method": "stnadard"}, "did you mean 'standard'"),
    ({"method": "block", "window": 3}, "does not take option 'window'"),
    ({"num_draft_tokens": [2, -1]}, r"num_draft_tokens\[1\]=-1"),
    ({"num_draft_tokens": [2.0, 1]}, r"num_draft_tokens\[0\]=2.0"),
    ({"num_draft_tokens": 3}, "sequence of ints"),
    ({"num_draft_tokens": [2, 2]}, "draft_token_ids must be a 1-D integer tensor of length 4"),
    ({"target_logits": torch.randn(4, 5)}, "target_logits has 4 rows"),
    ({"target_logits": torch.randn(3)}, "target_logits must be a float tensor"),
    ({"target_logits": torch.ones(3, 5, dtype=torch.long)}, "target_logits must be a float tensor"),
    ({"draft_token_ids": torch.tensor([1.0, 2.0, 3.0])}, "draft_token_ids must be a 1-D integer tensor"),
    ({"draft_token_ids": torch.tensor([1, 2, 5])}, r"must lie in \[0, 5\)"),
    ({"bonus_token_ids": torch.tensor([0])}, "bonus_token_ids must be a 1-D integer tensor of length 2"),
    ({"temperature": torch.tensor([0.0, -1.0])}, "temperature must be finite and >= 0"),
    ({"temperature": torch.tensor([0.0, float("nan")])}, "temperature must be finite"),
    ({"temperature": [1.0]}, "temperature must be a 1-D tensor of length 2"),
    ({"draft_probs": torch.rand(3, 4)}, r"draft_probs must be a tensor \[3, 5\]"),
    ({"generators": [1]}, "generators has 1 entries for 2 requests"),
    ({"top_k": [1, 2, 3]}, "top_k must be a 1-D integer tensor of length 2"),
    ({"top_p": [0.5, 0.0]}, r"top_p must lie in \(0, 1\]"),
    ({"backend": "cuda"}, "backend='cuda' is not one of"),
]


@pytest.mark.parametrize(("change", "message"), CASES)
def test_one_line_errors(change, message):
    kwargs = good() | change
    with pytest.raises(ValueError, match=message) as info:
        rejection_sample(**kwargs)
    assert "\n" not in str(info.value)


def test_triton_on_cpu_needs_the_interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        rejection_sample(**good(), backend="triton")


def test_accepts_lists_and_int_seeds():
    out = rejection_sample(torch.tensor([1, 2, 3]), torch.tensor([2, 1]), torch.randn(3, 5), [0, 4], [0.0, 1.0],
                           generators=[None, 3], top_k=[0, 2], top_p=[1.0, 0.9])
    assert out.shape == (2, 3) and out.dtype == torch.int32
