"""The one slab planner: how many rows of an array a streamed pass handles at a time.

Every streamed pass over a store (``convert``, memmap export, copies between stores in
``from_dict``/``clone``, in-place ops on large leaves, the Dask tasks) reads a *slab* of rows
at a time: about :data:`SLAB_BYTES`, aligned so that each destination chunk is written once and
each source chunk decoded once. Peak memory is then a few slabs, whatever the store's size.

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
    """Rows per slab: about ``budget`` bytes, a multiple of the destination's chunk rows (each
    destination chunk written once) and never less than a source chunk (each source chunk
    decoded once: a source chunk larger than the budget sets the memory bound). When both
    are chunked and their least common multiple fits twice the budget, slabs align to both.
    ``budget`` None is :data:`SLAB_BYTES`, read at call time (tests shrink it)."""
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
        if lcm * row <= max(2 * budget, src_c * row):
            align = lcm
        else:
            align = src_c if src_c > rows else dst_c
    else:
        align = src_c or dst_c or 1
    rows = max(align, rows // align * align)
    return int(min(rows, max(1, shape[0])))


def row_slabs(n: int, rows: int) -> Iterator[slice]:
    """``slice(0, rows), slice(rows, 2 * rows), ...`` covering ``range(n)``."""
    for start in range(0, n, max(1, rows)):
        yield slice(start, min(n, start + rows))
