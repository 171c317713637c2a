"""Compressed (and sharded) Zarr v3 arrays of a local store read chunk by chunk by ptd.

zarr-python reads a selection through its asynchronous codec pipeline, at a cost of hundreds of
microseconds per chunk before any decoding. For an array of a local directory store whose codecs
are ``bytes`` followed by byte-to-byte codecs (zstd, gzip, blosc, crc32c, and the numcodecs
codecs zarr wraps: lz4, bz2, lzma, zlib...), or a
``sharding_indexed`` codec whose inner and index codecs are such a chain, this module reads the
chunk files itself (``pread``; for shards, the shard index once, then each inner chunk's byte
range) and decodes them with **zarr's own codec objects** (their synchronous ``_decode_sync``;
for a wrapped numcodecs codec, the call zarr's own decode makes, in our thread),
from the threads of :func:`~ptd.storage.read.decoded.read_chunked`. The unit of the cache
and of the parallel decode is the chunk, or the inner chunk of a shard.

The result is zarr's, bit for bit: the same codecs decode the same bytes, a missing chunk (or an
inner chunk absent from its shard) reads as the array's fill value, and anything else
(array-to-array codecs such as ``transpose``, nested sharding, zarr v2 arrays, zip, in-memory or
remote stores, strings) goes through zarr. Shard indexes are remembered only in read-only mode.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from zarr.abc.codec import ArrayBytesCodec, BytesBytesCodec
from zarr.codecs import BytesCodec, ShardingCodec

from ptd.storage.read.cache import ChunkCache
from ptd.storage.read.decoded import ChunkedArray, read_chunked
from ptd.storage.read.mapped import mappable_dtype
from ptd.storage.zarr.jsonguard import is_plain_directory
from ptd.storage.zarr.private import (
    ArraySpec,
    RegularChunkGrid,
    decode_sync,
    default_buffer_prototype,
)

# zarr's wrappers of numcodecs codecs (lz4...), and the call their decode runs
from ptd.storage.zarr.private import NumcodecsBytesBytesCodec as _NumcodecsBytes
from ptd.storage.zarr.private import as_numpy_array_wrapper as _as_numpy_array_wrapper

__all__ = ["ZarrChunks"]

_keys = itertools.count()
_EMPTY = np.uint64(2**64 - 1)
#: shard indexes remembered per array (read-only stores)
_MAX_INDEXES = 4096


def _read_file(name: str, offset: int | None = None, size: int | None = None) -> bytes | None:
    """The bytes of file ``name`` (or ``size`` of them at ``offset``), None when it is missing."""
    try:
        fd = os.open(name, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        if offset is None:
            size = os.fstat(fd).st_size
            offset = 0
        assert size is not None
        data = os.pread(fd, size, offset)
        if len(data) != size:
            raise ValueError(f"{name} is shorter than its shard index says")
        return data
    finally:
        os.close(fd)


def _numcodecs_decode(codec: Any) -> Callable[[Any, ArraySpec], Any] | None:
    """A synchronous decode for a numcodecs byte-to-byte codec wrapped by zarr (``lz4``,
    ``bz2``, ``lzma``, ``zlib``, the numcodecs checksums...): zarr's own ``_decode_single``
    runs ``as_numpy_array_wrapper(codec._codec.decode, ...)`` in a thread; this runs that same
    call in ours. None when ``codec`` is not such a wrapper (or overrides that decode)."""
    if not isinstance(codec, _NumcodecsBytes):
        return None
    if type(codec)._decode_single is not _NumcodecsBytes._decode_single:
        return None
    inner = getattr(codec, "_codec", None)
    decode = getattr(inner, "decode", None)
    if decode is None:
        return None
    wrapper = _as_numpy_array_wrapper

    def run(buf: Any, spec: ArraySpec) -> Any:
        return wrapper(decode, buf, spec.prototype)

    return run


def _sync_decode(codec: Any) -> Callable[[Any, ArraySpec], Any] | None:
    """The synchronous decode of a byte-to-byte codec, or None when it has none."""
    if not isinstance(codec, BytesBytesCodec):
        return None
    found = decode_sync(codec)
    if found is not None:
        return found
    return _numcodecs_decode(codec)


def _chain(codecs: tuple[Any, ...]) -> tuple[BytesCodec, list[Any]] | None:
    """``(bytes codec, the byte-to-byte codecs' synchronous decodes)`` when ``codecs`` is such a
    chain, else None."""
    if not codecs or type(codecs[0]) is not BytesCodec:
        return None
    rest = [_sync_decode(c) for c in codecs[1:]]
    if any(d is None for d in rest):
        return None
    return codecs[0], rest


def _decoder(codecs: tuple[Any, ...], spec: ArraySpec) -> Callable[[bytes], np.ndarray] | None:
    """A function decoding one encoded chunk's bytes with zarr's codecs, or None."""
    chain = _chain(codecs)
    if chain is None:
        return None
    bytes_codec, rest = chain
    bytes_decode = decode_sync(bytes_codec)
    if bytes_decode is None:
        return None
    proto = spec.prototype
    rest = rest[::-1]

    def decode(raw: bytes) -> np.ndarray:
        buf = proto.buffer.from_bytes(raw)
        for step in rest:
            buf = step(buf, spec)
        return np.asarray(bytes_decode(buf, spec).as_numpy_array())

    return decode


class ZarrChunks:
    """The compressed or sharded arrays of one local zarr store that ptd decodes itself."""

    def __init__(self, root: str, cache: ChunkCache | None, writable: bool) -> None:
        self._root = root
        self.cache = cache
        self._writable = writable
        #: path -> (zarr array, ChunkedArray or None: zarr reads it)
        self._arrays: dict[Any, tuple[Any, ChunkedArray | None]] = {}

    @classmethod
    def create(cls, store: Any, writable: bool, budget: int) -> ZarrChunks | None:
        """The reader of ``store`` when it is a local directory store, else None. The cache
        (``budget`` bytes) is used in read-only mode only."""
        if not is_plain_directory(store):
            return None
        cache = ChunkCache(budget) if budget > 0 and not writable else None
        return cls(os.fspath(store.root), cache, writable)

    def read(
        self, path: Any, arr: Any, selection: Any, out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``arr[selection]`` (the index array may be unsorted, with repeats; into ``out`` when
        given), or None when zarr must read it."""
        hit = self._arrays.get(path)
        if hit is None or hit[0] is not arr:
            try:
                described = self._describe(arr)
            except Exception:  # noqa: BLE001 - anything unexpected: zarr's own path
                described = None
            hit = (arr, described)
            self._arrays[path] = hit
        chunked = hit[1]
        if chunked is None:
            return None
        return read_chunked(chunked, selection, self.cache, out)

    def _describe(self, arr: Any) -> ChunkedArray | None:
        md = arr.metadata
        if getattr(md, "zarr_format", None) != 3 or not isinstance(md.chunk_grid, RegularChunkGrid):
            return None
        dt = np.dtype(arr.dtype)
        shape = tuple(int(s) for s in md.shape)
        if not shape or 0 in shape or not mappable_dtype(dt):
            return None
        codecs = tuple(md.codecs)
        if len(codecs) == 1 and type(codecs[0]) is BytesCodec:
            return None  # uncompressed: the fast path's maps or zarr
        parts = [p for p in arr.path.split("/") if p]
        if any(p in (".", "..") or os.sep in p or "\x00" in p for p in parts):
            return None
        directory = os.path.join(self._root, *parts)
        encode = md.chunk_key_encoding.encode_chunk_key
        outer = tuple(int(c) for c in md.chunk_grid.chunk_shape)
        config = arr._async_array.config
        proto = default_buffer_prototype()
        fill = np.asarray(md.fill_value, dtype=dt)

        prefix = directory.rstrip(os.sep) + os.sep
        native = os.sep == "/"

        def filename(coords: tuple[int, ...]) -> str:
            key = encode(coords)  # "c/0/3" (or "0.3"): relative, "/"-separated
            return prefix + (key if native else key.replace("/", os.sep))

        if isinstance(codecs[0], ArrayBytesCodec) and type(codecs[0]) is not ShardingCodec:
            decode = _decoder(codecs, md.get_chunk_spec((0,) * len(shape), config, proto))
            if decode is None:
                return None

            def fetch(coords: tuple[int, ...]) -> np.ndarray | None:
                raw = _read_file(filename(coords))
                return None if raw is None else decode(raw)

            return ChunkedArray(next(_keys), shape, outer, dt, fetch, fill)
        if len(codecs) != 1 or type(codecs[0]) is not ShardingCodec:
            return None
        return self._sharded(codecs[0], md, shape, dt, outer, filename, config, proto, fill)

    def _sharded(
        self,
        sharding: ShardingCodec,
        md: Any,
        shape: tuple[int, ...],
        dt: np.dtype,
        outer: tuple[int, ...],
        filename: Callable[[tuple[int, ...]], str],
        config: Any,
        proto: Any,
        fill: np.ndarray,
    ) -> ChunkedArray | None:
        inner = tuple(int(c) for c in sharding.chunk_shape)
        if len(inner) != len(shape) or any(o % i for o, i in zip(outer, inner, strict=True)):
            return None
        per_shard = tuple(o // i for o, i in zip(outer, inner, strict=True))
        spec = ArraySpec(inner, md.dtype, md.fill_value, config, proto)
        decode = _decoder(tuple(sharding.codecs), spec)
        index_spec = sharding._get_index_chunk_spec(per_shard)
        decode_index = _decoder(tuple(sharding.index_codecs), index_spec)
        if decode is None or decode_index is None:
            return None
        index_size = sharding._shard_index_size(per_shard)
        at_end = getattr(sharding.index_location, "value", sharding.index_location) == "end"
        indexes: dict[tuple[int, ...], np.ndarray | None] = {}
        remember = not self._writable

        def shard_index(shard: tuple[int, ...]) -> np.ndarray | None:
            if shard in indexes:
                return indexes[shard]
            name = filename(shard)
            try:
                size = os.stat(name).st_size
            except FileNotFoundError:
                index = None
            else:
                raw = _read_file(name, size - index_size if at_end else 0, index_size)
                index = None if raw is None else decode_index(raw).reshape(per_shard + (2,))
            if remember:
                if len(indexes) >= _MAX_INDEXES:
                    indexes.clear()
                indexes[shard] = index
            return index

        def fetch(coords: tuple[int, ...]) -> np.ndarray | None:
            shard = tuple(k // n for k, n in zip(coords, per_shard, strict=True))
            index = shard_index(shard)
            if index is None:
                return None
            offset, nbytes = index[tuple(k % n for k, n in zip(coords, per_shard, strict=True))]
            if offset == _EMPTY and nbytes == _EMPTY:
                return None
            raw = _read_file(filename(shard), int(offset), int(nbytes))
            return None if raw is None else decode(raw)

        return ChunkedArray(next(_keys), shape, inner, dt, fetch, fill)

    def close(self) -> None:
        self._arrays.clear()
        if self.cache is not None:
            self.cache.clear()
