"""``specpath train``: every method on the embedded tiny target (a few steps each), repeatable
runs, resume, and one-line refusals of bad input that leave nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from specpath.cli import main
from specpath_train.methods import RECIPES

PROMPTS = [
    "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n",
    "import os\nimport sys\n\n\ndef main():\n",
    "class Point:\n    def __init__(self, x, y):\n",
    "for i in range(10):\n    print(i)\n",
    "def read(path):\n    with open(path) as f:\n",
    "x = [i * i for i in range(100)]\n",
    "def fib(n):\n    if n < 2:\n",
    "try:\n    import json\nexcept ImportError:\n",
]
TINY = ["--steps", "3", "--max-new-tokens", "24", "--window", "32", "--batch", "4", "--eval-prompts", "1",
        "--eval-tokens", "12", "--no-progress", "--target", "embedded"]


@pytest.fixture(scope="module")
def data_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "prompts.jsonl"
    lines = [json.dumps({"prompt": p}) for p in PROMPTS]
    lines.insert(3, json.dumps({"messages": [{"role": "user", "content": "Write a loop.\n"}]}))
    path.write_text("\n".join(lines) + "\n\n")
    return path


def train(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["train", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def last_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("specpath train: error:")]
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize("method", sorted(RECIPES))
def test_each_method_trains_and_serves_by_inference(capsys, tmp_path, data_file, method):
    out = tmp_path / method
    code, stdout, err = train(capsys, method, "--out", str(out), "--data", str(data_file), *TINY)
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] == 3 and metrics["heldout"]["method_inferred"] == method
    assert metrics["heldout"]["tau"] >= 1.0 and len(metrics["heldout"]["acceptance_by_position"]) == 4
    assert "held-out tau" in stdout
    # the drafter's temperature calibration: fitted on the held-out windows and recorded where the engine reads it
    from specpath_drafting.checkpoints import recorded_temperature_scale
    from specpath_train.calibrate import CALIBRATED_KINDS, SCALES

    kind = json.loads((out / "config.json").read_text())["model_type"]
    fit = metrics["temperature_calibration"]
    if kind in CALIBRATED_KINDS:
        assert fit["scale"] in SCALES and fit["positions"] > 0 and recorded_temperature_scale(out) == fit["scale"]
        assert set(fit["agreement"]) == set(fit["agreement_at_1"]) == {"0.6", "0.8", "1"}
    else:
        assert fit is None and "specpath_temperature_scale" not in json.loads((out / "config.json").read_text())
        assert f"calibrate: skipped (a {kind} drafter has no fit)" in (out / "run" / "train.log").read_text()
    # the checkpoint is served by {"model": DIR} with no method given (what evaluation did), and explain shows it
    code = main(["explain", "--model", str(Path(metrics["target"]) if Path(metrics["target"]).exists() else
                                          _embedded()), "--speculative-config",
                 json.dumps({"model": str(out), "num_speculative_tokens": 4})])
    shown, err = capsys.readouterr()
    assert code == 0, err
    infer = next(line for line in shown.splitlines() if line.lstrip().startswith("2. infer"))
    assert infer.endswith(f"{method!r}") or f"recognised {method!r}" in infer


def test_no_calibrate_leaves_the_scale_out(capsys, tmp_path, data_file):
    out = tmp_path / "mtp"
    code, _, err = train(capsys, "mtp", "--out", str(out), "--data", str(data_file), *TINY, "--no-calibrate")
    assert code == 0, err
    assert json.loads((out / "metrics.json").read_text())["temperature_calibration"] is None
    assert "specpath_temperature_scale" not in json.loads((out / "config.json").read_text())


def _embedded() -> str:
    from specpath_engine.modeling.named_models import embedded_model_path

    return str(embedded_model_path())


def test_two_runs_of_a_seed_give_identical_weights_and_resume_continues(capsys, tmp_path, data_file, monkeypatch):
    runs = []
    for name in ("a", "b"):
        code, _, err = train(capsys, "dflash", "--out", str(tmp_path / name), "--data", str(data_file), "--seed", "3",
                             *TINY)
        assert code == 0, err
        runs.append(load_file(str(tmp_path / name / "model.safetensors")))
    assert runs[0].keys() == runs[1].keys()
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    # Ctrl-C during step 2: one line saying how to go on; --resume then ends with the same weights
    import os
    import signal

    from specpath_train import trainer

    real, calls = trainer.warmup_cosine, []

    def interrupting(step, *a, **kw):
        calls.append(step)
        if len(calls) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real(step, *a, **kw)

    monkeypatch.setattr(trainer, "warmup_cosine", interrupting)
    cut = tmp_path / "cut"
    code, _, err = train(capsys, "dflash", "--out", str(cut), "--data", str(data_file), "--seed", "3", *TINY)
    assert code == 1 and "stopped by SIGINT at step 2" in last_error(err) and "--resume" in last_error(err)
    monkeypatch.setattr(trainer, "warmup_cosine", real)
    code, _, err = train(capsys, "dflash", "--out", str(cut), "--data", str(data_file), "--seed", "3", *TINY,
                         "--resume")
    assert code == 0, err
    resumed = load_file(str(cut / "model.safetensors"))
    assert all(torch.equal(runs[0][k], resumed[k]) for k in runs[0])
    # the same command again is refused; with --resume and a larger budget it continues from step 3
    code, _, err = train(capsys, "dflash", "--out", str(tmp_path / "a"), "--data", str(data_file), "--seed", "3", *TINY)
    assert code == 1 and "holds a run of this config; --resume" in last_error(err)
    code, _, err = train(capsys, "dflash", "--out", str(tmp_path / "a"), "--data", str(data_file), "--seed", "3",
                         *TINY, "--steps", "5", "--resume")
    assert code == 0, err
    assert json.loads((tmp_path / "a" / "metrics.json").read_text())["steps"] == 5
    assert "resumed from" in (tmp_path / "a" / "run" / "work" / "train.log").read_text()


def test_an_interrupted_loop_resumes_to_the_same_weights(tmp_path):
    import os
    import signal

    from specpath_train.trainer import TrainingInterrupted, train_loop

    def run(resume, interrupt_at=None):
        torch.manual_seed(0)
        model = torch.nn.Linear(4, 1)
        x = torch.randn(64, 4)
        calls = [0]

        def loss_fn(batch, _unused):
            calls[0] += 1
            if calls[0] == interrupt_at:
                os.kill(os.getpid(), signal.SIGTERM)  # arrives mid-step: the step finishes, then the state is saved
            loss = (model(batch).squeeze(-1) - batch.sum(-1)).pow(2).mean()
            return loss, {"mse": loss.item()}

        train_loop(model, loss_fn, x, x, minutes=0, max_steps=12, batch=8, lr=1e-2, seed=0, log=lambda s: None,
                   resume=resume, warmup=2)
        return model.weight.detach().clone()

    straight = run(tmp_path / "straight.pt")
    with pytest.raises(TrainingInterrupted, match="SIGTERM at step 5"):
        run(tmp_path / "cut.pt", interrupt_at=5)
    assert torch.load(tmp_path / "cut.pt", weights_only=False)["step"] == 5
    assert torch.equal(run(tmp_path / "cut.pt"), straight)


@pytest.mark.parametrize(("content", "expected"), [
    (None, "no such file"),
    ("", "no prompts"),
    ("\n  \n", "no prompts"),
    ('{"prompt": "x"}\n{"prompt": \n', ":2: not JSON"),
    ('["x"]\n', ":1: expected an object"),
    ('{"text": "x"}\n', 'exactly one of "prompt" or "messages"'),
    ('{"prompt": ""}\n', '"prompt" must be a non-empty string'),
    ('{"messages": [{"role": "user"}]}\n', "messages[0] must be an object"),
    ('{"prompt": "only one"}\n', "need at least 2 prompts"),
])
def test_bad_data_is_one_line_and_writes_nothing(capsys, tmp_path, content, expected):
    data = tmp_path / "data.jsonl"
    if content is not None:
        data.write_text(content)
    out = tmp_path / "out"
    code, _, err = train(capsys, "eagle3", "--out", str(out), "--data", str(data), *TINY)
    assert code == 1 and expected in last_error(err) and not out.exists()


def test_bad_targets_methods_and_budgets_are_one_line(capsys, tmp_path, data_file):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "llama"}')
    out = tmp_path / "out"
    cases = [
        (["eagle3", "--target", str(broken)], "cannot load it"),
        (["eagle3", "--target", str(tmp_path / "nothing")], "not a checkpoint directory"),
        (["ngram", "--target", "embedded"], "method 'ngram' has no trainer; specpath train trains eagle, eagle3"),
        (["eagel3", "--target", "embedded"], "did you mean 'eagle3'"),
        (["dflash", "--target", "embedded", "--draft-vocab", "64"],
         "--draft-vocab: dflash's drafter has no vocabulary of its own (only eagle3 takes it)"),
        (["eagle3", "--target", "embedded", "--draft-vocab", "1"], "--draft-vocab must be at least 2 (got 1)"),
        (["mtp", "--target", "embedded", "--draft-layers", "2"],
         "--draft-layers: mtp's drafter has a fixed depth here (only dflash, dspark takes it)"),
        (["dspark", "--target", "embedded", "--draft-layers", "0"], "--draft-layers must be at least 1 (got 0)"),
        (["eagle3", "--target", "embedded", "--past-eos", "1.5"],
         "--past-eos is a share of the prompts, from 0 to 1 (got 1.5)"),
    ]
    for argv, expected in cases:
        code, _, err = train(capsys, *argv, "--out", str(out), "--data", str(data_file), "--steps", "1", "--no-progress")
        assert code == 1 and expected in last_error(err), (argv, err)
    code, _, err = train(capsys, "eagle3", "--target", "embedded", "--out", str(out), "--data", str(data_file))
    assert code == 1 and "give a training budget" in last_error(err)
    code, _, err = train(capsys, "eagle3", "--out", str(out), "--data", str(data_file), *TINY, "--model-free", "eagle3")
    assert code == 1 and "--model-free 'eagle3' is not an installed model-free method; one of: " in last_error(err)
    assert not out.exists()


def test_the_checkpoint_names_a_companion_only_where_it_raised_the_held_out_tau(capsys, tmp_path, data_file):
    """``--model-free suffix`` (the default): the held-out τ with suffix beside the drafter is
    measured and written to metrics.json; config.json names suffix (``specpath_model_free``) exactly
    where it beat the drafter alone by ``COMPANION_GAIN``, and serving ``{"model": DIR}`` then drafts
    it beside the drafter; ``--model-free none`` measures nothing and names nothing."""
    from specpath import create_speculative_config
    from specpath.config.model import ModelConfig
    from specpath_train.cli_train import COMPANION_GAIN

    out = tmp_path / "eagle3"
    code, stdout, err = train(capsys, "eagle3", "--out", str(out), "--data", str(data_file), *TINY,
                              "--eval-prompts", "2", "--eval-tokens", "24")
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    alone, beside = metrics["heldout"], metrics["heldout_with_model_free"]
    assert alone["model_free"] is None and beside["model_free"] == "suffix" and beside["tau"] >= 1.0
    pays = beside["tau"] >= alone["tau"] * (1 + COMPANION_GAIN)
    config = json.loads((out / "config.json").read_text())
    assert metrics["model_free"] == config.get("specpath_model_free") == ("suffix" if pays else None)
    assert f"with suffix beside it, held-out tau {beside['tau']:.2f}" in stdout
    spec = create_speculative_config({"model": str(out), "num_speculative_tokens": 4},
                                     target_model_config=ModelConfig(model=_embedded()))
    assert (spec.model_free_config is not None) == pays

    # the same directory, measured with --model-free none: the verdict is this run's (named nowhere)
    config["specpath_model_free"] = "suffix"
    (out / "config.json").write_text(json.dumps(config))
    code, _, err = train(capsys, "eagle3", "--out", str(out), "--data", str(data_file), *TINY, "--model-free", "none",
                         "--overwrite")
    assert code == 0, err
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["heldout_with_model_free"] is None and metrics["model_free"] is None
    assert "specpath_model_free" not in json.loads((out / "config.json").read_text())


def test_an_existing_directory_is_never_written_over_without_overwrite(capsys, tmp_path, data_file):
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    code, _, err = train(capsys, "eagle3", "--out", str(other), "--data", str(data_file), *TINY, "--overwrite")
    assert code == 1 and "is not a specpath train run" in last_error(err)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]

    run = tmp_path / "run"
    code, _, err = train(capsys, "mtp", "--out", str(run), "--data", str(data_file), *TINY)
    assert code == 0, err
    before = (run / "model.safetensors").read_bytes()
    code, _, err = train(capsys, "mtp", "--out", str(run), "--data", str(data_file), *TINY, "--seed", "1", "--resume")
    assert code == 1 and "holds a run of another config (differs in seed)" in last_error(err)
    assert (run / "model.safetensors").read_bytes() == before
    code, _, err = train(capsys, "mtp", "--out", str(run), "--data", str(data_file), *TINY, "--seed", "1", "--overwrite")
    assert code == 0, err
    assert json.loads((run / "run" / "run.json").read_text())["seed"] == 1


@pytest.mark.parametrize(("arch", "method"), [("qwen3", "mtp"), ("llama", "draft_model")])
def test_a_gguf_target_with_a_bpe_vocabulary_and_a_chat_template(capsys, tmp_path, arch, method):
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    import gguf_helpers

    target = tmp_path / f"tiny-{arch}.gguf"
    gguf_helpers.write_tiny_gguf(target, arch=arch)
    data = tmp_path / "chat.jsonl"
    data.write_text("\n".join(json.dumps({"messages": [{"role": "user", "content": f"hello number {i}"}]})
                              for i in range(8)) + "\n" + json.dumps({"prompt": "plain text prompt"}) + "\n")
    out = tmp_path / "out"
    argv = [a if a != "embedded" else str(target) for a in TINY]
    code, _, err = train(capsys, method, "--out", str(out), "--data", str(data), *argv)
    assert code == 0, err
    assert (out / RUN_TARGET / "config.json").is_file()  # converted once, inside the run
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["heldout"]["method_inferred"] == method and metrics["steps"] == 3


RUN_TARGET = Path("run") / "target"


def test_a_clock_budget_with_progress_bars(capsys, tmp_path, data_file):
    argv = [a for a in TINY if a != "--no-progress"]
    argv = argv[:argv.index("--steps")] + argv[argv.index("--steps") + 2:]
    out = tmp_path / "clock"
    code, _, err = train(capsys, "dspark", "--out", str(out), "--data", str(data_file), *argv, "--minutes", "0.02")
    assert code == 0, err
    assert "generate train" in err and "features" in err and "tok_s=" in err  # the bars, with tokens/s
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["steps"] >= 1 and metrics["train_seconds"] >= 1.2


@pytest.mark.parametrize("method", ["eagle3", "dflash"])
def test_a_drafter_for_the_int4_target(capsys, tmp_path, data_file, method):
    """``--target-quantization int4``: the quantised target answers and is captured (the data's
    key says so, and its top-1 is that target's greedy token), the checkpoint names the target it
    is for, held-out τ is measured over it; such data merges with no other target's."""
    from specpath_engine.model import LlamaModel
    from specpath_engine.quantization import quantized_weights_
    from specpath_train.target_text import load_dataset, merge_datasets

    out = tmp_path / method
    code, stdout, err = train(capsys, method, "--out", str(out), "--data", str(data_file), *TINY,
                              "--target-quantization", "int4", "--dtype", "float32")
    assert code == 0, err
    data = out / "run" / "data"
    meta = json.loads((data / "features.json").read_text())
    assert meta["key"]["quantization"] == "int4"
    assert json.loads((out / "config.json").read_text())["specpath_target_quantization"] == "int4"
    assert json.loads((out / "run" / "run.json").read_text())["target_quantization"] == "int4"
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["heldout"]["target_quantization"] == "int4" and metrics["heldout"]["tau"] >= 1.0
    # explain says where it serves a target not quantised so; served over int4, nothing to say
    code = main(["explain", "--model", _embedded(), "--speculative-config", json.dumps({"model": str(out), "num_speculative_tokens": 4})])
    shown, err = capsys.readouterr()
    assert code == 0, err
    assert "the drafter was trained for the target quantised int4" in shown and "this target is not quantised" in shown
    from specpath.config.model import ModelConfig
    from specpath.config.speculative import SpeculativeConfig

    served = SpeculativeConfig.from_dict({"model": str(out), "num_speculative_tokens": 4}, target_model_config=ModelConfig(
        model=_embedded(), quantization="int4"))
    assert not any("trained for the target quantised" in detail for _, detail in served.resolution_trace)
    # the cached distributions are the quantised target's, not the float model's
    cache = load_dataset(data, meta["key"]["layers"])
    windows = cache["tokens"][:2]
    positions = torch.arange(windows.shape[1])
    target = quantized_weights_(LlamaModel.from_pretrained(_embedded(), dtype=torch.float32), "int4")
    with torch.no_grad():
        top1 = target.forward(windows, positions).logits.argmax(-1)
    from safetensors import safe_open

    with safe_open(str(data / "features.safetensors"), framework="pt") as f:
        cached = f.get_slice("topk_ids")[:2, :, 0].long()
    assert (cached == top1).float().mean() > 0.99
    # float data of the same target does not merge with it
    plain = tmp_path / "plain"
    code, _, err = train(capsys, method, "--out", str(plain), "--data", str(data_file), *TINY, "--data-only",
                         "--dtype", "float32")
    assert code == 0, err
    with pytest.raises(ValueError, match="differently quantised targets"):
        merge_datasets([data, plain / "run" / "data"], tmp_path / "merged")


def test_target_quantization_is_one_line_where_it_cannot_run(capsys, tmp_path, data_file):
    code, _, err = train(capsys, "eagle3", "--out", str(tmp_path / "x"), "--data", str(data_file), *TINY,
                         "--target-quantization", "int4", "--device", "cuda")
    assert code != 0 and "the quantised target runs on the CPU" in last_error(err)
    assert not (tmp_path / "x").exists()
    code, _, err = train(capsys, "eagle3", "--out", str(tmp_path / "y"), "--data", str(data_file), *TINY,
                         "--target-quantization", "fp4")
    assert code != 0 and "invalid choice: 'fp4'" in last_error(err) and not (tmp_path / "y").exists()


def test_target_quantization_offers_the_engines_formats():
    """cli_train spells the choices out (no torch at import): they must stay the engine's."""
    from specpath_engine.quantization import QUANTIZATIONS
    from specpath_train.cli_train import TARGET_QUANTIZATIONS

    assert TARGET_QUANTIZATIONS == QUANTIZATIONS


def test_past_eos_answers_its_share_to_the_full_length_and_the_data_records_it(capsys, tmp_path, data_file):
    out = tmp_path / "out"
    code, _, err = train(capsys, "eagle3", "--out", str(out), "--data", str(data_file), *TINY, "--data-only",
                         "--past-eos", "1", "--heldout", "0.3")
    assert code == 0, err
    data = out / "run" / "data"
    assert json.loads((data / "features.json").read_text())["past_eos"] == 1.0
    held = json.loads((out / "run" / "heldout_prompts.json").read_text())
    answered = [s for f in sorted(data.glob("gen-heldout-*.json")) for s in json.loads(f.read_text())]
    assert [len(s) for s in answered] == [len(p) + 24 for p in held]  # every one to --max-new-tokens
    assert json.loads((out / "run" / "run.json").read_text())["past_eos"] == 1.0
    code, _, err = train(capsys, "eagle3", "--out", str(out), "--data", str(data_file), *TINY, "--data-only",
                         "--heldout", "0.3", "--resume")
    assert code == 1 and "differs in past_eos" in last_error(err)  # another config: responses not mixed
