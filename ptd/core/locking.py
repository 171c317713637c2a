"""Locking, written once for every tensordict (mixed into :class:`~ptd.core.base.TensorDictBase`).

A locked tensordict refuses to add, delete or replace entries (``set(..., inplace=False)``,
``del``, ``pop``, ``rename_key_``, ``update(inplace=False)``) with a RuntimeError
(:class:`~ptd.errors.LockedError`), as tensordict 0.15 does; in-place writes (``set_``,
``update_``, ``set(..., inplace=True)`` on an existing key, in-place math) still work. Locking
a tensordict locks every nested one, and a nested tensordict cannot be unlocked while a parent
is locked. ``with td.lock_():`` / ``with td.unlock_():`` undo themselves on exit
(:mod:`ptd.core.lastop`). File-backed tensordicts keep the state in their store (see
:mod:`ptd.persistent.state`).

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
from typing import Any

from ptd.core.lastop import last_op
from ptd.errors import LockedError

__all__ = ["LockingMixin"]


class LockingMixin:
    """``is_locked``, ``lock_``, ``unlock_`` and the check every structural change runs."""

    @property
    def is_locked(self: Any) -> bool:
        return self._is_locked

    @is_locked.setter
    def is_locked(self: Any, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def _nested_containers(self: Any) -> list[Any]:
        return [self._get_str(k) for k in self._keys_str() if self._meta_str(k).kind == "nested"]

    @last_op("is_locked")
    def lock_(self: Any) -> Any:
        """Lock the tensordict and every nested one: no key can be added, deleted or replaced
        (``set_``, ``update_`` and in-place writes still work). ``with td.lock_():`` unlocks
        on exit."""
        self._lock_tree()
        return self

    def _lock_tree(self: Any) -> None:
        self._is_locked = True
        for sub in self._nested_containers():
            parents = sub.__dict__.setdefault("_lock_parents", [])
            if not any(ref() is self for ref in parents):
                parents.append(weakref.ref(self))
            sub._lock_tree()

    @last_op("is_locked")
    def unlock_(self: Any) -> Any:
        """Unlock the tensordict and every nested one. A nested tensordict of a locked one
        cannot be unlocked alone (RuntimeError). ``with td.unlock_():`` locks again on exit."""
        self._check_can_unlock()
        self._unlock_tree()
        return self

    def _check_can_unlock(self: Any) -> None:
        for ref in self.__dict__.get("_lock_parents", []):
            parent = ref()
            if parent is not None and parent.is_locked:
                raise LockedError(
                    "Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
                    "tensordict first. If the tensordict is part of multiple graphs, group the "
                    "graphs under a common tensordict an unlock this root. "
                    f"self: {self!r}, obj: {parent!r}"
                )

    def _unlock_tree(self: Any) -> None:
        self._is_locked = False
        self.__dict__.pop("_is_memmap", None)  # unlocked, a memmap tensordict no longer is one
        self.__dict__.pop("_is_shared", None)  # nor is a shared one marked shared
        for sub in self._nested_containers():
            parents = sub.__dict__.get("_lock_parents", [])
            parents[:] = [r for r in parents if r() is not None and r() is not self]
            if not any(r().is_locked for r in parents):  # type: ignore[union-attr]
                sub._unlock_tree()

    def _check_unlocked(self: Any) -> None:
        if self.is_locked:
            raise LockedError(
                "Cannot modify locked TensorDict. For in-place modification, consider using the "
                "`set_()` method and make sure the key is present."
            )
