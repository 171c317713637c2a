"""Chunked HDF5 datasets read chunk by chunk by ptd: raw chunk bytes, filters decoded here.

For a chunked dataset whose filter pipeline is made only of filters this module decodes
exactly -- deflate (gzip; with libdeflate when the ``deflate`` package is installed), shuffle,
fletcher32, and the zstd (32015), blosc (32001) and lz4 (32004) filters of ``hdf5plugin`` -- a
read fetches the raw bytes of each chunk it needs (the chunk's place in
the file comes from HDF5, ``get_chunk_info_by_coord``; the bytes are read with ``pread`` on
ptd's own descriptor of the file, opened by name and checked to be the file HDF5 has open, or
through ``read_direct_chunk`` when there is none), undoes the filters, and hands the chunks to
:func:`~ptd.storage.read.decoded.read_chunked` (parallel decode, chunk cache).

The result is h5py's, bit for bit: a dataset is served only when its file datatype is exactly
the one h5py would create for its numpy dtype (so the decoded bytes are the values), a chunk
with a failed fletcher32 checksum, a chunk HDF5 never wrote and any filter not listed above
(szip, nbit, scaleoffset, lzf, ...) go through h5py, which raises or fills as it does.
Only files opened read-only are served (a write could sit in HDF5's buffers).
"""

from __future__ import annotations

import itertools
import os
import threading
import zlib
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np
from h5py._objects import phil as _h5py_lock

from ptd.storage.read.cache import ChunkCache, cache_budget
from ptd.storage.read.decoded import ChunkedArray, read_chunked
from ptd.storage.read.mapped import mappable_dtype
from ptd.storage.read.shuffled import ShuffledChunk

__all__ = ["H5Chunks", "fletcher32_ok", "unshuffle"]

_DEFLATE = h5py.h5z.FILTER_DEFLATE
_SHUFFLE = h5py.h5z.FILTER_SHUFFLE
_FLETCHER32 = h5py.h5z.FILTER_FLETCHER32
_BLOSC = 32001
_ZSTD = 32015
_LZ4 = 32004

_keys = itertools.count()


class _Refused(Exception):
    """A chunk this module will not decode (h5py reads it)."""


def unshuffle(data: bytes | memoryview, size: int) -> bytes | memoryview:
    """Undo HDF5's shuffle filter for items of ``size`` bytes (the trailing bytes that do not
    make a whole item are kept as they are)."""
    if size <= 1:
        return data
    buf = np.frombuffer(data, np.uint8)
    n = buf.size // size
    if n <= 1:
        return data
    out = np.empty(buf.size, np.uint8)
    out[: n * size] = buf[: n * size].reshape(size, n).T.reshape(-1)
    out[n * size :] = buf[n * size :]
    return out.data


def fletcher32_ok(data: bytes | memoryview) -> bool:
    """Whether the last 4 bytes of ``data`` are HDF5's Fletcher-32 checksum of the rest, both
    taken modulo 65535 (the checksum's own arithmetic; a value that fails here goes to h5py,
    which also knows the byte-swapped checksums of old files)."""
    buf = np.frombuffer(data, np.uint8)
    if buf.size < 4:
        return False
    body, tail = buf[:-4], buf[-4:]
    stored = int.from_bytes(bytes(tail), "little")
    n = body.size // 2
    words = body[: 2 * n].view(">u2").astype(np.int64)
    if body.size % 2:
        words = np.append(words, np.int64(int(body[-1]) << 8))
    m = words.size
    sum1 = int(words.sum()) % 65535
    weights = (np.arange(m, 0, -1, dtype=np.int64)) % 65535
    sum2 = int((weights * words % 65535).sum()) % 65535
    return (stored & 0xFFFF) % 65535 == sum1 and (stored >> 16) % 65535 == sum2


def _inflater(nbytes: int) -> Callable[[Any], Any]:
    """Undo deflate (zlib format, checksum checked) into at most ``nbytes``: with libdeflate
    (the ``deflate`` package, about twice zlib's speed, the GIL released) when it is installed,
    else with zlib. A stream that does not end at ``nbytes`` (a damaged chunk, a hostile one
    that would inflate without bound) is refused: h5py reads that chunk and says what is
    wrong."""

    def inflate_zlib(b: Any) -> Any:
        d = zlib.decompressobj()
        try:
            out = d.decompress(b, nbytes)
        except zlib.error:
            raise _Refused from None
        if not d.eof or len(out) != nbytes:
            raise _Refused
        return out

    try:
        import deflate
    except ImportError:
        return inflate_zlib
    fast = deflate.zlib_decompress

    def inflate(b: Any) -> Any:
        try:
            out = fast(b, nbytes)
        except Exception:  # noqa: BLE001 - zlib decides
            return inflate_zlib(b)
        return out if len(out) == nbytes else inflate_zlib(b)

    return inflate


