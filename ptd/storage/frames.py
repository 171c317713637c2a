"""What a compressed chunk says about itself, checked before any decoder trusts it, and decodes
bounded by the size the chunk must have.

A chunk's decoded size is known before it is decoded: the chunk's shape times its item size
(the *expected* size). A compressed frame repeats a size in its header -- blosc's 16-byte
header (``nbytes`` decoded, ``cbytes`` stored), zstd's frame content size, the 4-byte size in
front of a numcodecs LZ4 block -- and c-blosc or zstd allocate and copy what the header says.
A hostile header (a 16-byte blosc "memcpyed" header claiming 64 kB, a 40 kB zstd frame of
1 GiB) would make them read past the chunk (leaking the process's memory into the values) or
allocate without bound. Here:

- :func:`check_blosc`, :func:`zstd_content_size`, :func:`check_lz4` read the headers (a few
  bytes, O(1) per chunk) and raise :class:`FrameError` when they disagree with the chunk's
  length or its expected size;
- :func:`bounded_decode` decodes one frame of a known codec into at most ``limit`` bytes
  (exactly ``expected`` when given): zstd and blosc into a buffer of that size, deflate, bz2
  and lzma with the decompressors' ``max_length``, so a bomb stops at the bound.

The callers (the HDF5 and zarr chunk readers, zarr-python's codec pipeline, the ``.tdz``
extraction) turn a :class:`FrameError` into a :class:`~ptd.errors.CorruptStoreError` naming
the file, the key and the chunk. This module imports neither h5py nor zarr.

>>> import numcodecs, numpy as np
>>> good = numcodecs.Blosc().encode(np.arange(1000, dtype="u4"))
>>> check_blosc(good, 4000)
>>> check_blosc(bytes([2, 1, 3, 4]) + (65536).to_bytes(4, "little") * 2 + (65552).to_bytes(4, "little"), 65536)
Traceback (most recent call last):
...
ptd.storage.frames.FrameError: blosc header says 65552 bytes are stored, the chunk holds 16
"""

from __future__ import annotations

import bz2
import lzma
import struct
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "FrameError",
    "bounded_decode",
    "check_blosc",
    "check_lz4",
    "decode_bound",
    "frame_decoder",
    "zstd_content_size",
]

_BLOSC_HEADER = 16
_BLOSC_MEMCPYED = 0x02
_ZSTD_MAGIC = 0xFD2FB528
#: a decompressor is fed at most this many stored bytes at a time (bounded steps)
_STEP = 1 << 20


class FrameError(ValueError):
    """A compressed chunk whose header or decoded size disagrees with what it must be."""


def decode_bound(nbytes: int) -> int:
    """The most bytes one compressed layer of a chunk of ``nbytes`` decoded bytes may hold
    when it is not the layer next to the values (a layer after another compressor): any
    compressor's worst-case growth is far below this."""
    return nbytes + (nbytes >> 6) + 4096


def _sizes(buf: Any) -> memoryview:
    mv = memoryview(buf)
    if mv.format == "B" and mv.ndim == 1:
        return mv
    return mv.cast("B") if mv.c_contiguous else memoryview(mv.tobytes())


