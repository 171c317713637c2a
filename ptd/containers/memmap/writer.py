"""Memory-mapped directories in tensordict 0.15's layout: write them, load them.

A directory holds one ``meta.json`` per tensordict node, one ``<key>.memmap`` file of raw
little-endian C-order bytes per tensor leaf (none for a leaf with no elements), and one
sub-directory per nested tensordict, ``NonTensorData`` or ``NonTensorStack`` (see
``docs/format.md`` §3). File and directory names are the percent-encoded keys
(:func:`encode_key`), as tensordict writes them. ``tensordict.TensorDict.load_memmap`` reads
what ptd writes, and :func:`load_memmap` reads what tensordict writes.

>>> import os, tempfile, torch
>>> from ptd import TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     td = TensorDict({"a": torch.arange(6.).reshape(3, 2), "n": {"s": "hi"}}, batch_size=[3])
...     mm = td.memmap(os.path.join(tmp, "td"))
...     print(sorted(os.listdir(os.path.join(tmp, "td"))))
...     back = TensorDict.load_memmap(os.path.join(tmp, "td"))
...     print(back["a"][2], back["n", "s"], back["a"].untyped_storage().filename.endswith("a.memmap"))
['a.memmap', 'meta.json', 'n']
tensor([4., 5.]) hi True

Writing
    :func:`export_memmap` (also behind ``TensorDict.memmap``/``memmap_`` and
    ``PersistentTensorDict.memmap``) writes into a fresh hidden sibling of the destination and
    renames it into place at the end, so that a failure leaves nothing at the destination. An
    existing non-empty destination is refused unless ``overwrite=True`` (``existsok=True`` in
    the methods); it is then *replaced* as a whole, not merged. From a PersistentTensorDict
    each leaf is streamed slab by slab (a bounded number of rows, aligned to the store's
    chunks) with plain file writes, so peak memory does not grow with the store.

    A non-tensor value is written as JSON in ``meta.json`` when JSON gives back an equal value
    (str, None, bool, int, float, and lists/dicts of those), and pickled otherwise (bytes,
    tuples, numpy values...), exactly where tensordict puts it (``other.pickle`` for a
    NonTensorData, ``pickle.pkl`` for a NonTensorStack). Strings that an h5 store holds as
    tensordict strings are written as str, and numpy scalars from a store as python numbers.
    A store's string array that is not a column of its group's batch is a NonTensorStack of
    its shape, its values str (see ``docs/format.md`` §3).

Loading
    :func:`load_memmap` returns a :class:`ptd.TensorDict` whose leaves are mapped with
    ``torch.from_file`` (``mode="r+"``: writes reach the files; ``mode="r"``: copy-on-write, the
    files never change). It fixes the reference's loader: a leaf file that is too short raises
    :class:`~ptd.errors.CorruptStoreError` and is never grown, a missing leaf file or
    sub-directory raises instead of dropping the key, float8 and bfloat16 leaves load.
    **Pickles are refused by default** (``allow_pickle=False``, and ``None``, where the
    reference loads with a FutureWarning, raise :class:`~ptd.errors.PickleRefusedError` before
    reading a byte of it): pass ``allow_pickle=True`` for trusted data.
"""

from __future__ import annotations

