"""Helpers of the batch-shape operations (:mod:`ptd.ops.shape`): a non-tensor entry follows a
shape op through an index grid of the batch shape, and ``where`` pairs two tensordicts key by
key.

>>> import torch
>>> from ptd.ops.nontensor import NonTensorStack
>>> stack = NonTensorStack.from_list(["a", "b", "c"], [3])
>>> non_tensor_grid_map(stack, torch.Size([3]), lambda t: t.flip(0)).tolist()
['c', 'b', 'a']
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptd.ops.nontensor import NonTensorData, NonTensorStack

if TYPE_CHECKING:
    pass

__all__ = ["flat_list", "non_tensor_grid_map"]


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