def check_blosc(buf: Any, expected: int | None, limit: int | None = None) -> None:
    """Check a blosc1 buffer's 16-byte header against the buffer and the chunk: ``cbytes``
    equals the buffer's length, ``nbytes`` equals ``expected`` (or is at most ``limit`` when
    the decoded size is not known exactly), a "memcpyed" buffer holds ``nbytes`` after its
    header, the type and block sizes are sane, and the block offsets lie inside the buffer.
    Raises :class:`FrameError`."""
    mv = _sizes(buf)
    n = len(mv)
    if n < _BLOSC_HEADER:
        raise FrameError(f"blosc chunk of {n} bytes is shorter than its 16-byte header")
    _version, _vlz, flags, typesize, nbytes, blocksize, cbytes = struct.unpack_from(
        "<BBBBIII", mv, 0
    )
    if cbytes != n:
        raise FrameError(f"blosc header says {cbytes} bytes are stored, the chunk holds {n}")
    if expected is not None and nbytes != expected:
        raise FrameError(
            f"blosc header says {nbytes} bytes decoded, the chunk must hold {expected}"
        )
    if limit is not None and nbytes > limit:
        raise FrameError(f"blosc header says {nbytes} bytes decoded, more than {limit}")
    if typesize < 1 or blocksize < 1 or blocksize > max(nbytes, 1):
        raise FrameError(
            f"blosc header is damaged (type size {typesize}, block size {blocksize}, "
            f"{nbytes} bytes)"
        )
    if flags & _BLOSC_MEMCPYED:
        if cbytes != nbytes + _BLOSC_HEADER:
            raise FrameError(
                f"blosc header says {nbytes} bytes are stored uncompressed, the chunk holds "
                f"{n - _BLOSC_HEADER} after its header"
            )
        return
    if nbytes == 0:
        return
    nblocks = -(-nbytes // blocksize)
    end = _BLOSC_HEADER + 4 * nblocks
    if end > n:
        raise FrameError(f"blosc chunk of {n} bytes is too short for its {nblocks} block offsets")
    if nblocks <= 64:  # the usual case: a few blocks, cheaper without numpy
        starts = struct.unpack_from(f"<{nblocks}I", mv, _BLOSC_HEADER)
        lo, hi = min(starts), max(starts)
    else:
        offsets = np.frombuffer(mv, "<u4", nblocks, _BLOSC_HEADER)
        lo, hi = int(offsets.min()), int(offsets.max())
    if lo < end or hi >= n:
        raise FrameError("blosc block offsets point outside the chunk")


def zstd_content_size(buf: Any) -> int | None:
    """The content size a zstd frame's header declares, or None when it declares none (a
    streamed frame; a skippable frame first). Raises :class:`FrameError` when ``buf`` is not a
    zstd frame."""
    mv = _sizes(buf)
    if len(mv) < 5:
        raise FrameError(f"zstd chunk of {len(mv)} bytes is shorter than a frame header")
    magic = int.from_bytes(mv[:4], "little")
    if magic & 0xFFFFFFF0 == 0x184D2A50:
        return None  # skippable frame first: no size to read here
    if magic != _ZSTD_MAGIC:
        raise FrameError("the chunk is not a zstd frame (bad magic number)")
    desc = mv[4]
    fcs_flag, single = desc >> 6, (desc >> 5) & 1
    did_size = (0, 1, 2, 4)[desc & 3]
    pos = 5 + (0 if single else 1) + did_size
    size = (1 if single else 0, 2, 4, 8)[fcs_flag]
    if size == 0:
        return None
    if pos + size > len(mv):
        raise FrameError("zstd frame header is cut short")
    value = int.from_bytes(mv[pos : pos + size], "little")
    return value + 256 if size == 2 else value


def check_lz4(buf: Any, expected: int | None, limit: int | None = None) -> None:
    """Check the 4-byte decoded size in front of a numcodecs LZ4 block."""
    mv = _sizes(buf)
    if len(mv) < 4:
        raise FrameError(f"lz4 chunk of {len(mv)} bytes is shorter than its 4-byte header")
    size = int.from_bytes(mv[:4], "little")
    if expected is not None and size != expected:
        raise FrameError(f"lz4 header says {size} bytes decoded, the chunk must hold {expected}")
    if limit is not None and size > limit:
        raise FrameError(f"lz4 header says {size} bytes decoded, more than {limit}")


def _stream(
    make: Callable[[], Any], buf: Any, expected: int | None, limit: int, name: str
) -> bytes:
    """Decode ``buf`` with a zlib-style decompressor (``max_length``, ``unconsumed_tail``),
    never holding more than ``limit`` bytes; the stream must end, exactly at ``expected``
    (when given). Members that follow one another (gzip) are decoded in turn."""
    d = make()
    parts: list[bytes] = []
    total = 0
    data: Any = _sizes(buf)
    while True:
        part = d.decompress(data, limit - total + 1)
        total += len(part)
        if total > limit:
            raise FrameError(f"{name} stream decodes to more than {limit} bytes")
        parts.append(part)
        data = d.unconsumed_tail
        if d.eof:
            if not d.unused_data:
                break
            data, d = d.unused_data, make()
        elif not data and not part:
            raise FrameError(f"{name} stream is cut short")
    out = b"".join(parts)
    if expected is not None and len(out) != expected:
        raise FrameError(
            f"{name} stream decodes to {len(out)} bytes, the chunk must hold {expected}"
        )
    return out


def _drain(make: Callable[[], Any], buf: Any, expected: int | None, limit: int, name: str) -> bytes:
    """Decode ``buf`` with a bz2/lzma-style decompressor (``max_length``, ``needs_input``;
    unused input kept inside), never holding more than ``limit`` bytes."""
    d = make()
    mv = _sizes(buf)
    parts: list[bytes] = []
    total = 0
    pos = 0
    while not d.eof:
        if d.needs_input:
            if pos >= len(mv):
                raise FrameError(f"{name} stream is cut short")
            data = bytes(mv[pos : pos + _STEP])
            pos += len(data)
        else:
            data = b""
        part = d.decompress(data, limit - total + 1)
        total += len(part)
        if total > limit:
            raise FrameError(f"{name} stream decodes to more than {limit} bytes")
        parts.append(part)
    out = b"".join(parts)
    if expected is not None and len(out) != expected:
        raise FrameError(
            f"{name} stream decodes to {len(out)} bytes, the chunk must hold {expected}"
        )
    return out


def _bz2_stream(buf: Any, expected: int | None, limit: int) -> bytes:
    return _drain(bz2.BZ2Decompressor, buf, expected, limit, "bz2")


def _lzma_alone(buf: Any, expected: int | None, limit: int) -> bytes:
    return _drain(lzma.LZMADecompressor, buf, expected, limit, "lzma")


def _zlib(wbits: int, name: str) -> Callable[[Any, int | None, int], bytes]:
    def run(buf: Any, expected: int | None, limit: int) -> bytes:
        return _stream(lambda: zlib.decompressobj(wbits), buf, expected, limit, name)

    return run


def _zstd(buf: Any, expected: int | None, limit: int) -> Any:
    import numcodecs

    size = zstd_content_size(buf)
    if size is not None:
        if expected is not None and size != expected:
            raise FrameError(
                f"zstd frame says {size} bytes decoded, the chunk must hold {expected}"
            )
        if size > limit:
            raise FrameError(f"zstd frame says {size} bytes decoded, more than {limit}")
    want = expected if expected is not None else (size if size is not None else None)
    codec = numcodecs.Zstd()
    if want is not None:
        out = np.empty(want, np.uint8)
        try:
            codec.decode(buf, out=out)
        except (RuntimeError, ValueError) as err:
            raise FrameError(f"zstd frame does not decode to {want} bytes ({err})") from None
        return out
    # no size anywhere: decode into the bound, then keep what was written (numcodecs says
    # how much only through its error, so try the bound and shrink on "expected ... got N")
    out = np.empty(limit, np.uint8)
    try:
        codec.decode(buf, out=out)
        return out
    except RuntimeError as err:
        text = str(err)
        marker = "got "
        if "expected to decompress" in text and marker in text:
            got = int(text.rsplit(marker, 1)[1].strip(" '\"."))
            return codec.decode(buf, out=np.empty(got, np.uint8))
        raise FrameError(f"zstd frame decodes to more than {limit} bytes ({err})") from None


def _blosc(buf: Any, expected: int | None, limit: int) -> Any:
    import numcodecs

    check_blosc(buf, expected, limit)
    nbytes = struct.unpack_from("<I", _sizes(buf), 4)[0]
    out = np.empty(nbytes, np.uint8)
    try:
        numcodecs.Blosc().decode(buf, out=out)
    except RuntimeError as err:
        raise FrameError(f"blosc chunk does not decode ({err})") from None
    return out


def _lz4(buf: Any, expected: int | None, limit: int) -> Any:
    import numcodecs

    check_lz4(buf, expected, limit)
    size = int.from_bytes(_sizes(buf)[:4], "little")
    out = np.empty(size, np.uint8)
    try:
        numcodecs.LZ4().decode(buf, out=out)
    except RuntimeError as err:
        raise FrameError(f"lz4 chunk does not decode ({err})") from None
    return out


#: codec name (zarr v3's name or numcodecs' id) -> bounded decode(buf, expected, limit)
_DECODERS: dict[str, Callable[[Any, int | None, int], Any]] = {
    "blosc": _blosc,
    "zstd": _zstd,
    "lz4": _lz4,
    "gzip": _zlib(16 + zlib.MAX_WBITS, "gzip"),
    "zlib": _zlib(zlib.MAX_WBITS, "zlib"),
    "deflate": _zlib(zlib.MAX_WBITS, "deflate"),
    "bz2": _bz2_stream,
    "lzma": _lzma_alone,
}


def frame_decoder(name: str) -> Callable[[Any, int | None, int], Any] | None:
    """The bounded decode of codec ``name`` (``decode(buf, expected, limit)``), or None when
    this module does not know it."""
    return _DECODERS.get(name)


def bounded_decode(name: str, buf: Any, expected: int | None, limit: int | None = None) -> Any:
    """``buf`` decoded by codec ``name`` into at most ``limit`` bytes (``expected`` when it is
    given and ``limit`` is not): exactly ``expected`` bytes, or :class:`FrameError`."""
    fn = _DECODERS[name]
    if limit is None:
        if expected is None:
            raise ValueError("bounded_decode needs expected or limit")
        limit = expected
    return fn(buf, expected, limit)