import contextlib
import json
import os
import pickle
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from ptd.containers.base import TensorDictBase
from ptd.containers.memmap.loader import encode_key
from ptd.errors import (
    Interrupted,
    PtdError,
    PtdTypeError,
    PtdValueError,
    SkippedKeyWarning,
    StoreIOError,
)
from ptd.format.attrvalues import json_problem, json_values
from ptd.format.memmap_dir import entry_name_problem, stored_entry_name
from ptd.format.names import (
    MEMMAP_ENTRY_ATTRS,
    MEMMAP_ENTRY_NAME,
    MEMMAP_ENTRY_SHAPE,
    MEMMAP_FORMAT_VERSION,
    MEMMAP_META,
    MEMMAP_NON_TENSOR_STACK_CLASS,
    MEMMAP_NON_TENSOR_STACK_TYPE,
    MEMMAP_NON_TENSOR_TYPE,
    MEMMAP_PICKLE_FILE,
    MEMMAP_PTD_FIELD,
    MEMMAP_STACK_PICKLE_FILE,
    MEMMAP_SUFFIX,
    MEMMAP_TD_CLASS,
    MEMMAP_TD_TYPE,
)
from ptd.format.payload import check_allow_pickle, encode_json
from ptd.ops.dtypes import storage_dtype, to_storage
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.storage import cancel, runtime
from ptd.storage.cancel import cancellable
from ptd.storage.limits import check_free_space, nbytes_of
from ptd.storage.location import ReopenSpec, split_options
from ptd.storage.memmap_dir import MEMMAP_FORMAT as WRITTEN_FORMAT
from ptd.storage.publish import check_free_destination, make_temp_dir, publish, remove
from ptd.storage.stores import detect, parse_source
from ptd.transfer.attrs import decode_str, user_attrs
from ptd.transfer.plan import left_out_keys
from ptd.transfer.slabs import slab_rows

__all__ = ["MemmapSummary", "export_memmap", "tensor_nbytes"]

# ============================================================================ writing

_NO_LOCK = contextlib.nullcontext()


@dataclass
class MemmapSummary:
    """What :func:`export_memmap` wrote."""

    path: str  #: the directory
    nbytes: int = 0  #: bytes of tensor data written
    leaves: int = 0  #: tensor leaves
    non_tensors: int = 0  #: NonTensorData / NonTensorStack entries
    groups: int = 0  #: nested tensordicts
    pickled: int = 0  #: non-tensor entries that had to be pickled (not JSON)
    seconds: float = 0.0
    #: keys of the source that were not written, each ``{"key", "reason"}``: skipped links
    #: (HDF5 external or dangling), and with ``skip_unsupported`` the leaves ptd cannot copy
    not_copied: list[dict[str, str]] = field(default_factory=list)
    #: keys stored under an escaped name (``meta.json`` uses their name for a field: ``device``)
    escaped: list[str] = field(default_factory=list)


@dataclass
class _Leaf:
    rel: str
    dtype: torch.dtype
    shape: tuple[int, ...]


@dataclass
class _Node:
    """What was written for one tensordict node: enough to map it without reading meta.json."""

    rel: str
    batch_size: torch.Size
    names: list[str | None] | None
    entries: dict[str, Any] = field(default_factory=dict)


