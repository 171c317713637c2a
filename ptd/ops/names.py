"""Dim names, written once for every tensordict (bound as methods of :class:`~ptd.containers.base.TensorDictBase`).

tensordict 0.15's rules: ``names`` is settable (None, or one str/None per batch dim, unique;
ValueError otherwise), nested tensordicts carry the parent's names for the dims they share,
indexing maps names through the index, ``refine_names`` names unnamed dims in place,
``rename`` returns a shallow copy with new names, ``rename_`` renames in place.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(3, 4)}, batch_size=[3, 4], names=["t", None])
>>> td[:, 0].names, td.refine_names(..., "x").names, td.rename(t="time").names
(['t'], ['t', 'x'], ['time', 'x'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ptd.errors import PtdValueError, UnsupportedOperationError
from ptd.ops import locking as locking_ops

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase


__all__: list[str] = []


def names(td: TensorDictBase) -> list[str | None]:
    """The names of the batch dims (None for an unnamed dim)."""
    names = td._names
    return list(names) if names is not None else [None] * td.ndim


def set_names(td: TensorDictBase, value: Sequence[str | None] | None) -> None:
    td._set_names(check_names(td, value))


def check_names(td: TensorDictBase, value: Sequence[str | None] | None) -> list[str | None] | None:
    if value is None:
        return None
    names = list(value)
    if len(names) != td.ndim:
        raise PtdValueError(
            "the length of the dimension names must equate the tensordict batch_dims "
            f"attribute. Got {names} for batch_dims {td.ndim}."
        )
    named = [n for n in names if n is not None]
    if len(set(named)) != len(named):
        raise PtdValueError(f"Some dimension names are non-unique: {names}.")
    return None if not named else names


def _set_names(td: TensorDictBase, names: list[str | None] | None) -> None:
    """Store validated names (None: no names) on this tensordict and its nested ones."""
    td._names = names
    for sub in locking_ops.nested_containers(
        td,
    ):
        extra = sub.ndim - td.ndim
        sub._set_names(None if names is None else names + [None] * extra)


def refine_names(td: TensorDictBase, *names: Any) -> Any:
    """Name the unnamed batch dims, in place, as :meth:`torch.Tensor.refine_names` does:
    ``...`` stands for the dims not listed, None keeps a dim's name, and a dim already
    named differently raises RuntimeError. Returns ``self``."""
    given = list(names)
    if any(n is Ellipsis for n in given):
        pos = given.index(Ellipsis)
        fill = td.ndim - (len(given) - 1)
        given[pos : pos + 1] = td.names[pos : pos + fill] if fill > 0 else []
    if len(given) != td.ndim:
        raise PtdValueError(
            f"refine_names got {len(given)} names for {td.ndim} batch dims: {list(names)}"
        )
    current = td.names
    new: list[str | None] = []
    for old, want in zip(current, given, strict=True):
        if old is not None and want is not None and old != want:
            raise UnsupportedOperationError(
                f"refine_names: cannot coerce TensorDict names {current} with {given}."
            )
        new.append(old if want is None else want)
    td.names = new
    return td


def renamed(
    td: TensorDictBase, names: tuple[Any, ...], rename_map: dict[str, str]
) -> list[Any] | None:
    if names and rename_map:
        raise PtdValueError("Passed both a name map and a name list. Only one is accepted.")
    if names:
        if len(names) == 1 and names[0] is None:
            return None
        return list(names)
    current = td.names
    missing = [k for k in rename_map if k not in current]
    if missing:
        raise PtdValueError(f"Some names to be renamed were not part of the names: {missing}")
    return [rename_map.get(n, n) if n is not None else None for n in current]


def rename(td: TensorDictBase, *names: Any, **rename_map: str) -> Any:
    """A shallow copy with new dim names: all of them (``rename("t", None)``; ``rename(None)``
    drops them) or some, by keyword (``rename(t="time")``)."""
    out = td.clone(recurse=False)
    out.names = renamed(td, names, rename_map)
    return out


def rename_(td: TensorDictBase, *names: Any, **rename_map: str) -> Any:
    """:meth:`rename` in place; returns ``self``."""
    td.names = renamed(td, names, rename_map)
    return td
