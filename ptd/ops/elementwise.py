"""Comparisons, dtype/device casts, fills and batch-shape operations.

Written once, on top of the primitives of :class:`ptd.containers.base.TensorDictBase` (``apply``,
``_index``, the leaf strategy...), which binds them as methods. Out-of-place results are in-memory
:class:`ptd.TensorDict`; in-place methods write through (to the file, for a
PersistentTensorDict).
"""

from __future__ import annotations

import builtins
import numbers
import operator
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from ptd.errors import PtdKeyError
from ptd.ops.attrs import is_attrs, to_attrs
from ptd.ops.keys import unravel_key
from ptd.ops.lastop import last_op, user_stacklevel
from ptd.ops.nontensor import NonTensorData
from ptd.ops.root import is_tensordict

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["parse_to"]


def _compare(
    td: TensorDictBase, other: Any, op: Callable[[Any, Any], Any], default: builtins.bool = False
) -> TensorDictBase | builtins.bool:
    """Leaf-wise comparison, as tensordict's: ``other`` is a tensordict or a dict with the
    same keys (KeyError otherwise), a tensor (aligned with the batch dims of each leaf, its
    shape broadcast with the batch size) or a number. Any other ``other`` (None, a str...)
    gives ``default`` (False for ``==``, True for ``!=``), with a FutureWarning for the
    ordering comparisons. Non-tensor entries give a bool tensor of the batch shape.

    >>> import torch
    >>> from ptd import TensorDict
    >>> td = TensorDict({"a": torch.tensor([1.0, 2.0])}, batch_size=[2])
    >>> (td == {"a": torch.tensor([1.0, 0.0])})["a"]
    tensor([ True, False])
    >>> td == "z", td != None
    (False, True)
    """
    if isinstance(other, torch.Tensor) and other.ndim:
        shape = torch.broadcast_shapes(tuple(td.batch_size), tuple(other.shape))
        me = (
            td
            if shape == tuple(td.batch_size)
            else _detached_copy(
                td,
            ).expand(shape)
        )
        wide = other.expand(shape)
        return cast(
            "TensorDictBase | builtins.bool", me.apply(lambda t: op(t, _expand_right(wide, t)))
        )
    if is_tensordict(other) and other.ndim and other.batch_size != td.batch_size:
        shape = torch.broadcast_shapes(tuple(td.batch_size), tuple(other.batch_size))
        me = (
            td
            if shape == tuple(td.batch_size)
            else _detached_copy(
                td,
            ).expand(shape)
        )
        them = (
            other
            if shape == tuple(other.batch_size)
            else _detached_copy(
                other,
            ).expand(shape)
        )
        return _compare(me, them, op, default)
    if isinstance(other, Mapping) and not is_tensordict(other):
        other = td._new_tensordict(dict(other), batch_size=[])
    if is_tensordict(other):
        mine, theirs = set(td._keys_str()), set(other._keys_str())
        if mine != theirs:
            raise PtdKeyError(
                f"keys in {td._location()} and the other tensordict mismatch, got "
                f"{sorted(mine)} and {sorted(theirs)}"
            )
    elif not isinstance(other, (numbers.Number, torch.Tensor, np.ndarray, np.generic)):
        if op not in (operator.eq, operator.ne):
            warnings.warn(
                f"Comparing a tensordict with an object of type {type(other).__name__} gives "
                f"{default}. Starting with TensorDict 0.17, this will raise a TypeError.",
                FutureWarning,
                stacklevel=user_stacklevel(),
            )
        return default
    out = td._new_tensordict({}, batch_size=td.batch_size, device=td.device)
    for key in td._keys_str():
        value = td._get_str(key)
        operand = other._get_str(key) if is_tensordict(other) else other
        if is_tensordict(value):
            out._set_str(key, _compare(value, operand, op, default), inplace=False)
        elif isinstance(value, torch.Tensor):
            out._set_str(key, op(value, operand), inplace=False)
        else:
            if isinstance(operand, NonTensorData):
                operand = operand.data
            data = value.data if isinstance(value, NonTensorData) else value
            eq = data == operand
            flag = builtins.bool(eq) if op is operator.eq else not builtins.bool(eq)
            out._set_str(key, torch.full(tuple(td.batch_size), flag), inplace=False)
    return out


def _detached_copy(td: TensorDictBase) -> TensorDictBase:
    """An in-memory copy when this is file-backed (shape ops need one), else self."""
    return td._detached(td)


