"""The eagle3 speculator (chain and P-EAGLE) in the reference engine, its reduced-vocabulary
maps, and the training losses on tiny shapes."""

import pytest
import torch

from specpath_drafting.heads import load_head_weights, read_head_config
from specpath_drafting.testing import TINY_PROMPTS as PROMPTS
from specpath_drafting.testing import DraftingSetup, drafting_setup, greedy
from specpath_drafting.testing import chi_square_of_two_tokens, drafts_equal_a_from_scratch_computation
from specpath_drafting.testing import random_head, reference_drafts, train_steps
from specpath_eagle3.head import Eagle3Head

GREEDY = greedy()
setup = drafting_setup("eagle3", lambda root, target: random_head(
    Eagle3Head, target, root / "head", seed=4, parallel_drafting=True, draft_vocab_size=40))
llm = DraftingSetup.llm


def spec_for(setup, k, **extra):
    return {"method": "eagle3", "model": str(setup[2]), "num_speculative_tokens": k, "draft_length_policy": "fixed",
            **extra}  # these tests check what K drafts are, so K every step


@pytest.mark.parametrize("parallel", [False, True])
def test_drafts_equal_a_from_scratch_computation(setup, parallel):
    speculator, requests = drafts_equal_a_from_scratch_computation(
        setup, spec_for(setup, 4, parallel_drafting=parallel), lambda s, r, n: reference_drafts(
            s.head, setup.target, r.token_ids, s.hidden_state_layers, n, parallel=parallel),
        repeat=False, block_size=16, max_model_len=None)
    assert speculator.hidden_state_layers == (0, 1, 2)  # default taps of a 4-layer target
    assert set(sum((r.output_token_ids for r in requests), [])) and speculator.head.t2d.sum() == 40


@pytest.mark.parametrize(("k", "parallel"), [(k, False) for k in range(1, 9)] + [(2, True), (4, True), (8, True)])
@pytest.mark.parametrize("prefix_caching", [False, True])
def test_greedy_output_equals_the_baseline(setup, k, parallel, prefix_caching):
    root, _, _, baseline = setup
    engine = llm(setup, spec_for(setup, k, parallel_drafting=parallel),
                      enable_prefix_caching=prefix_caching)
    outputs = engine.generate(PROMPTS + PROMPTS[:2], GREEDY)
    assert [o.token_ids for o in outputs] == baseline + baseline[:2]
    assert engine.metrics.num_draft_tokens > 0
    if prefix_caching:
        assert engine.metrics.num_cached_tokens > 0


def test_vocab_maps(setup):
    head_dir = setup[2]
    head = load_head_weights(Eagle3Head(read_head_config(head_dir)), head_dir)
    ids = head.draft_ids
    assert ids.shape == (40,) and bool((ids[1:] > ids[:-1]).all())
    assert torch.equal(head.to_target(torch.arange(40)), ids)
    assert int(head.t2d.sum()) == 40 and bool(head.t2d[ids].all())
    probs = torch.softmax(torch.randn(3, 40), -1)
    full = head.probs_to_target(probs)
    assert full.shape == (3, 64) and torch.allclose(full.sum(-1), torch.ones(3))
    assert torch.equal(full[:, ids], probs) and float(full[:, ~head.t2d].abs().sum()) == 0.0


@pytest.mark.parametrize("parallel", [False, True])
def test_sampled_output_follows_the_target_distribution(tmp_path, parallel):
    """Random drafts from a reduced vocabulary (q = 0 outside it) at temperature 1: the
    (2nd, 3rd) output tokens follow the target's exact joint distribution."""
    chi_square_of_two_tokens(tmp_path, {"method": "eagle3", "parallel_drafting": parallel}, lambda path, target: random_head(
        Eagle3Head, target, tmp_path / "h", seed=6, parallel_drafting=True, draft_vocab_size=4), num_layers=3, seed=13)


