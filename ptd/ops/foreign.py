"""Values made by tensordict (or any library following its conventions), taken as ptd's own.

ptd never imports tensordict, so its objects are recognised by the markers tensordict puts on
its classes: a non-tensor class has ``_is_non_tensor = True``; a tensordict is a mapping with a
``torch.Size`` ``batch_size``. :func:`adopt_non_tensor` turns a foreign ``NonTensorData`` or
``NonTensorStack`` into ptd's, :func:`foreign_batch_size` and :func:`foreign_names` read what a
tensordict says of its batch dims (a plain dict says nothing), and :data:`LEAF_PROBE` is
the class a user's ``is_leaf`` is asked about for a non-tensor entry.

>>> import torch
>>> class Foreign(dict):
...     batch_size = torch.Size([3])
>>> foreign_batch_size(Foreign(a=torch.zeros(3))), foreign_batch_size({"a": torch.zeros(3)})
(torch.Size([3]), None)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from ptd.ops.nontensor import NonTensorData, NonTensorStack

__all__ = ["LEAF_PROBE", "adopt_non_tensor", "foreign_batch_size", "foreign_names"]


class _NonTensorLeaf(NonTensorData):
    """ptd's :class:`NonTensorData` as tensordict's ``is_leaf`` functions see a non-tensor
    class: tensordict asks whether a class is one of its tensor collections
    (``_is_tensorclass``) before it asks whether it is a non-tensor (``_is_non_tensor``). Only
    ever passed to ``is_leaf`` callables; no value has this class, so tensordict never takes a
    ptd value for one of its tensorclasses."""

    _is_tensorclass = True


#: the class ``keys(leaves_only=True, is_leaf=f)`` hands ``f`` for a non-tensor entry: a
#: subclass of ptd's NonTensorData that tensordict's ``_is_leaf_nontensor`` also accepts
LEAF_PROBE: type = _NonTensorLeaf


def _is_foreign_non_tensor(value: Any) -> bool:
    cls = type(value)
    return bool(getattr(cls, "_is_non_tensor", False)) and not issubclass(
        cls, (NonTensorData, NonTensorStack)
    )


def adopt_non_tensor(value: Any, *, collapse: bool = False) -> Any:
    """``value`` as ptd's :class:`NonTensorData`/:class:`NonTensorStack` when it is another
    library's non-tensor; anything else unchanged.

    A foreign single value keeps its ``data``, batch size and device; a foreign stack (one
    with ``tensordicts``, one entry per row) its ``tolist()`` and batch size. With
    ``collapse`` (set when writing to a store), a stack whose elements all hold the same value
    (its ``data`` answers) becomes one :class:`NonTensorData`: tensordict stores such a stack
    as one value, so the file is the one tensordict writes.

    >>> import torch
    >>> class Foreign:
    ...     _is_non_tensor = True
    ...
    ...     def __init__(self, data):
    ...         self.data, self.batch_size = data, torch.Size([2])
    >>> adopt_non_tensor(Foreign("x"))
    NonTensorData(data='x', batch_size=[2])
    >>> adopt_non_tensor(3)
    3
    """
    if not _is_foreign_non_tensor(value):
        return value
    batch_size = getattr(value, "batch_size", None)
    device = getattr(value, "device", None)
    if hasattr(value, "tensordicts"):
        if collapse:
            try:
                data = value.data  # the one value every element holds
            except AttributeError:  # different values (tensordict's answer): keep them all
                pass
            else:
                return NonTensorData(adopt_non_tensor(data), batch_size, device)
        return NonTensorStack.from_list(value.tolist(), batch_size)
    if hasattr(value, "data"):
        return NonTensorData(adopt_non_tensor(value.data), batch_size, device)
    return value


def foreign_batch_size(value: Any) -> torch.Size | None:
    """The batch size of a tensordict of any library (a mapping whose ``batch_size`` is a
    ``torch.Size``), or None for anything else (a plain dict)."""
    if not isinstance(value, Mapping) or _is_foreign_non_tensor(value):
        return None
    bs = getattr(value, "batch_size", None)
    return bs if isinstance(bs, torch.Size) else None


def foreign_names(value: Any) -> list[str | None] | None:
    """The dim names of a tensordict of any library when at least one is set, else None."""
    if foreign_batch_size(value) is None:
        return None
    try:
        names = value.names
    except Exception:  # noqa: BLE001 - a library's own refusal (a lazy stack...): no names
        return None
    if not isinstance(names, (list, tuple)) or not any(isinstance(n, str) for n in names):
        return None
    return [n if isinstance(n, str) else None for n in names]
