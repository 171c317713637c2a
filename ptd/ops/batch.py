"""Batch sizes as ``torch.Size``: the torch-side twin of :mod:`ptd.format.shapes`.

>>> infer_batch_size([(3, 4), (3, 4, 5), (3,)])
torch.Size([3])
>>> check_leaf((3, 4), torch.Size([3]), key="a", where="data.h5")
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from ptd.errors import BatchSizeError
from ptd.format.shapes import check_leaf, common_prefix, fits

__all__ = ["as_batch_size", "check_leaf", "fits", "infer_batch_size"]


def as_batch_size(batch_size: Sequence[int] | torch.Size | int | None) -> torch.Size:
    """Normalise a user batch size: None -> [], an int -> [n], a sequence -> Size."""
    if batch_size is None:
        return torch.Size([])
    if isinstance(batch_size, int):
        return torch.Size([batch_size])
    try:
        return torch.Size([int(n) for n in batch_size])
    except (TypeError, ValueError):
        raise BatchSizeError(f"batch_size must be a sequence of ints, got {batch_size!r}") from None


def infer_batch_size(shapes: Iterable[Sequence[int]], batch_dims: int | None = None) -> torch.Size:
    """The longest leading shape that every shape shares (``[]`` when there are none), cut to
    at most ``batch_dims`` dims."""
    return torch.Size(common_prefix(shapes, batch_dims))