def _decoder(code: int, values: tuple[int, ...], nbytes: int) -> Callable[[Any], Any] | None:
    """The function undoing filter ``code`` on a chunk's bytes (``nbytes`` once decoded), or
    None when it is not decoded here."""
    if code == _DEFLATE:
        return _inflater(nbytes)
    if code == _SHUFFLE:
        size = int(values[0]) if values else 1
        return lambda b: unshuffle(b, size)
    if code == _FLETCHER32:

        def check(b: Any) -> Any:
            if not fletcher32_ok(b):
                raise _Refused
            return memoryview(b)[:-4]

        return check
    if code == _LZ4:
        return _lz4_decoder(nbytes)
    if code in (_ZSTD, _BLOSC):
        try:
            import numcodecs
        except ImportError:  # pragma: no cover - numcodecs comes with zarr
            return None
        codec = numcodecs.Zstd() if code == _ZSTD else numcodecs.Blosc()
        return codec.decode
    return None


def _lz4_decoder(nbytes: int) -> Callable[[Any], Any] | None:
    """The HDF5 LZ4 filter (32004, as hdf5plugin writes it): an 8-byte big-endian total size,
    a 4-byte block size, then per block a 4-byte compressed size and the block -- stored as is
    when that size equals the block's, else an LZ4 block. Each LZ4 block is decoded by
    numcodecs' LZ4 codec (given in its own framing: the decoded size, little-endian, first).
    Anything that does not add up is refused (h5py then reads the chunk)."""
    try:
        import numcodecs
    except ImportError:  # pragma: no cover - numcodecs comes with zarr
        return None
    codec = numcodecs.LZ4()

    def decode(b: Any) -> Any:
        mv = memoryview(b).cast("B")
        if len(mv) < 12:
            raise _Refused
        total = int.from_bytes(mv[:8], "big")
        block = int.from_bytes(mv[8:12], "big")
        if total != nbytes or block <= 0:
            raise _Refused
        out = bytearray(total)
        pos = 12
        done = 0
        while done < total:
            n = min(block, total - done)
            if pos + 4 > len(mv):
                raise _Refused
            size = int.from_bytes(mv[pos : pos + 4], "big")
            pos += 4
            if size <= 0 or pos + size > len(mv):
                raise _Refused
            if size == n:
                out[done : done + n] = mv[pos : pos + size]
            else:
                try:
                    part = codec.decode(n.to_bytes(4, "little") + mv[pos : pos + size].tobytes())
                except Exception as exc:
                    raise _Refused from exc
                if len(part) != n:
                    raise _Refused
                out[done : done + n] = part
            pos += size
            done += n
        if pos != len(mv):
            raise _Refused
        return out

    return decode


def _pipeline(dsid: Any, nbytes: int) -> list[tuple[int, Callable[[Any], Any]]] | None:
    """The decoders of a dataset's filters, last applied first, with their pipeline index."""
    dcpl = dsid.get_create_plist()
    steps = []
    for i in range(dcpl.get_nfilters()):
        code, _flags, values, _name = dcpl.get_filter(i)
        fn = _decoder(code, tuple(values), nbytes)
        if fn is None:
            return None
        steps.append((i, fn))
    return steps[::-1]


