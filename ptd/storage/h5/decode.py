"""Chunked HDF5 datasets read chunk by chunk by ptd: raw chunk bytes, filters decoded here.

For a chunked dataset whose filter pipeline is made only of filters this module decodes
exactly -- deflate (gzip; with libdeflate when the ``deflate`` package is installed), shuffle,
fletcher32, and the zstd (32015), blosc (32001) and lz4 (32004) filters of ``hdf5plugin`` -- a
read fetches the raw bytes of each chunk it needs with ``read_direct_chunk`` (HDF5's own
lookup of the chunk, the one ``H5Dread`` makes, so that a damaged chunk index gives h5py's
answer), undoes the filters, and hands the chunks to
:func:`~ptd.storage.read.decoded.read_chunked` (parallel decode, chunk cache).

Every decode is bounded by the size the chunk must have (:mod:`ptd.storage.frames`): a blosc,
zstd or lz4 header is checked against the chunk's stored length and its decoded size before
the decoder runs, deflate stops at the chunk's size, and a chunk that decodes to more or
fewer bytes, fails its fletcher32 checksum or stores more bytes than any encoding of it
raises :class:`~ptd.errors.CorruptStoreError` naming the file, the key and the chunk. Such
a chunk is never handed to HDF5's filters, which trust what a header says (a blosc header
alone can make c-blosc copy the process's memory into the values). Every read of a served
dataset comes here, small whole ones too (``serves``).

Otherwise the result is h5py's, bit for bit: a dataset is served only when its file datatype
is exactly the one h5py would create for its numpy dtype (so the decoded bytes are the
values); a chunk HDF5 does not find and any filter not listed above (szip, nbit, scaleoffset,
lzf, ...) go through h5py, which raises or fills as it does. Only files opened read-only are
served (a write could sit in HDF5's buffers).
"""

from __future__ import annotations

import itertools
import os
import zlib
from collections.abc import Callable
from typing import Any

import h5py
import numpy as np
from h5py._objects import phil as _h5py_lock

from ptd.errors import CorruptStoreError
from ptd.storage.frames import FrameError, bounded_decode, decode_bound
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
    if (stored & 0xFFFF) % 65535 == sum1 and (stored >> 16) % 65535 == sum2:
        return True
    # files of HDF5 before 1.6.3 stored it byte-swapped; HDF5 accepts both
    swapped = int.from_bytes(stored.to_bytes(4, "little"), "big")
    return (swapped & 0xFFFF) % 65535 == sum1 and (swapped >> 16) % 65535 == sum2


def _inflater(expected: int | None, limit: int) -> Callable[[Any], Any]:
    """Undo deflate (zlib format, checksum checked) into exactly ``expected`` bytes (at most
    ``limit`` when the size is not known): with libdeflate (the ``deflate`` package, about
    twice zlib's speed, the GIL released) when it is installed, else with zlib's bounded
    ``decompressobj``. A stream that does not end there (a damaged chunk, a bomb) raises
    :class:`~ptd.storage.frames.FrameError`: never handed to HDF5's filter, which would
    inflate it without bound."""

    def inflate_zlib(b: Any) -> Any:
        try:
            return bounded_decode("zlib", b, expected, limit)
        except zlib.error as err:
            raise FrameError(f"deflate stream is damaged ({err})") from None

    if expected is None:
        return inflate_zlib
    try:
        import deflate
    except ImportError:
        return inflate_zlib
    fast = deflate.zlib_decompress

    def inflate(b: Any) -> Any:
        try:
            out = fast(b, expected)
        except Exception:  # noqa: BLE001 - zlib decides (and says what is wrong)
            return inflate_zlib(b)
        return out if len(out) == expected else inflate_zlib(b)

    return inflate


