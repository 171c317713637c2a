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
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

import h5py

from ptd.errors import (
    CorruptStoreError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreLockedError,
    StoreNotFoundError,
    UnsupportedOperationError,
    WriterStateWarning,
)
from ptd.storage import remote as _url
from ptd.storage.location import StoreLocation
from ptd.storage.paths import StoreRoot
from ptd.storage.targets import EXISTS_HINT

__all__ = [
    "ClearedFlagsFile",
    "GcPausedFile",
    "WriterState",
    "gc_paused",
    "open_local",
    "open_remote",
    "superblock_checksum",
    "writer_state",
]

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


#: the HDF5 format signature, found at offset 0, 512, 1024, 2048... (after a user block)
_SIGNATURE = b"\x89HDF\r\n\x1a\n"
#: superblock (version 2 and later) file-consistency flags: opened for writing, for SWMR writing
_OPEN_FOR_WRITE = 0x01
_OPEN_FOR_SWMR_WRITE = 0x04


class WriterState(NamedTuple):
    """Where an HDF5 file's superblock is and what its consistency flags say."""

    #: the superblock's offset in the file (the user block's size)
    offset: int
    #: the superblock's version (the flags are kept from version 2 on)
    version: int
    #: the file-consistency flags (0: closed cleanly, or a version 0/1 superblock)
    flags: int
    #: the superblock's bytes up to its checksum (versions 2 and 3), else b""
    head: bytes

    @property
    def swmr_writing(self) -> bool:
        return bool(self.flags & _OPEN_FOR_SWMR_WRITE)

    @property
    def writing(self) -> bool:
        return bool(self.flags & _OPEN_FOR_WRITE)

    def describe(self) -> str:
        what = "open for SWMR writing" if self.swmr_writing else "open for writing"
        return (
            f"its superblock says it is {what} (consistency flags 0x{self.flags:02x}): another "
            "process is writing it, or its writer ended without closing it"
        )


