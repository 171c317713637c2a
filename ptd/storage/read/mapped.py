"""The fast path: reads of uncompressed, contiguous array bytes served from read-only memory maps.

An HDF5 dataset that is contiguous, unfiltered, allocated and not external is one byte range of
its file (``Dataset.id.get_offset()``); a Zarr v3 array whose only codec is ``bytes`` (no
compression, no sharding: what ptd and tensordict write by default) on a local directory is one
raw C-order file per chunk. Such arrays are read as numpy views of a read-only memory map:
a random minibatch becomes one numpy fancy index at memory speed instead of an HDF5 hyperslab
selection or a zarr chunk decode.

Every read returns a **new** array (a fancy index copies anyway; a slice is copied out of the map,
split across a few threads when it is large), of exactly the dtype and values the library's own
path returns. Anything else (chunked or compressed data, strings, opaque types, 0-d and
zero-size arrays on h5, files opened by a non-default HDF5 driver, zip or remote zarr stores)
keeps the library's path.

The switch: ``fast_path=`` of :meth:`~ptd.storage.api.Backend.open` (and of
``PersistentTensorDict``, ``from_h5``, ``from_zarr``), ``None`` meaning the environment variable
``PTD_FAST_PATH`` (``0``/``false``/``no``/``off`` turn it off; on by default).

Consistency with writes (see the README, "Fast path"):

* h5: when the HDF5 file is open for writing (by this store or by any other handle of this
  process sharing the file), every mapped read first flushes the file (``H5Fflush``, about
  3 us when nothing is pending), so a write through ptd or h5py is visible to the next read.
* zarr: in writable modes each read checks the chunk files it touches (one ``stat`` each);
  a chunk rewritten (zarr writes a new file and renames it), created or deleted since it was
  mapped is mapped again.
* In mode ``"r"`` the maps are kept: a file changed by another process after opening is the
  user's business, as with h5py (whose metadata is cached too). Truncating a mapped file
  can end the process with SIGBUS, as with any memory map.

Maps are never shared between processes by pickling: a PersistentTensorDict sent to a DataLoader
worker reopens its store there, and maps are made again on first read. Closing the backend
unmaps everything, so no closed (or deleted) file stays open.

This module holds the switch and what both formats share: copying a selection out of a mapped
array (:func:`read_selection`) and unmapping. The per-format halves find the bytes:
:mod:`~ptd.storage.h5.maps` (:class:`H5Maps`, one map of the whole file) and
:mod:`~ptd.storage.zarr.maps` (:class:`ZarrMaps`, one map per chunk file).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from ptd.storage import runtime

__all__ = [
    "ENV_VAR",
    "PARALLEL_COPY_BYTES",
    "PREAD_BYTES",
    "ArrayMaps",
    "close_maps",
    "fast_path_enabled",
    "mappable_dtype",
    "pread_selection",
    "read_selection",
    "release",
    "view_of",
]

#: the environment variable that turns the fast path off (``PTD_FAST_PATH=0``)
ENV_VAR = "PTD_FAST_PATH"
#: copies out of a map of at least this many bytes are split across threads
PARALLEL_COPY_BYTES = 16 << 20
#: ... of at least this many bytes each, on at most this many threads
_MIN_PART_BYTES = 4 << 20
_MAX_THREADS = 4


def fast_path_enabled(option: bool | None) -> bool:
    """``option`` when it is a bool, else what ``PTD_FAST_PATH`` says (on unless 0/false/no/off)."""
    if option is not None:
        return bool(option)
    return runtime.enabled(ENV_VAR)


def mappable_dtype(dt: np.dtype) -> bool:
    """A fixed-size bool/int/uint/float/complex dtype (either byte order), no fields."""
    return dt.kind in "biufc" and dt.fields is None and dt.subdtype is None and not dt.hasobject


class ArrayMaps(Protocol):
    """The mapped arrays of one open store (:class:`~ptd.storage.h5.maps.H5Maps`,
    :class:`~ptd.storage.zarr.maps.ZarrMaps`), as a backend uses them."""

    def read(
        self, path: Any, node: Any, selection: Sequence[Any], out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``node[selection]`` (any selection ``Backend.read`` takes) read from maps, into
        ``out`` when given (else a new array), or None: use the library."""

    def close(self) -> None:
        """Unmap everything."""


# ----------------------------------------------------------------------------------------------
# reading a selection out of a mapped array


