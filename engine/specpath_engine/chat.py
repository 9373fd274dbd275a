"""Chat templates: a conversation rendered into the prompt text its checkpoint was trained on.

Templates are Jinja, read from the checkpoint (``tokenizer_config.json`` or GGUF metadata), so
they are untrusted input: they run in jinja2's immutable sandbox (no attribute writes, no
access to Python internals), with the helpers Hugging Face templates expect (``raise_exception``,
``tojson``, ``strftime_now``, loop controls) and its whitespace settings (``trim_blocks``,
``lstrip_blocks``) so a template renders here as it does in ``transformers``.

The sandbox keeps template code from the machine, not from the CPU and the memory, so a render
is also bounded: :data:`RENDER_SECONDS` of template code (a line-level trace on the template's own
frames), :data:`MAX_CHARS` of output (checked as it streams, and before any ``*``, ``+``, ``~``,
``**``, ``%``, call or filter could build a bigger value in one go). Whatever goes wrong, the
caller sees one :class:`ChatTemplateError` line.
"""

from __future__ import annotations

import functools
import json
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from specpath.errors import InputError

RENDER_SECONDS = 5.0
"""Most seconds a template may run (real chat templates take milliseconds)."""
MAX_CHARS = 8 * 1024 * 1024
"""Most characters a render (or any one value it builds) may have: far beyond any real prompt,
far below what makes the tokenizer abort (a 100 MB text panics its regex engine)."""
MAX_TEMPLATE_CHARS = 1024 * 1024
"""Longest template accepted (real ones are a few KB)."""


class ChatTemplateError(InputError):
    """A conversation that cannot be rendered: no template, bad messages, a template error."""


Message = Mapping[str, Any]


def _raise(message: str) -> None:
    raise ChatTemplateError(f"chat template: {message}")


def _strftime_now(fmt: str) -> str:
    import datetime

    return datetime.datetime.now().strftime(fmt)


class _Exceeded(BaseException):
    """A render over its time or size budget (a BaseException: template code cannot catch it)."""


_WIDE_FORMAT = re.compile(r"\d{7,}|%\*|\{[^{}]*\{")  # widths of a million+, '*' widths, nested specs


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (str, bytes, list, tuple)) else 0


class _Limits:
    """The budgets of one render, checked by the environment's hooks."""

    def __init__(self, max_chars: int, seconds: float) -> None:
        self.max_chars = max_chars
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds

    def check_size(self, n: int, what: str) -> None:
        if n > self.max_chars:
            raise _Exceeded(f"{what} of {n:,} characters exceeds the limit of {self.max_chars:,}")

    def check_args(self, args: Sequence[Any], kwargs: Mapping[str, Any], what: str) -> None:
        for a in (*args, *kwargs.values()):
            if isinstance(a, int) and not isinstance(a, bool) and abs(a) > self.max_chars:
                raise _Exceeded(f"{what} with an argument of {a.bit_length()} bits (most {self.max_chars:,})")
            if isinstance(a, (str, bytes, list, tuple)):
                self.check_size(len(a), what)

    def check_format(self, fmt: Any, what: str) -> None:
        if isinstance(fmt, str) and _WIDE_FORMAT.search(fmt):
            raise _Exceeded(f"{what} with a field width the sandbox does not allow")


def _bounded_binop(limits: _Limits, operator: str, left: Any, right: Any) -> None:
    """Refuse ``left <operator> right`` when its result would exceed the budget (before computing it)."""
    ints = isinstance(left, int) and isinstance(right, int)
    if operator == "**" and ints and right > 0 and left not in (0, 1, -1):
        if left.bit_length() * right > 64 * 1024:
            raise _Exceeded("a power too large to compute")
    elif operator == "*":
        if ints and left.bit_length() + right.bit_length() > 64 * 1024:
            raise _Exceeded("a product too large to compute")
        for seq, n in ((left, right), (right, left)):
            if _size(seq) and isinstance(n, int):
                limits.check_size(_size(seq) * max(n, 0), "a repetition")
    elif operator == "+":
        if _size(left) and _size(right):
            limits.check_size(_size(left) + _size(right), "a concatenation")
    elif operator == "%":
        limits.check_format(left, "a % format")
        limits.check_args(right if isinstance(right, tuple) else (right,), {}, "a % format")