def _training_batch(target, *, rows, length, seed):
    """What an EAGLE-3 loss reads from the (float32) target: its config, embedding, final norm and
    head weights, and a random token batch with the states of all four layers."""
    t = target.float()
    emb, norm, head_w = t.model.embed_tokens.weight.detach(), t.model.norm.weight.detach(), t.lm_head.weight.detach()
    tokens = torch.randint(0, 64, (rows, length), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        taps = t(tokens, torch.arange(length), hidden_layers=(0, 1, 2, 3)).hidden_states
    return t.config.to_hf_dict(), emb, norm, head_w, tokens, taps


def test_training_losses_run_and_learn(setup):
    """A few optimiser steps of the EAGLE-3 TTT + P-EAGLE loss lower it on a fixed batch (tiny
    shapes; the EAGLE-1 loss: ``specpath_eagle``'s test_eagle_training)."""
    import torch.nn.functional as F

    from specpath_drafting.heads import HeadConfig
    from specpath_train.recipes.eagle3 import draft_vocabulary, eagle3_loss

    cfg, emb, norm, head_w, tokens, taps = _training_batch(setup.target, rows=4, length=24, seed=0)
    h3 = Eagle3Head(HeadConfig.for_target("eagle3", cfg, draft_vocab_size=48, parallel_drafting=True),
                    embed_tokens=lambda i: F.embedding(i, emb))
    h3.set_vocab_map(draft_vocabulary(tokens, 64, 48))
    loss_fn = eagle3_loss(h3, norm, head_w, 1e-5, ttt_steps=3, parallel_depths=3, parallel_weight=0.5)
    before, after, info = train_steps(loss_fn, h3, tokens, taps, steps=15)
    assert after < before, (before, after)
    assert {"acc0", "acc2", "par1", "par2"} <= set(info)


def _causal_pass(head, embeds, features):
    """The head's layer over rows at positions 0..N-1, causal: what serving computes."""
    import torch.nn.functional as F

    cos, sin = head.rope(torch.arange(embeds.shape[0]))
    x, residual = head.layer_input(embeds[None], features[None])
    q, k, v = (t.transpose(1, 2) for t in head.layer.qkv(x, cos, sin))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True).transpose(1, 2)
    return head.layer.finish(out, residual)[0]


@pytest.mark.parametrize("parallel", [False, True])
def test_training_rollouts_see_what_serving_sees(setup, parallel):
    """The training-time-test and P-EAGLE rollouts (``rollout_attention``) give, at depth j of row
    q, the output serving computes after the real rows up to q - j and j drafting rows: the
    chain fed its own outputs, or P-EAGLE's mask rows."""
    import torch.nn.functional as F

    from specpath_drafting.heads import HeadConfig
    from specpath_drafting.rollout import depth_pass

    cfg, emb, _, _, tokens, taps = _training_batch(setup.target, rows=1, length=20, seed=3)
    head = Eagle3Head(HeadConfig.for_target("eagle3", cfg, parallel_drafting=True), embed_tokens=lambda i: F.embedding(i, emb))
    with torch.no_grad():
        for param in head.parameters():
            param.normal_(0, 0.3)
        p = tokens.shape[1] - 2
        cos, sin = head.rope(torch.arange(p))
        real_embeds, real_features = head.embed(tokens[:, 1:p + 1]), head.fuse(taps[:, :p, :-1])
        cache: list = []
        outs = [depth_pass(head, real_embeds, real_features, cos, sin, cache)]
        if parallel:
            cache = cache[:1]
            masks = head.mask_embeds(1).expand(1, p, -1), head.mask_features(1).expand(1, p, -1)
        for j in range(1, 4):
            if parallel:
                outs.append(depth_pass(head, *masks, cos, sin, cache))
            else:
                shifted = torch.cat([outs[-1][:, :1] * 0, outs[-1][:, :-1]], dim=1)
                outs.append(depth_pass(head, real_embeds, shifted, cos, sin, cache))
        for last in (3, 9, 14):
            embeds, features = real_embeds[0, :last + 1], real_features[0, :last + 1]
            for j in range(1, 4):
                if parallel:
                    embeds = torch.cat([embeds, masks[0][0, :1]])
                    features = torch.cat([features, masks[1][0, :1]])
                else:  # the draft at depth j is the real token there (an accepted chain)
                    previous = _causal_pass(head, embeds, features)[-1]
                    embeds = torch.cat([embeds, real_embeds[0, last + j:last + j + 1]])
                    features = torch.cat([features, previous[None]])
                served = _causal_pass(head, embeds, features)[-1]
                torch.testing.assert_close(outs[j][0, last + j], served, rtol=1e-4, atol=1e-4)


