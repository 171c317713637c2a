"""The Zarr v3 backend (zarr>=3.1.1), on-disk compatible with tensordict 0.15's ``backend="zarr"``.

Layout (``shared/reference/format.md`` §2): groups are nested tensordicts, arrays are leaves.
Tensors are one uncompressed chunk by default (``compressors=None``; a ``chunks=`` option covers
the leading dims). Non-tensors are 1-D ``uint8`` JSON/pickle payloads marked
``__tensordict_non_tensor__``, except stacks of str, which are zarr ``string`` arrays marked
``__tensordict_stack__``.

Differences from tensordict, all fixes: a write whose shape does not fit raises instead of being
cut (§6.4); :attr:`ZarrBackend.reopen_spec` never repeats mode ``"w"`` (§6.5); consolidated
metadata, when the store has it, is rewritten after *any* metadata change (also attributes),
once per session in :meth:`~ZarrBackend.flush` / :meth:`~ZarrBackend.close` rather than after
each change. Children are listed in name order (the store's order is arbitrary).

This is the only module of ptd that imports zarr.
"""

from __future__ import annotations

import copy
import functools
import os
import shutil
import warnings
import zipfile
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import zarr
from zarr.abc.codec import BytesBytesCodec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, ZipStore

from ptd.errors import (
    ClosedStoreError,
    CorruptStoreError,
    PtdError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from ptd.format.dtypes import torch_dtype_name
from ptd.format.names import TD_NON_TENSOR_ATTR, TD_STACK_ATTR, ZARR_JSON
from ptd.format.payload import (
    all_of_type,
    decode_payload,
    encode_payload,
    has_nested_shape,
    nested_to_array,
    parse_stack_shape,
    select_nested,
)
from ptd.storage import remote as _url
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

__all__ = ["ZarrBackend"]

Node = Any  # zarr.Array | zarr.Group


def _jsonable(value: Any) -> Any:
    """An attribute value as JSON-able python (numpy scalars/arrays -> python/lists)."""
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _leading_chunks(spec: Any, shape: tuple[int, ...]) -> tuple[int, ...]:
    """tensordict's ``chunks=`` option: an int or tuple covering the leading dims (§2.1)."""
    c = (int(spec),) if isinstance(spec, (int, np.integer)) else tuple(int(x) for x in spec)
    c = c[: len(shape)] + tuple(shape[len(c) :])
    return tuple(max(1, x) for x in c)


def _describe_codec(codec: Any) -> str:
    try:
        conf = codec.to_dict()
        name, conf = conf.get("name"), conf.get("configuration") or {}
    except Exception:  # noqa: BLE001 - numcodecs (zarr v2) codecs
        conf = dict(getattr(codec, "get_config", lambda: {})())
        name = conf.pop("id", type(codec).__name__)
    if name == "blosc" and "cname" in conf:
        return f"blosc({conf['cname']},{conf.get('clevel')})"
    level = conf.get("level", conf.get("clevel"))
    return f"{name}({level})" if level is not None else str(name)


@functools.lru_cache(maxsize=64)
def _torch_dtype_cached(dt: np.dtype) -> str | None:
    return torch_dtype_name(dt)


def _is_string_dtype(dt: np.dtype) -> bool:
    return dt.kind in "TUO"


class ZarrBackend(Backend):
    """One open zarr group hierarchy (a path, a zarr store, or a user's ``zarr.Group``)."""

    name = "zarr"

    def __init__(
        self,
        root: zarr.Group,
        *,
        location: str,
        spec: ReopenSpec | None,
        owns_store: bool,
        fresh: bool,
        fast_path: bool | None = None,
    ) -> None:
        self._root = root
        self._store = root.store
        self._location = location
        self._spec = spec
        self._owns_store = owns_store
        self._closed = False
        self._writable = not root.read_only
        self._cache: dict[Path, Node] = {(): root}
        # whether the store carries consolidated metadata (None: not checked yet)
        self._consolidated: bool | None = False if fresh else None
        self._dirty = False
        # the fast path: uncompressed chunks read from memory maps (ptd/backends/_mmap.py)
        self._maps = _mmap.ZarrMaps.create(root.store, self._writable, fast_path)

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        target: Any,
        mode: str = "r",
        *,
        storage_options: dict[str, Any] | None = None,
        fast_path: bool | None = None,
        **_: Any,
    ) -> ZarrBackend:
        """Open a zarr group: a path (a directory, a ``.zip`` file or an fsspec URL), a
        ``zarr.abc.store.Store``, or an open ``zarr.Group`` (used as is; ``mode`` ignored).

        Stores and groups passed in are not closed by :meth:`close`. ``fast_path``: read
        uncompressed chunks of a local store from memory maps (None: on unless
        ``PTD_FAST_PATH=0``; see ``_mmap``).
        """
        check_mode(mode)
        if isinstance(target, zarr.Group):
            loc = f"{target.store}" + (f"/{target.path}" if target.path else "")
            return cls(
                target, location=loc, spec=None, owns_store=False, fresh=False, fast_path=fast_path
            )
        zmode = "w-" if mode == "x" else mode
        spec: ReopenSpec | None = None
        owns = False
        if isinstance(target, zarr.abc.store.Store):
            store: Any = target
            location = str(target)
        else:
            try:
                path = os.fsdecode(os.fspath(target))
            except TypeError:
                raise PtdTypeError(
                    f"cannot open {target!r} with the zarr backend: expected a path, a zarr "
                    "store or a zarr.Group"
                ) from None
            path = _url.normalize(path)  # file:// -> a local path
            location = path
            remote = _url.is_remote(path)
            if storage_options is not None and not remote:
                raise PtdValueError(
                    f"storage_options only apply to fsspec URLs (like 's3://...'), not to the "
                    f"local path {path}"
                )
            if remote:
                store = cls._remote_store(path, mode, storage_options)
            else:
                store = cls._local_store(path, mode)
                owns = isinstance(store, ZipStore)
            loc = StoreLocation(path, tuple(sorted((storage_options or {}).items())), "zarr")
            # never "w"/"w-"/"x": reopening must not wipe what this session wrote (§6.5)
            spec = ReopenSpec.make(loc, "r" if mode == "r" else "r+", fast_path=fast_path)
        kwargs: dict[str, Any] = {"mode": zmode}
        if mode != "r":
            kwargs["use_consolidated"] = False
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                root = zarr.open_group(store, **kwargs)
        except FileNotFoundError:
            if isinstance(store, str) and os.path.isfile(os.path.join(store, ZARR_JSON)):
                raise CorruptStoreError(
                    f"{location} is not a readable zarr store: its {ZARR_JSON} does not describe "
                    "a group that zarr can open (damaged metadata?)"
                ) from None
            raise StoreNotFoundError(f"zarr store {location} does not exist") from None
        except FileExistsError:
            raise StoreExistsError(
                f"zarr store {location} already contains data (mode {mode!r}); use mode 'w' to "
                "overwrite it or 'a' to append"
            ) from None
        except (zarr.errors.ContainsGroupError, zarr.errors.ContainsArrayError) as err:
            if mode in ("w-", "x") and isinstance(err, zarr.errors.ContainsGroupError):
                raise StoreExistsError(
                    f"zarr store {location} already exists (mode {mode!r})"
                ) from None
            raise CorruptStoreError(f"{location} holds a zarr array, not a group") from None
        except zarr.errors.GroupNotFoundError:
            if isinstance(store, str) or (mode in ("r", "r+") and not _store_has_data(store)):
                raise StoreNotFoundError(f"no zarr group found in {location}") from None
            raise CorruptStoreError(f"no zarr group found in {location} (no {ZARR_JSON})") from None
        except ValueError as err:  # JSONDecodeError, invalid metadata
            raise CorruptStoreError(f"{location} is not a readable zarr store: {err}") from None
        except OSError as err:
            if spec is not None and _url.is_remote(location):
                raise _url.remote_error(err, location) from None
            raise CorruptStoreError(f"cannot open zarr store {location}: {err}") from None
        fresh = mode == "w" or (mode in ("w-", "x"))
        return cls(
            root, location=location, spec=spec, owns_store=owns, fresh=fresh, fast_path=fast_path
        )

    @staticmethod
    def _remote_store(url: str, mode: str, storage_options: dict[str, Any] | None) -> Any:
        """An fsspec URL (``s3://``, ``gs://``, ``memory://``...): a zarr ``FsspecStore``.

        The URL is probed first (with ``storage_options``), so missing credentials, a missing
        bucket or store, or an existing store in mode ``w-`` are one clear error."""
        from zarr.storage import FsspecStore

        fs, path, kind = _url.probe(url, storage_options, marker=ZARR_JSON)
        if kind is None:
            _url.check_bucket(fs, path, url)
            if mode in ("r", "r+"):
                raise StoreNotFoundError(f"zarr store {url} does not exist")
        elif kind == "file":
            raise CorruptStoreError(f"{url} is a file, not a zarr store (a prefix with {ZARR_JSON})")
        elif kind == "marker" and mode in ("w-", "x"):
            raise StoreExistsError(
                f"zarr store {url} already exists (mode {mode!r}); use mode 'w' to overwrite it "
                "or 'a' to append"
            )
        elif kind == "dir" and mode in ("r", "r+"):
            raise CorruptStoreError(f"{url} is not a zarr store: it has no {ZARR_JSON}")
        try:
            return FsspecStore.from_url(
                url, storage_options=dict(storage_options or {}), read_only=mode == "r"
            )
        except Exception as err:  # noqa: BLE001 - translated to one line
            raise _url.remote_error(err, url) from None

    @staticmethod
    def _local_store(path: str, mode: str) -> Any:
        """A local path: a ZipStore for zip files, else the path itself (a LocalStore)."""
        exists = os.path.exists(path)
        if exists and os.path.isfile(path):
            if not zipfile.is_zipfile(path):
                raise CorruptStoreError(f"{path} is a file, not a zarr store (a directory or .zip)")
            if mode in ("w-", "x"):
                raise StoreExistsError(f"zarr store {path} already exists (mode {mode!r})")
            return ZipStore(path, mode="r" if mode == "r" else ("w" if mode == "w" else "a"))
        if path.endswith(".zip") and not exists:
            if mode in ("r", "r+"):
                raise StoreNotFoundError(f"zarr store {path} does not exist")
            return ZipStore(path, mode="w")
        if mode in ("r", "r+") and not exists:
            raise StoreNotFoundError(f"zarr store {path} does not exist")
        if exists and mode in ("r", "r+") and not os.path.exists(os.path.join(path, ZARR_JSON)):
            if not os.listdir(path):
                raise StoreNotFoundError(f"{path} is an empty directory, not a zarr store")
            raise CorruptStoreError(f"{path} is not a zarr store: it has no {ZARR_JSON}")
        return path

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._cache.clear()
            if self._maps is not None:
                self._maps.close()
                self._maps = None
            if self._owns_store:
                self._store.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def writable(self) -> bool:
        return self._writable and not self._closed

    @property
    def location(self) -> str:
        return self._location

    @property
    def reopen_spec(self) -> ReopenSpec | None:
        return self._spec

    def flush(self) -> None:
        """Rewrite the consolidated metadata if this session changed a store that has it."""
        if self._dirty and not self._closed:
            self._consolidate()

    def finalize(self) -> None:
        """Consolidate the metadata after a bulk write (not for append-only stores)."""
        self._check_writable("/")
        self._consolidate()

    # --- helpers -----------------------------------------------------------------------------
    def _consolidate(self) -> None:
        self._dirty = False
        if not getattr(self._store, "supports_deletes", True):
            return  # e.g. ZipStore: rewriting zarr.json would append a duplicate entry
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            zarr.consolidate_metadata(self._store, path=self._root.path or None)
        self._consolidated = True

    def _changed(self) -> None:
        """Record a metadata change: consolidated metadata (if any) is rewritten on flush."""
        if self._consolidated is None:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    ro = zarr.open_group(self._store, path=self._root.path, mode="r")
                self._consolidated = ro.metadata.consolidated_metadata is not None
            except Exception:  # noqa: BLE001 - no readable consolidated metadata
                self._consolidated = False
        if self._consolidated:
            self._dirty = True

    def _check_open(self, key: str = "/") -> None:
        if self._closed:
            raise ClosedStoreError(f"cannot access key {key!r}: {self._location} is closed")

    def _check_writable(self, key: str) -> None:
        self._check_open(key)
        if not self._writable:
            raise ReadOnlyError(
                f"cannot write key {key!r}: {self._location} is opened read-only (mode 'r')"
            )

    def _get(self, path: Path) -> Node | None:
        node = self._cache.get(path)
        if node is not None:
            return node
        self._check_open(self.key_str(path))
        parent = self._cache.get(path[:-1])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if isinstance(parent, zarr.Group):
                    node = parent[path[-1]]
                else:
                    node = self._root["/".join(path)]
        except (KeyError, FileNotFoundError):
            return None
        except ValueError as err:
            raise CorruptStoreError(
                f"cannot read the metadata of key {self.key_str(path)!r} in {self._location}: {err}"
            ) from None
        self._cache[path] = node
        return node

    def _array(self, path: Path) -> zarr.Array:
        node = self._get(path)
        if node is None:
            raise PtdKeyError(f"key {self.key_str(path)!r} not found in {self._location}")
        if not isinstance(node, zarr.Array):
            raise PtdKeyError(
                f"key {self.key_str(path)!r} in {self._location} is a group, not an array"
            )
        return node

    def raw_group(self, path: Path) -> Any:
        return self._group(path)

    def _group(self, path: Path) -> zarr.Group:
        node = self._get(path)
        if node is None:
            raise PtdKeyError(f"key {self.key_str(path)!r} not found in {self._location}")
        if not isinstance(node, zarr.Group):
            raise PtdKeyError(
                f"key {self.key_str(path)!r} in {self._location} is an array, not a group"
            )
        return node

    def _forget(self, path: Path) -> None:
        n = len(path)
        for p in [p for p in self._cache if p[:n] == path and p]:
            del self._cache[p]

    def _require_group(self, path: Path) -> zarr.Group:
        group = self._root
        for i in range(len(path)):
            node = self._get(path[: i + 1])
            if node is None:
                node = group.create_group(path[i])
                self._cache[path[: i + 1]] = node
            elif not isinstance(node, zarr.Group):
                raise PtdKeyError(
                    f"cannot create {self.key_str(path)!r} in {self._location}: "
                    f"{self.key_str(path[: i + 1])!r} is an array"
                )
            group = node
        return group

    def _prepare_create(self, path: Path) -> tuple[zarr.Group, str]:
        key = self.key_str(path)
        self._check_writable(key)
        if not path:
            raise PtdValueError(f"cannot create an array at the root of {self._location}")
        check_path(path, self._location)
        parent = self._require_group(path[:-1])
        if self._get(path) is not None:
            self.delete(path)
        self._changed()
        return parent, path[-1]

    def _new_array(
        self,
        path: Path,
        shape: tuple[int, ...],
        dtype: Any,
        data: Any,
        kwargs: dict[str, Any],
    ) -> zarr.Array:
        parent, name = self._prepare_create(path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                arr = parent.create_array(name, shape=shape, dtype=dtype, **kwargs)
                if data is not None and arr.size:
                    arr[...] = data
        except (TypeError, ValueError) as err:
            raise PtdValueError(
                f"cannot create key {self.key_str(path)!r} in {self._location} (shape "
                f"{list(shape)}, dtype {dtype}, options {kwargs}): {err}"
            ) from None
        self._cache[path] = arr
        return arr

    def _meta(self, path: Path, arr: zarr.Array) -> ArrayMeta:
        md = arr.metadata
        attrs = dict(md.attributes)
        if md.zarr_format == 3:
            dt = md.data_type.to_native_dtype()
            chunks = tuple(getattr(md.chunk_grid, "chunk_shape", None) or arr.chunks)
            compressors: Any = [c for c in md.codecs if isinstance(c, BytesBytesCodec)]
        else:
            dt, chunks, compressors = arr.dtype, tuple(arr.chunks), arr.compressors
        compression = "+".join(_describe_codec(c) for c in compressors) if compressors else None
        torch_dtype = non_tensor_kind = stack_shape = None
        marker = attrs.get(TD_NON_TENSOR_ATTR)
        if marker is None:
            torch_dtype = torch_dtype_name(dt, attrs) if attrs else _torch_dtype_cached(dt)
        if torch_dtype is not None:
            kind = ValueKind.NUMERIC
        elif dt.kind == "V" and dt.fields is not None:
            kind = ValueKind.UNSUPPORTED
        else:
            kind = ValueKind.NON_TENSOR
            if marker is not None:
                enc = marker.get("encoding") if isinstance(marker, dict) else None
                non_tensor_kind = enc if enc in ("json", "pickle") else "other"
            elif _is_string_dtype(dt):
                non_tensor_kind = "str"
            elif dt.kind in "SV":
                non_tensor_kind = "bytes"
            else:
                non_tensor_kind = "other"
            if TD_STACK_ATTR in attrs:
                stack_shape = parse_stack_shape(attrs[TD_STACK_ATTR])
                if marker is None and stack_shape != tuple(md.shape):
                    stack_shape = None  # a corrupt marker is not trusted (reading it raises)
        return ArrayMeta(
            path=path,
            shape=tuple(md.shape),
            dtype=dt,
            kind=kind,
            torch_dtype=torch_dtype,
            attrs=attrs,
            chunks=chunks,
            compression=compression,
            stored_nbytes=None,
            non_tensor_kind=non_tensor_kind,
            stack_shape=stack_shape,
        )

    # --- structure ---------------------------------------------------------------------------
    def kind(self, path: Path) -> NodeKind | None:
        node = self._get(path)
        if node is None:
            return None
        return NodeKind.ARRAY if isinstance(node, zarr.Array) else NodeKind.GROUP

    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        group = self._group(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            members = sorted(group.members(), key=lambda m: m[0])
        out = []
        for name, node in members:
            self._check_member(path, name)
            self._cache[path + (name,)] = node
            out.append((name, NodeKind.ARRAY if isinstance(node, zarr.Array) else NodeKind.GROUP))
        return out

    def _check_member(self, path: Path, name: str) -> None:
        """A child name listed by the store (its consolidated metadata can say anything) must
        be a valid key: nothing may resolve outside the store or onto another node."""
        for part in name.split("/"):
            if part in ("", ".", "..") or "\x00" in part:
                raise CorruptStoreError(
                    f"cannot read the metadata of {self._location}: it lists a child "
                    f"{self.key_str(path + (name,))!r}, which is not a valid key (damaged or "
                    "hostile metadata)"
                )

    def array_meta(self, path: Path) -> ArrayMeta:
        return self._meta(path, self._array(path))

    def walk(self, path: Path = ()) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
        """One ``members(max_depth=None)`` pass, then depth first in name order."""
        group = self._group(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            members = group.members(max_depth=None)
        kids: dict[Path, list[tuple[str, Node]]] = {}
        for name, node in members:
            self._check_member(path, name)
            rel = tuple(name.split("/"))
            kids.setdefault(rel[:-1], []).append((rel[-1], node))
            self._cache[path + rel] = node
        out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []

        def visit(rel: Path) -> None:
            for name, node in sorted(kids.get(rel, ()), key=lambda m: m[0]):
                p = path + rel + (name,)
                if isinstance(node, zarr.Array):
                    out.append((p, NodeKind.ARRAY, self._meta(p, node)))
                else:
                    out.append((p, NodeKind.GROUP, None))
                    visit(rel + (name,))

        visit(())
        return out

    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        check_path(path, self._location)
        existing = self._get(path)
        if existing is None:
            parent = self._require_group(path[:-1])
            self._changed()
            group = parent.create_group(path[-1], attributes=_jsonable(dict(attrs or {})))
            self._cache[path] = group
            return
        if not isinstance(existing, zarr.Group):
            raise PtdKeyError(f"cannot create group {key!r} in {self._location}: it is an array")
        if attrs:
            self.set_attrs(path, attrs)

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
        """Create an array (an existing node at ``path`` is replaced) as tensordict does:
        one chunk of the whole array and no compression unless ``chunks``/``options`` say
        otherwise; a ``chunks`` option covers the leading dims (``chunks=`` here wins)."""
        shape = tuple(int(s) for s in shape)
        kwargs = self._create_kwargs(shape, options, chunks)
        if attrs:
            kwargs["attributes"] = {**kwargs.get("attributes", {}), **_jsonable(dict(attrs))}
        self._new_array(path, shape, np.dtype(dtype), data, kwargs)

    @staticmethod
    def _create_kwargs(
        shape: tuple[int, ...], options: Mapping[str, Any] | None, chunks: Sequence[int] | None
    ) -> dict[str, Any]:
        kwargs = dict(options or {})
        kwargs.setdefault("compressors", None)
        spec = kwargs.pop("chunks", None)
        if chunks is not None:
            spec = tuple(chunks)
        if shape:
            kwargs["chunks"] = _leading_chunks(shape if spec is None else spec, shape)
        if "attributes" in kwargs:
            kwargs["attributes"] = _jsonable(dict(kwargs["attributes"] or {}))
        return kwargs

    def delete(self, path: Path) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        if not path:
            raise PtdValueError(f"cannot delete the root group of {self._location}")
        if self._get(path) is None:
            raise PtdKeyError(f"key {key!r} not found in {self._location}")
        if not getattr(self._store, "supports_deletes", True):
            raise UnsupportedOperationError(
                f"cannot delete key {key!r}: the store {self._location} does not support deletes "
                "(e.g. a zip file); write a new store instead"
            )
        parent = self._group(path[:-1])
        del parent[path[-1]]
        self._forget(path)
        self._changed()

    def move(self, src: Path, dst: Path) -> None:
        """Rename ``src`` to ``dst``: a directory rename for local stores, else a byte copy of
        the node's keys (chunks are never decoded)."""
        skey, dkey = self.key_str(src), self.key_str(dst)
        self._check_writable(skey)
        check_path(dst, self._location)
        if self._get(src) is None:
            raise PtdKeyError(f"key {skey!r} not found in {self._location}")
        if self._get(dst) is not None:
            raise PtdKeyError(f"key {dkey!r} already present in {self._location}")
        if not src or not dst or dst[: len(src)] == src:
            raise PtdValueError(f"cannot move {skey!r} to {dkey!r} in {self._location}")
        if not getattr(self._store, "supports_deletes", True):
            raise UnsupportedOperationError(
                f"cannot move key {skey!r}: the store {self._location} does not support deletes"
            )
        self._require_group(dst[:-1])
        prefix = f"{self._root.path}/" if self._root.path else ""
        s, d = prefix + "/".join(src), prefix + "/".join(dst)
        store = self._store
        if isinstance(store, LocalStore):
            os.makedirs(os.path.dirname(os.path.join(store.root, d)), exist_ok=True)
            shutil.move(os.path.join(store.root, s), os.path.join(store.root, d))
        else:

            async def copy() -> None:
                proto = default_buffer_prototype()
                async for k in store.list_prefix(s + "/"):
                    buf = await store.get(k, prototype=proto)
                    if buf is not None:
                        await store.set(d + k[len(s) :], buf)
                await store.delete_dir(s)

            sync(copy())
        self._forget(src)
        self._forget(dst)
        self._changed()

    # --- attributes --------------------------------------------------------------------------
    def get_attrs(self, path: Path) -> dict[str, Any]:
        node = self._get(path)
        if node is None:
            raise PtdKeyError(f"key {self.key_str(path)!r} not found in {self._location}")
        return copy.deepcopy(dict(node.metadata.attributes))

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        node = self._get(path)
        if node is None:
            raise PtdKeyError(f"key {key!r} not found in {self._location}")
        try:
            with warnings.catch_warnings():
                # a zip store appends a second zarr.json entry (the last one is read)
                warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
                new = node.update_attributes(_jsonable(dict(attrs)))
        except (TypeError, ValueError) as err:
            raise PtdTypeError(
                f"cannot store attributes {dict(attrs)!r} on key {key!r} in {self._location}: {err}"
            ) from None
        self._cache[path] = new if new is not None else node
        if not path:
            self._root = self._cache[path]
        self._changed()

    # --- data --------------------------------------------------------------------------------
    def read(self, path: Path, selection: Selection = ()) -> np.ndarray:
        arr = self._array(path)
        try:
            if self._maps is not None:
                out = self._maps.read(path, arr, selection)
                if out is not None:
                    return out
            return self._read(arr, selection)
        except (ValueError, TypeError, IndexError) as err:
            raise PtdValueError(
                f"cannot read key {self.key_str(path)!r} of {self._location} at {selection}: {err}"
            ) from None

    def read_direct(self, path: Path, selection: Selection) -> np.ndarray | None:
        """Uncompressed chunks read from maps with any index array (unsorted, repeats); else
        None."""
        if self._maps is None:
            return None
        arr = self._array(path)
        try:
            return self._maps.read(path, arr, selection)
        except (ValueError, TypeError, IndexError) as err:
            raise PtdValueError(
                f"cannot read key {self.key_str(path)!r} of {self._location} at {selection}: {err}"
            ) from None

    @staticmethod
    def _read(arr: zarr.Array, selection: Selection) -> np.ndarray:
        if not selection:
            return np.asarray(arr[...])
        out_shape = selection_shape(arr.shape, selection)
        if 0 in out_shape:
            return np.empty(out_shape, arr.dtype)
        if any(isinstance(s, np.ndarray) for s in selection):
            return np.asarray(arr.oindex[selection])
        return np.asarray(arr[selection])

    def write(self, path: Path, selection: Selection, value: np.ndarray) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        arr = self._array(path)
        target = selection_shape(arr.shape, selection)
        value = fit_write_value(value, target, key, self._location)
        if 0 in target:
            return
        try:
            if any(isinstance(s, np.ndarray) for s in selection):
                arr.oindex[selection] = value
            else:
                arr[selection if selection else ...] = value
        except (ValueError, TypeError) as err:
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
            shape = tuple(int(s) for s in stack_shape)
            if all_of_type(value, len(shape), str):
                # a zarr string array: user chunks/compressors apply
                arr = nested_to_array(value, shape, key=key, location=self._location)
                kwargs = self._create_kwargs(shape, options, None)
                kwargs["attributes"] = {**kwargs.get("attributes", {}), TD_STACK_ATTR: list(shape)}
                self._new_array(path, shape, str, arr, kwargs)
                return
            nested_to_array(value, shape, key=key, location=self._location)  # shape check
            attributes = {TD_STACK_ATTR: list(shape)}
        else:
            attributes = {}
        payload, encoding = encode_payload(value)
        attributes[TD_NON_TENSOR_ATTR] = {"encoding": encoding}
        data = np.frombuffer(payload, dtype=np.uint8)
        # payloads always use the default layout, whatever the options (as tensordict does)
        kwargs = {"chunks": (max(1, data.size),), "compressors": None, "attributes": attributes}
        self._new_array(path, data.shape, np.uint8, data, kwargs)

    def read_non_tensor(
        self,
        path: Path,
        selection: Selection = (),
        *,
        allow_pickle: bool | None = None,
        as_stack: bool = False,
    ) -> NonTensorPayload:
        arr = self._array(path)
        key = self.key_str(path)
        attrs = arr.metadata.attributes
        marker = attrs.get(TD_NON_TENSOR_ATTR)
        stack = attrs.get(TD_STACK_ATTR)
        stack_shape: tuple[int, ...] | None = None
        if stack is not None:
            stack_shape = parse_stack_shape(stack)
            if stack_shape is None or (marker is None and stack_shape != tuple(arr.shape)):
                raise PtdValueError(
                    f"Corrupt non-tensor stack (key {key!r} in {self._location}): its "
                    f"{TD_STACK_ATTR} attribute {stack!r} is not a shape"
                    + ("" if marker is not None else f" equal to the array's {list(arr.shape)}")
                )
        try:
            if marker is not None:
                encoding = marker.get("encoding") if isinstance(marker, dict) else None
                raw = np.asarray(arr[...])
                if raw.dtype != np.uint8 or raw.ndim != 1:
                    raise PtdValueError(
                        f"Corrupt non-tensor payload (key {key!r} in {self._location}): expected "
                        f"a 1-D uint8 array, got {raw.dtype} of shape {list(raw.shape)}"
                    )
                value = decode_payload(
                    raw.tobytes(),
                    encoding,
                    allow_pickle=allow_pickle,
                    key=key,
                    location=self._location,
                )
                if stack_shape is None:
                    return NonTensorPayload(value)
                if not has_nested_shape(value, stack_shape):
                    raise PtdValueError(
                        f"Corrupt non-tensor stack (key {key!r} in {self._location}): the decoded "
                        f"value is not a nested list of shape {list(stack_shape)}"
                    )
                shape = selection_shape(stack_shape, selection)
                value = select_nested(value, selection)
                return NonTensorPayload(value, is_stack=bool(shape), stack_shape=shape)
            if stack is not None or (as_stack and arr.ndim):
                data = self._read(arr, selection)
                if data.ndim == 0:
                    return NonTensorPayload(data.tolist())
                return NonTensorPayload(data.tolist(), is_stack=True, stack_shape=data.shape)
            value = arr[...] if arr.ndim else arr[()]
        except (ValueError, TypeError, IndexError) as err:
            if isinstance(err, PtdError):
                raise
            raise PtdValueError(f"cannot read key {key!r} of {self._location}: {err}") from None
        if isinstance(value, np.ndarray) and value.dtype.kind == "T":
            value = value.astype(object)
        elif isinstance(value, np.ndarray) and value.ndim == 0:
            value = value[()]
        return NonTensorPayload(value)


def _store_has_data(store: Any) -> bool:
    try:
        return not sync(store.is_empty(""))
    except Exception:  # noqa: BLE001 - a store that cannot list
        return True
