"""The fast path for zarr: uncompressed chunks of a local store read from memory maps.

A Zarr v3 array whose only codec is ``bytes`` (no compression, no sharding: what ptd and
tensordict write by default) in a local directory store is one raw C-order file per chunk.
:class:`ZarrMaps` maps those files (at most :data:`ZARR_MAX_MAPS` at a time) and serves
selections across them (see :mod:`ptd.storage.read.mapped` for the switch, the copy-out
and the consistency rules). In writable modes each read checks the chunk files it touches.
"""

from __future__ import annotations

import collections
import mmap
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptd.errors import PtdError
from ptd.storage.indexer import project, scatter
from ptd.storage.paths import StoreRoot
from ptd.storage.read.alloc import tune_malloc
from ptd.storage.read.mapped import (
    close_maps,
    fast_path_enabled,
    mappable_dtype,
    release,
)

__all__ = ["ZARR_MAX_MAPS", "ZarrMaps"]

#: chunk files kept mapped per zarr store (each map holds a file descriptor)
ZARR_MAX_MAPS = 128


@dataclass(slots=True, eq=False)
class _ZarrLayout:
    """What it takes to find and decode the chunks of one uncompressed zarr v3 array."""

    array: Any
    directory: str
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    #: the dtype zarr returns, and the dtype of the bytes in the chunk files
    dtype: np.dtype
    stored: np.dtype
    fill: np.ndarray
    #: chunk coordinates -> the chunk's key in the store
    encode: Callable[[tuple[int, ...]], str]

    def filename(self, coords: tuple[int, ...]) -> str:
        return os.path.join(self.directory, *self.encode(coords).split("/"))


def _zarr_layout(arr: Any, root: str) -> _ZarrLayout | None:
    """The layout of ``arr`` (a ``zarr.Array`` in the local store at ``root``), or None when it
    cannot be read from maps (compressed, sharded, transposed, v2, not a plain numeric type)."""
    try:
        from zarr.codecs import BytesCodec

        from ptd.storage.zarr.private import RegularChunkGrid

        md = arr.metadata
        if getattr(md, "zarr_format", None) != 3:
            return None
        codecs = tuple(md.codecs)
        if len(codecs) != 1 or type(codecs[0]) is not BytesCodec:
            return None
        if not isinstance(md.chunk_grid, RegularChunkGrid):
            return None
        dt = np.dtype(arr.dtype)
        if not mappable_dtype(dt):
            return None
        # the bytes codec's byte order; zarr returns arr.dtype (native or not) whatever it is
        endian = getattr(codecs[0].endian, "value", codecs[0].endian)
        stored = dt
        if dt.itemsize > 1 and endian in ("big", "little"):
            stored = dt.newbyteorder(">" if endian == "big" else "<")
        shape = tuple(int(s) for s in md.shape)
        chunks = tuple(int(c) for c in md.chunk_grid.chunk_shape)
        if len(chunks) != len(shape) or any(c < 1 for c in chunks):
            return None
        fill = np.asarray(md.fill_value, dtype=dt)
        parts = [p for p in arr.path.split("/") if p]
        if any(p in (".", "..") or os.sep in p or "\x00" in p for p in parts):
            return None  # a name that would leave the store: zarr's own path decides
        directory = os.path.join(root, *parts)
        return _ZarrLayout(
            arr, directory, shape, chunks, dt, stored, fill, md.chunk_key_encoding.encode_chunk_key
        )
    except Exception:  # noqa: BLE001 - anything unexpected: zarr's own path
        return None


