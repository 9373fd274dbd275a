"""Greedy identity through the engine's LLM API: with MTP speculation the tokens are exactly
those of plain greedy decoding, for K 1..8 (K a multiple of n_predict above it), one and several
modules, an alias, and the shipped modules on the embedded default target."""

import warnings

import pytest

from specpath.methods import MethodAliasWarning
from specpath_mtp.config import MTP1, MTP3

PROMPTS = [[5, 9, 13, 2, 5, 9, 13, 2, 5, 9], [1, 2, 3] * 6, [(7 * j + 3) % 64 for j in range(30)]]
"""Token ids of the tiny targets (vocabulary 64, no tokenizer)."""
FIXED = {"draft_length_policy": "fixed"}
"""Where a test needs drafts verified: the measured policy may back off to plain steps on the tiny targets."""


def _generate(model, config, max_tokens=24, prompts=PROMPTS, **options):
    from specpath_engine.llm import LLM, SamplingParams

    llm = LLM(model, config, max_num_seqs=4, max_num_batched_tokens=24, **options)  # small: chunked prefill
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=True)
    outs = [o for _ in range(options.get("enable_prefix_caching", False) + 1)
            for o in llm.generate(list(prompts), params)]  # with prefix caching: twice, the second from cache
    return [o.token_ids for o in outs], llm


@pytest.fixture(scope="module")
def plain(tiny):
    _, paths = tiny
    return _generate(str(paths["target"]), None)[0]


@pytest.mark.parametrize(("n", "k"), [(1, k) for k in range(1, 9)] + [(2, k) for k in (1, 2, 4, 6, 8)]
                         + [(3, k) for k in (1, 2, 3, 6)])
def test_greedy_identity(tiny, plain, n, k):
    _, paths = tiny
    tokens, llm = _generate(str(paths["target"]), {"method": "mtp", "model": str(paths[n]), "num_speculative_tokens": k,
                                                   **FIXED})
    assert tokens == plain
    assert llm.metrics.num_draft_tokens > 0


@pytest.mark.parametrize(("n", "k"), [(1, 2), (3, 3)])
def test_greedy_identity_with_prefix_caching(tiny, plain, n, k):
    """Cached blocks skip the target pass; the tail block is dropped (MTP KV at p needs p+1)."""
    _, paths = tiny
    tokens, llm = _generate(str(paths["target"]), {"method": "mtp", "model": str(paths[n]), "num_speculative_tokens": k},
                            block_size=4, enable_prefix_caching=True)
    assert llm.engine_config.use_eagle_block_drop
    assert tokens == plain + plain


def test_an_alias_runs_end_to_end(tiny, plain):
    _, paths = tiny
    with pytest.warns(MethodAliasWarning, match="mimo_mtp"):
        tokens, llm = _generate(str(paths["target"]), {"method": "mimo_mtp", "model": str(paths[3])})
    assert tokens == plain
    assert llm.engine_config.speculative_config.method == "mtp"


@pytest.mark.skipif(not (MTP1 / "config.json").is_file(), reason="no shipped MTP modules in this checkout")
def test_shipped_modules_on_the_embedded_target():
    prompts = ["def main():\n    ", "import os\nimport sys\n\n"]
    plain, _ = _generate(None, None, max_tokens=32, prompts=prompts)
    for config in ({"method": "mtp", **FIXED}, {"method": "mtp", "model": str(MTP3), **FIXED}):
        with warnings.catch_warnings():
            warnings.simplefilter("error", MethodAliasWarning)
            tokens, llm = _generate(None, config, max_tokens=32, prompts=prompts)
        assert tokens == plain
        assert llm.metrics.num_accepted_tokens > 0, "trained modules should get some drafts accepted"


@pytest.mark.parametrize("quantization", ["none", "int8"])
def test_the_native_propose_drafts_what_the_per_op_path_drafts(quantization, tmp_path):
    """In bf16 a one-request propose of the shipped module (ingest + chain) is one native call
    (given a training vocabulary: the native chain takes a reduced shared head); every draft is
    the per-op path's (the kernel-level property test: tests/modeling/test_native_draft_chain.py)."""
    import torch

    from specpath_drafting.testing import native_propose_matches_per_op, with_train_vocab
    from specpath_engine.harness import DEMO_PROMPTS
    from specpath_engine.modeling.native import kernels

    torch.set_num_threads(1)
    module = with_train_vocab(MTP1, tmp_path / "mtp1", [0, 10, *range(32, 126)])  # 96 rows: NUL, newline, ASCII
    natively = native_propose_matches_per_op({"method": "mtp", "model": str(module), "num_speculative_tokens": 4,
                                              "draft_length_policy": "fixed", "quantization": quantization},
                                             list(DEMO_PROMPTS[:2]))
    assert natively > 0 if kernels() is not None else natively == 0


@pytest.mark.parametrize("k", [1, 3])
def test_a_batched_native_propose_keeps_plain_greedy_output(k, tmp_path):
    """Four requests at once with fixed K, the shipped module with a training vocabulary (a
    reduced shared head: the native form): their proposes run as one native call
    (``draft_propose_batch``), and the output is plain decoding's."""
    import torch

    from specpath_drafting.testing import batched_native_propose_keeps_greedy_output, with_train_vocab
    from specpath_engine.harness import DEMO_PROMPTS
    from specpath_engine.modeling.native import kernels

    torch.set_num_threads(1)
    module = with_train_vocab(MTP1, tmp_path / "mtp1", [0, 10, *range(32, 126)])  # 96 rows: NUL, newline, ASCII
    batched = batched_native_propose_keeps_greedy_output(
        {"method": "mtp", "model": str(module), "num_speculative_tokens": k, "draft_length_policy": "fixed"},
        list(DEMO_PROMPTS[:4]))
    assert batched > 0 if kernels() is not None else batched == 0


def test_the_int8_module_drafts_a_batch_on_its_tile_copies(tmp_path):
    """The shipped module with a training vocabulary (the native form; a copy, so int8 is asked
    for, as its shipped default is). Where the CPU has AMX tiles, the weights its native propose reads (the kept LM-head
    rows included) keep a tile copy too: a batch's passes take the copies, a lone request's chain
    the int8 kernel; the output is plain decoding's either way. Without tiles, no copy."""
    import torch

    from specpath_drafting.testing import dual_weight_drafting, with_train_vocab
    from specpath_engine.harness import DEMO_PROMPTS
    from specpath_engine.modeling.native import kernels

    torch.set_num_threads(1)
    module = with_train_vocab(MTP1, tmp_path / "mtp1", [0, 10, *range(32, 126)])  # 96 rows: NUL, newline, ASCII
    seen = dual_weight_drafting({"method": "mtp", "model": str(module), "num_speculative_tokens": 3,
                                 "draft_length_policy": "fixed", "quantization": "int8"}, list(DEMO_PROMPTS[:4]))
    if kernels() is not None and kernels().tiles:
        assert seen.tile_bytes > 0 and seen.batch_passes[1] > 0 and seen.lone_passes[0] > 0
    else:
        assert seen.tile_bytes == 0 and seen.batch_passes[1] == seen.lone_passes[1] == 0
