"""The training recipe's pieces: a training block sees exactly what serving sees (same outputs
as the from-scratch serving computation), position weights, and a few optimiser steps lower
the loss on a tiny problem."""

import torch

from specpath_drafting.block.drafter import DFlashDrafter, DrafterConfig
from specpath_drafting.block.testing import reference_block, training_batch
from specpath_train.block import block_batch, dflash_loss, position_weights
from specpath_drafting.testing import drafting_target, train_steps


def setup(tmp_path, anchor_sampling=False):
    target = drafting_target(tmp_path / "t", num_layers=4).float()
    config = DrafterConfig.for_target("dflash", target.config.to_hf_dict(), num_layers=2, num_taps=2,
                                      anchor_sampling=anchor_sampling)
    torch.manual_seed(0)
    drafter = DFlashDrafter(config, embed_tokens=target.embed, lm_head=target.lm_head_logits)
    with torch.no_grad():
        drafter.mask_embedding.normal_()
    return (target, drafter, *training_batch(target, config))


def test_training_blocks_equal_the_serving_computation(tmp_path):
    for anchor_sampling in (False, True):
        target, drafter, tokens, taps = setup(tmp_path, anchor_sampling)
        anchors = torch.tensor([[1, 5, 12], [3, 9, 15]])
        with torch.no_grad():
            batch = block_batch(drafter, tokens, taps, anchors, k=4)
        for s in range(2):
            for a in range(3):
                pos = int(anchors[s, a])
                want = reference_block(drafter, target, tokens[s, :pos + 1].tolist(), 4)
                torch.testing.assert_close(batch.hidden[s, a], want, rtol=1e-4, atol=1e-5)
                assert batch.labels[s, a].tolist() == tokens[s, pos + 1:pos + 5].tolist()
                assert batch.prev[s, a].tolist() == tokens[s, pos:pos + 4].tolist()


def test_position_weights_decay_and_sum_to_one():
    w = position_weights(7)
    assert abs(float(w.sum()) - 1) < 1e-6 and bool((w[1:] < w[:-1]).all())


def test_a_few_steps_lower_the_loss(tmp_path):
    target, drafter, tokens, taps = setup(tmp_path)
    norm_w, head_w = target.model.norm.weight.detach(), target.lm_head.weight.detach()
    loss_fn = dflash_loss(drafter, norm_w, head_w, 1e-5, k=3, anchors_per_window=6)
    before, after, info = train_steps(loss_fn, drafter, tokens, taps)
    assert float(after) < float(before) and 1.0 <= info["tau"] <= 4.0


def test_a_grown_drafter_drafts_what_its_checkpoint_did_and_then_learns(tmp_path):
    """--init from a drafter with fewer layers: the new layer copies the last one with its output
    projections at zero, so the blocks are unchanged until training moves them; the outputs learn
    from the first step, the rest of the layer from the next."""
    import attrs
    import pytest

    from specpath_drafting.block.drafter import save_drafter
    from specpath_train.block import start_from

    target, two, tokens, taps = setup(tmp_path)
    one = DFlashDrafter(attrs.evolve(two.config, num_hidden_layers=1), embed_tokens=target.embed,
                        lm_head=target.lm_head_logits)
    with torch.no_grad():
        for p in one.parameters():
            p.normal_(0, 0.2)
    save_drafter(one, tmp_path / "one")
    log = []
    start_from(two, str(tmp_path / "one"), log.append)
    assert "grown from 1 to 2 layers" in log[0]
    assert not two.layers[1].o_proj.weight.any() and not two.layers[1].down_proj.weight.any()
    torch.testing.assert_close(two.layers[1].q_proj.weight, one.layers[0].q_proj.weight)
    anchors = torch.tensor([[1, 5, 12], [3, 9, 15]])
    with torch.no_grad():
        want, got = (block_batch(d, tokens, taps, anchors, k=4).hidden for d in (one, two))
    torch.testing.assert_close(got, want, rtol=0, atol=0)

    norm_w, head_w = target.model.norm.weight.detach(), target.lm_head.weight.detach()
    loss_fn = dflash_loss(two, norm_w, head_w, 1e-5, k=3, anchors_per_window=6)
    opt = torch.optim.SGD(two.parameters(), lr=0.1)
    for names in (("o_proj", "down_proj"), ("q_proj", "k_proj", "gate_proj", "up_proj")):
        opt.zero_grad()
        loss_fn(tokens, taps)[0].backward()
        for name in names:  # the outputs learn first, then (once they are not zero) what feeds them
            assert getattr(two.layers[1], name).weight.grad.abs().sum() > 0, name
        opt.step()

    save_drafter(two, tmp_path / "two")
    with pytest.raises(ValueError, match="may add layers, not drop them"):
        start_from(one, str(tmp_path / "two"), log.append)
