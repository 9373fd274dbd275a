"""A wide prompt set for a drafter, made without any downloaded data: what ``specpath train
--data`` reads when the built-in corpus is too narrow.

A drafter learns the target's text on the prompts it is shown, and generalises only as far as
their variety: the shipped SmolLM2 heads went from τ 1.74 to 2.08 when their data grew from 194k
to 870k tokens of the *same* few templates. This module adds kinds the built-in corpus lacks:

- **function headers** to complete (a signature and docstring of a training-split stdlib
  function, the body left to the target): the shape of a code-completion request;
- **edits** of real code (type hints, renames, comprehension rewrites, JSON descriptions of a
  signature): the editing/JSON kind of work;
- **code-writing requests** (``--corpus wide-write`` only): a stdlib function's signature and
  docstring as a chat request to implement it, the shape of a code-writing chat (the wide set
  had them only as a one-line task among the stdlib chat, 2% of it, and EAGLE-3's τ on such
  chats trailed its τ on completions of the same functions by ~0.6);
- **self-instructed requests** (:func:`self_instruct`): the target is given its chat template up
  to an open user turn and samples the user's message itself, so the requests follow the
  distribution the instruct model was tuned on rather than anyone's templates (the idea of
  Magpie, Xu et al. 2024). A system message steers the kind (coding, editing, everyday).

Every kind is drawn from a split of the stdlib (``specpath_engine.corpus``: "train", or
"heldout" for the prompts a drafter is evaluated on), seeded; self-instructed requests have no
split, so :func:`wide_corpus` draws the two sets' in one call, distinct. ``specpath train
--corpus wide`` builds its prompts with :func:`wide_corpus` (``--write-prompts FILE`` writes them
as ``--data`` rows).

Example::

    train, heldout = wide_corpus(2000, 200, seed=1, llm=lambda: LLM(target), template=template)
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import random
from collections.abc import Callable, Sequence
from pathlib import Path
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

WRITE_TASKS = (
    "Complete this Python function:\n\n```python\n{header}```",
    "Implement the following function in Python:\n\n```python\n{header}```",
    "Write the body of this function and explain how it works:\n\n```python\n{header}```",
    "{header}\nWrite a Python function for the signature and docstring above.",
    "Write a Python function `{signature}` that does the following: {summary}",
    "I need a Python function that does this: {summary} Name it `{name}`. Include a short example of calling it.",
)
"""Code-writing requests over a stdlib function's ``header`` (signature and docstring, as
:func:`function_headers` draws them), its ``signature`` line, ``name`` and docstring ``summary``."""

SELF_INSTRUCT_SYSTEMS = (
    None,  # the template's own default system message
    "You are an expert Python programmer. Users ask you to write, explain and fix code.",
    "You are a helpful assistant. Users ask you to edit, rewrite, summarise or reformat text and data.",
    "You are a friendly assistant that answers everyday questions clearly.",
)
"""System messages steering :func:`self_instruct` towards a kind of request (None: the chat
template's default)."""

WIDE_SHARES = (("code", 7), ("headers", 5), ("chat", 7), ("general", 5), ("edits", 4), ("self", 16))
"""How :func:`wide_corpus` splits its prompts among the kinds, in 44ths (16% stdlib code to
continue, 11% function headers, 16% chat about stdlib functions, 11% everyday requests, 9% edits,
36% self-instructed requests): the proportions the wide SmolLM2 prompt set was first made with.
A target without a chat template has no self-instructed kind; the others keep their
proportions."""

WIDE_WRITE_SHARES = WIDE_SHARES + (("write", 6),)
"""``--corpus wide-write``: the wide set plus code-writing requests (:data:`WRITE_TASKS`), in
50ths (12%); the wide set's own shares stay as they were, so its seeds draw the prompts they drew."""

CORPUS_SHARES = {"wide": WIDE_SHARES, "wide-write": WIDE_WRITE_SHARES}
"""The shares of each model-made prompt corpus, by its ``--corpus`` name."""


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


def function_headers(split: str, n: int, *, seed: int) -> list[str]:
    """At most ``n`` (fewer only where the split runs out) distinct signature+docstring prompts
    from ``split``'s stdlib modules."""
    from specpath_train.target_text import _documents

    rng = random.Random(seed)
    docs = _documents(split)
    seen: set[str] = set()
    out: list[str] = []
    parsed: dict[str, list[str]] = {}  # each module parsed once: the draws are the same, minutes faster
    for _ in range(50 * max(n, 1)):
        if len(out) == n or (len(parsed) == len(docs) and len(seen) == sum(map(len, parsed.values()))):
            break
        rel, text = rng.choice(docs)
        heads = parsed[rel] if rel in parsed else parsed.setdefault(rel, _headers(text))
        if heads:
            h = rng.choice(heads)
            if h not in seen:
                seen.add(h)
                out.append(h)
    return out


def edit_instructions(split: str, n: int, *, seed: int, max_lines: int = 25) -> list[str]:
    """``n`` editing requests (:data:`EDIT_TASKS`) over ``split``'s stdlib functions."""
    from specpath_train.target_text import _documents, _functions

    rng = random.Random(seed)
    docs = _documents(split)
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


def write_requests(split: str, n: int, *, seed: int) -> list[str]:
    """``n`` distinct code-writing requests (:data:`WRITE_TASKS`) over ``split``'s documented
    stdlib functions (fewer only where the split runs out)."""
    heads = function_headers(split, n, seed=seed)
    rng = random.Random(seed + 1)
    out: list[str] = []
    for header in heads:
        fn = ast.parse(header + "    pass\n").body[0]  # (function_headers' own check: it parses)
        signature = f"{fn.name}({ast.unparse(fn.args)})" + (f" -> {ast.unparse(fn.returns)}" if fn.returns else "")
        summary = (ast.get_docstring(fn) or "").strip().split("\n\n")[0].replace("\n", " ").strip()
        name = fn.name
        task = rng.choice(WRITE_TASKS if len(summary) >= 15 else WRITE_TASKS[:4])
        out.append(task.format(header=header, signature=signature, name=name, summary=summary))
    return out


_MARKER = "\x00SPECPATH-USER\x00"
"""The user's message while a template is rendered to find where a user turn opens and closes."""


def _render_user_turn(template: str, system: str | None, bos_token: str | None) -> tuple[str, int] | None:
    """The template rendered over one user message made of a marker, and where the marker is
    (None when the template has no place for it, or refuses the conversation)."""
    from specpath_engine.chat import ChatTemplateError, render_chat

    messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": _MARKER}]
    try:
        text = render_chat(template, messages, bos_token=bos_token, add_generation_prompt=False)
    except ChatTemplateError:  # e.g. a template that raises on a system message
        return None
    cut = text.find(_MARKER)
    return (text, cut) if cut >= 0 else None


def user_turn_prefix(template: str, system: str | None, *, bos_token: str | None = None) -> str | None:
    """The chat template rendered up to an open user turn: a conversation with one user message
    made of a marker, cut at the marker. None when the template puts nothing before the user's
    text that we can cut at (the marker not found, nothing before it, or nothing between it and
    the system message: no turn is opened), or refuses the conversation (a system message it
    does not allow)."""
    found = _render_user_turn(template, system, bos_token)
    if not found or found[1] == 0:
        return None
    prefix = found[0][:found[1]]
    return None if system and prefix.rstrip().endswith(system.strip()) else prefix


def user_turn_end(template: str, *, bos_token: str | None = None) -> str | None:
    """The text the template closes a user's message with (``<|im_end|>`` for ChatML,
    ``<|eot_id|>`` for Llama 3): where a self-instructed request stops. None when it puts
    nothing there (the model's EOS then ends the request)."""
    found = _render_user_turn(template, None, bos_token)
    if not found:
        return None
    tail = found[0][found[1] + len(_MARKER):].strip()
    return tail.splitlines()[0].strip() if tail else None


def can_self_instruct(template: str | None, *, bos_token: str | None = None) -> bool:
    """Whether :func:`self_instruct` can open a user turn of ``template`` (under at least one
    of :data:`SELF_INSTRUCT_SYSTEMS`)."""
    return bool(template) and any(user_turn_prefix(template, s, bos_token=bos_token) for s in SELF_INSTRUCT_SYSTEMS)


SELF_INSTRUCT_CHUNK = 96
"""Samples per generate call where :func:`self_instruct` keeps its work in a directory: a stopped
run loses at most one chunk (a SmolLM2 run of 4,000 prompts writes ~2,300 samples: 18 minutes on
one thread of an AMD EPYC)."""


def self_instruct(llm: Any, template: str, n: int, *, seed: int, systems: Sequence[str | None] = SELF_INSTRUCT_SYSTEMS,
                  weights: Sequence[float] | None = None, end_text: str | None = None, temperature: float = 1.0,
                  top_p: float = 0.95, max_tokens: int = 160, min_chars: int = 20,
                  bos_token: str | None = None, cache: str | Path | None = None) -> list[dict]:
    """At most ``n`` user requests the target writes itself (see the module docstring), as
    ``{"messages": [...]}`` rows (the steering system message kept, so the response is written
    under it). A sample that runs out of ``max_tokens`` before ``end_text`` (None: what the
    template closes a user turn with, :func:`user_turn_end`) or the model's EOS, or is shorter
    than ``min_chars`` or a repeat, is dropped, and more are drawn (at most 4 rounds).

    ``cache``: a directory that keeps the samples, :data:`SELF_INSTRUCT_CHUNK` at a time, each
    chunk in a file named by its round, its place and a digest of what it asked, so a stopped run
    started again reads what it had (each sample has its own seed: the same requests) and
    generates only the rest."""
    from specpath_engine.request import SamplingParams

    rng = random.Random(seed)
    end_text = end_text if end_text is not None else user_turn_end(template, bos_token=bos_token)
    prefixes = {s: user_turn_prefix(template, s, bos_token=bos_token) for s in systems}
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
        params = [SamplingParams(temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                                 stop=(end_text,) if end_text else (),
                                 seed=seed * 1_000_003 + round_ * 100_000 + i) for i in range(len(ask))]
        prompts = [prefixes[s] for s in ask]
        samples = (_cached_generate(llm, prompts, params, Path(cache), f"{round_}", (temperature, top_p, max_tokens))
                   if cache is not None else [(r.text, r.finish_reason) for r in llm.generate(prompts, params)])
        for system, (text, reason) in zip(ask, samples):
            text = text.strip()
            if reason != "stop" or len(text) < min_chars or text in seen:
                continue
            seen.add(text)
            messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": text}]
            out.append({"messages": messages})
            if len(out) == n:
                break
    return out


def _cached_generate(llm: Any, prompts: Sequence[str], params: Sequence[Any], cache: Path, tag: str,
                     sampling: tuple) -> list[tuple[str, str]]:
    """``(text, finish reason)`` of every prompt, generated :data:`SELF_INSTRUCT_CHUNK` at a time
    and kept in ``cache`` (one JSON file a chunk, written whole or not at all); a chunk whose file
    holds the same prompts, seeds and sampling is read, not generated."""
    cache.mkdir(parents=True, exist_ok=True)
    out: list[tuple[str, str]] = []
    for start in range(0, len(prompts), SELF_INSTRUCT_CHUNK):
        chunk, chunk_params = prompts[start:start + SELF_INSTRUCT_CHUNK], params[start:start + SELF_INSTRUCT_CHUNK]
        asked = json.dumps([list(chunk), [p.seed for p in chunk_params], list(sampling)])
        digest = hashlib.sha256(asked.encode()).hexdigest()[:16]
        path = cache / f"self-{tag}-{start:06d}-{digest}.json"
        if path.is_file():
            kept = json.loads(path.read_text())
            if len(kept) == len(chunk):
                out += [(text, reason) for text, reason in kept]
                continue
        made = [(r.text, r.finish_reason) for r in llm.generate(list(chunk), list(chunk_params))]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(made))
        os.replace(tmp, path)
        out += made
    return out


