"""The one slab planner: how many rows of an array a streamed pass handles at a time.

Every streamed pass over a store (``convert``, memmap export, copies between stores in
``from_dict``/``clone``, in-place ops on large leaves, the Dask tasks) reads a *slab* of rows
at a time: about :data:`SLAB_BYTES`, aligned so that each destination chunk is written by one
slab alone (slabs may be written concurrently) and, where that allows, each source chunk is
decoded once. Peak memory is then a few slabs, whatever the store's size.

>>> slab_rows((1_000_000, 64), 4)  # 256 B rows: 16 MiB slabs
65536
>>> slab_rows((1_000_000, 64), 4, src_chunk_rows=1000)  # a multiple of the source chunks
65000
>>> slab_rows((10, 3), 8)  # never more rows than there are
10
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence

__all__ = ["SLAB_BYTES", "row_slabs", "slab_rows"]

#: bytes of an array handled at a time by every streamed pass (zarr's per-chunk buffers make a
#: copy hold about twice this, on top of what the interpreter and torch take)
SLAB_BYTES = 16 << 20


def slab_rows(
    shape: Sequence[int],
    itemsize: int,
    *,
    src_chunk_rows: int | None = None,
    dst_chunk_rows: int | None = None,
    budget: int | None = None,
) -> int:
    """Rows per slab: about ``budget`` bytes and a multiple of the destination's chunk rows,
    so that each destination chunk (a shard's rows, for a sharded array) is written by one slab
    alone. That is what lets slabs be written concurrently (``convert --workers``, the Dask
    tasks): two writes into one zarr chunk each read, merge and rewrite it, and the later one
    drops the other's rows. Where the source is chunked too, slabs are never smaller than a
    source chunk (each decoded once: a source chunk larger than the budget sets the memory
    bound) when the two alignments agree: their least common multiple fitting twice the budget
    or one source chunk. Where they cannot agree, the destination wins and a large source chunk
    is decoded once per slab that reads from it. ``budget`` None is :data:`SLAB_BYTES`, read
    at call time (tests shrink it).

    >>> slab_rows((14_000, 2_500), 4, src_chunk_rows=7_000, dst_chunk_rows=3_000)
    3000
    >>> slab_rows((100_000, 250), 4, src_chunk_rows=7_000, dst_chunk_rows=1_000)
    14000
    """
    if budget is None:
        budget = SLAB_BYTES
    if not shape:
        return 1
    row = max(1, math.prod(shape[1:]) * itemsize)
    rows = max(1, budget // row)
    src_c = int(src_chunk_rows) if src_chunk_rows else None
    dst_c = int(dst_chunk_rows) if dst_chunk_rows else None
    if src_c and dst_c:
        lcm = math.lcm(src_c, dst_c)
        align = lcm if lcm * row <= max(2 * budget, src_c * row) else dst_c
    else:
        align = src_c or dst_c or 1
    rows = max(align, rows // align * align)
    return int(min(rows, max(1, shape[0])))


def row_slabs(n: int, rows: int) -> Iterator[slice]:
    """``slice(0, rows), slice(rows, 2 * rows), ...`` covering ``range(n)``."""
    for start in range(0, n, max(1, rows)):
        yield slice(start, min(n, start + rows))
