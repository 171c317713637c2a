"""A read-only backend for memmap directories (``docs/format.md`` section 3): what
``ptd memmap``, ``TensorDict.memmap()`` and tensordict 0.15 write, read without torch, so that
``ptd inspect``/``validate``/``diff``/``convert`` take them as they take HDF5 and Zarr stores.

How the directory maps onto the backend interface:

* a directory whose ``meta.json`` describes a TensorDict is a **group**; its batch size
  (``shape``) and dim names (``_names``) are given as the group's ``__tensordict__``
  attribute, so that it reads as *stored*;
* a tensor entry of a ``meta.json`` (``dtype``, ``shape``) is a numeric **array**, read from its
  ``<key>.memmap`` file of raw little-endian C-order bytes (none when it has no elements);
  bfloat16 and the float8 types are their bits in unsigned integers, marked ``__ptd_dtype__``
  as in the other formats;
* a ``NonTensorData`` sub-directory is a non-tensor of one value (``json`` when the value is
  in its ``meta.json``, ``pickle`` when it is in ``other.pickle``), a ``NonTensorStack`` one a
  stack whose shape is its nested list's: its parent's batch dims, or every level of a
  nest of str, a string array (a pickled stack: its parent's batch size).

Keys are the entries of ``meta.json`` (file names are their percent-encoding); nothing else in
the directory is listed. A nested (jagged) tensor or an unknown dtype is an unsupported array.
Writing is refused: ``ptd.load_memmap`` opens a memmap directory for writing.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptd.errors import (
    CorruptStoreError,
    PtdKeyError,
    PtdValueError,
    ReadOnlyError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from ptd.format.attrvalues import json_problem, json_values
from ptd.format.dtypes import BITS, DIRECT, canonical_name
from ptd.format.memmap_dir import (
    encode_key,
    entry_attrs,
    entry_key,
    entry_name_problem,
    entry_shape,
    node_attrs,
    node_kind,
    read_meta_json,
    stored_entry_name,
)
from ptd.format.names import (
    ENCODING_JSON,
    ENCODING_PICKLE,
    MEMMAP_META,
    MEMMAP_NODE_FIELDS,
    MEMMAP_PICKLE_FILE,
    MEMMAP_STACK_PICKLE_FILE,
    MEMMAP_SUFFIX,
    PTD_DTYPE_ATTR,
    TD_NON_TENSOR_ATTR,
    TD_STACK_ATTR,
)
from ptd.format.payload import (
    decode_payload,
    has_nested_shape,
    refuse_pickle,
    select_nested,
    string_stack_shape,
)
from ptd.format.tdmeta import td_meta_attrs
from ptd.storage.api import (
    ArrayMeta,
    Backend,
    FormatPolicy,
    NodeKind,
    NonTensorPayload,
    Path,
    Selection,
    ValueKind,
    check_mode,
)
from ptd.storage.chunk_info import ChunkInfo
from ptd.storage.location import OpenOptions, ReopenSpec, StoreLocation
from ptd.storage.paths import StoreRoot
from ptd.storage.properties import Codec
from ptd.storage.selection import selection_shape
from ptd.storage.targets import parse_target

__all__ = ["MemmapDirBackend", "RawFile"]

_READ_ONLY = (
    "memmap directories are read-only here: load it with ptd.load_memmap(path, mode='r+') to "
    "change it, or convert it (ptd convert DIR x.h5)"
)


@dataclass(frozen=True)
class RawFile:
    """A tensor's ``.memmap`` file, as reads take it: checked and mapped when read."""

    file: str
    key: str
    shape: tuple[int, ...]
    #: the stored numpy dtype (little-endian on disk)
    dtype: np.dtype

    def load(self, selection: Selection) -> np.ndarray:
        """``array[selection]`` read from the file (a new array in native byte order)."""
        if 0 in self.shape:
            out = np.empty(self.shape, self.dtype)
            return out[selection] if selection else out
        need = int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize
        try:
            size = os.path.getsize(self.file)
        except FileNotFoundError:
            raise CorruptStoreError(
                f"the file {self.file} of key {self.key!r} ({self.dtype}, shape "
                f"{list(self.shape)}) is missing"
            ) from None
        if size < need:
            raise CorruptStoreError(
                f"the file {self.file} of key {self.key!r} is too short: it holds {size} bytes, "
                f"but {self.dtype} of shape {list(self.shape)} needs {need}"
            )
        mapped = np.memmap(
            self.file, dtype=self.dtype.newbyteorder("<"), mode="r", shape=self.shape
        )
        out = np.array(mapped[selection] if selection else mapped, copy=True)
        del mapped
        return out.astype(out.dtype.newbyteorder("="), copy=False)


