"""Reading a selection of a chunked array chunk by chunk, the chunks fetched and decoded in
parallel, through the decoded-chunk cache.

Both backends describe a chunked, compressed array they can decode themselves as a
:class:`ChunkedArray`: its shape, chunk grid, dtype, and a ``fetch(coords)`` that reads one
chunk's bytes and decodes them (HDF5: :mod:`~ptd.storage.h5.decode`; zarr:
:mod:`~ptd.storage.zarr.decode`). :func:`read_chunked` splits a backend selection by
chunk, takes the chunks it finds in the :class:`~ptd.storage.read.cache.ChunkCache`,
fetches the others on a thread pool (zlib, zstd and blosc release the GIL while they decode,
and so do file reads), and copies each chunk's part into the output as it arrives.

The pool is the process's CPU pool (:mod:`ptd.storage.runtime`), of
:func:`~ptd.storage.runtime.decode_threads` threads (``PTD_DECODE_THREADS``, else torch's thread
count when torch is loaded, else the CPU count); :func:`~ptd.storage.runtime.set_decode_threads`
changes it for this process. Arrays whose chunks are smaller than :data:`PARALLEL_MIN_CHUNK_BYTES` (decoded) are
read by the calling thread alone: the Python work around each chunk holds the GIL, and for small
chunks it outweighs the decode, so a second thread only contends for the GIL (on sharded zarr
with 32 KB inner chunks, 2 threads ran at 0.74x one: ``benchmarks/bench_training.py --sections
random``).

    >>> import numpy as np
    >>> data = np.arange(20).reshape(10, 2)
    >>> arr = ChunkedArray(("x",), (10, 2), (4, 2), data.dtype,
    ...                    lambda c: data[c[0] * 4 : c[0] * 4 + 4].copy())
    >>> read_chunked(arr, (np.array([9, 0, 0, 5]),), None).tolist()
    [[18, 19], [0, 1], [0, 1], [10, 11]]
    >>> read_chunked(arr, (slice(1, 9, 3), 1), None).tolist()
    [3, 9, 15]
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptd.storage.indexer import ChunkProjection, project, scatter
from ptd.storage.read.cache import ChunkCache
from ptd.storage.read.shuffled import ShuffledChunk, copy_rows
from ptd.storage.runtime import decode_threads, run_parts

__all__ = [
    "PARALLEL_MIN_CHUNK_BYTES",
    "ChunkedArray",
    "read_chunked",
]

#: chunks smaller than this (decoded bytes) are decoded by the reading thread alone
PARALLEL_MIN_CHUNK_BYTES = 64 << 10


@dataclass(slots=True, eq=False)
class ChunkedArray:
    """An array a backend reads chunk by chunk itself.

    ``fetch(coords)`` returns the decoded chunk at grid coordinates ``coords``: an array of the
    full chunk shape (edge chunks too) of ``dtype`` or of a dtype that converts to it exactly
    (another byte order), or None for a chunk never written (the fill value). ``key`` is unique
    to this array (in this store, for as long as it exists): it keys the chunk cache."""

    key: Hashable
    shape: tuple[int, ...]
    chunks: tuple[int, ...]
    dtype: np.dtype
    fetch: Callable[[tuple[int, ...]], np.ndarray | ShuffledChunk | None]
    fill: Any = 0


def read_chunked(
    arr: ChunkedArray,
    selection: Sequence[Any],
    cache: ChunkCache | None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``arr[selection]`` with h5py's (orthogonal) semantics, as a new array of ``arr.dtype``
    or into ``out`` (of the selected shape and ``arr.dtype``: a caller's buffer, so that the
    decoded bytes are copied once, straight where they go).

    ``selection`` is any selection :func:`ptd.storage.indexer.project` takes (index arrays
    unsorted, with repeats...): each chunk is visited once and its part scattered straight to
    its places in the output. A chunk may come from ``fetch`` still in shuffle order
    (:class:`~ptd.storage.read.shuffled.ShuffledChunk`): the shuffle is undone as its rows
    are copied out."""
    indexer = project(selection, arr.shape, arr.chunks)
    shape_out = indexer.shape
    if out is not None and (tuple(out.shape) != shape_out or out.dtype != arr.dtype):
        raise ValueError(f"out must be {shape_out} of {arr.dtype}, not {out.shape} of {out.dtype}")
    result = np.empty(shape_out, arr.dtype) if out is None else out
    if 0 in shape_out:
        return result
    projections = indexer.chunks
    size = int(np.prod(arr.shape, dtype=np.int64)) * arr.dtype.itemsize

    def put(proj: ChunkProjection, chunk: Any) -> None:
        if chunk is None:
            result[proj.out] = arr.fill
        elif isinstance(chunk, ShuffledChunk):
            copy_rows(result, proj, chunk)
        else:
            scatter(result, proj, chunk)

    def fetch_all(group: list[ChunkProjection]) -> None:
        for proj in group:
            chunk = arr.fetch(proj.coords)
            if cache is not None and chunk is not None:
                cache.put(arr.key, proj.coords, chunk, size)
            put(proj, chunk)

    # chunks in the cache are copied out here; the others are fetched and decoded by
    # ``decode_threads()`` threads (this one among them), each taking every n-th chunk
    pending = []
    for proj in projections:
        chunk = None if cache is None else cache.get(arr.key, proj.coords)
        if chunk is None:
            pending.append(proj)
        else:
            put(proj, chunk)
    chunk_bytes = int(np.prod(arr.chunks, dtype=np.int64)) * arr.dtype.itemsize
    n = min(decode_threads(), len(pending)) if chunk_bytes >= PARALLEL_MIN_CHUNK_BYTES else 1
    if n <= 1:
        fetch_all(pending)
        return result
    # the first error (a corrupt chunk...) is raised once every part has ended
    run_parts(fetch_all, [(pending[i::n],) for i in range(n)])
    return result
