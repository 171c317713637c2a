"""Comparisons, dtype/device casts, fills and batch-shape operations.

Written once, on top of the primitives of :class:`ptd.core.base.TensorDictBase` (``apply``,
``_map_inplace``, ``_index``...), and mixed into it. Out-of-place results are in-memory
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

from ptd.core.keys import unravel_key
from ptd.core.lastop import last_op, user_stacklevel
from ptd.core.nontensor import NonTensorData, NonTensorStack
from ptd.core.registry import is_tensordict, new_tensordict
from ptd.errors import PtdIndexError, PtdKeyError, PtdValueError

if TYPE_CHECKING:
    from ptd.core.base import TensorDictBase
    from ptd.core.protocols import OpsHost, ShapeHost

__all__ = ["OpsMixin", "ShapeMixin", "stack", "cat"]


class OpsMixin:
    """Comparisons, casts and fills (elementwise math: :mod:`ptd.core.pointwise`; reductions:
    :mod:`ptd.core.reductions`)."""

    def _compare(
        self: OpsHost, other: Any, op: Callable[[Any, Any], Any], default: builtins.bool = False
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
            shape = torch.broadcast_shapes(tuple(self.batch_size), tuple(other.shape))
            me = self if shape == tuple(self.batch_size) else self._detached_copy().expand(shape)
            wide = other.expand(shape)
            return me.apply(lambda t: op(t, _expand_right(wide, t)))
        if is_tensordict(other) and other.ndim and other.batch_size != self.batch_size:
            shape = torch.broadcast_shapes(tuple(self.batch_size), tuple(other.batch_size))
            me = self if shape == tuple(self.batch_size) else self._detached_copy().expand(shape)
            them = (
                other if shape == tuple(other.batch_size) else other._detached_copy().expand(shape)
            )
            return me._compare(them, op, default)
        if isinstance(other, Mapping) and not is_tensordict(other):
            other = new_tensordict(dict(other), batch_size=[])
        if is_tensordict(other):
            mine, theirs = set(self._keys_str()), set(other._keys_str())
            if mine != theirs:
                raise PtdKeyError(
                    f"keys in {self._location()} and the other tensordict mismatch, got "
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
        out = new_tensordict({}, batch_size=self.batch_size, device=self.device)
        for key in self._keys_str():
            value = self._get_str(key)
            operand = other._get_str(key) if is_tensordict(other) else other
            if is_tensordict(value):
                out._set_str(key, value._compare(operand, op, default), inplace=False)
            elif isinstance(value, torch.Tensor):
                out._set_str(key, op(value, operand), inplace=False)
            else:
                if isinstance(operand, NonTensorData):
                    operand = operand.data
                data = value.data if isinstance(value, NonTensorData) else value
                eq = data == operand
                flag = builtins.bool(eq) if op is operator.eq else not builtins.bool(eq)
                out._set_str(key, torch.full(tuple(self.batch_size), flag), inplace=False)
        return out

    def _detached_copy(self: OpsHost) -> TensorDictBase:
        """An in-memory copy when this is file-backed (shape ops need one), else self."""
        return self._detached(cast("TensorDictBase", self))

    def __eq__(self: OpsHost, other: object) -> TensorDictBase | builtins.bool:  # type: ignore[override]
        return self._compare(other, operator.eq, False)

    def __ne__(self: OpsHost, other: object) -> TensorDictBase | builtins.bool:  # type: ignore[override]
        return self._compare(other, operator.ne, True)

    def __lt__(self: OpsHost, other: Any) -> TensorDictBase | builtins.bool:
        return self._compare(other, operator.lt, False)

    def __le__(self: OpsHost, other: Any) -> TensorDictBase | builtins.bool:
        return self._compare(other, operator.le, False)

    def __gt__(self: OpsHost, other: Any) -> TensorDictBase | builtins.bool:
        return self._compare(other, operator.gt, False)

    def __ge__(self: OpsHost, other: Any) -> TensorDictBase | builtins.bool:
        return self._compare(other, operator.ge, False)

    __hash__ = None  # type: ignore[assignment]

    # --- dtype / device --------------------------------------------------------------------
    @last_op()
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
    def zero_(self: OpsHost) -> TensorDictBase:
        return self._map_inplace(lambda t, o: torch.zeros_like(t))

    def fill_(self: OpsHost, key: Any, value: builtins.float | builtins.bool) -> TensorDictBase:
        """Fill the entry ``key`` (every leaf, for a nested entry) with ``value``."""

        parts = unravel_key(key)
        target = self._get_strict(parts)
        if is_tensordict(target):
            target._map_inplace(lambda t, o: torch.full_like(t, value))
        elif isinstance(target, torch.Tensor):
            self.set_(parts, torch.full_like(target, value))
        return cast("TensorDictBase", self)  # a mixin's self is the TensorDictBase it is mixed into

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


def _expand_right(other: torch.Tensor, leaf: torch.Tensor) -> torch.Tensor:
    """``other`` (batch-shaped) with trailing dims of size 1 added to match ``leaf``."""
    return other.reshape(tuple(other.shape) + (1,) * (leaf.ndim - other.ndim))


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
# batch-shape operations
# ------------------------------------------------------------------------------------------
def _non_tensor_grid_map(
    value: Any, batch: torch.Size, fn: Callable[[torch.Tensor], torch.Tensor]
) -> Any:
    """Apply a batch-shape op to a non-tensor entry through an index grid."""
    grid = torch.arange(max(1, int(np.prod(batch))) if len(batch) else 1).reshape(batch)
    new = fn(grid)
    if isinstance(value, NonTensorData):
        return NonTensorData(value.data, new.shape, value.device)
    flat = np.empty(int(np.prod(batch)), dtype=object)
    flat[:] = _flat_list(value.tolist(), len(batch))
    picked = (
        flat[new.reshape(-1).numpy()].reshape(tuple(new.shape))
        if new.numel()
        else np.empty(tuple(new.shape), dtype=object)
    )
    return NonTensorStack.from_list(picked.tolist(), new.shape)


def _flat_list(values: Any, ndim: int) -> list[Any]:
    if ndim <= 1:
        return list(values) if ndim == 1 else [values]
    return [x for v in values for x in _flat_list(v, ndim - 1)]


class ShapeMixin:
    """Operations on the batch dims. In-memory results; file-backed classes override the
    ones they refuse."""

    def _batch_map(self: ShapeHost, fn: Callable[[torch.Tensor], torch.Tensor]) -> TensorDictBase:
        """A new TensorDict whose leaves are ``fn(leaf)``; ``fn`` acts on the leading
        ``self.ndim`` dims and keeps the rest."""

        new_bs = fn(torch.empty(tuple(self.batch_size), device="meta")).shape
        out = new_tensordict({}, batch_size=new_bs, device=self.device)
        for key in self._keys_str():
            value = self._get_str(key)
            if is_tensordict(value):
                value = value._batch_map(fn)
            elif isinstance(value, torch.Tensor):
                value = fn(value)
            else:
                value = _non_tensor_grid_map(
                    value,
                    value.batch_size[: self.ndim]
                    if isinstance(value, NonTensorStack)
                    else self.batch_size,
                    fn,
                )
            out._set_str(key, value, inplace=False)
        return out

    def _dim(self: ShapeHost, dim: int, extra: int = 0) -> int:
        n = self.ndim + extra
        if not -n <= dim < n:
            raise PtdIndexError(
                f"dim {dim} is out of range for a tensordict with {self.ndim} batch dims"
            )
        return dim % n if n else 0

    def reshape(self: ShapeHost, *shape: Any) -> TensorDictBase:
        new = _shape_arg(shape)
        nb = self.ndim
        target = torch.empty(tuple(self.batch_size), device="meta").reshape(new).shape
        return self._batch_map(lambda t: t.reshape(tuple(target) + tuple(t.shape[nb:])))

    @last_op()
    def view(self: ShapeHost, *shape: Any) -> TensorDictBase:
        new = _shape_arg(shape)
        nb = self.ndim
        target = torch.empty(tuple(self.batch_size), device="meta").view(new).shape
        return self._batch_map(lambda t: t.view(tuple(target) + tuple(t.shape[nb:])))

    @last_op()
    def flatten(self: ShapeHost, start_dim: int = 0, end_dim: int = -1) -> TensorDictBase:
        s, e = self._dim(start_dim), self._dim(end_dim)
        return self._batch_map(lambda t: t.flatten(s, e))

    @last_op()
    def unflatten(self: ShapeHost, dim: int, sizes: Sequence[int]) -> TensorDictBase:
        d = self._dim(dim)
        return self._batch_map(lambda t: t.unflatten(d, sizes))

    @last_op()
    def unsqueeze(self: ShapeHost, dim: int) -> TensorDictBase:
        d = self._dim(dim, extra=1)
        return self._batch_map(lambda t: t.unsqueeze(d))

    @last_op()
    def squeeze(self: ShapeHost, dim: int | None = None) -> TensorDictBase:
        if dim is None:
            dims = [i for i, n in enumerate(self.batch_size) if n == 1]
            return self._batch_map(lambda t: t.squeeze(dims) if dims else t)
        d = self._dim(dim)
        return self._batch_map(lambda t: t.squeeze(d))

    @last_op()
    def permute(self: ShapeHost, *dims: Any) -> TensorDictBase:
        order = [self._dim(d) for d in _shape_arg(dims)]
        if sorted(order) != list(range(self.ndim)):
            raise PtdValueError(
                f"permute needs a permutation of the {self.ndim} batch dims, got {list(dims)}"
            )
        nb = self.ndim
        return self._batch_map(lambda t: t.permute(*order, *range(nb, t.ndim)))

    @last_op()
    def transpose(self: ShapeHost, dim0: int, dim1: int) -> TensorDictBase:
        a, b = self._dim(dim0), self._dim(dim1)
        return self._batch_map(lambda t: t.transpose(a, b))

    def expand(self: ShapeHost, *shape: Any) -> TensorDictBase:
        new = tuple(_shape_arg(shape))
        nb = self.ndim
        return self._batch_map(lambda t: t.expand(new + tuple(t.shape[nb:])))

    def unbind(self: ShapeHost, dim: int = 0) -> tuple[TensorDictBase, ...]:
        d = self._dim(dim)
        pre = (slice(None),) * d
        return tuple(self._detached(self._index(pre + (i,))) for i in range(self.batch_size[d]))

    def split(
        self: ShapeHost, split_size: int | Sequence[int], dim: int = 0
    ) -> tuple[TensorDictBase, ...]:
        d = self._dim(dim)
        n = self.batch_size[d]
        sizes = (
            [split_size] * (n // split_size) + ([n % split_size] if n % split_size else [])
            if isinstance(split_size, int)
            else list(split_size)
        )
        if sum(sizes) != n:
            raise PtdValueError(f"split sizes {sizes} do not add up to dim {d} of size {n}")
        pre = (slice(None),) * d
        out, start = [], 0
        for s in sizes:
            out.append(self._detached(self._index(pre + (slice(start, start + s),))))
            start += s
        return tuple(out)

    def chunk(self: ShapeHost, chunks: int, dim: int = 0) -> tuple[TensorDictBase, ...]:
        d = self._dim(dim)
        n = self.batch_size[d]
        size = -(-n // chunks) if n else 1
        return self.split(size, d)

    @classmethod
    def __torch_function__(
        cls, func: Any, types: Any, args: Sequence[Any] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.stack:
            return stack(*args, **kwargs)
        if func is torch.cat or func is torch.concat or func is torch.concatenate:
            return cat(*args, **kwargs)
        if func is torch.unbind:
            return args[0].unbind(*args[1:], **kwargs)
        if func is torch.split:
            return args[0].split(*args[1:], **kwargs)
        if func is torch.chunk:
            return args[0].chunk(*args[1:], **kwargs)
        return NotImplemented


def _shape_arg(shape: Sequence[Any]) -> list[int]:
    if len(shape) == 1 and isinstance(shape[0], (list, tuple, torch.Size)):
        return list(shape[0])
    return [int(s) for s in shape]


def _combine(values: Sequence[Any], batch: torch.Size, joiner: Callable[[list[Any]], Any]) -> Any:
    """Stack/cat a list of entries of the same key."""

    first = values[0]
    if isinstance(first, torch.Tensor):
        return joiner(list(values))
    if is_tensordict(first):
        return None  # handled by the caller
    if all(isinstance(v, NonTensorData) for v in values) and all(v == first for v in values):
        return NonTensorData(first.data, batch)
    grids = []
    for v in values:
        arr = np.empty(tuple(v.batch_size), dtype=object)
        if isinstance(v, NonTensorData):
            arr.fill(v.data) if arr.ndim else None
        else:
            arr.reshape(-1)[:] = _flat_list(v.tolist(), len(v.batch_size))
        grids.append(arr)
    joined = joiner(
        [
            torch.arange(g.size).reshape(g.shape) + off
            for g, off in zip(grids, np.cumsum([0] + [g.size for g in grids[:-1]]), strict=True)
        ]
    )
    flat = np.concatenate([g.reshape(-1) for g in grids])
    return NonTensorStack.from_list(
        flat[joined.reshape(-1).numpy()].reshape(tuple(joined.shape)).tolist(), joined.shape
    )


def _join(
    tds: Sequence[TensorDictBase], dim: int, new_bs: torch.Size, joiner: Callable[[list[Any]], Any]
) -> TensorDictBase:

    out = new_tensordict({}, batch_size=new_bs, device=tds[0].device)
    keys = tds[0]._keys_str()
    for td in tds[1:]:
        if set(td._keys_str()) != set(keys):
            raise PtdValueError(
                f"cannot stack/cat tensordicts with different keys: {sorted(keys)} vs {sorted(td._keys_str())}"
            )
    for key in keys:
        values = [td._get_str(key) for td in tds]
        if is_tensordict(values[0]):
            extra = values[0].batch_size[tds[0].ndim :]
            value = _join(values, dim, torch.Size(list(new_bs) + list(extra)), joiner)
        else:
            value = _combine(values, new_bs, joiner)
        out._set_str(key, value, inplace=False)
    return out


def stack(tds: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None) -> TensorDictBase:
    """Stack tensordicts of the same batch size along a new batch dim ``dim``."""
    tds = list(tds)
    if not tds:
        raise PtdValueError("cannot stack an empty list of tensordicts")
    bs = tds[0].batch_size
    if any(td.batch_size != bs for td in tds):
        raise PtdValueError(
            f"cannot stack tensordicts of different batch sizes: {[list(t.batch_size) for t in tds]}"
        )
    n = len(bs) + 1
    if not -n <= dim < n:
        raise PtdIndexError(f"dim {dim} is out of range for stacking {len(bs)}-d tensordicts")
    dim %= n
    new_bs = torch.Size(list(bs[:dim]) + [len(tds)] + list(bs[dim:]))
    return _join(tds, dim, new_bs, lambda xs: torch.stack(xs, dim))


def cat(tds: Sequence[TensorDictBase], dim: int = 0, *, out: Any = None) -> TensorDictBase:
    """Concatenate tensordicts along the existing batch dim ``dim``."""
    tds = list(tds)
    if not tds:
        raise PtdValueError("cannot concatenate an empty list of tensordicts")
    bs = tds[0].batch_size
    if not bs:
        raise PtdValueError("cannot concatenate 0-d tensordicts")
    dim %= len(bs)
    for td in tds:
        if len(td.batch_size) != len(bs) or any(
            a != b for i, (a, b) in enumerate(zip(td.batch_size, bs, strict=True)) if i != dim
        ):
            raise PtdValueError(
                f"cannot concatenate tensordicts of batch sizes {[list(t.batch_size) for t in tds]} along dim {dim}"
            )
    new_bs = list(bs)
    new_bs[dim] = sum(td.batch_size[dim] for td in tds)
    return _join(tds, dim, torch.Size(new_bs), lambda xs: torch.cat(xs, dim))