class _Writer:
    def __init__(
        self, root: str, progress: Callable[[int], Any] | None, slab_bytes: int | None
    ) -> None:
        self.root = root
        self.progress = progress
        self.slab_bytes = slab_bytes
        self.summary = MemmapSummary(path=root)
        #: keys ("a/b") left out, with their subtrees
        self.skip: set[str] = set()
        #: memmap_like: leaf files of the right size, all zeros (sparse), nothing read
        self.like = False
        #: num_threads > 1: leaf files are written on this pool; reads of the source take
        #: ``read_lock`` (a store's read caches are not shared between threads)
        self.pool: ThreadPoolExecutor | None = None
        self.read_lock = threading.Lock()
        self.futures: list[Future[None]] = []
        #: attributes meta.json cannot hold (``{"key", "attr", "reason"}``)
        self.attr_losses: list[dict[str, str]] = []

    # ------------------------------------------------------------------ nodes
    def node(self, src: TensorDictBase, rel: str, prefix: str = "") -> _Node:
        from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

        here = os.path.join(self.root, rel)
        if rel:
            os.mkdir(here)
        names = (
            src._names
            if src._names is not None and any(n is not None for n in src._names)
            else None
        )
        plan = _Node(rel, torch.Size(src.batch_size), list(names) if names else None)
        meta: dict[str, Any] = {}
        used: set[str] = {MEMMAP_META}
        is_ptd = isinstance(src, PersistentTensorDict)
        for key in src._keys_str():
            if self.skip and prefix + key in self.skip:
                continue
            kind = src._meta_str(key)
            tensor = kind.kind == "tensor"
            why = entry_name_problem(key, tensor)
            if why is not None:
                raise PtdValueError(
                    f"cannot save key {prefix + key!r} of {src._location()} as a memmap: {why}"
                )
            stored = stored_entry_name(key)
            if stored != key:
                self.summary.escaped.append(prefix + key)
            name = encode_key(stored) + (MEMMAP_SUFFIX if tensor else "")
            if name in used or stored in meta:
                raise PtdValueError(
                    f"cannot save key {prefix + key!r} of {src._location()} as a memmap: its "
                    f"file name {name!r} is taken by another key of the same tensordict"
                )
            used.add(name)
            sub_rel = os.path.join(rel, name)
            entry: dict[str, Any]
            if kind.kind == "nested":
                plan.entries[key] = self.node(src._get_str(key), sub_rel, f"{prefix}{key}/")
                entry = {"type": "TensorDict"}
                self.summary.groups += 1
            elif tensor:
                assert kind.dtype is not None
                shape = tuple(kind.shape)
                self.leaf(src, key, sub_rel, shape, kind.dtype, is_ptd)
                plan.entries[key] = _Leaf(sub_rel, kind.dtype, shape)
                entry = {
                    "device": "cpu",
                    "shape": list(shape),
                    "dtype": str(kind.dtype),
                    "is_nested": False,
                }
                self.summary.leaves += 1
            else:
                with self.read_lock if self.pool is not None else _NO_LOCK:
                    value = _store_non_tensor(src, key) if is_ptd else src._get_str(key)
                    strings = _store_string_array(src, key) if is_ptd else None
                    if strings is not None and isinstance(value, NonTensorData):
                        value = strings
                self.non_tensor(value, sub_rel, f"{key!r} of {src._location()}")
                plan.entries[key] = value
                entry = {"type": type(value).__name__}
                if strings is not None and isinstance(strings, NonTensorData):
                    # one value, the nested list of an array's strings: its shape kept
                    entry[MEMMAP_ENTRY_SHAPE] = list(np.shape(np.asarray(strings.data, object)))
                self.summary.non_tensors += 1
            if stored != key:
                entry[MEMMAP_ENTRY_NAME] = key
            if is_ptd and kind.kind != "nested":
                attrs = self.user_attrs(src, (key,), prefix + key)
                if attrs:
                    entry[MEMMAP_ENTRY_ATTRS] = attrs
            meta[stored] = entry
        if is_ptd:
            attrs = self.user_attrs(src, (), prefix.rstrip("/") or "/")
            if attrs:
                meta[MEMMAP_PTD_FIELD] = {"attrs": attrs}
        meta.update(
            shape=list(plan.batch_size),
            device="cpu",
            _type=MEMMAP_TD_TYPE,
            _format_version=MEMMAP_FORMAT_VERSION,
            _class=MEMMAP_TD_CLASS,
        )
        if plan.names is not None:
            meta["_names"] = plan.names
        _write_bytes(os.path.join(here, MEMMAP_META), json.dumps(meta).encode("utf-8"))
        return plan

    def user_attrs(self, src: Any, rel: tuple[str, ...], key: str) -> dict[str, Any]:
        """The user attributes of ``rel`` (relative to the store node ``src``; ``()``: its
        own) as JSON values; those JSON cannot hold are listed in ``not_copied``
        (``{"key", "attr", "reason"}``)."""
        with self.read_lock if self.pool is not None else _NO_LOCK:
            try:
                # (a leaf's attributes come from the metadata the store already read)
                raw = user_attrs(src.store_node.attrs(rel))
            except PtdError as err:
                self.attr_losses.append({"key": key, "attr": "*", "reason": str(err)})
                return {}
        ok = {}
        for name, value in raw.items():
            value = decode_str(value)  # UTF-8 bytes are text (h5's variable-length strings)
            problem = json_problem(value)  # meta.json is JSON
            if problem is None:
                value = json_values({name: value})[name]
                try:
                    json.dumps(value)
                except (TypeError, ValueError) as err:
                    problem = f"it has no JSON value ({err})"
            if problem is None:
                ok[name] = value
            else:
                self.attr_losses.append({"key": key, "attr": name, "reason": problem})
        return ok

    # ------------------------------------------------------------------ tensors
    def leaf(
        self,
        src: TensorDictBase,
        key: str,
        rel: str,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        is_ptd: bool,
    ) -> None:
        np_dtype, _ = storage_dtype(dtype, key)
        need = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
        if need == 0:
            return  # tensordict writes no file for an empty leaf
        path = os.path.join(self.root, rel)
        if self.like:
            with open(path, "wb") as f:
                f.truncate(need)
            return
        slabs = (
            self._ptd_slabs(src, key, shape, np_dtype) if is_ptd else self._tensor_slabs(src, key)
        )
        if self.pool is not None:
            self.futures.append(
                self.pool.submit(self._write_file, src, key, path, slabs, np_dtype, need)
            )
        else:
            self._write_file(src, key, path, slabs, np_dtype, need)

    def _next_slab(self, slabs: Iterator[np.ndarray]) -> np.ndarray | None:
        if self.pool is None:
            return next(slabs, None)
        with self.read_lock:
            return next(slabs, None)

    def _write_file(
        self,
        src: TensorDictBase,
        key: str,
        path: str,
        slabs: Iterator[np.ndarray],
        np_dtype: np.dtype,
        need: int,
    ) -> None:
        done = 0
        with open(path, "wb") as f:
            while (arr := self._next_slab(slabs)) is not None:
                if not arr.dtype.isnative:
                    arr = arr.astype(arr.dtype.newbyteorder("="))
                if arr.dtype.itemsize != np_dtype.itemsize:
                    raise PtdTypeError(f"key {key!r}: read {arr.dtype}, expected {np_dtype}")
                arr.tofile(f)
                done += arr.nbytes
                if self.progress is not None:
                    self.progress(arr.nbytes)
        if done != need:
            raise PtdValueError(
                f"key {key!r} of {src._location()}: wrote {done} bytes, expected {need}"
            )
        with self.read_lock if self.pool is not None else _NO_LOCK:
            self.summary.nbytes += done

    def tree(self, src: TensorDictBase) -> _Node:
        """Write the whole tree; with a pool, wait for every leaf file (the first error of a
        worker is raised here)."""
        try:
            plan = self.node(src, "")
        except BaseException:
            for f in self.futures:  # let the workers finish before the files are removed
                f.cancel()
            wait(self.futures)
            raise
        for f in self.futures:
            f.result()
        return plan

    def _tensor_slabs(self, src: TensorDictBase, key: str) -> Iterator[np.ndarray]:
        value = src._get_str(key)
        if value.layout != torch.strided or value.is_nested:
            raise PtdTypeError(
                f"cannot save key {key!r} as a memmap: {value.layout} tensors are not supported"
            )
        arr, _ = to_storage(value, key)
        if arr.flags.c_contiguous or arr.ndim == 0:
            yield arr
            return
        rows = slab_rows(arr.shape, arr.dtype.itemsize, budget=self.slab_bytes)
        for start in range(0, arr.shape[0], rows):
            yield np.ascontiguousarray(arr[start : start + rows])

    def _ptd_slabs(
        self, node: Any, key: str, shape: tuple[int, ...], np_dtype: np.dtype
    ) -> Iterator[np.ndarray]:
        """The stored bits of a store's leaf, a bounded number of rows at a time."""
        store = node.store_node
        meta = store.meta((key,))
        if not store.selected:  # the whole array: read row slabs straight from the backend
            stored = tuple(meta.shape)
            if not stored:
                yield np.asarray(store.read((key,)))
                return
            chunk_rows = meta.chunks[0] if meta.chunks else None
            rows = slab_rows(
                stored, np_dtype.itemsize, src_chunk_rows=chunk_rows, budget=self.slab_bytes
            )
            if rows >= stored[0]:  # one slab: the whole array, read as such (a small leaf)
                yield np.asarray(store.read((key,)))
                return
            for start in range(0, stored[0], rows):
                yield np.asarray(store.read((key,), (slice(start, min(stored[0], start + rows)),)))
            return
        if not node.batch_size:  # a view of one element
            yield to_storage(store.read_leaf((key,)), key)[0]
            return
        rows = slab_rows(shape, np_dtype.itemsize, budget=self.slab_bytes)
        for start in range(0, shape[0], rows):
            view = node._index(slice(start, min(shape[0], start + rows)))
            yield to_storage(view.store_node.read_leaf((key,)), key)[0]

    # ------------------------------------------------------------------ non-tensors
    def non_tensor(self, value: Any, rel: str, what: str) -> None:
        here = os.path.join(self.root, rel)
        os.mkdir(here)
        if isinstance(value, NonTensorStack):
            data = value.tolist()
            meta: dict[str, Any] = {
                "_type": MEMMAP_NON_TENSOR_STACK_TYPE,
                "_format_version": MEMMAP_FORMAT_VERSION,
                "_class": MEMMAP_NON_TENSOR_STACK_CLASS,
                "stack_dim": 0,
                "device": None,
            }
            if encode_json(data) is not None:
                meta["data"] = data
            else:
                _write_bytes(os.path.join(here, MEMMAP_STACK_PICKLE_FILE), _pickle(data, what))
                meta["data"] = MEMMAP_STACK_PICKLE_FILE
                self.summary.pickled += 1
            text = json.dumps(meta, separators=(",", ":"))
        else:
            meta = {"_type": MEMMAP_NON_TENSOR_TYPE}
            if encode_json(value.data) is not None:
                meta["data"] = value.data
            else:
                _write_bytes(
                    os.path.join(here, MEMMAP_PICKLE_FILE), _pickle({"data": value.data}, what)
                )
                self.summary.pickled += 1
            meta.update(_metadata=None, _is_non_tensor=True)
            text = json.dumps(meta)
        _write_bytes(os.path.join(here, MEMMAP_META), text.encode("utf-8"))


