"""Batch-size arithmetic on plain tuples (no torch): does a shape start with a batch size, and
the longest leading shape that several shapes share.

>>> fits((3, 4), (3,)), fits((3,), (3, 4))
(True, False)
>>> common_prefix([(3, 4), (3, 4, 5), (3,)])
(3,)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ptd.errors import BatchSizeError

__all__ = ["check_leaf", "common_prefix", "fits"]


def fits(shape: Sequence[int], batch_size: Sequence[int]) -> bool:
    """True when ``shape`` starts with ``batch_size``."""
    return len(shape) >= len(batch_size) and tuple(shape[: len(batch_size)]) == tuple(batch_size)


def common_prefix(
    shapes: Iterable[Sequence[int]], batch_dims: int | None = None
) -> tuple[int, ...]:
    """The longest leading shape every shape shares (``()`` when there are none), cut to at
    most ``batch_dims`` dims."""
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
    return tuple(result)


def check_leaf(shape: Sequence[int], batch_size: Sequence[int], *, key: str, where: str) -> None:
    """Raise BatchSizeError when the leaf ``key`` of shape ``shape`` does not fit the batch."""
    if not fits(shape, batch_size):
        raise BatchSizeError(
            f"batch size and array size mismatch in {where}: key {key!r} has shape "
            f"{list(shape)}, which does not start with batch_size={list(batch_size)}"
        )
