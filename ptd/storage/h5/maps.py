"""The fast path for HDF5: contiguous datasets read from one memory map of the whole file.

A dataset that is contiguous, unfiltered, allocated and not external is one byte range of its
file (``Dataset.id.get_offset()``): :class:`H5Maps` serves it as a numpy view of a read-only map
(see :mod:`ptd.storage.read.mapped` for the switch, the copy-out and the consistency
rules). While the file is open for writing, each mapped read first flushes it (``H5Fflush``).
A large read of one contiguous byte range (a slice of rows) is a positional read
(``os.preadv``) of the file into the new array instead of a copy out of the map: the map's
pages are never faulted in, which is what a first pass over a freshly opened store costs.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ptd.storage.indexer import read_whole
from ptd.storage.read.alloc import tune_malloc
from ptd.storage.read.mapped import (
    close_maps,
    fast_path_enabled,
    mappable_dtype,
    pread_selection,
    read_selection,
)

__all__ = ["FileMap", "H5Maps"]


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
        #: our own descriptor of the file (by name, identity checked) for positional reads,
        #: and the address the current map starts at (a view's file offset is its address
        #: minus this)
        self.fd: int | None = None
        self.base = 0

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
        keep = False
        try:
            st = os.fstat(fd)
            if (st.st_dev, st.st_ino) != self._ident or st.st_size < need or st.st_size == 0:
                return None  # replaced, or the data is not (yet) in the file
            mm = mmap.mmap(fd, st.st_size, access=mmap.ACCESS_READ)
            if self.fd is None:
                self.fd, keep = fd, True
        except (OSError, ValueError):
            return None
        finally:
            if not keep:
                os.close(fd)  # the map keeps what it needs
        if self._mm is not None:
            self._old.append(self._mm)  # unmapped by drop_old once its views are dropped
        self._mm = mm
        self.base = np.frombuffer(mm, dtype=np.uint8, count=1).ctypes.data
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
        if self.fd is not None:
            fd, self.fd = self.fd, None
            with contextlib.suppress(OSError):  # pragma: no cover - already closed
                os.close(fd)
        close_maps(maps)


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
        tune_malloc()  # fresh read buffers recycled, not faulted in
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
        if (
            hit is not None
            and hit[0] is ds
            and (hit[1] is None or (fmap is not None and hit[2] == fmap.generation))
        ):
            return hit[1]
        view, final = self._locate(ds)
        if view is not None or final:
            self._views[path] = (ds, view, self._fmap.generation if self._fmap else 0)
        return view

    def read(
        self, path: Any, ds: Any, selection: Sequence[Any], out: np.ndarray | None = None
    ) -> np.ndarray | None:
        """``ds[selection]`` read from the map (any selection
        :func:`ptd.storage.indexer.project` takes), into ``out`` when given, or None: use h5py.
        The map is one chunk, the whole array: index arrays are taken in the asked order in
        one copy."""
        src = self.source(path, ds)
        if src is None:
            return None
        if out is None and _plain(selection):
            fmap = self._fmap
            if fmap is not None and fmap.fd is not None:
                got = pread_selection(fmap.fd, fmap.base, src, selection)
                if got is not None:
                    return got
            if not any(isinstance(x, np.ndarray) for x in selection):
                return read_selection(src, selection)
        return read_whole(src, selection, out)

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


def _plain(selection: Sequence[Any]) -> bool:
    """Ints and slices with a positive step only (what the map's own copy serves)."""
    return all(
        isinstance(x, (int, np.integer)) or (isinstance(x, slice) and (x.step or 1) > 0)
        for x in selection
    )
