"""Opening HDF5 files: a local path in any mode, or a URL read-only through fsspec, with h5py's
failures (a missing or existing file, a lock, a file that is not HDF5) as one ptd error each.

A file at a URL is read by HDF5 through a Python file object: HDF5 calls its ``readinto`` while
h5py holds its global lock, and fsspec serves the call on its own IO thread. Should the cyclic
garbage collector run on that thread (or on any thread the request needs) and free an unreachable
h5py object, that object's finalizer waits for h5py's lock, which the reading thread holds while
it waits for the IO thread: a deadlock, seen as a read that never returns. :class:`GcPausedFile`
therefore pauses automatic garbage collection for the duration of each read (collection resumes
right after; nothing is lost, it is only deferred).
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import h5py

from ptd.errors import (
    CorruptStoreError,
    ReadOnlyError,
    StoreExistsError,
    StoreLockedError,
    StoreNotFoundError,
    UnsupportedOperationError,
)
from ptd.storage import remote as _url
from ptd.storage.location import StoreLocation
from ptd.storage.paths import StoreRoot
from ptd.storage.targets import EXISTS_HINT

__all__ = ["GcPausedFile", "gc_paused", "open_local", "open_remote"]

#: block size of the cache of an HDF5 file read from a URL
_REMOTE_BLOCK = 4 << 20


_gc_lock = threading.Lock()
_gc_pauses = 0
_gc_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    """No automatic garbage collection, in any thread, while the block runs (nested and
    concurrent pauses count; collection resumes when the last one ends, if it was on before)."""
    global _gc_pauses, _gc_was_enabled
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_was_enabled:
                gc.enable()


class GcPausedFile:
    """A read-only file object for h5py that reads ``raw`` with garbage collection paused
    (see the module doc); every other attribute is ``raw``'s."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def readinto(self, buf: Any) -> int:
        with gc_paused():
            return int(self.raw.readinto(buf))

    def read(self, size: int = -1) -> bytes:
        with gc_paused():
            return bytes(self.raw.read(size))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def open_local(path: str, mode: str, locking: Any, userblock_size: int = 0) -> h5py.File:
    """``h5py.File(path, mode, locking=locking)`` for a checked ``mode`` (a new file
    reserving ``userblock_size`` bytes for a user block)."""
    if os.path.isdir(path):
        raise CorruptStoreError(f"{path} is a directory, not an HDF5 file")
    exists = os.path.exists(path)
    if mode in ("r", "r+") and not exists:
        raise StoreNotFoundError(f"HDF5 file {path} does not exist")
    if mode in ("w-", "x") and exists:
        raise StoreExistsError(f"HDF5 file {path} already exists (mode {mode!r}); {EXISTS_HINT}")
    if mode in ("w", "w-", "x") and os.path.islink(path):
        # creating (truncating) through a link would write wherever it points
        real = os.path.realpath(path)
        if not StoreRoot(os.path.dirname(os.path.abspath(path))).contains(real):
            raise UnsupportedOperationError(
                f"cannot create the HDF5 file {path} (mode {mode!r}): it is a symbolic link to "
                f"{real}, outside its directory; ptd does not create files through such a link "
                "(name the target itself, or remove the link)"
            )
    try:
        if userblock_size and mode in ("w", "w-", "x"):
            return h5py.File(path, mode, locking=locking, userblock_size=userblock_size)
        return h5py.File(path, mode, locking=locking)
    except FileNotFoundError:
        raise StoreNotFoundError(f"HDF5 file {path} does not exist") from None
    except FileExistsError:
        raise StoreExistsError(f"HDF5 file {path} already exists (mode {mode!r})") from None
    except PermissionError as err:
        raise ReadOnlyError(f"cannot open {path} in mode {mode!r}: {err}") from None
    except OSError as err:
        msg = str(err)
        if "unable to lock" in msg or "already open" in msg or "locking" in msg:
            raise StoreLockedError(
                f"cannot open {path} in mode {mode!r}: it is locked or already open "
                f"({msg}). Close the other handle, or pass locking=False (or set "
                "HDF5_USE_FILE_LOCKING=FALSE) if the file system does not support locks."
            ) from None
        raise CorruptStoreError(f"{path} is not a readable HDF5 file: {msg}") from None


def open_remote(loc: StoreLocation, mode: str) -> tuple[h5py.File, Any]:
    """``(file, fsspec file object)``: the read-only HDF5 file at the URL ``loc``
    (``s3://bucket/data.h5``), read through an fsspec file object with a block cache. The
    file object is closed after the file."""
    url = loc.path
    if mode != "r":
        raise UnsupportedOperationError(
            f"cannot open {url} in mode {mode!r}: HDF5 files at URLs are read-only; write a "
            "local file and upload it, or write zarr to the URL (s3://.../data.zarr)"
        )
    fs, fpath, kind = _url.probe(url, loc.options)
    if kind is None:
        _url.check_bucket(fs, fpath, url)
        raise StoreNotFoundError(f"HDF5 file {url} does not exist")
    if kind != "file":
        raise CorruptStoreError(f"{url} is a directory, not an HDF5 file")
    try:
        try:
            fobj = fs.open(fpath, "rb", block_size=_REMOTE_BLOCK, cache_type="blockcache")
        except TypeError:  # a filesystem without block caches (memory://)
            fobj = fs.open(fpath, "rb")
    except Exception as err:  # noqa: BLE001 - translated to one line
        raise _url.remote_error(err, url) from None
    try:
        with gc_paused():
            file = h5py.File(GcPausedFile(fobj), "r")
    except Exception as err:  # noqa: BLE001 - not HDF5, or the connection failed
        fobj.close()
        if isinstance(err, OSError) and not isinstance(err, PermissionError):
            raise CorruptStoreError(f"{url} is not a readable HDF5 file: {err}") from None
        raise _url.remote_error(err, url) from None
    return file, fobj
