"""The Zarr v3 backend (zarr 3.1.2 to 3.1.x, see zarr/version.py), on-disk compatible with tensordict 0.15's ``backend="zarr"``.

Layout (``docs/format.md`` §2): groups are nested tensordicts, arrays are leaves.
Tensors are one uncompressed chunk by default (``compressors=None``; a ``chunks=`` option covers
the leading dims). Non-tensors are 1-D ``uint8`` JSON/pickle payloads marked
``__tensordict_non_tensor__``, except stacks of str, which are zarr ``string`` arrays marked
``__tensordict_stack__`` (see :mod:`~ptd.storage.zarr.codec`).

Differences from tensordict, all fixes: a write whose shape does not fit raises instead of being
cut; :attr:`ZarrBackend.reopen_spec` never repeats mode ``"w"``; consolidated
metadata, when the store has it, is removed at a session's first metadata change (so that it
is never stale) and written again in :meth:`~ZarrBackend.flush` / :meth:`~ZarrBackend.close`
(:mod:`~ptd.storage.zarr.consolidated`); a writable ``ZipStore`` handed over is closed
(finalized) by :meth:`~ZarrBackend.close`. Children are listed in name order
(the store's order is arbitrary).

Opening stores is :mod:`~ptd.storage.zarr.opening`; uncompressed chunks of local stores
are read from memory maps by :mod:`~ptd.storage.zarr.maps`. zarr is imported only
by the modules of this package, ``ptd/storage/zarr/``.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import zarr
from zarr.abc.store import Store
from zarr.storage import LocalStore, ZipStore

from ptd.errors import (
    CorruptStoreError,
    PtdKeyError,
    PtdTypeError,
    ReadOnlyError,
    UnsupportedOperationError,
)
from ptd.format.names import (
    ENCODING_PICKLE,
    NAME_MAX_BYTES,
    PTD_BYTES_ATTRS,
    PTD_FLOAT_ATTRS,
    PTD_NAME_ATTR,
    TD_NON_TENSOR_ATTR,
)
from ptd.format.payload import refuse_pickle
from ptd.format.tables import describe_table
from ptd.storage import spelled
from ptd.storage.api import (
    ArrayMeta,
    Backend,
    NodeKind,
    NonTensorPayload,
    Path,
    Selection,
    ValueKind,
    check_mode,
    check_path,
)
from ptd.storage.chunk_info import ChunkInfo
from ptd.storage.chunking import leading_chunks
from ptd.storage.limits import check_depth, limit
from ptd.storage.location import OpenOptions, ReopenSpec
from ptd.storage.paths import unsafe_part
from ptd.storage.properties import (
    ArrayProperties,
    Codec,
    CodecSupport,
    Encoding,
    StoreProperties,
)
from ptd.storage.read.cache import cache_budget
from ptd.storage.strings import StringType
from ptd.storage.targets import parse_target
from ptd.storage.zarr import bulk as zarr_bulk
from ptd.storage.zarr import codec as zarr_codec
from ptd.storage.zarr import names as zarr_names
from ptd.storage.zarr import properties as zarr_properties
from ptd.storage.zarr import read as zarr_read
from ptd.storage.zarr import refs as zarr_refs
from ptd.storage.zarr import unreadable as zarr_unreadable
from ptd.storage.zarr.arrays import array_layout, read_selection
from ptd.storage.zarr.checked import install as _install_checked_pipeline
from ptd.storage.zarr.chunk_index import zarr_chunk_info
from ptd.storage.zarr.consolidated import Consolidation
from ptd.storage.zarr.decode import ZarrChunks
from ptd.storage.zarr.maps import ZarrMaps
from ptd.storage.zarr.opening import check_v2_mode, local_store, open_root, remote_store
from ptd.storage.zarr.policy import POLICY
from ptd.storage.zarr.private import default_buffer_prototype, sync
from ptd.storage.zarr.sizes import chunk_file_sizes
from ptd.storage.zarr.unreadable import UnreadableNode, listed_members

# zarr-python's own decodes (v2 arrays, zip/remote stores...) check chunk headers too
_install_checked_pipeline()

__all__ = ["ZarrBackend"]

Node = Any  # zarr.Array | zarr.Group | UnreadableNode


class ZarrBackend(Backend):
    """One open zarr group hierarchy (a path, a zarr store, or a user's ``zarr.Group``)."""

    name = "zarr"
    policy = POLICY

    @classmethod
    def escaped_name(cls, name: str) -> str | None:
        return zarr_names.escaped_name(name)

    @classmethod
    def name_problem(cls, name: str, *, array: bool = False) -> str | None:
        why = super().name_problem(name, array=array)
        if why is not None:
            return why
        stored = zarr_names.escaped_name(name) or name
        size = len(stored.encode("utf-8"))
        if size > NAME_MAX_BYTES:  # a directory of a local store: its name is a file name
            return (
                f"its name is {size} bytes{' escaped' if stored != name else ''}, and a zarr "
                f"store keeps each node as a directory, whose name file systems hold to "
                f"{NAME_MAX_BYTES} bytes"
            )
        return None

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
            # the fast path: uncompressed chunks read from memory maps (zarr/maps.py)
            maps=ZarrMaps.create(root.store, writable, fast_path),
        )
        self._root = root
        self._store = root.store
        self._spec = spec
        self._owns_store = owns_store
        self._cache: dict[Path, Node] = {(): root}
        # each array's steps that unpickle, found once per opened array (a read checks them)
        self._unpickles: dict[Path, tuple[zarr.Array, tuple[str, ...]]] = {}
        self._consolidation = Consolidation(self._store, root.path, fresh=fresh)
        # compressed/sharded chunks decoded in parallel, through a chunk cache (zarr/decode.py)
        self._chunked = ZarrChunks.create(root.store, writable, cache_budget(chunk_cache))

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        target: Any,
        mode: str = "r",
        options: OpenOptions | None = None,
        **changes: Any,
    ) -> ZarrBackend:
        """Open a zarr group: a path (a directory, a ``.zip`` file or an fsspec URL), a
        ``zarr.abc.store.Store``, or an open ``zarr.Group`` (used as is; ``mode`` ignored).

        Stores and groups passed in are not closed by :meth:`close`, except a writable
        ``ZipStore`` (a zip is not readable until it is closed). ``fast_path``: read
        uncompressed chunks of a local store from memory maps (None: on unless
        ``PTD_FAST_PATH=0``; see ``fast_path``). ``chunk_cache``: the budget of the cache of
        decoded chunks, used in mode ``"r"`` (see ``read/cache.py``). The options come as one
        :class:`~ptd.storage.location.OpenOptions` (``changes`` applied to it).
        """
        check_mode(mode)
        o = OpenOptions.of(options, **changes)
        storage_options, fast_path, chunk_cache = o.storage, o.fast_path, o.chunk_cache
        use_consolidated = o.use_consolidated
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
        self._unpickles.clear()
        if self._owns_store or (isinstance(self._store, ZipStore) and not self._store.read_only):
            # a writable ZipStore holds nothing readable until it is closed (its central
            # directory is written then): close it even when the user handed it over, so that
            # after close() the store holds everything written
            self._store.close()

    def stored_sizes(self, paths: Sequence[Path]) -> dict[Path, int]:
        # zarr states no stored size: the sizes of the chunk files, listed once (a store
        # opened from a zarr object, with no location to list, tells none)
        self._check_open("/")
        if self._spec is None or not paths:
            return {}
        loc = self._spec.location
        stored = {self.stored_path(p): p for p in paths}
        sizes = chunk_file_sizes(loc.path, list(stored), loc.options)
        return {stored[q]: n for q, n in sizes.items()}

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
        self.check_writable("/")
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
        if parent is None and len(path) > 1 and not zarr_names.plain_path(path[:-1]):
            parent = self._get(path[:-1])  # each escaped name checked against its record
            if not isinstance(parent, zarr.Group):
                return None
        up = self.escaped_path(path[:-1]) if parent is None else self.stored_path(path[:-1])
        stored = up + (self.escaped_name(path[-1]) or path[-1],)
        node = self._open_stored(parent, path, stored)
        if node is None and stored[-1] != path[-1] and "\\" not in path[-1]:
            # a store another tool wrote may hold the name as it is (Zarr v2 reserves none)
            stored = stored[:-1] + (path[-1],)
            node = self._open_stored(parent, path, stored)
        if node is None:
            return None
        if (
            not isinstance(node, UnreadableNode)
            and zarr_names.listed_name(stored[-1], node) != path[-1]
        ):
            return None  # another name is recorded for the node stored there
        self._cache[path] = node
        return node

    def stored_path(self, path: Path) -> Path:
        """``path`` as the store names it: the name each node is really stored under (an
        escaped one, or a name another tool wrote as it is), else its escaped form."""
        node = self._get(path) if path else None
        full = getattr(node, "path", None) if not isinstance(node, UnreadableNode) else None
        if not isinstance(full, str):
            return self.escaped_path(path)
        root = self._root.path.strip("/")
        rel = full.strip("/")[len(root) :].strip("/") if root else full.strip("/")
        return tuple(rel.split("/")) if rel else ()

    def escaped_path(self, path: Path) -> Path:
        """``path`` with every name in the form ptd stores it under (escaped where needed)."""
        return tuple(self.escaped_name(p) or p for p in path)

    def _open_stored(self, parent: Any, path: Path, stored: Path) -> Node | None:
        """The node stored at ``stored`` (the key ``path``), opened from its cached
        ``parent`` group where there is one: None where nothing is stored, an
        :class:`UnreadableNode` where zarr cannot parse its metadata."""
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if isinstance(parent, zarr.Group):
                    return parent[stored[-1]]
                return self._root["/".join(stored)]
        except Exception as err:  # noqa: BLE001 - one node's metadata, never the whole store
            return zarr_unreadable.unreadable_or_missing(self, path, err, stored=stored)

    def _node(self, path: Path, want: NodeKind) -> Node:
        """The node at ``path``, which must be a ``want``; else PtdKeyError (and
        UnsupportedDtypeError for a node whose metadata zarr cannot read)."""
        node = self._get(path)
        if node is None:
            raise self._not_found(path)
        if isinstance(node, UnreadableNode):
            raise node.error_for(self.key_str(path), self._location)
        found = zarr_unreadable.kind_of(node)
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
        dt, chunks, compression, shards = array_layout(arr)
        meta = self._describe_array(
            path,
            tuple(md.shape),
            dt,
            zarr_names.node_attrs(path, md.attributes, deep=False),
            chunks=chunks,
            compression=compression,
            stored_nbytes=None,
        )
        if meta.attrs.get(zarr_refs.REF_DTYPE_ATTR) == zarr_refs.OBJECT and dt.kind in "OTU":
            return self._reference_meta(meta)
        if self._unpickling(path, arr):  # whatever its dtype: a pickle, never a tensor
            meta = dataclasses.replace(
                meta,
                kind=ValueKind.NON_TENSOR,
                torch_dtype=None,
                non_tensor_kind=ENCODING_PICKLE,
                unsupported=None,
            )
        return dataclasses.replace(meta, shards=shards) if shards is not None else meta

    # --- the property inventory (zarr_properties.py) ------------------------------------------
    property_attrs = zarr_properties.PROPERTY_ATTRS

    def array_properties(self, path: Path, meta: ArrayMeta | None = None) -> ArrayProperties:
        meta = meta if meta is not None else self.array_meta(path)
        node = self._get(path)
        if not isinstance(node, zarr.Array):  # an unreadable node: what its document says
            return super().array_properties(path, meta)
        attrs = dict(meta.attrs)
        shape = tuple(meta.shape)
        user = spelled.user_attrs(self.name, attrs)
        return ArrayProperties(
            path=path,
            shape=shape,
            dtype=meta.dtype,
            chunks=meta.chunks,
            shards=meta.shards,
            pipeline=zarr_properties.pipeline(node),
            fill_value=zarr_properties.fill_value(node),
            dimension_names=zarr_properties.dimension_names(node, attrs),
            maxshape=zarr_properties.maxshape(attrs, shape),
            attrs=user,
            attr_types=zarr_properties.attr_types(user),
            layout="sharded" if meta.shards is not None else "chunked",
            link=None,
            cf_fill_value=zarr_properties.cf_fill_value(node, attrs),
        )

    def dimension_names(
        self, path: Path, meta: ArrayMeta | None = None
    ) -> tuple[str | None, ...] | None:
        meta = meta if meta is not None else self.array_meta(path)
        node = self._get(path)
        if not isinstance(node, zarr.Array):  # an unreadable node: its document names none
            return None
        return zarr_properties.dimension_names(node, dict(meta.attrs))

    def store_properties(self) -> StoreProperties:
        return StoreProperties(
            format=self.name,
            format_version=self.format_version,
            consolidated=self._root.metadata.consolidated_metadata is not None,
        )

    @classmethod
    def codec_support(cls, codec: Codec) -> CodecSupport:
        return zarr_properties.codec_support(codec)

    @classmethod
    def codec_note(cls, codec: Codec) -> str | None:
        return zarr_properties.codec_note(codec)

    @classmethod
    def creation_options(cls, encoding: Encoding, dtype: np.dtype) -> dict[str, Any]:
        return zarr_properties.creation_options(encoding, dtype)

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
            return ValueKind.UNSUPPORTED, describe_table(dtype)
        return ValueKind.NON_TENSOR, zarr_codec.non_tensor_kind(dtype, marker)

    def _is_payload(self, attrs: Mapping[str, Any]) -> bool:
        return attrs.get(TD_NON_TENSOR_ATTR) is not None

    # --- structure ---------------------------------------------------------------------------
    def kind(self, path: Path) -> NodeKind | None:
        node = self._get(path)
        if node is None:
            return None
        return zarr_unreadable.kind_of(node)

    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        """The group's children in name order, by the names they stand for (an escaped name
        by its recorded original: :mod:`~ptd.storage.zarr.names`; a node zarr cannot
        parse as an unsupported leaf: :mod:`~ptd.storage.zarr.unreadable`)."""
        group = self._group(path)
        self._note_links(path, group)
        members = listed_members(group, 0)
        if members is None:  # one child zarr cannot parse: each child on its own
            found = [
                self._child(path, group, stored)
                for stored in zarr_unreadable.child_names(self._store, self._root.path, path)
            ]
            return sorted(
                (name, zarr_unreadable.kind_of(node)) for name, node in filter(None, found)
            )
        out = []
        for stored, node in members:
            self._check_member(path, stored)
            name = zarr_names.listed_name(stored, node)
            self._cache[path + (name,)] = node
            out.append((name, zarr_unreadable.kind_of(node)))
        for name, _node in self._dropped(path, group, [stored for stored, _ in members]):
            out.append((name, NodeKind.ARRAY))
        return sorted(out, key=lambda m: m[0])

    def _check_member(self, path: Path, name: str) -> None:
        """A child name listed by the store (its consolidated metadata can say anything) must
        be a valid key: nothing may resolve outside the store or onto another node."""
        for part in name.split("/"):
            if unsafe_part(part) is not None:  # (also a backslash: ptd stores those escaped)
                raise CorruptStoreError(
                    f"cannot read the metadata of {self._location}: it lists a child "
                    f"{self.key_str(path + (name,))!r}, which is not a valid key (damaged or "
                    "hostile metadata)"
                )

    def _child(self, path: Path, group: Any, stored: str) -> tuple[str, Node] | None:
        """The child stored as ``stored`` in ``group`` (at ``path``), by the name it stands
        for, cached; None when no node is stored there."""
        self._check_member(path, stored)
        node = self._open_stored(group, path + (stored,), path + (stored,))
        if node is None:
            return None
        name = stored if isinstance(node, UnreadableNode) else zarr_names.listed_name(stored, node)
        self._cache[path + (name,)] = node
        return name, node

    def _dropped(self, path: Path, group: Any, listed: list[str]) -> list[tuple[str, Node]]:
        """The children zarr left out of the listing ``listed`` (stored names) of ``group``
        without an error (a document missing a required field reads as no node): the names
        stored under it whose metadata document zarr cannot parse. A listing from consolidated
        metadata is not checked (a bad node there fails the open, which then reads the live
        listing instead)."""
        if group.metadata.consolidated_metadata is not None:
            return []
        seen = set(listed)
        out = []
        for stored in zarr_unreadable.child_names(
            self._store, self._root.path, self.stored_path(path)
        ):
            if stored in seen:
                continue
            child = self._child(path, group, stored)
            if child is not None and isinstance(child[1], UnreadableNode):
                out.append(child)
        return out

    def array_meta(self, path: Path) -> ArrayMeta:
        node = self._get(path)
        if isinstance(node, UnreadableNode):
            return self._unreadable_meta(node)
        return self._meta(path, self._array(path))

    def walk(self, path: Path = ()) -> list[tuple[Path, NodeKind, ArrayMeta | None]]:
        """One ``members(max_depth=None)`` pass (else group by group), then depth first in
        name order, by the names the nodes stand for."""
        group = self._group(path)
        # zarr lists recursively: never deeper than the depth limit allows (a store nested
        # 1,000 levels hangs zarr's listing), and a node below it is refused by name
        deepest = max(0, limit("PTD_MAX_DEPTH") - len(path))
        members = listed_members(group, deepest)
        self._note_links(path, group)
        if members is None:
            return super().walk(path)
        listed: list[tuple[Path, Node]] = []
        for stored, node in members:
            self._check_member(path, stored)
            listed.append((tuple(stored.split("/")), node))
        for rel, node in listed:
            if isinstance(node, zarr.Group):
                check_depth(path + rel, self._location)
        # stored paths -> the names they stand for, parents first
        original: dict[Path, Path] = {(): ()}
        kids: dict[Path, list[tuple[str, Node]]] = {}
        stored_kids: dict[Path, list[str]] = {(): []}
        groups: dict[Path, Any] = {(): group}
        for rel, node in sorted(listed, key=lambda m: len(m[0])):
            parent = original.get(rel[:-1])
            if parent is None:
                continue
            orig = parent + (zarr_names.listed_name(rel[-1], node),)
            original[rel] = orig
            kids.setdefault(parent, []).append((orig[-1], node))
            stored_kids.setdefault(parent, []).append(rel[-1])
            self._cache[path + orig] = node
            if isinstance(node, zarr.Group):
                groups[orig] = node
        for rel, g in groups.items():  # nodes zarr dropped from the listing without an error
            kids.setdefault(rel, []).extend(self._dropped(path + rel, g, stored_kids.get(rel, [])))
        out: list[tuple[Path, NodeKind, ArrayMeta | None]] = []

        # depth first in name order, with a stack (no recursion: see the depth limit above)
        top: Path = ()
        todo: list[tuple[Path, str, Node]] = [
            (top, name, node) for name, node in sorted(kids.get(top, ()), key=lambda m: m[0])
        ][::-1]
        while todo:
            rel, name, node = todo.pop()
            p = path + rel + (name,)
            if isinstance(node, zarr.Array):
                out.append((p, NodeKind.ARRAY, self._meta(p, node)))
            elif isinstance(node, UnreadableNode):
                out.append((p, NodeKind.ARRAY, self._unreadable_meta(node)))
            else:
                out.append((p, NodeKind.GROUP, None))
                self._note_links(p, node)
                sub = rel + (name,)
                todo.extend(
                    (sub, n, c) for n, c in sorted(kids.get(sub, ()), key=lambda m: m[0])[::-1]
                )
        return out

    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        key = self.key_str(path)
        self.check_writable(key)
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

    # many nodes at once, concurrently (zarr/bulk.py; escaped names one by one)
    create_arrays, create_groups = zarr_bulk.create, zarr_bulk.create_groups

    def _check_name(self, path: Path) -> None:
        zarr_names.check_name(self, path)

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
        zarr_names.record_name(self, path)

    # --- references and soft links, as hdmf-zarr spells them (zarr/refs.py) ------------------
    holds_links = True
    holds_references = True
    #: a zarr copy holds references and links only as the paths they name (see zarr/refs.py)
    references_as_paths = True

    @classmethod
    def maybe_reference(cls, value: Any) -> bool:
        return zarr_refs.is_reference_attr(value)

    def _reference_meta(self, meta: ArrayMeta) -> ArrayMeta:
        return dataclasses.replace(
            meta,
            kind=ValueKind.UNSUPPORTED,
            torch_dtype=None,
            non_tensor_kind=None,
            stack_shape=None,
            unsupported="object references (stored as the paths they name, hdmf-zarr's way)",
            reference="object",
        )

    def _v2_docs(self, path: Path) -> tuple[Any, Any, str]:
        """The ``.zarray`` and ``.zattrs`` documents (parsed, None where absent or not JSON)
        of the node at ``path``, and its stored prefix."""
        stored = self.stored_path(path[:-1]) + (path[-1],)
        prefix = "/".join(([self._root.path] if self._root.path else []) + list(stored))
        docs = []
        for name in (".zarray", ".zattrs"):
            raw = zarr_unreadable._get_bytes(self._store, f"{prefix}/{name}")
            try:
                docs.append(json.loads(raw) if raw is not None else None)
            except ValueError:
                docs.append(None)
        return docs[0], docs[1], prefix

    def _unreadable_meta(self, node: UnreadableNode) -> ArrayMeta:
        """An unreadable node's meta: hdmf-zarr's Zarr v2 reference array (dtype ``|O``, JSON
        elements) is a reference leaf with its attributes; anything else as it is."""
        meta = node.meta()
        if node.document != ".zarray":
            return meta
        zarray, zattrs, _ = self._v2_docs(node.path)
        if not zarr_refs.is_v2_reference_array(zarray, zattrs):
            return meta
        attrs = zarr_names.node_attrs(node.path, zattrs, deep=False)
        chunks = zarray.get("chunks")
        return self._reference_meta(
            dataclasses.replace(
                meta,
                attrs=attrs,
                dtype=np.dtype(object),
                chunks=tuple(chunks) if isinstance(chunks, list) else None,
                unreadable=False,
            )
        )

    def _v2_reference_values(self, path: Path) -> np.ndarray:
        """The elements of a hdmf-zarr Zarr v2 reference array (1-D), chunk by chunk."""
        zarray, _zattrs, prefix = self._v2_docs(path)
        shape, chunks = zarray.get("shape"), zarray.get("chunks")
        if not (isinstance(shape, list) and isinstance(chunks, list) and len(shape) == 1):
            raise zarr_refs.BadReference(
                f"only 1-D reference arrays are read (shape {shape!r}, chunks {chunks!r})"
            )
        n, step = int(shape[0]), max(1, int(chunks[0]))
        out = np.full(n, "", dtype=object)
        for i, start in enumerate(range(0, n, step)):
            raw = zarr_unreadable._get_bytes(self._store, f"{prefix}/{i}")
            if raw is None:
                continue  # a chunk never written: the fill value, a null reference
            chunk = zarr_refs.decode_v2_chunk(zarray, raw).reshape(-1)
            stop = min(n, start + step)
            out[start:stop] = chunk[: stop - start]
        return out

    def read_reference_paths(self, path: Path, selection: Selection) -> np.ndarray:
        key = self.key_str(path)
        node = self._get(path)
        if node is None:
            raise self._not_found(path)
        try:
            if isinstance(node, UnreadableNode):
                if self._unreadable_meta(node).reference != "object":
                    raise node.error_for(key, self._location)
                values: Any = self._v2_reference_values(path)[selection if selection else ()]
            else:
                values = self._array(path)[selection if selection else ()]
            return zarr_refs.decode_elements(values)
        except (zarr_refs.BadReference, zarr_refs.OtherStore) as err:
            raise zarr_refs.read_error(self._location, key, err) from None

    def reference_attrs(self, path: Path) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, value in self.get_attrs(path).items():
            if not zarr_refs.is_reference_attr(value):
                continue
            try:
                out[name] = zarr_refs.attr_paths(value)
            except (zarr_refs.BadReference, zarr_refs.OtherStore) as err:
                raise zarr_refs.read_error(
                    self._location, f"{self.key_str(path) or '/'}: attribute {name!r}", err
                ) from None
        return out

    def _holds_path(self, target: str) -> bool:
        """Whether an object (or a soft link made here) is at the absolute path ``target``."""
        parts = tuple(p for p in target.split("/") if p)
        return self.kind(parts) is not None or any(
            parts[:i] in self.walk_links for i in range(1, len(parts) + 1)
        )

    def _missing(self, paths: Any, missing: list[str]) -> None:
        for p in np.asarray(paths, dtype=object).ravel():
            p = str(p) if p is not None else ""
            if p and p not in missing and not self._holds_path(p):
                missing.append(p)

    def create_reference_array(
        self,
        path: Path,
        shape: tuple[int, ...],
        *,
        chunks: tuple[int, ...] | None = None,
        maxshape: tuple[int | None, ...] | None = None,
        attrs: Mapping[str, Any] | None = None,
    ) -> None:
        kwargs = self._create_kwargs(shape, None, chunks)
        kwargs["attributes"] = {
            **zarr_codec.attrs_json(dict(attrs or {})),
            zarr_refs.REF_DTYPE_ATTR: zarr_refs.OBJECT,
        }
        if maxshape is not None and shape:  # an HDF5 maxshape, recorded as for any array
            kwargs["attributes"][zarr_properties.MAXSHAPE_ATTR] = list(maxshape)
        kwargs["fill_value"] = ""
        self._new_array(path, shape, str, None, kwargs)

    def write_reference_paths(
        self, path: Path, selection: Selection, paths: np.ndarray
    ) -> list[str]:
        self.check_writable(self.key_str(path))
        missing: list[str] = []
        self._missing(paths, missing)
        arr = np.asarray(paths, dtype=object)
        out = np.empty(arr.shape, dtype=object)
        for i, p in np.ndenumerate(arr):
            p = str(p) if p is not None else ""
            out[i] = "" if p in missing else zarr_refs.encode_element(p)
        self._array(path)[selection if selection else ()] = out
        return missing

    def set_reference_attrs(self, path: Path, refs: Mapping[str, Any]) -> list[str]:
        missing: list[str] = []

        def kept(p: Any) -> Any:
            if isinstance(p, list):
                return [kept(x) for x in p]
            self._missing([p], missing)
            return "" if p in missing else p

        self.set_attrs(path, {n: zarr_refs.encode_attr(kept(v)) for n, v in refs.items()})
        return missing

    def create_soft_link(self, path: Path, target: str) -> None:
        self.check_writable(self.key_str(path))
        parent = path[:-1]
        self._require_group(parent)
        full = zarr_refs.absolute_target(parent, target)
        links = zarr_refs.with_link(self.get_attrs(parent), path[-1], full)
        self.set_attrs(parent, {zarr_refs.LINK_ATTR: links})
        self.walk_links[path] = f"soft link to {full}"

    def _note_links(self, path: Path, group: Any) -> None:
        """Record the soft links the group at ``path`` lists in ``zarr_link`` (each in
        :attr:`walk_links` as ``"soft link to /target"``; a malformed one, or one into another
        store, in :attr:`walk_skipped` with why)."""
        attributes = getattr(getattr(group, "metadata", None), "attributes", None) or {}
        if zarr_refs.LINK_ATTR not in attributes:
            return
        links, bad = zarr_refs.link_entries(attributes)
        for name, target in links.items():
            self.walk_links[path + (name,)] = f"soft link to {target}"
        for name, why in bad.items():
            self._skip(path + (name,), why)

    # --- attributes --------------------------------------------------------------------------
    def get_attrs(self, path: Path) -> dict[str, Any]:
        node = self._get(path)
        if node is None:
            raise self._not_found(path)
        if isinstance(node, UnreadableNode):
            meta = self._unreadable_meta(node)
            return dict(meta.attrs) if meta.reference is not None else {}
        attributes = node.metadata.attributes
        most = limit("PTD_MAX_ATTRS")
        if len(attributes) > most:
            # the first ones in the document's order, and ptd's own ("__..."): copying and
            # handing out 200,000 attributes costs seconds at every read of them
            kept = dict(itertools.islice(attributes.items(), most))
            kept.update((k, v) for k, v in attributes.items() if k.startswith("__"))
            self.attrs_skipped[path] = {
                f"({len(attributes) - most} more)": (
                    f"not read: the node holds {len(attributes)} attributes, more than "
                    f"PTD_MAX_ATTRS ({most})"
                )
            }
            attributes = kept
        return zarr_names.node_attrs(path, attributes, deep=True)

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        key = self.key_str(path)
        self.check_writable(key)
        node = self._get(path)
        if node is None:
            raise self._not_found(path)
        try:
            with warnings.catch_warnings():
                # a zip store appends a second zarr.json entry (the last one is read)
                warnings.filterwarnings("ignore", "Duplicate name", UserWarning)
                current = node.metadata.attributes
                listed, floats = current.get(PTD_BYTES_ATTRS), current.get(PTD_FLOAT_ATTRS)
                new = node.update_attributes(zarr_codec.attrs_json(dict(attrs), listed, floats))
        except (TypeError, ValueError) as err:
            raise PtdTypeError(
                f"cannot store attributes {dict(attrs)!r} on key {key!r} in {self._location}: {err}"
            ) from None
        self._cache[path] = new if new is not None else node
        if not path:
            self._root = self._cache[path]
        self._changed()

    # --- data --------------------------------------------------------------------------------
    def _unpickling(self, path: Path, arr: zarr.Array) -> tuple[str, ...]:
        """:func:`~ptd.storage.zarr.codec.unpickling_codecs` of the array opened at ``path``,
        remembered for that array object (a dict lookup per read, not a pipeline walk)."""
        hit = self._unpickles.get(path)
        if hit is not None and hit[0] is arr:
            return hit[1]
        steps = zarr_codec.unpickling_codecs(arr)
        self._unpickles[path] = (arr, steps)
        return steps

    def _array_handle(self, path: Path) -> zarr.Array:
        arr = self._array(path)
        if self._unpickling(path, arr):  # never read as data: only read_non_tensor opts in
            refuse_pickle(False, key=self.key_str(path), location=self._location, source="codec")
        return arr

    def _chunk_info(self, handle: zarr.Array, list_stored: bool) -> ChunkInfo:
        return zarr_chunk_info(handle, list_stored)

    def _read(self, handle: zarr.Array, selection: Selection) -> np.ndarray:
        return read_selection(handle, selection)

    def _write(self, handle: zarr.Array, selection: Selection, value: np.ndarray) -> None:
        if any(isinstance(s, np.ndarray) for s in selection):
            handle.oindex[selection] = value
        else:
            handle[selection if selection else ...] = value

    # --- string arrays (zarr/codec.py) ------------------------------------------------------
    def string_type(self, meta: ArrayMeta) -> StringType | None:
        return zarr_codec.string_type(self._array(meta.path))

    def read_strings(self, path: Path) -> np.ndarray:
        data = zarr_codec.read_strings(self._array(path), self.key_str(path), self._location)
        return super().read_strings(path) if data is None else data

    create_strings = zarr_codec.create_strings

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
        key = self.key_str(path)
        zarr_codec.check_stack_marker(
            arr.metadata.attributes, tuple(arr.shape), key, self._location
        )
        zarr_codec.check_payload_size(arr, key, self._location)
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