def _pickle(value: Any, what: str) -> bytes:
    try:
        return pickle.dumps(value)
    except Exception as err:  # noqa: BLE001 - whatever pickle raises
        raise PtdTypeError(
            f"cannot save {what} as a memmap: it is not JSON and cannot be pickled ({err})"
        ) from None


def _write_bytes(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)


def _store_string_array(node: Any, key: str) -> NonTensorStack | NonTensorData | None:
    """A store's string array that its node reads as one value (not a column of the group's
    batch), as a stack of its strings of the array's shape; None for any other entry (a view
    is read as it is).

    Bytes are decoded as UTF-8 text, as a tensordict holds strings (JSON in ``meta.json``);
    an array holding bytes that are not UTF-8 stays a stack of bytes (pickled). An array
    whose shape does not start with the group's batch size cannot be a stack there: it is
    one value, the nested list of its strings."""
    store = node.store_node
    if store.selected:
        return None
    path = store.key_path((key,))
    meta = store.meta((key,))
    if not meta.shape or meta.stack_shape is not None:
        return None
    backend = store.backend
    if backend.string_type(meta) is None:
        return None
    shape = tuple(meta.shape)
    batch = tuple(node.batch_size)
    strings = backend.read_strings(path)
    values = np.asarray(strings, dtype=object).reshape(-1).tolist()
    try:
        values = [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]
    except UnicodeDecodeError:
        values = [v if isinstance(v, bytes) else str(v).encode("utf-8") for v in values]
    nested = _nest(values, shape)
    if shape[: len(batch)] != batch:  # a stack must extend its group's batch size
        return NonTensorData(nested, node.batch_size)
    return NonTensorStack.from_list(nested, shape)


