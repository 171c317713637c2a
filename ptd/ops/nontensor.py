"""Non-tensor entries: one value for a whole batch, or one value per row.

>>> from ptd import NonTensorData, NonTensorStack
>>> d = NonTensorData("hello", batch_size=[3])
>>> d[1].data, d.batch_size
('hello', torch.Size([3]))
>>> s = NonTensorStack("a", "b", "c")
>>> s[1:].tolist(), s.batch_size
(['b', 'c'], torch.Size([3]))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ptd.errors import PtdIndexError
from ptd.ops.batch import as_batch_size

__all__ = ["NonTensorData", "NonTensorStack", "is_non_tensor"]


def _nested_index(values: Any, shape: tuple[int, ...], index: Any) -> tuple[Any, tuple[int, ...]]:
    """Index a nested list of ``shape`` like a tensor would be indexed (via an index grid)."""
    grid = torch.arange(int(np.prod(shape)) if shape else 1).reshape(shape)
    try:
        picked = grid[index]
    except IndexError as err:
        raise PtdIndexError(str(err)) from None
    flat = _flatten(values, len(shape))
    if picked.ndim == 0:
        return flat[int(picked)], ()
    return _unflatten([flat[int(i)] for i in picked.reshape(-1)], tuple(picked.shape)), tuple(
        picked.shape
    )


def _flatten(values: Any, ndim: int) -> list[Any]:
    if ndim == 0:
        return [values]
    if ndim == 1:
        return list(values)
    return [x for v in values for x in _flatten(v, ndim - 1)]


def _unflatten(flat: list[Any], shape: tuple[int, ...]) -> Any:
    if len(shape) <= 1:
        return list(flat)
    step = len(flat) // shape[0] if shape[0] else 0
    return [_unflatten(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


class NonTensorData:
    """One non-tensor value (str, bytes, number, None, list, dict...) shared by a whole batch."""

    #: the class marker tensordict reads (``tensordict.is_non_tensor``, ``_is_leaf_nontensor``)
    _is_non_tensor = True

    def __init__(
        self, data: Any, batch_size: Sequence[int] | None = None, device: Any = None
    ) -> None:
        if isinstance(data, NonTensorData):
            data = data.data
        self.data: Any = data
        self.batch_size = as_batch_size(batch_size)
        self.device = device

    def __getitem__(self, index: Any) -> NonTensorData:
        shape = tuple(torch.empty(self.batch_size, device="meta")[index].shape)
        return NonTensorData(self.data, shape, self.device)

    def tolist(self) -> Any:
        if not self.batch_size:
            return self.data
        out: Any = self.data
        for n in reversed(self.batch_size):
            out = [out] * n
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensorData):
            return bool(_values_equal(self.data, other.data))
        return bool(_values_equal(self.data, other))

    def __hash__(self) -> int:  # pragma: no cover - mutable container semantics
        return id(self)

    def __repr__(self) -> str:
        return f"NonTensorData(data={self.data!r}, batch_size={list(self.batch_size)})"


class NonTensorStack:
    """One non-tensor value per row of the batch (the leading dims of ``batch_size``).

    Build it from values (``NonTensorStack("a", "b")``) or from a nested list with
    :meth:`from_list`.
    """

    _is_non_tensor = True

    def __init__(self, *values: Any, batch_size: Sequence[int] | None = None) -> None:
        vals = [v.data if isinstance(v, NonTensorData) else v for v in values]
        self._values: Any = vals
        self.batch_size = (
            as_batch_size(batch_size) if batch_size is not None else torch.Size([len(vals)])
        )
        if batch_size is not None and len(self.batch_size) == 1 and self.batch_size[0] != len(vals):
            raise PtdIndexError(
                f"NonTensorStack of {len(vals)} values cannot have batch_size {list(self.batch_size)}"
            )

    @classmethod
    def from_list(cls, values: Any, batch_size: Sequence[int] | None = None) -> NonTensorStack:
        """A stack from a (nested) list; ``batch_size`` defaults to the nesting's shape."""
        shape = tuple(as_batch_size(batch_size)) if batch_size is not None else _list_shape(values)
        out = cls.__new__(cls)
        out._values = values
        out.batch_size = torch.Size(shape)
        return out

    def tolist(self) -> Any:
        return self._values

    @property
    def data(self) -> Any:
        return self._values

    def __len__(self) -> int:
        return self.batch_size[0] if self.batch_size else 0

    def __getitem__(self, index: Any) -> NonTensorData | NonTensorStack:
        value, shape = _nested_index(self._values, tuple(self.batch_size), index)
        if not shape and len(self.batch_size) >= 1 and not isinstance(value, list):
            return NonTensorData(value, ())
        if not shape:
            return NonTensorData(value, ())
        return NonTensorStack.from_list(value, shape)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NonTensorStack):
            return self.batch_size == other.batch_size and bool(
                _values_equal(self._values, other._values)
            )
        return bool(_values_equal(self._values, other))

    def __hash__(self) -> int:  # pragma: no cover
        return id(self)

    def common_type(self) -> str | None:
        """The type name shared by every element, or None when they differ."""
        flat = _flatten(self._values, len(self.batch_size))
        names = {type(v).__name__ for v in flat}
        return names.pop() if len(names) == 1 else None

    def __repr__(self) -> str:
        return f"NonTensorStack({self._values!r}, batch_size={list(self.batch_size)})"


def _list_shape(values: Any) -> tuple[int, ...]:
    shape = []
    v = values
    while isinstance(v, list):
        shape.append(len(v))
        if not v:
            break
        v = v[0]
    return tuple(shape)


def _values_equal(a: Any, b: Any) -> bool:
    try:
        eq = a == b
        if isinstance(eq, np.ndarray):
            return bool(eq.all())
        return bool(eq)
    except Exception:  # noqa: BLE001 - comparing arbitrary user values may raise anything
        return False


def is_non_tensor(value: Any) -> bool:
    """Whether ``value`` is a :class:`NonTensorData` or a :class:`NonTensorStack`."""
    return isinstance(value, (NonTensorData, NonTensorStack))
