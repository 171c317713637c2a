"""Consistency checks that tensordict's own test-suite calls on results:
``_check_batch_size()`` and ``_check_device()``.

They are private in tensordict 0.15 too; ptd has them for compatibility (code and tests written
against tensordict call them after ``logsumexp``, ``softmax``, ``pad``...). Both read entry
metadata only, so on a file-backed tensordict they read no data.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.zeros(3, 2), n={"b": torch.ones(3)}, batch_size=[3])
>>> td._check_batch_size(), td._check_device()
(True, True)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ptd.errors import BatchSizeError, UnsupportedOperationError

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []


def _check_batch_size(td: TensorDictBase, *, raise_exception: bool = True) -> bool:
    """True when the leading dims of every entry (nested ones included) are the batch
    size; otherwise :class:`~ptd.errors.BatchSizeError` (a RuntimeError, as tensordict),
    or False with ``raise_exception=False``."""
    sub = td
    bs = tuple(sub.batch_size)
    for key in sub._keys_str():
        meta = sub._meta_str(key)
        if meta.kind == "nested" and not sub._get_str(key)._check_batch_size(
            raise_exception=raise_exception
        ):
            return False
        if tuple(meta.shape[: len(bs)]) != bs:
            if raise_exception:
                raise BatchSizeError(
                    f"batch size {list(bs)} of {sub._location()} does not match key "
                    f"{key!r} of shape {list(meta.shape)}: the leading dims of every "
                    "entry must be the batch size"
                )
            return False
    return True


def _check_device(td: TensorDictBase, *, raise_exception: bool = True) -> bool:
    """True when every tensor leaf is on the tensordict's device (any device when it has
    none); otherwise RuntimeError, or False with ``raise_exception=False``. A file-backed
    tensordict reads its leaves onto its device: only its nested levels are checked."""
    node = td
    device = node.device
    for key in node._keys_str():
        meta = node._meta_str(key)
        if meta.kind == "nested":
            sub = node._get_str(key)
            ok = sub._check_device(raise_exception=raise_exception)
            found = sub.device
        elif meta.kind == "tensor" and device is not None and not node._leaves.reads_copy:
            found = node._get_str(key).device
            ok = True
        else:
            continue
        if ok and device is not None and found != device:
            if raise_exception:
                raise UnsupportedOperationError(
                    f"key {key!r} of {node._location()} is on {found}, the tensordict on {device}"
                )
            return False
        if not ok:
            return False
    return True