def _decoder(
    code: int, values: tuple[int, ...], expected: int | None, limit: int
) -> Callable[[Any], Any] | None:
    """The function undoing filter ``code`` on a chunk's bytes (exactly ``expected`` bytes
    once decoded, or at most ``limit`` when that size is not known), or None when it is not
    decoded here."""
    if code == _DEFLATE:
        return _inflater(expected, limit)
    if code == _SHUFFLE:
        size = int(values[0]) if values else 1
        return lambda b: unshuffle(b, size)
    if code == _FLETCHER32:

        def check(b: Any) -> Any:
            if not fletcher32_ok(b):
                raise FrameError("its fletcher32 checksum does not match")
            return memoryview(b)[:-4]

        return check
    if code == _LZ4:
        return _lz4_decoder(expected, limit)
    if code in (_ZSTD, _BLOSC):
        name = "zstd" if code == _ZSTD else "blosc"
        return lambda b: bounded_decode(name, b, expected, limit)
    return None


def _lz4_decoder(expected: int | None, limit: int) -> Callable[[Any], Any] | None:
    """The HDF5 LZ4 filter (32004, as hdf5plugin writes it): an 8-byte big-endian total size,
    a 4-byte block size, then per block a 4-byte compressed size and the block -- stored as is
    when that size equals the block's, else an LZ4 block. Each LZ4 block is decoded by
    numcodecs' LZ4 codec (given in its own framing: the decoded size, little-endian, first)
    into a buffer of the block's size. A total that is not the chunk's, or anything that does
    not add up, raises FrameError."""
    try:
        import numcodecs
    except ImportError:  # pragma: no cover - numcodecs comes with zarr
        return None
    codec = numcodecs.LZ4()

    def decode(b: Any) -> Any:
        mv = memoryview(b).cast("B")
        if len(mv) < 12:
            raise FrameError(f"lz4 chunk of {len(mv)} bytes is shorter than its header")
        total = int.from_bytes(mv[:8], "big")
        block = int.from_bytes(mv[8:12], "big")
        if (expected is not None and total != expected) or total > limit or block <= 0:
            raise FrameError(
                f"lz4 header says {total} bytes decoded in blocks of {block}, the chunk must "
                f"hold {expected if expected is not None else f'at most {limit}'}"
            )
        out = bytearray(total)
        pos = 12
        done = 0
        while done < total:
            n = min(block, total - done)
            if pos + 4 > len(mv):
                raise FrameError("lz4 chunk is cut short")
            size = int.from_bytes(mv[pos : pos + 4], "big")
            pos += 4
            if size <= 0 or pos + size > len(mv):
                raise FrameError("lz4 block size points outside the chunk")
            if size == n:
                out[done : done + n] = mv[pos : pos + size]
            else:
                part = np.frombuffer(out, np.uint8, n, done)
                try:
                    codec.decode(n.to_bytes(4, "little") + mv[pos : pos + size].tobytes(), out=part)
                except Exception as exc:  # noqa: BLE001 - a damaged block
                    raise FrameError(f"lz4 block does not decode to {n} bytes ({exc})") from None
            pos += size
            done += n
        if pos != len(mv):
            raise FrameError("lz4 chunk holds bytes after its last block")
        return out

    return decode


def _pipeline(dsid: Any, nbytes: int) -> list[tuple[int, Callable[[Any], Any]]] | None:
    """The decoders of a dataset's filters, last applied first, with their pipeline index.
    Each knows the size its output must have: a chunk's ``nbytes`` grown by the fletcher32
    checksums applied before it (4 bytes each), or, after another compressor, only a bound."""
    dcpl = dsid.get_create_plist()
    steps = []
    expected: int | None = nbytes
    limit = decode_bound(nbytes)
    for i in range(dcpl.get_nfilters()):
        code, _flags, values, _name = dcpl.get_filter(i)
        fn = _decoder(code, tuple(values), expected, limit if expected is None else expected)
        if fn is None:
            return None
        steps.append((i, fn))
        if code == _FLETCHER32:
            expected = None if expected is None else expected + 4
            limit += 4
        elif code != _SHUFFLE:
            expected = None  # a compressor's output size is known to its own header only
    return steps[::-1]


