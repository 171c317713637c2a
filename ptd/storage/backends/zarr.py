"""The Zarr v3 backend (zarr>=3.1.1), on-disk compatible with tensordict 0.15's ``backend="zarr"``.

Layout (``docs/format.md`` §2): groups are nested tensordicts, arrays are leaves.
Tensors are one uncompressed chunk by default (``compressors=None``; a ``chunks=`` option covers
the leading dims). Non-tensors are 1-D ``uint8`` JSON/pickle payloads marked
``__tensordict_non_tensor__``, except stacks of str, which are zarr ``string`` arrays marked
``__tensordict_stack__`` (see :mod:`~ptd.storage.backends.zarr_codec`).

Differences from tensordict, all fixes: a write whose shape does not fit raises instead of being
cut; :attr:`ZarrBackend.reopen_spec` never repeats mode ``"w"``; consolidated
metadata, when the store has it, is removed at a session's first metadata change (so that it
is never stale) and written again in :meth:`~ZarrBackend.flush` / :meth:`~ZarrBackend.close`
(:mod:`~ptd.storage.backends.zarr_consolidated`); a writable ``ZipStore`` handed over is closed
(finalized) by :meth:`~ZarrBackend.close`. Children are listed in name order
(the store's order is arbitrary).

Opening stores is :mod:`~ptd.storage.backends.zarr_open`; uncompressed chunks of local stores
are read from memory maps by :mod:`~ptd.storage.backends.fast_path_zarr`. zarr is imported only
by the ``zarr*`` modules of the backends (and ``fast_path_zarr``).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import zarr
from zarr.abc.store import Store
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync
from zarr.storage import LocalStore, ZipStore

from ptd.errors import (
    CorruptStoreError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    ReadOnlyError,
    UnsupportedOperationError,
)
from ptd.format.keynames import escape_name
from ptd.format.names import PTD_BYTES_ATTRS, PTD_NAME_ATTR, TD_NON_TENSOR_ATTR
from ptd.storage.backends import zarr_bulk, zarr_codec, zarr_read
from ptd.storage.backends.base import (
    ArrayMeta,
    Backend,
    NewArray,
    NodeKind,
    NonTensorPayload,
    Path,
    Selection,
    ValueKind,
    check_mode,
    check_path,
)
from ptd.storage.backends.chunk_cache import cache_budget
from ptd.storage.backends.fast_path_zarr import ZarrMaps
from ptd.storage.backends.layout import leading_chunks
from ptd.storage.backends.strings import VLEN_BYTES, VLEN_UTF8, StringType, as_object_array
from ptd.storage.backends.targets import parse_target
from ptd.storage.backends.zarr_arrays import array_layout, read_selection
from ptd.storage.backends.zarr_chunks import ZarrChunks
from ptd.storage.backends.zarr_consolidated import Consolidation
from ptd.storage.backends.zarr_open import check_v2_mode, local_store, open_root, remote_store
from ptd.storage.location import ReopenSpec

__all__ = ["ZarrBackend"]

Node = Any  # zarr.Array | zarr.Group

#: names of zarr's own metadata documents (v3 and v2): no node may be called that
ZARR_METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zgroup", ".zattrs", ".zmetadata"})


class ZarrBackend(Backend):
    """One open zarr group hierarchy (a path, a zarr store, or a user's ``zarr.Group``)."""

    name = "zarr"

    @classmethod
    def escaped_name(cls, name: str) -> str | None:
        """Zarr v3 reserves names starting with ``__`` for the format, zarr-python reads a
        backslash as a path separator, and a metadata document's name cannot be a node's:
        such names are stored escaped (``docs/format.md``)."""
        if name.startswith("__") or "\\" in name or name in ZARR_METADATA_NAMES:
            return escape_name(name)
        return None

    def _plain_path(self, path: Path) -> bool:
        """Whether every name of ``path`` is stored as it is and looks like no escaped name."""
        return all("%" not in p and self.escaped_name(p) is None for p in path)

    def _listed_name(self, stored: str, node: Node) -> str:
        """The name a node stored as ``stored`` has: the original recorded in its
        ``__ptd_name__`` when ``stored`` is that name's escaped form, else ``stored``."""
        if "%" in stored:  # (every escaped name holds a '%')
            original = node.metadata.attributes.get(PTD_NAME_ATTR)
            if isinstance(original, str) and self.escaped_name(original) == stored:
                return original
        return stored

    def _node_attrs(self, path: Path, attributes: Mapping[str, Any], deep: bool) -> dict[str, Any]:
        """A node's attributes as ptd hands them out (bytes restored, the recorded original
        name of an escaped node left out)."""
        out = zarr_codec.attrs_read(attributes, deep=deep)
        if path and self.escaped_name(path[-1]) is not None:
            out.pop(PTD_NAME_ATTR, None)
        return out

    def __init__(
        self,
        root: zarr.Group,
        *,
        location: str,
        spec: ReopenSpec | None,
        owns_store: bool,
        fresh: bool,
        fast_path: bool | None = None,
        chunk_cache: Any = None,
    ) -> None:
        writable = not root.read_only
        super().__init__(
            location,
            writable=writable,
            # the fast path: uncompressed chunks read from memory maps (fast_path_zarr.py)
            maps=ZarrMaps.create(root.store, writable, fast_path),
        )
        self._root = root
        self._store = root.store
        self._spec = spec
        self._owns_store = owns_store
        self._cache: dict[Path, Node] = {(): root}
        self._consolidation = Consolidation(self._store, root.path, fresh=fresh)
        # compressed/sharded chunks decoded in parallel, through a chunk cache (zarr_chunks.py)
        self._chunked = ZarrChunks.create(root.store, writable, cache_budget(chunk_cache))

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        target: Any,
        mode: str = "r",
        *,
        storage_options: dict[str, Any] | None = None,
        fast_path: bool | None = None,
        use_consolidated: bool | None = None,
        chunk_cache: Any = None,
        **_: Any,
    ) -> ZarrBackend:
        """Open a zarr group: a path (a directory, a ``.zip`` file or an fsspec URL), a
        ``zarr.abc.store.Store``, or an open ``zarr.Group`` (used as is; ``mode`` ignored).

        Stores and groups passed in are not closed by :meth:`close`, except a writable
        ``ZipStore`` (a zip is not readable until it is closed). ``fast_path``: read
        uncompressed chunks of a local store from memory maps (None: on unless
        ``PTD_FAST_PATH=0``; see ``fast_path``). ``chunk_cache``: the budget of the cache of
        decoded chunks, used in mode ``"r"`` (see ``chunk_cache.py``).
        """
        check_mode(mode)
        if isinstance(target, zarr.Group):
            loc = f"{target.store}" + (f"/{target.path}" if target.path else "")
            return cls(
                target,
                location=loc,
                spec=None,
                owns_store=False,
                fresh=False,
                fast_path=fast_path,
                chunk_cache=chunk_cache,
            )
        spec: ReopenSpec | None = None
        owns = remote = False
        if isinstance(target, Store):
            store: Any = target
            location = str(target)
        else:
            parsed = parse_target(
                target,
                storage_options,
                format=cls.name,
                accepted="a zarr store or a zarr.Group",
                urls="fsspec URLs",
            )
            location = parsed.path
            remote = parsed.is_remote
            if remote:
                store = remote_store(parsed, mode)
            else:
                store = local_store(location, mode)
                owns = isinstance(store, ZipStore)
            # never "w"/"w-"/"x": reopening must not wipe what this session wrote
            extra: dict[str, Any] = (
                {} if use_consolidated is None else {"use_consolidated": use_consolidated}
            )
            spec = ReopenSpec.make(
                parsed,
                "r" if mode == "r" else "r+",
                fast_path=fast_path,
                chunk_cache=chunk_cache,
                **extra,
            )
        root = open_root(store, mode, location, remote=remote, use_consolidated=use_consolidated)
        try:
            check_v2_mode(root, mode, location)
        except ReadOnlyError:
            if owns:
                store.close()
            raise
        fresh = mode in ("w", "w-", "x")
        return cls(
            root,
            location=location,
            spec=spec,
            owns_store=owns,
            fresh=fresh,
            fast_path=fast_path,
            chunk_cache=chunk_cache,
        )

    def _flush_before_close(self) -> None:
        self.flush()

    def _release_handles(self) -> None:
        self._cache.clear()
        if self._owns_store or (isinstance(self._store, ZipStore) and not self._store.read_only):
            # a writable ZipStore holds nothing readable until it is closed (its central
            # directory is written then): close it even when the user handed it over, so that
            # after close() the store holds everything written
            self._store.close()

    @property
    def reopen_spec(self) -> ReopenSpec | None:
        return self._spec

    @property
    def format_version(self) -> int | None:
        """2 for a Zarr v2 store (read-only in ptd), 3 otherwise."""
        return int(self._root.metadata.zarr_format)

    def flush(self) -> None:
        """Rewrite the consolidated metadata if this session changed a store that has it."""
        if not self._closed:
            self._consolidation.flush()

    def finalize(self) -> None:
        """Consolidate the metadata after a bulk write (not for append-only stores)."""
        self._check_writable("/")
        self._consolidation.consolidate()

    # --- helpers -----------------------------------------------------------------------------
    def _changed(self) -> None:
        """Record a metadata change (see :class:`Consolidation`)."""
        self._consolidation.changed()

    def _get(self, path: Path) -> Node | None:
        node = self._cache.get(path)
        if node is not None:
            return node
        self._check_open(self.key_str(path))
        parent = self._cache.get(path[:-1])
        if parent is None and len(path) > 1 and not self._plain_path(path[:-1]):
            parent = self._get(path[:-1])  # each escaped name checked against its record
            if not isinstance(parent, zarr.Group):
                return None
        stored = self.stored_path(path)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if isinstance(parent, zarr.Group):
                    node = parent[stored[-1]]
                else:
                    node = self._root["/".join(stored)]
        except (KeyError, FileNotFoundError):
            return None
        except ValueError as err:
            raise CorruptStoreError(
                f"cannot read the metadata of key {self.key_str(path)!r} in {self._location}: {err}"
            ) from None
        if self._listed_name(stored[-1], node) != path[-1]:
            return None  # another name is recorded for the node stored there
        self._cache[path] = node
        return node

    def _node(self, path: Path, want: NodeKind) -> Node:
        """The node at ``path``, which must be a ``want``; else PtdKeyError."""
        node = self._get(path)
        if node is None:
            raise self._not_found(path)
        found = NodeKind.ARRAY if isinstance(node, zarr.Array) else NodeKind.GROUP
        if found is not want:
            raise self._wrong_kind(path, found)
        return node

    def _array(self, path: Path) -> zarr.Array:
        return self._node(path, NodeKind.ARRAY)

    def _group(self, path: Path) -> zarr.Group:
        return self._node(path, NodeKind.GROUP)

    def _exists(self, path: Path) -> bool:
        return self._get(path) is not None

    def _forget(self, path: Path) -> None:
        n = len(path)
        for p in [p for p in self._cache if p[:n] == path and p]:
            del self._cache[p]

    def _require_group(self, path: Path) -> zarr.Group:
        group = self._root
        for i in range(len(path)):
            node = self._get(path[: i + 1])
            if node is None:
                self._check_name(path[: i + 1])
                escaped = self.escaped_name(path[i])
                node = group.create_group(
                    escaped or path[i],
                    attributes={PTD_NAME_ATTR: path[i]} if escaped else None,
                )
                self._cache[path[: i + 1]] = node
            elif not isinstance(node, zarr.Group):
                raise PtdKeyError(
                    f"cannot create {self.key_str(path)!r} in {self._location}: "
                    f"{self.key_str(path[: i + 1])!r} is an array"
                )
            group = node
        return group

    def _new_array(
        self,
        path: Path,
        shape: tuple[int, ...],
        dtype: Any,
        data: Any,
        kwargs: dict[str, Any],
    ) -> zarr.Array:
        """Create the array at ``path`` (an existing node is replaced) and fill it."""
        self._check_create(path)
        self._check_name(path)
        parent = self._require_group(path[:-1])
        if self._get(path) is not None:
            self.delete(path)
        self._changed()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", category=UserWarning)
                escaped = self.escaped_name(path[-1])
                if escaped is not None:
                    kwargs["attributes"] = {
                        **(kwargs.get("attributes") or {}),
                        PTD_NAME_ATTR: path[-1],
                    }
                arr = parent.create_array(escaped or path[-1], shape=shape, dtype=dtype, **kwargs)
                if data is not None and arr.size:
                    arr[...] = data
        except (TypeError, ValueError) as err:
            raise self._create_error(path, shape, dtype, kwargs, err) from None
        self._cache[path] = arr
        return arr

    def _meta(self, path: Path, arr: zarr.Array) -> ArrayMeta:
        md = arr.metadata
        dt, chunks, compression, inner = array_layout(arr)
        meta = self._describe_array(
            path,
            tuple(md.shape),
            dt,
            self._node_attrs(path, md.attributes, deep=False),
            chunks=chunks,
            compression=compression,
            stored_nbytes=None,
        )
        if inner is not None:
            meta = dataclasses.replace(meta, inner_chunks=inner)
        return meta

    def _value_kind(
        self, dtype: np.dtype, attrs: Mapping[str, Any]
    ) -> tuple[ValueKind, str | None]:
        """Torch's dtypes first (unless the array is a marked payload), then compound types
        (unsupported), then non-tensors by marker or dtype."""
        marker = attrs.get(TD_NON_TENSOR_ATTR)
        if marker is None:
            kind, name = self._numeric_kind(dtype, attrs)
            if kind is ValueKind.NUMERIC:
                return kind, name
        if dtype.kind == "V" and dtype.fields is not None:
            return ValueKind.UNSUPPORTED, f"a structured type ({', '.join(dtype.names or ())})"
        return ValueKind.NON_TENSOR, zarr_codec.non_tensor_kind(dtype, marker)

    def _is_payload(self, attrs: Mapping[str, Any]) -> bool:
        return attrs.get(TD_NON_TENSOR_ATTR) is not None

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
        for stored, node in members:
            self._check_member(path, stored)
            name = self._listed_name(stored, node)
            self._cache[path + (name,)] = node
            out.append((name, NodeKind.ARRAY if isinstance(node, zarr.Array) else NodeKind.GROUP))
        return sorted(out, key=lambda m: m[0])

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
        listed: list[tuple[Path, Node]] = []
        for name, node in members:
            self._check_member(path, name)
            listed.append((tuple(name.split("/")), node))
        # stored names -> the names they stand for, parents first
        original: dict[Path, Path] = {(): ()}
        for rel, node in sorted(listed, key=lambda m: len(m[0])):
            parent = original.get(rel[:-1])
            if parent is None:
                continue
            orig = parent + (self._listed_name(rel[-1], node),)
            original[rel] = orig
            kids.setdefault(parent, []).append((orig[-1], node))
            self._cache[path + orig] = node
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
            self._check_name(path)
            parent = self._require_group(path[:-1])
            self._changed()
            attributes = zarr_codec.attrs_json(dict(attrs or {}))
            escaped = self.escaped_name(path[-1])
            if escaped is not None:
                attributes[PTD_NAME_ATTR] = path[-1]
            self._cache[path] = parent.create_group(escaped or path[-1], attributes=attributes)
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
            kwargs["attributes"] = {
                **kwargs.get("attributes", {}),
                **zarr_codec.attrs_json(dict(attrs)),
            }
        self._new_array(path, shape, np.dtype(dtype), data, kwargs)

    # many small arrays read at once (zarr_read.py)
    read_many = zarr_read.read_many

    def create_arrays(self, specs: Sequence[NewArray]) -> None:
        """Many nodes at once, concurrently (``zarr_bulk.py``); those with escaped names (or
        names that look escaped) one by one."""
        if all(self._plain_path(spec.path) for spec in specs):
            zarr_bulk.create(self, specs)
        else:
            Backend.create_arrays(self, specs)

    def create_groups(self, specs: Sequence[tuple[Path, Mapping[str, Any] | None]]) -> None:
        if all(self._plain_path(path) for path, _ in specs):
            zarr_bulk.create_groups(self, specs)
        else:
            Backend.create_groups(self, specs)

    def _check_name(self, path: Path) -> None:
        """Refuse a name no zarr store can hold, and an escaped name whose stored form another
        node has taken (a node named like an escaped name, without the record)."""
        name = path[-1]
        problem = self.name_problem(name)
        if problem is not None:
            raise PtdKeyError(
                f"cannot create key {self.key_str(path)!r} in {self._location}: {problem}"
            )
        stored = self.escaped_name(name) or name
        if "%" not in stored:
            return
        parent = self._get(path[:-1])
        if isinstance(parent, zarr.Group) and self._get(path) is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                taken = stored in parent
            if taken:
                raise PtdKeyError(
                    f"cannot create key {self.key_str(path)!r} in {self._location}: it is "
                    f"stored as {stored!r}, and another node has that name"
                )

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
            kwargs["chunks"] = leading_chunks(shape if spec is None else spec, shape)
        if "attributes" in kwargs:
            kwargs["attributes"] = zarr_codec.attrs_json(dict(kwargs["attributes"] or {}))
        return kwargs

    def _delete(self, path: Path, key: str) -> None:
        if self._get(path) is None:
            raise self._not_found(path)
        if not getattr(self._store, "supports_deletes", True):
            raise UnsupportedOperationError(
                f"cannot delete key {key!r}: the store {self._location} does not support deletes "
                "(e.g. a zip file); write a new store instead"
            )
        parent = self._group(path[:-1])
        del parent[self.escaped_name(path[-1]) or path[-1]]
        self._forget(path)
        self._changed()

    def _move(self, src: Path, dst: Path) -> None:
        """A directory rename for local stores, else a byte copy of the node's keys (chunks are
        never decoded)."""
        if not getattr(self._store, "supports_deletes", True):
            raise UnsupportedOperationError(
                f"cannot move key {self.key_str(src)!r}: the store {self._location} does not "
                "support deletes"
            )
        self._require_group(dst[:-1])
        self._check_name(dst)
        prefix = f"{self._root.path}/" if self._root.path else ""
        s, d = prefix + "/".join(self.stored_path(src)), prefix + "/".join(self.stored_path(dst))
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
        self._record_name(dst)
        self._changed()

    def _record_name(self, path: Path) -> None:
        """Make the ``__ptd_name__`` record of the node just moved to ``path`` its new name's
        (set for an escaped name, dropped otherwise)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node = self._root["/".join(self.stored_path(path))]
            attrs = dict(node.metadata.attributes)
            if self.escaped_name(path[-1]) is not None:
                attrs[PTD_NAME_ATTR] = path[-1]
            elif attrs.pop(PTD_NAME_ATTR, None) is None:
                return
            node.attrs.put(attrs)

    # --- attributes --------------------------------------------------------------------------
    def get_attrs(self, path: Path) -> dict[str, Any]:
        node = self._get(path)
        if node is None:
            raise self._not_found(path)
        return self._node_attrs(path, node.metadata.attributes, deep=True)

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        key = self.key_str(path)
        self._check_writable(key)
        node = self._get(path)
        if node is None:
            raise self._not_found(path)
        try:
            with warnings.catch_warnings():
                # a zip store appends a second zarr.json entry (the last one is read)
                warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
                listed = node.metadata.attributes.get(PTD_BYTES_ATTRS)
                new = node.update_attributes(zarr_codec.attrs_json(dict(attrs), listed))
        except (TypeError, ValueError) as err:
            raise PtdTypeError(
                f"cannot store attributes {dict(attrs)!r} on key {key!r} in {self._location}: {err}"
            ) from None
        self._cache[path] = new if new is not None else node
        if not path:
            self._root = self._cache[path]
        self._changed()

    # --- data --------------------------------------------------------------------------------
    def _array_handle(self, path: Path) -> zarr.Array:
        return self._array(path)

    def _read(self, handle: zarr.Array, selection: Selection) -> np.ndarray:
        return read_selection(handle, selection)

    def _write(self, handle: zarr.Array, selection: Selection, value: np.ndarray) -> None:
        if any(isinstance(s, np.ndarray) for s in selection):
            handle.oindex[selection] = value
        else:
            handle[selection if selection else ...] = value

    # --- string arrays -----------------------------------------------------------------------
    def string_type(self, meta: ArrayMeta) -> StringType | None:
        return zarr_codec.string_type(self._array(meta.path))

    def read_strings(self, path: Path) -> np.ndarray:
        arr = self._array(path)
        stype = zarr_codec.string_type(arr)
        if stype is None:
            return super().read_strings(path)
        data = np.asarray(arr[...])
        if stype.kind in (VLEN_UTF8, VLEN_BYTES):
            return as_object_array(data, text=stype.kind == VLEN_UTF8)
        return data

    def create_strings(
        self,
        path: Path,
        stype: StringType,
        data: np.ndarray,
        *,
        attrs: Mapping[str, Any] | None = None,
        chunks: Sequence[int] | None = None,
    ) -> None:
        try:
            dtype, values, extra = zarr_codec.string_array(stype, data)
        except (ValueError, TypeError, UnicodeError) as err:
            raise PtdValueError(
                f"cannot write key {self.key_str(path)!r} to {self._location} as "
                f"{stype.tag()} strings: {err}"
            ) from None
        shape = tuple(values.shape)
        kwargs = self._create_kwargs(shape, None, chunks)
        kwargs["attributes"] = {**zarr_codec.attrs_json(dict(attrs or {})), **extra}
        arr = self._new_array(path, shape, dtype, None, kwargs)
        if values.size:
            arr[...] = values

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
        shape = None if stack_shape is None else tuple(int(s) for s in stack_shape)
        data, attributes, strings = zarr_codec.encode(value, shape, key, self._location)
        if strings:  # a zarr string array: user chunks/compressors apply
            assert shape is not None
            kwargs = self._create_kwargs(shape, options, None)
            kwargs["attributes"] = {**kwargs.get("attributes", {}), **attributes}
            self._new_array(path, shape, str, data, kwargs)
            return
        # payloads always use the default layout, whatever the options (as tensordict does)
        kwargs = {"chunks": (max(1, data.size),), "compressors": None, "attributes": attributes}
        self._new_array(path, data.shape, np.uint8, data, kwargs)

    def _non_tensor_entry(self, path: Path) -> zarr.Array:
        arr = self._array(path)
        zarr_codec.check_stack_marker(
            arr.metadata.attributes, tuple(arr.shape), self.key_str(path), self._location
        )
        return arr

    def _decode_non_tensor(
        self,
        entry: zarr.Array,
        key: str,
        selection: Selection,
        *,
        allow_pickle: bool | None,
        as_stack: bool,
    ) -> NonTensorPayload:
        return zarr_codec.decode(
            entry,
            key,
            self._location,
            selection,
            allow_pickle=allow_pickle,
            as_stack=as_stack,
            read_rows=read_selection,
        )
