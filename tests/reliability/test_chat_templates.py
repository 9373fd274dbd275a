"""Chat templates come from checkpoints, so they are untrusted: every template either renders or
fails with one ChatTemplateError line, within a time and size budget, and every malformed
conversation is one line too."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specpath.errors import InputError
from specpath_engine.chat import ChatTemplateError, render_chat, split_conversations

MESSAGES = [{"role": "user", "content": "hi"}]
GOOD = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}"

HOSTILE = {
    "nested loops": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "longer than"),
    "3 GB of output": ("{% for i in range(100000) %}{% for j in range(100000) %}" + "x" * 300 + "{% endfor %}{% endfor %}",
                       "exceeds the limit"),
    "100 MB in one repetition": ("{{ 'x' * 100000000 }}", "repetition"),
    "doubling with ~": ("{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}"
                        "{% endfor %}{{ ns.s }}", "concatenation"),
    "doubling with +": ("{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s + ns.s %}"
                        "{% endfor %}{{ ns.s }}", "concatenation"),
    "center filter": ("{{ 'x'|center(3000000000) }}", "center filter"),
    "ljust method": ("{{ 'x'.ljust(3000000000) }}", "a call"),
    "format filter width": ("{{ '%3000000000s'|format('x') }}", "field width"),
    "str.format width": ("{{ '{:>3000000000}'.format('x') }}", "field width"),
    "% width": ("{{ '%3000000000s' % 'x' }}", "field width"),
    "huge power": ("{{ 10 ** 100000000 }}", "power"),
    "replace blow-up": ("{% set s = 'a' * 1000000 %}{{ s|replace('a', 'a' * 40) }}", "replace filter"),
    "recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "RecursionError"),
    "TypeError": ("{{ 1 + 'a' }}", "TypeError"),
    "ZeroDivisionError": ("{{ 1 / 0 }}", "ZeroDivisionError"),
    "undefined": ("{{ foo.bar }}", "undefined"),
    "syntax": ("{% for %}", "does not compile"),
    "sandbox escape": ("{{ ''.__class__.__mro__ }}", "unsafe"),
    "raise_exception": ("{{ raise_exception('no system role') }}", "no system role"),
    "too long": ("x" * (2 * 1024 * 1024), "longer than"),
}


def _one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and 0 < len(text) < 400, text
    return text


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_templates_fail_in_one_line_within_budget(name):
    template, match = HOSTILE[name]
    start = time.monotonic()
    with pytest.raises(ChatTemplateError) as info:
        render_chat(template, MESSAGES, timeout_s=1.0)
    assert time.monotonic() - start < 10  # the 1 s budget, plus a busy machine's slack
    assert match in _one_line(info.value)
    assert isinstance(info.value, InputError)  # the CLI prints it as one line


def test_a_good_template_still_renders_and_the_limits_are_per_render():
    assert render_chat(GOOD, MESSAGES) == "<user>hi<a>"
    with pytest.raises(ChatTemplateError, match="exceeds the limit of 10"):
        render_chat(GOOD, [{"role": "user", "content": "x" * 20}], max_chars=10)
    assert render_chat(GOOD, MESSAGES, add_generation_prompt=False) == "<user>hi"


@pytest.mark.parametrize(("messages", "match"), [
    ({"role": "user", "content": "hi"}, "got one dict"),
    (None, "got None"),
    (5, "got int"),
    ((m for m in MESSAGES), "got generator"),
    ([], "got an empty list"),
    ([{"role": "user", "content": "a\ud800b"}], r"messages\[0\].content: not valid text"),
    ([{"role": "us\udc00er", "content": "a"}], r"messages\[0\].role: not valid text"),
    ([[]], "conversation 0"),
    ([MESSAGES, 3], r"messages\[0\]: expected a dict"),
])
def test_malformed_conversations_are_one_line(messages, match):
    with pytest.raises(ChatTemplateError, match=match) as info:
        split_conversations(messages)
    _one_line(info.value)


def test_llm_chat_refuses_malformed_conversations(plain_llm):
    for bad in ({"role": "user", "content": "hi"}, None, [], [{"role": "user", "content": "\ud800"}]):
        with pytest.raises(ChatTemplateError):
            plain_llm.chat(bad)


_FRAGMENTS = st.sampled_from([
    "{{ m.content }}", "{{ messages|length }}", "{% for m in messages %}", "{% endfor %}", "{% if x %}",
    "{% endif %}", "{{ 1 / 0 }}", "{{ 'ab' * 3 }}", "{{ range(3)|join(',') }}", "{{ raise_exception('r') }}",
    "{% set ns = namespace(s='a') %}", "{{ ns.s ~ ns.s }}", "{{ messages[0]['role'] }}", "{{ none.x }}",
    "{{ '%d' % 3 }}", "{{ (messages|first).content|upper }}", "{{ 2 ** 10 }}", "{{ tojson(messages) }}",
    "{{ messages|tojson }}", "text", "{%", "}}", "{{ [1] + [2] }}", "{{ {}.x }}", "{{ lipsum(2) }}",
])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_FRAGMENTS, max_size=8), st.lists(st.fixed_dictionaries({
    "role": st.text(max_size=5), "content": st.one_of(st.text(max_size=20), st.integers(), st.none())}), max_size=3))
def test_fuzzed_templates_and_messages_render_or_fail_in_one_line(fragments, messages):
    try:
        out = render_chat("".join(fragments), messages, timeout_s=1.0)
    except ChatTemplateError as exc:
        _one_line(exc)
    else:
        assert isinstance(out, str)


@pytest.mark.parametrize(("template", "match"), [
    ("{{ 1 / 0 }}", "chat template failed: ZeroDivisionError: division by zero"),
    ("{{ 'x' * 3000000000 }}", "chat template stopped: a repetition"),
    ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "RecursionError"),
])
def test_cli_run_chat_with_a_hostile_checkpoint_template_is_one_line(tmp_path, capsys, template, match):
    import gguf_helpers
    from specpath.cli import main

    path = tmp_path / "hostile.gguf"
    gguf_helpers.write_tiny_gguf(path, chat_template=template)
    assert main(["run", "--model", str(path), "--chat", "--prompt", "hi", "--max-tokens", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("specpath: error: chat template") and "\n" not in err
    assert match in err and "Traceback" not in err and "(SPECPATH_DEBUG" not in err
