"""The state a PersistentTensorDict shares with its nested groups and views: the open backend,
its metadata cache, the open options, and what happens to them in a forked process; and
:func:`is_store` and the attributes a PersistentTensorDict derives from that state (bound as
its properties and methods).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard, cast

from ptd.errors import ClosedStoreError, PtdKeyError, PtdTypeError, UnsupportedOperationError
from ptd.storage import runtime
from ptd.storage.api import Backend, Path
from ptd.storage.stores import reopen
from ptd.storage.tree import StoreTree

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict


__all__ = ["_Store", "_check_allow_pickle", "_key_parts"]


#: backends inherited from a parent process: kept referenced (never closed nor collected) in
#: the child, because closing a writable HDF5 handle there would write to the parent's file
_INHERITED: list[Any] = []
#: serialises the reopening after a fork: two threads of a child (a DataLoader worker and its
#: read-ahead thread) may use a store first at the same time, and only one may reopen it
_REOPEN_LOCK = threading.Lock()


@runtime.after_fork_in_child
def _forked() -> None:
    global _REOPEN_LOCK
    _REOPEN_LOCK = threading.Lock()  # a fork copies a lock another thread may have held


# ---------------------------------------------------------------- public attributes
def filename(td: PersistentTensorDict) -> Any:
    return td._store.filename


def mode(td: PersistentTensorDict) -> str:
    return td._store.mode


def backend(td: PersistentTensorDict) -> str:
    return td._store.backend_name


def file(td: PersistentTensorDict) -> Any:
    """The underlying h5py Group/File or zarr Group of this node."""
    return td._store.backend.raw_group(td._path)


def kwargs(td: PersistentTensorDict) -> dict[str, Any]:
    warnings.warn(
        "PersistentTensorDict.kwargs is deprecated and will be removed in a future release.",
        DeprecationWarning,
        stacklevel=2,
    )
    return td._store.dataset_kwargs


# ---------------------------------------------------------------- the open store
def _tree(td: PersistentTensorDict) -> StoreTree:
    return td._store.tree


def _check_open(td: PersistentTensorDict) -> None:
    be = td._store.backend
    if be.closed:
        raise ClosedStoreError(f"{td._location()}: the store is closed")


def _backend(td: PersistentTensorDict) -> Backend:
    be = td._store.backend
    if be.closed:
        raise ClosedStoreError(f"the store {be.location} is closed")
    return be


def _location(td: PersistentTensorDict) -> str:
    be = td._store.backend
    where = f"<closed {be.location}>" if be.closed else be.location
    key = "/".join(td._path)
    return f"PersistentTensorDict {where}" + (f" (group {key!r})" if key else "")


def close(td: PersistentTensorDict) -> None:
    """Close the file or store. Afterwards, reading an entry raises KeyError."""
    td._store.close()


class _Store:
    """What a PersistentTensorDict, its nested groups and its views share.

    ``backend`` and ``tree`` check the process id: the first use in a forked child (a
    DataLoader worker) reopens the store by name, so no HDF5 handle (nor zip file, nor remote
    session) is ever shared with the parent. See :meth:`_after_fork`.
    """

    def __init__(
        self,
        backend: Backend,
        *,
        filename: Any,
        mode: str,
        backend_name: str,
        dataset_kwargs: dict[str, Any],
        allow_pickle: bool | None,
        non_tensor_as_stack: bool,
    ) -> None:
        self._backend = backend
        self._tree = StoreTree(backend)
        self.filename = filename
        self.mode = mode
        self.backend_name = backend_name
        self.dataset_kwargs = dataset_kwargs
        self.allow_pickle = allow_pickle
        self.non_tensor_as_stack = non_tensor_as_stack
        #: paths of the locked groups (a group is locked when it or an ancestor is listed)
        self.locked: dict[Path, list[Any]] = {}
        #: dim names of the stored dims of each group seen (None: unnamed)
        self.names: dict[Path, list[str | None] | None] = {}
        self.pid = runtime.pid()

    @property
    def backend(self) -> Backend:
        if self.pid != runtime.pid():
            self._after_fork()
        return self._backend

    @property
    def tree(self) -> StoreTree:
        if self.pid != runtime.pid():
            self._after_fork()
        return self._tree

    def where(self) -> str:
        return self.backend.location

    def _after_fork(self) -> None:
        """First use in a forked child: reopen the store from its ``reopen_spec``.

        The inherited backend is never used again, and never closed unless it is a read-only
        HDF5 file (closing one writes nothing, and HDF5 would otherwise hand the reopen the
        inherited file state). A writable HDF5 file cannot be reopened here (the parent holds
        it, and HDF5 shares nothing safely across fork): every use raises until ``close()``.
        Threads of the child that get here together reopen it once.
        """
        with _REOPEN_LOCK:
            if self.pid != runtime.pid():
                self._reopen()

    def _reopen(self) -> None:
        old = self._backend
        if not any(b is old for b in _INHERITED):
            _INHERITED.append(old)
        if old.closed:
            self.pid = runtime.pid()
            return
        spec = old.reopen_spec
        if not old.policy.handles_survive_fork and (spec is None or old.writable):
            why = (
                "it is open for writing"
                if spec is not None
                else f"it was opened from a {old.policy.label} library object"
            )
            raise UnsupportedOperationError(
                f"cannot use the PersistentTensorDict on {old.location} in this forked process "
                f"({runtime.pid()}): {why} in the parent process ({self.pid}), and a "
                f"{old.policy.label} handle cannot be shared across fork. Open it by file name "
                "with mode='r' before starting workers (or open it in each worker)."
            )
        if spec is None:  # zarr in-memory store or a user's group: no OS handle is shared
            self.pid = runtime.pid()
            return
        if not old.policy.handles_survive_fork:
            old.close()
        new = reopen(spec)
        self._backend = new
        self._tree.backend = new
        self.pid = runtime.pid()

    def close(self) -> None:
        if self.pid != runtime.pid() and not self._backend.closed:
            try:
                self._after_fork()
            except UnsupportedOperationError:  # leave the parent's handle alone
                # a duck-typed stand-in: closed, and any other use raises ClosedStoreError
                self._backend = cast("Backend", _Abandoned(self._backend))
                self._tree.backend = self._backend
                self.pid = runtime.pid()
                return
        self._backend.close()


class _Abandoned:
    """Stands in a forked child for a backend the child may not use (now closed for it)."""

    closed = True
    writable = False
    reopen_spec = None

    def __init__(self, old: Any) -> None:
        self.name = old.name
        self.location = old.location

    def close(self) -> None:
        pass

    def __getattr__(self, attr: str) -> Any:
        raise ClosedStoreError(f"the store {self.location} is closed")


def _key_parts(parts: tuple[str, ...], where: Callable[[], str]) -> tuple[str, ...]:
    """Keys are data, not paths. A str key holding ``/`` is a nested key (``"a/b"`` is
    ``("a", "b")``, as in tensordict 0.15); a component that is empty (``"/a"``, ``"a//b"``,
    ``"a/"``), ``"."``, ``".."`` or holds a NUL character raises PtdKeyError naming the key."""
    for part in parts:
        if "/" in part or part in ("", ".", "..") or "\x00" in part:
            break
    else:
        return parts
    out: list[str] = []
    for part in parts:
        for piece in part.split("/"):
            if piece in ("", ".", "..") or "\x00" in piece:
                key = parts[0] if len(parts) == 1 else parts
                why = (
                    "a NUL character"
                    if "\x00" in piece
                    else f"the component {piece!r}"
                    if piece
                    else "a path starting with '/'"
                    if part.startswith("/")
                    else "an empty component"
                )
                raise PtdKeyError(
                    f"invalid key {key!r} for {where()}: {why} is not allowed in a key (keys are "
                    "names, not paths: empty components, '.', '..' and NUL are refused)"
                )
            out.append(piece)
    return tuple(out)


def _check_allow_pickle(value: Any) -> None:
    if value is not None and not isinstance(value, bool):
        raise PtdTypeError("allow_pickle must be a bool or None.")


def is_store(obj: object) -> TypeGuard[PersistentTensorDict]:
    """True for a PersistentTensorDict: a container whose entries live in a store."""
    return isinstance(getattr(obj, "_store", None), _Store)
