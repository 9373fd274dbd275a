"""Bounded reading of config text and files: whatever a file holds, the answer is a small
mapping or one line.

``--speculative-config @file`` and JSON strings reach the config layer through here. A config is
a few hundred bytes, so everything outside that shape is refused before it can cost memory or
time: only regular files (never a FIFO, a device or ``/dev/zero`` behind a symlink), at most
:data:`MAX_CONFIG_BYTES`, strict UTF-8, at most :data:`MAX_NESTING` levels, YAML aliases expanded
to at most :data:`MAX_NODES` values (no billion laughs), no duplicate keys, no NaN literals and
no self-referential values.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from typing import Any

from specpath.errors import SpeculativeConfigError

MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read (1 MiB: real configs are under 1 KiB)."""
MAX_NESTING = 32
"""Deepest nesting of objects/lists a config may have (real ones use 3)."""
MAX_NODES = 100_000
"""Most values a config may hold once YAML aliases are expanded."""


_MAX_INT_DIGITS = 4300
"""Python's own limit for int <-> str (``sys.get_int_max_str_digits``); no config needs more."""
_MAX_INT_BITS = int(_MAX_INT_DIGITS * 3.3219280948873626)


def _error(problem: str, source: str) -> SpeculativeConfigError:
    return SpeculativeConfigError(problem, field=source)


def read_config_file(path: str, source: str = "--speculative-config") -> str:
    """The text of a regular file of at most ``MAX_CONFIG_BYTES`` bytes of UTF-8."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)  # a FIFO opens at once instead of blocking
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise SpeculativeConfigError(f"cannot read file: {exc.strerror}", field=source, value=path) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise SpeculativeConfigError("not a regular file", field=source, value=path)
        if info.st_size > MAX_CONFIG_BYTES:
            raise SpeculativeConfigError(
                f"file too large ({info.st_size} bytes; at most {MAX_CONFIG_BYTES})", field=source, value=path
            )
        with os.fdopen(os.dup(fd), "rb") as fh:
            data = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise SpeculativeConfigError(f"cannot read file: {exc.strerror}", field=source, value=path) from None
    finally:
        os.close(fd)
    if len(data) > MAX_CONFIG_BYTES:
        raise SpeculativeConfigError(f"file too large (at most {MAX_CONFIG_BYTES} bytes)", field=source, value=path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpeculativeConfigError(f"not UTF-8 text (bad byte at offset {exc.start})", field=source, value=path) from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


class _DuplicateKey(ValueError):
    def __init__(self, key: Any) -> None:
        super().__init__(key)
        self.key = key


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str, source: str = "--speculative-config") -> Any:
    """JSON with duplicate keys, NaN/Infinity, over-long integers and deep nesting refused."""
    if len(text) > MAX_CONFIG_BYTES:
        raise _error(f"config text too large (at most {MAX_CONFIG_BYTES} characters)", source)
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_refuse_constant)
    except _DuplicateKey as exc:
        raise SpeculativeConfigError("key given twice", field=source, value=exc.key) from None
    except RecursionError:
        raise _error(f"nested too deeply (at most {MAX_NESTING} levels)", source) from None
    except ValueError as exc:  # JSONDecodeError, and int() beyond sys.get_int_max_str_digits()
        raise _error(f"invalid JSON: {_first_line(exc)}", source) from None
    check_shape(data, source)
    return data


def parse_yaml(text: str, source: str) -> Any:
    """YAML (safe subset) with duplicate keys, alias bombs, over-long integers and deep nesting refused."""
    import yaml

    loader = None
    try:
        loader = _BoundedLoader(text)
        node = loader.get_single_node()
        if node is None:
            return None
        _check_node_graph(node, source)
        data = loader.construct_document(node)
    except _DuplicateKey as exc:
        raise SpeculativeConfigError("key given twice", field=source, value=exc.key) from None
    except RecursionError:
        raise _error(f"nested too deeply (at most {MAX_NESTING} levels)", source) from None
    except yaml.YAMLError as exc:
        raise _error(f"invalid YAML: {_first_line(exc)}", source) from None
    except (ValueError, TypeError, OverflowError) as exc:  # int() digit limit, unhashable keys, ...
        raise _error(f"invalid YAML value: {_first_line(exc)}", source) from None
    finally:
        if loader is not None:
            loader.dispose()
    check_shape(data, source)
    return data


def check_shape(data: Any, source: str = "speculative_config") -> None:
    """Refuse values nested deeper than ``MAX_NESTING``, with more than ``MAX_NODES`` values, or
    containing themselves (a YAML anchor inside its own value, or a Python dict put in itself)."""
    count = 0
    stack: list[tuple[Any, int, tuple[int, ...]]] = [(data, 1, ())]
    while stack:
        value, depth, ancestors = stack.pop()
        count += 1
        if count > MAX_NODES:
            raise _error(f"too many values (more than {MAX_NODES})", source)
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise _error(f"integer too large (more than {_MAX_INT_DIGITS} digits)", source)
        if isinstance(value, Mapping):
            children = list(value.values())
        elif isinstance(value, (list, tuple)):
            children = list(value)
        else:
            continue
        if id(value) in ancestors:
            raise _error("a value contains itself (self-referential config)", source)
        if depth > MAX_NESTING:
            raise _error(f"nested too deeply (at most {MAX_NESTING} levels)", source)
        inner = ancestors + (id(value),)
        stack.extend((child, depth + 1, inner) for child in children)


def _check_node_graph(root: Any, source: str) -> None:
    """Size and depth of a composed YAML node graph as if every alias were expanded, computed
    without expanding it (aliases share node objects; sizes are memoised per node)."""
    import yaml

    sizes: dict[int, int] = {}
    on_path: set[int] = set()

    def size(node: Any, depth: int) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in on_path:
            raise _error("a value contains itself (self-referential config)", source)
        if depth > MAX_NESTING:
            raise _error(f"nested too deeply (at most {MAX_NESTING} levels)", source)
        total = 1
        if isinstance(node, (yaml.SequenceNode, yaml.MappingNode)):
            on_path.add(key)
            items = node.value if isinstance(node, yaml.SequenceNode) else [v for pair in node.value for v in pair]
            for child in items:
                total += size(child, depth + 1)
                if total > MAX_NODES:
                    raise _error(f"too many values once YAML aliases are expanded (more than {MAX_NODES})", source)
            on_path.discard(key)
        sizes[key] = total
        return total

    size(root, 1)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return " ".join(text[0].split()) if text else type(exc).__name__


def _make_loader() -> type:
    import yaml

    class BoundedLoader(yaml.SafeLoader):
        """SafeLoader that refuses duplicate mapping keys (YAML itself says keys are unique)."""

        def construct_mapping(self, node, deep=False):  # noqa: ANN001
            if isinstance(node, yaml.MappingNode):
                self.flatten_mapping(node)
                seen = set()
                for key_node, _ in node.value:
                    key = self.construct_object(key_node, deep=True)
                    try:
                        duplicate = key in seen
                    except TypeError:
                        raise yaml.constructor.ConstructorError(
                            None, None, "mapping keys must be plain values", key_node.start_mark
                        ) from None
                    if duplicate:
                        raise _DuplicateKey(key)
                    seen.add(key)
            return super().construct_mapping(node, deep=deep)

    return BoundedLoader


class _LazyLoader:
    """Builds the loader class on first use, so importing this module never imports yaml."""

    _cls: type | None = None

    def __call__(self, text: str) -> Any:
        if _LazyLoader._cls is None:
            _LazyLoader._cls = _make_loader()
        return _LazyLoader._cls(text)


_BoundedLoader = _LazyLoader()