class H5Chunks:
    """The chunked datasets of one read-only HDF5 file that ptd decodes itself."""

    def __init__(self, file: h5py.File, cache: ChunkCache | None) -> None:
        self._file = file
        self.cache = cache
        #: dataset name -> (dataset, ChunkedArray or None: h5py reads it)
        self._arrays: dict[Any, tuple[Any, ChunkedArray | None]] = {}

    @classmethod
    def create(cls, file: h5py.File, chunk_cache: Any) -> H5Chunks | None:
        """The reader of ``file`` when it is open read-only (HDF5's own intent: another
        writable handle in this process makes it writable), else None. ``chunk_cache``: the
        cache's budget (:func:`~ptd.storage.read.cache.cache_budget`)."""
        budget = cache_budget(chunk_cache)
        if file.mode != "r" or file.swmr_mode:  # SWMR: h5py follows the writer's index
            return None
        return cls(file, ChunkCache(budget) if budget > 0 else None)

    def serves(self, handle: Any) -> bool:
        """Whether this reader decodes the dataset of ``handle`` (then every read of it,
        small whole ones too, must come here: HDF5's own filters trust a chunk's headers)."""
        return handle.chunked and self._entry(handle.ds) is not None

    def _entry(self, ds: Any) -> ChunkedArray | None:
        name = ds.name  # unique in the file, whatever group the store was opened at
        hit = self._arrays.get(name)
        if hit is None or hit[0] is not ds:
            hit = (ds, self._describe(ds, name.lstrip("/") or "/"))
            self._arrays[name] = hit
        return hit[1]

    def read(
        self, path: Any, handle: Any, selection: Any, out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``ds[selection]`` for the dataset ``handle.ds`` (the backend's entry), the index
        array possibly unsorted with repeats (into ``out`` when given), or None when h5py
        must read it."""
        arr = self._entry(handle.ds) if handle.chunked else None
        if arr is None:
            return None
        return read_chunked(arr, selection, self.cache, out)

    def _describe(self, ds: Any, key: str) -> ChunkedArray | None:
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
        limit = decode_bound(nbytes) + 4 * len(steps)  # more stored bytes: a damaged chunk
        filename = os.fsdecode(self._file.filename)

        def damaged(coords: tuple[int, ...], why: str) -> CorruptStoreError:
            return CorruptStoreError(
                f"cannot read key {key!r} of {filename}: its chunk {list(coords)} is damaged "
                f"({why}); expected {nbytes} bytes once decoded"
            )

        def fetch(coords: tuple[int, ...]) -> np.ndarray | ShuffledChunk:
            offset = tuple(k * c for k, c in zip(coords, chunks, strict=True))
            # HDF5's own lookup of the chunk, the one H5Dread makes: on a damaged index
            # (a B-tree key changed) its walk (get_chunk_info_by_coord, chunk_iter) and its
            # search can find different chunks, and h5py reads what the search finds. h5py's
            # lock (its documented ``phil``) is held: h5py before its PR 2764 (Dec 2025)
            # calls read_direct_chunk without it, so another thread's HDF5 call could run
            # inside it; the lock is reentrant, so newer h5py is unaffected
            try:
                with _h5py_lock:
                    mask, raw = dsid.read_direct_chunk(offset)
            except (OSError, ValueError, RuntimeError, KeyError):
                # not stored (the fill value), or an error h5py says better: no filter
                # runs on a chunk HDF5 does not find
                return self._by_h5py(ds, offset, chunks, dt)
            if len(raw) > limit:
                raise damaged(coords, f"{len(raw)} bytes stored, more than any encoding of it")
            try:
                for i, fn in steps:
                    if not mask & (1 << i):
                        raw = fn(raw)
            except FrameError as err:
                raise damaged(coords, str(err)) from None
            if len(raw) != nbytes:
                raise damaged(coords, f"it decodes to {len(raw)} bytes")
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

    def close(self) -> None:
        self._arrays.clear()
        if self.cache is not None:
            self.cache.clear()
