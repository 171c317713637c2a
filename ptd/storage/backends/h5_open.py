"""Opening HDF5 files: a local path in any mode, or a URL read-only through fsspec, with h5py's
failures (a missing or existing file, a lock, a file that is not HDF5) as one ptd error each.
"""

from __future__ import annotations

import os
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
from ptd.storage.backends.targets import EXISTS_HINT
from ptd.storage.location import StoreLocation

__all__ = ["open_local", "open_remote"]

#: block size of the cache of an HDF5 file read from a URL
_REMOTE_BLOCK = 4 << 20


def open_local(path: str, mode: str, locking: Any) -> h5py.File:
    """``h5py.File(path, mode, locking=locking)`` for a checked ``mode``."""
    if os.path.isdir(path):
        raise CorruptStoreError(f"{path} is a directory, not an HDF5 file")
    exists = os.path.exists(path)
    if mode in ("r", "r+") and not exists:
        raise StoreNotFoundError(f"HDF5 file {path} does not exist")
    if mode in ("w-", "x") and exists:
        raise StoreExistsError(f"HDF5 file {path} already exists (mode {mode!r}); {EXISTS_HINT}")
    try:
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
        file = h5py.File(fobj, "r")
    except Exception as err:  # noqa: BLE001 - not HDF5, or the connection failed
        fobj.close()
        if isinstance(err, OSError) and not isinstance(err, PermissionError):
            raise CorruptStoreError(f"{url} is not a readable HDF5 file: {err}") from None
        raise _url.remote_error(err, url) from None
    return file, fobj
