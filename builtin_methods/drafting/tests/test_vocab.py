"""Serving a shared-head drafter over its recorded training vocabulary (specpath_drafting.vocab):
the record is parsed strictly, and the restricted head equals the full head on the kept ids and
is -inf elsewhere, through the affine fast path and through the masked fallback; its kept
logits alone (``kept_logits``, ``compact``) are the values it scatters."""

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_drafting.vocab import (
    RestrictedLMHead,
    checkpoint_train_vocab,
    recorded_train_vocab,
    serving_lm_head,
)

VOCAB = 50


def record(ids):
    return {"specpath_training": {"script": "x", "train_vocab_ids": ids}}


@given(st.sets(st.integers(0, VOCAB - 1), min_size=1))
def test_a_record_gives_its_ids_sorted(ids):
    got = recorded_train_vocab(record(sorted(ids, reverse=True)), VOCAB)
    assert got.dtype == torch.int64
    assert got.tolist() == sorted(ids)


@pytest.mark.parametrize("config", [{}, {"specpath_training": {"script": "x"}}, {"specpath_training": None},
                                    record(None)])
def test_no_record_means_the_whole_vocabulary(config):
    assert recorded_train_vocab(config, VOCAB) is None


@pytest.mark.parametrize(("ids", "message"), [
    ([], "non-empty list"), ("1 2", "non-empty list"), ([1, 2.5], "non-empty list"), ([True], "non-empty list"),
    ([0, VOCAB], "outside the vocabulary"), ([-1, 3], "outside the vocabulary"), ([3, 3], "repeats"),
])
def test_a_bad_record_is_a_one_line_error_naming_the_file(ids, message):
    with pytest.raises(ValueError, match=message) as info:
        recorded_train_vocab(record(ids), VOCAB, where="ckpt/config.json")
    assert str(info.value).startswith("ckpt/config.json: ") and "\n" not in str(info.value)


def test_the_checkpoint_reader(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(record([4, 1, 9])))
    assert checkpoint_train_vocab(tmp_path, VOCAB).tolist() == [1, 4, 9]
    assert checkpoint_train_vocab(tmp_path / "missing", VOCAB) is None  # the loader reports it


def _linear(seed, bias=True):
    torch.manual_seed(seed)
    return torch.nn.Linear(8, VOCAB, bias=bias).double()


def _softcapped(lin):
    return lambda h: 3.0 * torch.tanh(lin(h) / 3.0)  # not affine: the fallback masks the full logits


@settings(max_examples=30, deadline=None)
@given(ids=st.sets(st.integers(0, VOCAB - 1), min_size=1, max_size=VOCAB - 1), seed=st.integers(0, 3),
       kind=st.sampled_from(["linear", "no-bias", "softcapped"]), lead=st.sampled_from([(3,), (2, 4), ()]))
def test_the_restricted_head_keeps_the_ids_logits_and_drops_the_rest(ids, seed, kind, lead):
    lin = _linear(seed, bias=kind != "no-bias")
    full = _softcapped(lin) if kind == "softcapped" else lin
    keep = torch.tensor(sorted(ids))
    head = RestrictedLMHead(full, keep, VOCAB)
    h = torch.randn(*lead, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        got, want = head(h), full(h).float()
    assert got.shape == (*lead, VOCAB) and got.dtype == torch.float32
    others = torch.ones(VOCAB, dtype=torch.bool)
    others[keep] = False
    assert torch.isneginf(got[..., others]).all()
    torch.testing.assert_close(got[..., keep], want[..., keep], rtol=1e-5, atol=1e-5)  # float64: exact
    assert (got.argmax(-1) == keep[want[..., keep].argmax(-1)]).all()  # the best kept id wins
    assert (head._rows[(h.dtype, h.device)] is None) == (kind == "softcapped")  # fast path iff affine
    with torch.no_grad():
        kept, kept_ids = head.kept_logits(h)
        head.compact = True
        compact = head(h)
    assert kept_ids.tolist() == keep.tolist()
    assert torch.equal(kept, got[..., keep]) and torch.equal(compact, kept)  # the values forward scatters
    assert torch.equal(kept_ids[kept.argmax(-1)], got.argmax(-1))  # the same greedy id, ties included


def test_the_fast_path_multiplies_only_the_kept_rows():
    calls = []
    lin = _linear(0)

    def counting(h):
        calls.append(h.shape[0] if h.dim() > 1 else 1)
        return lin(h)

    head = RestrictedLMHead(counting, torch.tensor([2, 7, 11]), VOCAB)
    with torch.no_grad():
        head(torch.randn(5, 8, dtype=torch.float64))
        reads = len(calls)
        head(torch.randn(5, 8, dtype=torch.float64))
    assert len(calls) == reads  # after the one-off read of the rows, the lent head is not called
    assert head.lent_head_rows == 3  # what the engine prices a drafting pass by (its byte prior)


def test_serving_lm_head_restricts_only_with_a_record(tmp_path):
    lin = _linear(1)
    (tmp_path / "config.json").write_text(json.dumps({"specpath_training": {"script": "x"}}))
    assert serving_lm_head(lin, tmp_path, VOCAB) is lin
    assert serving_lm_head(None, tmp_path, VOCAB) is None
    (tmp_path / "config.json").write_text(json.dumps(record(list(range(VOCAB)))))
    assert serving_lm_head(lin, tmp_path, VOCAB) is lin  # every id kept: nothing to restrict
    (tmp_path / "config.json").write_text(json.dumps(record([0, 5])))
    restricted = serving_lm_head(lin, tmp_path, VOCAB)
    assert isinstance(restricted, RestrictedLMHead) and restricted.ids.tolist() == [0, 5]


def test_the_kept_rows_are_readied_by_prepare_and_give_the_same_logits():
    """``prepare`` (the engine's ``prepare_module``) gets the kept rows as a linear layer; with
    the engine's bf16 packing the logits are the unpacked head's, bit for bit."""
    from specpath_engine.packed_linear import PackedLinear, pack_linears_, packing_enabled

    lin = torch.nn.Linear(64, VOCAB, bias=False).to(torch.bfloat16)
    keep = torch.tensor([1, 4, 9, 30, 49])
    seen = []

    def prepare(module):
        seen.append(module)
        return pack_linears_(module) if packing_enabled(torch.bfloat16) else module

    plain, readied = RestrictedLMHead(lin, keep, VOCAB), RestrictedLMHead(lin, keep, VOCAB, prepare=prepare)
    h = torch.randn(3, 64, generator=torch.Generator().manual_seed(0)).to(torch.bfloat16)
    with torch.inference_mode():
        want, got = plain(h), readied(h)
        assert torch.equal(readied(h[:1]), got[:1])
    assert torch.equal(got, want)
    assert len(seen) == 1  # once per dtype and device
    if packing_enabled(torch.bfloat16):
        assert isinstance(readied._rows[(h.dtype, h.device)][0], PackedLinear)
