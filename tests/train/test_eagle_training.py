"""The EAGLE-1 training loss on tiny shapes."""

import torch
import torch.nn.functional as F

from specpath_drafting.heads import HeadConfig
from specpath_drafting.testing import drafting_target
from specpath_eagle.head import EagleHead
from specpath_train.recipes.eagle import eagle_loss


def test_training_loss_runs_and_learns():
    """A few optimiser steps of the EAGLE-1 loss lower it on a fixed batch."""
    t = drafting_target(num_layers=4).float()
    cfg = t.config.to_hf_dict()
    emb, norm, head_w = t.model.embed_tokens.weight.detach(), t.model.norm.weight.detach(), t.lm_head.weight.detach()
    tokens = torch.randint(0, 64, (4, 24), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        taps = t(tokens, torch.arange(24), hidden_layers=(0, 1, 2, 3)).hidden_states
    head = EagleHead(HeadConfig.for_target("eagle", cfg), embed_tokens=lambda i: F.embedding(i, emb),
                     lm_head=lambda h: h @ head_w.T)
    loss_fn = eagle_loss(head, norm, head_w, 1e-5, ce_weight=0.5, noise=0.0)
    opt = torch.optim.Adam(head.parameters(), lr=3e-3)
    first = None
    for _ in range(15):
        loss, info = loss_fn(tokens, taps[:, :, -1:])
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < first, (first, loss.item())
    assert {"acc0", "reg", "ce"} <= set(info)
