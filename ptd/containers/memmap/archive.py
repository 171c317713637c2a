"""Memmap archives (``.tdz``): one zip file holding a memmap directory, as tensordict 0.15
writes with ``save("x.tdz")`` and reads with ``load_memmap("x.tdz")``.

The entries are the files of the directory, named by their relative POSIX paths, a level's
``meta.json`` before its other files and its files before its sub-directories. ``.memmap``
entries are stored uncompressed by default, their payload aligned to 64 bytes (a padding
block in the local header's extra field), so that a reader may map them in place; other
entries are always stored. ``unzip`` gives the directory back.

>>> import os, tempfile, torch
>>> from ptd import TensorDict
>>> with tempfile.TemporaryDirectory() as tmp:
...     path = os.path.join(tmp, "td.tdz")
...     _ = TensorDict({"a": torch.arange(3)}, batch_size=[3]).save(path)
...     print(is_archive(path), TensorDict.load_memmap(path)["a"])
True tensor([0, 1, 2])
"""

from __future__ import annotations

import bz2
import lzma
import os
import shutil
import stat
import struct
import tempfile
import time
import zipfile
import zlib
from collections.abc import Iterator
from typing import Any

from ptd.errors import CorruptStoreError, PrefixExistsError, PtdValueError
from ptd.format.names import MEMMAP_META, MEMMAP_SUFFIX
from ptd.storage.paths import member_destination
from ptd.storage.publish import remove

__all__ = [
    "ARCHIVE_SUFFIX",
    "check_archive_destination",
    "compression_of",
    "extract_to_temp",
    "is_archive",
    "pack_dir",
]

#: a prefix ending so is written as an archive unless ``archive=False``
ARCHIVE_SUFFIX = ".tdz"

_ALIGN = 64
#: id of the padding block in a local header's extra field (b"pd", ptd's padding)
_PAD_ID = 0x6470
_LOCAL_HEADER = 30
_ZIP64_EXTRA = 20
_COPY_BYTES = 8 << 20

_COMPRESSIONS = {
    None: zipfile.ZIP_STORED,
    "stored": zipfile.ZIP_STORED,
    "deflate": zipfile.ZIP_DEFLATED,
    "deflated": zipfile.ZIP_DEFLATED,
    "bzip2": zipfile.ZIP_BZIP2,
    "lzma": zipfile.ZIP_LZMA,
}


def compression_of(compression: str | int | None) -> int:
    """The :mod:`zipfile` constant for a compression name (or constant).

    >>> compression_of("deflate") == zipfile.ZIP_DEFLATED, compression_of(None)
    (True, 0)
    """
    if isinstance(compression, int) and not isinstance(compression, bool):
        if compression not in _COMPRESSIONS.values():
            raise PtdValueError(f"Unknown zip compression constant {compression!r}")
        return compression
    key = compression.lower() if isinstance(compression, str) else compression
    if key not in _COMPRESSIONS:
        names = ", ".join(repr(k) for k in _COMPRESSIONS if k is not None)
        raise PtdValueError(f"Unknown compression {compression!r}: expected one of {names}")
    return _COMPRESSIONS[key]