def _nest(flat: list[Any], shape: tuple[int, ...]) -> list[Any]:
    """The C-order values ``flat`` as a nested list of ``shape`` (at least one dim)."""
    if len(shape) == 1:
        return flat
    step = len(flat) // shape[0] if shape[0] else 0
    return [_nest(flat[i * step : (i + 1) * step], shape[1:]) for i in range(shape[0])]


def _store_non_tensor(node: Any, key: str) -> NonTensorData | NonTensorStack:
    """A store's non-tensor entry, as the value the user saved: strings that an h5 store marks
    as tensordict strings are str (not bytes), numpy scalars are python values."""
    with warnings.catch_warnings():
        warnings.filterwarnings(
            "ignore",
            message="The h5 backend of PersistentTensorDict reads the string",
            category=FutureWarning,
        )
        value = node._get_str(key)
    if isinstance(value, NonTensorStack):
        return value
    data = value.data
    if isinstance(data, np.bytes_):
        data = bytes(data)
    if isinstance(data, bytes) and node.store_node.meta((key,)).non_tensor_kind == "str":
        with contextlib.suppress(UnicodeDecodeError):
            data = data.decode("utf-8")
    elif isinstance(data, np.generic):
        data = data.item()
    return NonTensorData(data, value.batch_size)


# ============================================================================ placing the directory