def _threads_for(nbytes: int) -> int:
    if nbytes < PARALLEL_COPY_BYTES:
        return 1
    # the CPU pool's size (torch's thread count when torch is loaded: 1 in DataLoader workers)
    n = runtime.decode_threads()
    return max(1, min(n, _MAX_THREADS, nbytes // _MIN_PART_BYTES))


def _madvise_fn() -> Any:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.madvise
        fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        fn.restype = ctypes.c_int
        return fn
    except (OSError, AttributeError):  # pragma: no cover - not Linux/glibc
        return None


_MADVISE = _madvise_fn() if hasattr(mmap, "MADV_DONTNEED") else None
#: after copying at least this many bytes out of a map, its pages are dropped from this
#: process's page tables (they stay in the OS page cache): streaming a whole store through the
#: fast path keeps resident memory bounded instead of growing with the store
RELEASE_BYTES = 1 << 20


def release(view: np.ndarray) -> None:
    """``madvise(MADV_DONTNEED)`` on the whole pages inside a C-contiguous mapped view."""
    if _MADVISE is None or view.nbytes < RELEASE_BYTES or not view.flags.c_contiguous:
        return
    base: Any = view
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):
        base = base.obj
    if not isinstance(base, mmap.mmap):  # only file-backed maps: DONTNEED zeroes anonymous memory
        return
    start = view.ctypes.data
    lo = -(-start // mmap.PAGESIZE) * mmap.PAGESIZE
    hi = (start + view.nbytes) // mmap.PAGESIZE * mmap.PAGESIZE
    if hi > lo:
        _MADVISE(lo, hi - lo, mmap.MADV_DONTNEED)


def _copy(view: Any) -> np.ndarray:
    """A new C-contiguous array equal to ``view`` (large copies split over a few threads).

    ``view`` is a read-only view of a memory map: after a large copy its pages are released
    (see :func:`release`)."""
    if not isinstance(view, np.ndarray) or view.ndim == 0:
        return np.array(view)
    out = np.empty(view.shape, view.dtype)
    try:
        return _copy_into(out, view)
    finally:
        release(view)


def _copy_into(out: np.ndarray, view: np.ndarray) -> np.ndarray:
    nthreads = _threads_for(view.nbytes)
    if nthreads > 1:
        if view.flags.c_contiguous:
            src, dst = view.reshape(-1), out.reshape(-1)
        elif view.shape[0] >= nthreads:
            src, dst = view, out
        else:
            nthreads = 1
    if nthreads <= 1:
        np.copyto(out, view)
        return out
    step = -(-src.shape[0] // nthreads)
    parts = [(dst[i : i + step], src[i : i + step]) for i in range(0, src.shape[0], step)]
    runtime.run_parts(np.copyto, parts)  # numpy releases the GIL while it copies
    return out


def _split(selection: Sequence[Any]) -> tuple[tuple[Any, ...], np.ndarray | None, int]:
    """``(basic, array, axis)``: the selection with its index array (if any) replaced by a full
    slice, the array, and the axis it indexes in the result of ``view[basic]``."""
    basic: list[Any] = []
    arr = None
    axis = 0
    arr_axis = 0
    for item in selection:
        if isinstance(item, np.ndarray):
            arr, arr_axis = item, axis
            basic.append(slice(None))
            axis += 1
        elif isinstance(item, slice):
            basic.append(item)
            axis += 1
        else:
            basic.append(int(item))
    return tuple(basic), arr, arr_axis


def _gather(view: np.ndarray, arr: np.ndarray, axis: int) -> np.ndarray:
    if axis == 0 and view.ndim == 1:
        out: np.ndarray = view[arr]
        return out
    return np.take(view, arr, axis=axis)


def read_selection(src: np.ndarray, selection: Sequence[Any] = ()) -> np.ndarray:
    """``src[selection]`` with the backends' (h5py's, orthogonal) semantics, as a new array.

    ``selection`` is a normalised backend selection: ints (dims dropped), slices with a positive
    step, and at most one 1-D int64 array (its dim kept in place; unlike numpy, ints do not
    combine with it into one advanced index). The array may be unsorted and hold repeats (as
    ``Backend.read`` takes it): the rows come back in its order.
    """
    if not selection:
        return _copy(src)
    basic, arr, axis = _split(selection)
    view = src[basic]
    if arr is None:
        return _copy(view)
    return _gather(view, arr, axis)


#: contiguous reads of at least this many bytes are positional reads of the file
PREAD_BYTES = 64 << 10


def _pread_into(fd: int, buf: memoryview, offset: int) -> bool:
    """Fill ``buf`` from ``fd`` at ``offset``; False at a short file (the caller falls back)."""
    done = 0
    while done < len(buf):
        n = os.preadv(fd, [buf[done:]], offset + done)
        if n <= 0:
            return False
        done += n
    return True


def pread_selection(
    fd: int, base: int, src: np.ndarray, selection: Sequence[Any] = ()
) -> np.ndarray | None:
    """``src[selection]`` (a view of a map of the file ``fd`` starting at address ``base``)
    read with ``os.preadv`` straight into a new array when it is one contiguous byte range of
    at least :data:`PREAD_BYTES` (large ones split over a few threads); None otherwise (copy
    out of the map instead). The kernel copies from the page cache: no page of the map is
    touched, so a first pass costs what h5py's own read costs."""
    if not hasattr(os, "preadv"):  # pragma: no cover - not POSIX
        return None
    basic, arr, _ = _split(selection)
    if arr is not None:
        return None
    view = src[basic] if basic else src
    if not isinstance(view, np.ndarray) or view.ndim == 0 or view.nbytes < PREAD_BYTES:
        return None
    if not view.flags.c_contiguous:
        return None
    offset = view.ctypes.data - base
    out = np.empty(view.shape, view.dtype)
    flat = memoryview(out.reshape(-1).view(np.uint8))  # type: ignore[arg-type]
    nthreads = _threads_for(view.nbytes)
    if nthreads <= 1:
        return out if _pread_into(fd, flat, offset) else None
    step = -(-len(flat) // nthreads)
    step = -(-step // mmap.PAGESIZE) * mmap.PAGESIZE
    parts = [(flat[i : i + step], offset + i) for i in range(0, len(flat), step)]
    results = runtime.run_parts(_pread_into, [(fd, *p) for p in parts])
    return out if all(results) else None


def view_of(src: np.ndarray, selection: Sequence[Any]) -> Any:
    """Like :func:`read_selection`, but a slice-only selection gives a view (for assignment)."""
    basic, arr, axis = _split(selection)
    view = src[basic]
    return view if arr is None else _gather(view, arr, axis)


def close_maps(maps: list[mmap.mmap]) -> None:
    """Unmap ``maps``; a map some array still points into is left to the garbage collector."""
    pending = []
    for mm in maps:
        try:
            mm.close()
        except BufferError:
            pending.append(mm)
    if pending:
        import gc

        gc.collect()
        for mm in pending:
            with contextlib.suppress(
                BufferError
            ):  # pragma: no cover - an array escaped: unmapped when it dies
                mm.close()
    maps.clear()
