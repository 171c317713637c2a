"""On-disk layouts ``convert`` can write: ``keep`` (each leaf's chunks and codec as the source
has them, the default) and ``random-access`` (alias ``training``): the layout that serves
random minibatches best in the destination format.

``random-access``, per destination (tensors with a batch dim; 0-d leaves and non-tensors are
copied as usual, uncompressed):

* HDF5: contiguous and uncompressed. ptd reads such datasets from a memory map (the fast path):
  a random row costs the row, not a chunk decode. A resizable dataset (a maxshape it can grow
  to, which HDF5 holds only chunked) gets uncompressed chunks of about 8 MB instead: larger
  than HDF5's chunk cache, so a row is read in place.
* Zarr on a local directory: uncompressed, unsharded chunks of about 8 MB along the batch dim:
  the fast path maps each chunk file, so a random row again costs the row.
* Zarr at a URL (object stores, where every read is a request and memory maps do not exist):
  sharded, shards of about 16 MB (:data:`SHARD_TARGET`) holding small zstd-compressed inner
  chunks of about 64 KB (:data:`INNER_TARGET`): a random row costs one ranged request and one
  64 KB decode instead of a whole 8 MB chunk, and the store holds one object per shard, not
  per inner chunk.

>>> import numpy as np
>>> from ptd.storage.api import ArrayMeta, ValueKind
>>> from ptd.storage.registry import policy
>>> m = ArrayMeta(("obs",), (1_000_000, 64), np.dtype("float32"), ValueKind.NUMERIC, "float32",
...               chunks=(1024, 64), compression="gzip(4)")
>>> random_access(m, policy("h5"), remote=False)
LeafLayout(chunks=None, shards=None, codec=None, level=None)
>>> random_access(m, policy("zarr"), remote=False)
LeafLayout(chunks=(32259, 64), shards=None, codec=None, level=None)
>>> random_access(m, policy("zarr"), remote=True)
LeafLayout(chunks=(256, 64), shards=(62720, 64), codec='zstd', level=3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ptd.errors import PtdValueError
from ptd.storage.api import ArrayMeta, FormatPolicy
from ptd.transfer.encoding import LeafEncoding

__all__ = [
    "ALIASES",
    "CHUNK_TARGET",
    "INNER_TARGET",
    "LAYOUTS",
    "SHARD_TARGET",
    "LeafLayout",
    "balanced_rows",
    "check_layout",
    "random_access",
]

#: the layout names (``keep``: the default)
LAYOUTS = ("keep", "random-access")
#: other names accepted for a layout
ALIASES = {"training": "random-access"}
#: target bytes of an inner chunk and of a shard (remote zarr), and of a plain chunk (local
#: zarr: the same as ``convert``'s automatic chunks)
INNER_TARGET = 64 << 10
SHARD_TARGET = 16 << 20
CHUNK_TARGET = 8 << 20


@dataclass(frozen=True)
class LeafLayout:
    """Where and how one leaf is stored: chunk shape (None: contiguous), shard shape (None:
    unsharded), the codec name of :data:`ptd.transfer.codecs.COMPRESSIONS` chosen for it
    (None: the source's, as ``encoding`` carries it) and its level, and what the leaf's
    properties become (:class:`~ptd.transfer.encoding.LeafEncoding`, once planned)."""

    chunks: tuple[int, ...] | None
    shards: tuple[int, ...] | None
    codec: str | None
    level: int | None
    encoding: LeafEncoding | None = field(default=None, repr=False, compare=False)


def check_layout(layout: str | None) -> str | None:
    """A ``layout=`` argument as a name of :data:`LAYOUTS` (aliases resolved), None for
    ``keep``; else PtdValueError naming the choices.

    >>> check_layout("training"), check_layout("keep"), check_layout(None)
    ('random-access', None, None)
    """
    if layout is None:
        return None
    name = ALIASES.get(str(layout).lower(), str(layout).lower())
    if name not in LAYOUTS:
        choices = ", ".join([*LAYOUTS, *ALIASES])
        raise PtdValueError(f"unknown layout {layout!r}; choose one of {choices}")
    return None if name == "keep" else name


def balanced_rows(n: int, target: int) -> int:
    """Rows per chunk near ``target`` that cut ``n`` rows into equal chunks, so the last one
    is not mostly padding: ``ceil(n / ceil(n / target))``.

    >>> balanced_rows(200_000, 123_361), balanced_rows(100, 1000), balanced_rows(10, 3)
    (100000, 100, 3)
    """
    target = max(1, min(int(target), n))
    return max(1, math.ceil(n / math.ceil(n / target)))


def random_access(
    meta: ArrayMeta, dst: FormatPolicy, *, remote: bool, resizable: bool = False
) -> LeafLayout:
    """The ``random-access`` layout of a leaf in a destination of the format ``dst`` (see the
    module doc; ``resizable``: the leaf keeps a maxshape it can grow to, which HDF5 holds only
    chunked): contiguous where the format stores so; else uncompressed chunks of about
    :data:`CHUNK_TARGET` where the format reads those in place (memory-mapped chunk files of a
    local store; chunks over the library's chunk cache); else, at a URL, small zstd inner
    chunks in shards."""
    shape = tuple(meta.shape)
    if not shape or 0 in shape:
        return LeafLayout(None, None, None, None)
    row = math.prod(shape[1:]) * meta.dtype.itemsize
    n = shape[0]
    if dst.stores_contiguous and not resizable:
        return LeafLayout(None, None, None, None)
    in_place = dst.in_place_chunk_bytes is not None and dst.in_place_chunk_bytes < CHUNK_TARGET
    if in_place or (dst.maps_chunk_files and not remote) or not dst.stores_shards:
        # uncompressed chunks of about 8 MB, read in place
        return LeafLayout((balanced_rows(n, CHUNK_TARGET // row),) + shape[1:], None, None, None)
    # inner chunks of at least INNER_TARGET bytes (a shard's padding is at most one of them)
    inner = min(n, -(-INNER_TARGET // max(1, row)))
    # a shard holds whole inner chunks: round up, so the shards stay as few as balanced_rows
    # makes them
    shard = math.ceil(balanced_rows(n, SHARD_TARGET // row) / inner) * inner
    return LeafLayout((inner,) + shape[1:], (shard,) + shape[1:], "zstd", 3)
