"""The attention hook: an engine-style KV cache, block mode, batch forward, selected rows."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import torch

from specpath_engine.model import BlockCausalAttention, LlamaModel, causal_attention
from specpath_engine.model_config import LlamaConfig
from specpath_engine.testing.engine import tiny_llama_config

VOCAB = 61


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    config = LlamaConfig(**tiny_llama_config(vocab_size=VOCAB, hidden_size=48, intermediate_size=80, num_hidden_layers=3,
                                             num_attention_heads=6, head_dim=8, rms_norm_eps=1e-6))
    model = LlamaModel(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.3) if p.dim() > 1 else p.uniform_(0.5, 1.5)
    return model


class ListKVAttention:
    """What an engine does, without pages: per request and layer, keep all k/v written so far.

    A step carries tokens of several requests, several tokens each (``seq_ids`` / ``positions``);
    each query attends to its own request's keys at positions <= its own.
    """

    def __init__(self) -> None:
        self.cache: dict[tuple[int, int], tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = {}
        self.seq_ids = self.positions = None

    def step(self, seq_ids: torch.Tensor, positions: torch.Tensor) -> "ListKVAttention":
        self.seq_ids, self.positions = seq_ids, positions
        return self

    def __call__(self, layer_idx, q, k, v):
        out = torch.empty_like(q)
        for seq in self.seq_ids.unique().tolist():
            rows = (self.seq_ids == seq).nonzero().squeeze(1)
            old = self.cache.get((seq, layer_idx))
            pos, ks, vs = self.positions[rows], k[rows], v[rows]
            if old is not None:
                pos, ks, vs = torch.cat([old[0], pos]), torch.cat([old[1], ks]), torch.cat([old[2], vs])
            self.cache[(seq, layer_idx)] = (pos, ks, vs)
            groups = q.shape[1] // k.shape[1]
            keys, values = ks.repeat_interleave(groups, 1), vs.repeat_interleave(groups, 1)
            scores = torch.einsum("qhd,khd->hqk", q[rows], keys) / q.shape[-1] ** 0.5
            visible = pos[None, :] <= self.positions[rows][:, None]
            probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
            out[rows] = torch.einsum("hqk,khd->qhd", probs, values)
        return out


def _full(model, ids, hidden_layers=()):
    with torch.no_grad():
        return model(ids, torch.arange(len(ids)), hidden_layers=hidden_layers)


def test_incremental_kv_steps_give_the_full_forward_logits(tiny):
    """Prefill in chunks, then one token and several (verification-sized) at a time, two requests mixed."""
    gen = torch.Generator().manual_seed(1)
    seqs = {0: torch.randint(0, VOCAB, (23,), generator=gen), 1: torch.randint(0, VOCAB, (17,), generator=gen)}
    expected = {s: _full(tiny, ids, hidden_layers=(1, 2)) for s, ids in seqs.items()}
    chunks = {0: [5, 1, 4, 1, 1, 6, 5], 1: [3, 3, 1, 5, 1, 4]}  # per step, tokens of each request
    attention, done = ListKVAttention(), {0: 0, 1: 0}
    got_logits = {0: [], 1: []}
    got_hidden = {0: [], 1: []}
    for step in range(max(len(c) for c in chunks.values())):
        ids, pos, seq_ids = [], [], []
        for s in (1, 0):  # request order need not follow ids
            if step < len(chunks[s]):
                n = chunks[s][step]
                ids.append(seqs[s][done[s] : done[s] + n])
                pos.append(torch.arange(done[s], done[s] + n))
                seq_ids.append(torch.full((n,), s))
                done[s] += n
        ids, pos, seq_ids = torch.cat(ids), torch.cat(pos), torch.cat(seq_ids)
        with torch.no_grad():
            out = tiny(ids, pos, attention.step(seq_ids, pos), hidden_layers=(1, 2))
        for s in (0, 1):
            got_logits[s].append(out.logits[seq_ids == s])
            got_hidden[s].append(out.hidden_states[seq_ids == s])
    for s in (0, 1):
        torch.testing.assert_close(torch.cat(got_logits[s]), expected[s].logits, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(torch.cat(got_hidden[s]), expected[s].hidden_states, rtol=1e-4, atol=1e-4)


def test_logits_indices_select_rows_before_the_head(tiny):
    ids = torch.randint(0, VOCAB, (9,), generator=torch.Generator().manual_seed(2))
    full = _full(tiny, ids).logits
    with torch.no_grad():
        picked = tiny(ids, torch.arange(9), logits_indices=torch.tensor([8, 0, 4])).logits
    torch.testing.assert_close(picked, full[[8, 0, 4]])


def test_forward_batch_equals_forward_per_row(tiny):
    ids = torch.randint(0, VOCAB, (3, 11), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        batch = tiny.forward_batch(ids)
    assert batch.shape == (3, 11, VOCAB)
    for row in range(3):
        torch.testing.assert_close(batch[row], _full(tiny, ids[row]).logits, rtol=1e-5, atol=1e-5)


def test_shared_pieces_compose_to_the_forward(tiny):
    ids = torch.randint(0, VOCAB, (7,), generator=torch.Generator().manual_seed(4))
    out = _full(tiny, ids, hidden_layers=(2,))
    with torch.no_grad():
        rebuilt = tiny.lm_head_logits(tiny.final_norm(out.hidden_states[:, 0]))
        embedded = tiny.embed(ids)
    torch.testing.assert_close(rebuilt, out.logits)
    assert embedded.shape == (7, 48)


def test_block_mode_is_bidirectional_inside_blocks_and_causal_across(tiny):
    ids = torch.randint(0, VOCAB, (12,), generator=torch.Generator().manual_seed(5))
    pos = torch.arange(12)
    with torch.no_grad():
        one = tiny(ids, pos, BlockCausalAttention(1)).logits
        torch.testing.assert_close(one, tiny(ids, pos, causal_attention).logits)
        base = tiny(ids, pos, BlockCausalAttention(4)).logits
        changed = ids.clone()
        changed[6] = (ids[6] + 1) % VOCAB  # a token in the second block [4, 8)
        after = tiny(changed, pos, BlockCausalAttention(4)).logits
    assert torch.equal(after[:4], base[:4])  # earlier block cannot see it
    assert not torch.allclose(after[4:6], base[4:6])  # same block sees it, before and after
    assert not torch.allclose(after[8:], base[8:])
    mask = BlockCausalAttention(4).mask(12)
    assert mask[5, 7] and not mask[3, 4] and mask[11, 0]


def test_hidden_layers_out_of_range_is_a_one_line_error(tiny):
    ids = torch.zeros(3, dtype=torch.long)
    with pytest.raises(ValueError, match=r"hidden_layers: \[3\] out of range; layers are 0..2"):
        tiny(ids, torch.arange(3), hidden_layers=(0, 3))


def test_positions_past_the_rope_table_grow_it(tiny):
    rope = tiny.model.rotary_emb
    cos, sin = rope(torch.tensor([0, rope.cache_len + 5]))
    assert rope.cache_len >= 134 and cos.shape == (2, 8)
    torch.testing.assert_close(cos[1], rope.cos_cached[133])


def test_bfloat16_weights_still_return_float32_logits(tiny, tmp_path):
    tiny.save_pretrained(tmp_path)
    model = LlamaModel.from_pretrained(tmp_path, dtype=torch.bfloat16)
    ids = torch.randint(0, VOCAB, (6,), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        out = model(ids, torch.arange(6))
    assert model.lm_head.weight.dtype == torch.bfloat16 and out.logits.dtype == torch.float32
    assert (out.logits.argmax(-1) == _full(tiny, ids).logits.argmax(-1)).float().mean() > 0.5


@given(rows=st.integers(1, 12), seed=st.integers(0, 2**16))
@settings(max_examples=25, deadline=None)
def test_the_head_gives_every_row_count_the_linear_products(tiny, rows, seed):
    """A float32 head multiplies a verification's few rows as ``W @ h.T`` (MKL's ``F.linear`` is
    2-3x slower there); the logits are the same products, float32, one row per query row."""
    h = torch.randn(rows, 48, generator=torch.Generator().manual_seed(seed))
    logits = tiny.lm_head_logits(h)
    assert logits.shape == (rows, VOCAB) and logits.dtype == torch.float32 and logits.is_contiguous()
    torch.testing.assert_close(logits, torch.nn.functional.linear(h, tiny.lm_head.weight), rtol=1e-5, atol=1e-5)
