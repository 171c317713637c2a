"""The fast path: reads of uncompressed, contiguous array bytes served from read-only memory maps.

An HDF5 dataset that is contiguous, unfiltered, allocated and not external is one byte range of
its file (``Dataset.id.get_offset()``); a Zarr v3 array whose only codec is ``bytes`` (no
compression, no sharding: what ptd and tensordict write by default) on a local directory is one
raw C-order file per chunk. Such arrays are read here as numpy views of a read-only memory map:
a random minibatch becomes one numpy fancy index at memory speed instead of an HDF5 hyperslab
selection or a zarr chunk decode.

Every read returns a **new** array (a fancy index copies anyway; a slice is copied out of the map,
split across a few threads when it is large), of exactly the dtype and values the library's own
path returns. Anything else (chunked or compressed data, strings, opaque types, 0-d and
zero-size arrays on h5, files opened by a non-default HDF5 driver, zip or remote zarr stores)
keeps the library's path.

The switch: ``fast_path=`` of :meth:`~ptd.backends.base.Backend.open` (and of
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
worker reopens its store there, and maps are made again on first read. :meth:`close` unmaps
everything, so no closed (or deleted) file stays open.
"""

from __future__ import annotations

import collections
import itertools
import mmap
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

__all__ = [
    "ENV_VAR",
    "fast_path_enabled",
    "mappable_dtype",
    "read_selection",
    "FileMap",
    "H5Maps",
    "ZarrMaps",
]

#: the environment variable that turns the fast path off (``PTD_FAST_PATH=0``)
ENV_VAR = "PTD_FAST_PATH"
_OFF = frozenset({"0", "false", "no", "off"})
#: copies out of a map of at least this many bytes are split across threads
PARALLEL_COPY_BYTES = 16 << 20
#: ... of at least this many bytes each, on at most this many threads
_MIN_PART_BYTES = 4 << 20
_MAX_THREADS = 4
#: chunk files kept mapped per zarr store (each map holds a file descriptor)
ZARR_MAX_MAPS = 128


def fast_path_enabled(option: bool | None) -> bool:
    """``option`` when it is a bool, else what ``PTD_FAST_PATH`` says (on unless 0/false/no/off)."""
    if option is not None:
        return bool(option)
    return os.environ.get(ENV_VAR, "1").strip().lower() not in _OFF


def mappable_dtype(dt: np.dtype) -> bool:
    """A fixed-size bool/int/uint/float/complex dtype (either byte order), no fields."""
    return (
        dt.kind in "biufc" and dt.fields is None and dt.subdtype is None and not dt.hasobject
    )


# ----------------------------------------------------------------------------------------------
# reading a selection out of a mapped array


def _threads_for(nbytes: int) -> int:
    if nbytes < PARALLEL_COPY_BYTES:
        return 1
    torch = sys.modules.get("torch")  # respects torch.set_num_threads (1 in DataLoader workers)
    n = torch.get_num_threads() if torch is not None else (os.cpu_count() or 1)
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


