"""What ``ptd validate --data`` and the layout lint need to know about an array's chunks,
beyond :class:`~ptd.storage.meta.ArrayMeta`: its checksum, its filters (and whether
each is installed), and which chunks are stored.

Each backend answers from its own index (``Backend.chunk_info``):

* HDF5: the dataset creation property list lists the filters (``fletcher32`` is the checksum);
  ``H5Z_filter_avail`` says whether a filter can be applied; the chunk index
  (``get_chunk_info``) lists the chunks that are allocated.
* Zarr v3: the array's codecs (``crc32c`` is the checksum); the chunk keys present in a local
  directory store (a missing chunk reads as the fill value).

>>> import os, tempfile, numpy as np
>>> from ptd.storage.registry import get_backend
>>> with tempfile.TemporaryDirectory() as d:
...     be = get_backend("h5").open(os.path.join(d, "x.h5"), "w")
...     be.create_array(("a",), shape=(8, 2), dtype=np.dtype("f4"), chunks=(4, 2),
...                     options={"fletcher32": True})
...     be.write(("a",), (slice(0, 4),), np.ones((4, 2), "f4"))
...     info = be.chunk_info(("a",))
...     be.close()
>>> info.checksum, info.grid, sorted(info.stored or ())
('fletcher32', (2, 1), [(0, 0)])
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

__all__ = ["ChunkInfo", "FilterInfo", "grid_of"]


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
    #: bytes the array occupies in the file where the backend knows it cheaply (an HDF5
    #: contiguous dataset: 0 when never written, all of it then reads as the fill value)
    stored_bytes: int | None = None

    @property
    def n_chunks(self) -> int:
        return math.prod(self.grid)

    @property
    def read_chunks(self) -> tuple[int, ...]:
        """What one read decodes: the inner chunk of a sharded array, else the chunk."""
        return self.inner if self.inner is not None else self.chunks


def grid_of(shape: tuple[int, ...], chunks: tuple[int, ...]) -> tuple[int, ...]:
    """Chunks along each dim of an array of ``shape`` cut in ``chunks``."""
    return tuple(-(-s // c) if c else 0 for s, c in zip(shape, chunks, strict=True))