def writer_state(path: str) -> WriterState | None:
    """The superblock of the HDF5 file at ``path`` and its consistency flags, or None when the
    file holds no HDF5 signature where HDF5 looks for one (HDF5 then says why it cannot open
    it)."""
    try:
        with open(path, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            offset = 0
            while offset + 12 <= size:
                fh.seek(offset)
                head = fh.read(12)
                if head[:8] == _SIGNATURE:
                    version = head[8]
                    if version < 2:
                        return WriterState(offset, version, 0, b"")
                    n_offsets = head[9]
                    fh.seek(offset)
                    whole = fh.read(12 + 4 * n_offsets)
                    return WriterState(offset, version, head[11], whole)
                offset = 512 if offset == 0 else offset * 2
    except OSError:
        return None
    return None


def _rot(x: int, k: int) -> int:
    return ((x << k) | (x >> (32 - k))) & 0xFFFFFFFF


def superblock_checksum(data: bytes) -> int:
    """The checksum HDF5 stores after a version 2/3 superblock: Bob Jenkins' lookup3
    ``hashlittle`` of ``data`` with an initial value of 0 (``H5_checksum_lookup3``)."""
    m = 0xFFFFFFFF
    a = b = c = (0xDEADBEEF + len(data)) & m

    def mix(a: int, b: int, c: int) -> tuple[int, int, int]:
        a = (a - c) & m
        a ^= _rot(c, 4)
        c = (c + b) & m
        b = (b - a) & m
        b ^= _rot(a, 6)
        a = (a + c) & m
        c = (c - b) & m
        c ^= _rot(b, 8)
        b = (b + a) & m
        a = (a - c) & m
        a ^= _rot(c, 16)
        c = (c + b) & m
        b = (b - a) & m
        b ^= _rot(a, 19)
        a = (a + c) & m
        c = (c - b) & m
        c ^= _rot(b, 4)
        b = (b + a) & m
        return a, b, c

    rest = data
    while len(rest) > 12:
        a = (a + int.from_bytes(rest[0:4], "little")) & m
        b = (b + int.from_bytes(rest[4:8], "little")) & m
        c = (c + int.from_bytes(rest[8:12], "little")) & m
        a, b, c = mix(a, b, c)
        rest = rest[12:]
    if not rest:
        return c
    tail = rest + bytes(12 - len(rest))
    a = (a + int.from_bytes(tail[0:4], "little")) & m
    b = (b + int.from_bytes(tail[4:8], "little")) & m
    c = (c + int.from_bytes(tail[8:12], "little")) & m
    c ^= b
    c = (c - _rot(b, 14)) & m
    a ^= c
    a = (a - _rot(c, 11)) & m
    b ^= a
    b = (b - _rot(a, 25)) & m
    c ^= b
    c = (c - _rot(b, 16)) & m
    a ^= c
    a = (a - _rot(c, 4)) & m
    b ^= a
    b = (b - _rot(a, 14)) & m
    c ^= b
    c = (c - _rot(b, 24)) & m
    return c


class ClearedFlagsFile:
    """A read-only file object of an HDF5 file in which the superblock's consistency flags
    read as cleared (and its checksum as the one of the cleared bytes): what ``h5clear -s``
    would write, without writing anything. HDF5 refuses to open a file whose flags say a
    writer has it open; this lets a file whose writer was killed be read as it is."""

    def __init__(self, path: str, state: WriterState) -> None:
        self.raw = open(path, "rb")  # noqa: SIM115 - closed with the HDF5 file
        head = bytearray(state.head)
        head[11] = 0
        patched = bytes(head) + superblock_checksum(bytes(head)).to_bytes(4, "little")
        self._start = state.offset
        self._patch = patched

    def _overlay(self, pos: int, data: bytearray | memoryview, n: int) -> None:
        lo = max(pos, self._start)
        hi = min(pos + n, self._start + len(self._patch))
        if lo < hi:
            data[lo - pos : hi - pos] = self._patch[lo - self._start : hi - self._start]

    def readinto(self, buf: Any) -> int:
        pos = self.raw.tell()
        n = int(self.raw.readinto(buf))
        self._overlay(pos, memoryview(buf).cast("B"), n)
        return n

    def read(self, size: int = -1) -> bytes:
        pos = self.raw.tell()
        data = bytearray(self.raw.read(size))
        self._overlay(pos, data, len(data))
        return bytes(data)

    def seek(self, pos: int, whence: int = 0) -> int:
        return int(self.raw.seek(pos, whence))

    def tell(self) -> int:
        return int(self.raw.tell())

    def close(self) -> None:
        self.raw.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


def open_local(
    path: str, mode: str, locking: Any, userblock_size: int = 0, swmr: bool = False
) -> tuple[h5py.File, Any]:
    """``(file, file object or None)``: ``h5py.File(path, mode, locking=locking)`` for a
    checked ``mode`` (a new file reserving ``userblock_size`` bytes for a user block).

    In mode ``"r"`` a file whose superblock says a writer has it open is read as it is, with a
    :class:`~ptd.errors.WriterStateWarning`: with ``swmr=True`` when the writer is (or was) an
    SWMR writer, else through a :class:`ClearedFlagsFile` (the file object returned, to be
    closed after the file). ``swmr=True`` opens any file for SWMR reading (mode ``"r"`` only).
    """
    if os.path.isdir(path):
        raise CorruptStoreError(f"{path} is a directory, not an HDF5 file")
    exists = os.path.exists(path)
    if swmr and mode != "r":
        raise PtdValueError(
            f"cannot open {path} in mode {mode!r} with swmr=True: SWMR reading is read-only; "
            "open it in mode 'r'"
        )
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
    state = writer_state(path) if exists and mode in ("r", "r+", "a") else None
    if state is not None and state.flags and mode != "r":
        raise StoreLockedError(
            f"cannot open {path} in mode {mode!r}: {state.describe()}. Open it in mode 'r' "
            "to read what the writer flushed; to write to it, wait until the writer closes it "
            "or, if the writer was killed, write to a copy (ptd convert)",
            path=path,
        )
    try:
        if state is not None and state.flags and not (swmr or state.swmr_writing):
            fobj = ClearedFlagsFile(path, state)
            try:
                file = h5py.File(fobj, "r")
            except BaseException:
                fobj.close()
                raise
            warnings.warn(
                f"{path}: {state.describe()}; reading it as it is on disk, without "
                "changing it (data the writer had not flushed is missing)",
                WriterStateWarning,
                stacklevel=4,
            )
            return file, fobj
        if state is not None and state.swmr_writing and not swmr:
            warnings.warn(
                f"{path}: {state.describe()}; reading it with swmr=True (what the writer had "
                "flushed when the file was opened)",
                WriterStateWarning,
                stacklevel=4,
            )
            swmr = True
        if swmr:
            return h5py.File(path, "r", locking=locking, swmr=True), None
        if userblock_size and mode in ("w", "w-", "x"):
            return h5py.File(path, mode, locking=locking, userblock_size=userblock_size), None
        return h5py.File(path, mode, locking=locking), None
    except FileNotFoundError:
        raise StoreNotFoundError(f"HDF5 file {path} does not exist") from None
    except FileExistsError:
        raise StoreExistsError(f"HDF5 file {path} already exists (mode {mode!r})") from None
    except PermissionError as err:
        raise ReadOnlyError(f"cannot open {path} in mode {mode!r}: {err}") from None
    except OSError as err:
        msg = str(err)
        if "unable to lock" in msg or "locking" in msg:
            raise StoreLockedError(
                f"cannot open {path} in mode {mode!r}: another process holds a lock on it "
                f"({msg}). Close the other handle; to read it anyway (a file system whose "
                "locks are stale or unsupported, or a writer you trust to have flushed), set "
                "the environment variable HDF5_USE_FILE_LOCKING=FALSE (library: locking=False)",
                path=path,
            ) from None
        if "already open" in msg:  # this process holds it (HDF5 shares one handle per file)
            raise StoreLockedError(
                f"cannot open {path} in mode {mode!r}: this process already has it open "
                f"({msg}). Close the other PersistentTensorDict or h5py.File on it first, or "
                "open this one in the same mode",
                path=path,
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
