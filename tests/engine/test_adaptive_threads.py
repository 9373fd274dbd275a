"""Run-time thread adaptation (specpath_engine.adaptive_threads): the controller keeps the faster
count, backs off on a steady machine, and switching never changes an output, because the bf16
paths it runs on give the same logits, bit for bit, at 1 and 2 threads."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_engine import adaptive_threads
from specpath_engine.adaptive_threads import MAX_ROWS, ThreadAdapter
from specpath_engine.attention import PagedAttention, build_attention_metadata
from specpath_engine.kv_cache import KVCache
from specpath_engine.model import LlamaModel
from specpath_engine.model_config import LlamaConfig
from specpath_engine.modeling import native


def _drive(adapter: ThreadAdapter, seconds_at: dict[int, float], steps: int, rows: int = 5) -> float:
    """Run ``steps`` steps on a machine where a step takes ``seconds_at[count]``; total seconds."""
    total = 0.0
    for _ in range(steps):
        dt = seconds_at[adapter.num_threads]
        total += dt
        adapter.observe(rows, dt)
    return total


def _adapter(start: int = 2, other: int = 1) -> tuple[ThreadAdapter, list[int]]:
    calls: list[int] = []
    return ThreadAdapter((start, other), set_threads=calls.append), calls


@given(fast=st.floats(0.001, 1.0), slowdown=st.floats(1.3, 20.0), start_fast=st.booleans())
def test_it_settles_on_the_faster_count(fast, slowdown, start_fast):
    adapter, calls = _adapter(*((2, 1) if start_fast else (1, 2)))
    _drive(adapter, {2: fast, 1: fast * slowdown}, 600)
    assert adapter.current == 2 and adapter.num_switches == (0 if start_fast else 1)
    assert calls and calls[-1] == adapter.num_threads == 2  # torch was told every change


@given(fast=st.floats(0.001, 1.0), slowdown=st.floats(1.3, 4.0))
def test_a_steady_machine_loses_under_2_percent(fast, slowdown):
    """Probing the slower count costs two slow steps a probe, and the probes back off."""
    adapter, _ = _adapter()
    steps = 3000
    total = _drive(adapter, {2: fast, 1: fast * slowdown}, steps)
    assert total / (steps * fast) - 1 < 0.02
    assert adapter.interval == adapter.max_interval and adapter.num_switches == 0


def test_a_change_in_the_machine_is_followed_both_ways():
    adapter, _ = _adapter()
    _drive(adapter, {2: 0.02, 1: 0.04}, 200)  # quiet: 2 threads twice as fast
    assert adapter.current == 2
    _drive(adapter, {2: 0.09, 1: 0.05}, 2 * adapter.max_interval + 50)  # beside other jobs: 1 is faster
    assert adapter.current == 1 and adapter.num_switches == 1
    assert adapter.interval <= adapter.max_interval_below  # at the smaller count probes stay frequent
    _drive(adapter, {2: 0.02, 1: 0.04}, adapter.max_interval_below + adapter.window + 1)  # quiet again
    assert adapter.current == 2 and adapter.num_switches == 2


def test_load_that_starts_after_a_long_quiet_spell_is_met_within_a_few_steps():
    adapter, _ = _adapter()
    _drive(adapter, {2: 0.02, 1: 0.04}, 3000)  # quiet for long: scheduled probes 1024 steps apart
    assert adapter.interval == adapter.max_interval and adapter.current == 2
    loaded = {2: 0.1, 1: 0.08}  # other jobs start: 2 threads now slower than 1
    _drive(adapter, loaded, adapter.changed_steps + adapter.window)
    assert adapter.current == 1 and adapter.num_switches == 1
    _drive(adapter, loaded, 500)
    _drive(adapter, {2: 0.02, 1: 0.04}, adapter.changed_steps + adapter.window)  # and stop
    assert adapter.current == 2 and adapter.num_switches == 2


def test_a_change_that_favours_neither_count_does_not_start_probes_every_few_steps():
    adapter, _ = _adapter()
    _drive(adapter, {2: 0.02, 1: 0.04}, 3000)
    probes = adapter.num_probes
    _drive(adapter, {2: 0.06, 1: 0.12}, 2000)  # everything 3x slower, 2 threads still the faster
    assert adapter.current == 2 and adapter.num_probes - probes <= 3


def test_equal_counts_keep_the_current_one_and_back_off():
    adapter, _ = _adapter()
    _drive(adapter, {2: 0.03, 1: 0.03}, 4000)
    assert adapter.num_switches == 0 and adapter.current == 2
    assert adapter.num_probes <= 8  # 32, 64, ... 1024, then every 1024


def test_noise_and_stalls_at_equal_speeds_rarely_switch():
    """Step times with 5-15% jitter and one step in ten stalled 5x, the same at both counts:
    medians on both sides of the comparison keep the stalls from faking a faster count."""
    import random

    switches = []
    for seed in range(50):
        rng = random.Random(seed)
        sigma = 0.05 + 0.1 * rng.random()
        adapter, _ = _adapter()
        for _ in range(3000):
            adapter.observe(5, 0.05 * rng.lognormvariate(0, sigma) * (5 if rng.random() < 0.1 else 1))
        switches.append(adapter.num_switches)
    assert max(switches) <= 8 and sum(switches) / len(switches) < 1.0


def test_prefill_steps_are_neither_timed_nor_counted():
    adapter, calls = _adapter()
    for _ in range(1000):
        adapter.observe(MAX_ROWS + 1, 5.0)
    assert calls == [] and adapter.num_probes == 0


def test_a_probe_on_rows_the_current_count_never_ran_ends_without_a_verdict():
    adapter, calls = _adapter()
    _drive(adapter, {2: 0.02, 1: 0.02}, adapter.first_probe, rows=5)  # probe starts at 1 thread
    assert calls == [1]
    for _ in range(2 * adapter.window):
        adapter.observe(7, 0.001)  # much faster, but never compared
    assert calls == [1, 2] and adapter.current == 2 and adapter.num_switches == 0


def test_counts_and_gate():
    assert adaptive_threads.other_count(2, 2) == 1 and adaptive_threads.other_count(16, 16) == 8
    assert adaptive_threads.other_count(1, 2) == 2 and adaptive_threads.other_count(1, 1) == 1
    assert adaptive_threads.thread_invariant(torch.bfloat16)
    assert not adaptive_threads.thread_invariant(torch.float32)  # torch's fp32 matmul: thread-dependent bits


# ------------------------------------------------------------------ bitwise at 1 and 2 threads
def _smollm2_like(quantization: str | None) -> LlamaModel:
    """SmolLM2-135M's layer shapes (576 wide, 9 query and 3 KV heads of 64, MLP 1536), two
    layers, prepared as the engine prepares a bf16 target."""
    from specpath_engine.llm import _inference_model

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=8192, hidden_size=576, intermediate_size=1536, num_hidden_layers=2,
                         num_attention_heads=9, num_key_value_heads=3, head_dim=64, tie_word_embeddings=True)
    model = LlamaModel(config).to(torch.bfloat16).eval()
    return _inference_model(model, quantization, packed=quantization is None)


def _logits_at(model: LlamaModel, threads: int) -> list[torch.Tensor]:
    """A prefill, decode steps and verify-sized steps, at ``threads`` threads."""
    torch.set_num_threads(threads)
    cache = KVCache(num_layers=2, num_blocks=8, block_size=16, num_kv_heads=3, head_dim=64, dtype=torch.bfloat16)
    generator, history, out = torch.Generator().manual_seed(1), 0, []
    for n in (37, 1, 5, 1, 8, 3, 16):
        ids = torch.randint(0, model.config.vocab_size, (n,), generator=generator)
        meta, positions = build_attention_metadata(block_tables=[list(range(8))], num_computed=[history],
                                                   num_query_tokens=[n], block_size=16, num_query_groups=3)
        with torch.inference_mode():
            out.append(model(ids, positions, PagedAttention(cache, meta)).logits.clone())  # [n, vocab] fp32
        history += n
    return out


@pytest.mark.parametrize("kernels", ["native", "torch"])
@pytest.mark.parametrize("quantization", [None, "int8", "int4"])
def test_bf16_logits_are_the_same_bits_at_1_and_2_threads(kernels, quantization):
    if kernels == "native" and native.kernels() is None:
        pytest.fail(f"the native kernels do not build here: {native.unavailable_reason()}")
    if kernels == "torch":
        with native.disabled():
            model = _smollm2_like(quantization)
            one, two = _logits_at(model, 1), _logits_at(model, 2)
    else:
        model = _smollm2_like(quantization)
        one, two = _logits_at(model, 1), _logits_at(model, 2)
    assert all(torch.equal(a, b) for a, b in zip(one, two))


# ------------------------------------------------------------------ outputs while switching
@pytest.fixture(scope="module")
def bf16_checkpoint(tmp_path_factory):
    from specpath_engine.testing.engine import random_llama, save_with_byte_tokenizer

    model = random_llama(3, hidden_size=576, num_heads=9, num_kv_heads=3, head_scale=4.0, dtype=torch.bfloat16)
    return save_with_byte_tokenizer(model, tmp_path_factory.mktemp("bf16-target"), eos=False)


def _outputs(llm, params):
    return [o.token_ids for o in llm.generate(["def quicksort(items):", "The cat sat on", "1, 2, 3,"], params)]


@pytest.mark.parametrize("method", [None, "ngram", "suffix"])
def test_switching_every_step_changes_no_output(bf16_checkpoint, method):
    """Greedy and seeded sampled outputs at a fixed thread count, and with the count switched
    between 2 and 1 every other step (every probe wins), are the same tokens."""
    from specpath_engine.llm import LLM, SamplingParams

    config = None if method is None else {"method": method, "num_speculative_tokens": 4}
    greedy = SamplingParams(max_tokens=24, ignore_eos=True)
    sampled = [SamplingParams(max_tokens=24, ignore_eos=True, temperature=0.9, top_p=0.95, seed=s) for s in (1, 2, 3)]
    results = []
    for switching in (False, True):
        llm = LLM(bf16_checkpoint, config, num_threads=1)
        assert llm.engine.thread_adapter is None  # the count was fixed
        if switching:
            llm.engine.thread_adapter = ThreadAdapter((2, 1), first_probe=1, window=1, win=1e9)
        results.append((_outputs(llm, greedy), [_outputs(llm, p) for p in sampled]))
        if switching:
            assert llm.thread_stats()["num_switches"] > 20
    assert results[0] == results[1]


def test_an_llm_adapts_only_where_the_count_is_free_and_outputs_cannot_change(bf16_checkpoint, monkeypatch):
    from specpath_engine import threads
    from specpath_engine.llm import LLM

    monkeypatch.delenv("SPECPATH_NUM_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "available_cpus", lambda: 2)
    monkeypatch.setattr(threads, "load_average", lambda: 0.0)
    monkeypatch.setattr("specpath_engine.llm._is_small", lambda config: False)
    free = LLM(bf16_checkpoint)
    assert free.thread_stats() == {"num_threads": 2, "num_switches": 0, "num_probes": 0, "adaptive": True}
    assert LLM(bf16_checkpoint, num_threads=2).thread_stats() == {"num_threads": 2, "adaptive": False}
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert LLM(bf16_checkpoint).engine.thread_adapter is None
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert LLM(bf16_checkpoint, dtype="float32").engine.thread_adapter is None  # torch's fp32 matmul


def test_engines_sharing_a_process_each_run_at_their_own_count():
    """The thread count is process-wide: an engine that stopped mid-probe (the bench and the demo
    let engines take turns) must not leave the next engine at a count it did not choose, which it
    would then run and time as its own."""
    process = {"threads": 2}

    def make() -> ThreadAdapter:
        return ThreadAdapter((2, 1), set_threads=lambda n: process.__setitem__("threads", n),
                             get_threads=lambda: process["threads"], first_probe=3)

    a, b = make(), make()
    for _ in range(4):  # a reaches its first probe: the process is at 1 thread when a stops
        a.claim()
        a.observe(1, 0.01)
    assert a.num_threads == 1 and process["threads"] == 1
    b.claim()  # b's turn: its count is 2, and the process is set back before its step
    assert b.num_threads == 2 and process["threads"] == 2
    a.claim()  # a's next step is still its probe at 1 thread
    assert process["threads"] == 1
    calls = []
    c = ThreadAdapter((2, 1), set_threads=calls.append, get_threads=lambda: 2)
    c.claim()
    assert calls == []  # nothing to set when the count is already the adapter's


def test_fixed_count_engines_sharing_a_process_each_step_at_their_own_count(bf16_checkpoint):
    """Engines with their counts given (no adapter) take turns in one process too: each step runs
    at the engine's own count, whatever the engine before it left the process at."""
    import torch

    from specpath_engine.llm import LLM, SamplingParams

    before = torch.get_num_threads()
    try:
        seen: dict[int, set[int]] = {1: set(), 2: set()}
        engines = {n: LLM(bf16_checkpoint, num_threads=n) for n in (1, 2)}
        for n, llm in engines.items():
            assert llm.engine.thread_adapter is None and llm.engine.num_threads == n
            inner = llm.engine.runner.execute

            def execute(out, inner=inner, n=n):
                seen[n].add(torch.get_num_threads())
                return inner(out)

            llm.engine.runner.execute = execute
        for _ in range(2):
            for n, llm in engines.items():
                torch.set_num_threads(3 - n)  # the other engine's count, as its last step left it
                llm.generate(["a b c"], SamplingParams(max_tokens=4, ignore_eos=True))
        assert seen == {1: {1}, 2: {2}}
    finally:
        torch.set_num_threads(before)


