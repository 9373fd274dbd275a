"""``FrozenDict``: the read-only mapping that resolved configs hold."""

from __future__ import annotations

from typing import Any


class FrozenDict(dict):
    """A read-only dict (picklable, unlike ``MappingProxyType``) for mapping-valued fields."""

    def _read_only(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("this mapping is read-only (resolved configs are immutable)")

    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = _read_only  # type: ignore[assignment]
    __ior__ = _read_only  # type: ignore[assignment]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenDict, (dict(self),))