_LOCAL = threading.local()  # .limits: those of the render running in this thread


def _limits() -> _Limits:
    limits = getattr(_LOCAL, "limits", None)
    return limits if limits is not None else _Limits(MAX_CHARS, RENDER_SECONDS)  # e.g. constant folding


def _environment() -> Any:
    from jinja2.compiler import CodeGenerator
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    class _Generator(CodeGenerator):
        def visit_Concat(self, node, frame):  # ``a ~ b``: through the environment, so it is bounded
            self.write("environment.bounded_concat((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class _Bounded(ImmutableSandboxedEnvironment):
        code_generator_class = _Generator
        intercepted_binops = frozenset({"*", "**", "+", "%"})

        def call_binop(self, context, operator, left, right):
            _bounded_binop(_limits(), operator, left, right)
            return super().call_binop(context, operator, left, right)

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 - jinja's signature
            limits = _limits()
            limits.check_args(args, kwargs, "a call")
            method = getattr(__obj, "__wrapped__", __obj)  # the sandbox wraps str.format
            if isinstance(getattr(method, "__self__", None), str) and getattr(method, "__name__", "") in (
                    "format", "format_map"):
                limits.check_format(method.__self__, "str.format")
            return super().call(__context, __obj, *args, **kwargs)

        def bounded_concat(self, parts):
            text = "".join(str(p) for p in parts)
            _limits().check_size(len(text), "a ~ concatenation")
            return text

    env = _Bounded(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda value, indent=None: json.dumps(value, ensure_ascii=False, indent=indent)
    for name, function in list(env.filters.items()):
        env.filters[name] = _bounded_filter(name, function)
    env.globals.update(raise_exception=_raise, strftime_now=_strftime_now)
    return env


def _bounded_filter(name: str, function: Any) -> Any:
    @functools.wraps(function)  # keeps jinja's pass_context/pass_environment marks
    def bounded(*args: Any, **kwargs: Any) -> Any:
        limits = _limits()
        limits.check_args([a for a in args if isinstance(a, (int, str))], kwargs, f"the {name} filter")
        if name == "format" and args:
            limits.check_format(args[-1] if not isinstance(args[0], str) else args[0], "the format filter")
        if name == "replace" and len(args) >= 3 and all(isinstance(a, str) for a in args[-3:]):
            text, old, new = (str(a) for a in args[-3:])
            limits.check_size(len(text) + text.count(old) * max(len(new) - len(old), 0) if old else
                              len(text) * (len(new) + 1), "the replace filter's result")
        result = function(*args, **kwargs)
        limits.check_size(_size(result), f"the {name} filter's result")
        return result

    return bounded


@functools.lru_cache(maxsize=16)
def _compile(template: str) -> Any:
    try:
        from jinja2 import TemplateError  # noqa: F401
    except ImportError:
        raise ChatTemplateError("chat templates need the jinja2 package (pip install jinja2)") from None
    if len(template) > MAX_TEMPLATE_CHARS:
        raise ChatTemplateError(f"chat template of {len(template):,} characters is longer than the "
                                f"{MAX_TEMPLATE_CHARS:,} accepted")
    try:
        return _environment().from_string(template)
    except _Exceeded as exc:  # jinja folds constant filter calls while compiling
        raise ChatTemplateError(f"chat template stopped: {exc}") from None
    except (Exception, RecursionError, MemoryError) as exc:  # noqa: BLE001 - untrusted text: every failure is one line
        raise ChatTemplateError(f"chat template does not compile: {_describe(exc)}") from None


def _describe(exc: BaseException) -> str:
    from jinja2 import TemplateError

    text = " ".join(str(exc).split())
    if len(text) > 200:
        text = text[:197] + "..."
    if isinstance(exc, TemplateError):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _valid_text(text: str, where: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ChatTemplateError(
            f"{where}: not valid text ({exc.reason} at character {exc.start}: {text[exc.start]!r})"
        ) from None


def _type_name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def check_messages(messages: Any) -> list[dict[str, Any]]:
    """One conversation as a list of ``{"role": str, "content": str}`` dicts (one-line errors)."""
    if isinstance(messages, Mapping):
        raise ChatTemplateError("messages: expected a non-empty list of {'role': ..., 'content': ...} dicts, "
                                "got one dict (wrap a single message in a list)")
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise ChatTemplateError("messages: expected a non-empty list of {'role': ..., 'content': ...} dicts, "
                                f"got {_type_name(messages)}")
    if not messages:
        raise ChatTemplateError("messages: expected a non-empty list of {'role': ..., 'content': ...} dicts, "
                                "got an empty list")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatTemplateError(f"messages[{i}]: expected a dict with 'role' and 'content', got {_type_name(message)}")
        role, content = message.get("role"), message.get("content")
        if not isinstance(role, str) or not role:
            raise ChatTemplateError(f"messages[{i}].role: expected a non-empty string, got {_short(role)}")
        if not isinstance(content, str):
            raise ChatTemplateError(f"messages[{i}].content: expected a string, got {_type_name(content)}")
        _valid_text(role, f"messages[{i}].role")
        _valid_text(content, f"messages[{i}].content")
        out.append(dict(message))
    return out


def split_conversations(messages: Any) -> list[list[dict[str, Any]]]:
    """``LLM.chat``'s argument as a list of checked conversations: one conversation (a list of
    message dicts) or a list of them."""
    check_outer = isinstance(messages, Sequence) and not isinstance(messages, (str, bytes, Mapping))
    if check_outer and messages and all(
        isinstance(c, Sequence) and not isinstance(c, (str, bytes, Mapping)) for c in messages
    ):
        out = []
        for i, conversation in enumerate(messages):
            try:
                out.append(check_messages(conversation))
            except ChatTemplateError as exc:
                raise ChatTemplateError(f"conversation {i}: {exc}") from None
        return out
    return [check_messages(messages)]


def _short(value: Any) -> str:
    from specpath.errors import _short as short

    return short(value, 40)


def _run_bounded(compiled: Any, context: dict[str, Any], limits: _Limits) -> str:
    """Render, stopping template code past ``limits`` (time: traced lines; size: streamed output)."""

    def local(frame, event, arg):
        if time.monotonic() > limits.deadline:
            raise _Exceeded(f"rendering took longer than {limits.seconds:g} s")
        return local

    def scope(frame, event, arg):
        return local if frame.f_code.co_filename == "<template>" else None

    previous, outer = sys.gettrace(), getattr(_LOCAL, "limits", None)
    _LOCAL.limits = limits
    sys.settrace(scope)
    try:
        parts, size = [], 0
        for chunk in compiled.generate(**context):
            size += len(chunk)
            limits.check_size(size, "the rendered prompt")
            parts.append(chunk)
        return "".join(parts)
    finally:
        sys.settrace(previous)
        _LOCAL.limits = outer


def render_chat(
    template: str | None,
    messages: Sequence[Message],
    *,
    bos_token: str | None = None,
    eos_token: str | None = None,
    add_generation_prompt: bool = True,
    max_chars: int = MAX_CHARS,
    timeout_s: float = RENDER_SECONDS,
) -> str:
    """The prompt text of ``messages`` under ``template`` (ChatTemplateError if it cannot be made,
    including a render over ``timeout_s`` seconds or ``max_chars`` characters)."""
    checked = check_messages(messages)
    if not template:
        raise ChatTemplateError("this model has no chat template; use generate() with a plain prompt")
    if not isinstance(template, str):
        raise ChatTemplateError(f"chat template: expected a string, got {_type_name(template)}")
    compiled = _compile(template)
    context = dict(messages=checked, add_generation_prompt=add_generation_prompt,
                   bos_token=bos_token or "", eos_token=eos_token or "")
    try:
        return _run_bounded(compiled, context, _Limits(max_chars, timeout_s))
    except ChatTemplateError:
        raise
    except _Exceeded as exc:
        raise ChatTemplateError(f"chat template stopped: {exc}") from None
    except (Exception, RecursionError, MemoryError) as exc:  # noqa: BLE001 - includes sandbox SecurityError
        raise ChatTemplateError(f"chat template failed: {_describe(exc)}") from None
