"""specpath_train.prompts: the jsonl reader (property tests) and prompt rendering."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specpath.cli import CommandError
from specpath_train.prompts import Prompt, parse_line, read_prompts, render

text = st.text(min_size=1, max_size=40)
message = st.fixed_dictionaries({"role": st.sampled_from(["system", "user", "assistant"]), "content": st.text(max_size=40)})
record = st.one_of(st.builds(lambda t: {"prompt": t}, text),
                   st.builds(lambda m: {"messages": m}, st.lists(message, min_size=1, max_size=4)))


@settings(max_examples=60, deadline=None)
@given(st.lists(record, min_size=1, max_size=8), st.lists(st.sampled_from(["", "  ", "\t"]), max_size=3))
def test_every_valid_record_reads_back_in_order(tmp_path_factory, records, blanks):
    path = tmp_path_factory.mktemp("p") / "data.jsonl"
    lines = [json.dumps(r) for r in records] + blanks  # blank lines anywhere are skipped
    path.write_text("\n".join(lines))
    got = read_prompts(path)
    assert len(got) == len(records)
    for prompt, r in zip(got, records):
        if "prompt" in r:
            assert prompt.text == r["prompt"] and prompt.messages is None
        else:
            assert prompt.text is None and prompt.message_dicts() == r["messages"]


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=30))
def test_any_line_is_a_prompt_a_blank_or_a_one_line_error_naming_it(line):
    try:
        got = parse_line(line, where="f.jsonl:7")
    except CommandError as exc:
        assert str(exc).startswith("f.jsonl:7: ") and "\n" not in str(exc)
    else:
        assert got is None or isinstance(got, Prompt)


class ByteTok:
    chat_template = None

    def encode(self, text):
        return list(text.encode())


def test_long_prompts_keep_both_ends_and_chat_without_a_template_is_its_contents():
    long = Prompt(text="a" * 10 + "b" * 10)
    chat = Prompt(messages=((("content", "hi"), ("role", "user")),))
    ids = render([long, chat], ByteTok(), max_tokens=6, source="x")
    assert ids[0] == [ord("a")] * 3 + [ord("b")] * 3
    assert ids[1] == list(b"hi\n")


def test_a_chat_template_renders_messages_with_the_generation_prompt():
    tok = ByteTok()
    tok.chat_template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<a>{% endif %}"
    chat = Prompt(messages=((("content", "hi"), ("role", "user")),))
    assert bytes(render([chat], tok, max_tokens=100, source="x")[0]) == b"<user>hi<a>"
    tok.chat_template = "{{ raise_exception('no system role') }}"
    with pytest.raises(CommandError, match="x: prompt 1: "):
        render([chat], tok, max_tokens=100, source="x")


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(), min_size=2, max_size=50, unique=True), st.floats(0.01, 0.99), st.integers(0, 9))
def test_the_held_out_split_is_a_seeded_partition_with_both_sides_non_empty(items, share, seed):
    from specpath_train.cli_train import split_prompts

    train, held = split_prompts(items, share, seed)
    assert sorted(train + held) == sorted(items) and train and held
    assert split_prompts(items, share, seed) == (train, held)
