"""PersistentTensorDict: a tensordict whose entries live in an HDF5 file or a Zarr v3 store.

Reads load from the store into new tensors; writes and in-place methods go to the store.
Indexing (``p[3:9]``, ``p[idx]``, ``p[mask]``) gives a lazy view that reads only the rows asked
for, and views of views compose without touching the file.

>>> import os, tempfile, torch
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as tmpdir:
...     path = os.path.join(tmpdir, "data.h5")
...     data = PersistentTensorDict(filename=path, batch_size=[3], mode="w")
...     data["a", "b"] = torch.zeros(3, 4)
...     data["a", "b"] += 1
...     print(type(data["a"]).__name__, data["a", "b"][0])
...     data.close()
PersistentTensorDict tensor([1., 1., 1., 1.])
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path as FsPath
from typing import Any, cast

import torch

from ptd.containers.base import EntryMeta, TensorDictBase
from ptd.containers.persistent import leaves as leaves_ops
from ptd.containers.persistent import opening as opening_ops
from ptd.containers.persistent import refused as refused_ops
from ptd.containers.persistent import state as state_ops
from ptd.containers.persistent import store as store_ops
from ptd.containers.persistent.node import StoreNode
from ptd.containers.persistent.opening import backend_options, check_array_options, check_target
from ptd.containers.persistent.store import _check_allow_pickle, _key_parts, _Store
from ptd.containers.persistent.streaming import STREAMED
from ptd.containers.persistent.write import warn_replace as _warn_replace
from ptd.containers.persistent.write import write_value
from ptd.containers.tensordict import TensorDict
from ptd.errors import (
    BatchSizeError,
    ClosedStoreError,
    PtdError,
    PtdTypeError,
    UnsupportedDtypeError,
    UnsupportedOperationError,
)
from ptd.format.tdmeta import td_meta_attrs
from ptd.ops import indexing as ix
from ptd.ops import lastop as lastop_ops
from ptd.ops.batch import as_batch_size, fits
from ptd.ops.dtypes import dtype_from_str
from ptd.ops.elementwise import parse_to
from ptd.ops.lastop import caller_site, entered_from_call
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.ops.tdhooks import REQUIRED, wants_default
from ptd.storage.api import NodeKind, Path, ValueKind
from ptd.storage.observers import opened
from ptd.storage.registry import get_backend

__all__ = ["PersistentTensorDict"]

_MODES = ("r", "r+", "w", "w-", "x", "a")
#: what ``__enter__`` queues for a plain ``with p:`` (close on exit)
_CLOSE: Any = object()


# from_dict takes a filename here, unlike the in-memory TensorDictBase.from_dict
class PersistentTensorDict(TensorDictBase):
    """A tensordict whose entries live in an HDF5 file (``backend="h5"``) or a Zarr v3 store
    (``backend="zarr"``). See the module docstring and the README for the full behaviour.

    Keyword Args:
        batch_size: the leading dims every entry shares (default ``[]``).
        filename: path of the h5 file or zarr store (zarr: a ``zarr.abc.store.Store`` too).
            Exclusive with ``group``.
        group: an open ``h5py.File``/``h5py.Group`` or ``zarr.Group``. Exclusive with ``filename``.
        mode: ``"r"``, ``"r+"``, ``"w"``, ``"w-"``/``"x"``, ``"a"`` as in ``h5py.File``.
        backend: ``"h5"`` or ``"zarr"``.
        device: the device entries are cast to when read (default: CPU, ``device`` is None).
        validate_batch_size: check the batch size against every stored array.
        non_tensor_as_stack: read foreign string columns whose leading dims are the batch size
            as a NonTensorStack of their rows.
        allow_pickle: True reads pickled entries (zarr payloads, arrays whose codecs
            unpickle); False and None (the default) refuse them with PickleRefusedError before
            anything is unpickled. Unlike tensordict 0.15, whose None unpickles with a
            FutureWarning: unpickling runs code the file holds, so only True opts in.
        locking: h5 only: passed to ``h5py.File``.
        fast_path: read uncompressed, contiguous arrays (h5 contiguous datasets, zarr chunks
            with only the ``bytes`` codec on a local directory) from read-only memory maps.
            None (default): on, unless the environment variable ``PTD_FAST_PATH=0``.
        chunk_cache: the budget of the decoded-chunk cache of a read-only store (bytes, or a
            size like ``"256MB"``; 0 turns it off). None (default): the environment variable
            ``PTD_CHUNK_CACHE``, else 64 MiB.
        storage_options: for a URL ``filename`` (``s3://bucket/data.zarr``; HDF5 read-only):
            passed to the fsspec filesystem (``endpoint_url``, ``key``/``secret``, ``anon``...).
        use_consolidated: zarr only: ``False`` lists the store's real nodes in mode ``"r"``
            instead of trusting its consolidated metadata, which a tool that added arrays
            without re-consolidating leaves stale (``ptd validate`` reports such stores).
        swmr: h5 only: open the file for SWMR reading (mode ``"r"``), as an h5py SWMR writer
            appends to it. None (default): when the file's superblock says it is being
            written that way (then with a ``WriterStateWarning``).
        follow_virtual: h5 only: read virtual datasets whose source files all lie inside the
            directory of the file named (symbolic links resolved); other virtual datasets and
            external storage stay refused, naming the source (see docs/safety.md).
        **kwargs: passed to ``h5py.Group.create_dataset`` / ``zarr.Group.create_array`` when an
            entry is created.
    """

    #: reads give new tensors, writes go into the stored entries, whole-leaf work streams
    #: row slabs (:class:`ptd.containers.persistent.streaming.StreamedLeaves`)
    _leaves = STREAMED
    #: the view's entries when they are only ints and slices, cached by ``_simple_selection``
    _simple_sel: tuple[ix.Entry, ...] | None

    def __init__(
        self,
        *,
        batch_size: Sequence[int] | torch.Size | None = None,
        filename: Any = None,
        group: Any = None,
        mode: str = "r",
        backend: str = "h5",
        device: Any = None,
        validate_batch_size: bool = True,
        non_tensor_as_stack: bool = False,
        allow_pickle: bool | None = None,
        locking: bool | str | None = None,
        fast_path: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        use_consolidated: bool | None = None,
        chunk_cache: int | str | None = None,
        swmr: bool | None = None,
        follow_virtual: bool | None = None,
        **kwargs: Any,
    ) -> None:
        cls = get_backend(backend)
        check_array_options(cls.name, kwargs)
        _check_allow_pickle(allow_pickle)
        check_target(filename, group, mode, _MODES)
        if isinstance(filename, FsPath):
            filename = str(filename)
        opts = backend_options(
            cls.name,
            locking=locking,
            fast_path=fast_path,
            storage_options=storage_options,
            use_consolidated=use_consolidated,
            chunk_cache=chunk_cache,
            swmr=swmr,
            follow_virtual=follow_virtual,
        )
        target = group if group is not None else filename
        be = opened(cls.open(target, mode, opts))  # test helpers may watch it
        store = _Store(
            be,
            filename=filename,
            mode=mode,
            backend_name=cls.name,
            dataset_kwargs=dict(kwargs),
            allow_pickle=allow_pickle,
            non_tensor_as_stack=non_tensor_as_stack,
        )
        bs = as_batch_size(batch_size) if not isinstance(batch_size, int) else None
        if bs is None:
            raise PtdTypeError(
                f"batch_size must be a list or torch.Size, not an int ({batch_size!r})"
            )
        try:
            if validate_batch_size:
                store.tree.load_all()
                store.tree.validate((), bs, be.location)
                store.tree.infer((), use_attrs=True)
            if mode in ("w", "w-", "x") and be.writable:
                be.set_attrs((), td_meta_attrs(bs))
        except BaseException:
            if group is None:
                be.close()
            raise
        self._init_view(store, (), bs, None, torch.device(device) if device is not None else None)
        store.tree.set_group_batch((), bs)

    def _init_view(
        self,
        store: _Store,
        path: Path,
        stored_batch: torch.Size,
        entries: tuple[ix.Entry, ...] | None,
        device: torch.device | None,
    ) -> None:
        self._store = store
        self._path = path
        self._stored_batch = stored_batch
        self._entries = entries
        self._batch = stored_batch if entries is None else torch.Size(ix.view_shape(entries))
        self._device = device
        self._nested: dict[str, PersistentTensorDict] = {}

    @classmethod
    def _view(
        cls,
        store: _Store,
        path: Path,
        stored_batch: torch.Size,
        entries: tuple[ix.Entry, ...] | None,
        device: torch.device | None,
    ) -> PersistentTensorDict:
        out = cls.__new__(cls)
        out._init_view(store, path, stored_batch, entries, device)
        return out

    # ---------------------------------------------------------------- public attributes
    @property
    def batch_size(self) -> torch.Size:
        return self._batch

    @batch_size.setter
    def batch_size(self, value: Sequence[int]) -> None:
        new = as_batch_size(value)
        if self._entries is not None:
            raise UnsupportedOperationError(
                "Cannot change the batch size of an indexed view; call to_tensordict() first"
            )
        try:
            self._tree.validate(self._path, new, self._location())
        except BatchSizeError as err:
            raise BatchSizeError(str(err)) from None
        self._stored_batch = self._batch = new
        self._tree.set_group_batch(self._path, new)
        self._nested.clear()
        if self._store.backend.writable:
            self._write_meta(self._path, new)

    @property
    def device(self) -> torch.device | None:
        return self._device

    def _missing(self, key: Any) -> ClosedStoreError | Any:
        if self._store.backend.closed:
            return ClosedStoreError(
                f"key {key!r} not found in PersistentTensorDict <closed {self._store.backend.location}>: "
                "the store was closed"
            )
        return super()._missing(key)

    # ---------------------------------------------------------------- primitives
    def _walk(
        self, parts: tuple[str, ...], *, create: bool = False
    ) -> tuple[PersistentTensorDict, str]:
        # every node below a store is one of its views (the base class types it as its own)
        found = super()._walk(_key_parts(parts, self._location), create=create)
        return cast("tuple[PersistentTensorDict, str]", found)

    def _keys_str(self) -> list[str]:
        be = self._store.backend
        if be.closed:
            raise ClosedStoreError(
                f"cannot list the keys of {self._location()}: the store is closed"
            )
        return list(self._tree.children(self._path))

    def _entries_full(self) -> tuple[ix.Entry, ...]:
        return self._entries if self._entries is not None else ix.full_entries(self._stored_batch)

    def _meta_str(self, key: str) -> EntryMeta:
        path = self._path + (key,)
        kind = self._tree.kind(path)
        if kind is None:
            raise self._missing(key)
        if kind is NodeKind.GROUP:
            return EntryMeta("nested", self._get_str(key).batch_size)
        meta = self._tree.meta(path)
        if meta.kind is ValueKind.NUMERIC and meta.torch_dtype is not None:
            shape = torch.Size(tuple(self._batch) + tuple(meta.shape[len(self._stored_batch) :]))
            return EntryMeta("tensor", shape, dtype_from_str(meta.torch_dtype))
        if meta.kind is ValueKind.UNSUPPORTED:
            return EntryMeta("non_tensor", self._batch, None, "Unsupported")
        return EntryMeta(
            "non_tensor",
            self._batch,
            None,
            "NonTensorStack" if self._reads_as_stack(meta) else "NonTensorData",
        )

    def _reads_as_stack(self, meta: Any) -> bool:
        if meta.stack_shape is not None:
            return True
        return (
            self._store.non_tensor_as_stack
            and meta.non_tensor_kind in ("str", "bytes", "other")
            and len(self._stored_batch) > 0
            and fits(meta.shape, self._stored_batch)
        )

    def _get_str(self, key: str, default: Any = REQUIRED, **_: Any) -> Any:
        path = self._path + (key,)
        be = self._store.backend
        if be.closed:
            raise self._missing(key)
        tree = self._store.tree
        kind = tree.kind(path)
        if kind is None:
            if wants_default(default):
                return default
            raise self._missing(key)
        if kind is NodeKind.GROUP:
            return self._nested_view(key)
        meta = tree.meta(path)
        if meta.kind is ValueKind.NUMERIC and meta.torch_dtype is not None:
            return self._read_leaf(path, meta)
        if meta.kind is ValueKind.UNSUPPORTED:
            what = f"holds {meta.unsupported}" if meta.unsupported else f"has dtype {meta.dtype}"
            raise UnsupportedDtypeError(
                f"key {'/'.join(path)!r} in {be.location} {what}, which has no torch equivalent"
            )
        as_stack = self._reads_as_stack(meta)
        if as_stack and self._entries is not None:
            return self._read_stack_view(path, meta)
        payload = be.read_non_tensor(
            path,
            (),
            allow_pickle=self._store.allow_pickle,
            as_stack=as_stack and meta.stack_shape is None,
        )
        if payload.is_stack:
            return NonTensorStack.from_list(payload.value, payload.stack_shape)
        return NonTensorData(payload.value, self._batch)

    def _nested_view(self, key: str) -> PersistentTensorDict:
        cached = self._nested.get(key)
        if cached is not None:
            return cached
        path = self._path + (key,)
        nested_batch = torch.Size(self._tree.group_batch(path, self._stored_batch))
        entries = None
        if self._entries is not None:
            entries = self._entries + ix.full_entries(nested_batch[len(self._stored_batch) :])
        out = type(self)._view(self._store, path, nested_batch, entries, self._device)
        if self._entries is None:
            self._nested[key] = out
        return out

    def _set_str(self, key: str, value: Any, *, inplace: bool) -> None:
        path = self._path + (key,)
        be = self._store.backend
        if be.closed:
            raise ClosedStoreError(f"cannot write key {key!r}: the store {be.location} is closed")
        kind = self._tree.kind(path)
        if isinstance(value, torch.Tensor) and value.requires_grad:
            raise UnsupportedOperationError(
                f"Cannot set a tensor that has requires_grad=True (key {key!r} in {be.location}); detach() it first."
            )
        if kind is NodeKind.ARRAY:
            meta = self._tree.meta(path)
            if (
                isinstance(value, torch.Tensor)
                and meta.kind is ValueKind.NUMERIC
                and (inplace or self._entries is not None)
            ):
                self._write_leaf(path, meta, value)
                return
            if self._entries is not None:
                if isinstance(value, (NonTensorData, NonTensorStack)):
                    return self._write_non_tensor_rows(path, meta, value)
                raise UnsupportedOperationError(
                    f"cannot replace key {key!r} of {be.location} through an indexed view; index assignment writes rows of existing entries only"
                )
            if be.writable and not inplace:
                _warn_replace(key, be.location)
            if meta.kind is ValueKind.NON_TENSOR and isinstance(
                value, (NonTensorData, NonTensorStack)
            ):
                return self._replace_non_tensor(key, path, value)
            self._delete(path)
        elif kind is NodeKind.GROUP:
            if isinstance(value, TensorDictBase) and (inplace or self._entries is not None):
                self._get_str(key).update(value, inplace=True)
                return
            if self._entries is not None:
                raise UnsupportedOperationError(
                    f"cannot replace group {key!r} of {be.location} through an indexed view"
                )
            if be.writable and not inplace:
                _warn_replace(key, be.location)
            self._delete(path)
        elif self._entries is not None:
            raise UnsupportedOperationError(
                f"cannot create key {key!r} through an indexed view of {be.location}; set it on the full tensordict"
            )
        self._create(path, value)

    def _replace_non_tensor(self, key: str, path: Path, value: Any) -> None:
        """Replace a non-tensor entry by another: the new one is written beside it first (a
        hidden sibling), so a value the format cannot hold (h5: a stack of mixed types) fails
        with the old entry untouched; then the old is deleted and the new moved into place."""
        hidden = f".ptd-new-{key}"
        fresh = path[:-1] + (hidden,)
        try:
            self._create(fresh, value)  # removes what it half-wrote when it fails
        except PtdError as err:  # named by the entry, not by its hidden sibling
            raise err.retold(lambda text: text.replace(hidden, key)) from None
        self._delete(path)
        self._backend.move(fresh, path)
        self._tree.invalidate(fresh)
        self._tree.invalidate(path)

    def _create_after_delete(self, path: Path, value: Any) -> None:
        self._delete(path)
        self._create(path, value)

    def _create(self, path: Path, value: Any) -> None:
        """Create the (absent) entry ``path``. When that fails midway (disk full, a value the
        format cannot hold), the half-written entry is removed: the others stay as they were."""
        try:
            write_value(self, path, value)
        except BaseException:
            be = self._store.backend
            self._tree.invalidate(path)
            self._nested.pop(path[-1], None)
            try:
                if be.writable and be.kind(path) is not None:
                    be.delete(path)
            except Exception:  # noqa: BLE001 - the original error is the one to report
                pass
            raise

    def _delete(self, path: Path) -> None:
        self._backend.delete(path)
        self._tree.invalidate(path)
        self._nested.pop(path[-1], None)

    def _write_meta(self, path: Path, batch: torch.Size) -> None:
        names = self._store.names.get(path)
        if names is not None and len(names) != len(batch):
            names = None
            self._store.names[path] = None
        self._backend.set_attrs(path, td_meta_attrs(batch, names))

    def _del_str(self, key: str) -> None:
        if self._entries is not None:
            raise UnsupportedOperationError(
                f"cannot delete key {key!r} through an indexed view of {self._backend.location}"
            )
        self._delete(self._path + (key,))

    def _new_nested(self, key: str) -> TensorDictBase:
        if self._entries is not None:
            raise UnsupportedOperationError(
                f"cannot create group {key!r} through an indexed view of {self._backend.location}"
            )
        path = self._path + (key,)
        self._backend.create_group(path, td_meta_attrs(self._stored_batch))
        self._tree.invalidate(path)
        self._tree.set_group_batch(path, self._stored_batch)
        return self._nested_view(key)

    def _rename(self, old: tuple[str, ...], new: tuple[str, ...]) -> None:
        if self._entries is not None:
            raise UnsupportedOperationError("cannot rename keys through an indexed view")
        old, new = _key_parts(old, self._location), _key_parts(new, self._location)
        src, dst = self._path + old, self._path + new
        be = self._backend
        if len(dst) > 1 and self._tree.kind(dst[:-1]) is None:
            self._walk(new, create=True)
        be.move(src, dst)
        self._tree.invalidate(src)
        self._tree.invalidate(dst)
        self._nested.clear()

    def _index(self, index: Any) -> PersistentTensorDict:
        self._check_open()
        entries = ix.compose(self._entries_full(), self._batch, index)
        return type(self)._view(self._store, self._path, self._stored_batch, entries, self._device)

    #: results of the shared methods are in-memory TensorDicts: TensorDict's own constructor
    _new_tensordict = TensorDict._new_tensordict

    def _set_at(self, index: Any, value: Any) -> None:
        view = self._index(index)
        if isinstance(value, Mapping):
            value = TensorDict(dict(value), batch_size=[])
        if isinstance(value, TensorDictBase):
            vb = value.batch_size
            if not (fits(view.batch_size, vb) or _broadcastable(vb, view.batch_size)):
                raise BatchSizeError(
                    f"Cannot broadcast the tensordict of batch size {list(vb)} to the shape "
                    f"{list(view.batch_size)} of the indexed persistent tensordict in {self._backend.location}"
                )
            view._write_from(value)
            return
        for parts, _ in view._tensor_leaf_metas():
            node, last = view._walk(parts)
            node._write_leaf(node._path + (last,), node._tree.meta(node._path + (last,)), value)

    def _write_from(self, value: TensorDictBase) -> None:
        """Write every entry of ``value`` that exists here into the selected rows."""
        for key in value._keys_str():
            if key not in self._keys_str():
                continue
            v = value._get_str(key)
            path = self._path + (key,)
            if isinstance(v, TensorDictBase):
                sub = self._get_str(key)
                if isinstance(sub, PersistentTensorDict):
                    sub._write_from(v)
            elif isinstance(v, torch.Tensor):
                meta = self._tree.meta(path)
                if meta.kind is ValueKind.NUMERIC:
                    self._write_leaf(path, meta, v)
            elif self._tree.kind(path) is NodeKind.ARRAY:
                self._write_non_tensor_rows(path, self._tree.meta(path), v)

    def _tensor_leaf_metas(self) -> list[tuple[tuple[str, ...], EntryMeta]]:
        return [(p, m) for p, m in self._metas(True) if m.kind == "tensor"]

    def _detached(self, value: TensorDictBase) -> TensorDictBase:
        return value.to_tensordict() if isinstance(value, PersistentTensorDict) else value

    def _non_tensor_token(self, key: str, meta: EntryMeta) -> str:
        return meta.non_tensor or "NonTensorData"

    def _nested_prefix(self) -> str:
        return type(self).__name__

    # ---------------------------------------------------------------- life cycle
    def __enter__(self) -> PersistentTensorDict:
        """``with p:`` closes the store on exit; ``with p.unlock_():``/``with p.lock_():``
        (and the other methods of :mod:`ptd.ops.lastop`) undo the method instead and leave
        the store open."""
        if entered_from_call(self._last_call, caller_site()):
            lastop_ops.push_last_op(self, self._last_op)
        else:
            lastop_ops.push_last_op(self, _CLOSE)
        self._last_call = None
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        queue = self._last_op_queue
        op = queue.pop() if queue else _CLOSE
        if op is _CLOSE:
            self.close()
            return False
        return lastop_ops.undo(self, op, exc_type)

    def __del__(self) -> None:  # the file is not closed when the object goes out of scope
        pass

    def to_tensordict(self, *, retain_none: bool | None = None) -> TensorDictBase:
        """Read every entry into an in-memory :class:`ptd.TensorDict` (one copy of the data)."""
        self._check_open()
        return super().to_tensordict()

    def clone(self, recurse: bool = True, *, filename: Any = None, **kwargs: Any) -> TensorDictBase:
        """``clone(False)``/``copy()``: a new PersistentTensorDict on the same open store (the
        store is never reopened, so a store created with mode ``"w"`` is never wiped).
        ``clone()``: a copy in a new file (``filename``, or a temporary one with a warning)."""
        if not recurse:
            out = type(self)._view(
                self._store, self._path, self._stored_batch, self._entries, self._device
            )
            return out
        if filename is None:
            import tempfile

            warnings.warn(
                "A destination should be provided when cloning a PersistentTensorDict. A temporary file will be used instead.",
                UserWarning,
                stacklevel=2,
            )
            suffix = self._backend.policy.suffix
            filename = tempfile.mkdtemp(prefix="ptd-clone-") + "/clone" + suffix
        return type(self).from_dict(
            self, filename, backend=self.backend, device=self._device, **self._store.dataset_kwargs
        )

    def to(self, *args: Any, **kwargs: Any) -> TensorDictBase:
        """``to(device)`` gives a new PersistentTensorDict on the same store reading onto that
        device (no data read); ``to(dtype)`` gives an in-memory TensorDict."""
        if kwargs.pop("inplace", False):
            raise PtdTypeError("Cannot use inplace=True with PersistentTensorDict.to().")
        if kwargs.pop("non_blocking_pin", False):
            raise UnsupportedOperationError(
                "Cannot use non_blocking_pin=True PersistentTensorDict.to(). Call `to_tensordict()` before executing this code."
            )
        device, dtype = parse_to(args, kwargs)
        if dtype is not None:
            out = self.to_tensordict().to(dtype)
            return out.to(device) if device is not None else out
        if device is None:
            return self
        return type(self)._view(self._store, self._path, self._stored_batch, self._entries, device)

    def __repr__(self) -> str:
        be = self._store.backend
        if be.closed:
            return f"PersistentTensorDict(batch_size={list(self._batch)}, <closed {be.location}>)".replace(
                " ", "", 1
            )
        return super().__repr__()

    # ------------------------------------------------------------------ what a store is
    _store: _Store
    _path: Path

    def is_memmap(self) -> bool:
        """A store is never a memory-mapped tensordict (``memmap()`` makes one)."""
        return False

    def is_shared(self) -> bool:
        """A store is never in shared memory."""
        return False

    # ------------------------------------------------------------------ ptd.containers.persistent.state
    _stored_names = state_ops._stored_names
    _names = property(state_ops._names, state_ops._assign_names)
    _set_names = state_ops._set_names
    rename = state_ops.rename
    is_locked = property(state_ops.is_locked, state_ops.set_is_locked)
    _lock_tree = state_ops._lock_tree
    _check_can_unlock = state_ops._check_can_unlock
    _unlock_tree = state_ops._unlock_tree

    # ------------------------------------------------------------------ ptd.containers.persistent.opening
    from_h5 = classmethod(opening_ops.from_h5)
    from_zarr = classmethod(opening_ops.from_zarr)
    _open_infer = classmethod(opening_ops._open_infer)
    from_dict = classmethod(opening_ops.from_dict)  # type: ignore[assignment]  # takes a filename
    __getstate__ = opening_ops.getstate
    __setstate__ = opening_ops.setstate

    # ------------------------------------------------------------------ ptd.containers.persistent.leaves
    _read_stack_view = leaves_ops._read_stack_view
    _read_leaf = leaves_ops._read_leaf
    _simple_selection = leaves_ops._simple_selection
    _leaf_view_shape = leaves_ops._leaf_view_shape
    _write_leaf = leaves_ops._write_leaf
    _write_non_tensor_rows = leaves_ops._write_non_tensor_rows

    # ------------------------------------------------------------------ ptd.containers.persistent.refused
    view = refused_ops.view
    permute = refused_ops.refused("permute")
    transpose = refused_ops.refused("transpose")
    unsqueeze = refused_ops.refused("unsqueeze")
    squeeze = refused_ops.squeeze
    select = refused_ops.refused("select")
    exclude = refused_ops.refused("exclude")
    rename_keys = refused_ops.refused("rename_keys")
    set_non_tensor = refused_ops.set_non_tensor
    share_memory_ = refused_ops.refused("share_memory_")
    pin_memory = refused_ops.refused("pin_memory")
    memmap_ = refused_ops.refused("memmap_")
    flatten_keys = refused_ops.flatten_keys
    unflatten_keys = refused_ops.unflatten_keys

    # ------------------------------------------------------------------ ptd.containers.persistent.store
    filename = property(store_ops.filename)
    mode = property(store_ops.mode)
    backend = property(store_ops.backend)
    file = property(store_ops.file)
    kwargs = property(store_ops.kwargs)
    _tree = property(store_ops._tree)
    _check_open = store_ops._check_open
    _backend = property(store_ops._backend)
    _location = store_ops._location
    close = store_ops.close

    @property
    def store_node(self) -> StoreNode:
        """The store behind this node, for code that plans its own reads: its backend, the
        node's path, the cached metadata, reads in stored coordinates (:class:`StoreNode`)."""
        return StoreNode(self)


def _broadcastable(a: Sequence[int], b: Sequence[int]) -> bool:
    """True when shape ``a`` expands to shape ``b`` (one way, as ``expand``)."""
    try:
        return tuple(torch.broadcast_shapes(tuple(a), tuple(b))) == tuple(b)
    except RuntimeError:
        return False