def eq(td: TensorDictBase, other: object) -> TensorDictBase | builtins.bool:
    return _compare(td, other, operator.eq, False)


def ne(td: TensorDictBase, other: object) -> TensorDictBase | builtins.bool:
    return _compare(td, other, operator.ne, True)


def lt(td: TensorDictBase, other: Any) -> TensorDictBase | builtins.bool:
    return _compare(td, other, operator.lt, False)


def le(td: TensorDictBase, other: Any) -> TensorDictBase | builtins.bool:
    return _compare(td, other, operator.le, False)


def gt(td: TensorDictBase, other: Any) -> TensorDictBase | builtins.bool:
    return _compare(td, other, operator.gt, False)


def ge(td: TensorDictBase, other: Any) -> TensorDictBase | builtins.bool:
    return _compare(td, other, operator.ge, False)


# --- dtype / device --------------------------------------------------------------------
@last_op()
def to(td: TensorDictBase, *args: Any, **kwargs: Any) -> TensorDictBase:
    """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``, keywords, or
    ``to(attrs)`` with the result of :meth:`attrs` (a cast leaf by leaf)."""
    if len(args) == 1 and not kwargs and is_attrs(args[0]):
        return to_attrs(td, args[0])
    device, dtype = parse_to(args, kwargs)
    out = td
    if dtype is not None:
        out = out.apply(lambda t: t.to(dtype))
    if device is not None:
        out = out._to_device(device)
    return out


def _to_device(td: TensorDictBase, device: torch.device) -> TensorDictBase:
    return cast("TensorDictBase", td.apply(lambda t: t.to(device), device=device))


def float(td: TensorDictBase) -> TensorDictBase:
    return td.to(torch.float32)


def double(td: TensorDictBase) -> TensorDictBase:
    return td.to(torch.float64)


def half(td: TensorDictBase) -> TensorDictBase:
    return td.to(torch.float16)


def bfloat16(td: TensorDictBase) -> TensorDictBase:
    return td.to(torch.bfloat16)


def int(td: TensorDictBase) -> TensorDictBase:
    return td.to(torch.int32)


def bool(td: TensorDictBase) -> TensorDictBase:
    return td.to(torch.bool)


def cpu(td: TensorDictBase) -> TensorDictBase:
    return td.to("cpu")


def detach(td: TensorDictBase) -> TensorDictBase:
    return cast("TensorDictBase", td.apply(lambda t: t.detach()))


def contiguous(td: TensorDictBase) -> TensorDictBase:
    return cast("TensorDictBase", td.apply(lambda t: t.contiguous()))


# --- in place --------------------------------------------------------------------------
def zero_(td: TensorDictBase) -> TensorDictBase:
    return td._leaves.map_inplace(td, lambda t, o: torch.zeros_like(t))


def fill_(td: TensorDictBase, key: Any, value: builtins.float | builtins.bool) -> TensorDictBase:
    """Fill the entry ``key`` (every leaf, for a nested entry) with ``value``."""

    parts = unravel_key(key)
    target = td._get_strict(parts)
    if is_tensordict(target):
        target._leaves.map_inplace(target, lambda t, o: torch.full_like(t, value))
    elif isinstance(target, torch.Tensor):
        td.set_(parts, torch.full_like(target, value))
    return td


def masked_fill_(
    td: TensorDictBase, mask: torch.Tensor, value: builtins.float | builtins.bool
) -> TensorDictBase:
    def fill(t: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
        m = m.reshape(tuple(m.shape) + (1,) * (t.ndim - m.ndim))
        return t.masked_fill(m, value)

    return td._leaves.map_inplace(td, fill, mask)


def copy_(
    td: TensorDictBase, other: TensorDictBase, non_blocking: builtins.bool = False
) -> TensorDictBase:
    return cast("TensorDictBase", td.update_(other))


def _expand_right(other: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    """``other`` (batch-shaped) with trailing dims of size 1 added to match ``leaf``."""
    return other.reshape(tuple(other.shape) + (1,) * (leaf.ndim - other.ndim))


def parse_to(
    args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[torch.device | None, torch.dtype | None]:
    """The device and dtype a ``to(*args, **kwargs)`` call asks for (either may be None)."""
    device = kwargs.get("device")
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, torch.Tensor):
            device, dtype = a.device, a.dtype
        elif a is not None:
            device = a
    return (torch.device(device) if device is not None else None), dtype