#: what to pass instead of ``overwrite=True`` when the destination exists


def _source_path(src: Any) -> str | None:
    name = getattr(src, "filename", None)
    if isinstance(name, (str, os.PathLike)):
        return os.path.realpath(os.fspath(name))
    return None


def _write(
    src: TensorDictBase,
    dst: str | None,
    *,
    overwrite: bool,
    progress: Callable[[int], Any] | None,
    slab_bytes: int | None,
    not_copied: dict[str, str] | None = None,
    like: bool = False,
    num_threads: int = 0,
    _pool: ThreadPoolExecutor | None = None,
) -> tuple[_Node, MemmapSummary, str]:
    """Write ``src`` to ``dst`` (a fresh temporary directory when None); return the plan, the
    summary and the directory. ``not_copied``: keys to leave out ("a/b" -> why); ``like``:
    zero-filled leaves; ``num_threads`` > 1: leaf files written on that many threads."""
    if num_threads > 1:
        with runtime.job_pool(num_threads, "memmap") as pool:
            return _write(
                src,
                dst,
                overwrite=overwrite,
                progress=progress,
                slab_bytes=slab_bytes,
                not_copied=not_copied,
                like=like,
                num_threads=0,
                _pool=pool,
            )
    start = time.perf_counter()
    if dst is None:
        root = tempfile.mkdtemp(prefix="ptd-memmap-")
        writer = _Writer(root, progress, slab_bytes)
        writer.skip, writer.like, writer.pool = set(not_copied or ()), like, _pool
        try:
            plan = writer.tree(src)
        except BaseException:
            remove(root)
            raise
    else:
        root = os.path.abspath(os.fspath(dst))
        if not os.path.basename(root):
            raise PtdValueError(f"invalid memmap prefix {dst!r}")
        source = _source_path(src)
        if source is not None and os.path.commonpath(
            [source, os.path.realpath(root)]
        ) == os.path.realpath(root):
            raise PtdValueError(
                f"cannot write a memmap directory at {root}: the source {source} is inside it"
            )
        check_free_destination(root, overwrite, option="overwrite")
        os.makedirs(os.path.dirname(root), exist_ok=True)
        check_free_space(os.path.dirname(root), tensor_nbytes(src), root)
        tmp = make_temp_dir(root)
        writer = _Writer(tmp, progress, slab_bytes)
        writer.skip, writer.like, writer.pool = set(not_copied or ()), like, _pool
        try:
            cancel.phase("copying", root)
            plan = writer.tree(src)
            cancel.phase("publishing", root)
            check_free_destination(root, overwrite, option="overwrite")
            cancel.check()  # the last moment a stop leaves nothing: then the rename commits
            publish(tmp, root)
        except BaseException as err:
            left = remove(tmp)
            if isinstance(err, Interrupted):
                err.left_behind = left
            if isinstance(err, OSError) and not isinstance(err, PtdError):
                # named by the destination, never by its temporary sibling (gone by now)
                what = err.strerror or str(err).replace(tmp, root) or type(err).__name__
                where = f": {str(err.filename).replace(tmp, root)}" if err.filename else ""
                raise StoreIOError(
                    f"cannot write the memmap directory {root}: {what}{where}", path=root
                ) from err
            if isinstance(err, PtdError):
                raise err.retold(lambda text: text.replace(tmp, root)) from None
            raise
    writer.summary.path = root
    writer.summary.seconds = time.perf_counter() - start
    writer.summary.not_copied = [
        {"key": k, "reason": r} for k, r in (not_copied or {}).items()
    ] + writer.attr_losses
    return plan, writer.summary, root


