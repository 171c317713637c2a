"""Arithmetic, comparisons, in-place ops, reductions and batch-shape operations.

Written once, on top of the primitives of :class:`ptd.core.base.TensorDictBase` (``apply``,
``_map_inplace``, ``_index``...), and mixed into it. Out-of-place results are in-memory
:class:`ptd.TensorDict`; in-place methods write through (to the file, for a
PersistentTensorDict).
"""

from __future__ import annotations

import builtins
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.core.keys import unravel_key
from ptd.core.registry import is_tensordict, new_tensordict

if TYPE_CHECKING:
    from ptd.core.base import TensorDictBase
    from ptd.core.protocols import OpsHost

__all__ = ["OpsMixin", "ShapeMixin", "stack", "cat"]


class OpsMixin:
    """Elementwise math and in-place updates."""

    # --- out of place ----------------------------------------------------------------------
    def _binary(self: OpsHost, other: Any, op: Callable[[Any, Any], Any]) -> TensorDictBase:
        if is_tensordict(other):
            return self.apply(op, other)
        return self.apply(lambda t: op(t, other))

    def __add__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, operator.add)

    def __radd__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, lambda a, b: b + a)

    def __sub__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, operator.sub)

    def __rsub__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, lambda a, b: b - a)

    def __mul__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, operator.mul)

    def __rmul__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, lambda a, b: b * a)

    def __truediv__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, operator.truediv)

    def __rtruediv__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, lambda a, b: b / a)

    def __pow__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._binary(other, operator.pow)

    def __neg__(self: OpsHost) -> TensorDictBase:
        return self.apply(operator.neg)

    def __abs__(self: OpsHost) -> TensorDictBase:
        return self.apply(torch.abs)

    add = __add__
    sub = __sub__
    mul = __mul__
    div = __truediv__

    def _compare(self: OpsHost, other: Any, op: Callable[[Any, Any], Any]) -> TensorDictBase:
        """Elementwise comparison; non-tensor entries give a bool tensor of the batch shape."""

        out = new_tensordict({}, batch_size=self.batch_size, device=self.device)
        for key in self._keys_str():
            mine = self._get_str(key)
            theirs = other._get_str(key) if is_tensordict(other) else other
            if is_tensordict(mine):
                out._set_str(key, mine._compare(theirs, op), inplace=False)
            elif isinstance(mine, torch.Tensor):
                out._set_str(key, op(mine, theirs), inplace=False)
            else:
                eq = mine == theirs
                value = eq if op is operator.eq else not eq
                out._set_str(key, torch.full(tuple(self.batch_size), bool(value)), inplace=False)
        return out

    def __eq__(self: OpsHost, other: object) -> TensorDictBase:  # type: ignore[override]
        return self._compare(other, operator.eq)

    def __ne__(self: OpsHost, other: object) -> TensorDictBase:  # type: ignore[override]
        return self._compare(other, operator.ne)

    def __lt__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._compare(other, operator.lt)

    def __le__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._compare(other, operator.le)

    def __gt__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._compare(other, operator.gt)

    def __ge__(self: OpsHost, other: Any) -> TensorDictBase:
        return self._compare(other, operator.ge)

    __hash__ = None  # type: ignore[assignment]

    def all(self: OpsHost, dim: int | None = None) -> bool | TensorDictBase:
        """True when every element of every tensor leaf is true (``dim``: per batch dim)."""
        if dim is not None:
            return self.apply(lambda t: t.all(dim=dim), batch_size=_drop_dim(self.batch_size, dim))
        return all(bool(t.all()) for _, t in self._tensor_leaves())

    def any(self: OpsHost, dim: int | None = None) -> bool | TensorDictBase:
        if dim is not None:
            return self.apply(lambda t: t.any(dim=dim), batch_size=_drop_dim(self.batch_size, dim))
        return any(bool(t.any()) for _, t in self._tensor_leaves())

    def sum(self: OpsHost, dim: int | None = None) -> TensorDictBase:
        if dim is None:
            return self.apply(lambda t: t.sum(), batch_size=[])
        return self.apply(lambda t: t.sum(dim=dim), batch_size=_drop_dim(self.batch_size, dim))

    def mean(self: OpsHost, dim: int | None = None) -> TensorDictBase:
        if dim is None:
            return self.apply(
                lambda t: t.float().mean() if not t.is_floating_point() else t.mean(), batch_size=[]
            )
        return self.apply(lambda t: t.mean(dim=dim), batch_size=_drop_dim(self.batch_size, dim))

    # --- dtype / device --------------------------------------------------------------------
    def to(self: OpsHost, *args: Any, **kwargs: Any) -> TensorDictBase:
        """``to(device)``, ``to(dtype)``, ``to(device, dtype)``, ``to(tensor)``, or keywords."""
        device, dtype = _parse_to(args, kwargs)
        out = cast("TensorDictBase", self)  # a mixin's self is the TensorDictBase it is mixed into
        if dtype is not None:
            out = out.apply(lambda t: t.to(dtype))
        if device is not None:
            out = out._to_device(device)
        return out

    def _to_device(self: OpsHost, device: torch.device) -> TensorDictBase:
        return self.apply(lambda t: t.to(device), device=device)

    def float(self: OpsHost) -> TensorDictBase:
        return self.to(torch.float32)

    def double(self: OpsHost) -> TensorDictBase:
        return self.to(torch.float64)

    def half(self: OpsHost) -> TensorDictBase:
        return self.to(torch.float16)

    def bfloat16(self: OpsHost) -> TensorDictBase:
        return self.to(torch.bfloat16)

    def int(self: OpsHost) -> TensorDictBase:
        return self.to(torch.int32)

    def bool(self: OpsHost) -> TensorDictBase:
        return self.to(torch.bool)

    def cpu(self: OpsHost) -> TensorDictBase:
        return self.to("cpu")

    def detach(self: OpsHost) -> TensorDictBase:
        return self.apply(lambda t: t.detach())

    def contiguous(self: OpsHost) -> TensorDictBase:
        return self.apply(lambda t: t.contiguous())

    # --- in place --------------------------------------------------------------------------
    def add_(self: OpsHost, other: Any, *, alpha: builtins.float | None = None) -> TensorDictBase:
        return self._map_inplace(lambda t, o: t + (o if alpha is None else alpha * o), other)

    def sub_(self: OpsHost, other: Any, *, alpha: builtins.float | None = None) -> TensorDictBase:
        return self._map_inplace(lambda t, o: t - (o if alpha is None else alpha * o), other)

    def mul_(self: OpsHost, other: Any) -> TensorDictBase:
        return self._map_inplace(lambda t, o: t * o, other)

    def div_(self: OpsHost, other: Any) -> TensorDictBase:
        return self._map_inplace(lambda t, o: t / o, other)

    # mypy checks each __iX__ against __X__ bound to the bare mixin class, which is not an OpsHost
    # (its self type): the [misc] ignores below are for that check only
    def __iadd__(self: OpsHost, other: Any) -> TensorDictBase:  # type: ignore[misc]
        return self.add_(other)

    def __isub__(self: OpsHost, other: Any) -> TensorDictBase:  # type: ignore[misc]
        return self.sub_(other)

    def __imul__(self: OpsHost, other: Any) -> TensorDictBase:  # type: ignore[misc]
        return self.mul_(other)

    def __itruediv__(self: OpsHost, other: Any) -> TensorDictBase:  # type: ignore[misc]
        return self.div_(other)

    def zero_(self: OpsHost) -> TensorDictBase:
        return self._map_inplace(lambda t, o: torch.zeros_like(t))

    def fill_(self: OpsHost, key: Any, value: builtins.float | builtins.bool) -> TensorDictBase:
        """Fill the entry ``key`` (every leaf, for a nested entry) with ``value``."""

        parts = unravel_key(key)
        target = self.get(parts)
        if is_tensordict(target):
            target._map_inplace(lambda t, o: torch.full_like(t, value))
        elif isinstance(target, torch.Tensor):
            self.set_(parts, torch.full_like(target, value))
        return cast("TensorDictBase", self)  # a mixin's self is the TensorDictBase it is mixed into

    def clamp_(self: OpsHost, min: Any = None, max: Any = None) -> TensorDictBase:
        return self._map_inplace(lambda t, o: t.clamp(min=min, max=max))

    def clamp_max_(self: OpsHost, max: Any) -> TensorDictBase:
        return self._map_inplace(lambda t, o: t.clamp_max(max))

    def clamp_min_(self: OpsHost, min: Any) -> TensorDictBase:
        return self._map_inplace(lambda t, o: t.clamp_min(min))

    def masked_fill_(
        self: OpsHost, mask: torch.Tensor, value: builtins.float | builtins.bool
    ) -> TensorDictBase:
        def fill(t: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
            m = m.reshape(tuple(m.shape) + (1,) * (t.ndim - m.ndim))
            return t.masked_fill(m, value)

        return self._map_inplace(fill, mask)

    def copy_(
        self: OpsHost, other: TensorDictBase, non_blocking: builtins.bool = False
    ) -> TensorDictBase:
        return self.update_(other)


def _drop_dim(bs: torch.Size, dim: int) -> list[int]:
    dim = dim % len(bs) if bs else 0
    return [n for i, n in enumerate(bs) if i != dim]


def _parse_to(
    args: Sequence[Any], kwargs: dict[str, Any]
) -> tuple[torch.device | None, torch.dtype | None]:
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


# ------------------------------------------------------------------------------------------
# batch-shape operations live in ptd.core.shape, stack and cat in ptd.core.joining; imported
# here for the modules that know them from ptd.core.ops
# ------------------------------------------------------------------------------------------
from ptd.core.joining import cat, stack  # noqa: E402
from ptd.core.rows import flat_list as _flat_list  # noqa: E402, F401
from ptd.core.shape import ShapeMixin  # noqa: E402
