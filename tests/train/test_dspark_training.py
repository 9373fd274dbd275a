"""DSpark's training pieces: the loss (CE + L1 + confidence BCE) goes down on a tiny problem,
the Markov head's teacher-forced logits are the serving distribution, and sequential
temperature scaling lowers the calibration error of the cumulative confidence."""

import torch

from specpath_drafting.block.drafter import DrafterConfig
from specpath_drafting.block.testing import training_batch
from specpath_train.block import block_batch
from specpath_dspark.drafter import DSparkDrafter
from specpath_dspark.reference import markov_sample_reference, topk_floor
from specpath_train.recipes.dspark_losses import calibrate_temperatures, dspark_loss, expected_calibration_error, markov_outputs
from specpath_drafting.testing import drafting_target, train_steps


def setup(tmp_path):
    target = drafting_target(tmp_path / "t", num_layers=4).float()
    config = DrafterConfig.for_target("dspark", target.config.to_hf_dict(), num_layers=1, num_taps=2, markov_rank=8)
    torch.manual_seed(0)
    drafter = DSparkDrafter(config, embed_tokens=target.embed, lm_head=target.lm_head_logits)
    with torch.no_grad():
        drafter.markov_w2.normal_(0, 0.5)
    return (target, drafter, *training_batch(target, config))


def test_a_few_steps_lower_the_loss(tmp_path):
    target, drafter, tokens, taps = setup(tmp_path)
    loss_fn = dspark_loss(drafter, target.model.norm.weight.detach(), target.lm_head.weight.detach(), 1e-5, k=3,
                          anchors_per_window=6)
    before, after, info = train_steps(loss_fn, drafter, tokens, taps)
    assert float(after) < float(before) and {"ce", "l1", "bce", "tau"} <= set(info)


def test_teacher_forced_outputs_are_the_serving_distribution(tmp_path):
    """Given the same previous tokens, training's Markov logits and confidences are what the
    sampling kernel's reference computes while serving."""
    _, drafter, tokens, taps = setup(tmp_path)
    with torch.no_grad():
        b = block_batch(drafter, tokens, taps, torch.tensor([[4], [9]]), k=3)
        logits, conf = markov_outputs(drafter, b.hidden, b.prev)
        base = drafter.logits(b.hidden)[:, 0]
        # greedy serving with the labels forced as previous tokens: step through one position at a time
        for j in range(3):
            anchors = b.prev[:, 0, j]
            _, probs, c = markov_sample_reference(
                base[:, j:j + 1], topk_floor(base[:, j:j + 1], None), drafter.markov_w1, drafter.markov_w2, anchors,
                drafter.confidence_base(b.hidden[:, 0, j:j + 1]), drafter.confidence_markov,
                torch.ones(1), torch.zeros(2), torch.zeros(2, 1))
            torch.testing.assert_close(probs[:, 0], torch.softmax(logits[:, 0, j], -1))
            torch.testing.assert_close(c[:, 0], torch.sigmoid(conf[:, 0, j]))


def test_sequential_temperature_scaling_calibrates_the_survival():
    gen = torch.Generator().manual_seed(0)
    n, k = 4000, 4
    true = torch.rand(n, k, generator=gen) * 0.6 + 0.35  # true per-position acceptance probabilities
    accepted = torch.rand(n, k, generator=gen) < true
    logits = torch.logit(true) * 3.0  # over-confident by a factor of 3 in logit space
    temps, errors = calibrate_temperatures(logits, accepted)
    raw = torch.sigmoid(logits).cumprod(dim=1)
    events = accepted.long().cumprod(dim=1)
    for j in range(k):
        assert errors[j] <= expected_calibration_error(raw[:, j], events[:, j]) + 1e-9
    assert 2.0 <= temps[0] <= 4.5  # undoes the factor of 3 at the first position


def test_markov_columns_restrict_the_bias_to_a_training_vocabulary(tmp_path):
    """Training over a reduced vocabulary scores the Markov bias on the same columns."""
    _, drafter, tokens, _ = setup(tmp_path)
    full = drafter.markov_bias(tokens)
    cols = torch.tensor([0, 3, 5, 17])
    drafter.markov_columns = cols
    assert torch.allclose(drafter.markov_bias(tokens), full[..., cols], atol=1e-6)
    drafter.markov_columns = None
    assert torch.equal(drafter.markov_bias(tokens), full)
