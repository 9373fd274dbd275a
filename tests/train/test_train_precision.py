"""``specpath train --precision``: bf16 autocast steps where the hardware runs them natively."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specpath_engine import dtype as engine_dtype
from specpath_train.cli_train import recipe_argv, train_precision
from specpath_train.methods import RECIPES

SMALL = {"hidden_size": 64, "num_hidden_layers": 4, "vocab_size": 256, "intermediate_size": 128,
         "num_attention_heads": 4, "num_key_value_heads": 2}


def _args(**kw) -> argparse.Namespace:
    base = dict(steps=None, lr=None, seed=0, threads=1, batch=8, minutes=1.0, device="cpu", no_progress=True,
                init=None, precision="auto", draft_vocab=None, draft_layers=None)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("native", [True, False])
def test_auto_is_bf16_on_an_accelerator_or_a_cpu_with_native_bf16(monkeypatch, native):
    monkeypatch.setattr(engine_dtype, "cpu_has_native_bf16", lambda: native)
    assert train_precision("auto", "cpu") == ("bfloat16" if native else "float32")
    assert train_precision("auto", "cpu:0") == ("bfloat16" if native else "float32")
    assert train_precision("auto", "cuda") == "bfloat16"
    assert train_precision("float32", "cuda") == "float32"  # as asked, whatever the hardware
    assert train_precision("bfloat16", "cpu") == "bfloat16"


@pytest.mark.parametrize("method", sorted(RECIPES))
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_every_recipe_is_told_the_precision(method, precision):
    recipe = RECIPES[method]
    argv = recipe_argv(recipe, _args(precision=precision), Path("t"), Path("d"), Path("w"), Path("o"), SMALL)
    assert ("--bf16" in argv) == (precision == "bfloat16")
    assert "--device" not in argv  # the CPU is the recipe's default


def test_a_device_run_names_its_device_and_trains_in_bf16_unless_told_otherwise():
    recipe = RECIPES["eagle3"]
    argv = recipe_argv(recipe, _args(device="cuda"), Path("t"), Path("d"), Path("w"), Path("o"), SMALL)
    assert argv[argv.index("--device") + 1] == "cuda" and "--bf16" in argv
    argv = recipe_argv(recipe, _args(device="cuda", precision="float32"), Path("t"), Path("d"), Path("w"),
                       Path("o"), SMALL)
    assert "--bf16" not in argv


@pytest.mark.parametrize("method", sorted(RECIPES))
def test_every_recipe_takes_the_flag(capsys, method):
    import importlib

    module = importlib.import_module(f"specpath_train.recipes.{RECIPES[method].module}")
    with pytest.raises(SystemExit):
        module.main(["--help"])
    assert "--bf16" in capsys.readouterr().out
