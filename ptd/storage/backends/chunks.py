"""What ``ptd validate --data`` and the layout lint need to know about an array's chunks,
beyond :class:`~ptd.storage.backends.meta.ArrayMeta`: its checksum, its filters (and whether
each is installed), and which chunks are stored.

Both formats are asked here, so nothing above the backends imports h5py or zarr:

* HDF5: the dataset creation property list lists the filters (``fletcher32`` is the checksum);
  ``H5Z_filter_avail`` says whether a filter can be applied; the chunk index
  (``get_chunk_info``) lists the chunks that are allocated.
* Zarr v3: the array's codecs (``crc32c`` is the checksum); the chunk keys present in a local
  directory store (a missing chunk reads as the fill value).

>>> import os, tempfile, numpy as np
>>> from ptd.storage.backends import get_backend
>>> with tempfile.TemporaryDirectory() as d:
...     be = get_backend("h5").open(os.path.join(d, "x.h5"), "w")
...     be.create_array(("a",), shape=(8, 2), dtype=np.dtype("f4"), chunks=(4, 2),
...                     options={"fletcher32": True})
...     be.write(("a",), (slice(0, 4),), np.ones((4, 2), "f4"))
...     info = chunk_info(be, ("a",))
...     be.close()
>>> info.checksum, info.grid, sorted(info.stored or ())
('fletcher32', (2, 1), [(0, 0)])
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any

from ptd.storage.backends.base import Backend, Path
from ptd.storage.backends.memmap_dir import RawFile

__all__ = ["H5_PLUGIN_PACKAGES", "ChunkInfo", "FilterInfo", "chunk_info"]

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


@dataclass
class FilterInfo:
    """One filter/codec of an array: its name, whether it is installed here, and (when it is
    not) the package to install."""

    name: str
    available: bool = True
    package: str | None = None
    filter_id: int | None = None


@dataclass
class ChunkInfo:
    """Chunk facts of one array (see the module doc)."""

    #: chunk shape (the whole shape for contiguous/unchunked arrays)
    chunks: tuple[int, ...]
    #: chunks along each dim
    grid: tuple[int, ...]
    #: "fletcher32", "crc32c" or None
    checksum: str | None = None
    filters: list[FilterInfo] = field(default_factory=list)
    #: grid coordinates of the stored chunks, or None when unknown (remote/zip stores) or
    #: meaningless (contiguous HDF5 datasets)
    stored: set[tuple[int, ...]] | None = None
    #: whether the data is compressed (a codec/filter that changes the bytes' size)
    compressed: bool = False
    #: an HDF5 contiguous (or compact) dataset: one byte range, no chunks at all
    contiguous: bool = False
    #: a sharded zarr array: the chunk shape inside each shard (``chunks`` and ``grid`` are
    #: the shards', the stored objects); None when unsharded
    inner: tuple[int, ...] | None = None

    @property
    def n_chunks(self) -> int:
        return math.prod(self.grid)

    @property
    def read_chunks(self) -> tuple[int, ...]:
        """What one read decodes: the inner chunk of a sharded array, else the chunk."""
        return self.inner if self.inner is not None else self.chunks


def _grid(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-(-s // c) if c else 0 for s, c in zip(shape, chunks, strict=True))


def chunk_info(be: Backend, path: Path, *, list_stored: bool = True) -> ChunkInfo:
    """The :class:`ChunkInfo` of the numeric array at ``path`` of an open backend.

    ``list_stored``: also list the stored chunks (one pass over the chunk index or the
    array's directory)."""
    handle = be._array_handle(path)
    if isinstance(handle, RawFile):  # a memmap directory's raw file: one byte range
        shape = tuple(handle.shape)
        return ChunkInfo(chunks=shape, grid=(1,) * len(shape), contiguous=True)
    if be.name == "h5":
        return _h5_info(handle.ds, list_stored)
    return _zarr_info(handle, list_stored)


def _h5_info(ds: Any, list_stored: bool) -> ChunkInfo:
    import h5py

    dsid = ds.id
    shape = tuple(dsid.shape or ())
    dcpl = dsid.get_create_plist()
    if dcpl.get_layout() != h5py.h5d.CHUNKED:
        return ChunkInfo(chunks=shape, grid=tuple(1 for _ in shape), contiguous=True)
    chunks = tuple(dcpl.get_chunk())
    info = ChunkInfo(chunks=chunks, grid=_grid(shape, chunks))
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


def _zarr_info(arr: Any, list_stored: bool) -> ChunkInfo:
    md = arr.metadata
    shape = tuple(md.shape)
    # a sharded array stores shards: they are its chunks here (the stored objects); a read
    # decodes its inner chunks
    shards = getattr(arr, "shards", None)
    chunks = tuple(shards or arr.chunks)
    info = ChunkInfo(chunks=chunks, grid=_grid(shape, chunks))
    if shards:
        info.inner = tuple(arr.chunks)
    if md.zarr_format == 3:
        codecs = list(md.codecs)
        names = [type(c).__name__ for c in codecs]
        for c, cname in zip(codecs, names, strict=True):
            try:
                name = str(c.to_dict().get("name", cname))
            except Exception:  # noqa: BLE001 - a codec that cannot describe itself
                name = cname
            info.filters.append(FilterInfo(name=name))
            if name == "crc32c":
                info.checksum = "crc32c"
            elif name not in ("bytes", "transpose", "vlen-utf8", "vlen-bytes", "crc32c"):
                info.compressed = True
    else:
        for c in list(arr.compressors or ()) + list(arr.filters or ()):
            info.filters.append(FilterInfo(name=str(getattr(c, "codec_id", type(c).__name__))))
            info.compressed = True
    if list_stored:
        info.stored = _zarr_stored(arr, md, info.grid)
    return info


def _zarr_stored(arr: Any, md: Any, grid: tuple[int, ...]) -> set[tuple[int, ...]] | None:
    """Grid coordinates of the chunk files of a local directory store (None elsewhere)."""
    store = arr.store
    root = getattr(store, "root", None)
    if root is None or not os.path.isdir(str(root)):
        return None
    base = os.path.join(str(root), *[p for p in arr.path.split("/") if p])
    encode = getattr(md, "encode_chunk_key", None)
    if encode is None:
        return None
    # list the files once, then look every expected key up
    present: set[str] = set()
    base_len = len(base.rstrip(os.sep)) + 1
    for d, _dirs, files in os.walk(base):
        rel = d[base_len:].replace(os.sep, "/")
        for f in files:
            if f != "zarr.json" and not f.startswith(".z"):
                present.add(f"{rel}/{f}" if rel else f)
    if math.prod(grid) > 10 * max(1, len(present)) + 1_000_000:
        return None  # too many keys to enumerate; unknown
    out: set[tuple[int, ...]] = set()
    for idx in _all_coords(grid):
        if encode(idx) in present:
            out.add(idx)
    return out


def _all_coords(grid: tuple[int, ...]) -> Any:
    import itertools

    return itertools.product(*(range(n) for n in grid))
