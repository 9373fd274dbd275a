"""The wide prompt set (specpath_train.prompt_mix): each kind drawn from its stdlib split,
seeded and distinct, self-instructed requests filtered and shaped as ``--data`` rows, and the
two sets of :func:`wide_corpus` in fixed shares, disjoint."""

import ast
import json
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath_train import prompt_mix as pm
from specpath_train.prompts import parse_line

CHATML = ("{% for m in messages %}{% if loop.first and m['role'] != 'system' %}<|im_start|>system\nDefault<|im_end|>\n"
          "{% endif %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def test_headers_are_a_signature_and_docstring_that_parse_once_a_body_is_added():
    src = ('import functools\n\nclass A:\n    @functools.cache\n    def f(self, x):\n        """Twice x.\n\n'
           '        More.\n        """\n        return 2 * x\n\n    def g(self):\n        return 1\n\n'
           'def only_doc():\n    """No body after it."""\n')
    heads = pm._headers(src)
    assert heads == ['@functools.cache\ndef f(self, x):\n    """Twice x.\n\n    More.\n    """\n']
    ast.parse(heads[0] + "    pass\n")  # the target's answer is the body


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 2**16), split=st.sampled_from(["train", "heldout"]))
def test_function_headers_are_distinct_seeded_and_end_in_a_docstring(seed, split):
    a = pm.function_headers(split, 6, seed=seed)
    assert a == pm.function_headers(split, 6, seed=seed) and len(a) == 6 and len(set(a)) == 6
    for h in a:  # a function whose only statement is its docstring, once a body is added
        fn = ast.parse(h + "    pass\n").body[0]
        assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(fn)
        assert len(fn.body) == 2


def test_edit_instructions_fill_every_template_from_real_functions():
    out = pm.edit_instructions("train", 40, seed=3)
    assert len(out) == 40 and not any("{" + k + "}" in t for t in out for k in ("bare", "signature", "source"))
    assert sum("JSON" in t for t in out) >= 1 and all("```python\n" in t for t in out)


def test_user_turn_prefix_opens_a_user_turn_with_or_without_a_system_message():
    assert pm.user_turn_prefix(CHATML, None) == "<|im_start|>system\nDefault<|im_end|>\n<|im_start|>user\n"
    assert pm.user_turn_prefix(CHATML, "Be brief.") == "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"
    assert pm.user_turn_prefix("{% for m in messages %}{{ m['content'] }}{% endfor %}", None) is None


class FakeLLM:
    """Returns scripted samples in order; records the prompts and params it was given."""

    def __init__(self, samples):
        self.samples, self.calls = list(samples), []

    def generate(self, prompts, params):
        self.calls.append((list(prompts), list(params)))
        out = []
        for _ in prompts:
            text, reason = self.samples.pop(0) if self.samples else ("", "length")
            out.append(SimpleNamespace(text=text, finish_reason=reason))
        return out


def test_self_instruct_keeps_finished_long_distinct_samples_as_data_rows():
    samples = [("How do I sort a dict by value in Python?", "stop"), ("cut off mid sente", "length"),
               ("short", "stop"), ("How do I sort a dict by value in Python?", "stop"),
               ("  Write a haiku about the sea, please.  ", "stop")]
    llm = FakeLLM(samples)
    rows = pm.self_instruct(llm, CHATML, 2, seed=0, systems=(None,))
    assert rows == [{"messages": [{"role": "user", "content": "How do I sort a dict by value in Python?"}]},
                    {"messages": [{"role": "user", "content": "Write a haiku about the sea, please."}]}]
    prompts, params = llm.calls[0]
    assert set(prompts) == {"<|im_start|>system\nDefault<|im_end|>\n<|im_start|>user\n"}
    assert all(p.stop == ("<|im_end|>",) and p.temperature == 1.0 for p in params)
    assert len({p.seed for p in params}) == len(params)  # every sample its own stream
    for row in rows:  # what specpath train --data reads
        assert parse_line(json.dumps(row), where="x:1") is not None


def test_self_instruct_keeps_the_steering_system_message_and_draws_again_when_short():
    llm = FakeLLM([("too short", "stop")] * 9 + [("Please explain list comprehensions.", "stop")] * 30)
    rows = pm.self_instruct(llm, CHATML, 1, seed=1, systems=("You write code.",))
    assert rows == [{"messages": [{"role": "system", "content": "You write code."},
                                  {"role": "user", "content": "Please explain list comprehensions."}]}]
    assert len(llm.calls) == 2  # the first round gave nothing usable