def test_p_eagle_on_a_frozen_chain_head_trains_only_its_mask(setup):
    """``--train-only mask``: the P-EAGLE loss moves the mask parameters and nothing else."""
    import torch.nn.functional as F

    from specpath_drafting.heads import HeadConfig
    from specpath_train.recipes.eagle3 import MASK_PARAMETERS, draft_vocabulary, eagle3_loss, train_only_mask

    cfg, emb, norm, head_w, tokens, taps = _training_batch(setup.target, rows=4, length=24, seed=0)
    h3 = Eagle3Head(HeadConfig.for_target("eagle3", cfg, draft_vocab_size=48, parallel_drafting=True),
                    embed_tokens=lambda i: F.embedding(i, emb))
    h3.set_vocab_map(draft_vocabulary(tokens, 64, 48))
    with torch.no_grad():
        h3.mask_hidden.normal_(0, 0.02)
    train_only_mask(h3)
    start = {k: v.detach().clone() for k, v in h3.named_parameters()}
    loss_fn = eagle3_loss(h3, norm, head_w, 1e-5, ttt_steps=1, parallel_depths=3, parallel_weight=1.0)
    before, after, _ = train_steps(loss_fn, h3, tokens, taps, steps=10)
    assert after < before
    for name, value in h3.named_parameters():
        assert torch.equal(value, start[name]) != (name in MASK_PARAMETERS), name


def test_restricted_targets_are_the_full_ones_over_a_full_draft_vocabulary(setup):
    """``restricted`` scores the target's distribution over the draft vocabulary's head rows only
    (SmolLM2: 4,096 of 49,152); with a draft vocabulary covering everything it is the same loss.
    Over a reduced one, held-out agreement still uses the target's whole-vocabulary argmax."""
    import torch.nn.functional as F

    from specpath_drafting.heads import HeadConfig
    from specpath_train.trainer import target_argmax
    from specpath_train.recipes.eagle3 import draft_vocabulary, eagle3_loss

    cfg, emb, norm, head_w, tokens, taps = _training_batch(setup.target, rows=3, length=20, seed=2)
    full = Eagle3Head(HeadConfig.for_target("eagle3", cfg), embed_tokens=lambda i: F.embedding(i, emb))
    full.set_vocab_map(torch.arange(64))
    kw = dict(ttt_steps=2, parallel_depths=0, parallel_weight=0.5)
    plain, info_plain = eagle3_loss(full, norm, head_w, 1e-5, **kw)(tokens, taps)
    restricted, info_r = eagle3_loss(full, norm, head_w, 1e-5, restricted=True, **kw)(tokens, taps)
    assert torch.allclose(plain, restricted, rtol=1e-5) and info_plain == info_r

    small = Eagle3Head(HeadConfig.for_target("eagle3", cfg, draft_vocab_size=16), embed_tokens=lambda i: F.embedding(i, emb))
    small.set_vocab_map(draft_vocabulary(tokens, 64, 16))
    top = target_argmax(norm, head_w, taps[:, :, -1], 1e-5)
    with torch.no_grad():
        given = eagle3_loss(small, norm, head_w, 1e-5, restricted=True, heldout_argmax=top, **kw)(tokens, taps)[1]
        computed = eagle3_loss(small, norm, head_w, 1e-5, restricted=True, **kw)(tokens, taps)[1]
        # an argmax no draft id maps to: the given one is what agreement is measured against
        never = eagle3_loss(small, norm, head_w, 1e-5, restricted=True, heldout_argmax=torch.full_like(top, -1),
                            **kw)(tokens, taps)[1]
    assert given == computed and never["acc0"] == never["acc1"] == 0.0


def test_bf16_drafting_with_the_packed_drafter_matches_the_unpacked_one(setup, monkeypatch):
    from specpath_drafting.testing import packed_drafting_matches_unpacked

    packed_drafting_matches_unpacked(setup, spec_for(setup, 4), monkeypatch)


@pytest.mark.parametrize("method", ["int8", "int4"])
def test_a_quantized_drafter_keeps_the_output(setup, method):
    from specpath_drafting.testing import quantized_drafting_keeps_the_output

    quantized_drafting_keeps_the_output(setup, spec_for(setup, 4), method)
