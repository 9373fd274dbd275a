import json

import pytest
from hypothesis import given, settings, strategies as st

from specpath_engine.bench.workloads import BUILTIN, Workload, WorkloadError, batches, load_workload


def test_builtin_kinds_cover_code_chat_everyday_and_edit():
    assert set(BUILTIN) == {"code", "code-chat", "chat", "edit"}
    assert not BUILTIN["code"].needs_chat_template
    assert all(BUILTIN[k].needs_chat_template for k in ("code-chat", "chat", "edit"))


def test_file_of_prompts_and_conversations(tmp_path):
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"prompt": "def f():\n"}) + "\n\n"
                 + json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    w = load_workload(str(f))
    assert w.name == "mine"
    assert w.items == ("def f():\n", [{"role": "user", "content": "hi"}])
    assert w.needs_chat_template


@pytest.mark.parametrize("text, says", [
    ("", "no prompts"),
    ("{", "mine.jsonl:1: not JSON"),
    ('{"prompt": "a", "messages": []}', "exactly one of"),
    ('[1]', "exactly one of"),
    ('{"prompt": ""}', "non-empty string"),
    ('{"messages": []}', "non-empty list"),
    ('{"messages": [{"role": "user"}]}', "string 'role' and 'content'"),
])
def test_bad_files_are_one_line_naming_file_and_line(tmp_path, text, says):
    f = tmp_path / "mine.jsonl"
    f.write_text(text)
    with pytest.raises(WorkloadError, match=says) as info:
        load_workload(str(f))
    assert "\n" not in str(info.value)


def test_unknown_kind_and_missing_file(tmp_path):
    with pytest.raises(WorkloadError, match="unknown workload 'cod'"):
        load_workload("cod")
    with pytest.raises(WorkloadError, match="cannot be read"):
        load_workload(str(tmp_path / "absent.jsonl"))


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_any_line_is_an_item_or_one_workload_error(tmp_path_factory, line):
    f = tmp_path_factory.mktemp("w") / "x.jsonl"
    f.write_text(line, encoding="utf-8")
    try:
        w = load_workload(str(f))
    except WorkloadError as exc:
        assert "\n" not in str(exc)
    else:
        assert all(isinstance(i, (str, list)) for i in w.items)


@given(st.integers(1, 20), st.integers(1, 9))
def test_batches_are_full_and_cover_every_item(n, b):
    w = Workload(name="w", items=tuple(str(i) for i in range(n)))
    groups = batches(w, b)
    assert all(len(g) == b for g in groups)
    assert {x for g in groups for x in g} == set(w.items)
    assert len(groups) == -(-n // b)
