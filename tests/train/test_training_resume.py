"""specpath_train.trainer: the resumable wall-clock loop and the reduced training vocabulary."""

import torch

from specpath_train.trainer import target_argmax, train_loop, vocab_by_frequency


def _problem():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    x = torch.randn(64, 4)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 3.0])

    def loss_fn(idx_x, _unused):
        loss = (model(idx_x).squeeze(-1) - (idx_x @ torch.tensor([1.0, -2.0, 0.5, 3.0]))).pow(2).mean()
        return loss, {"mse": loss.item()}

    return model, loss_fn, x, y


def test_a_restarted_run_continues_from_its_resume_file(tmp_path):
    model, loss_fn, x, _ = _problem()
    resume = tmp_path / "resume.pt"
    first = train_loop(model, loss_fn, x, x, minutes=0.01, batch=8, lr=1e-2, seed=0, log=lambda s: None,
                       heldout=(x[:8], x[:8]), resume=resume, warmup=1)
    assert resume.is_file() and first["steps"] > 0
    state = torch.load(resume, weights_only=False)
    assert state["step"] == first["steps"] and state["elapsed"] >= 0.6
    weights = model.weight.detach().clone()
    again, _, _, _ = _problem()
    lines = []
    second = train_loop(again, loss_fn, x, x, minutes=0.01, batch=8, lr=1e-2, seed=0, log=lines.append,
                        heldout=(x[:8], x[:8]), resume=resume, warmup=1)
    assert any(line.startswith("resumed from") for line in lines)
    assert second["steps"] == first["steps"]  # the budget was spent: nothing left to train
    assert torch.equal(again.weight, weights) and "mse" in second


def test_vocab_by_frequency_keeps_the_most_frequent_ids_in_order():
    tokens = torch.tensor([[5, 5, 5, 2, 2, 9, 1, 1, 1, 1]])
    assert vocab_by_frequency(tokens, 12, 3).tolist() == [1, 2, 5]
    assert vocab_by_frequency(tokens, 12, 4).tolist() == [1, 2, 5, 9]
    assert vocab_by_frequency(tokens, 12, 6).tolist() == [0, 1, 2, 3, 5, 9]  # ties (unseen ids): the lower first


def test_target_argmax_is_the_whole_vocabulary_argmax_in_chunks():
    torch.manual_seed(1)
    final, norm, head = torch.randn(3, 7, 8), torch.rand(8) + 0.5, torch.randn(50, 8)
    x = final * torch.rsqrt(final.pow(2).mean(-1, keepdim=True) + 1e-5) * norm
    assert torch.equal(target_argmax(norm, head, final, 1e-5, chunk=4), (x @ head.T).argmax(-1))


def test_extra_counts_rank_ids_the_training_tokens_never_show():
    tokens = torch.tensor([[5, 5, 5, 2, 2, 1]])
    extra = torch.zeros(12)
    extra[7] = 100.0  # scaled to the training total: 6 counts for id 7, more than id 5 has
    assert vocab_by_frequency(tokens, 12, 2, extra_counts=extra).tolist() == [5, 7]
    assert vocab_by_frequency(tokens, 12, 2, extra_counts=torch.zeros(12)).tolist() == [2, 5]


def test_bf16_steps_run_under_autocast_and_keep_float32_weights():
    model, _, x, _ = _problem()
    dtypes = []

    def loss_fn(batch, _unused):
        out = model(batch).squeeze(-1)
        dtypes.append(out.dtype)
        loss = (out.float() - (batch @ torch.tensor([1.0, -2.0, 0.5, 3.0]))).pow(2).mean()
        return loss, {"mse": loss.item()}

    before = loss_fn(x, x)[0].item()
    dtypes.clear()
    metrics = train_loop(model, loss_fn, x, x, minutes=0.01, batch=8, lr=1e-2, seed=0, log=lambda s: None,
                         heldout=(x, x), warmup=1, bf16=True)
    assert metrics["steps"] > 0 and metrics["mse"] < before
    assert dtypes[0] is torch.bfloat16 and dtypes[-1] is torch.float32  # training steps in bf16, held-out in fp32
    assert model.weight.dtype is torch.float32


def test_a_recipe_stopped_by_a_signal_says_so_in_one_line_not_a_traceback(capsys):
    from specpath_train.trainer import TrainingInterrupted, run_recipe

    def stopped() -> int:
        raise TrainingInterrupted("stopped by SIGTERM at step 5; state saved in OUT/resume.pt")

    assert run_recipe(stopped, "specpath_train.recipes.x") == 130
    err = capsys.readouterr().err
    assert err == ("specpath_train.recipes.x: stopped by SIGTERM at step 5; state saved in OUT/resume.pt; "
                   "run the same command to continue\n")
    assert run_recipe(lambda: 0, "specpath_train.recipes.x") == 0


def test_every_recipe_module_runs_its_main_through_run_recipe():
    import ast
    from pathlib import Path

    import specpath_train.recipes as recipes

    for path in Path(recipes.__file__).parent.glob("*.py"):
        tree = ast.parse(path.read_text())
        mains = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
        for block in mains:  # a module with a __main__ block starts its recipe through run_recipe
            assert "run_recipe(main" in ast.unparse(block), path.name
