"""A wide prompt set for a drafter, made without any downloaded data: what ``specpath train
--data`` reads when the built-in corpus is too narrow.

A drafter learns the target's text on the prompts it is shown, and generalises only as far as
their variety: the shipped SmolLM2 heads went from τ 1.74 to 2.08 when their data grew from 194k
to 870k tokens of the *same* few templates. This module adds kinds the built-in corpus lacks:

- **function headers** to complete (a signature and docstring of a training-split stdlib
  function, the body left to the target): the shape of a code-completion request;
- **edits** of real code (type hints, renames, comprehension rewrites, JSON descriptions of a
  signature): the editing/JSON kind of work;
- **self-instructed requests** (:func:`self_instruct`): the target is given its chat template up
  to an open user turn and samples the user's message itself, so the requests follow the
  distribution the instruct model was tuned on rather than anyone's templates (the idea of
  Magpie, Xu et al. 2024). A system message steers the kind (coding, editing, everyday).

Everything is drawn from the stdlib's *training* split (``specpath_engine.corpus``), seeded.

Example::

    rows = mix(llm, n_code=600, n_headers=400, n_chat=600, n_general=400, n_edits=300,
               n_self=1200, seed=1)
    Path("prompts.jsonl").write_text("".join(json.dumps(r) + "\\n" for r in rows))
"""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence
from typing import Any

EDIT_TASKS = (
    "Add type hints to this function and show the whole function:\n\n```python\n{bare}\n```",
    "Rename the variables in this function to more descriptive names:\n\n```python\n{bare}\n```",
    "Rewrite this function using list comprehensions where it helps:\n\n```python\n{bare}\n```",
    "Describe the parameters of this function as a JSON object mapping each name to its type and "
    "default:\n\n```python\n{signature}\n```",
    "Convert this function into a method of a small class and show the class:\n\n```python\n{bare}\n```",
    "Add error handling for bad input to this function:\n\n```python\n{bare}\n```",
    "Translate this Python function to JavaScript:\n\n```python\n{bare}\n```",
    "Add comments to this code explaining each step:\n\n```python\n{bare}\n```",
)
"""Editing requests over a stdlib function (its ``bare`` source without docstring, or its
``signature``)."""

SELF_INSTRUCT_SYSTEMS = (
    None,  # the template's own default system message
    "You are an expert Python programmer. Users ask you to write, explain and fix code.",
    "You are a helpful assistant. Users ask you to edit, rewrite, summarise or reformat text and data.",
    "You are a friendly assistant that answers everyday questions clearly.",
)
"""System messages steering :func:`self_instruct` towards a kind of request (None: the chat
template's default)."""