class H5Chunks:
    """The chunked datasets of one read-only HDF5 file that ptd decodes itself."""

    def __init__(self, file: h5py.File, cache: ChunkCache | None) -> None:
        self._file = file
        self.cache = cache
        #: path -> (dataset, ChunkedArray or None: h5py reads it)
        self._arrays: dict[Any, tuple[Any, ChunkedArray | None]] = {}
        self._fd: int | None = None
        self._fd_checked = False
        #: two threads reading at once (a read ahead and the loading thread) must both get
        #: the descriptor, not one of them None while the other is still opening it
        self._fd_lock = threading.Lock()

    @classmethod
    def create(cls, file: h5py.File, chunk_cache: Any) -> H5Chunks | None:
        """The reader of ``file`` when it is open read-only (HDF5's own intent: another
        writable handle in this process makes it writable), else None. ``chunk_cache``: the
        cache's budget (:func:`~ptd.storage.read.cache.cache_budget`)."""
        budget = cache_budget(chunk_cache)
        if file.mode != "r":
            return None
        return cls(file, ChunkCache(budget) if budget > 0 else None)

    def read(
        self, path: Any, handle: Any, selection: Any, out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``ds[selection]`` for the dataset ``handle.ds`` (the backend's entry), the index
        array possibly unsorted with repeats (into ``out`` when given), or None when h5py
        must read it."""
        ds = handle.ds
        hit = self._arrays.get(path)
        if hit is None or hit[0] is not ds:
            hit = (ds, self._describe(ds))
            self._arrays[path] = hit
        arr = hit[1]
        if arr is None:
            return None
        return read_chunked(arr, selection, self.cache, out)

    def _describe(self, ds: Any) -> ChunkedArray | None:
        dsid = ds.id
        shape, dt = dsid.shape, dsid.dtype
        if not shape or 0 in shape or not mappable_dtype(dt):
            return None
        dcpl = dsid.get_create_plist()
        if dcpl.get_layout() != h5py.h5d.CHUNKED or dcpl.get_external_count():
            return None
        try:
            if dsid.get_type() != h5py.h5t.py_create(dt):
                return None  # the bytes are not numpy's: h5py converts them
        except (TypeError, ValueError):
            return None
        chunks = tuple(int(c) for c in dcpl.get_chunk())
        count = int(np.prod(chunks, dtype=np.int64))
        nbytes = count * dt.itemsize
        steps = _pipeline(dsid, nbytes)
        if steps is None:
            return None
        # a shuffle undone last (the usual shuffle + deflate) is undone while the rows are
        # copied out (read/shuffled.py), not by a copy of every chunk first
        shuffle_at: int | None = None
        if steps and dt.itemsize > 1:
            i, _fn = steps[-1]
            code, _flags, values, _name = dcpl.get_filter(i)
            if code == _SHUFFLE and tuple(values)[:1] in ((), (dt.itemsize,)):
                shuffle_at = i
                steps = steps[:-1]
        fd = self._descriptor()
        infos: dict[tuple[int, ...], Any] = {}
        limit = 2 * nbytes + (1 << 16)  # more stored bytes than this: h5py's business

        def fetch(coords: tuple[int, ...]) -> np.ndarray | ShuffledChunk:
            offset = tuple(k * c for k, c in zip(coords, chunks, strict=True))
            info = infos.get(coords)
            if info is None:
                info = dsid.get_chunk_info_by_coord(offset)
                infos[coords] = info
            if info.byte_offset is None or info.size > limit:  # never written, or hostile
                return self._by_h5py(ds, offset, chunks, dt)
            if fd is not None:
                raw: Any = os.pread(fd, info.size, info.byte_offset)
                if len(raw) != info.size:
                    return self._by_h5py(ds, offset, chunks, dt)
                mask = info.filter_mask
            else:
                # h5py's lock around every libhdf5 call (its documented ``phil``): h5py
                # releases before its PR 2764 (Dec 2025) call read_direct_chunk without it,
                # so another thread's HDF5 call could run inside it ("Unspecified error in
                # H5Dread_chunk" on an intact file); the lock is reentrant, so newer h5py,
                # which takes it itself, is unaffected
                with _h5py_lock:
                    mask, raw = dsid.read_direct_chunk(offset)
            try:
                for i, fn in steps:
                    if not mask & (1 << i):
                        raw = fn(raw)
            except _Refused:
                return self._by_h5py(ds, offset, chunks, dt)
            if len(raw) != nbytes:  # not what the filters should give: h5py says what is wrong
                return self._by_h5py(ds, offset, chunks, dt)
            if shuffle_at is not None and not mask & (1 << shuffle_at):
                return ShuffledChunk(np.frombuffer(raw, np.uint8, nbytes), chunks, dt)
            return np.frombuffer(raw, dt, count).reshape(chunks)

        return ChunkedArray(next(_keys), tuple(shape), chunks, dt, fetch)

    @staticmethod
    def _by_h5py(ds: Any, offset: tuple[int, ...], chunks: tuple[int, ...], dt: Any) -> np.ndarray:
        """The chunk at ``offset`` read through h5py (fill value, failed checksum...)."""
        region = tuple(
            slice(o, min(o + c, s)) for o, c, s in zip(offset, chunks, ds.shape, strict=True)
        )
        out = np.zeros(chunks, dt)
        out[tuple(slice(0, r.stop - r.start) for r in region)] = ds[region]
        return out

    def _descriptor(self) -> int | None:
        """ptd's own read-only descriptor of the file HDF5 has open, or None (then chunks are
        read through ``read_direct_chunk``)."""
        if self._fd_checked:
            return self._fd
        with self._fd_lock:
            if not self._fd_checked:
                self._fd = self._open_descriptor()
                self._fd_checked = True
        return self._fd

    def _open_descriptor(self) -> int | None:
        try:
            if self._file.driver != "sec2":
                return None
            st = os.fstat(self._file.id.get_vfd_handle())
            fd = os.open(os.fsdecode(self._file.filename), os.O_RDONLY)
        except Exception:  # noqa: BLE001 - no descriptor or name: HDF5 reads the chunks
            return None
        mine = os.fstat(fd)
        if (mine.st_dev, mine.st_ino) != (st.st_dev, st.st_ino):
            os.close(fd)
            return None
        return fd

    def close(self) -> None:
        self._arrays.clear()
        if self.cache is not None:
            self.cache.clear()
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)