def is_archive(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a file holding a memmap archive (a zip with a top-level
    ``meta.json``)."""
    path = os.fspath(path)
    if not os.path.isfile(path) or not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as zf:
        return MEMMAP_META in zf.namelist()


def _files(root: str, rel: str = "") -> Iterator[str]:
    """The files below ``root`` (relative POSIX paths) in archive order."""
    here = os.path.join(root, rel)
    names = sorted(os.listdir(here))
    files = [n for n in names if os.path.isfile(os.path.join(here, n))]
    dirs = [n for n in names if os.path.isdir(os.path.join(here, n))]
    for name in sorted(files, key=lambda n: n != MEMMAP_META):
        yield f"{rel}/{name}" if rel else name
    for name in dirs:
        yield from _files(root, f"{rel}/{name}" if rel else name)


def _pad(offset: int, name: bytes, zip64: bool) -> bytes:
    start = offset + _LOCAL_HEADER + len(name) + 4 + (_ZIP64_EXTRA if zip64 else 0)
    n = -start % _ALIGN
    return struct.pack("<HH", _PAD_ID, n) + b"\0" * n


def pack_dir(directory: str, archive: str, compression: str | int | None = None) -> None:
    """Zip the memmap ``directory`` into ``archive`` (written to a temporary sibling, then
    renamed over it: a failure leaves ``archive`` as it was). Files are copied in bounded
    blocks."""
    method = compression_of(compression)
    target = os.path.realpath(archive)
    fd, tmp = tempfile.mkstemp(prefix=".ptd-tdz-", dir=os.path.dirname(target))
    os.close(fd)
    try:
        with zipfile.ZipFile(tmp, "w", allowZip64=True) as zf:
            for rel in _files(directory):
                path = os.path.join(directory, rel)
                info = zipfile.ZipInfo(rel, date_time=time.localtime()[:6])
                info.external_attr = 0o644 << 16
                info.file_size = os.path.getsize(path)
                is_leaf = rel.endswith(MEMMAP_SUFFIX)
                info.compress_type = method if is_leaf else zipfile.ZIP_STORED
                zip64 = info.file_size * 1.05 > zipfile.ZIP64_LIMIT
                if is_leaf and info.compress_type == zipfile.ZIP_STORED:
                    assert zf.fp is not None
                    info.extra = _pad(zf.fp.tell(), rel.encode("utf-8"), zip64)
                with open(path, "rb") as src, zf.open(info, "w", force_zip64=zip64) as dst:
                    shutil.copyfileobj(src, dst, _COPY_BYTES)
        os.replace(tmp, target)
    except BaseException:
        remove(tmp)
        raise


def check_archive_destination(archive: str, overwrite: bool) -> None:
    """Refuse an existing ``archive`` unless ``overwrite``; refuse a directory there."""
    if os.path.isdir(archive):
        raise PrefixExistsError(f"cannot write the memmap archive {archive}: it is a directory")
    if os.path.lexists(archive) and not overwrite:
        raise PrefixExistsError(
            f"The file {archive} already exists: pass existsok=True to replace it"
        )


#: a member larger than this may not decompress to more than _MAX_RATIO times its stored
#: bytes (deflate cannot exceed about 1032:1; bzip2 and lzma bombs reach millions to one)
_BOMB_BYTES = 64 << 20
_MAX_RATIO = 1100
#: members read by ptd itself (meta.json, pickles): never larger than this
_MAX_META_BYTES = 64 << 20
_METHODS = {
    zipfile.ZIP_STORED: None,
    zipfile.ZIP_DEFLATED: "deflate",
    zipfile.ZIP_BZIP2: "bz2",
    zipfile.ZIP_LZMA: "lzma",
}


def _check_members(archive: str, infos: list[zipfile.ZipInfo], free: int) -> None:
    """Refuse, before anything is extracted, an archive whose members lie about their sizes
    or would not fit: a stored member holds exactly its declared size, a compressed one
    larger than 64 MiB at most ``_MAX_RATIO`` times its stored bytes (deflate cannot do
    better; bzip2 and lzma bombs can), a member that is not a ``.memmap`` leaf at most
    64 MiB, and all of them together must fit in the temporary directory's free space."""
    total = 0
    for info in infos:
        if info.is_dir():
            continue
        what = f"{archive}: the member {info.filename!r}"
        if info.compress_type not in _METHODS:
            raise CorruptStoreError(
                f"{what} uses zip compression {info.compress_type}, not one ptd reads"
            )
        if info.compress_type == zipfile.ZIP_STORED and info.file_size != info.compress_size:
            raise CorruptStoreError(
                f"{what} is stored uncompressed but declares {info.file_size} bytes for "
                f"{info.compress_size} stored"
            )
        if info.file_size > _BOMB_BYTES and info.file_size > _MAX_RATIO * max(
            info.compress_size, 1
        ):
            raise CorruptStoreError(
                f"{what} declares {info.file_size} bytes from {info.compress_size} compressed "
                f"(more than {_MAX_RATIO}:1): a decompression bomb or a damaged archive (if "
                "you made it, unzip it and load the directory)"
            )
        if not info.filename.endswith(MEMMAP_SUFFIX) and info.file_size > _MAX_META_BYTES:
            raise CorruptStoreError(
                f"{what} declares {info.file_size} bytes, more than a metadata file holds"
            )
        total += info.file_size
    if total > free:
        raise CorruptStoreError(
            f"{archive} would extract {total} bytes, more than the {free} free in the "
            "temporary directory (set TMPDIR to a larger one)"
        )


def _copy_member(archive: str, zf: zipfile.ZipFile, info: zipfile.ZipInfo, out: Any) -> None:
    """Copy one member into ``out``, decompressing in bounded blocks and stopping at its
    declared size: more bytes, fewer, or a CRC that differs is an error naming it."""
    what = f"{archive}: the member {info.filename!r}"
    assert zf.fp is not None
    zf.fp.seek(info.header_offset)
    head = zf.fp.read(_LOCAL_HEADER)
    if len(head) != _LOCAL_HEADER or head[:4] != b"PK\x03\x04":
        raise CorruptStoreError(f"{what} has no local header where the directory says")
    name_len, extra_len = struct.unpack("<HH", head[26:30])
    zf.fp.seek(info.header_offset + _LOCAL_HEADER + name_len + extra_len)
    method = _METHODS[info.compress_type]
    if method == "deflate":
        d: Any = zlib.decompressobj(-zlib.MAX_WBITS)
    elif method == "bz2":
        d = bz2.BZ2Decompressor()
    elif method == "lzma":
        # zip's LZMA: a 4-byte header, then the properties (zipfile's own reader of them)
        d = zipfile.LZMADecompressor()  # type: ignore[attr-defined]
    else:
        d = None
    left_in = info.compress_size
    left_out = info.file_size
    crc = 0
    pending = b""
    while left_in > 0 or pending:
        if not pending:
            pending = zf.fp.read(min(_COPY_BYTES, left_in))
            if not pending:
                raise CorruptStoreError(f"{what} is cut short")
            left_in -= len(pending)
        if d is None:
            data, pending = pending, b""
        elif method == "deflate":
            data = d.decompress(pending, left_out + 1)
            pending = d.unconsumed_tail
        elif method == "bz2":
            data = d.decompress(pending, left_out + 1)
            pending = b""
            while not d.eof and not d.needs_input and len(data) <= left_out:
                data += d.decompress(b"", left_out + 1 - len(data))
        else:
            # zip's LZMA reader takes no output bound: fed 1 KiB at a time, one call cannot
            # give much more than the member may still hold
            data = d.decompress(pending[:1024])
            pending = pending[1024:]
        if len(data) > left_out:
            raise CorruptStoreError(
                f"{what} decompresses to more than the {info.file_size} bytes it declares"
            )
        left_out -= len(data)
        crc = zlib.crc32(data, crc)
        out.write(data)
    if left_out:
        raise CorruptStoreError(
            f"{what} decompresses to {info.file_size - left_out} bytes, not the "
            f"{info.file_size} it declares"
        )
    if crc != info.CRC:
        raise CorruptStoreError(f"{what} fails its CRC check")


def extract_to_temp(archive: str) -> str:
    """Extract ``archive`` into a new temporary directory (in bounded blocks) and return it.
    Entry names that would leave the directory are refused, and so is an archive whose
    members lie about their sizes, would not fit on the temporary directory's disk or
    decompress far beyond what they store (see :func:`_check_members`): checked before
    anything is written, and each member's extraction stops at its declared size."""
    root = tempfile.mkdtemp(prefix="ptd-tdz-")
    try:
        with zipfile.ZipFile(archive) as zf:
            infos = zf.infolist()
            _check_members(archive, infos, shutil.disk_usage(root).free)
            for info in infos:
                if info.is_dir():
                    continue
                # a plain relative name, not a link, created new (ptd.storage.paths)
                is_link = stat.S_ISLNK(info.external_attr >> 16)
                dst = member_destination(root, info.filename, archive, is_link=is_link)
                with open(dst, "xb") as out:
                    _copy_member(archive, zf, info, out)
    except CorruptStoreError:
        remove(root)
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, lzma.LZMAError) as err:
        remove(root)
        raise CorruptStoreError(f"{archive} is not a readable memmap archive: {err}") from None
    except BaseException:
        remove(root)
        raise
    return root