def _headers(text: str) -> list[str]:
    """``def`` line(s) plus docstring of every documented top-level or method function of a
    module's source, dedented: a completion prompt whose answer is the body."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    lines = text.splitlines()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not ast.get_docstring(node):
            continue
        doc = node.body[0]
        if len(node.body) < 2 or doc.end_lineno is None or doc.end_lineno - node.lineno > 30:
            continue
        start = min([d.lineno for d in node.decorator_list] + [node.lineno]) - 1
        block = lines[start:doc.end_lineno]
        indent = len(block[0]) - len(block[0].lstrip())
        out.append("\n".join(s[indent:] for s in block) + "\n")
    return out


def function_headers(n: int, *, seed: int) -> list[str]:
    """``n`` signature+docstring prompts from training-split stdlib modules (distinct)."""
    from specpath_train.target_text import _documents

    rng = random.Random(seed)
    docs = _documents("train")
    seen: set[str] = set()
    out: list[str] = []
    for _ in range(50 * max(n, 1)):
        if len(out) == n:
            break
        rel, text = rng.choice(docs)
        heads = _headers(text)
        if heads:
            h = rng.choice(heads)
            if h not in seen:
                seen.add(h)
                out.append(h)
    return out


def edit_instructions(n: int, *, seed: int, max_lines: int = 25) -> list[str]:
    """``n`` editing requests (:data:`EDIT_TASKS`) over training-split stdlib functions."""
    from specpath_train.target_text import _documents, _functions

    rng = random.Random(seed)
    docs = _documents("train")
    out: list[str] = []
    for _ in range(50 * max(n, 1)):
        if len(out) == n:
            break
        rel, text = rng.choice(docs)
        funcs = _functions(rel, text, max_lines)
        if not funcs:
            continue
        f = rng.choice(funcs)
        signature = f["source"].split(":\n", 1)[0] + ":"
        out.append(rng.choice(EDIT_TASKS).format(signature=signature, **f))
    return out


def user_turn_prefix(template: str, system: str | None, *, bos_token: str | None = None) -> str:
    """The chat template rendered up to an open user turn: a conversation with one user message
    made of a marker, cut at the marker. None when the template puts nothing before the user's
    text that we can cut at (the marker not found)."""
    from specpath_engine.chat import render_chat

    marker = "\x00SPECPATH-USER\x00"
    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": marker}]
    text = render_chat(template, messages, bos_token=bos_token, add_generation_prompt=False)
    cut = text.find(marker)
    return text[:cut] if cut > 0 else None


def self_instruct(llm: Any, template: str, n: int, *, seed: int, systems: Sequence[str | None] = SELF_INSTRUCT_SYSTEMS,
                  weights: Sequence[float] | None = None, end_text: str = "<|im_end|>", temperature: float = 1.0,
                  top_p: float = 0.95, max_tokens: int = 160, min_chars: int = 20) -> list[dict]:
    """``n`` user requests the target writes itself (see the module docstring), as
    ``{"messages": [...]}`` rows (the steering system message kept, so the response is written
    under it). A sample that runs out of ``max_tokens`` before ``end_text`` or is shorter than
    ``min_chars`` is dropped, and more are drawn (at most 4 rounds)."""
    from specpath_engine.request import SamplingParams

    rng = random.Random(seed)
    prefixes = {s: user_turn_prefix(template, s) for s in systems}
    usable = [s for s in systems if prefixes[s]]
    if not usable:
        raise ValueError("the chat template has no user turn to open")
    w = None if weights is None else [weights[systems.index(s)] for s in usable]
    out: list[dict] = []
    seen: set[str] = set()
    for round_ in range(4):
        want = n - len(out)
        if want <= 0:
            break
        ask = [rng.choices(usable, weights=w)[0] for _ in range(int(want * 1.4) + 8)]
        params = [SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens, stop=(end_text,),
                                 seed=seed * 1_000_003 + round_ * 100_000 + i) for i in range(len(ask))]
        for system, res in zip(ask, llm.generate([prefixes[s] for s in ask], params)):
            text = res.text.strip()
            if res.finish_reason != "stop" or len(text) < min_chars or text in seen:
                continue
            seen.add(text)
            messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
            out.append({"messages": messages})
            if len(out) == n:
                break
    return out


def mix(llm: Any, template: str, *, n_code: int, n_headers: int, n_chat: int, n_general: int, n_edits: int,
        n_self: int, seed: int) -> list[dict]:
    """Every kind above plus the built-in corpus's kinds (stdlib code slices, chat about stdlib
    functions, the wider pool of everyday requests), shuffled, as ``--data`` rows."""
    from specpath_train.target_text import chat_instructions, code_snippets, general_instructions

    rows: list[dict] = [{"prompt": t} for t in code_snippets("train", n_code, seed=seed)]
    rows += [{"prompt": t} for t in function_headers(n_headers, seed=seed + 1)]
    user = (chat_instructions("train", n_chat, seed=seed + 2) + general_instructions("train", n_general, seed=seed + 3, wider=True)
            + edit_instructions(n_edits, seed=seed + 4))
    rows += [{"messages": [{"role": "user", "content": t}]} for t in user]
    if n_self:
        rows += self_instruct(llm, template, n_self, seed=seed + 5)
    random.Random(seed).shuffle(rows)
    return rows
