"""``reshape`` and ``view`` of the batch dims, with tensordict 0.15's arguments and errors.

The new batch size is given as integers, as one list/tuple/``torch.Size`` or as ``size=``; one
dim may be ``-1``. A shape that does not fit the batch raises ``RuntimeError`` ("invalid shape
[7] for a batch of 12 elements"), arguments of another form ``TypeError``. The same batch size
returns the tensordict itself; otherwise the result is a new tensordict without dim names,
locked when the tensordict is. ``view(dtype)`` views every tensor leaf with another dtype
(``batch_size=`` gives the result's batch size). ``reshape(..., inplace=True)`` gives this
tensordict the new batch size (in memory only).

A PersistentTensorDict reshapes into an in-memory TensorDict (each leaf is read once), as
tensordict does; its ``view`` of another shape is refused (see :mod:`ptd.containers.persistent.refused`).

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, batch_size=[2, 3])
>>> td.reshape(-1).batch_size, td.reshape(size=(3, 2))["a"][0]
(torch.Size([6]), tensor([0, 1]))
>>> td.reshape(2, 3) is td, td.view(torch.int32)["a"].dtype
(True, torch.int32)
>>> td.reshape(4)
Traceback (most recent call last):
...
ptd.errors.ArgumentError: invalid shape [4] for a batch of 6 elements
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import torch

from ptd.errors import ArgumentError, NotSupportedError, PtdTypeError
from ptd.ops import locking as locking_ops
from ptd.ops.nontensor import NonTensorStack
from ptd.ops.root import is_tensordict
from ptd.ops.rows import non_tensor_grid_map

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__ = ["reshape", "resolve_shape", "shape_from_args", "view"]


def shape_from_args(
    args: Sequence[Any], size: Any = None, extra: dict[str, Any] | None = None
) -> list[Any]:
    """The shape given as ``*args`` (integers, or one sequence) or as ``size=``; TypeError for
    both at once or an unknown keyword. The sizes are checked by :func:`resolve_shape`."""
    if (args and (size is not None or extra)) or (not args and extra):
        given = dict(extra or {})
        if size is not None:
            given["size"] = size
        raise PtdTypeError(
            "Either the kwarg `size`, a single shape argument or a sequence of integers can be "
            f"passed. Got args={tuple(args)} and kwargs={given}."
        )
    if not args:
        shape: Any = () if size is None else size
    elif len(args) == 1 and not isinstance(args[0], numbers.Number):
        shape = args[0]
    else:
        shape = args
    return list(shape)


def resolve_shape(shape: Sequence[Any], numel: int) -> torch.Size:
    """``shape`` with its ``-1`` replaced, checked against a batch of ``numel`` elements."""
    if not all(isinstance(s, (numbers.Number, torch.Tensor)) for s in shape):
        raise PtdTypeError(f"a shape takes integers, got {list(shape)}")
    free = [i for i, s in enumerate(shape) if s == -1]
    if len(free) > 1:
        raise ArgumentError("only one dimension can be inferred")
    if any(s < -1 for s in shape):
        raise ArgumentError(
            f"invalid shape dimensions in {list(shape)}: sizes must be non-negative or -1"
        )
    known = math.prod(s for s in shape if s != -1)
    fits = numel == known if not free else (known > 0 and numel % known == 0)
    if not fits:
        raise ArgumentError(f"invalid shape {list(shape)} for a batch of {numel} elements")
    out = list(shape)
    if free:
        out[free[0]] = numel // known
    try:
        return torch.Size(out)
    except TypeError as err:
        raise PtdTypeError(f"a shape takes integers, got {out}: {err}") from None


def reshape(td: TensorDictBase, args: Sequence[Any], kwargs: dict[str, Any]) -> TensorDictBase:
    """``td.reshape(*args, **kwargs)``: see the module docstring."""
    kwargs = dict(kwargs)
    inplace = bool(kwargs.pop("inplace", False))
    size = kwargs.pop("size", None)
    new = resolve_shape(shape_from_args(args, size, kwargs), td.numel())
    if new == td.batch_size:
        return td
    nb = td.ndim
    result = _batch_map(td, lambda t: t.reshape(tuple(new) + tuple(t.shape[nb:])), new)
    return _rebind(td, result) if inplace else result


def view(td: TensorDictBase, args: Sequence[Any], size: Any, batch_size: Any) -> TensorDictBase:
    """``td.view(*args, size=..., batch_size=...)``: see the module docstring."""
    if len(args) == 1 and isinstance(args[0], torch.dtype):
        dtype = args[0]
        return cast("TensorDictBase", td.apply(lambda t: t.view(dtype), batch_size=batch_size))
    new = resolve_shape(shape_from_args(args, size), td.numel())
    if new == td.batch_size:
        return td
    nb = td.ndim
    return _batch_map(td, lambda t: t.view(tuple(new) + tuple(t.shape[nb:])), new)


# ------------------------------------------------------------ applying a batch-shape op
def _batch_map(
    td: TensorDictBase,
    fn: Callable[[torch.Tensor], torch.Tensor],
    batch_size: Sequence[int] | None = None,
    *,
    lock: bool = True,
) -> TensorDictBase:
    """A new TensorDict whose leaves are ``fn(leaf)``; ``fn`` acts on the leading
    ``self.ndim`` dims and keeps the rest. ``batch_size`` is the new batch size when it
    cannot be found by running ``fn`` on a meta tensor. The result of a locked tensordict
    is locked (as tensordict's shape ops are), unless ``lock=False``."""

    if batch_size is None:
        new_bs = fn(torch.empty(tuple(td.batch_size), device="meta")).shape
    else:
        new_bs = torch.Size(batch_size)
    out = td._new_tensordict({}, batch_size=new_bs, device=td.device)
    for key in td._keys_str():
        value = td._get_str(key)
        if is_tensordict(value):
            value = _batch_map(value, fn, lock=lock)
        elif isinstance(value, torch.Tensor):
            value = fn(value)
        else:
            value = non_tensor_grid_map(
                value,
                value.batch_size[: td.ndim] if isinstance(value, NonTensorStack) else td.batch_size,
                fn,
            )
        out._set_str(key, value, inplace=False)
    if lock and td.is_locked:
        out.lock_()
    return out


def _rebind(td: TensorDictBase, result: TensorDictBase) -> TensorDictBase:
    """Make this tensordict hold ``result``'s entries and batch size (nested tensordicts
    keep their identity): the ``inplace=True`` of the shape ops, in memory only."""
    if td._leaves.reads_copy:
        raise NotSupportedError(
            "An in-place shape operation that changes the batch size is not supported on "
            f"{type(td).__name__}: call `to_tensordict()` first, or use inplace=False."
        )
    locking_ops.check_unlocked(
        td,
    )
    for key in list(td._keys_str()):
        if not is_tensordict(td._get_str(key)) or key not in result._keys_str():
            td._del_str(key)
    for key in result._keys_str():
        new = result._get_str(key)
        if key in td._keys_str() and is_tensordict(new):
            _rebind(td._get_str(key), new)
    # both container classes give batch_size a setter
    cast(Any, td).batch_size = result.batch_size
    for key in result._keys_str():
        if key not in td._keys_str():
            td._set_str(key, result._get_str(key), inplace=False)
    return td
