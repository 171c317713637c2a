"""The HDF5 backend (h5py), on-disk compatible with tensordict 0.15's ``backend="h5"``.

Layout (see ``shared/reference/format.md`` §1): a nested key ``("a", "b")`` is the HDF5 path
``a/b``; groups are nested tensordicts, datasets are leaves. Non-tensors follow tensordict's
conventions (vlen UTF-8 strings marked ``__tensordict_str__``, opaque bytes/numbers, stacks
marked ``__tensordict_stack__``) plus one ptd extension: values that have no HDF5 form (None,
dicts, lists of non-numbers) are stored as their JSON text in a string dataset marked
``__ptd_json__`` (tensordict reads such an entry as the ``bytes`` of that text). Nothing is ever
pickled on h5. ``bytes`` ending in NUL bytes, which numpy's ``S`` type would cut, are stored as
raw opaque bytes (``|V<n>``; tensordict reads them as ``np.void``).

Reads follow tensordict 0.15: a string that tensordict (or ptd) wrote, marked
``__tensordict_str__``, reads as ``bytes`` with tensordict's ``FutureWarning``; foreign strings
read as ``bytes`` silently; opaque values as the numpy scalar/array h5py returns. Group and
dataset attributes that are dicts are stored as JSON object text and decoded on read.

This is the only module of ptd that imports h5py.
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import h5py
import numpy as np

from ptd.errors import (
    ClosedStoreError,
    CorruptStoreError,
    PtdError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreLockedError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from ptd.format.dtypes import torch_dtype_name
from ptd.format.names import PTD_JSON_ATTR, TD_STACK_ATTR, TD_STR_ATTR
from ptd.format.payload import all_of_type, encode_json, nested_to_array, parse_stack_shape
from ptd.storage.backends import fast_path as _mmap
from ptd.storage.backends.base import (
    ArrayMeta,
    Backend,
    NodeKind,
    NonTensorPayload,
    Path,
    Selection,
    ValueKind,
    check_mode,
    check_path,
    fit_write_value,
    selection_shape,
)
from ptd.storage.location import ReopenSpec, StoreLocation

__all__ = ["H5Backend"]

#: dataset creation options that a scalar (or unchunkable) dataset cannot take
_CHUNK_OPTIONS = frozenset(
    {
        "chunks",
        "compression",
        "compression_opts",
        "shuffle",
        "fletcher32",
        "scaleoffset",
        "maxshape",
    }
)
#: block size of the cache of an HDF5 file read from a URL
_REMOTE_BLOCK = 4 << 20
#: reads of at least this many bytes go straight into a new array (one copy less)
_DIRECT_READ_BYTES = 1 << 20
#: an index array is read as the span between its first and last row when that span is at
#: most this many bytes, or at most this many times the rows asked (h5py point selection is slow)
_SPAN_BYTES = 256 << 10
_SPAN_RATIO = 2

_STACK_TYPE_ERROR = (
    "Cannot write a NonTensorStack to h5 unless its elements are all str, bytes, bool, int or "
    "float, of a single type. Use zarr, or a TensorDict saved with memmap, for other values."
)
_NUL_ERROR = (
    "Cannot write a NonTensorStack of str that contains a NUL character to h5: h5 strings cannot "
    "hold it. Use bytes, zarr, or a TensorDict saved with memmap."
)
_STR_WARNING = (
    "The h5 backend of PersistentTensorDict reads the string {name!r}, which tensordict wrote, "
    "as bytes. Starting with TensorDict 0.17, the default will change to reading it as str, as "
    "the other backends do. To support both, decode only bytes: "
    "`value.decode() if isinstance(value, bytes) else value`."
)
_FILTER_NAMES = {
    h5py.h5z.FILTER_DEFLATE: "gzip",
    h5py.h5z.FILTER_SHUFFLE: "shuffle",
    h5py.h5z.FILTER_FLETCHER32: "fletcher32",
    h5py.h5z.FILTER_SZIP: "szip",
    h5py.h5z.FILTER_NBIT: "nbit",
    h5py.h5z.FILTER_SCALEOFFSET: "scaleoffset",
    h5py.h5z.FILTER_LZF: "lzf",
}


#: a cached dataset: (dataset, shape, dtype, nbytes)
_Entry = tuple[h5py.Dataset, tuple[int, ...], np.dtype, int]


def _plain(value: Any) -> Any:
    """An attribute value as plain python (numpy scalars/arrays -> python/lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, h5py.Empty):
        return None
    if isinstance(value, str) and value.startswith("{"):
        # dicts are stored as JSON object text (see set_attrs)
        try:
            decoded = json.loads(value)
        except ValueError:
            return value
        return decoded if isinstance(decoded, dict) else value
    return value


