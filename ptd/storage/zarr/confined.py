"""zarr-python's ``LocalStore`` kept inside its directory.

ptd opens local zarr directories through :class:`ConfinedStore`: a ``LocalStore`` whose every
file access resolves inside the store (see :mod:`ptd.storage.paths`). A chunk file or
``zarr.json`` that is a symbolic link to a file outside is refused (reads and writes), as is
a directory of the store that is a link out of it; links whose targets stay inside are
followed. Metadata documents are checked against ptd's JSON size and nesting limits before
zarr parses them. Keys holding ``..``, ``.``, an empty component, a backslash or a NUL, or starting with
``/``, are refused as well: zarr joins keys onto the root as they are.

The checks cost one ``O_NOFOLLOW`` open per file and one remembered ``realpath`` per
directory; nothing is listed at open.
"""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import AsyncIterator, Iterable
from pathlib import Path
from typing import Any

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest
from zarr.storage import LocalStore

from ptd.errors import CorruptStoreError
from ptd.storage.limits import check_json
from ptd.storage.paths import StoreRoot, unsafe_part
from ptd.storage.zarr.private import default_buffer_prototype

#: zarr's buffer classes (in zarr.core, which only private.py imports): typed loosely here
Buffer = Any
BufferPrototype = Any

__all__ = ["METADATA_NAMES", "ConfinedStore", "store_root"]

#: the documents zarr parses as JSON: checked against the size and nesting limits
#: (``PTD_MAX_JSON_BYTES``/``PTD_MAX_JSON_DEPTH``, :func:`ptd.storage.limits.check_json`) before
#: zarr sees them, as Python's json module recurses once per nesting level
METADATA_NAMES = frozenset({"zarr.json", ".zarray", ".zattrs", ".zgroup", ".zmetadata"})


def store_root(store: Any) -> StoreRoot | None:
    """The :class:`StoreRoot` of a local directory store (a ConfinedStore's own, or a new one
    for a plain ``LocalStore`` a user handed over), None for any other store."""
    if isinstance(store, ConfinedStore):
        return store.paths
    if type(store) is LocalStore:
        return StoreRoot(store.root)
    return None


class ConfinedStore(LocalStore):
    """A ``LocalStore`` that opens, lists and writes nothing outside its root (see the module
    doc). ``location`` names the store in errors."""

    def __init__(
        self, root: Path | str, *, read_only: bool = False, location: str | None = None
    ) -> None:
        super().__init__(root, read_only=read_only)
        self.paths = StoreRoot(self.root, location)

    def with_read_only(self, read_only: bool = False) -> ConfinedStore:
        return type(self)(self.root, read_only=read_only, location=self.paths.location)

    def __reduce__(self) -> Any:
        return _rebuild, (str(self.root), self.read_only, self.paths.location)

    # --- keys and paths ----------------------------------------------------------------------
    def _path(self, key: str, *, is_prefix: bool = False) -> str:
        """The file (or directory) of ``key``, checked to be a relative name below the root."""
        if key.startswith("/") or (key and not is_prefix and key.endswith("/")):
            raise CorruptStoreError(
                f"{self.paths.location}: the key {key!r} is not a name inside the store"
            )
        parts = [p for p in key.split("/")] if key else []
        if is_prefix and parts and parts[-1] == "":
            parts.pop()
        for part in parts:
            why = unsafe_part(part)
            if why is not None:
                raise CorruptStoreError(
                    f"{self.paths.location}: the key {key!r} is not a name inside the store: {why}"
                )
        return os.path.join(self.paths.root, *parts)

    def _dir(self, key: str) -> str:
        """The directory of a prefix, checked to resolve inside the root."""
        path = self._path(key, is_prefix=True)
        self.paths.check(path)
        return path

    # --- reads -------------------------------------------------------------------------------
    def _read(self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None) -> Any:
        path = self._path(key)
        try:
            fd, size = self.paths.open_sized(path)
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        try:
            if byte_range is None:
                start, stop = 0, size
            elif isinstance(byte_range, RangeByteRequest):
                start, stop = byte_range.start, min(byte_range.end, size)
            elif isinstance(byte_range, OffsetByteRequest):
                start, stop = byte_range.offset, size
            elif isinstance(byte_range, SuffixByteRequest):
                start, stop = max(0, size - byte_range.suffix), size
            else:
                raise TypeError(f"Unexpected byte_range, got {byte_range}.")
            parts: list[bytes] = []
            at = start
            while at < stop:
                part = os.pread(fd, stop - at, at)
                if not part:
                    break
                parts.append(part)
                at += len(part)
            data = b"".join(parts)
            if byte_range is None and key.rsplit("/", 1)[-1] in METADATA_NAMES:
                check_json(data, path)
            return prototype.buffer.from_bytes(data)
        finally:
            os.close(fd)

    def get_sync(
        self,
        key: str,
        *,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        self._ensure_open_sync()
        return self._read(key, prototype or default_buffer_prototype(), byte_range)

    async def get(
        self,
        key: str,
        prototype: BufferPrototype | None = None,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        if not self._is_open:
            await self._open()
        proto = prototype or default_buffer_prototype()
        return await asyncio.to_thread(self._read, key, proto, byte_range)

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        return [await self.get(key, prototype, byte_range) for key, byte_range in key_ranges]

    async def exists(self, key: str) -> bool:
        path = self._path(key)
        self.paths.check(path)
        return await asyncio.to_thread(os.path.isfile, path)

    async def getsize(self, key: str) -> int:
        path = self._path(key)
        self.paths.check(path)
        return os.path.getsize(path)

    # --- listings: a listed directory must lie inside ----------------------------------------
    async def list(self) -> AsyncIterator[str]:
        async for key in self.list_prefix(""):
            yield key

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        base = self._dir(prefix)
        root = self.paths.root
        for directory, dirs, files in os.walk(base):  # (does not enter links to directories)
            for name in list(dirs):
                sub = os.path.join(directory, name)
                if os.path.islink(sub):
                    self.paths.check(sub)  # a link out refuses the listing
            for name in sorted(files):
                yield os.path.relpath(os.path.join(directory, name), root).replace(os.sep, "/")

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        base = self._dir(prefix)
        try:
            names = sorted(os.listdir(base))
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in names:
            yield name

    # --- writes: into the store only ---------------------------------------------------------
    def _writable_path(self, key: str) -> Path:
        path = self._path(key)
        self.paths.check(path)
        return Path(path)

    def set_sync(self, key: str, value: Buffer) -> None:
        self._writable_path(key)
        super().set_sync(key, value)

    async def _set(self, key: str, value: Buffer, exclusive: bool = False) -> None:
        self._writable_path(key)
        await super()._set(key, value, exclusive=exclusive)

    def delete_sync(self, key: str) -> None:
        self._writable_path(key)
        super().delete_sync(key)

    async def delete(self, key: str) -> None:
        self._writable_path(key)
        await super().delete(key)

    async def delete_dir(self, prefix: str) -> None:
        self._check_writable()
        path = self._dir(prefix)
        if os.path.islink(path):
            os.unlink(path)  # the link, never what it points at
            return
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.isfile(path):
            raise ValueError(f"delete_dir was passed a {prefix=!r} that is a file")
        self.paths.forget()

    async def move(self, dest_root: Path | str) -> None:
        await super().move(dest_root)
        self.paths = StoreRoot(self.root, self.paths.location)


def _rebuild(root: str, read_only: bool, location: str) -> ConfinedStore:
    return ConfinedStore(root, read_only=read_only, location=location)
