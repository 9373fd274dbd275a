"""The vLLM bridge inside the real vLLM (opt-in: runs where vLLM is importable).

    VLLM_CPU_KVCACHE_SPACE=1 ~/.cache/specpath/venvs/vllm/bin/python -m pytest tests/bridges/test_vllm.py -q -p no:cacheprovider

Each engine start costs about a minute on a 2-core CPU, so the module starts one plain
engine and one per drafter. fp32 greedy output through ``method="custom_class"`` with
``specpath_engine.bridges.vllm.Proposer`` must equal vLLM's own greedy output without speculation.
"""

from __future__ import annotations

import json
import os

import pytest

vllm = pytest.importorskip("vllm")

PROMPTS = [
    b"import os\nimport sys\n\ndef main(argv):\n    for name in os.listdir(argv[1]):\n",
    b"class Point:\n    def __init__(self, x, y):\n        self.x = x\n        self.y = y\n",
    b"def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef",
]
BRIDGE = "specpath_engine.bridges.vllm.Proposer"


def generate(spec_env=None, k=3, max_tokens=48):
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    from specpath_engine.model import default_model_path

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    speculative = None
    if spec_env is not None:
        os.environ["SPECPATH_SPECULATIVE_CONFIG"] = json.dumps(spec_env)
        speculative = {"method": "custom_class", "model": BRIDGE, "num_speculative_tokens": k}
    llm = LLM(model=str(default_model_path()), dtype="float32", skip_tokenizer_init=True, max_model_len=512,
              max_num_seqs=4, enforce_eager=True, seed=0, speculative_config=speculative)
    try:
        params = SamplingParams(temperature=0, max_tokens=max_tokens, ignore_eos=True, detokenize=False)
        outs = llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in PROMPTS], params)
        return [list(o.outputs[0].token_ids) for o in outs]
    finally:
        del llm


@pytest.fixture(scope="module")
def plain():
    return generate()


@pytest.mark.slow
@pytest.mark.parametrize(
    "config",
    [
        {"method": "ngram", "prompt_lookup_min": 2, "prompt_lookup_max": 4},
        {"method": "freqgram"},
        {"method": "draft_model"},
    ],
    ids=lambda c: c["method"],
)
def test_greedy_equals_plain_vllm(plain, config):
    assert generate(config) == plain


@pytest.mark.slow
def test_k_disagreement_fails_at_start_up(capfd):
    """vLLM builds the proposer in its worker process and logs the worker's error there (the
    main process only sees "WorkerProc initialization failed")."""
    with pytest.raises(Exception):
        generate({"method": "ngram", "num_speculative_tokens": 5}, k=3)
    captured = capfd.readouterr()
    text = captured.out + captured.err
    line = "speculative_config.num_speculative_tokens: disagrees with vLLM's num_speculative_tokens (3)"
    assert line in text, text[-3000:]
