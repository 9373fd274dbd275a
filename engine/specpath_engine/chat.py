"""Chat templates: a conversation rendered into the prompt text its checkpoint was trained on.

Templates are Jinja, read from the checkpoint (``tokenizer_config.json`` or GGUF metadata), so
they are untrusted input: they run in jinja2's immutable sandbox (no attribute writes, no
access to Python internals), with the helpers Hugging Face templates expect (``raise_exception``,
``tojson``, ``strftime_now``, loop controls) and its whitespace settings (``trim_blocks``,
``lstrip_blocks``) so a template renders here as it does in ``transformers``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any


class ChatTemplateError(ValueError):
    """A conversation that cannot be rendered: no template, bad messages, a template error."""


Message = Mapping[str, Any]


def _raise(message: str) -> None:
    raise ChatTemplateError(f"chat template: {message}")


def _strftime_now(fmt: str) -> str:
    import datetime

    return datetime.datetime.now().strftime(fmt)


@functools.lru_cache(maxsize=16)
def _compile(template: str) -> Any:
    try:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise ChatTemplateError("chat templates need the jinja2 package (pip install jinja2)") from None
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    env.globals.update(raise_exception=_raise, strftime_now=_strftime_now)
    try:
        return env.from_string(template)
    except TemplateError as exc:
        raise ChatTemplateError(f"chat template does not compile: {exc}") from None


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """One conversation as a list of ``{"role": str, "content": str}`` dicts (one-line errors)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence) or not messages:
        raise ChatTemplateError("messages: expected a non-empty list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"messages[{i}]: expected a dict with 'role' and 'content', got {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role:
            raise ChatTemplateError(f"messages[{i}].role: expected a non-empty string, got {role!r}")
        if not isinstance(content, str):
            raise ChatTemplateError(f"messages[{i}].content: expected a string, got {type(content).__name__}")
        out.append(dict(message))
    return out


def render_chat(
    template: str | None,
    messages: Sequence[Message],
    *,
    bos_token: str | None = None,
    eos_token: str | None = None,
    add_generation_prompt: bool = True,
) -> str:
    """The prompt text of ``messages`` under ``template`` (ChatTemplateError if it cannot be made)."""
    if not template:
        raise ChatTemplateError("this model has no chat template; use generate() with a plain prompt")
    from jinja2 import TemplateError

    compiled = _compile(template)
    try:
        return compiled.render(
            messages=check_messages(messages),
            add_generation_prompt=add_generation_prompt,
            bos_token=bos_token or "",
            eos_token=eos_token or "",
        )
    except TemplateError as exc:  # includes sandbox SecurityError
        raise ChatTemplateError(f"chat template failed: {' '.join(str(exc).split())}") from None
