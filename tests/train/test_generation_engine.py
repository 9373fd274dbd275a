"""`specpath train`'s generation runs on the native engine: a bf16 target is prepared as the
serving engine prepares it (every layer native), a batch of prompts gets each prompt's greedy
text alone (the batched native attention is row-invariant), and ``--dtype auto`` is the dtype the
engine serves the target in."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from specpath_engine.dtype import cpu_has_native_bf16
from specpath_engine.modeling import native
from specpath_engine.modeling.named_models import embedded_model_path
from specpath_engine.testing.native import native_kernels_missing
from specpath_train.cli_train import train_dtype
from specpath_train.target_text import generate, generation_model

PROMPTS = [list(b"def add(a, b):\n"), list(b"import os\n"), list(b"class Point:\n    def __init__(self"),
           list(b"for i in range(10):\n"), list(b"x = [i * i for i in range(100)]\n"), list(b"try:\n    import")]


def test_a_float32_target_generates_as_loaded():
    model = generation_model(embedded_model_path(), torch.float32)
    assert all(type(m) is torch.nn.Linear for m in model.modules() if isinstance(m, torch.nn.Linear))


@pytest.mark.skipif(native_kernels_missing() is not None, reason=str(native_kernels_missing()))
def test_a_bf16_batch_generates_on_the_native_kernels_each_prompts_text_alone(monkeypatch):
    model = generation_model(embedded_model_path(), torch.bfloat16)
    assert all(layer.native_linears() is not None for layer in model.model.layers)
    calls, original = [0], type(native.kernels()).attention_batch

    def counted(*args, **kwargs):
        calls[0] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(type(native.kernels()), "attention_batch", counted)
    kwargs = dict(max_new_tokens=24, temperatures=(0.0,), eos_token_ids=[], seed=0, max_model_len=128)
    batched = generate(model, PROMPTS, max_num_seqs=len(PROMPTS), **kwargs)
    assert calls[0] > 0  # the batch's steps took the batched native attention
    alone = [generate(model, [p], max_num_seqs=1, **kwargs)[0] for p in PROMPTS]
    assert batched == alone
    assert all(len(s) == len(p) + 24 for s, p in zip(batched, PROMPTS))


def _checkpoint(tmp_path, torch_dtype: str):
    out = tmp_path / torch_dtype
    shutil.copytree(embedded_model_path(), out)
    config = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**config, "torch_dtype": torch_dtype}))
    return out


def test_auto_dtype_is_the_dtype_the_engine_serves_the_target_in(tmp_path):
    native_bf16 = "bfloat16" if cpu_has_native_bf16() else "float32"
    assert train_dtype("auto", "embedded") == "float32"  # a float32 checkpoint stays float32
    assert train_dtype("auto", str(_checkpoint(tmp_path, "float32"))) == "float32"
    assert train_dtype("auto", str(_checkpoint(tmp_path, "bfloat16"))) == native_bf16
    assert train_dtype("auto", str(_checkpoint(tmp_path, "float16"))) == native_bf16
    assert train_dtype("bfloat16", "embedded") == "bfloat16" and train_dtype("float32", "x") == "float32"
    assert train_dtype("auto", str(tmp_path / "missing")) == "float32"  # the target's own check reports it


def test_a_prompt_answered_past_eos_goes_on_to_its_length_the_others_stop_there():
    model = generation_model(embedded_model_path(), torch.float32)
    kwargs = dict(max_new_tokens=12, temperatures=(0.0,), seed=0, max_model_len=64)
    free = generate(model, PROMPTS[:2], eos_token_ids=[], **kwargs)
    eos = free[0][len(PROMPTS[0]) + 2]  # the third token the first prompt's answer writes: its "EOS" here
    stopped, past = generate(model, [PROMPTS[0], PROMPTS[0]], eos_token_ids=[eos], past_eos=[False, True], **kwargs)
    first = free[0].index(eos, len(PROMPTS[0]))
    assert stopped == free[0][: first + 1]  # stops at EOS, kept as its last token
    assert past == free[0]  # the whole length, EOS and what the target writes after it included
