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

import os
import shutil
import stat
import struct
import tempfile
import time
import zipfile
from collections.abc import Iterator

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


def extract_to_temp(archive: str) -> str:
    """Extract ``archive`` into a new temporary directory (in bounded blocks) and return it.
    Entry names that would leave the directory are refused."""
    root = tempfile.mkdtemp(prefix="ptd-tdz-")
    try:
        with zipfile.ZipFile(archive) as zf:
            for info in zf.infolist():
                if info.is_dir():
                    continue
                # a plain relative name, not a link, created new (ptd.storage.paths)
                is_link = stat.S_ISLNK(info.external_attr >> 16)
                dst = member_destination(root, info.filename, archive, is_link=is_link)
                with zf.open(info) as src, open(dst, "xb") as out:
                    shutil.copyfileobj(src, out, _COPY_BYTES)
    except zipfile.BadZipFile as err:
        remove(root)
        raise CorruptStoreError(f"{archive} is not a readable memmap archive: {err}") from None
    except BaseException:
        remove(root)
        raise
    return root
