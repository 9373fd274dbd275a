"""Chat templates render as in transformers, inside jinja2's sandbox, with one-line errors."""

import pytest
import transformers

from specpath_engine.chat import ChatTemplateError, check_messages, render_chat

# Whitespace-sensitive (trim_blocks / lstrip_blocks), loop controls, tojson, raise_exception.
TEMPLATE = """{% for m in messages %}
    {% if m['role'] == 'tool' %}{{ raise_exception('no tools') }}{% endif %}
    {% if m['role'] == 'skip' %}{% continue %}{% endif %}
<|{{ m['role'] }}|>{{ m['content'] | tojson }}{{ eos_token }}
{% endfor %}
{% if add_generation_prompt %}<|assistant|>{% endif %}"""

MESSAGES = [
    {"role": "system", "content": "Be brief."},
    {"role": "skip", "content": "ignored"},
    {"role": "user", "content": 'Say "hi"\n'},
]


def test_renders_like_transformers(tmp_path):
    from tokenizers import Tokenizer, models

    tok = transformers.PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer(models.BPE(vocab={"a": 0, "</s>": 1}, merges=[])), eos_token="</s>"
    )
    for generation in (True, False):
        theirs = tok.apply_chat_template(MESSAGES, chat_template=TEMPLATE, tokenize=False,
                                         add_generation_prompt=generation)
        ours = render_chat(TEMPLATE, MESSAGES, eos_token="</s>", add_generation_prompt=generation)
        assert ours == theirs


def test_template_cannot_reach_python_internals():
    escape = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(ChatTemplateError, match="chat template failed"):
        render_chat(escape, MESSAGES)
    mutate = "{% set _ = messages.append(1) %}x"
    with pytest.raises(ChatTemplateError):
        render_chat(mutate, MESSAGES)


def test_errors_are_one_line():
    with pytest.raises(ChatTemplateError, match="chat template: no tools"):
        render_chat(TEMPLATE, [{"role": "tool", "content": "x"}])
    with pytest.raises(ChatTemplateError, match="does not compile"):
        render_chat("{% for %}", MESSAGES)
    with pytest.raises(ChatTemplateError, match="no chat template"):
        render_chat(None, MESSAGES)
    for bad, match in [("hi", "non-empty list"), ([], "non-empty list"), ([1], r"messages\[0\]"),
                       ([{"role": "", "content": "x"}], r"messages\[0\].role"),
                       ([{"role": "user", "content": 3}], r"messages\[0\].content")]:
        with pytest.raises(ChatTemplateError, match=match) as info:
            check_messages(bad)
        assert "\n" not in str(info.value)
