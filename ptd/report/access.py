"""What one random row of a leaf costs to read: the bytes ptd reads and decodes to return a
single row picked at random, from the leaf's metadata (shown by ``ptd inspect`` as "per row").

* Contiguous HDF5 datasets and uncompressed, unsharded zarr chunks of a local store are read
  from a memory map (the fast path): a row costs its own bytes.
* A compressed chunk is decoded whole: a row costs every chunk it lies in (the inner chunk of a
  sharded zarr array), at its uncompressed size.
* Uncompressed HDF5 chunks that fit HDF5's chunk cache (1 MiB by default) are read into it
  whole; larger ones are read in place. Zarr chunks of a remote store, or inner chunks of a
  sharded array, are fetched whole.

A store is slow for random minibatches when this is far above the row's own size; ``ptd
convert --layout random-access`` writes one where it is the row's size (or, at a URL, a 64 KB
inner chunk).

>>> import numpy as np
>>> from ptd.storage.api import ArrayMeta, ValueKind
>>> m = ArrayMeta(("obs",), (10**6, 64), np.dtype("float32"), ValueKind.NUMERIC, "float32",
...               chunks=(1024, 64), compression="gzip(4)")
>>> random_row_bytes(m, "h5"), row_bytes(m)
(262144, 256)
>>> from dataclasses import replace
>>> random_row_bytes(replace(m, chunks=None, compression=None), "h5")
256
"""

from __future__ import annotations

import math

from ptd.storage.api import ArrayMeta, ValueKind

__all__ = ["H5_CHUNK_CACHE", "random_row_bytes", "row_bytes"]

#: HDF5's default chunk cache per dataset
H5_CHUNK_CACHE = 1 << 20


def row_bytes(meta: ArrayMeta) -> int:
    """Bytes of one row (one index along the first dim) of an array."""
    shape = tuple(meta.shape)
    return math.prod(shape[1:]) * meta.dtype.itemsize if shape else meta.dtype.itemsize


def random_row_bytes(meta: ArrayMeta, fmt: str, *, local: bool = True) -> int | None:
    """Bytes read and decoded to return one random row of a tensor leaf of a ``fmt`` store
    (``local``: a local file or directory, where the fast path maps uncompressed data); None for
    non-tensors and 0-d arrays (see the module doc)."""
    shape = tuple(meta.shape)
    if meta.kind is not ValueKind.NUMERIC or not shape or 0 in shape:
        return None
    row = row_bytes(meta)
    if meta.chunks is None:
        return row  # contiguous h5: mapped (or one hyperslab read)
    unit = tuple(meta.chunks)  # the inner chunk of a sharded array (its index read is small)
    sharded = meta.shards is not None
    chunk = math.prod(unit) * meta.dtype.itemsize
    if meta.compression is None and not sharded:
        if fmt == "zarr" and local:
            return row  # mapped chunk files
        if fmt == "h5" and chunk > H5_CHUNK_CACHE:
            return row  # HDF5 reads unfiltered chunks larger than its cache in place
    # the chunks a row lies in: one along the first dim, all of those across the others
    count = math.prod(-(-s // max(1, c)) for s, c in zip(shape[1:], unit[1:], strict=False))
    return count * chunk