class StoppingLLM(FakeLLM):
    """A FakeLLM whose run is stopped (Ctrl-C) at its ``stop_at``-th generate call."""

    def __init__(self, samples, stop_at):
        super().__init__(samples)
        self.stop_at = stop_at

    def generate(self, prompts, params):
        if len(self.calls) + 1 == self.stop_at:
            raise KeyboardInterrupt
        return super().generate(prompts, params)


def distinct(n):
    return [(f"Request number {i}: please explain something useful.", "stop") for i in range(n)]


def test_self_instruct_with_a_cache_resumes_a_stopped_run_and_generates_only_the_rest(tmp_path, monkeypatch):
    """Kept a chunk at a time: a run stopped in its third chunk keeps the first two, and the same
    call again reads them and generates only what was left, giving the rows a run that was never
    stopped gives; a run over a whole cache generates nothing."""
    monkeypatch.setattr(pm, "SELF_INSTRUCT_CHUNK", 3)
    whole = pm.self_instruct(FakeLLM(distinct(40)), CHATML, 8, seed=4, systems=(None,))  # 8 * 1.4 + 8 = 19 asked
    with pytest.raises(KeyboardInterrupt):
        pm.self_instruct(StoppingLLM(distinct(40), stop_at=3), CHATML, 8, seed=4, systems=(None,), cache=tmp_path)
    assert len(list(tmp_path.glob("self-0-*.json"))) == 2 and not list(tmp_path.glob("*.tmp"))
    rest = FakeLLM(distinct(40)[6:])  # what the first two chunks did not take
    assert pm.self_instruct(rest, CHATML, 8, seed=4, systems=(None,), cache=tmp_path) == whole
    assert sum(len(prompts) for prompts, _ in rest.calls) == 19 - 6
    again = FakeLLM([])
    assert pm.self_instruct(again, CHATML, 8, seed=4, systems=(None,), cache=tmp_path) == whole and not again.calls
    # another seed asks other requests: nothing of this cache is read for it
    other = FakeLLM(distinct(40))
    pm.self_instruct(other, CHATML, 8, seed=5, systems=(None,), cache=tmp_path)
    assert sum(len(prompts) for prompts, _ in other.calls) == 19


def test_self_instruct_without_a_user_turn_is_one_clear_error():
    with pytest.raises(ValueError, match="no user turn"):
        pm.self_instruct(FakeLLM([]), "{{ messages[0]['content'] }}", 3, seed=0, systems=(None,))


def test_the_splits_draw_from_their_own_files():
    """A held-out header or edit quotes a function of a held-out stdlib file, never a training one."""
    from specpath_train.target_text import _documents

    held_text = "\n".join(t for _, t in _documents("heldout"))
    heads = pm.function_headers("heldout", 5, seed=2)
    assert len(heads) == 5 and all(h.splitlines()[0].strip() in held_text for h in heads)
    edits = pm.edit_instructions("heldout", 5, seed=2)
    assert all(e.split("```python\n")[1].splitlines()[0].strip() in held_text for e in edits)
    assert not set(pm.function_headers("heldout", 20, seed=2)) & set(pm.function_headers("train", 200, seed=2))


LLAMA3 = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
          "{{ m['content'] }}<|eot_id|>{% endfor %}{% if add_generation_prompt %}<|start_header_id|>assistant"
          "<|end_header_id|>\n\n{% endif %}")
NO_SYSTEM = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
             "{% endif %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}")


def test_a_user_turn_closes_with_the_templates_own_end_and_self_instruct_stops_there():
    assert pm.user_turn_end(CHATML) == "<|im_end|>"
    assert pm.user_turn_end(LLAMA3, bos_token="<s>") == "<|eot_id|>"
    assert pm.user_turn_end("{% for m in messages %}{{ m['content'] }}{% endfor %}") is None
    llm = FakeLLM([("What is the capital of France, please?", "stop")])
    rows = pm.self_instruct(llm, LLAMA3, 1, seed=0, systems=(None,), bos_token="<s>")
    assert rows and llm.calls[0][0][0] == "<s><|start_header_id|>user<|end_header_id|>\n\n"
    assert all(p.stop == ("<|eot_id|>",) for p in llm.calls[0][1])


