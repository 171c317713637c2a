"""Batch-size inference and checks: pure functions on shapes.

>>> infer_batch_size([(3, 4), (3, 4, 5), (3,)])
torch.Size([3])
>>> check_leaf((3, 4), torch.Size([3]), key="a", where="data.h5")
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from ptd.errors import BatchSizeError

__all__ = ["infer_batch_size", "check_leaf", "fits", "as_batch_size"]


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


def fits(shape: Sequence[int], batch_size: Sequence[int]) -> bool:
    """True when ``shape`` starts with ``batch_size``."""
    return len(shape) >= len(batch_size) and tuple(shape[: len(batch_size)]) == tuple(batch_size)


def check_leaf(shape: Sequence[int], batch_size: torch.Size, *, key: str, where: str) -> None:
    """Raise BatchSizeError when the leaf ``key`` of shape ``shape`` does not fit the batch."""
    if not fits(shape, batch_size):
        raise BatchSizeError(
            f"batch size and array size mismatch in {where}: key {key!r} has shape "
            f"{list(shape)}, which does not start with batch_size={list(batch_size)}"
        )


def infer_batch_size(shapes: Iterable[Sequence[int]], batch_dims: int | None = None) -> torch.Size:
    """The longest leading shape that every shape shares (``[]`` when there are none).

    ``batch_dims`` cuts the result to at most that many dims.
    """
    prefix: list[int] | None = None
    for shape in shapes:
        if prefix is None:
            prefix = list(shape)
            continue
        n = 0
        for a, b in zip(prefix, shape, strict=False):
            if a != b:
                break
            n += 1
        del prefix[n:]
    result = prefix or []
    if batch_dims is not None:
        result = result[:batch_dims]
    return torch.Size(result)