def test_the_adapter_keys_a_step_by_the_rows_it_ran_and_its_drafter_call(bf16_checkpoint):
    """A drafter's call comes and goes with the governor's choices, so the adapter is told which
    steps made one and keys each step by the rows the target ran (drafts included): a
    speculative engine's steps of one key then look alike to it."""
    import time as clock

    from specpath_engine.llm import LLM, SamplingParams

    llm = LLM(bf16_checkpoint, {"method": "ngram", "num_speculative_tokens": 4, "draft_length_policy": "fixed"},
              num_threads=1)
    seen = []

    class Recording(ThreadAdapter):
        def observe(self, rows, seconds, *, drafted=False):
            seen.append((rows, seconds, drafted))

    llm.engine.thread_adapter = Recording((1, 1), set_threads=lambda n: None, get_threads=lambda: 1)
    from specpath.speculator import DraftProposal

    def slow(batch):  # a dear drafter that drafts K every step
        clock.sleep(0.05)
        ks = [r.max_draft_tokens for r in batch.requests]
        return DraftProposal(token_ids=torch.ones(sum(ks), dtype=torch.int32), num_draft_tokens=ks)

    llm.engine.runner.speculator.propose = slow
    out = llm.generate(["def quicksort(items):"], SamplingParams(max_tokens=16, ignore_eos=True))[0]
    assert out.metrics.num_drafts > 0
    decode = seen[1:]  # (the first step is the prompt's prefill)
    assert decode and all(drafted == (s >= 0.05) for _, s, drafted in decode)
    assert all(rows > 1 for rows, _, drafted in decode if drafted)  # a step that verifies drafts runs their rows
    assert max(rows for rows, _, _ in decode) == 5  # K=4 drafts and the token they follow


def test_steps_that_drafted_are_compared_only_with_each_other():
    """Plain steps of 10 ms and drafting steps of 30 ms at the same row count, interleaved at
    random, are one steady machine: no probe is started as if its load had changed."""
    import random

    adapter, calls = _adapter()
    rng = random.Random(0)
    for _ in range(600):
        drafted = rng.random() < 0.3
        adapter.observe(1, 0.030 if drafted else 0.010, drafted=drafted)
    assert adapter.num_switches == 0 and calls.count(1) <= 8  # scheduled probes only (doubling waits)
