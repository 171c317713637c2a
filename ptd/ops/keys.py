"""Keys: nested keys as tuples of str, and the view ``keys()`` returns.

>>> unravel_key(("a", ("b", "c")))
('a', 'b', 'c')
>>> "a" in KeysView(["a", ("n", "b")]), ("n", "b") in KeysView(["a", ("n", "b")])
(True, True)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ptd.errors import InvalidKeyError

__all__ = ["KeysView", "NestedKey", "out_key", "unravel_key"]

NestedKey = str | tuple[str, ...]


def unravel_key(key: Any) -> tuple[str, ...]:
    """``"a"`` -> ``("a",)``; ``("a", ("b", "c"))`` -> ``("a", "b", "c")``."""
    if isinstance(key, str):
        return (key,)
    if isinstance(key, tuple):
        out: list[str] = []
        for k in key:
            out.extend(unravel_key(k))
        return tuple(out)
    raise InvalidKeyError(
        f"key must be a NestedKey (a str or a possibly nested tuple of str), got {key!r}"
    )


def out_key(parts: tuple[str, ...]) -> NestedKey:
    """The key as tensordict returns it: a str for one part, else the tuple."""
    return parts[0] if len(parts) == 1 else parts


class KeysView:
    """The result of ``keys()``: iterable, sized, and answers ``in`` for str and tuple keys."""

    def __init__(self, keys: list[NestedKey]) -> None:
        self._keys = keys

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        try:
            parts = unravel_key(key)
        except InvalidKeyError:
            return False
        return out_key(parts) in self._keys

    def __repr__(self) -> str:
        return f"_KeysView({self._keys!r})"
