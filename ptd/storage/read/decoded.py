"""Reading a selection of a chunked array chunk by chunk, the chunks fetched and decoded in
parallel, through the decoded-chunk cache.

Both backends describe a chunked, compressed array they can decode themselves as a
:class:`ChunkedArray`: its shape, chunk grid, dtype, and a ``fetch(coords)`` that reads one
chunk's bytes and decodes them (HDF5: :mod:`~ptd.storage.h5.decode`; zarr:
:mod:`~ptd.storage.zarr.decode`). :func:`read_chunked` splits a backend selection by
chunk, takes the chunks it finds in the :class:`~ptd.storage.read.cache.ChunkCache`,
fetches the others on a thread pool (zlib, zstd and blosc release the GIL while they decode,
and so do file reads), and copies each chunk's part into the output as it arrives.

The pool has :func:`decode_threads` threads: ``PTD_DECODE_THREADS`` when set, else
``torch.get_num_threads()`` when torch is loaded (1 in DataLoader workers, which are parallel
already), else the CPU count; at most 16. :func:`set_decode_threads` changes it for this
process. The pool is made on first use and made again in a forked child (threads do not survive
``fork``). Arrays whose chunks are smaller than :data:`PARALLEL_MIN_CHUNK_BYTES` (decoded) are
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

import itertools
import os
import sys
import threading
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

import numpy as np

from ptd.errors import PtdValueError
from ptd.storage.read.cache import ChunkCache

__all__ = [
    "PARALLEL_MIN_CHUNK_BYTES",
    "THREADS_ENV_VAR",
    "ChunkedArray",
    "decode_threads",
    "plan_dim",
    "read_chunked",
    "set_decode_threads",
]

#: the environment variable giving the decode thread count
THREADS_ENV_VAR = "PTD_DECODE_THREADS"
#: chunks smaller than this (decoded bytes) are decoded by the reading thread alone
PARALLEL_MIN_CHUNK_BYTES = 64 << 10
_MAX_THREADS = 16

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_pool_pid = 0
_threads_override: int | None = None


def _after_fork() -> None:
    """In a forked child: the parent's pool has no threads here, and its lock may be held."""
    global _lock, _pool
    _lock = threading.Lock()
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


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
    fetch: Callable[[tuple[int, ...]], np.ndarray | None]
    fill: Any = 0


def decode_threads() -> int:
    """The number of threads that fetch and decode chunks (see the module doc)."""
    if _threads_override is not None:
        return _threads_override
    env = os.environ.get(THREADS_ENV_VAR, "").strip()
    if env:
        try:
            n = int(env)
        except ValueError:
            raise PtdValueError(
                f"the environment variable {THREADS_ENV_VAR} must be an integer >= 1, got {env!r}"
            ) from None
        return max(1, min(n, _MAX_THREADS))
    torch = sys.modules.get("torch")
    n = torch.get_num_threads() if torch is not None else (os.cpu_count() or 1)
    return max(1, min(int(n), _MAX_THREADS))


def set_decode_threads(n: int | None) -> None:
    """Use ``n`` threads to decode chunks in this process (None: back to the default)."""
    global _threads_override
    if n is not None and (not isinstance(n, int) or n < 1):
        raise PtdValueError(f"the decode thread count must be an int >= 1 or None, got {n!r}")
    _threads_override = None if n is None else min(n, _MAX_THREADS)


def _get_pool(n: int) -> ThreadPoolExecutor:
    global _pool, _pool_size, _pool_pid
    pid = os.getpid()
    with _lock:
        if _pool is None or _pool_size != n or _pool_pid != pid:
            old = _pool if _pool_pid == pid else None
            _pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="ptd-decode")
            _pool_size, _pool_pid = n, pid
            if old is not None:
                old.shutdown(wait=False)
        return _pool


