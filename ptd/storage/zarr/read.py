"""Reading many small zarr arrays whole (``ZarrBackend.read_many``): what ``convert`` does with a
store of 10,000 small arrays.

zarr-python reads an array through its event loop and its codec pipeline (about a millisecond
each). Here an array of a Zarr v3 store on a local directory that is one chunk stored by the
``bytes`` codec alone (ptd's and tensordict's default) is its chunk file, read on a thread pool
(a missing file reads as the fill value, as in zarr); the others are read through zarr's
asynchronous API, concurrently. A failure reads the array again through ``read``, whose error
names the key.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from zarr.codecs import BytesCodec

from ptd.storage import runtime
from ptd.storage.api import Path
from ptd.storage.zarr.confined import store_root
from ptd.storage.zarr.private import ArrayV3Metadata, sync

__all__ = ["batches", "in_byte_order", "raw_chunk", "read_many", "single_raw_chunk"]

#: files read at a time
CONCURRENCY = 4


def single_raw_chunk(md: Any) -> tuple[tuple[str, ...], str | None] | None:
    """For a Zarr v3 array stored as one chunk holding the whole array, encoded by the ``bytes``
    codec alone (ptd's and tensordict's default): the chunk's key as path parts under the
    array's directory, and the codec's byte order; None for any other array."""
    if not isinstance(md, ArrayV3Metadata):
        return None
    codecs = tuple(md.codecs)
    if len(codecs) != 1 or type(codecs[0]) is not BytesCodec:
        return None
    shape = tuple(md.shape)
    if tuple(getattr(md.chunk_grid, "chunk_shape", ()) or ()) != shape:
        return None
    endian = getattr(codecs[0].endian, "value", codecs[0].endian)
    return tuple(md.encode_chunk_key((0,) * len(shape)).split("/")), (
        None if endian is None else str(endian)
    )


def in_byte_order(dt: np.dtype, endian: str | None) -> np.dtype:
    """``dt`` in the byte order the ``bytes`` codec stores (``"big"``/``"little"``)."""
    if dt.itemsize > 1 and endian in ("big", "little"):
        return dt.newbyteorder(">" if endian == "big" else "<")
    return dt


def batches(items: list[Any], threads: int) -> list[list[Any]]:
    """``items`` cut into a few batches per thread: a hand-over between threads per file costs
    more than the file on a busy machine."""
    step = max(1, -(-len(items) // (threads * 4)))
    return [items[i : i + step] for i in range(0, len(items), step)]


def raw_chunk(arr: Any) -> tuple[str, np.dtype] | None:
    """``(file, dtype in the file's byte order)`` of a zarr array that is one uncompressed
    chunk file in a local directory store, or None."""
    paths = store_root(arr.store)
    if paths is None:
        return None
    found = single_raw_chunk(arr.metadata)
    dt = np.dtype(arr.dtype)
    if found is None or 0 in tuple(arr.metadata.shape) or dt.kind not in "biufc":
        return None
    chunk_key, endian = found
    parts = arr.path.split("/") if arr.path else []
    return os.path.join(paths.root, *parts, *chunk_key), in_byte_order(dt, endian)


def _read_raw(arr: Any, file: str, dt: np.dtype) -> np.ndarray | None:
    """The array from its chunk file (None: the file is not what the metadata says)."""
    native = np.dtype(arr.dtype)
    paths = store_root(arr.store)
    assert paths is not None  # (raw_chunk found the file in a local store)
    data = paths.read(file)  # never through a link out of the store
    if data is None:
        return np.full(arr.shape, arr.metadata.fill_value, dtype=native)
    if len(data) != int(np.prod(arr.shape, dtype=np.int64)) * dt.itemsize:
        return None
    return np.frombuffer(data, dtype=dt).reshape(arr.shape).astype(native)


def read_many(be: Any, paths: Sequence[Path]) -> list[np.ndarray]:
    """``ZarrBackend.read_many``: see the module doc."""
    arrays = [be._array(p) for p in paths]
    out: list[np.ndarray | None] = [None] * len(paths)
    raw: list[tuple[int, str, np.dtype]] = []
    rest: list[int] = []
    for i, arr in enumerate(arrays):
        found = raw_chunk(arr)
        if found is None:
            rest.append(i)
        else:
            raw.append((i, *found))
    if raw:

        def some(items: list[tuple[int, str, np.dtype]]) -> list[tuple[int, np.ndarray | None]]:
            done: list[tuple[int, np.ndarray | None]] = []
            for i, file, dt in items:
                try:
                    done.append((i, _read_raw(arrays[i], file, dt)))
                except (OSError, ValueError):
                    done.append((i, None))
            return done

        for done in runtime.io_map(some, batches(raw, CONCURRENCY)):
            for i, value in done:
                if value is None:
                    rest.append(i)
                out[i] = value
    if rest:
        values = _read_async([arrays[i] for i in rest])
        for i, value in zip(rest, values, strict=True):
            out[i] = value
    # anything that failed: read alone, for the error naming the key
    return [v if v is not None else be.read(p, ()) for p, v in zip(paths, out, strict=True)]


def _read_async(arrays: list[Any]) -> list[np.ndarray | None]:
    """Whole arrays through zarr's asynchronous API, concurrently (None where it failed)."""
    sem = asyncio.Semaphore(CONCURRENCY * 4)

    async def one(arr: Any) -> np.ndarray | None:
        async with sem:
            try:
                return np.asarray(await arr._async_array.getitem(Ellipsis))
            except Exception:  # noqa: BLE001 - read again alone, for the error naming the key
                return None

    async def all_of() -> list[np.ndarray | None]:
        return list(await asyncio.gather(*(one(a) for a in arrays)))

    return sync(all_of())