class ZarrMaps:
    """Mapped chunk files of the uncompressed arrays of one local zarr store.

    Threads share it (a DataLoader worker and its read-ahead thread, the decode pool): the
    bookkeeping of layouts and maps is done under one lock; the copies out of a map are not
    (a map dropped while a copy still uses it is closed later, see :meth:`_drop`)."""

    def __init__(self, root: StoreRoot, writable: bool, max_maps: int = ZARR_MAX_MAPS) -> None:
        self._paths = root
        self._root = root.root
        self._check = writable
        self._max = max(1, max_maps)
        #: path -> layout (or None: not mappable)
        self._layouts: dict[Any, _ZarrLayout | None] = {}
        #: filename -> (map or None, view or None (missing), file signature)
        self._chunks: collections.OrderedDict[str, tuple[Any, Any, Any]] = collections.OrderedDict()
        self._pending: list[mmap.mmap] = []
        self._lock = threading.RLock()

    @classmethod
    def create(cls, store: Any, writable: bool, option: bool | None) -> ZarrMaps | None:
        """The maps of ``store`` when it is a local directory store and the fast path is on."""
        if not fast_path_enabled(option):
            return None
        from ptd.storage.zarr.confined import store_root

        root = store_root(store)
        if root is None:
            return None
        tune_malloc()  # fresh read buffers recycled, not faulted in
        return cls(root, writable)

    def layout(self, path: Any, arr: Any) -> _ZarrLayout | None:
        with self._lock:
            return self._layout(path, arr)

    def _layout(self, path: Any, arr: Any) -> _ZarrLayout | None:
        hit = self._layouts.get(path)
        if path in self._layouts and (hit is None or hit.array is arr):
            return hit
        lay = _zarr_layout(arr, self._root)
        if hit is not None:  # the array was replaced: its chunk maps are stale
            self._forget_dir(hit.directory)
        self._layouts[path] = lay
        return lay

    def read(
        self, path: Any, arr: Any, selection: Sequence[Any], out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``arr[selection]`` (any selection :func:`ptd.storage.indexer.project` takes) from
        maps, into ``out`` when given, or None: use zarr. Each chunk file is visited once and
        its part copied straight to its places in the output."""
        lay = self.layout(path, arr)
        if lay is None:
            return None
        indexer = project(selection, lay.shape, lay.chunks)
        result = np.empty(indexer.shape, lay.dtype) if out is None else out
        for proj in indexer.chunks:
            chunk = self._chunk(lay, proj.coords)
            if chunk is False:
                return None
            if chunk is None:
                result[proj.out] = lay.fill
                continue
            scatter(result, proj, chunk)
            if all(isinstance(x, slice) for x in proj.local):
                release(chunk[proj.local])
            chunk = None
        return result

    def _chunk(self, lay: _ZarrLayout, coords: tuple[int, ...]) -> Any:
        """The mapped chunk (an array of the chunk shape), None for a missing chunk (fill
        value), False when the file is not a raw chunk (use zarr)."""
        with self._lock:
            return self._chunk_locked(lay, coords)

    def _chunk_locked(self, lay: _ZarrLayout, coords: tuple[int, ...]) -> Any:
        name = lay.filename(coords)
        hit = self._chunks.get(name)
        if hit is not None and not self._check:
            self._chunks.move_to_end(name)
            return hit[1]
        try:
            # a link is followed only when it stays inside the store (else an error)
            st = self._paths.stat(name)
            sig: Any = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            sig = None
        except OSError as err:
            if isinstance(err, PtdError):
                raise
            return False
        if hit is not None and hit[2] == sig:
            self._chunks.move_to_end(name)
            return hit[1]
        if hit is not None:
            self._drop(name)
        if sig is None:
            self._remember(name, (None, None, None))
            return None
        count = int(np.prod(lay.chunks, dtype=np.int64))
        if sig[2] != count * lay.stored.itemsize:
            return False
        try:
            fd = self._paths.open(name)
        except PtdError:
            raise
        except OSError:
            return False
        try:
            mm = mmap.mmap(fd, 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return False
        finally:
            os.close(fd)
        view = np.frombuffer(mm, dtype=lay.stored, count=count).reshape(lay.chunks)
        self._remember(name, (mm, view, sig))
        return view

    def _remember(self, name: str, entry: tuple[Any, Any, Any]) -> None:
        self._chunks[name] = entry
        while len(self._chunks) > self._max:
            old = next(iter(self._chunks))
            self._drop(old)

    def _drop(self, name: str) -> None:
        entry = self._chunks.pop(name, None)
        mm = entry[0] if entry is not None else None
        if mm is not None:
            try:
                mm.close()
            except BufferError:  # still referenced by a read in progress
                self._pending.append(mm)

    def _forget_dir(self, directory: str) -> None:
        prefix = directory + os.sep
        for name in [n for n in self._chunks if n.startswith(prefix)]:
            self._drop(name)

    def close(self) -> None:
        with self._lock:
            self._layouts.clear()
            maps = [e[0] for e in self._chunks.values() if e[0] is not None] + self._pending
            self._chunks.clear()
            self._pending = []
        close_maps(maps)
