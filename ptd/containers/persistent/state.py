"""Dim names and lock state of a PersistentTensorDict, kept in its shared store.

Both live in the :class:`~ptd.containers.persistent.store._Store` that a PersistentTensorDict, its nested
groups and its indexed views share, so they agree: a view of a locked store is locked, and a
view's names are the stored dims' names mapped through its index. Names are read from each
group's ``__tensordict__`` attribute and written there when set (h5 and zarr; tensordict 0.15
reads them back from zarr, and ptd from both). ``rename`` gives a copy with names of its own,
never written.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from ptd.errors import LockedError, UnsupportedOperationError
from ptd.format.tdmeta import td_meta_attrs
from ptd.ops import indexing as ix
from ptd.ops import locking as locking_ops
from ptd.ops import names as names_ops
from ptd.storage.api import Path

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict


__all__: list[str] = []

_UNSET: Any = object()


# Names of the stored dims of each group live in the shared store (read from the group's
# ``__tensordict__`` attribute, written there when set); a view maps them through its
# index entries. ``rename`` gives a copy with names of its own (never written).
def _stored_names(td: PersistentTensorDict, path: Path, ndim: int) -> list[str | None] | None:
    cache = td._store.names
    if path not in cache:
        found = td._tree.stored_names(path, ndim) if not td._backend.closed else None
        if found is None and path:
            parent = td._stored_names(path[:-1], len(td._tree.group_batch(path[:-1], ())))
            if parent is not None:
                found = (parent + [None] * ndim)[:ndim]
        cache[path] = found
    return cache[path]


def _names(td: PersistentTensorDict) -> list[str | None] | None:
    own = td.__dict__.get("_own_names", _UNSET)
    if own is not _UNSET:
        return own  # type: ignore[no-any-return]
    stored = td._stored_names(td._path, len(td._stored_batch))
    if stored is None or td._entries is None:
        return stored
    out: list[str | None] = []
    d = 0
    for e in td._entries:
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


def _assign_names(td: PersistentTensorDict, value: list[str | None] | None) -> None:
    td._store.names[td._path] = None if value is None else list(value)


def _set_names(td: PersistentTensorDict, names: list[str | None] | None) -> None:
    if "_own_names" in td.__dict__:
        td.__dict__["_own_names"] = names
        return
    if td._entries is not None:
        raise UnsupportedOperationError(
            f"cannot set the dim names of an indexed view of {td._location()}; set them "
            "on the full tensordict"
        )
    be = td._backend
    td._store.names[td._path] = names
    if be.writable:
        be.set_attrs(td._path, td_meta_attrs(td._stored_batch, names))
    for sub in locking_ops.nested_containers(
        td,
    ):
        extra = len(sub._stored_batch) - len(td._stored_batch)
        sub._set_names(None if names is None else names + [None] * extra)


def rename(td: PersistentTensorDict, *names: Any, **rename_map: str) -> Any:
    """A new PersistentTensorDict on the same store with other dim names (the store's
    names are left as they are)."""
    new = names_ops.renamed(td, names, rename_map)
    out = td.clone(recurse=False)
    out.__dict__["_own_names"] = names_ops.check_names(td, new)
    return out


# ---------------------------------------------------------------- locking
# The lock state lives in the shared store (the set of locked group paths), so that
# nested groups and indexed views of a locked tensordict are locked too.
def is_locked(td: PersistentTensorDict) -> bool:
    locked = td._store.locked
    if not locked:
        return False
    return any(_alive(locked, td._path[:i]) for i in range(len(td._path) + 1))


def set_is_locked(td: PersistentTensorDict, value: bool) -> None:
    if value:
        td.lock_()
    else:
        td.unlock_()


def _lock_tree(td: PersistentTensorDict) -> None:
    # the lock lasts as long as the object that took it (as tensordict's, which holds its
    # parents by weak reference)
    refs = td._store.locked.setdefault(td._path, [])
    if not any(r() is td for r in refs):
        refs.append(weakref.ref(td))


def _check_can_unlock(td: PersistentTensorDict) -> None:
    locked = td._store.locked
    for i in range(len(td._path)):
        if _alive(locked, td._path[:i]):
            raise LockedError(
                "Cannot unlock a tensordict that is part of a locked graph. Unlock the root "
                "tensordict first. If the tensordict is part of multiple graphs, group the "
                "graphs under a common tensordict an unlock this root. "
                f"self: {td._location()}, locked: group {'/'.join(td._path[:i])!r}"
            )


def _unlock_tree(td: PersistentTensorDict) -> None:
    n = len(td._path)
    for path in [p for p in td._store.locked if p[:n] == td._path]:
        del td._store.locked[path]


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
