"""The benchmark harness: interleaved rounds, speedups against the same round's baseline, the
table, and the quiet-machine gate (no timing assertions: only what the rows are made of)."""

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from specpath_engine import harness


class FakeLLM:
    """Generates fixed tokens and metrics; records the order it was called in."""

    def __init__(self, name, log, tokens, steps):
        self.name, self.log, self.tokens, self.steps = name, log, tokens, steps

    def generate(self, prompts, params):
        from specpath_engine.metrics import SpecMetrics

        self.log.append((self.name, prompts[0]))
        metrics = SpecMetrics(num_steps=self.steps, num_generated_tokens=len(self.tokens))
        return [SimpleNamespace(token_ids=list(self.tokens), metrics=metrics)]


def test_rounds_are_prompt_major_and_rows_compare_with_the_baseline():
    log = []
    engines = [("baseline", None, FakeLLM("baseline", log, [1, 2, 3, 4], 4)),
               ("fast", {"method": "x"}, FakeLLM("fast", log, [1, 2, 3, 4], 2)),
               ("wrong", {"method": "y"}, FakeLLM("wrong", log, [1, 2, 9, 9], 2))]
    rounds = harness.run_rounds(engines, prompts=("p", "q"), max_tokens=4, repeats=2)
    assert [n for n, _ in log[:3]] == ["baseline", "fast", "wrong"] and [p for _, p in log[:3]] == ["p"] * 3
    assert [n for n, _ in log[3:6]] == ["fast", "wrong", "baseline"]  # the next prompt: the next turn
    assert len(log) == 2 * 2 * 3 and all(len(r) == 2 for r in rounds.values())
    rows = {r["method"]: r for r in harness.summarise(engines, rounds)}
    assert rows["baseline"]["greedy_identical"] and rows["fast"]["greedy_identical"]
    assert not rows["wrong"]["greedy_identical"]
    assert rows["fast"]["target_steps"] == 4 and len(rows["fast"]["speedups"]) == 2
    assert len(rows["fast"]["prompt_tokens_per_s"]) == 2
    assert len(rows["fast"]["turn_speedups"]) == 4 and rows["fast"]["tokens"] == 8  # the last round: 2 prompts x 4
    table = harness.format_table(list(rows.values()), harness.BENCHMARK_COLUMNS).splitlines()
    assert table[0].split()[:2] == ["method", "τ"] and len(table) == 2 + 3
    assert "NO" in table[-1] and "yes" in table[2]


def test_gate_waits_no_longer_than_told_and_says_when_noisy(monkeypatch):
    said = []
    monkeypatch.setattr(harness, "machine_load", lambda: 3.0)
    assert harness.wait_for_quiet(0.5, timeout_s=0, log=said.append) == 3.0
    assert len(said) == 1 and "noisy" in said[0]
    monkeypatch.setattr(harness, "machine_load", lambda: 0.1)
    assert harness.wait_for_quiet(0.5, timeout_s=0, log=said.append) == 0.1 and len(said) == 1


@given(st.lists(st.integers(0, 3), max_size=8), st.lists(st.integers(0, 3), max_size=8))
def test_first_difference_is_the_first_index_where_the_outputs_part(a, b):
    at = harness.first_difference(a, b)
    if a == b:
        assert at is None
    else:
        assert a[:at] == b[:at] and (at == min(len(a), len(b)) or a[at] != b[at])


def test_top2_margin_is_the_gap_between_the_two_best_next_token_logits():
    import torch

    from specpath_engine.testing.engine import random_llama

    model = random_llama(3)
    ids = [5, 17, 42, 7, 99]
    with torch.no_grad():
        every = model.forward_batch(torch.tensor([ids]))[0, -1]
        logits = model.forward_batch(torch.tensor([ids]), last_only=True)[0, -1]
    torch.testing.assert_close(logits, every)  # the head over one row instead of all (not bit-equal in fp32)
    top = logits.topk(2).values
    assert harness.top2_margin(model, ids) == float(top[0] - top[1]) > 0


def test_chat_prompts_are_timed_prompt_major_in_turns_and_chats_go_through_chat():
    log = []

    class ChatLLM(FakeLLM):
        def chat(self, messages, params):
            return self.generate([("chat", messages[0]["content"])], params)

    engines = {"a": ChatLLM("a", log, [1, 2, 3], 3), "b": ChatLLM("b", log, [1, 2], 1)}
    prompts = [("code", "def f"), ("chat", [{"role": "user", "content": "hi"}])]
    timings = harness.time_chat_prompts(engines, prompts, None)
    # the order rotates from prompt to prompt: no engine always runs first
    assert log == [("a", "def f"), ("b", "def f"), ("b", ("chat", "hi")), ("a", ("chat", "hi"))]
    assert timings["a"].tokens == 6 and timings["b"].tokens == 4
    assert len(timings["a"].rates) == 2 and all(r > 0 for r in timings["a"].rates)
    assert [o.token_ids for o in timings["b"].outputs] == [[1, 2], [1, 2]] and timings["b"].seconds > 0


def test_engines_warm_up_on_a_text_no_timed_prompt_holds(monkeypatch):
    """A method that remembers answers across requests (suffix's global tree) must not be handed
    a timed prompt's answer while warming up."""
    from specpath_engine.cli_run import REAL_DEMO_PROMPTS
    from specpath_engine import llm as llm_module

    texts = [*harness.DEMO_PROMPTS, *(p if kind == "code" else p[-1]["content"] for kind, p in REAL_DEMO_PROMPTS)]
    assert all(harness.WARM_UP_PROMPT not in t and t not in harness.WARM_UP_PROMPT for t in texts)
    log = []
    monkeypatch.setattr(llm_module, "LLM", lambda *a, **k: FakeLLM("m", log, [1], 1))
    harness.build_engines([("baseline", None)])
    assert log == [("m", harness.WARM_UP_PROMPT)]


def test_chat_row_sums_rounds_against_plain_and_counts_greedy_matches():
    from specpath_engine.metrics import SpecMetrics

    def timings(tokens, seconds, ids):
        outs = [SimpleNamespace(token_ids=i, metrics=SpecMetrics(num_steps=2, num_generated_tokens=len(i)))
                for i in ids]
        return harness.PromptTimings([t / s for t, s in zip(tokens, seconds)], outs, sum(tokens), sum(seconds))

    rounds = [{"plain": timings([4, 4], [2.0, 2.0], [[1, 2, 3, 4], [5, 6, 7, 8]]),
               "fast": timings([4, 4], [1.0, 1.0], [[1, 2, 3, 4], [5, 6, 0, 0]])}] * 2
    row = harness.chat_row(rounds, "fast")
    assert row.rate == 4.0 and row.speedup == 2.0
    assert (row.same, row.n) == (2, 4)
    assert row.per_prompt == "4 4"
    assert row.line("fast", width=6, middle="x  ") == (
        f"fast      4.0 tok/s  2.00x  τ {row.tau:.2f}  x  greedy = plain 2/4  per prompt: 4 4")
    assert row.tau == SpecMetrics.total([o.metrics for o in rounds[0]["fast"].outputs] * 2, elapsed_s=0.0
                                        ).mean_acceptance_length


def test_warm_llms_builds_one_engine_per_name_and_warms_each():
    log = []
    engines = harness.warm_llms({"plain": None, "x": {"method": "x"}},
                                lambda c: FakeLLM(str(c), log, [1], 1))
    assert list(engines) == ["plain", "x"]
    assert log == [("None", harness.WARM_UP_PROMPT), ("{'method': 'x'}", harness.WARM_UP_PROMPT)]
