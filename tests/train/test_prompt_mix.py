"""The wide prompt set (specpath_train.prompt_mix): each kind drawn from the training split,
seeded and distinct, self-instructed requests filtered and shaped as ``--data`` rows."""

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
@given(seed=st.integers(0, 2**16))
def test_function_headers_are_distinct_seeded_and_end_in_a_docstring(seed):
    a = pm.function_headers(6, seed=seed)
    assert a == pm.function_headers(6, seed=seed) and len(a) == 6 and len(set(a)) == 6
    for h in a:  # a function whose only statement is its docstring, once a body is added
        fn = ast.parse(h + "    pass\n").body[0]
        assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and ast.get_docstring(fn)
        assert len(fn.body) == 2


def test_edit_instructions_fill_every_template_from_real_functions():
    out = pm.edit_instructions(40, seed=3)
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


def test_self_instruct_without_a_user_turn_is_one_clear_error():
    with pytest.raises(ValueError, match="no user turn"):
        pm.self_instruct(FakeLLM([]), "{{ messages[0]['content'] }}", 3, seed=0, systems=(None,))


def test_mix_is_shuffled_rows_of_every_kind_without_an_llm_when_no_self_instruct():
    rows = pm.mix(None, CHATML, n_code=3, n_headers=2, n_chat=3, n_general=2, n_edits=2, n_self=0, seed=5)
    assert len(rows) == 12
    assert sum("prompt" in r for r in rows) == 5 and sum("messages" in r for r in rows) == 7
    assert rows == pm.mix(None, CHATML, n_code=3, n_headers=2, n_chat=3, n_general=2, n_edits=2, n_self=0, seed=5)
