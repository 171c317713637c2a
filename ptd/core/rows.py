"""Helpers of the batch-shape operations (:mod:`ptd.core.shape`): a non-tensor entry follows a
shape op through an index grid of the batch shape, and ``where`` pairs two tensordicts key by
key.

>>> import torch
>>> from ptd.core.nontensor import NonTensorStack
>>> stack = NonTensorStack.from_list(["a", "b", "c"], [3])
>>> non_tensor_grid_map(stack, torch.Size([3]), lambda t: t.flip(0)).tolist()
['c', 'b', 'a']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptd.core.nontensor import NonTensorData, NonTensorStack
from ptd.core.registry import is_tensordict, new_tensordict
from ptd.errors import PtdKeyError

if TYPE_CHECKING:
    from ptd.core.base import TensorDictBase

__all__ = ["non_tensor_grid_map", "flat_list", "where_td"]


def non_tensor_grid_map(
    value: Any, batch: torch.Size, fn: Callable[[torch.Tensor], torch.Tensor]
) -> Any:
    """Apply a batch-shape op to a non-tensor entry through an index grid."""
    grid = torch.arange(max(1, int(np.prod(batch))) if len(batch) else 1).reshape(batch)
    new = fn(grid)
    if isinstance(value, NonTensorData):
        return NonTensorData(value.data, new.shape, value.device)
    flat = np.empty(int(np.prod(batch)), dtype=object)
    flat[:] = flat_list(value.tolist(), len(batch))
    picked = (
        flat[new.reshape(-1).numpy()].reshape(tuple(new.shape))
        if new.numel()
        else np.empty(tuple(new.shape), dtype=object)
    )
    return NonTensorStack.from_list(picked.tolist(), new.shape)


def flat_list(values: Any, ndim: int) -> list[Any]:
    if ndim <= 1:
        return list(values) if ndim == 1 else [values]
    return [x for v in values for x in flat_list(v, ndim - 1)]


def _expand_right(cond: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    return cond.reshape(tuple(cond.shape) + (1,) * (t.ndim - cond.ndim)).expand(t.shape)


def where_td(td: Any, condition: torch.Tensor, other: Any, pad: Any) -> TensorDictBase:
    """``td.where(condition, other)`` as a new TensorDict (see ShapeMixin.where)."""
    if not is_tensordict(other):
        return td.apply(lambda t: torch.where(_expand_right(condition, t), t, other))  # type: ignore[no-any-return]
    out = new_tensordict({}, batch_size=td.batch_size, device=td.device)
    keys = list(td._keys_str()) + [k for k in other._keys_str() if k not in td._keys_str()]
    for key in keys:
        mine: Any = td._get_str(key) if key in td._keys_str() else None
        theirs: Any = other._get_str(key) if key in other._keys_str() else None
        value: Any
        if (mine is None or theirs is None) and pad is None:
            raise PtdKeyError(f"Key {key} not found and no pad value provided.")
        if is_tensordict(mine) or is_tensordict(theirs):
            if mine is None:
                value = where_td(theirs, condition.logical_not(), _padded(theirs, pad), None)
            else:
                value = where_td(mine, condition, theirs if theirs is not None else pad, pad)
        elif isinstance(mine, torch.Tensor) or isinstance(theirs, torch.Tensor):
            if mine is None:
                cond = _expand_right(condition.logical_not(), theirs)
                value = torch.where(cond, theirs, torch.tensor(pad, dtype=theirs.dtype))
            else:
                b = theirs if theirs is not None else torch.tensor(pad, dtype=mine.dtype)
                value = torch.where(_expand_right(condition, mine), mine, b)
        else:
            value = mine if mine is not None else theirs
        out._set_str(key, value, inplace=False)
    return out


def _padded(td: Any, pad: Any) -> Any:
    return td.apply(lambda t: torch.full_like(t, pad))
