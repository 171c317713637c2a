"""New leaves in a memory-mapped tensordict: ``make_memmap``, ``make_memmap_from_tensor`` and
``make_memmap_from_storage`` (tensordict 0.15's), reached by :mod:`ptd.ops.memmap`
through a container's ``_io`` (:mod:`ptd.containers.io`).

On a tensordict mapped from a directory (``td.memmap_(prefix)``, ``td.memmap(prefix)``), the new
leaf gets its ``<key>.memmap`` file there and its entry in the level's ``meta.json`` (so
``load_memmap`` and ``memmap_refresh_`` see it); missing nested levels get their directory and
``meta.json``. Without a directory (``memmap()`` with no prefix) the leaf is an ordinary tensor.
The tensordict stays locked: these are the only ways to add an entry to it.

>>> import os, tempfile, torch
>>> from ptd import TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     td = TensorDict({"a": torch.zeros(3)}, batch_size=[3]).memmap_(os.path.join(tmp, "td"))
...     _ = td.make_memmap(("n", "b"), [3, 2], dtype=torch.int64)
...     print(TensorDict.load_memmap(os.path.join(tmp, "td"))["n", "b"].shape)
torch.Size([3, 2])
"""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import numpy as np
import torch

from ptd.containers.memmap.loader import encode_key, map_leaf
from ptd.errors import BatchSizeError, PtdTypeError, UnsupportedOperationError
from ptd.format.memmap_dir import stored_entry_name
from ptd.format.names import (
    MEMMAP_ENTRY_NAME,
    MEMMAP_FORMAT_VERSION,
    MEMMAP_META,
    MEMMAP_SUFFIX,
    MEMMAP_TD_CLASS,
    MEMMAP_TD_TYPE,
)
from ptd.ops import memmap as memmap_ops
from ptd.ops.dtypes import storage_dtype, to_storage
from ptd.ops.keys import unravel_key
from ptd.storage.paths import StoreRoot

__all__ = ["make_memmap"]


def _read_meta(directory: str) -> dict[str, Any]:
    path = os.path.join(directory, MEMMAP_META)
    raw = StoreRoot(directory).read(path)  # (never through a link out of the directory)
    if raw is None:
        raise FileNotFoundError(path)
    meta: dict[str, Any] = json.loads(raw.decode("utf-8"))
    return meta


def _write_meta(directory: str, meta: dict[str, Any]) -> None:
    path = os.path.join(directory, MEMMAP_META)
    tmp = path + ".ptd-tmp"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)  # (a leftover, or a link: replaced, never written through)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(json.dumps(meta).encode("utf-8"))
    os.replace(tmp, path)  # a reader sees the old meta.json or the new one


def _entry(entry: dict[str, Any], key: str, stored: str) -> dict[str, Any]:
    """A ``meta.json`` entry, with the key's own name when it is stored escaped."""
    if stored != key:
        entry[MEMMAP_ENTRY_NAME] = key
    return entry


def _level(td: Any, key: str) -> Any:
    """The nested level ``key`` of the memory-mapped ``td``, created (with its directory) when
    missing."""
    from ptd.containers.tensordict import TensorDict

    if key in td._data:
        sub = td._data[key]
        if not isinstance(sub, TensorDict):
            raise UnsupportedOperationError(
                f"The key {key} already exists within the target tensordict and is not a "
                "tensordict."
            )
        return sub
    prefix = td._memmap_prefix
    sub = TensorDict({}, batch_size=td.batch_size, device="cpu")
    stored = stored_entry_name(key)
    sub_dir = None if prefix is None else os.path.join(prefix, encode_key(stored))
    if sub_dir is not None:
        os.makedirs(sub_dir, exist_ok=True)
        _write_meta(
            sub_dir,
            {
                "shape": list(td.batch_size),
                "device": "cpu",
                "_type": MEMMAP_TD_TYPE,
                "_format_version": MEMMAP_FORMAT_VERSION,
                "_class": MEMMAP_TD_CLASS,
            },
        )
        meta = _read_meta(prefix)
        meta[stored] = _entry({"type": "TensorDict"}, key, stored)
        _write_meta(prefix, meta)
    td._data[key] = sub
    sub._is_locked = td._is_locked
    memmap_ops.mark_memmap(sub, sub_dir)
    return sub


def make_memmap(
    td: Any,
    key: Any,
    *,
    shape: Any = None,
    dtype: torch.dtype | None = None,
    tensor: torch.Tensor | None = None,
    storage: Any = None,
) -> torch.Tensor:
    """Add a leaf at ``key`` to the memory-mapped ``td``: uninitialised of ``shape``/``dtype``,
    a copy of ``tensor``, or a copy of the bytes of ``storage`` viewed as ``dtype``/``shape``."""
    if not td.is_memmap():
        raise UnsupportedOperationError(
            "Can only make a memmap tensor within a memory-mapped tensordict."
        )
    parts = unravel_key(key)
    node = td
    for part in parts[:-1]:
        node = _level(node, part)
    last = parts[-1]
    if last in node._data:
        raise UnsupportedOperationError(
            f"The key {last} already exists within the target tensordict. Delete that entry "
            "before overwriting it."
        )
    if storage is not None:
        dtype = dtype or torch.get_default_dtype()
        raw = torch.empty(0, dtype=torch.uint8).set_(storage)  # the bytes, not copied
        tensor = raw.view(dtype).reshape(tuple(shape))
    if tensor is not None:
        if tensor.is_nested or tensor.layout != torch.strided:
            raise PtdTypeError(f"make_memmap_from_tensor: key {key!r}: a strided tensor is needed")
        shape, dtype = tuple(tensor.shape), tensor.dtype
    shape = tuple(int(d) for d in (shape.tolist() if torch.is_tensor(shape) else shape))
    dtype = dtype or torch.get_default_dtype()
    if shape[: node.batch_dims] != tuple(node.batch_size):
        raise BatchSizeError(
            f"make_memmap: shape {list(shape)} of key {key!r} does not start with the batch "
            f"size {list(node.batch_size)}"
        )
    prefix = node._memmap_prefix
    if prefix is None:
        value = torch.empty(shape, dtype=dtype) if tensor is None else tensor.detach().clone()
    else:
        value = _write_leaf(prefix, last, shape, dtype, tensor)
    node._data[last] = value
    return value


def _write_leaf(
    prefix: str, key: str, shape: tuple[int, ...], dtype: torch.dtype, tensor: Any
) -> torch.Tensor:
    stored = stored_entry_name(key)
    path = os.path.join(prefix, encode_key(stored) + MEMMAP_SUFFIX)
    np_dtype, _ = storage_dtype(dtype, key)
    need = int(np.prod(shape, dtype=np.int64)) * np_dtype.itemsize
    root = StoreRoot(prefix)
    if need:
        # a link out of the directory is refused (one inside is written through)
        fd = root.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        with os.fdopen(fd, "wb") as f:
            if tensor is None:
                f.truncate(need)
            else:
                np.ascontiguousarray(to_storage(tensor.detach().cpu(), key)[0]).tofile(f)
    meta = _read_meta(prefix)
    meta[stored] = _entry(
        {"device": "cpu", "shape": list(shape), "dtype": str(dtype), "is_nested": False},
        key,
        stored,
    )
    _write_meta(prefix, meta)
    return map_leaf(path, dtype, shape, "r+", key, root)