@cancellable  # Ctrl-C / SIGTERM stop it at its next read (ptd.storage.cancel)
def export_memmap(
    src: Any,
    dst: str | os.PathLike[str],
    *,
    overwrite: bool = False,
    progress: Callable[[int], Any] | None = None,
    allow_pickle: bool | None = None,
    slab_bytes: int | None = None,
    storage_options: dict[str, Any] | None = None,
    skip_unsupported: bool = False,
) -> MemmapSummary:
    """Write ``src`` as a memmap directory at ``dst`` and return what was written.

    Args:
        src: a tensordict (a PersistentTensorDict is streamed slab by slab), or the path of an
            h5 file or zarr store (opened read-only, batch size as recorded, closed after).
        dst: the directory to create. An existing non-empty one is refused (StoreExistsError)
            unless ``overwrite``, which replaces it as a whole once the new one is complete.
        progress: called with the byte count of every slab written.
        allow_pickle: for a zarr path: the store's pickled entries policy (see from_zarr).
        slab_bytes: about how many bytes of a leaf are read at a time (default: the shared
            :data:`ptd.transfer.slabs.SLAB_BYTES`).
        storage_options: for a URL ``src`` (``s3://...``): the fsspec options (an error when
            neither ``src`` nor ``dst`` is a URL).
        skip_unsupported: for a path ``src``: leave out the leaves ptd cannot copy (HDF5
            references, vlen sequences, compound types) and list them in
            ``summary.not_copied``; by default they are refused (UnsupportedDtypeError naming
            the first). Skipped links (HDF5 external or dangling) are always left out, listed.
    """
    check_allow_pickle(allow_pickle)
    cancel.phase("planning", os.fspath(dst))
    if isinstance(src, TensorDictBase):
        return _write(
            src, os.fspath(dst), overwrite=overwrite, progress=progress, slab_bytes=slab_bytes
        )[1]
    from ptd.containers.persistent.opening import open_existing
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

    # the source may lead into a store (robo.h5/data/demo_0: that group is exported)
    loc = detect(parse_source(split_options(storage_options, src, dst)[0]))
    if loc.format == WRITTEN_FORMAT:  # the source is of the format this module writes
        raise PtdValueError(f"{loc.described} is a memmap directory already: copy it instead")
    left_out, lost = left_out_keys(loc, WRITTEN_FORMAT, skip_unsupported)
    # opened as a streamed pass opens it (without memory maps), with its storage options
    stream = ReopenSpec.make(loc, "r").streaming()
    kwargs: dict[str, Any] = dict(stream.options.given(), mode=stream.mode)
    if loc.options is not None:
        kwargs["storage_options"] = loc.options
    with warnings.catch_warnings():
        # the skipped links are listed in the summary's not_copied
        warnings.simplefilter("ignore", SkippedKeyWarning)
        assert loc.format is not None
        store = open_existing(
            PersistentTensorDict, loc.path, loc.format, allow_pickle=allow_pickle, **kwargs
        )
    owner = store
    source: TensorDictBase = store
    if loc.inner:
        sub = owner.get(loc.inner)
        if not isinstance(sub, TensorDictBase):
            owner.close()
            raise PtdValueError(
                f"{loc.described} is an array: ptd memmap exports a store or a group of it"
            )
        source = sub
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SkippedKeyWarning)
            summary = _write(
                source,
                os.fspath(dst),
                overwrite=overwrite,
                progress=progress,
                slab_bytes=slab_bytes,
                not_copied=left_out,
            )[1]
            summary.not_copied.extend(lost)
            return summary
    finally:
        owner.close()


def tensor_nbytes(td: TensorDictBase) -> int:
    """Bytes of tensor data ``td`` holds (what :func:`export_memmap` will write), read from
    metadata only: the total for a progress bar."""
    total = 0
    for _, meta in td._metas(True):
        if meta.kind == "tensor" and meta.dtype is not None:
            total += nbytes_of(meta.shape, meta.dtype.itemsize)  # python ints: no overflow
    return total