def test_a_template_that_refuses_a_system_message_self_instructs_without_one():
    assert pm.user_turn_prefix(NO_SYSTEM, "You write code.") is None
    assert pm.can_self_instruct(NO_SYSTEM) and not pm.can_self_instruct(None)
    assert not pm.can_self_instruct("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    llm = FakeLLM([(f"Tell me about topic number {i}, please.", "stop") for i in range(40)])
    rows = pm.self_instruct(llm, NO_SYSTEM, 3, seed=0)
    assert len(rows) == 3 and all(r["messages"][0]["role"] == "user" for r in rows)


@given(n=st.integers(0, 5000), self_instructed=st.booleans(), corpus=st.sampled_from(sorted(pm.CORPUS_SHARES)))
def test_wide_counts_sum_to_n_in_the_documented_shares(n, self_instructed, corpus):
    counts = pm.wide_counts(n, self_instructed=self_instructed, shares=pm.CORPUS_SHARES[corpus])
    assert sum(counts.values()) == n and ("self" in counts) == self_instructed
    shares = {k: w for k, w in pm.CORPUS_SHARES[corpus] if self_instructed or k != "self"}
    total = sum(shares.values())
    for kind, count in counts.items():  # each within one of its exact share
        assert abs(count - n * shares[kind] / total) < 1


def test_wide_counts_of_the_first_wide_set():
    assert pm.wide_counts(4400, self_instructed=True) == {"code": 700, "headers": 500, "chat": 700, "general": 500,
                                                         "edits": 400, "self": 1600}


def test_the_wide_write_set_adds_code_writing_requests_and_keeps_the_wide_sets_shares():
    assert pm.wide_counts(5000, self_instructed=True, shares=pm.WIDE_WRITE_SHARES) == {
        "code": 700, "headers": 500, "chat": 700, "general": 500, "edits": 400, "self": 1600, "write": 600}
    assert dict(pm.CORPUS_SHARES["wide"]) == dict(pm.WIDE_SHARES)  # the shipped heads' seeds draw what they drew


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 2**16))
def test_write_requests_ask_to_implement_a_real_function_seeded_and_distinct(seed):
    out = pm.write_requests("train", 12, seed=seed)
    assert out == pm.write_requests("train", 12, seed=seed) and len(out) == 12 and len(set(out)) == 12
    for text in out:
        assert "{" + "header}" not in text and "{" + "summary}" not in text and "{" + "name}" not in text
        if "```python\n" in text:  # a header to implement: a function whose only statement is its docstring
            code = text.split("```python\n", 1)[1].split("```", 1)[0]
            fn = ast.parse(code + "    pass\n").body[0]
            assert ast.get_docstring(fn) and len(fn.body) == 2
        elif text.endswith("Write a Python function for the signature and docstring above."):
            ast.parse(text.rsplit("\n", 1)[0] + "\n    pass\n")
        else:  # a one-line request that names the function
            assert "`" in text and "Python function" in text


def test_write_requests_of_the_two_splits_never_share_a_request():
    held = pm.write_requests("heldout", 20, seed=4)
    assert len(held) == 20
    train = set(pm.write_requests("train", 200, seed=4))
    assert not set(held) & train


def test_wide_corpus_with_the_wide_write_shares_has_code_writing_requests():
    train, held = pm.wide_corpus(50, 10, seed=2, shares=pm.WIDE_WRITE_SHARES)
    asked = {r["messages"][0]["content"] for r in train if "messages" in r}
    assert (len(train), len(held)) == (50, 10)
    assert set(pm.write_requests("train", 9, seed=2 + 6)) <= asked  # 6/34 of 50 without self: 9 (seeded + 6)
    assert pm.wide_corpus(50, 10, seed=2) != (train, held)


def test_wide_corpus_without_a_model_is_seeded_shuffled_rows_of_the_other_kinds():
    train, held = pm.wide_corpus(28, 5, seed=5)
    assert (len(train), len(held)) == (28, 5) and (train, held) == pm.wide_corpus(28, 5, seed=5)
    assert sum("prompt" in r for r in train) == 7 + 5 and sum("messages" in r for r in train) == 7 + 5 + 4
    assert train != sorted(train, key=lambda r: "messages" in r)  # shuffled, not in kind order
    assert not {json.dumps(r) for r in train} & {json.dumps(r) for r in held}
    assert pm.wide_corpus(28, 5, seed=5, template=CHATML) == (train, held)  # a template without a model: the same


def test_wide_corpus_self_instructs_both_sets_in_one_call_without_sharing_a_request():
    llm = FakeLLM([(f"Please write request number {i} for me.", "stop") for i in range(200)])
    made = []
    train, held = pm.wide_corpus(44, 11, seed=1, llm=lambda: made.append(1) or llm, template=CHATML)
    assert made == [1] and len(llm.calls) == 1  # loaded once, one call for both sets
    selfs = [[r["messages"][-1]["content"] for r in part if "Please write request" in json.dumps(r)]
             for part in (train, held)]
    assert (len(selfs[0]), len(selfs[1])) == (16, 4) and not set(selfs[0]) & set(selfs[1])
    assert (len(train), len(held)) == (44, 11)
