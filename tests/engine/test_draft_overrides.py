"""The draft-side overrides as the reference engine applies them: ``kv_cache_dtype`` is the
drafter KV's dtype, ``attention_backend`` picks the native or torch attention kernel, values the
engine lacks are refused in one line, ``moe_backend`` is ignored with its reason, and
``specpath explain`` shows each (the ``specpath.engines`` entry point)."""

import json

import pytest
import torch

from specpath import create_speculative_config
from specpath.cli import main
from specpath.config.applied import DRAFT_OVERRIDES, describe_overrides, engines
from specpath.errors import SpeculativeConfigError
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.modeling import native
from specpath_engine.testing.native import counting_native_attention

PROMPT = "def add(a, b):\n    return"


def _kv_tensors(speculator):
    """The drafter KV tensors: every shipped drafter shape (hidden-state loop, block, draft
    model) keeps one :class:`specpath_drafting.kv.DrafterKV`."""
    return [speculator.kv.keys, speculator.kv.values]


@pytest.mark.parametrize("method", ["eagle3", "dflash", "draft_model"])
@pytest.mark.parametrize(("kv_cache_dtype", "want"), [(None, torch.float32), ("bfloat16", torch.bfloat16),
                                                      ("float16", torch.float16)])
def test_kv_cache_dtype_is_the_drafter_kv_dtype(method, kv_cache_dtype, want):
    llm = LLM(None, {"method": method, "num_speculative_tokens": 3, "kv_cache_dtype": kv_cache_dtype},
              dtype="float32", num_threads=1)
    assert {t.dtype for t in _kv_tensors(llm.speculator)} == {want}
    out = llm.generate([PROMPT], SamplingParams(max_tokens=6))
    assert len(out[0].token_ids) == 6  # a KV in another dtype than the drafter's still drafts


def test_a_kv_dtype_the_engine_lacks_is_refused_in_one_line():
    with pytest.raises(SpeculativeConfigError) as err:
        LLM(None, {"method": "eagle3", "num_speculative_tokens": 3, "kv_cache_dtype": "fp8"}, dtype="float32")
    text = str(err.value)
    assert "\n" not in text and text.startswith("speculative_config.kv_cache_dtype:") and "bfloat16" in text


def _native_calls(method, backend):
    llm = LLM(None, {"method": method, "num_speculative_tokens": 3, "attention_backend": backend},
              dtype="bfloat16", num_threads=1)
    assert llm.speculator.kv_settings.native is (backend not in ("torch", "torch_sdpa"))
    with counting_native_attention() as calls:
        llm.generate([PROMPT], SamplingParams(max_tokens=8))
    return calls[0]


@pytest.mark.parametrize("method", ["eagle3", "dflash", "draft_model", "mtp"])
def test_attention_backend_picks_the_kernel_that_runs(method):
    # the target calls the native attention too (bf16): torch on the drafter makes fewer calls
    auto, torch_only = _native_calls(method, None), _native_calls(method, "torch_sdpa")
    if native.kernels() is None:  # nothing native to pick: auto is torch's, and native is refused
        assert auto == torch_only == 0
        with pytest.raises(SpeculativeConfigError, match="native kernels are unavailable"):
            _native_calls(method, "native")
        return
    assert auto > torch_only
    assert _native_calls(method, "native") == auto


def test_native_where_it_cannot_run_and_unknown_backends_are_refused():
    with pytest.raises(SpeculativeConfigError, match="attention_backend: 'native' cannot run here"):
        LLM(None, {"method": "eagle3", "num_speculative_tokens": 3, "attention_backend": "native"}, dtype="float32")
    with pytest.raises(SpeculativeConfigError) as err:
        LLM(None, {"method": "eagle3", "num_speculative_tokens": 3, "attention_backend": "flash_attn"},
            dtype="float32")
    assert "\n" not in str(err.value) and "allowed: auto, native, torch, torch_sdpa" in str(err.value)


def _rows(config):
    spec = create_speculative_config(config)
    return {row["field"]: row for row in describe_overrides(spec)["reference"]}


def test_explain_rows_say_what_each_override_resolved_to():
    assert "reference" in engines()
    rows = _rows({"method": "eagle3", "num_speculative_tokens": 3, "kv_cache_dtype": "half",
                  "attention_backend": "torch_sdpa", "moe_backend": "triton"})
    assert set(rows) == set(DRAFT_OVERRIDES)
    assert (rows["kv_cache_dtype"]["resolved"], rows["kv_cache_dtype"]["outcome"]) == ("float16", "applied")
    assert (rows["attention_backend"]["resolved"], rows["attention_backend"]["outcome"]) == ("torch", "applied")
    assert rows["moe_backend"]["outcome"] == "ignored" and "no MoE" in rows["moe_backend"]["note"]
    refused = _rows({"method": "eagle3", "num_speculative_tokens": 3, "kv_cache_dtype": "fp8"})
    assert refused["kv_cache_dtype"]["outcome"] == "refused"
    free = _rows({"method": "ngram", "num_speculative_tokens": 3, "kv_cache_dtype": "fp8"})
    assert free["kv_cache_dtype"]["outcome"] == "ignored" and "model-free" in free["kv_cache_dtype"]["note"]


def test_specpath_explain_prints_the_overrides(capsys):
    config = json.dumps({"method": "eagle3", "num_speculative_tokens": 3, "kv_cache_dtype": "bfloat16",
                         "moe_backend": "triton"})
    assert main(["explain", "--speculative-config", config]) == 0
    out = capsys.readouterr().out
    assert "as the reference engine applies them" in out
    assert "kv_cache_dtype     bfloat16 -> bfloat16 (applied)" in out
    assert "moe_backend        triton -> - (ignored: the reference engine's drafters have no MoE layers)" in out
    assert main(["explain", "--json", "--speculative-config", config]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [r["field"] for r in data["draft_overrides"]["reference"]] == list(DRAFT_OVERRIDES)


def test_a_method_that_drafts_nothing_ignores_the_kv_choices():
    rows = _rows({"method": "extract_hidden_states", "num_speculative_tokens": 1, "kv_cache_dtype": "fp8"})
    assert rows["kv_cache_dtype"]["outcome"] == "ignored" and "drafts nothing" in rows["kv_cache_dtype"]["note"]
