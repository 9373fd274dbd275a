"""specpath_train.batch_decode: a left-padded batch decodes each row as it would alone, sampling
keeps to the nucleus, EOS ends a row."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_train.batch_decode import decode, sample

_MODEL: list = []


def model():
    if not _MODEL:
        from specpath_engine.model import LlamaModel
        from specpath_engine.modeling.named_models import embedded_model_path

        _MODEL.append(LlamaModel.from_pretrained(str(embedded_model_path())))
    return _MODEL[0]


prompt = st.lists(st.integers(1, 250), min_size=1, max_size=9)


@settings(max_examples=10, deadline=None)
@given(prompts=st.lists(prompt, min_size=1, max_size=5), new=st.integers(1, 6))
def test_a_padded_batch_decodes_each_row_as_it_would_alone(prompts, new):
    together = decode(model(), prompts, max_new_tokens=new)
    alone = [decode(model(), [p], max_new_tokens=new)[0] for p in prompts]
    assert together == alone
    assert all(len(row) == new for row in together)


def test_greedy_decoding_is_the_models_argmax_continuation():
    m = model()
    p = [10, 20, 30, 40]
    got = decode(m, [p], max_new_tokens=5)[0]
    seq = list(p)
    for _ in range(5):
        logits = m.forward_batch(torch.tensor([seq]), last_only=True)[0, -1]
        seq.append(int(logits.argmax()))
    assert got == seq[len(p):]


def test_a_row_ends_at_its_first_eos_and_the_batch_stops_when_all_have():
    m = model()
    first = decode(m, [[5, 6, 7]], max_new_tokens=8)[0]
    eos = first[2]
    got = decode(m, [[5, 6, 7]], max_new_tokens=40, eos_token_ids=[eos])[0]
    assert got == first[:first.index(eos) + 1]


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10_000), top_p=st.floats(0.05, 0.95), temperature=st.floats(0.3, 2.0))
def test_sampling_keeps_to_the_top_p_nucleus(seed, top_p, temperature):
    logits = torch.randn(4, 50, generator=torch.Generator().manual_seed(seed)) * 3
    ids = sample(logits, temperature=temperature, top_p=top_p, generator=torch.Generator().manual_seed(seed))
    probs = torch.softmax(logits / temperature, -1)
    for row, i in enumerate(ids.tolist()):
        above = probs[row][probs[row] > probs[row][i]].sum()  # mass of the ids ranked before the draw
        assert above < top_p + 1e-6


def test_temperature_zero_is_the_argmax():
    logits = torch.randn(3, 11)
    assert torch.equal(sample(logits, temperature=0.0, top_p=1.0, generator=None), logits.argmax(-1))


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_sampled_decoding_is_repeatable_for_a_seed(temperature):
    a = decode(model(), [[1, 2, 3], [4]], max_new_tokens=6, temperature=temperature, top_p=0.9, seed=3)
    b = decode(model(), [[1, 2, 3], [4]], max_new_tokens=6, temperature=temperature, top_p=0.9, seed=3)
    assert a == b
