"""Suffix decoding through the bridges (the bridges pick it by its capability flags: no target
hidden states, token drafts): greedy output through transformers' ``generate()`` and through the
vLLM ``custom_class`` Proposer driven by a stand-in runner equals plain greedy decoding, the
global tree carries a finished request's output into a later one, and drafts are proposed."""

from __future__ import annotations

import pytest
import torch

from test_vllm_proposer import buffers, make, target  # noqa: F401 - target is a fixture

transformers = pytest.importorskip("transformers")

from specpath_engine.bridges.hf import generate as specpath_generate  # noqa: E402
from test_hf import embedded  # noqa: E402, F401 - the embedded model in transformers, a fixture

PROMPTS = [
    b"def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n\n\ndef mul(a, b):\n",
    b"import os\nimport sys\nimport os.path\n\nfor name in os.listdir('.'):\n    print(name)\n",
]


def plain_greedy(model, prompt: list[int], new_tokens: int) -> list[int]:
    out = model.generate(torch.tensor([prompt]), max_new_tokens=new_tokens, do_sample=False)
    return out[0].tolist()


@pytest.mark.parametrize("k", [3, None])
def test_hf_generate_greedy_is_plain_greedy(embedded, k):
    config = {"method": "suffix"} if k is None else {"method": "suffix", "num_speculative_tokens": k}
    for prompt in PROMPTS + PROMPTS[:1]:  # the last prompt again: the global tree has its answer
        ids = torch.tensor([list(prompt)])
        got = embedded.generate(ids, max_new_tokens=40, do_sample=False, custom_generate=specpath_generate,
                                speculative_config=config)
        assert got[0].tolist() == plain_greedy(embedded, list(prompt), 40)


def verify_greedy(model, history: list[int], drafts: list[int]) -> list[int]:
    """What a greedy engine appends after verifying ``drafts``: the accepted prefix and one token."""
    with torch.no_grad():
        argmax = model(torch.tensor([history + drafts])).logits[0, len(history) - 1:].argmax(-1).tolist()
    accepted = 0
    while accepted < len(drafts) and drafts[accepted] == argmax[accepted]:
        accepted += 1
    return drafts[:accepted] + [argmax[accepted]]


def run_vllm_standin(proposer, model, prompts: list[list[int]], new_tokens: int) -> tuple[list[list[int]], int]:
    """vLLM's loop around a custom proposer, one batch: prefill samples a token per row, then
    every step the proposer sees the histories and the tokens each row sampled last."""
    histories = [list(p) + verify_greedy(model, list(p), []) for p in prompts]
    sampled = [h[-1:] for h in histories]
    drafted = 0
    while any(len(h) < len(p) + new_tokens for h, p in zip(histories, prompts)):
        tokens, lengths = buffers(histories, width=256)
        drafts = proposer.propose(sampled, lengths, tokens)
        for row, (history, prompt) in enumerate(zip(histories, prompts)):
            if len(history) >= len(prompt) + new_tokens:
                sampled[row] = []
                continue
            drafted += len(drafts[row])
            sampled[row] = verify_greedy(model, history, list(drafts[row]))
            history += sampled[row]
    return [h[: len(p) + new_tokens] for h, p in zip(histories, prompts)], drafted


@pytest.mark.parametrize("k", [2, 5])
def test_vllm_proposer_greedy_is_plain_greedy(monkeypatch, target, embedded, k):
    p = make(monkeypatch, target, '{"method": "suffix"}', k=k, max_len=256)
    p.load_model(object())
    assert p.k == k and p.spec.method == "suffix"
    prompts = [list(x) for x in PROMPTS]
    first, drafted_first = run_vllm_standin(p, embedded, prompts, 32)
    assert first == [plain_greedy(embedded, x, 32) for x in prompts]
    # A new batch in the same rows: the rows' histories no longer extend, so the first requests
    # end and their outputs join the global tree, which the repeated prompt then drafts from.
    again, drafted_again = run_vllm_standin(p, embedded, prompts[:1], 32)
    assert again == first[:1]
    assert drafted_first > 0 and drafted_again > 0
    cache = p.drafter.speculator.cache
    assert len(cache.cached_requests) >= 1


def test_vllm_proposer_drafts_are_the_speculators_own(monkeypatch, target):
    """The Proposer adds nothing to suffix decoding: its drafts are SuffixCache's for the same
    histories (K caps them)."""
    from specpath_suffix.cache import SuffixCache

    p = make(monkeypatch, target, '{"method": "suffix", "suffix_decoding_max_cached_requests": 0}', k=3)
    histories = [[5, 6, 7, 8, 9, 5, 6], [1, 2, 3, 1, 2, 3, 1, 2], [4, 4, 4, 4]]
    tokens, lengths = buffers(histories)
    out = p.propose([[h[-1]] for h in histories], lengths, tokens)
    reference = SuffixCache(max_cached_requests=0)
    for i, h in enumerate(histories):
        reference.append(str(i), h)
    assert out == [reference.draft(str(i), 3) for i in range(len(histories))]
    assert out[0] == [7, 8] and out[1] == [3, 1, 2]  # a match of p tokens drafts at most p (factor 1)