def wide_counts(n: int, *, self_instructed: bool, shares: Sequence[tuple[str, int]] = WIDE_SHARES) -> dict[str, int]:
    """``n`` split among the kinds by ``shares`` (largest remainders, ties to the kind listed
    first), without the self-instructed kind unless ``self_instructed``."""
    shares = [(k, w) for k, w in shares if self_instructed or k != "self"]
    total = sum(w for _, w in shares)
    counts = {k: n * w // total for k, w in shares}
    by_remainder = sorted(range(len(shares)), key=lambda i: (-(n * shares[i][1] % total), i))
    for i in by_remainder[:n - sum(counts.values())]:
        counts[shares[i][0]] += 1
    return counts


def template_rows(split: str, counts: dict[str, int], *, seed: int) -> list[dict]:
    """The model-free kinds' ``--data`` rows of ``split`` (``counts`` by kind; ``self`` is not
    drawn here): stdlib code slices and function headers as plain prompts, the built-in
    corpus's chat about stdlib functions, the wider pool of everyday requests and edits as user
    messages. In kind order; seeded per kind."""
    from specpath_train.target_text import chat_instructions, code_snippets, general_instructions

    rows: list[dict] = [{"prompt": t} for t in code_snippets(split, counts.get("code", 0), seed=seed)]
    rows += [{"prompt": t} for t in function_headers(split, counts.get("headers", 0), seed=seed + 1)]
    user = (chat_instructions(split, counts.get("chat", 0), seed=seed + 2)
            + general_instructions(split, counts.get("general", 0), seed=seed + 3, wider=True)
            + edit_instructions(split, counts.get("edits", 0), seed=seed + 4)
            + write_requests(split, counts.get("write", 0), seed=seed + 6))
    return rows + [{"messages": [{"role": "user", "content": t}]} for t in user]


def wide_corpus(n_train: int, n_heldout: int, *, seed: int, llm: Callable[[], Any] | None = None,
                template: str | None = None, bos_token: str | None = None,
                cache: str | Path | None = None,
                shares: Sequence[tuple[str, int]] = WIDE_SHARES) -> tuple[list[dict], list[dict]]:
    """(training, held-out) ``--data`` rows of every kind in ``shares``' proportions,
    each set shuffled. The model-free kinds come from the stdlib split of their set; the
    self-instructed requests of both sets from one :func:`self_instruct` call (so no held-out
    request is also trained on), written by ``llm()`` (called only then). Without ``llm`` or a
    ``template`` a user turn can be opened in, the other kinds fill the sets. ``cache``: where
    :func:`self_instruct` keeps its samples (a stopped run resumes them)."""
    able = llm is not None and can_self_instruct(template, bos_token=bos_token)
    counts = {"train": wide_counts(n_train, self_instructed=able, shares=shares),
              "heldout": wide_counts(n_heldout, self_instructed=able, shares=shares)}
    rows = {"train": template_rows("train", counts["train"], seed=seed),
            "heldout": template_rows("heldout", counts["heldout"], seed=seed + 7)}
    n_self = counts["train"].get("self", 0) + counts["heldout"].get("self", 0)
    if able and n_self:
        made = self_instruct(llm(), template, n_self, seed=seed + 5, bos_token=bos_token, cache=cache)
        held = counts["heldout"]["self"]
        rows["heldout"] += made[:held]
        rows["train"] += made[held:]
    random.Random(seed).shuffle(rows["train"])
    random.Random(seed + 7).shuffle(rows["heldout"])
    return rows["train"], rows["heldout"]
