"""Bad engine arguments (``LLM(...)``, ``specpath run``) are one documented EngineArgumentError line,
raised before any model is loaded; named models are case-insensitive with a did-you-mean."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath.cli import main
from specpath.errors import InputError
from specpath_engine.arguments import MAX_THREADS_PER_CPU, EngineArgumentError, check_threads, usable_cpus
from specpath_engine.llm import LLM, SamplingParams
from specpath_engine.modeling.named_models import EMBEDDED, NAMED_MODELS, named_model, resolve_model_path

ONE = SamplingParams(max_tokens=2)


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and 0 < len(text) < 400, text
    return text


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"seed": "x"}, "seed: expected an integer"),
    ({"seed": -1}, "seed"),
    ({"seed": 1.5}, "seed"),
    ({"device": "cuda"}, "device: 'cuda' is not available"),
    ({"device": "cuda:7"}, "device"),
    ({"device": "tpu"}, "not a torch device"),
    ({"device": 3}, "device: expected a string"),
    ({"dtype": "float64"}, "dtype: 'float64' is not supported"),
    ({"dtype": None}, "dtype: expected a string"),
    ({"num_threads": 10**6}, "num_threads"),
    ({"num_threads": 0}, "num_threads"),
    ({"num_threads": "4"}, "num_threads: expected an integer"),
    ({"kv_cache_memory": "lots"}, "kv_cache_memory"),
    ({"quantization": "int3"}, "quantization"),
])
def test_bad_llm_arguments_are_one_line(kwargs, match):
    with pytest.raises(EngineArgumentError, match=match) as info:
        LLM(None, **kwargs)
    _one_line(info.value)
    assert isinstance(info.value, InputError) and isinstance(info.value, ValueError)


def test_threads_are_bounded_by_the_machine():
    limit = MAX_THREADS_PER_CPU * usable_cpus()
    assert check_threads(None) is None
    assert check_threads(1) == 1
    assert check_threads(limit) == limit
    for bad in (limit + 1, 512 * limit, 10**6, 10**100, -1, True):
        with pytest.raises(EngineArgumentError):
            check_threads(bad)


@pytest.mark.parametrize(("argv", "match"), [
    (["--prompt", ""], "prompt is empty"),
    (["--prompt", "hi", "--threads", "1000000"], "num_threads"),
    (["--prompt", "hi", "--threads", "512"], "num_threads"),
    (["--prompt", "hi", "--model", "smollm2"], "did you mean 'smollm2-135m'"),
    (["--prompt", "hi", "--model", "EMBEDED"], "did you mean 'embedded'"),
])
def test_cli_run_prints_one_line_without_a_type_name(argv, match, capsys):
    assert main(["run", *argv, "--max-tokens", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("specpath: error: ") and match in err and "\n" not in err
    assert "Error:" not in err and "Traceback" not in err


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([EMBEDDED, *NAMED_MODELS]), st.lists(st.booleans(), min_size=20, max_size=20))
def test_named_models_ignore_case(name, upper):
    spelled = "".join(c.upper() if u else c for c, u in zip(name, upper))
    assert named_model(spelled) == name
    assert named_model(f"  {spelled} ") == name


def test_an_upper_case_embedded_name_loads_the_embedded_model():
    assert resolve_model_path("EMBEDDED") == resolve_model_path(None)


@pytest.mark.parametrize(("prompt", "match"), [
    ("", "prompt is empty"),
    ([1.7, 2.2], r"prompt\[0\]: token ids are integers, got float 1.7"),
    ([1, 2.0], r"prompt\[1\]"),
    ([True, 2], r"prompt\[0\]"),
    ([[1, 2], []], r"prompts\[1\] is empty"),
    ([[1, 2], [1, "2"]], r"prompts\[1\]\[1\]: token ids are integers, got str"),
    ([-1], "outside"),
    ([10**9], "outside"),
    ([], "the list is empty"),
    (None, "got NoneType"),
    (5, "got int"),
    ("a\ud800b", "not valid text"),
])
def test_bad_prompts_are_one_line(plain_llm, prompt, match):
    with pytest.raises(EngineArgumentError, match=match) as info:
        plain_llm.generate(prompt, ONE)
    _one_line(info.value)
    assert plain_llm.engine.blocks.num_free_blocks == plain_llm.engine.blocks.num_blocks


def test_tensor_and_array_prompts_are_ids(plain_llm):
    import numpy as np
    import torch

    expected = plain_llm.generate([[5, 6, 7]], ONE)[0].token_ids
    assert plain_llm.generate(torch.tensor([5, 6, 7]), ONE)[0].token_ids == expected
    assert plain_llm.generate(np.array([[5, 6, 7]]), ONE)[0].token_ids == expected
    with pytest.raises(EngineArgumentError, match="token ids are integers, got float"):
        plain_llm.generate(torch.tensor([5.0, 6.5]), ONE)


def test_engine_add_request_refuses_non_integer_ids(plain_llm):
    for bad in (["1", "2"], [1.7], [None], []):
        with pytest.raises(EngineArgumentError):
            plain_llm.engine.add_request(bad, ONE)
    assert not plain_llm.engine.scheduler.waiting


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(-5, 300), st.floats(allow_nan=True), st.text(max_size=2), st.booleans(),
                          st.none()), min_size=1, max_size=6))
def test_fuzzed_token_ids_are_taken_exactly_or_refused(plain_llm, ids):
    vocab = plain_llm.model.config.vocab_size
    exact = all(isinstance(t, int) and not isinstance(t, bool) and 0 <= t < vocab for t in ids)
    try:
        out = plain_llm.generate([ids], ONE)
    except EngineArgumentError as exc:
        _one_line(exc)
        assert not exact
    else:
        assert exact and out[0].prompt_token_ids == ids


def test_cli_demo_refuses_bad_threads_before_any_engine(capsys):
    assert main(["demo", "--threads", "100000"]) == 1
    err = capsys.readouterr().err
    assert err.strip().startswith("specpath: error: num_threads") and "loading" not in err
