"""The entries that describe a lazy view of a stored tensordict, and the new dims (``None`` in
an index) that a view can have without any stored dim behind them.

A view has one *entry* per group of stored batch dims, plus one per new dim:

* ``int`` -- the stored dim is fixed (the view has no dim for it);
* ``slice`` -- ``start/stop/step`` normalised, ``step > 0`` (one view dim);
* :class:`Points` -- one or more int arrays of equal length that jointly index consecutive
  stored dims, in the order the user asked, repeats allowed (one view dim);
* :class:`NewDim` -- a view dim of ``size`` copies of the same stored rows, backed by no stored
  dim: ``None`` in an index gives ``NewDim(1)``; indexing it again can give 0 copies (a slice
  past its end) or several (an index array of zeros).

A read goes through the entries without their new dims (:func:`stored_entries`) and then
puts the new dims in (:func:`unsqueeze_index`, then an expand where a new dim is not 1); a
write broadcasts the value to the view's shape and takes the last copy along each new dim
(:func:`drop_index`, numpy's rule for repeated targets) before writing the stored rows.

>>> entries = (NewDim(1), slice(0, 4, 1), 2)
>>> view_shape(entries), stored_ndim(entries), stored_entries(entries)
((1, 4), 2, (slice(0, 4, 1), 2))
>>> unsqueeze_index(entries), drop_index(entries)
((None, slice(None, None, None)), (-1, slice(None, None, None)))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

__all__ = [
    "Entry",
    "NewDim",
    "Points",
    "drop_index",
    "expand_new_dims",
    "full_entries",
    "has_new_dims",
    "stored_entries",
    "stored_ndim",
    "unsqueeze_index",
    "view_shape",
]


@dataclass(frozen=True, eq=False)
class Points:
    """Arrays that jointly index ``len(arrays)`` consecutive stored dims (one view dim)."""

    arrays: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __repr__(self) -> str:
        return f"Points(arrays={self.arrays!r})"


@dataclass(frozen=True)
class NewDim:
    """A view dim of ``size`` copies of the same stored rows, backed by no stored dim."""

    size: int = 1

    def __len__(self) -> int:
        return self.size


Entry = int | slice | Points | NewDim


def full_entries(shape: Sequence[int]) -> tuple[Entry, ...]:
    """The entries of a view that selects everything."""
    return tuple(slice(0, int(n), 1) for n in shape)


def _slice_len(s: slice) -> int:
    return len(range(s.start, s.stop, s.step))


def view_shape(entries: Sequence[Entry]) -> tuple[int, ...]:
    """The batch shape a view with these entries has."""
    out = []
    for e in entries:
        if isinstance(e, slice):
            out.append(_slice_len(e))
        elif isinstance(e, (Points, NewDim)):
            out.append(len(e))
    return tuple(out)


def stored_ndim(entries: Sequence[Entry]) -> int:
    """How many stored dims the entries cover (new dims cover none)."""
    return sum(
        len(e.arrays) if isinstance(e, Points) else 0 if isinstance(e, NewDim) else 1
        for e in entries
    )


def has_new_dims(entries: Sequence[Entry] | None) -> bool:
    """True when the view has a dim that no stored dim backs (``None`` in its index)."""
    if entries is not None:
        for e in entries:
            if type(e) is NewDim:
                return True
    return False


def stored_entries(entries: Sequence[Entry]) -> tuple[Entry, ...]:
    """The entries without their new dims: what is read from or written to the store."""
    return tuple(e for e in entries if not isinstance(e, NewDim))


def _view_entries(entries: Sequence[Entry]) -> list[Entry]:
    return [e for e in entries if not isinstance(e, int)]


def unsqueeze_index(entries: Sequence[Entry]) -> tuple[Any, ...]:
    """The index that puts the new dims (as size 1) into what the stored entries read."""
    return tuple(None if isinstance(e, NewDim) else slice(None) for e in _view_entries(entries))


def drop_index(entries: Sequence[Entry]) -> tuple[Any, ...]:
    """The index that takes a value of the view's shape to the stored entries' shape: the last
    copy along each new dim (numpy's rule when one target is written several times)."""
    return tuple(-1 if isinstance(e, NewDim) else slice(None) for e in _view_entries(entries))


def expand_new_dims(t: torch.Tensor, entries: Sequence[Entry]) -> torch.Tensor:
    """A tensor read through ``stored_entries(entries)`` with the view's new dims put in
    (a copy of the rows along a new dim of size > 1)."""
    out = t[unsqueeze_index(entries)]
    if all(e.size == 1 for e in entries if isinstance(e, NewDim)):
        return out
    vshape = view_shape(entries)
    return out.expand(vshape + tuple(out.shape[len(vshape) :])).clone()
