"""Device bookkeeping and shared memory: ``auto_device_``, ``clear_device_``, ``is_shared``
and ``share_memory_``, as tensordict 0.15.3 has them.

None of them moves a leaf: ``auto_device_``/``clear_device_`` only change the device a
tensordict (and every nested one) reports, and ``share_memory_`` moves the storage of each
tensor leaf into shared memory in place, then locks the tensordict.

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict(a=torch.zeros(3), n={"b": torch.ones(3)}, batch_size=[3])
>>> print(td.device)
None
>>> td.auto_device_().device, td["n"].device
(device(type='cpu'), device(type='cpu'))
>>> print(td.clear_device_().device)
None
>>> td.is_shared(), td.share_memory_().is_shared(), td.is_locked, td["a"].is_shared()
(False, True, True, True)
>>> td.unlock_().is_shared()  # the tensors stay shared, the mark goes with the lock
False
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from ptd.errors import UnsupportedOperationError
from ptd.ops import locking as locking_ops

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase

__all__: list[str] = []


def _containers(td: Any) -> list[Any]:
    """``td`` and every nested tensordict under it."""
    out = [td]
    for sub in locking_ops.nested_containers(
        td,
    ):
        out.extend(_containers(sub))
    return out


def _leaf_devices(td: TensorDictBase) -> set[torch.device]:
    """The devices of the tensor leaves; a file-backed store reads none of them: they
    come out on its device, or the CPU."""
    if td._leaves.writes_into_entries:
        has_leaf = any(
            td.leaf_meta(k).kind == "tensor" for k in td.keys(include_nested=True, leaves_only=True)
        )
        return {td.device or torch.device("cpu")} if has_leaf else set()
    found: set[torch.device] = set()
    for sub in _containers(td):
        for key in sub._keys_str():
            value = sub._get_str(key)
            if isinstance(value, torch.Tensor):
                found.add(value.device)
    return found


def _set_device_tree(td: TensorDictBase, device: torch.device | None) -> None:
    for sub in _containers(td):
        sub._device = device


def auto_device_(td: TensorDictBase) -> TensorDictBase:
    """Set the device of this tensordict and every nested one to the device its tensor
    leaves share; with no leaf, or leaves on several devices, to ``None``. Nothing is
    moved. Returns ``self``."""
    devices = _leaf_devices(
        td,
    )
    _set_device_tree(td, devices.pop() if len(devices) == 1 else None)
    return td


def clear_device_(td: TensorDictBase) -> TensorDictBase:
    """Set the device of this tensordict and every nested one to ``None`` (the leaves stay
    where they are, and new ones can be on any device). Returns ``self``."""
    _set_device_tree(td, None)
    return td


def is_shared(td: TensorDictBase) -> bool:
    """Whether :meth:`share_memory_` put this tensordict in shared memory (and it has not
    been unlocked since); a tensordict built from shared tensors is not marked."""
    device = td.device
    if device is not None and device.type == "cuda" and not td.is_memmap():
        return True
    return bool(td.__dict__.get("_is_shared", False))


def share_memory_(td: TensorDictBase) -> TensorDictBase:
    """Move the storage of every tensor leaf to shared memory (in place: the tensors stay
    the same objects), mark the tensordict and the nested ones as shared and lock it.
    Returns ``self``. A memory-mapped tensordict raises
    :class:`~ptd.errors.UnsupportedOperationError` (a RuntimeError); one on a CUDA device
    is left as it is (CUDA tensors are shared already)."""
    if td.is_memmap():
        raise UnsupportedOperationError(
            "memmap and shared memory are mutually exclusive features: this tensordict is "
            "memory-mapped"
        )
    device = td.device
    if device is not None and device.type == "cuda":
        return td
    for sub in _containers(td):
        for key in sub._keys_str():
            value = sub._get_str(key)
            if isinstance(value, torch.Tensor):
                value.share_memory_()
        sub._is_shared = True
    td.lock_()
    return td