def _attr_value(value: Any) -> Any:
    """A python attribute value in a form h5py can store: dicts become JSON object text,
    lists of str vlen string arrays, None an empty attribute."""
    if value is None:
        return h5py.Empty("f")
    if isinstance(value, Mapping):
        return json.dumps(dict(value))
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, str) for v in value):
            return np.array(value, dtype=h5py.string_dtype())
        arr = np.asarray(value)
        if arr.dtype.kind in "OU":
            raise TypeError("only lists of numbers or of str can be stored (dicts as JSON)")
        return arr
    return value


def _is_non_tensor_dtype(dt: np.dtype) -> bool:
    """tensordict's test: string, vlen, enum or opaque (h5py's own type metadata)."""
    return bool(
        dt.kind in "OSU"
        or h5py.check_string_dtype(dt)
        or h5py.check_vlen_dtype(dt)
        or h5py.check_enum_dtype(dt)
        or h5py.check_opaque_dtype(dt)
    )


def _holds_raw_objects(dt: np.dtype) -> bool:
    """Whether h5py would turn stored bytes into python object pointers when reading ``dt``
    (an opaque type tagged as a numpy object dtype, also inside a vlen, array or compound
    type): reading such data crashes the interpreter, so ptd never does."""
    if not dt.hasobject:
        return False
    if h5py.check_opaque_dtype(dt):
        return True
    if h5py.check_string_dtype(dt) is not None or h5py.check_ref_dtype(dt) is not None:
        return False
    base = h5py.check_vlen_dtype(dt)
    if base is not None:
        return _holds_raw_objects(base)
    if dt.subdtype is not None:
        return _holds_raw_objects(dt.subdtype[0])
    if dt.fields:
        return any(_holds_raw_objects(field[0]) for field in dt.fields.values())
    return False


def _opaque(arr: np.ndarray) -> np.ndarray:
    return arr.astype(h5py.opaque_dtype(arr.dtype))


