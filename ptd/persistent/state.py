"""Dim names and lock state of a PersistentTensorDict, kept in its shared store.

Both live in the :class:`~ptd.persistent.store._Store` that a PersistentTensorDict, its nested
groups and its indexed views share, so they agree: a view of a locked store is locked, and a
view's names are the stored dims' names mapped through its index. Names are read from each
group's ``__tensordict__`` attribute and written there when set (h5 and zarr; tensordict 0.15
reads them back from zarr, and ptd from both). ``rename`` gives a copy with names of its own,
never written.
"""

from __future__ import annotations

import weakref
from typing import Any

from ptd.core import indexing as ix
from ptd.errors import LockedError, UnsupportedOperationError
from ptd.format.tdmeta import td_meta_attrs
from ptd.storage.backends.base import Path

__all__ = ["StoreStateMixin"]

_UNSET: Any = object()


class StoreStateMixin:
    """Mixed in before :class:`~ptd.core.base.TensorDictBase` by PersistentTensorDict."""

    # Names of the stored dims of each group live in the shared store (read from the group's
    # ``__tensordict__`` attribute, written there when set); a view maps them through its
    # index entries. ``rename`` gives a copy with names of its own (never written).
    def _stored_names(self: Any, path: Path, ndim: int) -> list[str | None] | None:
        cache = self._store.names
        if path not in cache:
            found = self._tree.stored_names(path, ndim) if not self._backend.closed else None
            if found is None and path:
                parent = self._stored_names(path[:-1], len(self._tree.group_batch(path[:-1], ())))
                if parent is not None:
                    found = (parent + [None] * ndim)[:ndim]
            cache[path] = found
        return cache[path]

    @property  # type: ignore[override]
    def _names(self: Any) -> list[str | None] | None:
        own = self.__dict__.get("_own_names", _UNSET)
        if own is not _UNSET:
            return own  # type: ignore[no-any-return]
        stored = self._stored_names(self._path, len(self._stored_batch))
        if stored is None or self._entries is None:
            return stored
        out: list[str | None] = []
        d = 0
        for e in self._entries:
            if isinstance(e, int):
                d += 1
            elif isinstance(e, slice):
                out.append(stored[d])
                d += 1
            elif isinstance(e, ix.NewDim):  # a None of the index: an unnamed dim
                out.append(None)
            else:
                k = len(e.arrays)
                out.append(stored[d] if k == 1 else None)
                d += k
        return out if any(n is not None for n in out) else None

    @_names.setter
    def _names(self: Any, value: list[str | None] | None) -> None:
        self._store.names[self._path] = None if value is None else list(value)

    def _set_names(self: Any, names: list[str | None] | None) -> None:
        if "_own_names" in self.__dict__:
            self.__dict__["_own_names"] = names
            return
        if self._entries is not None:
            raise UnsupportedOperationError(
                f"cannot set the dim names of an indexed view of {self._location()}; set them "
                "on the full tensordict"
            )
        be = self._backend
        self._store.names[self._path] = names
        if be.writable:
            be.set_attrs(self._path, td_meta_attrs(self._stored_batch, names))
        for sub in self._nested_containers():
            extra = len(sub._stored_batch) - len(self._stored_batch)
            sub._set_names(None if names is None else names + [None] * extra)

    def rename(self: Any, *names: Any, **rename_map: str) -> Any:
        """A new PersistentTensorDict on the same store with other dim names (the store's
        names are left as they are)."""
        new = self._renamed(names, rename_map)
        out = self.clone(recurse=False)
        out.__dict__["_own_names"] = self._check_names(new)
        return out

    # ---------------------------------------------------------------- locking
    # The lock state lives in the shared store (the set of locked group paths), so that
    # nested groups and indexed views of a locked tensordict are locked too.
    @property
    def is_locked(self: Any) -> bool:
        locked = self._store.locked
        if not locked:
            return False
        return any(_alive(locked, self._path[:i]) for i in range(len(self._path) + 1))

    @is_locked.setter
    def is_locked(self: Any, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    def _lock_tree(self: Any) -> None:
        # the lock lasts as long as the object that took it (as tensordict's, which holds its
        # parents by weak reference)
        refs = self._store.locked.setdefault(self._path, [])
        if not any(r() is self for r in refs):
            refs.append(weakref.ref(self))

    def _check_can_unlock(self: Any) -> None:
        locked = self._store.locked
        for i in range(len(self._path)):
            if _alive(locked, self._path[:i]):
                raise LockedError(
                    "Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
                    "tensordict first. If the tensordict is part of multiple graphs, group the "
                    "graphs under a common tensordict an unlock this root. "
                    f"self: {self._location()}, locked: group {'/'.join(self._path[:i])!r}"
                )

    def _unlock_tree(self: Any) -> None:
        n = len(self._path)
        for path in [p for p in self._store.locked if p[:n] == self._path]:
            del self._store.locked[path]


def _alive(locked: dict[Path, list[Any]], path: Path) -> bool:
    """Whether a live object holds the lock of ``path`` (dead holders are dropped)."""
    refs = locked.get(path)
    if not refs:
        return False
    refs[:] = [r for r in refs if r() is not None]
    if not refs:
        del locked[path]
        return False
    return True