def plan_dim(item: Any, size: int, c: int) -> list[tuple[int, Any, slice | None]]:
    """How one selection entry over a dim of ``size`` in chunks of ``c`` splits by chunk:
    ``(chunk index, the entry in chunk coordinates, the output range or None for an int)``.
    An index array must be sorted (repeats allowed)."""
    if isinstance(item, np.ndarray):
        ks = item // c
        cuts = np.flatnonzero(ks[1:] != ks[:-1]) + 1
        bounds = [0, *cuts.tolist(), len(item)]
        out: list[tuple[int, Any, slice | None]] = []
        for a, b in itertools.pairwise(bounds):
            k = int(ks[a])
            local = item[a:b] - k * c
            if b - a > 1 and local[-1] - local[0] == b - a - 1:  # consecutive rows: a slice
                out.append((k, slice(int(local[0]), int(local[-1]) + 1), slice(a, b)))
            else:
                out.append((k, local, slice(a, b)))
        return out
    if isinstance(item, slice):
        start, stop, step = item.indices(size)
        out = []
        pos = 0
        for k in range(start // c, (stop - 1) // c + 1) if stop > start else ():
            lo, hi = k * c, min(k * c + c, stop)
            first = start if start >= lo else start + -(-(lo - start) // step) * step
            if first >= hi:
                continue
            n = len(range(first, hi, step))
            out.append((k, slice(first - lo, hi - lo, step), slice(pos, pos + n)))
            pos += n
        return out
    i = int(item)
    return [(i // c, i % c, None)]


def _checked(selection: Sequence[Any], shape: tuple[int, ...]) -> tuple[Any, ...]:
    """The selection padded to every dim, ints and index arrays checked against the shape."""
    for item, size in zip(selection, shape, strict=False):
        if isinstance(item, np.ndarray):
            if item.size and (int(item.min()) < 0 or int(item.max()) >= size):
                raise IndexError(f"index out of range for a dimension of size {size}")
        elif not isinstance(item, slice) and not 0 <= int(item) < size:
            raise IndexError(f"index {int(item)} is out of range for a dimension of size {size}")
    return tuple(selection) + tuple(slice(0, s, 1) for s in shape[len(selection) :])


def _out_shape(shape: Sequence[int], sel: Sequence[Any]) -> tuple[int, ...]:
    out = []
    for item, s in zip(sel, shape, strict=True):
        if isinstance(item, np.ndarray):
            out.append(int(item.shape[0]))
        elif isinstance(item, slice):
            out.append(len(range(*item.indices(s))))
    return tuple(out)


def _take(chunk: np.ndarray, local: tuple[Any, ...]) -> Any:
    """``chunk[local]`` orthogonally: ints first (so that numpy does not pair them with the
    index array), then slices and the one index array."""
    if any(not isinstance(x, (slice, np.ndarray)) for x in local):
        chunk = chunk[
            tuple(slice(None) if isinstance(x, (slice, np.ndarray)) else x for x in local)
        ]
        local = tuple(x for x in local if isinstance(x, (slice, np.ndarray)))
    return chunk[local]


def read_chunked(
    arr: ChunkedArray, selection: Sequence[Any], cache: ChunkCache | None
) -> np.ndarray:
    """``arr[selection]`` with h5py's (orthogonal) semantics, as a new array of ``arr.dtype``.

    ``selection`` is a backend selection (ints, slices with a positive step, at most one 1-D
    int64 index array) whose index array may be unsorted and hold repeats (the rows come back
    in its order)."""
    shape = arr.shape
    sel = _checked(selection, shape)
    out_shape = _out_shape(shape, sel)
    if 0 in out_shape:
        return np.empty(out_shape, arr.dtype)
    for pos, item in enumerate(sel):
        if (
            isinstance(item, np.ndarray)
            and len(item) > 1
            and not bool(np.all(item[1:] >= item[:-1]))
        ):
            # unsorted: read the sorted unique rows, then put them in the asked order
            u, inv = np.unique(item, return_inverse=True)
            got = read_chunked(arr, sel[:pos] + (u,) + sel[pos + 1 :], cache)
            axis = sum(1 for s in sel[:pos] if isinstance(s, (slice, np.ndarray)))
            return np.take(got, inv.reshape(-1), axis=axis)
    plans = [plan_dim(item, s, c) for item, s, c in zip(sel, shape, arr.chunks, strict=True)]
    out = np.empty(out_shape, arr.dtype)
    combos = list(itertools.product(*plans))
    size = int(np.prod(shape, dtype=np.int64)) * arr.dtype.itemsize

    def put(combo: tuple[tuple[int, Any, slice | None], ...], chunk: Any) -> None:
        dst = tuple(p[2] for p in combo if p[2] is not None)
        if chunk is None:
            out[dst] = arr.fill
        else:
            out[dst] = _take(chunk, tuple(p[1] for p in combo))

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
        return out
    pool = _get_pool(decode_threads())
    futures = [pool.submit(fetch_all, pending[i::n]) for i in range(1, n)]
    try:
        fetch_all(pending[0::n])
    finally:
        wait(futures)  # the first error (a corrupt chunk...) is raised once every part ended
    for fut in futures:
        fut.result()
    return out
