"""A small writable format as one module and one registry entry: a directory of ``.npy`` files.

It is the worked example of adding a format to ptd (``docs/architecture.md``, "Adding a
format"): :data:`ENTRY` is its :class:`~ptd.storage.registry.FormatEntry`, and once it is
registered, detection, ``convert --to npy``, ``ptd.diff``, ``ptd.validate``, ``ptd.info`` and
the backend contract (:class:`~ptd.testing.backend_contract.BackendContract`) take it as they
take HDF5 and Zarr. ``tests/storage/test_registered_format.py`` shows all of it.

The layout, kept small and honest (no compression, no chunks):

* the store is a directory holding the marker file ``.ptd-npy`` (JSON naming the format);
* every group is a directory with a ``.group.json`` of its attributes (the root's too), so a
  path leading into the store (``data.npyd/obs``) is told from its content;
* every array is ``<name>.npy`` (numpy's own format, :mod:`numpy.lib.format`), its
  attributes in ``.<name>.npy.json`` beside it; names starting with ``.`` are refused;
* a non-tensor is a 1-D ``uint8`` array of its JSON (or pickle) payload, marked as zarr's
  payloads are (``__tensordict_non_tensor__``, ``__tensordict_stack__``).

Reads map the file (``np.load(mmap_mode="r")``) and go through the one indexer
(:func:`ptd.storage.indexer.project`): the whole file is one chunk, its rows taken in the
asked order straight into the output.

    >>> import tempfile, os, numpy as np
    >>> from ptd.storage.registry import detect_backend, registered
    >>> with registered(ENTRY), tempfile.TemporaryDirectory() as tmp:
    ...     path = os.path.join(tmp, "data.npyd")
    ...     be = NpyDirBackend.open(path, "w")
    ...     be.create_array(("obs",), shape=(4, 2), dtype=np.dtype("f4"), data=np.eye(4, 2, dtype="f4"))
    ...     be.read(("obs",), (np.array([3, 0, 0]),)).tolist(), detect_backend(path)
    ...     be.close()
    ([[0.0, 0.0], [1.0, 0.0], [1.0, 0.0]], 'npy')
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptd.errors import (
    CorruptStoreError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from ptd.format.attrvalues import json_problem, json_values
from ptd.format.keynames import impossible_name
from ptd.format.names import ENCODING_PICKLE, TD_NON_TENSOR_ATTR, TD_STACK_ATTR
from ptd.format.payload import (
    decode_payload,
    encode_payload,
    has_nested_shape,
    nested_to_array,
    parse_stack_shape,
    refuse_pickle,
    select_nested,
)
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
from ptd.storage.indexer import project
from ptd.storage.indexer import read as read_chunks
from ptd.storage.location import OpenOptions, ReopenSpec, StoreLocation
from ptd.storage.properties import Codec
from ptd.storage.read.mapped import fast_path_enabled
from ptd.storage.registry import FormatEntry
from ptd.storage.targets import EXISTS_HINT, parse_target

__all__ = ["ENTRY", "MARKER", "NAME", "POLICY", "NpyDirBackend", "NpyPolicy"]

#: the format's registry name (``--to npy``)
NAME = "npy"
#: the file at a store's root that says what the directory is
MARKER = ".ptd-npy"
#: a group's attributes, in its directory
GROUP_ATTRS = ".group.json"
#: an array's file
SUFFIX = ".npy"
#: the longest file name (bytes) most file systems hold
_NAME_BYTES = 255


def _attrs_file(directory: str, name: str) -> str:
    return os.path.join(directory, f".{name}{SUFFIX}.json")


def _read_json(file: str) -> Any:
    try:
        with open(file, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except (ValueError, UnicodeDecodeError) as err:
        raise CorruptStoreError(f"{file} is not JSON: {err}") from None


def _write_json(file: str, value: Any) -> None:
    tmp = file + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(value, f)
    os.replace(tmp, file)


class NpyPolicy(FormatPolicy):
    """A directory of ``.npy`` files: every array one raw, uncompressed C-order byte range
    (contiguous, never chunked), attributes as JSON."""

    name = NAME
    label = "npy directory"
    suffix = ".npyd"
    stores_contiguous = True
    stores_chunks = False

    def codec_options(self, name: str | None, level: int) -> dict[str, Any]:
        if name in (None, "none"):
            return {}
        raise UnsupportedOperationError(f"an npy directory stores raw, uncompressed files: {name}")

    def chosen_steps(self, name: str | None, level: int) -> tuple[Codec, ...]:
        self.codec_options(name, level)
        return ()

    def attrs_for(self, attrs: Mapping[str, Any]) -> dict[str, Any]:
        return json_values(attrs)

    def attr_problem(self, value: Any) -> str | None:
        return json_problem(value)


#: the one instance (``NpyDirBackend.policy``)
POLICY = NpyPolicy()


@dataclass(frozen=True)
class NpyFile:
    """One array's ``.npy`` file: what reads and writes take (its header read once)."""

    file: str
    key: str
    shape: tuple[int, ...]
    dtype: np.dtype
    #: where the values start in the file
    offset: int

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    def mapped(self, writable: bool = False) -> np.ndarray:
        """The values as a memory map (a plain array when there are none to map). A file
        shorter than its header says maps the whole rows it holds (:meth:`check_rows` refuses
        a read past them)."""
        size = os.path.getsize(self.file) - self.offset
        shape = self.shape
        if size < self.nbytes:
            if not shape:
                raise self._short(size)
            row = self.nbytes // max(1, shape[0])
            shape = (size // row,) + shape[1:]
        if 0 in shape:
            return np.zeros(shape, self.dtype)
        return np.memmap(self.file, self.dtype, "r+" if writable else "r", self.offset, shape, "C")

    def check_rows(self, selection: Selection, mapped: np.ndarray) -> None:
        """CorruptStoreError naming the key when ``selection`` reaches past the rows the file
        holds (a file cut short)."""
        if mapped.shape == self.shape:
            return
        first = project(selection, self.shape).selection[0]
        if isinstance(first, slice):
            rows = range(*first.indices(self.shape[0]))
            last = max(rows) if len(rows) else -1
        elif isinstance(first, np.ndarray):
            last = int(first.max()) if first.size else -1
        else:
            last = max(int(a.max()) for a in first.arrays) if hasattr(first, "arrays") else first
        if last >= mapped.shape[0]:
            raise self._short(os.path.getsize(self.file) - self.offset)

    def whole(self) -> np.ndarray:
        """Every value, as a new array (CorruptStoreError for a file cut short)."""
        mapped = self.mapped()
        self.check_rows((), mapped)
        return np.array(mapped)

    def _short(self, size: int) -> CorruptStoreError:
        return CorruptStoreError(
            f"the file {self.file} of key {self.key!r} is too short: it holds {size} bytes of "
            f"values, but {self.dtype} of shape {list(self.shape)} needs {self.nbytes}"
        )


def _header(file: str, key: str) -> NpyFile:
    """The ``.npy`` header of ``file`` (shape, dtype, data offset)."""
    fmt = np.lib.format
    try:
        with open(file, "rb") as f:
            version = fmt.read_magic(f)
            read = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
            shape, fortran, dtype = read(f)
            offset = f.tell()
    except FileNotFoundError:
        raise CorruptStoreError(f"the file {file} of key {key!r} is missing") from None
    except (ValueError, OSError, SyntaxError) as err:
        raise CorruptStoreError(f"the file {file} of key {key!r} is no .npy file: {err}") from None
    if fortran or dtype.hasobject:
        raise CorruptStoreError(
            f"the file {file} of key {key!r} holds "
            + ("Fortran-ordered values" if fortran else "Python objects (a pickle)")
            + ", which an npy directory does not"
        )
    return NpyFile(file, key, tuple(int(n) for n in shape), dtype, offset)


def _orthogonal(selection: Selection, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A numpy index equal to the backend's orthogonal ``selection`` (each index array on its
    own dim), for assignment."""
    if sum(isinstance(s, np.ndarray) for s in selection) <= 1:
        return tuple(selection)
    parts: list[Any] = []
    for s, n in zip(selection, shape, strict=False):
        if isinstance(s, (int, np.integer)):
            parts.append(np.array([int(s)]))
        elif isinstance(s, slice):
            parts.append(np.arange(*s.indices(n)))
        else:
            parts.append(np.asarray(s))
    parts.extend(np.arange(n) for n in shape[len(selection) :])
    return np.ix_(*parts)


class NpyDirBackend(Backend):
    """One npy directory (see the module doc)."""

    name = NAME
    policy = POLICY
    #: one file of raw values: no fill value, no dimension names, a fixed size
    holds_fill_value = False
    holds_dimension_names = False
    holds_maxshape = False

    def __init__(self, loc: StoreLocation, mode: str, options: OpenOptions) -> None:
        super().__init__(loc.path, writable=mode != "r")
        self._loc = loc
        self._root = loc.path
        self._mapped_reads = fast_path_enabled(options.fast_path)

    @classmethod
    def name_problem(cls, name: str, *, array: bool = False) -> str | None:
        problem = impossible_name(name)
        if problem is None and name.startswith("."):
            problem = "it starts with '.', which an npy directory keeps for its own files"
        if problem is None and len((name + SUFFIX).encode()) > _NAME_BYTES:
            problem = f"it is longer than the {_NAME_BYTES} bytes a file name holds"
        return problem

    # --- lifecycle ---------------------------------------------------------------------------
    @classmethod
    def open(
        cls, target: Any, mode: str = "r", options: OpenOptions | None = None, **changes: Any
    ) -> NpyDirBackend:
        """Open the npy directory ``target`` (a local path) in ``mode``."""
        check_mode(mode)
        opts = OpenOptions.of(options, **changes)
        loc = parse_target(target, opts.storage, format=NAME, accepted="an npy directory")
        if loc.is_remote:
            raise PtdValueError(f"{loc.path}: npy directories are local directories only")
        path = loc.path
        exists = os.path.lexists(path)
        if mode in ("r", "r+") and not exists:
            raise StoreNotFoundError(f"{path} does not exist")
        if mode in ("w-", "x") and exists:
            raise StoreExistsError(f"{path} exists already: {EXISTS_HINT}")
        if exists and not (mode == "w" and _is_empty_dir(path)):
            _check_store(path)
        if mode == "w" and exists:
            shutil.rmtree(path)
        if mode in ("w", "w-", "x") or (mode == "a" and not exists):
            os.makedirs(path)
            _write_json(os.path.join(path, MARKER), {"format": NAME, "version": 1})
            _write_json(os.path.join(path, GROUP_ATTRS), {})
        return cls(loc, mode, opts)

    @property
    def reopen_spec(self) -> ReopenSpec | None:
        return ReopenSpec.make(self._loc, "r+" if self._writable else "r")

    # --- where things are --------------------------------------------------------------------
    def _dir(self, path: Path) -> str:
        return os.path.join(self._root, *path)

    def _file(self, path: Path) -> str:
        return os.path.join(self._root, *path[:-1], path[-1] + SUFFIX)

    def kind(self, path: Path) -> NodeKind | None:
        self._check_open(self.key_str(path))
        if any(p.startswith(".") for p in path):
            return None
        if os.path.isdir(self._dir(path)) and os.path.isfile(
            os.path.join(self._dir(path), GROUP_ATTRS)
        ):
            return NodeKind.GROUP
        if path and os.path.isfile(self._file(path)):
            return NodeKind.ARRAY
        return None

    def _exists(self, path: Path) -> bool:
        return self.kind(path) is not None

    def _need(self, path: Path, want: NodeKind) -> None:
        found = self.kind(path)
        if found is None:
            raise self._not_found(path)
        if found is not want:
            raise self._wrong_kind(path, found)

    def _group(self, path: Path) -> Any:
        self._need(path, NodeKind.GROUP)
        return self._dir(path)

    def children(self, path: Path) -> list[tuple[str, NodeKind]]:
        self._need(path, NodeKind.GROUP)
        out = []
        for name in sorted(os.listdir(self._dir(path))):
            if name.startswith("."):
                continue
            if name.endswith(SUFFIX) and os.path.isfile(os.path.join(self._dir(path), name)):
                out.append((name[: -len(SUFFIX)], NodeKind.ARRAY))
            elif os.path.isfile(os.path.join(self._dir(path), name, GROUP_ATTRS)):
                out.append((name, NodeKind.GROUP))
        return sorted(out)

    # --- attributes --------------------------------------------------------------------------
    def _attrs_path(self, path: Path) -> str:
        kind = self.kind(path)
        if kind is None:
            raise self._not_found(path)
        if kind is NodeKind.GROUP:
            return os.path.join(self._dir(path), GROUP_ATTRS)
        return _attrs_file(self._dir(path[:-1]), path[-1])

    def get_attrs(self, path: Path) -> dict[str, Any]:
        attrs = _read_json(self._attrs_path(path))
        if attrs is None:
            return {}
        if not isinstance(attrs, dict):
            raise CorruptStoreError(
                f"the attributes of key {self.key_str(path)!r} in {self._location} are no "
                f"JSON object: {type(attrs).__name__}"
            )
        return attrs

    def set_attrs(self, path: Path, attrs: Mapping[str, Any]) -> None:
        key = self.key_str(path)
        self.check_writable(key)
        merged = {**self.get_attrs(path), **self._json_attrs(key, attrs)}
        _write_json(self._attrs_path(path), merged)

    def _json_attrs(self, key: str, attrs: Mapping[str, Any] | None) -> dict[str, Any]:
        values = json_values(attrs or {})
        for name, value in values.items():
            problem = json_problem(value)
            if problem is not None:
                raise PtdTypeError(
                    f"cannot write attribute {name!r} of key {key!r} to {self._location}: {problem}"
                )
        return values

    # --- metadata ----------------------------------------------------------------------------
    def _array_handle(self, path: Path) -> NpyFile:
        self._need(path, NodeKind.ARRAY)
        return _header(self._file(path), self.key_str(path))

    def array_meta(self, path: Path) -> ArrayMeta:
        handle = self._array_handle(path)
        stored = os.path.getsize(handle.file) - handle.offset
        return self._describe_array(
            path,
            handle.shape,
            handle.dtype,
            self.get_attrs(path),
            chunks=None,
            compression=None,
            stored_nbytes=max(0, stored),
        )

    def _value_kind(
        self, dtype: np.dtype, attrs: Mapping[str, Any]
    ) -> tuple[ValueKind, str | None]:
        marker = attrs.get(TD_NON_TENSOR_ATTR)
        if marker is not None:
            enc = marker.get("encoding") if isinstance(marker, dict) else None
            return ValueKind.NON_TENSOR, enc if enc in ("json", "pickle") else "other"
        kind, name = self._numeric_kind(dtype, attrs)
        if kind is ValueKind.NUMERIC:
            return kind, name
        if dtype.kind in "SU":  # string columns numpy wrote
            return ValueKind.NON_TENSOR, "str" if dtype.kind == "U" else "bytes"
        return ValueKind.UNSUPPORTED, None

    def _is_payload(self, attrs: Mapping[str, Any]) -> bool:
        return attrs.get(TD_NON_TENSOR_ATTR) is not None

    def _chunk_info(self, handle: NpyFile, list_stored: bool) -> ChunkInfo:
        shape = tuple(handle.shape)
        return ChunkInfo(chunks=shape, grid=(1,) * len(shape), contiguous=True)

    # --- data --------------------------------------------------------------------------------
    def _read_mapped(
        self, path: Path, handle: Any, selection: Selection, out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """The whole file is one chunk: the indexer takes the asked rows from its map
        straight into the output (one copy)."""
        if not self._mapped_reads:
            return None
        mapped = handle.mapped()
        handle.check_rows(selection, mapped)
        return read_chunks(project(selection, handle.shape), lambda _: mapped, handle.dtype, out)

    def _read(self, handle: NpyFile, selection: Selection) -> np.ndarray:
        mapped = handle.mapped()
        handle.check_rows(selection, mapped)
        return np.array(mapped[_orthogonal(selection, handle.shape)], copy=True)

    def _write(self, handle: NpyFile, selection: Selection, value: np.ndarray) -> None:
        mapped = handle.mapped(writable=True)
        handle.check_rows(selection, mapped)
        if mapped.ndim == 0:
            mapped[()] = value
        else:
            mapped[_orthogonal(selection, handle.shape)] = value
        if isinstance(mapped, np.memmap):
            mapped.flush()

    # --- creating and removing ---------------------------------------------------------------
    def _check_names(self, path: Path) -> None:
        for part in path:
            problem = self.name_problem(part)
            if problem is not None:
                raise PtdKeyError(
                    f"cannot create key {self.key_str(path)!r} in {self._location}: the name "
                    f"{part!r} cannot be stored: {problem}"
                )

    def create_group(self, path: Path, attrs: Mapping[str, Any] | None = None) -> None:
        key = self.key_str(path)
        self.check_writable(key)
        self._check_names(path)
        for i in range(len(path) + 1):
            here = path[:i]
            kind = self.kind(here)
            if kind is NodeKind.ARRAY:
                raise self._wrong_kind(here, kind)
            if kind is None:
                os.makedirs(self._dir(here), exist_ok=True)
                _write_json(os.path.join(self._dir(here), GROUP_ATTRS), {})
        if attrs:
            self.set_attrs(path, attrs)

    def _replace(self, path: Path) -> None:
        """Make room for a new array at ``path``: its parents created, any node there gone."""
        self._check_names(path)
        self.create_group(path[:-1])
        if self.kind(path) is not None:
            self._delete(path, self.key_str(path))

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
        """Create the array (``chunks`` are ignored: a file is one range; ``options`` must be
        empty: nothing is compressed)."""
        key = self._check_create(path)
        if options:
            raise PtdValueError(
                f"cannot create key {key!r} in {self._location}: an npy directory takes no "
                f"creation options (got {sorted(options)}): it stores raw, uncompressed files"
            )
        shape = tuple(int(n) for n in shape)
        dtype = np.dtype(dtype)
        values = self._json_attrs(key, attrs)
        self._replace(path)
        file = self._file(path)
        arr = np.lib.format.open_memmap(file, "w+", dtype, shape) if 0 not in shape else None
        if arr is None:
            np.save(file, np.zeros(shape, dtype))
        else:
            if data is not None:
                arr[...] = data
            arr.flush()
            del arr
        if values:
            _write_json(_attrs_file(self._dir(path[:-1]), path[-1]), values)

    def write_non_tensor(
        self,
        path: Path,
        value: Any,
        *,
        stack_shape: tuple[int, ...] | None = None,
        options: Mapping[str, Any] | None = None,
    ) -> None:
        """A payload array (JSON when it round-trips, else a pickle), as zarr's; ``options``
        are ignored (payloads are stored whole)."""
        key = self._check_create(path)
        attrs: dict[str, Any] = {}
        if stack_shape is not None:
            shape = tuple(int(s) for s in stack_shape)
            nested_to_array(value, shape, key=key, location=self._location)  # the shape check
            attrs[TD_STACK_ATTR] = list(shape)
        payload, encoding = encode_payload(value)
        attrs[TD_NON_TENSOR_ATTR] = {"encoding": encoding}
        data = np.frombuffer(payload, dtype=np.uint8)
        self.create_array(path, shape=data.shape, dtype=data.dtype, data=data, attrs=attrs)

    def _delete(self, path: Path, key: str) -> None:
        if self.kind(path) is NodeKind.GROUP:
            shutil.rmtree(self._dir(path))
            return
        if self.kind(path) is None:
            raise self._not_found(path)
        os.remove(self._file(path))
        with contextlib.suppress(FileNotFoundError):
            os.remove(_attrs_file(self._dir(path[:-1]), path[-1]))

    def _move(self, src: Path, dst: Path) -> None:
        self._check_names(dst)
        self.create_group(dst[:-1])
        if self.kind(src) is NodeKind.GROUP:
            os.rename(self._dir(src), self._dir(dst))
            return
        os.rename(self._file(src), self._file(dst))
        with contextlib.suppress(FileNotFoundError):
            os.rename(
                _attrs_file(self._dir(src[:-1]), src[-1]),
                _attrs_file(self._dir(dst[:-1]), dst[-1]),
            )

    # --- non-tensors -------------------------------------------------------------------------
    def _non_tensor_entry(self, path: Path) -> tuple[NpyFile, dict[str, Any]]:
        handle = self._array_handle(path)
        attrs = self.get_attrs(path)
        stack = attrs.get(TD_STACK_ATTR)
        if stack is not None and parse_stack_shape(stack) is None:
            raise PtdValueError(
                f"Corrupt non-tensor stack (key {self.key_str(path)!r} in {self._location}): "
                f"its {TD_STACK_ATTR} attribute {stack!r} is not a shape"
            )
        return handle, attrs

    def _decode_non_tensor(
        self,
        entry: Any,
        key: str,
        selection: Selection,
        *,
        allow_pickle: bool | None,
        as_stack: bool,
    ) -> NonTensorPayload:
        handle, attrs = entry
        marker = attrs.get(TD_NON_TENSOR_ATTR)
        if marker is None:  # an array numpy wrote (a string column): its values
            data = handle.whole()
            if as_stack and data.ndim:
                return NonTensorPayload.of_rows(data[_orthogonal(selection, data.shape)])
            return NonTensorPayload(data if data.ndim else data[()])
        encoding = marker.get("encoding") if isinstance(marker, dict) else None
        if encoding == ENCODING_PICKLE:
            refuse_pickle(allow_pickle, key=key, location=self._location, source="memmap")
        raw = handle.whole().tobytes()
        value = decode_payload(
            raw, encoding, allow_pickle=allow_pickle, key=key, location=self._location
        )
        stack = parse_stack_shape(attrs.get(TD_STACK_ATTR))
        if attrs.get(TD_STACK_ATTR) is None or stack is None:
            return NonTensorPayload(value)
        if not has_nested_shape(value, stack):
            raise PtdValueError(
                f"Corrupt non-tensor stack (key {key!r} in {self._location}): the decoded value "
                f"is not a nested list of shape {list(stack)}"
            )
        from ptd.storage.selection import selection_shape

        shape = selection_shape(stack, selection)
        return NonTensorPayload(
            select_nested(value, selection), is_stack=bool(shape), stack_shape=shape
        )


def _is_empty_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.listdir(path)


def _check_store(path: str) -> None:
    """CorruptStoreError unless ``path`` is an npy directory (its marker names the format)."""
    if not os.path.isdir(path):
        raise CorruptStoreError(f"{path} is not a directory: no npy directory there")
    marker = _read_json(os.path.join(path, MARKER))
    if not isinstance(marker, dict) or marker.get("format") != NAME:
        raise CorruptStoreError(
            f"{path} is not an npy directory: its {MARKER} is missing or does not name the "
            f"format {NAME!r}"
        )


# --- the registry entry -----------------------------------------------------------------------


def _backend() -> type[Backend]:
    return NpyDirBackend


def _policy() -> FormatPolicy:
    return POLICY


def _is_store(path: str) -> bool:
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, MARKER))


def _node_dir(path: str, arrays: bool) -> bool:
    return os.path.isfile(os.path.join(path, GROUP_ATTRS))


def _file_key(name: str) -> str | None:
    return name[: -len(SUFFIX)] if name.endswith(SUFFIX) and not name.startswith(".") else None


#: the format's one registry entry: ``ptd.storage.registry.register_format(ENTRY)`` (or
#: ``with registered(ENTRY):``) makes ptd read and write npy directories
ENTRY = FormatEntry(
    name=NAME,
    label="npy directory",
    backend=_backend,
    policy=_policy,
    suffixes=(".npyd",),
    phrase="an npy directory",
    local=_is_store,
    node_dir=_node_dir,
    file_key=_file_key,
)
