"""Reading memmap directories, and the key <-> file name encoding (see :mod:`ptd.containers.memmap`).

>>> encode_key("weird key/x"), decode_key("weird%20key%2Fx")
('weird%20key%2Fx', 'weird key/x')
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ptd.errors import CorruptStoreError, PtdValueError, StoreNotFoundError, UnsupportedDtypeError
from ptd.format.memmap_dir import decode_key, encode_key, entry_key, node_kind
from ptd.format.names import (
    ENCODING_PICKLE,
    MEMMAP_FORMAT_VERSION,
    MEMMAP_META,
    MEMMAP_NODE_FIELDS,
    MEMMAP_PICKLE_FILE,
    MEMMAP_STACK_PICKLE_FILE,
    MEMMAP_SUFFIX,
)
from ptd.format.payload import (
    check_allow_pickle,
    decode_payload,
    refuse_pickle,
    string_stack_shape,
)
from ptd.ops.dtypes import dtype_from_str
from ptd.ops.nontensor import NonTensorData, NonTensorStack
from ptd.storage.paths import StoreRoot

if TYPE_CHECKING:
    from ptd.containers.tensordict import TensorDict

__all__ = ["MODES", "decode_key", "encode_key", "load_dir", "map_leaf"]

#: load modes: whether the mapping is shared (writes reach the file) or copy-on-write
MODES = {"r+": True, "r": False}


def _legacy_ok(key: str, collection: bool) -> bool:
    """Whether the raw key may name a file below the prefix (the reference's legacy names)."""
    if "/" in key or "\\" in key or (len(key) >= 2 and key[0].isalpha() and key[1] == ":"):
        return False
    return not collection or key not in ("", ".", "..")


def map_leaf(
    path: str,
    dtype: torch.dtype,
    shape: tuple[int, ...],
    mode: str | None,
    key: str,
    root: StoreRoot | None = None,
) -> torch.Tensor:
    """The leaf mapped from ``path`` (``mode`` "r+": shared, "r": copy-on-write, None: shared
    when the file is writable). ``root``: the memmap directory the file must resolve inside
    (a link out of it is refused: a shared map would write through it); by default the
    file's own directory."""
    numel = int(np.prod(shape, dtype=np.int64))
    if numel == 0:
        return torch.empty(shape, dtype=dtype)
    (root or StoreRoot(os.path.dirname(os.path.abspath(path)))).check(path)
    need = numel * dtype.itemsize
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise CorruptStoreError(
            f"the file {path} of key {key!r} ({dtype}, shape {list(shape)}) is missing"
        ) from None
    if size < need:
        raise CorruptStoreError(
            f"the file {path} of key {key!r} is too short: it holds {size} bytes, but "
            f"{dtype} of shape {list(shape)} needs {need} (the file was left unchanged)"
        )
    # mode None: shared where this process may write the file, copy-on-write elsewhere
    shared = MODES[mode] if mode is not None else os.access(path, os.W_OK)
    return torch.from_file(path, shared=shared, size=numel, dtype=dtype).view(shape)


def _read_meta(directory: str, root: StoreRoot | None = None) -> dict[str, Any]:
    """``directory``'s ``meta.json``, read inside ``root`` (by default ``directory``)."""
    path = os.path.join(directory, MEMMAP_META)
    raw = (root or StoreRoot(directory)).read(path)
    if raw is None:
        raise CorruptStoreError(f"{directory} is not a memmap directory: {MEMMAP_META} is missing")
    try:
        meta = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise CorruptStoreError(f"{path} is not valid JSON: {err}") from None
    if not isinstance(meta, dict):
        raise CorruptStoreError(
            f"{path} is not a memmap meta.json: it holds a {type(meta).__name__}, not an object"
        )
    return meta


def _node_kind(meta: dict[str, Any], path: str) -> str:
    """:func:`ptd.format.memmap_dir.node_kind`, or CorruptStoreError naming ``path``."""
    kind = node_kind(meta)
    if kind is not None:
        return kind
    cls, typ = meta.get("_class"), meta.get("_type")
    if cls is None and typ is None:
        raise CorruptStoreError(
            f"{path} is not a tensordict meta.json: it has no '_type' or '_class'"
        )
    raise CorruptStoreError(
        f"{path} describes a {cls or typ}, which ptd cannot load (it loads TensorDict, "
        "PersistentTensorDict, NonTensorData and NonTensorStack directories)"
    )


def _shape(value: Any, path: str, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in value
    ):
        raise CorruptStoreError(
            f"{path}: {what} must be a list of non-negative ints, got {value!r}"
        )
    return tuple(value)


def _child(directory: str, key: str, suffix: str, collection: bool) -> str | None:
    path = os.path.join(directory, encode_key(key) + suffix)
    exists = os.path.isdir(path) if collection else os.path.lexists(path)
    if exists:
        return path
    if encode_key(key) != key and _legacy_ok(key, collection):
        legacy = os.path.join(directory, key + suffix)
        if os.path.isdir(legacy) if collection else os.path.lexists(legacy):
            return legacy
    return None


class _Loader:
    def __init__(self, mode: str | None, allow_pickle: bool | None, root: StoreRoot) -> None:
        self.mode = mode
        self.allow_pickle = allow_pickle
        #: the directory loaded: no file outside it is read or mapped
        self.root = root

    def td(self, directory: str, meta: dict[str, Any], parent: torch.Size | None) -> TensorDict:
        from ptd.containers.tensordict import TensorDict

        mpath = os.path.join(directory, MEMMAP_META)
        version = meta.get("_format_version", MEMMAP_FORMAT_VERSION)
        if not isinstance(version, int) or version > MEMMAP_FORMAT_VERSION:
            raise CorruptStoreError(
                f"{mpath} was saved in the format version {version!r}; ptd reads the format "
                f"versions up to {MEMMAP_FORMAT_VERSION}"
            )
        bs = torch.Size(_shape(meta.get("shape", []), mpath, "'shape'"))
        if parent is not None and tuple(bs[: len(parent)]) != tuple(parent):
            raise CorruptStoreError(
                f"{mpath}: the batch size {list(bs)} does not start with its parent's {list(parent)}"
            )
        names = meta.get("_names")
        if names is not None and (
            not isinstance(names, list)
            or len(names) != len(bs)
            or not all(n is None or isinstance(n, str) for n in names)
        ):
            raise CorruptStoreError(
                f"{mpath}: '_names' {names!r} does not match the batch size {list(bs)}"
            )
        device = meta.get("device")
        out = TensorDict({}, batch_size=bs, device="cpu" if device == "cpu" else None, names=names)
        for stored, entry in meta.items():
            if stored in MEMMAP_NODE_FIELDS or not isinstance(entry, dict):
                continue
            key = entry_key(stored, entry)  # a key named like a field is stored escaped
            if key in out._data:
                raise CorruptStoreError(f"{mpath} lists the key {key!r} twice")
            if "type" in entry:
                sub = _child(directory, stored, "", True)
                if sub is not None:
                    self.root.check(sub)
                if sub is None:
                    raise CorruptStoreError(
                        f"{mpath} lists the entry {key!r}, but its directory {os.path.join(directory, encode_key(stored))} is missing"
                    )
                out._data[key] = self.entry(sub, key, bs)
            elif "dtype" in entry and "shape" in entry:
                out._data[key] = self.leaf(directory, stored, entry, bs, mpath, key)
        return out

    def leaf(
        self,
        directory: str,
        stored: str,
        entry: dict[str, Any],
        bs: torch.Size,
        mpath: str,
        key: str,
    ) -> torch.Tensor:
        """The leaf ``key`` (its entry in ``meta.json`` named ``stored``), mapped."""
        if entry.get("is_nested"):
            raise UnsupportedDtypeError(
                f"{mpath}: key {key!r} is a nested (jagged) tensor, which ptd cannot load"
            )
        try:
            dtype = dtype_from_str(str(entry["dtype"]))
        except UnsupportedDtypeError:
            raise UnsupportedDtypeError(
                f"{mpath}: key {key!r} has the unknown dtype {entry['dtype']!r}"
            ) from None
        shape = _shape(entry["shape"], mpath, f"the shape of {key!r}")
        if shape[: len(bs)] != tuple(bs):
            raise CorruptStoreError(
                f"{mpath}: key {key!r} has shape {list(shape)}, which does not fit the batch size {list(bs)}"
            )
        path = _child(directory, stored, MEMMAP_SUFFIX, False) or os.path.join(
            directory, encode_key(stored) + MEMMAP_SUFFIX
        )
        return map_leaf(path, dtype, shape, self.mode, key, self.root)

    def entry(self, directory: str, key: str, bs: torch.Size) -> Any:
        meta = _read_meta(directory, self.root)
        mpath = os.path.join(directory, MEMMAP_META)
        kind = _node_kind(meta, mpath)
        if kind == "td":
            return self.td(directory, meta, bs)
        if kind == "data":
            if "data" in meta:
                return NonTensorData(meta["data"], bs)
            pkl = os.path.join(directory, MEMMAP_PICKLE_FILE)
            if not os.path.exists(pkl):
                raise CorruptStoreError(
                    f"{mpath} has no 'data' and there is no {MEMMAP_PICKLE_FILE} beside it"
                )
            fields = self.unpickle(pkl, key)
            if not isinstance(fields, dict) or "data" not in fields:
                raise CorruptStoreError(f"{pkl} does not hold a dict with a 'data' field")
            return NonTensorData(fields["data"], bs)
        if "device" not in meta or "data" not in meta:
            raise CorruptStoreError(f"{mpath} is a NonTensorStack without 'data' or 'device'")
        data = meta["data"]
        if isinstance(data, str):
            if data != MEMMAP_STACK_PICKLE_FILE:
                raise CorruptStoreError(
                    f"{mpath}: invalid NonTensorStack pickle file name {data!r}"
                )
            data = self.unpickle(os.path.join(directory, data), key)
        if not isinstance(data, list):
            raise CorruptStoreError(
                f"{mpath}: the NonTensorStack data is a {type(data).__name__}, not a list"
            )
        return NonTensorStack.from_list(data, string_stack_shape(data, len(bs)))

    def unpickle(self, path: str, key: str) -> Any:
        # refused before a byte is read, unless allow_pickle=True
        refuse_pickle(self.allow_pickle, key=key, location=path, source="memmap")
        raw = self.root.read(path)
        if raw is None:
            raise CorruptStoreError(f"the pickle file {path} of key {key!r} is missing")
        return decode_payload(
            raw,
            ENCODING_PICKLE,
            allow_pickle=self.allow_pickle,
            key=key,
            location=path,
            source="memmap",
        )


def load_dir(
    prefix: str | os.PathLike[str], mode: str | None, allow_pickle: bool | None
) -> TensorDict:
    """The implementation of :func:`ptd.containers.memmap.load_memmap` (see there)."""
    check_allow_pickle(allow_pickle)
    if mode is not None and mode not in MODES:
        raise PtdValueError(
            f"Invalid memmap mode {mode!r}; must be one of {', '.join(MODES)} or None"
        )
    directory = os.path.abspath(os.fspath(prefix))
    if not os.path.isdir(directory):
        raise StoreNotFoundError(f"{directory} is not a directory: no memmap tensordict there")
    root = StoreRoot(directory)
    meta = _read_meta(directory, root)
    mpath = os.path.join(directory, MEMMAP_META)
    kind = _node_kind(meta, mpath)
    if kind != "td":
        raise CorruptStoreError(
            f"{mpath} describes a {(kind == 'data' and 'NonTensorData') or 'NonTensorStack'}, not a tensordict"
        )
    return _Loader(mode, allow_pickle, root).td(directory, meta, None)
