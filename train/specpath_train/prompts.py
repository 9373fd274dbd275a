"""The prompts a drafter is trained on: a user's ``.jsonl`` file, or the built-in corpus.

One JSON object a line, either ``{"prompt": "text"}`` (sent as it is) or ``{"messages":
[{"role": ..., "content": ...}, ...]}`` (rendered with the target's chat template, generation
prompt added). Only the prompts are read: the target writes every response itself
(self-distillation), since the drafter must predict *the target*, not whoever wrote the data.
Blank lines are skipped; any other bad line is a :func:`~specpath_train.errors.train_error` naming
the file and line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from specpath_train.errors import train_error


@attrs.frozen(kw_only=True)
class Prompt:
    """One prompt: plain ``text`` or chat ``messages`` (exactly one of the two)."""

    text: str | None = None
    messages: tuple[tuple[tuple[str, str], ...], ...] | None = None
    """Each message as its sorted ``(key, value)`` pairs (hashable, so prompts compare)."""

    def message_dicts(self) -> list[dict[str, str]]:
        return [dict(m) for m in self.messages or ()]

    def as_row(self) -> dict:
        """The prompt as a line of a ``--data`` file reads it back (:func:`parse_line`)."""
        return {"prompt": self.text} if self.text is not None else {"messages": self.message_dicts()}


def parse_line(line: str, *, where: str) -> Prompt | None:
    """The prompt of one line (None for a blank one); ``where`` (``file:line``) prefixes errors."""
    if not line.strip():
        return None
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise train_error(f"{where}: not JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise train_error(f"{where}: expected an object with \"prompt\" or \"messages\", got {type(obj).__name__}")
    has_prompt, has_messages = "prompt" in obj, "messages" in obj
    if has_prompt == has_messages:
        raise train_error(f"{where}: expected exactly one of \"prompt\" or \"messages\" (got keys {sorted(obj)})")
    if has_prompt:
        text = obj["prompt"]
        if not isinstance(text, str) or not text:
            raise train_error(f"{where}: \"prompt\" must be a non-empty string")
        return Prompt(text=text)
    messages = obj["messages"]
    if not isinstance(messages, list) or not messages:
        raise train_error(f"{where}: \"messages\" must be a non-empty list of {{\"role\", \"content\"}} objects")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not m.get("role") \
                or not isinstance(m.get("content"), str):
            raise train_error(f"{where}: messages[{i}] must be an object with string \"role\" and \"content\"")
        out.append(tuple(sorted((str(k), v) for k, v in m.items() if isinstance(v, str))))
    return Prompt(messages=tuple(out))


def read_prompts(path: str | Path) -> list[Prompt]:
    """Every prompt of a ``.jsonl`` file, in order (see the module docstring)."""
    path = Path(path)
    if not path.is_file():
        raise train_error(f"--data {path}: no such file")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise train_error(f"--data {path}: not UTF-8 text (byte {exc.start})") from None
    prompts = [p for n, line in enumerate(lines, 1) if (p := parse_line(line, where=f"{path}:{n}")) is not None]
    if not prompts:
        raise train_error(f"--data {path}: no prompts (one {{\"prompt\": ...}} or {{\"messages\": [...]}} object a line)")
    return prompts


def write_rows(path: str | Path, rows: Sequence[dict]) -> None:
    """``rows`` as a ``--data`` file, one JSON object a line, written whole or not at all."""
    import os

    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, path)


def builtin_prompts(split: str, n: int, *, seed: int) -> list[Prompt]:
    """``n`` prompts of the built-in corpus: a third stdlib code slices to continue, a third chat
    instructions about stdlib functions, a third everyday chat requests
    (:mod:`specpath_train.target_text`); ``split`` "heldout" draws from the held-out files."""
    from specpath_train.target_text import chat_instructions, code_snippets, general_instructions

    code, chat = n // 3, n // 3
    general = n - code - chat
    prompts = [Prompt(text=t) for t in code_snippets(split, code, seed=seed)]
    texts = chat_instructions(split, chat, seed=seed + 1) + general_instructions(split, general, seed=seed + 2)
    prompts += [Prompt(messages=((("content", t), ("role", "user")),)) for t in texts]
    return prompts


def render(prompts: Sequence[Prompt], tokenizer: Any, *, max_tokens: int, source: str) -> list[list[int]]:
    """Token ids of every prompt; chat prompts through the tokenizer's chat template. A prompt
    longer than ``max_tokens`` keeps its first and last halves (the generation prompt stays).
    Chat prompts without a template: a CommandError naming ``source``. A model without one (a
    byte-level model) gets the messages' contents, one a line."""
    from specpath_engine.chat import ChatTemplateError, render_chat

    template = getattr(tokenizer, "chat_template", None)
    out = []
    for i, p in enumerate(prompts):
        if p.text is not None:
            text = p.text
        elif template:
            try:
                text = render_chat(template, p.message_dicts(), bos_token=getattr(tokenizer, "bos_token", None),
                                   eos_token=getattr(tokenizer, "eos_token", None))
            except ChatTemplateError as exc:
                raise train_error(f"{source}: prompt {i + 1}: {exc}") from None
        else:
            text = "\n".join(m["content"] for m in p.message_dicts()) + "\n"
        ids = list(tokenizer.encode(text))
        if len(ids) > max_tokens:
            ids = ids[:max_tokens // 2] + ids[len(ids) - (max_tokens - max_tokens // 2):]
        if ids:
            out.append(ids)
    return out