def _release(view: np.ndarray) -> None:
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
    (see :func:`_release`)."""
    if not isinstance(view, np.ndarray) or view.ndim == 0:
        return np.array(view)
    out = np.empty(view.shape, view.dtype)
    try:
        return _copy_into(out, view)
    finally:
        _release(view)


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
    workers = [threading.Thread(target=np.copyto, args=p, daemon=True) for p in parts[1:]]
    for w in workers:
        w.start()
    np.copyto(*parts[0])
    for w in workers:
        w.join()
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
        return view[arr]
    return np.take(view, arr, axis=axis)


def read_selection(src: np.ndarray, selection: Sequence[Any] = ()) -> np.ndarray:
    """``src[selection]`` with the backends' (h5py's, orthogonal) semantics, as a new array.

    ``selection`` is a normalised backend selection: ints (dims dropped), slices with a positive
    step, and at most one 1-D int64 array (its dim kept in place; unlike numpy, ints do not
    combine with it into one advanced index). The array may be unsorted and hold repeats (what
    ``Backend.read_direct`` takes): the rows come back in its order.
    """
    if not selection:
        return _copy(src)
    basic, arr, axis = _split(selection)
    view = src[basic]
    if arr is None:
        return _copy(view)
    return _gather(view, arr, axis)


def _view_of(src: np.ndarray, selection: Sequence[Any]) -> Any:
    """Like :func:`read_selection`, but a slice-only selection gives a view (for assignment)."""
    basic, arr, axis = _split(selection)
    view = src[basic]
    return view if arr is None else _gather(view, arr, axis)


def _close_maps(maps: list[mmap.mmap]) -> None:
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
            try:
                mm.close()
            except BufferError:  # pragma: no cover - an array escaped: unmapped when it dies
                pass
    maps.clear()


# ----------------------------------------------------------------------------------------------
# HDF5: one map of the whole file


class FileMap:
    """A read-only map of a whole file, mapped again when the file grew.

    The file is opened by name, and must be the file ``ident`` (``(st_dev, st_ino)``) names:
    the descriptor of the library that opened it is never shared (a duplicate of HDF5's
    descriptor would keep HDF5's file lock after the library closed the file).
    """

    def __init__(self, path: str, ident: tuple[int, int]) -> None:
        self._path = path
        self._ident = ident
        self._mm: mmap.mmap | None = None
        self._old: list[mmap.mmap] = []
        #: bumped on each remap: views of an older map must be made again
        self.generation = 0

    def array(self, offset: int, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray | None:
        """A read-only view of ``shape`` ``dtype`` items at byte ``offset``; None when the range
        is not (yet) in the file."""
        count = int(np.prod(shape, dtype=np.int64))
        end = offset + count * dtype.itemsize
        mm = self._mm
        if mm is None or end > len(mm):
            mm = self._remap(end)
            if mm is None:
                return None
        return np.frombuffer(mm, dtype=dtype, count=count, offset=offset).reshape(shape)

    def _remap(self, need: int) -> mmap.mmap | None:
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self._ident or st.st_size < need or st.st_size == 0:
                return None  # replaced, or the data is not (yet) in the file
            mm = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return None
        finally:
            os.close(fd)  # the map keeps what it needs
        if self._mm is not None:
            self._old.append(self._mm)  # unmapped by drop_old once its views are dropped
        self._mm = mm
        self.generation += 1
        return mm

    def drop_old(self) -> None:
        """Unmap the maps a remap replaced (those still pointed into are kept for later)."""
        keep = []
        for mm in self._old:
            try:
                mm.close()
            except BufferError:
                keep.append(mm)
        self._old = keep

    def close(self) -> None:
        maps = self._old + ([self._mm] if self._mm is not None else [])
        self._mm = None
        self._old = []
        _close_maps(maps)


class H5Maps:
    """The mapped views of one open HDF5 file's datasets, by path."""

    def __init__(self, file: Any) -> None:
        self._file = file
        self._fmap: FileMap | None = None
        #: path -> (dataset object, view or None, map generation); None: not mappable
        self._views: dict[Any, tuple[Any, np.ndarray | None, int]] = {}
        # writes (through this store, or another handle sharing the file) may sit in HDF5's
        # buffers: flush them before reading the bytes behind HDF5's back
        self._flush = file.mode == "r+"

    @classmethod
    def create(cls, file: Any, option: bool | None) -> H5Maps | None:
        """The maps of ``file`` (an ``h5py.File``), or None when the fast path is off or the
        file is not a plain file on disk (a non-default driver)."""
        if not fast_path_enabled(option):
            return None
        try:
            if file.driver != "sec2":
                return None
        except Exception:  # noqa: BLE001 - an invalid file
            return None
        return cls(file)

    def source(self, path: Any, ds: Any) -> np.ndarray | None:
        """The mapped view of dataset ``ds`` (at ``path``), or None: use h5py."""
        if not self._file.id.valid:  # closed under us (e.g. a user's file): h5py raises
            self.close()
            return None
        if self._flush:
            self._file.flush()
        hit = self._views.get(path)
        fmap = self._fmap
        if hit is not None and hit[0] is ds and (hit[1] is None or hit[2] == fmap.generation):
            return hit[1]
        view, final = self._locate(ds)
        if view is not None or final:
            self._views[path] = (ds, view, self._fmap.generation if self._fmap else 0)
        return view

    def _locate(self, ds: Any) -> tuple[np.ndarray | None, bool]:
        """``(view, final)``: the view, or None with ``final`` False when the dataset may become
        mappable later (not allocated yet, or beyond the file's current end)."""
        import h5py

        dsid = ds.id
        dt = dsid.dtype
        shape = dsid.shape
        if not shape or 0 in shape or not mappable_dtype(dt):
            return None, True
        dcpl = dsid.get_create_plist()
        if (
            dcpl.get_layout() != h5py.h5d.CONTIGUOUS
            or dcpl.get_nfilters()
            or dcpl.get_external_count()
        ):
            return None, True
        offset = dsid.get_offset()
        if offset is None:
            return None, not self._flush
        nbytes = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
        if dsid.get_storage_size() < nbytes:
            return None, not self._flush
        if self._fmap is None:
            try:  # the file HDF5 has open: its name, and its identity to check the name against
                st = os.fstat(self._file.id.get_vfd_handle())
                name = os.fsdecode(self._file.filename)
            except Exception:  # noqa: BLE001 - no descriptor or name to map
                return None, True
            self._fmap = FileMap(name, (st.st_dev, st.st_ino))
        gen = self._fmap.generation
        view = self._fmap.array(offset, dt, shape)
        if self._fmap.generation != gen:  # the file grew: views of the previous map are dropped
            self._views.clear()
            self._fmap.drop_old()
        return view, view is not None or not self._flush

    def close(self) -> None:
        self._views.clear()
        if self._fmap is not None:
            self._fmap.close()
            self._fmap = None


# ----------------------------------------------------------------------------------------------
# zarr: one map per chunk file


class _ZarrLayout:
    """What it takes to find and decode the chunks of one uncompressed zarr v3 array."""

    __slots__ = ("array", "directory", "shape", "chunks", "dtype", "stored", "fill", "encode")

    def __init__(
        self,
        array: Any,
        directory: str,
        shape: tuple[int, ...],
        chunks: tuple[int, ...],
        dtype: np.dtype,
        stored: np.dtype,
        fill: np.ndarray,
        encode: Callable[[tuple[int, ...]], str],
    ) -> None:
        self.array = array
        self.directory = directory
        self.shape = shape
        self.chunks = chunks
        #: the dtype zarr returns, and the dtype of the bytes in the chunk files
        self.dtype = dtype
        self.stored = stored
        self.fill = fill
        self.encode = encode

    def filename(self, coords: tuple[int, ...]) -> str:
        return os.path.join(self.directory, *self.encode(coords).split("/"))


def _zarr_layout(arr: Any, root: str) -> _ZarrLayout | None:
    """The layout of ``arr`` (a ``zarr.Array`` in the local store at ``root``), or None when it
    cannot be read from maps (compressed, sharded, transposed, v2, not a plain numeric type)."""
    try:
        from zarr.codecs import BytesCodec
        from zarr.core.chunk_grids import RegularChunkGrid

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


def _dim_plan(item: Any, size: int, c: int) -> list[tuple[int, Any, slice | None]]:
    """How one selection entry over a dim of ``size`` cut in chunks of ``c`` splits by chunk:
    ``(chunk index, the entry in chunk coordinates, the output range or None for an int)``."""
    if isinstance(item, np.ndarray):
        if item.min() < 0 or item.max() >= size:
            raise IndexError(f"index out of range for a dimension of size {size}")
        ks = item // c
        cuts = np.flatnonzero(ks[1:] != ks[:-1]) + 1
        bounds = [0, *cuts.tolist(), len(item)]
        out = []
        for a, b in itertools.pairwise(bounds):
            k = int(ks[a])
            out.append((k, item[a:b] - k * c, slice(a, b)))
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
    if i < 0:
        i += size
    if not 0 <= i < size:
        raise IndexError(f"index {int(item)} is out of range for a dimension of size {size}")
    return [(i // c, i % c, None)]


class ZarrMaps:
    """Mapped chunk files of the uncompressed arrays of one local zarr store."""

    def __init__(self, root: str, writable: bool, max_maps: int = ZARR_MAX_MAPS) -> None:
        self._root = root
        self._check = writable
        self._max = max(1, max_maps)
        #: path -> layout (or None: not mappable)
        self._layouts: dict[Any, _ZarrLayout | None] = {}
        #: filename -> (map or None, view or None (missing), file signature)
        self._chunks: collections.OrderedDict[str, tuple[Any, Any, Any]] = (
            collections.OrderedDict()
        )
        self._pending: list[mmap.mmap] = []

    @classmethod
    def create(cls, store: Any, writable: bool, option: bool | None) -> ZarrMaps | None:
        """The maps of ``store`` when it is a local directory store and the fast path is on."""
        if not fast_path_enabled(option):
            return None
        try:
            from zarr.storage import LocalStore
        except ImportError:  # pragma: no cover
            return None
        if type(store) is not LocalStore:
            return None
        return cls(os.fspath(store.root), writable)

    def layout(self, path: Any, arr: Any) -> _ZarrLayout | None:
        hit = self._layouts.get(path, False)
        if hit is not False and (hit is None or hit.array is arr):
            return hit
        lay = _zarr_layout(arr, self._root)
        if hit is not False and hit is not None:
            self._forget_dir(hit.directory)
        self._layouts[path] = lay
        return lay

    def read(self, path: Any, arr: Any, selection: Sequence[Any]) -> np.ndarray | None:
        """``arr[selection]`` (orthogonal, like the backend's read) from maps, or None: use zarr.

        The index array may be unsorted and hold repeats (the result follows its order)."""
        lay = self.layout(path, arr)
        if lay is None:
            return None
        shape = lay.shape
        sel = tuple(selection) + tuple(slice(0, s, 1) for s in shape[len(selection) :])
        out_shape = _out_shape(shape, sel)
        if 0 in out_shape:
            return np.empty(out_shape, lay.dtype)
        for pos, item in enumerate(sel):
            if (
                isinstance(item, np.ndarray)
                and shape[pos] > lay.chunks[pos]
                and len(item) > 1
                and not bool(np.all(item[1:] > item[:-1]))
            ):  # several chunks: read the sorted unique rows, then put them in the asked order
                u, inv = np.unique(item, return_inverse=True)
                got = self.read(path, arr, sel[:pos] + (u,) + sel[pos + 1 :])
                if got is None:
                    return None
                axis = sum(1 for s in sel[:pos] if isinstance(s, (slice, np.ndarray)))
                return np.take(got, inv.reshape(-1), axis=axis)
        plans = [_dim_plan(item, s, c) for item, s, c in zip(sel, shape, lay.chunks, strict=True)]
        if all(len(p) == 1 for p in plans):  # one chunk: no output buffer to fill
            coords = tuple(p[0][0] for p in plans)
            chunk = self._chunk(lay, coords)
            if chunk is False:
                return None
            local = tuple(p[0][1] for p in plans)
            if chunk is None:
                return np.full(out_shape, lay.fill, dtype=lay.dtype)
            return read_selection(chunk, local).astype(lay.dtype, copy=False)
        out = np.empty(out_shape, lay.dtype)
        for combo in itertools.product(*plans):
            chunk = self._chunk(lay, tuple(p[0] for p in combo))
            if chunk is False:
                return None
            dst = tuple(p[2] for p in combo if p[2] is not None)
            if chunk is None:
                out[dst] = lay.fill
            else:
                part = _view_of(chunk, tuple(p[1] for p in combo))
                out[dst] = part
                if isinstance(part, np.ndarray):
                    _release(part)
            chunk = None
        return out

    def _chunk(self, lay: _ZarrLayout, coords: tuple[int, ...]) -> Any:
        """The mapped chunk (an array of the chunk shape), None for a missing chunk (fill
        value), False when the file is not a raw chunk (use zarr)."""
        name = lay.filename(coords)
        hit = self._chunks.get(name)
        if hit is not None and not self._check:
            self._chunks.move_to_end(name)
            return hit[1]
        try:
            st = os.stat(name)
            sig: Any = (st.st_ino, st.st_dev, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            sig = None
        except OSError:
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
            with open(name, "rb") as f:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            return False
        view = np.frombuffer(mm, dtype=lay.stored, count=count).reshape(lay.chunks)
        self._remember(name, (mm, view, sig))
        return view

    def _remember(self, name: str, entry: tuple[Any, Any, Any]) -> None:
        self._chunks[name] = entry
        while len(self._chunks) > self._max:
            old = next(iter(self._chunks))
            self._drop(old)

    def _drop(self, name: str) -> None:
        mm = self._chunks.pop(name)[0]
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
        self._layouts.clear()
        maps = [e[0] for e in self._chunks.values() if e[0] is not None] + self._pending
        self._chunks.clear()
        self._pending = []
        _close_maps(maps)


def _out_shape(shape: Sequence[int], sel: Sequence[Any]) -> tuple[int, ...]:
    out = []
    for item, s in zip(sel, shape, strict=True):
        if isinstance(item, np.ndarray):
            out.append(int(item.shape[0]))
        elif isinstance(item, slice):
            out.append(len(range(*item.indices(s))))
    return tuple(out)
