"""What ``specpath bench`` sends: built-in workload kinds, or the user's own prompts from a file.

A workload is a named list of items, each a completion prompt (text) or a conversation (a list
of ``{"role", "content"}`` messages, sent through the model's chat template). The built-in
prompts were written for this project: no public evaluation set (HumanEval, MBPP, MT-Bench,
GSM8K, ...) is in them, nor was any drafter trained on them. A file holds one JSON object a
line, ``{"prompt": "..."}`` or ``{"messages": [...]}``::

    {"prompt": "def parse_header(line):\\n"}
    {"messages": [{"role": "user", "content": "Explain what a mutex is in two sentences."}]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import attrs

Item = Union[str, list]
"""A completion prompt, or a conversation (a list of message dicts)."""


class WorkloadError(ValueError):
    """A workload file or name that cannot be used (one line: the file, the line, what is wrong)."""


@attrs.frozen(kw_only=True)
class Workload:
    name: str
    """What the tables call it: a built-in kind or the file's stem."""
    items: tuple[Item, ...]
    """Prompts or conversations, in order; a batch of B takes B consecutive ones, cycling."""

    @property
    def needs_chat_template(self) -> bool:
        return any(not isinstance(item, str) for item in self.items)


def _chat(*contents: str) -> tuple[list, ...]:
    return tuple([{"role": "user", "content": c}] for c in contents)


BUILTIN: dict[str, Workload] = {
    "code": Workload(name="code", items=(
        "def merge_intervals(intervals):\n    \"\"\"Merge overlapping [start, end] intervals.\"\"\"\n",
        "import csv\n\n\ndef read_rows(path):\n    \"\"\"Yield each row of a CSV file as a dict.\"\"\"\n",
        "class LRUCache:\n    def __init__(self, capacity):\n        self.capacity = capacity\n        self.data = {}\n\n"
        "    def get(self, key):\n",
        "def word_counts(text):\n    counts = {}\n    for word in text.lower().split():\n",
        "import argparse\n\n\ndef build_parser():\n    parser = argparse.ArgumentParser(description='Resize images')\n",
        "def binary_search(items, target):\n    lo, hi = 0, len(items) - 1\n    while lo <= hi:\n",
    )),
    "code-chat": Workload(name="code-chat", items=_chat(
        "Write a Python function that returns the n-th triangular number.",
        "Write a Python class for a bank account with deposit and withdraw methods that refuse overdrafts.",
        "Write a function that removes duplicate items from a list while keeping their order.",
        "Write a Python function that converts a temperature from Celsius to Fahrenheit, with a docstring.",
        "Write a function that checks whether two strings are anagrams of each other.",
        "Write a Python script that prints the ten largest files in a directory.",
    )),
    "chat": Workload(name="chat", items=_chat(
        "What should I pack for a weekend hiking trip?",
        "Explain why the sky looks blue, in simple words.",
        "Suggest a name for a small bakery that sells sourdough bread.",
        "How do I politely decline a meeting invitation?",
        "What is the difference between a virus and a bacterium?",
        "Give me a simple recipe for tomato soup.",
    )),
    "edit": Workload(name="edit", items=_chat(
        "Fix the spelling in this sentence and return only the sentence: 'Teh quick brown fox jumpd over teh lazy dog.'",
        "Convert this to JSON with keys name, age and city: Alice is 31 and lives in Lyon.",
        "Rewrite this list as a JSON array of strings: apples, pears, plums, cherries.",
        "Rename the variable x to total in this code and return the code:\n\nx = 0\nfor n in numbers:\n    x += n\nprint(x)",
        "Turn this into a bulleted list: eggs, milk, flour, sugar, butter.",
        "Return this JSON with the price doubled: {\"item\": \"lamp\", \"price\": 20, \"in_stock\": true}",
    )),
}
"""Code completion, code-writing chat, everyday chat, and editing/JSON requests."""


def load_workload(spec: str) -> Workload:
    """A built-in kind by name, or a ``.jsonl`` file (see the module docstring)."""
    if spec in BUILTIN:
        return BUILTIN[spec]
    path = Path(spec)
    if not path.suffix and not path.exists():
        raise WorkloadError(f"unknown workload {spec!r}: give one of {', '.join(BUILTIN)} or a .jsonl file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot be read ({type(exc).__name__}: {exc})") from None
    items: list[Item] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        items.append(_item(path, number, line))
    if not items:
        raise WorkloadError(f"{path}: no prompts (one JSON object a line: {{\"prompt\": ...}} or {{\"messages\": [...]}})")
    return Workload(name=path.stem, items=tuple(items))


def _item(path: Path, number: int, line: str) -> Item:
    where = f"{path}:{number}"
    try:
        obj = json.loads(line)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise WorkloadError(f"{where}: not JSON ({exc})") from None
    if not isinstance(obj, dict) or ("prompt" in obj) == ("messages" in obj):
        raise WorkloadError(f"{where}: expected an object with exactly one of 'prompt' or 'messages'")
    if "prompt" in obj:
        if not isinstance(obj["prompt"], str) or not obj["prompt"]:
            raise WorkloadError(f"{where}: 'prompt' must be a non-empty string")
        return obj["prompt"]
    messages = obj["messages"]
    if not isinstance(messages, list) or not messages:
        raise WorkloadError(f"{where}: 'messages' must be a non-empty list")
    for m in messages:
        if not (isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)):
            raise WorkloadError(f"{where}: each message must be an object with string 'role' and 'content'")
    return messages


def batches(workload: Workload, batch_size: int) -> list[list[Item]]:
    """Consecutive groups of ``batch_size`` items covering every item once (the last cycles back
    to the start so each batch is full: 8 concurrent requests mean 8)."""
    n = len(workload.items)
    count = -(-n // batch_size)
    return [[workload.items[(b * batch_size + i) % n] for i in range(batch_size)] for b in range(count)]


def split_kinds(items: Sequence[Item]) -> tuple[list[str], list[list]]:
    """(completion prompts, conversations)."""
    return [i for i in items if isinstance(i, str)], [i for i in items if not isinstance(i, str)]


def describe(item: Any, width: int = 48) -> str:
    """A one-line label for a per-prompt table."""
    text = item if isinstance(item, str) else item[-1]["content"]
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"
