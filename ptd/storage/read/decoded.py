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

from ptd.storage.read.cache import ChunkCache
from ptd.storage.read.plan import chunk_pieces, normalize, out_shape, sort_first, take_local
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

    ``selection`` is a backend selection (ints, slices with a positive step, at most one 1-D
    int64 index array) whose index array may be unsorted and hold repeats (the rows come back
    in its order). A chunk may come from ``fetch`` still in shuffle order
    (:class:`~ptd.storage.read.shuffled.ShuffledChunk`): the shuffle is undone as its rows
    are copied out."""
    shape = arr.shape
    sel = normalize(selection, shape)
    shape_out = out_shape(shape, sel)
    if out is not None and (tuple(out.shape) != shape_out or out.dtype != arr.dtype):
        raise ValueError(f"out must be {shape_out} of {arr.dtype}, not {out.shape} of {out.dtype}")
    if 0 in shape_out:
        return np.empty(shape_out, arr.dtype) if out is None else out
    order = sort_first(sel, shape, arr.chunks)
    if order is not None:  # read the sorted unique rows, then put them in the asked order
        pos, rows, inverse, axis = order
        sorted_sel = (*sel[:pos], rows, *sel[pos + 1 :])
        got = _read_planned(arr, sorted_sel, out_shape(shape, sorted_sel), cache, None)
        if out is None:
            return np.take(got, inverse, axis=axis)
        return np.take(got, inverse, axis=axis, out=out, mode="clip")  # (in range)
    return _read_planned(arr, sel, shape_out, cache, out)


def _read_planned(
    arr: ChunkedArray,
    sel: tuple[Any, ...],
    shape_out: tuple[int, ...],
    cache: ChunkCache | None,
    out: np.ndarray | None,
) -> np.ndarray:
    """A normalized selection (its index array in order, or in one chunk), chunk by chunk."""
    shape = arr.shape
    result = np.empty(shape_out, arr.dtype) if out is None else out
    combos = chunk_pieces(sel, shape, arr.chunks)
    size = int(np.prod(shape, dtype=np.int64)) * arr.dtype.itemsize

    def put(combo: tuple[tuple[int, Any, slice | None], ...], chunk: Any) -> None:
        dst = tuple(p[2] for p in combo if p[2] is not None)
        if chunk is None:
            result[dst] = arr.fill
        elif isinstance(chunk, ShuffledChunk):
            copy_rows(result, dst, chunk, tuple(p[1] for p in combo))
        else:
            result[dst] = take_local(chunk, tuple(p[1] for p in combo))

    def fetch_all(group: list[tuple[tuple[int, Any, slice | None], ...]]) -> None:
        for combo in group:
            coords = tuple(p[0] for p in combo)
            chunk = arr.fetch(coords)
            if cache is not None and chunk is not None:
                cache.put(arr.key, coords, chunk, size)
            put(combo, chunk)

    # chunks in the cache are copied out here; the others are fetched and decoded by
    # ``decode_threads()`` threads (this one among them), each taking every n-th chunk
    pending = []
    for combo in combos:
        chunk = None if cache is None else cache.get(arr.key, tuple(p[0] for p in combo))
        if chunk is None:
            pending.append(combo)
        else:
            put(combo, chunk)
    chunk_bytes = int(np.prod(arr.chunks, dtype=np.int64)) * arr.dtype.itemsize
    n = min(decode_threads(), len(pending)) if chunk_bytes >= PARALLEL_MIN_CHUNK_BYTES else 1
    if n <= 1:
        fetch_all(pending)
        return result
    # the first error (a corrupt chunk...) is raised once every part has ended
    run_parts(fetch_all, [(pending[i::n],) for i in range(n)])
    return result