class H5Backend(Backend):
    """One open HDF5 file (or a group inside a user's ``h5py.File``)."""

    name = "h5"

    def __init__(
        self,
        root: h5py.Group,
        *,
        path: str | None,
        owns_file: bool,
        locking: Any = None,
        read_only: bool = False,
        fast_path: bool | None = None,
    ) -> None:
        self._root = root
        self._path = path
        self._owns_file = owns_file
        self._locking = locking
        self._closed = False
        # mode "r" stays read-only even when HDF5 shares an already writable handle
        self._writable = root.file.mode == "r+" and not read_only
        self._ds_cache: dict[Path, _Entry] = {}
        self._outside: set[Path] = set()  # datasets whose data lives in other files
        # the fast path: contiguous datasets read from a memory map (ptd/backends/_mmap.py)
        self._fast_path = fast_path
        self._maps = _mmap.H5Maps.create(root.file, fast_path)
        if path is not None:
            self._location = path
        else:
            name = root.file.filename
            self._location = name if root.name == "/" else f"{name}:{root.name}"

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        target: Any,
        mode: str = "r",
        *,
        locking: Any = None,
        fast_path: bool | None = None,
        storage_options: dict[str, Any] | None = None,
        **_: Any,
    ) -> H5Backend:
        """Open an HDF5 file by path, or wrap an open ``h5py.File``/``h5py.Group``.

        A user's file or group is used as the root (``mode`` is then ignored) and is not closed
        by :meth:`close`. ``locking`` goes to ``h5py.File``. ``fast_path``: read contiguous
        datasets from a memory map (None: on unless ``PTD_FAST_PATH=0``; see ``_mmap``).
        """
        check_mode(mode)
        if isinstance(target, (h5py.File, h5py.Group)):
            if not target.id.valid:
                raise ClosedStoreError(f"the h5py object {target!r} is closed")
            return cls(target, path=None, owns_file=False, locking=locking, fast_path=fast_path)
        try:
            path = os.fspath(target)
        except TypeError:
            raise PtdTypeError(
                f"cannot open {target!r} with the h5 backend: expected a path, an h5py.File or "
                "an h5py.Group"
            ) from None
        path = os.fsdecode(path)
        from ptd.storage import remote as _url

        path = _url.normalize(path)  # file:// -> a local path
        if _url.is_remote(path):
            return cls._open_remote(path, mode, storage_options)
        if storage_options is not None:
            raise PtdValueError(
                f"storage_options only apply to URLs (like 's3://...'), not to the local path {path}"
            )
        if os.path.isdir(path):
            raise CorruptStoreError(f"{path} is a directory, not an HDF5 file")
        exists = os.path.exists(path)
        if mode in ("r", "r+") and not exists:
            raise StoreNotFoundError(f"HDF5 file {path} does not exist")
        if mode in ("w-", "x") and exists:
            raise StoreExistsError(
                f"HDF5 file {path} already exists (mode {mode!r}); use mode 'w' to overwrite it "
                "or 'a' to append"
            )
        try:
            file = h5py.File(path, mode, locking=locking)
        except FileNotFoundError:
            raise StoreNotFoundError(f"HDF5 file {path} does not exist") from None
        except FileExistsError:
            raise StoreExistsError(f"HDF5 file {path} already exists (mode {mode!r})") from None
        except PermissionError as err:
            raise ReadOnlyError(f"cannot open {path} in mode {mode!r}: {err}") from None
        except OSError as err:
            msg = str(err)
            if "unable to lock" in msg or "already open" in msg or "locking" in msg:
                raise StoreLockedError(
                    f"cannot open {path} in mode {mode!r}: it is locked or already open "
                    f"({msg}). Close the other handle, or pass locking=False (or set "
                    "HDF5_USE_FILE_LOCKING=FALSE) if the file system does not support locks."
                ) from None
            raise CorruptStoreError(f"{path} is not a readable HDF5 file: {msg}") from None
        return cls(
            file,
            path=path,
            owns_file=True,
            locking=locking,
            read_only=mode == "r",
            fast_path=fast_path,
        )

    @classmethod
    def _open_remote(
        cls, url: str, mode: str, storage_options: dict[str, Any] | None
    ) -> H5Backend:
        """A read-only HDF5 file at an fsspec URL (``s3://bucket/data.h5``), read through an
        fsspec file object with a block cache."""
        from ptd.errors import UnsupportedOperationError
        from ptd.storage import remote as _url

        if mode != "r":
            raise UnsupportedOperationError(
                f"cannot open {url} in mode {mode!r}: HDF5 files at URLs are read-only; write a "
                "local file and upload it, or write zarr to the URL (s3://.../data.zarr)"
            )
        fs, fpath, kind = _url.probe(url, storage_options)
        if kind is None:
            _url.check_bucket(fs, fpath, url)
            raise StoreNotFoundError(f"HDF5 file {url} does not exist")
        if kind != "file":
            raise CorruptStoreError(f"{url} is a directory, not an HDF5 file")
        try:
            try:
                fobj = fs.open(fpath, "rb", block_size=_REMOTE_BLOCK, cache_type="blockcache")
            except TypeError:  # a filesystem without block caches (memory://)
                fobj = fs.open(fpath, "rb")
        except Exception as err:  # noqa: BLE001 - translated to one line
            raise _url.remote_error(err, url) from None
        try:
            file = h5py.File(fobj, "r")
        except Exception as err:  # noqa: BLE001 - not HDF5, or the connection failed
            fobj.close()
            if isinstance(err, OSError) and not isinstance(err, PermissionError):
                raise CorruptStoreError(f"{url} is not a readable HDF5 file: {err}") from None
            raise _url.remote_error(err, url) from None
        be = cls(file, path=url, owns_file=True, read_only=True)
        be._fileobj = fobj
        be._storage_options = storage_options
        return be

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._ds_cache.clear()
        if self._maps is not None:
            self._maps.close()
            self._maps = None
        if self._owns_file:
            try:
                self._root.file.close()
            except Exception:  # noqa: BLE001 - closing an already invalid file
                pass
        fileobj = getattr(self, "_fileobj", None)
        if fileobj is not None:  # a remote file's fsspec file object, after h5py's file
            self._fileobj = None
            fileobj.close()

    @property
    def closed(self) -> bool:
        return self._closed or not self._root.id.valid

    @property
    def writable(self) -> bool:
        return self._writable and not self.closed

    @property
    def location(self) -> str:
        return self._location

    @property
    def reopen_spec(self) -> ReopenSpec | None:
        if self._path is None:
            return None
        so = getattr(self, "_storage_options", None)
        loc = StoreLocation(self._path, tuple(sorted((so or {}).items())), "h5")
        # never "w"/"w-": reopening must not truncate (nor fail on) the file we made
        return ReopenSpec.make(
            loc, "r+" if self._writable else "r", locking=self._locking, fast_path=self._fast_path
        )

    # --- helpers -----------------------------------------------------------------------------
    def _check_open(self, key: str = "/") -> None:
        if self.closed:
            raise ClosedStoreError(f"cannot access key {key!r}: {self._location} is closed")

    def _check_writable(self, key: str) -> None:
        self._check_open(key)
        if not self._writable:
            raise ReadOnlyError(
                f"cannot write key {key!r}: {self._location} is opened read-only (mode 'r')"
            )

    def _node(self, path: Path) -> h5py.Group | h5py.Dataset:
        key = self.key_str(path)
        self._check_open(key)
        if not path:
            return self._root
        try:
            return self._root["/".join(path)]
        except (KeyError, ValueError, TypeError):
            raise PtdKeyError(f"key {key!r} not found in {self._location}") from None

    def _entry(self, path: Path, data: bool = True) -> _Entry:
        """``(dataset, shape, dtype, nbytes)``, cached (ptd never resizes a dataset).

        ``data``: the caller reads or writes the data, which must then lie in this file: a
        dataset with external raw storage or a virtual dataset (data in other files, which a
        hostile file could point anywhere) raises UnsupportedOperationError."""
        entry = self._ds_cache.get(path)
        if entry is not None and not self._closed:
            if data and path in self._outside:
                self._refuse_outside(path)
            return entry
        node = self._node(path)
        if not isinstance(node, h5py.Dataset):
            raise PtdKeyError(
                f"key {self.key_str(path)!r} in {self._location} is a group, not an array"
            )
        dsid = node.id
        dcpl = dsid.get_create_plist()
        if dcpl.get_layout() == h5py.h5d.VIRTUAL or dcpl.get_external_count():
            self._outside.add(path)
            if data:
                self._refuse_outside(path)
        shape, dtype = dsid.shape, dsid.dtype
        entry = (node, shape, dtype, int(np.prod(shape, dtype=np.int64)) * dtype.itemsize)
        self._ds_cache[path] = entry
        return entry

    def _dataset(self, path: Path) -> h5py.Dataset:
        return self._entry(path)[0]

    def _refuse_outside(self, path: Path) -> None:
        raise UnsupportedOperationError(
            f"key {self.key_str(path)!r} of {self._location} keeps its data outside the file "
            "(external storage or a virtual dataset): ptd does not follow it, since a file "
            "could point it at any file on this machine. Read it with h5py if you trust the file."
        )

    def raw_group(self, path: Path) -> Any:
        return self._group(path)

    def _group(self, path: Path) -> h5py.Group:
        node = self._node(path)
        if not isinstance(node, h5py.Group):
            raise PtdKeyError(
                f"key {self.key_str(path)!r} in {self._location} is an array, not a group"
            )
        return node

    def _parent_for_create(self, path: Path) -> tuple[h5py.Group, str]:
        """The (created) parent group of ``path`` and the last name; an existing node at
        ``path`` is deleted first (creation replaces)."""
        key = self.key_str(path)
        self._check_writable(key)
        if not path:
            raise PtdValueError(f"cannot create an array at the root of {self._location}")
        check_path(path, self._location)
        parent = self._root
        try:
            for i, part in enumerate(path[:-1]):
                child = parent.get(part)
                if child is None:
                    child = parent.create_group(part)
                elif not isinstance(child, h5py.Group):
                    raise PtdKeyError(
                        f"cannot create key {key!r} in {self._location}: "
                        f"{self.key_str(path[: i + 1])!r} is an array"
                    )
                parent = child
            if path[-1] in parent:
                del parent[path[-1]]
                self._ds_cache.clear()
        except (OSError, ValueError, KeyError) as err:
            if isinstance(err, PtdKeyError):
                raise
            raise PtdValueError(f"cannot create key {key!r} in {self._location}: {err}") from None
        self._ds_cache.pop(path, None)
        return parent, path[-1]

    def _attrs_of(self, obj: h5py.HLObject) -> dict[str, Any]:
        if not h5py.h5a.get_num_attrs(obj.id):
            return {}
        attrs = obj.attrs
        out = {}
        for k in attrs:
            try:
                dt = attrs.get_id(k).dtype
            except (TypeError, ValueError, KeyError):
                continue  # a type numpy cannot represent: not one of ours, ignored
            if _holds_raw_objects(dt):
                continue  # an opaque tag naming python objects: reading it would crash h5py
            out[k] = _plain(attrs[k])
        return out

    def _meta(self, path: Path, ds: h5py.Dataset) -> ArrayMeta:
        dsid = ds.id
        dt = dsid.dtype
        attrs = self._attrs_of(ds)
        dcpl = dsid.get_create_plist()
        chunks = dcpl.get_chunk() if dcpl.get_layout() == h5py.h5d.CHUNKED else None
        compression = None
        if chunks is not None and dcpl.get_nfilters():
            names = []
            for i in range(dcpl.get_nfilters()):
                code, _flags, values, _name = dcpl.get_filter(i)
                name = _FILTER_NAMES.get(code, f"filter{code}")
                if code == h5py.h5z.FILTER_DEFLATE and values:
                    name = f"gzip({values[0]})"
                names.append(name)
            compression = "+".join(names)
        torch_dtype = None
        non_tensor_kind = None
        stack_shape = None
        if _is_non_tensor_dtype(dt):
            kind = ValueKind.NON_TENSOR
            if attrs.get(PTD_JSON_ATTR):
                non_tensor_kind = "json"
            elif h5py.check_opaque_dtype(dt):
                non_tensor_kind = "bytes" if dt.kind in "SV" else "opaque"
            elif h5py.check_string_dtype(dt) is not None:
                non_tensor_kind = "str"
            elif dt.kind in "SU":
                non_tensor_kind = "str"
            else:
                non_tensor_kind = "other"
            if TD_STACK_ATTR in attrs:
                stack_shape = parse_stack_shape(attrs[TD_STACK_ATTR])
                if stack_shape != tuple(dsid.shape):
                    stack_shape = None  # a corrupt marker is not trusted (reading it raises)
        else:
            torch_dtype = torch_dtype_name(dt, attrs)
            kind = ValueKind.UNSUPPORTED if torch_dtype is None else ValueKind.NUMERIC
        return ArrayMeta(
            path=path,
            shape=dsid.shape,
            dtype=dt,
            kind=kind,
            torch_dtype=torch_dtype,
            attrs=attrs,
            chunks=chunks,
            compression=compression,
            stored_nbytes=dsid.get_storage_size(),
            non_tensor_kind=non_tensor_kind,
            stack_shape=stack_shape,
        )

    # --- structure ---------------------------------------------------------------------------
    def kind(self, path: Path) -> NodeKind | None:
        self._check_open(self.key_str(path))
        if not path:
            return NodeKind.GROUP
        try:
            cls = self._root.get("/".join(path), getclass=True)
        except (KeyError, ValueError, TypeError):
            return None
        if cls is h5py.Dataset:
            return NodeKind.ARRAY
        if cls is h5py.Group:
            return NodeKind.GROUP
        return None

    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        group = self._group(path)
        out = []
        for name in group:
            try:
                if group.get(name, getclass=True, getlink=True) is h5py.ExternalLink:
                    continue  # another file: never followed (walk does not list them either)
                cls = group.get(name, getclass=True)
            except (KeyError, ValueError):  # a dangling link
                continue
            if cls is h5py.Dataset:
                out.append((name, NodeKind.ARRAY))
            elif cls is h5py.Group:
                out.append((name, NodeKind.GROUP))
        return out

    def array_meta(self, path: Path) -> ArrayMeta:
        return self._meta(path, self._entry(path, data=False)[0])

    def walk(self, path: Path = ()) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
        """One ``H5Ovisit`` pass (name order, parents first), opening only the datasets."""
        group = self._group(path)
        gid = group.id
        out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []
        h5o = h5py.h5o

        def visit(name: bytes, info: Any) -> None:
            if name == b".":
                return
            p = path + tuple(name.decode("utf-8").split("/"))
            if info.type == h5o.TYPE_GROUP:
                out.append((p, NodeKind.GROUP, None))
            elif info.type == h5o.TYPE_DATASET:
                ds = h5py.Dataset(h5o.open(gid, name))
                try:
                    meta = self._meta(p, ds)
                except (TypeError, ValueError):
                    # a type h5py cannot map to numpy (e.g. an opaque tag naming no dtype):
                    # listed, and reading it raises an error naming the key
                    meta = ArrayMeta(
                        path=p,
                        shape=ds.id.shape,
                        dtype=np.dtype(f"V{ds.id.get_type().get_size()}"),
                        kind=ValueKind.UNSUPPORTED,
                        torch_dtype=None,
                    )
                out.append((p, NodeKind.ARRAY, meta))

        h5o.visit(gid, visit, info=True)
        return out

    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        check_path(path, self._location)
        try:
            group = self._root.require_group("/".join(path)) if path else self._root
        except TypeError:
            raise PtdKeyError(
                f"cannot create group {key!r} in {self._location}: an array is in the way"
            ) from None
        except ValueError as err:
            raise PtdValueError(f"cannot create group {key!r} in {self._location}: {err}") from None
        if attrs:
            self._set_attrs(group, attrs, key)

    def create_array(
        self,
        path: Path,
        *,
        shape: Sequence[int],
        dtype: np.dtype,
        data: np.ndarray | None = None,
        attrs: Mapping[str, Any] | None = None,
        chunks: Sequence[int] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """Create a dataset (an existing node at ``path`` is replaced).

        With no ``chunks``/``options`` the dataset is contiguous, like tensordict's. A
        ``chunks`` option that is an int or a tuple shorter than the array covers its leading
        dims (the rest stay whole). Chunk/filter options are dropped for 0-d datasets, and
        explicit chunks for zero-size ones, which HDF5 cannot chunk.
        """
        parent, name = self._parent_for_create(path)
        shape = tuple(int(s) for s in shape)
        opts = dict(options or {})
        if chunks is not None:
            opts["chunks"] = tuple(chunks)
        self._create_dataset(parent, name, path, shape, np.dtype(dtype), data, opts, attrs)

    def _create_dataset(
        self,
        parent: h5py.Group,
        name: str,
        path: Path,
        shape: tuple[int, ...],
        dtype: np.dtype,
        data: Any,
        opts: dict[str, Any],
        attrs: Mapping[str, Any] | None,
    ) -> h5py.Dataset:
        key = self.key_str(path)
        size = int(np.prod(shape)) if shape else 1
        if not shape:
            opts = {k: v for k, v in opts.items() if k not in _CHUNK_OPTIONS}
        elif "chunks" in opts and opts["chunks"] not in (None, True, False):
            if size == 0:
                opts.pop("chunks")
            else:
                c = opts["chunks"]
                c = (c,) if isinstance(c, (int, np.integer)) else tuple(c)
                c = c[: len(shape)] + shape[len(c) :]
                opts["chunks"] = tuple(
                    min(max(1, int(x)), s) for x, s in zip(c, shape, strict=True)
                )
        try:
            ds = parent.create_dataset(name, shape=shape, dtype=dtype, data=data, **opts)
        except (ValueError, TypeError) as err:
            if size == 0 and any(k in _CHUNK_OPTIONS for k in opts):
                opts = {k: v for k, v in opts.items() if k not in _CHUNK_OPTIONS}
                ds = parent.create_dataset(name, shape=shape, dtype=dtype, data=data, **opts)
            else:
                raise PtdValueError(
                    f"cannot create key {key!r} in {self._location} (shape {list(shape)}, dtype "
                    f"{dtype}, options {opts}): {err}"
                ) from None
        if attrs:
            self._set_attrs(ds, attrs, key)
        return ds

    def delete(self, path: Path) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        if not path:
            raise PtdValueError(f"cannot delete the root group of {self._location}")
        try:
            del self._root["/".join(path)]
        except (KeyError, ValueError):
            raise PtdKeyError(f"key {key!r} not found in {self._location}") from None
        self._ds_cache.clear()

    def move(self, src: Path, dst: Path) -> None:
        skey, dkey = self.key_str(src), self.key_str(dst)
        self._check_writable(skey)
        check_path(dst, self._location)
        if self.kind(src) is None:
            raise PtdKeyError(f"key {skey!r} not found in {self._location}")
        if self.kind(dst) is not None:
            raise PtdKeyError(f"key {dkey!r} already present in {self._location}")
        if not src or not dst or dst[: len(src)] == src:
            raise PtdValueError(f"cannot move {skey!r} to {dkey!r} in {self._location}")
        if len(dst) > 1:
            self.create_group(dst[:-1])
        try:
            self._root.move("/".join(src), "/".join(dst))
        except (KeyError, ValueError) as err:
            raise PtdValueError(
                f"cannot move {skey!r} to {dkey!r} in {self._location}: {err}"
            ) from None
        self._ds_cache.clear()

    # --- attributes --------------------------------------------------------------------------
    def get_attrs(self, path: Path) -> dict[str, Any]:
        return self._attrs_of(self._node(path))

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        self._set_attrs(self._node(path), attrs, key)

    def _set_attrs(self, obj: h5py.HLObject, attrs: Mapping[str, Any], key: str) -> None:
        for name, value in attrs.items():
            try:
                obj.attrs[name] = _attr_value(value)
            except (TypeError, ValueError) as err:
                raise PtdTypeError(
                    f"cannot store attribute {name!r}={value!r} on key {key!r} in "
                    f"{self._location}: {err}"
                ) from None

    # --- data --------------------------------------------------------------------------------
    def read(self, path: Path, selection: Selection = ()) -> np.ndarray:
        ds, shape, dtype, nbytes = self._entry(path)
        try:
            if self._maps is not None:
                src = self._maps.source(path, ds)
                if src is not None:
                    return _mmap.read_selection(src, selection)
            if not selection:
                if not shape:
                    return np.asarray(ds[()])
                if nbytes >= _DIRECT_READ_BYTES:
                    out = np.empty(shape, dtype)
                    ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out)
                    return out
                return ds[()]
            for item in selection:
                if isinstance(item, np.ndarray):
                    return self._read_selection(ds, shape, dtype, selection)
            out = ds[selection]  # ints and slices: h5py's fast path
            return out if type(out) is np.ndarray else np.asarray(out)
        except (OSError, ValueError, TypeError, IndexError) as err:
            self._check_open(self.key_str(path))
            raise PtdValueError(
                f"cannot read key {self.key_str(path)!r} of {self._location} at {selection}: {err}"
            ) from None

    def read_direct(self, path: Path, selection: Selection) -> np.ndarray | None:
        """A memory-mapped dataset read with any index array (unsorted, repeats); else None."""
        if self._maps is None:
            return None
        ds = self._entry(path)[0]
        try:
            src = self._maps.source(path, ds)
            return None if src is None else _mmap.read_selection(src, selection)
        except (OSError, ValueError, TypeError, IndexError) as err:
            self._check_open(self.key_str(path))
            raise PtdValueError(
                f"cannot read key {self.key_str(path)!r} of {self._location} at {selection}: {err}"
            ) from None

    @staticmethod
    def _read_selection(
        ds: h5py.Dataset, shape: tuple[int, ...], dtype: np.dtype, selection: Selection
    ) -> np.ndarray:
        """``ds[selection]``; an index array is read as the span it covers, then taken from,
        when that span is small or dense (h5py's point selection is slow)."""
        out_shape = selection_shape(shape, selection)
        if 0 in out_shape:
            return np.empty(out_shape, dtype)
        for pos, item in enumerate(selection):
            if isinstance(item, np.ndarray):
                n = item.shape[0]
                lo, hi = int(item[0]), int(item[-1]) + 1
                spanned = selection[:pos] + (slice(lo, hi),) + selection[pos + 1 :]
                if hi - lo == n:  # consecutive: a plain slice
                    return ds[spanned]
                row_bytes = dtype.itemsize * int(np.prod(shape[pos + 1 :], dtype=np.int64))
                if (hi - lo) * row_bytes <= _SPAN_BYTES or hi - lo <= _SPAN_RATIO * n:
                    axis = sum(1 for s in selection[:pos] if not isinstance(s, (int, np.integer)))
                    return np.take(ds[spanned], item - lo, axis=axis)
                return ds[selection]
        return ds[selection]

    def write(self, path: Path, selection: Selection, value: np.ndarray) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        ds, shape, _dtype, _nbytes = self._entry(path)
        target = selection_shape(shape, selection)
        value = fit_write_value(value, target, key, self._location)
        if 0 in target:
            return
        if value.shape != target or not value.flags.c_contiguous:
            # h5py broadcasts element by element: expand in memory first
            value = np.ascontiguousarray(np.broadcast_to(value, target))
        try:
            ds[selection if selection else ()] = value
        except (OSError, ValueError, TypeError) as err:
            self._check_open(key)
            if "no write intent" in str(err):
                raise ReadOnlyError(
                    f"cannot write key {key!r}: {self._location} is read-only"
                ) from None
            raise PtdValueError(f"cannot write key {key!r} of {self._location}: {err}") from None

    # --- non-tensor entries ------------------------------------------------------------------
    def write_non_tensor(
        self,
        path: Path,
        value: Any,
        *,
        stack_shape: tuple[int, ...] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        key = self.key_str(path)
        if stack_shape is not None:
            arr, attrs = self._encode_stack(value, tuple(stack_shape), key)
            opts = dict(options or {})
        else:
            arr, attrs = self._encode_value(value, key)
            opts = {}  # scalar datasets take no chunk/filter options (tensordict's bug §6.13)
        parent, name = self._parent_for_create(path)
        self._create_dataset(parent, name, path, arr.shape, arr.dtype, arr, opts, None)
        ds = parent[name]
        for k, v in attrs.items():
            ds.attrs[k] = v

    def _encode_value(self, value: Any, key: str) -> tuple[np.ndarray, dict[str, Any]]:
        if isinstance(value, str):
            if "\x00" in value:
                raise PtdValueError(
                    f"Cannot write the str {key!r} to h5: it contains a NUL character, which h5 "
                    "strings cannot hold. Use bytes, zarr, or a TensorDict saved with memmap."
                )
            return np.array(value, dtype=h5py.string_dtype()), {TD_STR_ATTR: np.True_}
        if isinstance(value, bytes):
            if value.endswith(b"\x00"):
                # numpy's S type drops trailing NULs: keep them as raw opaque bytes
                return _opaque(np.array(np.void(bytes(value)))), {}
            return _opaque(np.array(value)), {}
        if isinstance(value, (bool, int, float, np.generic)) and not isinstance(value, np.object_):
            try:
                arr = np.array(value)
            except OverflowError:
                arr = np.array(None)
            if arr.dtype.kind in "biufcSUV":
                return _opaque(arr), {}
        elif isinstance(value, np.ndarray):
            if value.dtype.kind in "biufcSU" and value.dtype.fields is None:
                return _opaque(np.ascontiguousarray(value)), {}
            raise PtdTypeError(
                f"Cannot write {key!r} to h5: numpy arrays of dtype {value.dtype} cannot be "
                "stored as opaque data. Use zarr, or a TensorDict saved with memmap."
            )
        elif isinstance(value, (list, tuple)) and value:
            try:
                arr = np.array(value)
            except (ValueError, OverflowError):
                arr = np.array(None)
            if arr.dtype.kind in "biufc":
                return _opaque(arr), {}
        text = encode_json(value)
        if text is None:
            raise PtdTypeError(
                f"Cannot write {key!r} to h5: a {type(value).__name__} value is stored as JSON "
                "on h5, and this one does not round-trip through JSON (h5 never pickles). Use "
                "zarr, or a TensorDict saved with memmap."
            )
        return np.array(text, dtype=h5py.string_dtype()), {PTD_JSON_ATTR: np.True_}

    def _encode_stack(
        self, values: Any, shape: tuple[int, ...], key: str
    ) -> tuple[np.ndarray, dict[str, Any]]:
        attrs = {TD_STACK_ATTR: np.asarray(shape, dtype=np.int64)}
        ndim = len(shape)
        if all_of_type(values, ndim, str):
            arr = nested_to_array(values, shape, key=key, location=self._location)
            if any("\x00" in v for v in arr.reshape(-1)):
                raise PtdValueError(f"{key!r}: {_NUL_ERROR}")
            return arr.astype(h5py.string_dtype()), attrs
        for cls, np_dtype in (
            (bytes, None),
            (bool, np.bool_),
            (int, np.int64),
            (float, np.float64),
        ):
            if all_of_type(values, ndim, cls):
                flat = nested_to_array(values, shape, key=key, location=self._location)
                try:
                    arr = np.array(flat.reshape(-1).tolist(), dtype=np_dtype).reshape(shape)
                except OverflowError:
                    raise PtdTypeError(
                        f"{key!r}: an int of this NonTensorStack does not fit in int64, which h5 "
                        "stacks of int use. Use zarr, or a TensorDict saved with memmap."
                    ) from None
                return _opaque(arr), attrs
        raise PtdTypeError(f"{key!r}: {_STACK_TYPE_ERROR}")

    def read_non_tensor(
        self,
        path: Path,
        selection: Selection = (),
        *,
        allow_pickle: bool | None = None,
        as_stack: bool = False,
    ) -> NonTensorPayload:
        """Decode a non-tensor dataset (h5 never pickles: ``allow_pickle`` is not used)."""
        ds = self._dataset(path)
        key = self.key_str(path)
        attrs = self._attrs_of(ds)
        dt = ds.dtype
        opaque = h5py.check_opaque_dtype(dt)
        is_str = not opaque and h5py.check_string_dtype(dt) is not None
        if _holds_raw_objects(dt):
            # an opaque tag naming python objects: h5py would turn stored bytes into pointers
            raise PtdValueError(
                f"cannot read key {key!r} of {self._location}: its type {dt} holds opaque python "
                "objects, which cannot be read from a file safely"
            )
        try:
            if TD_STACK_ATTR in attrs:
                if parse_stack_shape(attrs[TD_STACK_ATTR]) != tuple(ds.shape):
                    raise PtdValueError(
                        f"Corrupt non-tensor stack (key {key!r} in {self._location}): its "
                        f"{TD_STACK_ATTR} attribute {attrs[TD_STACK_ATTR]!r} is not the dataset's "
                        f"shape {list(ds.shape)}"
                    )
                src = ds.asstr() if is_str else ds
                data = src[selection] if selection else src[()]
                data = np.asarray(data)
                if data.ndim == 0:
                    return NonTensorPayload(data.tolist())
                return NonTensorPayload(data.tolist(), is_stack=True, stack_shape=data.shape)
            if attrs.get(PTD_JSON_ATTR):
                text = ds[()]
                try:
                    return NonTensorPayload(json.loads(text))
                except (ValueError, TypeError) as err:
                    raise PtdValueError(
                        f"Corrupt JSON value (key {key!r} in {self._location}): {err}"
                    ) from None
            if as_stack and ds.ndim and not opaque:
                data = self._read_selection(ds, ds.shape, dt, selection) if selection else ds[()]
                data = np.asarray(data)
                if data.ndim == 0:
                    return NonTensorPayload(data.tolist())
                return NonTensorPayload(data.tolist(), is_stack=True, stack_shape=data.shape)
            value = ds[()]
        except (OSError, ValueError, TypeError, IndexError) as err:
            if isinstance(err, PtdError):
                raise
            raise PtdValueError(f"cannot read key {key!r} of {self._location}: {err}") from None
        if is_str and isinstance(value, (bytes, np.bytes_)):
            value = bytes(value)
            if attrs.get(TD_STR_ATTR):
                warnings.warn(_STR_WARNING.format(name=ds.name), FutureWarning, stacklevel=3)
        elif isinstance(value, np.void) and dt.kind == "V" and dt.fields is None:
            value = bytes(value)
        return NonTensorPayload(value)
