"""The chunk index of an HDF5 dataset: its filters (and whether each is installed here), its
checksum, and the chunks that are allocated (``Backend.chunk_info`` for HDF5)."""

from __future__ import annotations

from typing import Any

import h5py

from ptd.storage.chunk_info import ChunkInfo, FilterInfo, grid_of

__all__ = ["H5_PLUGIN_PACKAGES", "h5_chunk_info"]

#: HDF5 filter ids registered by plugins -> (name, the pip package that provides them)
H5_PLUGIN_PACKAGES: dict[int, tuple[str, str]] = {
    307: ("bzip2", "hdf5plugin"),
    32000: ("lzf", "h5py"),
    32001: ("blosc", "hdf5plugin"),
    32004: ("lz4", "hdf5plugin"),
    32008: ("bitshuffle", "hdf5plugin"),
    32013: ("zfp", "hdf5plugin"),
    32015: ("zstd", "hdf5plugin"),
    32017: ("sz", "hdf5plugin"),
    32018: ("fcidecomp", "hdf5plugin"),
    32024: ("sz3", "hdf5plugin"),
    32026: ("blosc2", "hdf5plugin"),
}


def h5_chunk_info(
    ds: Any, list_stored: bool, dcpl: Any = None, shape: tuple[int, ...] | None = None
) -> ChunkInfo:
    """The chunk facts of the dataset ``ds`` (``dcpl``, ``shape``: its creation property list
    and shape, when the caller holds them)."""
    dsid = ds.id
    shape = tuple(dsid.shape or ()) if shape is None else tuple(shape)
    dcpl = dcpl if dcpl is not None else dsid.get_create_plist()
    if dcpl.get_layout() != h5py.h5d.CHUNKED:
        return ChunkInfo(
            chunks=shape,
            grid=tuple(1 for _ in shape),
            contiguous=True,
            # a virtual dataset's bytes are in its sources: none in this file, yet written
            stored_bytes=None
            if dcpl.get_layout() == h5py.h5d.VIRTUAL
            else int(dsid.get_storage_size()),
        )
    chunks = tuple(dcpl.get_chunk())
    info = ChunkInfo(chunks=chunks, grid=grid_of(shape, chunks))
    for i in range(dcpl.get_nfilters()):
        code, _flags, _values, raw_name = dcpl.get_filter(i)
        name = raw_name.decode("ascii", "replace") if isinstance(raw_name, bytes) else str(raw_name)
        known = H5_PLUGIN_PACKAGES.get(int(code))
        if known is not None:
            name = known[0]
        elif code == h5py.h5z.FILTER_DEFLATE:
            name = "gzip"
        elif code == h5py.h5z.FILTER_FLETCHER32:
            name = "fletcher32"
        avail = bool(h5py.h5z.filter_avail(code))
        info.filters.append(
            FilterInfo(
                name=name or f"filter {code}",
                available=avail,
                package=None if avail else (known[1] if known else "an HDF5 plugin"),
                filter_id=int(code),
            )
        )
        if code == h5py.h5z.FILTER_FLETCHER32:
            info.checksum = "fletcher32"
        elif code not in (h5py.h5z.FILTER_SHUFFLE, h5py.h5z.FILTER_FLETCHER32):
            info.compressed = True
    if list_stored:
        stored: set[tuple[int, ...]] = set()
        if hasattr(dsid, "chunk_iter"):
            dsid.chunk_iter(
                lambda c: stored.add(
                    tuple(o // n for o, n in zip(c.chunk_offset, chunks, strict=True))
                )
            )
        else:  # pragma: no cover - older HDF5
            for k in range(dsid.get_num_chunks()):
                off = dsid.get_chunk_info(k).chunk_offset
                stored.add(tuple(o // n for o, n in zip(off, chunks, strict=True)))
        info.stored = stored
    return info
