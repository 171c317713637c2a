"""Chunk geometry of a store, as the training loader sees it: for each leaf, how many rows one
chunk holds along the batch dim and whether a random row costs a whole chunk decode; and the
*chunk group* (a run of rows that is a whole number of chunks of every chunked leaf, a few MB
in all) that the sampler shuffles and the dataset reads at once.

>>> import os, tempfile, torch
>>> from ptd import PersistentTensorDict
>>> with tempfile.TemporaryDirectory() as d:
...     p = PersistentTensorDict.from_dict(
...         {"obs": torch.zeros(5000, 8)}, os.path.join(d, "x.h5"), chunks=(500, 8),
...         compression="gzip")
...     leaves = store_leaves(p)
...     print(leaves[0].key, leaves[0].chunk_rows, leaves[0].blocked)
...     print(group_rows(leaves, 5000, target_bytes=64 << 10))
...     p.close()
('obs',) 500 True
2000
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ptd.storage.api import ValueKind, random_row_cost

if TYPE_CHECKING:
    from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict

__all__ = ["GROUP_BYTES", "LeafGeometry", "group_rows", "store_leaves"]

#: default bytes of one chunk group (all leaves together)
GROUP_BYTES = 4 << 20


@dataclass(frozen=True)
class LeafGeometry:
    """One leaf of a store, as the loader reads it."""

    #: the leaf's key, one str per level
    key: tuple[str, ...]
    #: rows per chunk along the batch dim (the shard's for a sharded zarr array); None:
    #: contiguous
    chunk_rows: int | None
    #: bytes of one row
    row_bytes: int
    #: True: a random row costs more than itself (:func:`ptd.storage.api.random_row_cost`:
    #: a chunk decode, or a whole chunk read), so the dataset reads it in whole chunk groups
    #: and keeps them decoded;
    #: False: random rows are read directly (the fast path: uncompressed contiguous h5,
    #: uncompressed unsharded local zarr)
    blocked: bool
    #: a tensor leaf (else a non-tensor entry, read directly)
    tensor: bool = True


def store_leaves(
    td: PersistentTensorDict, keys: Sequence[tuple[str, ...]] | None = None
) -> list[LeafGeometry]:
    """The leaves of ``td`` (a whole store or group, not an indexed view) with their chunk
    geometry, read from the store's metadata (no data is read); ``keys``: only those leaves
    (relative to ``td``, in that order), default every leaf."""
    n = int(td.batch_size[0]) if td.batch_dims else 0
    if keys is None:
        keys = [key for key, meta in td._metas(True) if meta.kind != "nested"]
    remote = td.store_node.remote
    return [_leaf_geometry(td, key, n, remote) for key in keys]


def _leaf_geometry(
    td: PersistentTensorDict, key: tuple[str, ...], n: int, remote: bool
) -> LeafGeometry:
    node = td.store_node
    am = node.meta(key)
    shape = tuple(am.shape)
    row = math.prod(shape[1:]) * am.dtype.itemsize if shape else am.dtype.itemsize
    if am.kind is not ValueKind.NUMERIC or am.torch_dtype is None:
        return LeafGeometry(key, None, max(1, row), False, tensor=False)
    # (a sharded array's chunks are its inner chunks: what one read decodes)
    chunks = tuple(am.chunks) if am.chunks is not None and shape else None
    # blocked where a random row costs more than itself (the storage's one cost model)
    cost = random_row_cost(am, node.backend.policy, local=not remote)
    blocked = cost is not None and not cost.direct
    rows = min(chunks[0], n) if chunks else None
    return LeafGeometry(key, rows, max(1, row), blocked)


def group_rows(
    leaves: list[LeafGeometry],
    n: int,
    target_bytes: int = GROUP_BYTES,
    max_rows: int | None = None,
) -> int | None:
    """Rows of one chunk group: a multiple of the largest chunk of the blocked leaves (the
    chunks of the other blocked leaves usually divide it), grown to about ``target_bytes``
    over all leaves. None when no leaf is blocked (every row is read directly: the sampler
    then shuffles the whole store).

    ``max_rows`` (the memory budget's bound, see :class:`~ptd.data.dataset.StoreDataset`): at
    most that many rows; chunks of more rows are then read in parts (a group is a divisor of
    the smallest such chunk, so that no group straddles two of its chunks); below 1: None
    (no blocks)."""
    blocked = [g for g in leaves if g.blocked and g.chunk_rows]
    if not blocked or n <= 0 or (max_rows is not None and max_rows < 1):
        return None
    cap = n if max_rows is None else min(n, int(max_rows))
    # leaves stored as a single chunk (a small flag leaf of an 8 MB chunk...) do not set it
    parts = [g.chunk_rows for g in blocked if g.chunk_rows and g.chunk_rows < n]
    fitting = [c for c in parts if c <= cap]
    row = sum(g.row_bytes for g in leaves if g.tensor)
    if fitting or not parts:
        base = max(fitting) if fitting else cap
        rows = base * max(1, target_bytes // max(1, base * row))
        if rows > cap:  # the store's end, or the budget's bound (then whole chunks)
            rows = cap if cap == n else cap // base * base
        return int(rows)
    # every chunk holds more rows than the cap: read them in parts
    c = min(parts)
    d = -(-c // cap)
    while c % d:
        d += 1
    return c // d
