"""Locking, written once for every tensordict (bound as methods of :class:`~ptd.containers.base.TensorDictBase`).

A locked tensordict refuses to add, delete or replace entries (``set(..., inplace=False)``,
``del``, ``pop``, ``rename_key_``, ``update(inplace=False)``) with a RuntimeError
(:class:`~ptd.errors.LockedError`), as tensordict 0.15 does; in-place writes (``set_``,
``update_``, ``set(..., inplace=True)`` on an existing key, in-place math) still work. Locking
a tensordict locks every nested one, and a nested tensordict cannot be unlocked while a parent
is locked. ``with td.lock_():`` / ``with td.unlock_():`` undo themselves on exit
(:mod:`ptd.ops.lastop`). File-backed tensordicts keep the state in their store (see
:mod:`ptd.containers.persistent.state`).

>>> import torch
>>> from ptd import TensorDict
>>> td = TensorDict({"a": torch.zeros(2), "n": {"b": torch.ones(2)}}, batch_size=[2]).lock_()
>>> td["n"].is_locked
True
>>> td.set_("a", torch.ones(2))["a"]
tensor([1., 1.])
>>> td.set("a", torch.ones(2))
Traceback (most recent call last):
...
ptd.errors.LockedError: Cannot modify locked TensorDict. For in-place modification, consider using the `set_()` method and make sure the key is present.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ptd.errors import LockedError
from ptd.ops.lastop import last_op

if TYPE_CHECKING:
    from ptd.containers.base import TensorDictBase


__all__: list[str] = []


def is_locked(td: TensorDictBase) -> bool:
    return td._is_locked


def set_is_locked(td: TensorDictBase, value: bool) -> None:
    if value:
        td.lock_()
    else:
        td.unlock_()


def nested_containers(td: TensorDictBase) -> list[Any]:
    return [td._get_str(k) for k in td._keys_str() if td._meta_str(k).kind == "nested"]


@last_op("is_locked")
def lock_(td: TensorDictBase) -> Any:
    """Lock the tensordict and every nested one: no key can be added, deleted or replaced
    (``set_``, ``update_`` and in-place writes still work). ``with td.lock_():`` unlocks
    on exit."""
    td._lock_tree()
    return td


def _lock_tree(td: TensorDictBase) -> None:
    td._is_locked = True
    for sub in nested_containers(
        td,
    ):
        parents = sub.__dict__.setdefault("_lock_parents", [])
        if not any(ref() is td for ref in parents):
            parents.append(weakref.ref(td))
        sub._lock_tree()


@last_op("is_locked")
def unlock_(td: TensorDictBase) -> Any:
    """Unlock the tensordict and every nested one. A nested tensordict of a locked one
    cannot be unlocked alone (RuntimeError). ``with td.unlock_():`` locks again on exit."""
    td._check_can_unlock()
    td._unlock_tree()
    return td


def _check_can_unlock(td: TensorDictBase) -> None:
    for ref in td.__dict__.get("_lock_parents", []):
        parent = ref()
        if parent is not None and parent.is_locked:
            raise LockedError(
                "Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
                "tensordict first. If the tensordict is part of multiple graphs, group the "
                "graphs under a common tensordict an unlock this root. "
                f"self: {td!r}, obj: {parent!r}"
            )


def _unlock_tree(td: TensorDictBase) -> None:
    td._is_locked = False
    td.__dict__.pop("_is_memmap", None)  # unlocked, a memmap tensordict no longer is one
    td.__dict__.pop("_is_shared", None)  # nor is a shared one marked shared
    for sub in nested_containers(
        td,
    ):
        parents = sub.__dict__.get("_lock_parents", [])
        parents[:] = [r for r in parents if r() is not None and r() is not td]
        if not any(r().is_locked for r in parents):
            sub._unlock_tree()


def check_unlocked(td: TensorDictBase) -> None:
    if td.is_locked:
        raise LockedError(
            "Cannot modify locked TensorDict. For in-place modification, consider using the "
            "`set_()` method and make sure the key is present."
        )