class _Node:
    """One entry of a memmap directory: a group (``meta`` of a TensorDict directory), a tensor
    (``entry`` of its parent's ``meta.json``) or a non-tensor (``meta`` of its directory)."""

    __slots__ = ("batch", "directory", "entry", "kind", "meta")

    def __init__(
        self,
        kind: str,
        directory: str,
        meta: dict[str, Any],
        entry: dict[str, Any] | None,
        batch: tuple[int, ...],
    ) -> None:
        #: "td", "tensor", "data", "stack" or "broken"
        self.kind = kind
        #: the node's own directory (a tensor: its parent's)
        self.directory = directory
        self.meta = meta
        self.entry = entry
        #: the batch size of the group holding it (a group: its own)
        self.batch = batch


def _batch(meta: Mapping[str, Any]) -> tuple[int, ...]:
    shape = meta.get("shape", [])
    if isinstance(shape, list) and all(
        isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
    ):
        return tuple(shape)
    return ()


#: the format's name in the registry (:mod:`ptd.storage.registry`)
MEMMAP_FORMAT = "memmap"


class MemmapPolicy(FormatPolicy):
    """ptd's memmap directories: one raw file per tensor (contiguous, uncompressed) and a
    ``meta.json`` per TensorDict, read-only here (``ptd memmap`` and ``TensorDict.memmap``
    write them)."""

    name = MEMMAP_FORMAT
    label = "memmap directory"
    suffix = MEMMAP_SUFFIX
    stores_contiguous = True
    stores_chunks = False

    def codec_options(self, name: str | None, level: int) -> dict[str, Any]:
        raise UnsupportedOperationError("a memmap directory stores raw, uncompressed files")

    def chosen_steps(self, name: str | None, level: int) -> tuple[Codec, ...]:
        if name in (None, "none"):
            return ()
        raise UnsupportedOperationError("a memmap directory stores raw, uncompressed files")

    def attrs_for(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        return json_values(attrs)  # meta.json is JSON

    def attr_problem(self, value: Any) -> str | None:
        return json_problem(value)


#: the one instance (``MemmapDirBackend.policy``)
MEMMAP_POLICY = MemmapPolicy()


class MemmapDirBackend(Backend):
    """One memmap directory, opened read-only (see the module doc)."""

    name = MEMMAP_FORMAT
    policy = MEMMAP_POLICY

    def __init__(self, loc: StoreLocation, root_meta: dict[str, Any]) -> None:
        super().__init__(loc.path, writable=False)
        self._loc = loc
        #: every file read resolves inside the directory (a link out of it is refused)
        self._paths = StoreRoot(loc.path, loc.path)
        self._nodes: dict[Path, _Node] = {
            (): _Node("td", loc.path, root_meta, None, _batch(root_meta))
        }

    #: a leaf is one file of raw values: no fill value, no dimension names, a fixed size
    holds_fill_value = False
    holds_dimension_names = False
    holds_maxshape = False

    @classmethod
    def name_problem(cls, name: str, *, array: bool = False) -> str | None:
        return entry_name_problem(name, array)

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls, target: Any, mode: str = "r", options: OpenOptions | None = None, **changes: Any
    ) -> MemmapDirBackend:
        """Open the memmap directory ``target`` (a local path) read-only; any other mode than
        ``"r"`` raises ReadOnlyError. Of the options, none applies: raw files are read from
        their maps, always."""
        check_mode(mode)
        OpenOptions.of(options, **changes)  # (checked all the same)
        loc = parse_target(target, None, format=MEMMAP_FORMAT, accepted="a memmap directory")
        if mode != "r":
            raise ReadOnlyError(f"cannot open {loc.path} in mode {mode!r}: {_READ_ONLY}")
        if loc.is_remote:
            raise PtdValueError(
                f"{loc.path}: memmap directories are read from local paths only (they are "
                "memory maps of local files)"
            )
        if not os.path.isdir(loc.path):
            raise StoreNotFoundError(f"{loc.path} is not a directory: no memmap tensordict there")
        StoreRoot(loc.path, loc.path).check(os.path.join(loc.path, MEMMAP_META))
        meta = read_meta_json(loc.path)
        if meta is None or node_kind(meta) != "td":
            raise CorruptStoreError(
                f"{loc.path} is not a memmap tensordict: its {MEMMAP_META} is missing, not "
                "JSON, or does not describe a TensorDict"
            )
        return cls(loc, meta)

    @property
    def reopen_spec(self) -> ReopenSpec | None:
        return ReopenSpec.make(self._loc, "r")

    def _release_handles(self) -> None:
        self._nodes.clear()

    # --- the tree ----------------------------------------------------------------------------
    def _entries(self, group: _Node) -> list[tuple[str, dict[str, Any]]]:
        """``(key, entry)`` of each entry of the node's ``meta.json`` (escaped names undone)."""
        return [
            (entry_key(k, v), v)
            for k, v in group.meta.items()
            if k not in MEMMAP_NODE_FIELDS and isinstance(v, dict)
        ]

    def _child(self, group: _Node, name: str, entry: dict[str, Any]) -> _Node:
        if "type" not in entry:
            return _Node("tensor", group.directory, {}, entry, group.batch)
        sub = os.path.join(group.directory, encode_key(stored_entry_name(name)))
        if not os.path.isdir(sub) and os.path.isdir(os.path.join(group.directory, name)):
            sub = os.path.join(group.directory, name)  # tensordict's older, unencoded names
        self._paths.check(sub)
        self._paths.check(os.path.join(sub, MEMMAP_META))
        meta = read_meta_json(sub)
        kind = node_kind(meta) if meta is not None else None
        if meta is None or kind is None:
            return _Node("broken", sub, {}, entry, group.batch)
        return _Node(kind, sub, meta, entry, _batch(meta) if kind == "td" else group.batch)

    def _node(self, path: Path) -> _Node | None:
        self._check_open(self.key_str(path))
        node = self._nodes.get(path)
        if node is not None or not path:
            return node
        parent = self._node(path[:-1])
        if parent is None or parent.kind != "td":
            return None
        stored = stored_entry_name(path[-1])
        entry = parent.meta.get(stored)
        if (
            stored in MEMMAP_NODE_FIELDS
            or not isinstance(entry, dict)
            or entry_key(stored, entry) != path[-1]
        ):
            return None
        node = self._child(parent, path[-1], entry)
        self._nodes[path] = node
        return node

    def _need(self, path: Path, want: NodeKind) -> _Node:
        node = self._node(path)
        if node is None:
            raise self._not_found(path)
        found = NodeKind.GROUP if node.kind == "td" else NodeKind.ARRAY
        if found is not want:
            raise self._wrong_kind(path, found)
        return node

    def kind(self, path: Path) -> NodeKind | None:
        node = self._node(path)
        if node is None:
            return None
        return NodeKind.GROUP if node.kind == "td" else NodeKind.ARRAY

    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        group = self._need(path, NodeKind.GROUP)
        out: list[tuple[str, NodeKind]] = []
        for name, _entry in self._entries(group):
            node = self._node(path + (name,))
            assert node is not None
            out.append((name, NodeKind.GROUP if node.kind == "td" else NodeKind.ARRAY))
        return out

    def _exists(self, path: Path) -> bool:
        return self._node(path) is not None

    def _group(self, path: Path) -> Any:
        return self._need(path, NodeKind.GROUP).directory

    # --- metadata ----------------------------------------------------------------------------
    def get_attrs(self, path: Path) -> dict[str, Any]:
        node = self._node(path)
        if node is None:
            raise self._not_found(path)
        if node.kind == "td":
            names = node.meta.get("_names")
            if not (
                isinstance(names, list)
                and len(names) == len(node.batch)
                and all(n is None or isinstance(n, str) for n in names)
            ):
                names = None
            return {**node_attrs(node.meta), **td_meta_attrs(node.batch, names)}
        return entry_attrs(node.entry or {})

    def _tensor_file(self, path: Path, node: _Node) -> str:
        name = stored_entry_name(path[-1])
        file = os.path.join(node.directory, encode_key(name) + MEMMAP_SUFFIX)
        legacy = os.path.join(node.directory, name + MEMMAP_SUFFIX)
        if not os.path.exists(file) and "/" not in name and os.path.exists(legacy):
            file = legacy
        return self._paths.check(file)  # never a link out of the directory

    def _tensor_layout(self, path: Path, node: _Node) -> tuple[tuple[int, ...], np.dtype, str]:
        """A tensor entry's shape, stored numpy dtype and torch dtype name."""
        entry = node.entry or {}
        key = self.key_str(path)
        shape = entry.get("shape")
        if not isinstance(shape, list) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape
        ):
            raise CorruptStoreError(
                f"key {key!r} of {self._location}: its shape in {MEMMAP_META} is not a list of "
                f"non-negative ints: {shape!r}"
            )
        name = canonical_name(str(entry.get("dtype")))
        if name is None:
            raise PtdValueError(f"key {key!r} has the unknown dtype {entry.get('dtype')!r}")
        return tuple(shape), DIRECT.get(name) or BITS[name], name

    def array_meta(self, path: Path) -> ArrayMeta:
        node = self._need(path, NodeKind.ARRAY)
        key = self.key_str(path)
        if node.kind == "broken":
            raise CorruptStoreError(
                f"key {key!r} of {self._location}: its directory {node.directory} has no "
                f"readable {MEMMAP_META} describing a tensordict node"
            )
        if node.kind == "tensor":
            entry = node.entry or {}
            if entry.get("is_nested"):
                return self._unsupported(path, entry, "a nested (jagged) tensor")
            try:
                shape, dtype, name = self._tensor_layout(path, node)
            except PtdValueError as err:
                if isinstance(err, CorruptStoreError):
                    raise
                return self._unsupported(path, entry, f"the dtype {entry.get('dtype')!r}")
            attrs = {**entry_attrs(entry), **({PTD_DTYPE_ATTR: name} if name in BITS else {})}
            file = self._tensor_file(path, node)
            stored = os.path.getsize(file) if os.path.exists(file) else None
            return self._describe_array(
                path, shape, dtype, attrs, chunks=None, compression=None, stored_nbytes=stored
            )
        if node.kind == "data":
            encoding = ENCODING_JSON if "data" in node.meta else ENCODING_PICKLE
            # a value written from a string array keeps that array's shape (ptd's entry field):
            # listed with it, not as one 0-d value (no payload marker)
            kept = entry_shape(node.entry or {}, node.meta.get("data"))
            marker = {} if kept else {TD_NON_TENSOR_ATTR: {"encoding": encoding}}
            return ArrayMeta(
                path=path,
                shape=kept or (),
                dtype=np.dtype(object),
                kind=ValueKind.NON_TENSOR,
                torch_dtype=None,
                attrs={**entry_attrs(node.entry or {}), **marker},
                non_tensor_kind=encoding,
            )
        data = node.meta.get("data")
        if isinstance(data, list):
            encoding, stack = ENCODING_JSON, string_stack_shape(data, len(node.batch))
        else:  # pickled: the nested list is not read for the metadata
            encoding, stack = ENCODING_PICKLE, node.batch
        return ArrayMeta(
            path=path,
            shape=stack,
            dtype=np.dtype(object),
            kind=ValueKind.NON_TENSOR,
            torch_dtype=None,
            attrs={
                **entry_attrs(node.entry or {}),
                TD_NON_TENSOR_ATTR: {"encoding": encoding},
                TD_STACK_ATTR: list(stack),
            },
            non_tensor_kind=encoding,
            stack_shape=stack,
        )

    def _unsupported(self, path: Path, entry: dict[str, Any], what: str) -> ArrayMeta:
        shape = entry.get("shape")
        if not (isinstance(shape, list) and all(isinstance(n, int) and n >= 0 for n in shape)):
            shape = []
        return ArrayMeta(
            path=path,
            shape=tuple(shape),
            dtype=np.dtype(object),
            kind=ValueKind.UNSUPPORTED,
            torch_dtype=None,
            unsupported=what,
        )

    def _value_kind(
        self, dtype: np.dtype, attrs: Mapping[str, Any]
    ) -> tuple[ValueKind, str | None]:
        return self._numeric_kind(dtype, attrs)

    # --- data --------------------------------------------------------------------------------
    def _chunk_info(self, handle: RawFile, list_stored: bool) -> ChunkInfo:
        # a raw file: one byte range, no chunks
        shape = tuple(handle.shape)
        return ChunkInfo(chunks=shape, grid=(1,) * len(shape), contiguous=True)

    def _array_handle(self, path: Path) -> Any:
        node = self._need(path, NodeKind.ARRAY)
        if node.kind != "tensor":
            raise PtdKeyError(
                f"key {self.key_str(path)!r} in {self._location} is a non-tensor, not a tensor"
            )
        shape, dtype, _name = self._tensor_layout(path, node)
        return RawFile(self._tensor_file(path, node), self.key_str(path), shape, dtype)

    def _read(self, handle: Any, selection: Selection) -> np.ndarray:
        return handle.load(selection)

    def _non_tensor_entry(self, path: Path) -> Any:
        node = self._need(path, NodeKind.ARRAY)
        if node.kind not in ("data", "stack"):
            raise PtdKeyError(f"key {self.key_str(path)!r} in {self._location} is not a non-tensor")
        return path, node

    def _decode_non_tensor(
        self,
        entry: Any,
        key: str,
        selection: Selection,
        *,
        allow_pickle: bool | None,
        as_stack: bool,
    ) -> NonTensorPayload:
        path, node = entry
        if node.kind == "data":
            if "data" in node.meta:
                return NonTensorPayload(node.meta["data"])
            fields = self._unpickle(
                os.path.join(node.directory, MEMMAP_PICKLE_FILE), key, allow_pickle
            )
            if not isinstance(fields, dict) or "data" not in fields:
                raise CorruptStoreError(
                    f"the pickle of key {key!r} in {self._location} does not hold a dict with a "
                    "'data' field"
                )
            return NonTensorPayload(fields["data"])
        data = node.meta.get("data")
        if isinstance(data, str) and data == MEMMAP_STACK_PICKLE_FILE:
            data = self._unpickle(os.path.join(node.directory, data), key, allow_pickle)
        if not isinstance(data, list):
            raise CorruptStoreError(
                f"key {key!r} of {self._location}: the NonTensorStack data is a "
                f"{type(data).__name__}, not a list"
            )
        stack = self.array_meta(path).stack_shape or ()
        if isinstance(node.meta.get("data"), str):
            stack = string_stack_shape(data, len(node.batch))
        if not has_nested_shape(data, stack):
            raise CorruptStoreError(f"key {key!r} of {self._location}: a ragged NonTensorStack")
        shape = selection_shape(stack, selection)
        value = select_nested(data, selection)
        return NonTensorPayload(value, is_stack=bool(shape), stack_shape=shape)

    def _unpickle(self, file: str, key: str, allow_pickle: bool | None) -> Any:
        # refused before a byte is read, unless allow_pickle=True
        refuse_pickle(allow_pickle, key=key, location=file, source="memmap")
        raw = self._paths.read(file)
        if raw is None:
            raise CorruptStoreError(f"the pickle file {file} of key {key!r} is missing")
        return decode_payload(
            raw, ENCODING_PICKLE, allow_pickle=allow_pickle, key=key, location=file, source="memmap"
        )

    # --- writing: refused ----------------------------------------------------------------------
    def _refuse(self, path: Path) -> ReadOnlyError:
        return ReadOnlyError(
            f"cannot write key {self.key_str(path)!r} of {self._location}: {_READ_ONLY}"
        )

    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        raise self._refuse(path)

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
        raise self._refuse(path)

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        raise self._refuse(path)

    def write_non_tensor(
        self,
        path: Path,
        value: Any,
        *,
        stack_shape: tuple[int, ...] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        raise self._refuse(path)

    def _delete(self, path: Path, key: str) -> None:
        raise self._refuse(path)

    def _move(self, src: Path, dst: Path) -> None:
        raise self._refuse(src)

    def _write(self, handle: Any, selection: Selection, value: np.ndarray) -> None:
        raise ReadOnlyError(f"cannot write to {self._location}: {_READ_ONLY}")
