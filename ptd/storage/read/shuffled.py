"""Chunks whose bytes are still in shuffle order, read without un-shuffling them first.

HDF5's shuffle filter (and blosc's) stores byte ``b`` of element ``i`` of a chunk of ``n``
elements at ``b * n + i``: all first bytes, then all second bytes... Undoing it is a
transposition of the ``(itemsize, n)`` byte matrix. Rather than making an un-shuffled copy of
every chunk and then copying the rows asked out of that copy, the decoded reads keep the
chunk as it came out of the decompressor and look at it through a strided view
(:meth:`ShuffledChunk.byte_view`, ``shape + (itemsize,)`` bytes) that numpy copies out of in
one pass: the un-shuffle happens inside the one copy into the output, and only for the rows
the read asks for. The chunk cache keeps chunks in this form too.

>>> import numpy as np
>>> values = np.arange(6, dtype="<u2").reshape(3, 2)
>>> raw = values.view(np.uint8).reshape(-1, 2).T.copy()  # what the shuffle filter stores
>>> chunk = ShuffledChunk(raw.reshape(-1), (3, 2), values.dtype)
>>> out = np.empty((2, 2), values.dtype)
>>> proj = ChunkProjection((0,), (slice(1, 3), slice(0, 2)), (slice(0, 2), slice(0, 2)))
>>> copy_rows(out, proj, chunk)
>>> out.tolist(), chunk.materialize().tolist() == values.tolist()
([[2, 3], [4, 5]], True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ptd.storage.indexer import ChunkProjection, scatter

__all__ = ["ShuffledChunk", "copy_rows"]


class ShuffledChunk:
    """A decoded chunk of ``shape`` and ``dtype`` whose bytes are in shuffle order (``data``:
    the decompressor's output, ``itemsize * count`` bytes)."""

    __slots__ = ("data", "dtype", "shape")

    def __init__(self, data: np.ndarray, shape: tuple[int, ...], dtype: np.dtype) -> None:
        self.data = data
        self.shape = shape
        self.dtype = np.dtype(dtype)

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes)

    @property
    def flags(self) -> Any:
        """The flags of the bytes (the chunk cache makes them read-only)."""
        return self.data.flags

    def byte_view(self) -> np.ndarray:
        """The chunk as ``shape + (itemsize,)`` bytes, un-shuffled by its strides (no copy)."""
        size = self.dtype.itemsize
        count = self.data.size // size
        return self.data[: size * count].reshape(size, count).T.reshape((*self.shape, size))

    def materialize(self) -> np.ndarray:
        """An un-shuffled copy of the whole chunk."""
        out = np.empty(self.shape, self.dtype)
        out.view(np.uint8).reshape((*self.shape, self.dtype.itemsize))[...] = self.byte_view()
        return out


def copy_rows(out: np.ndarray, proj: ChunkProjection, chunk: ShuffledChunk) -> None:
    """``out[proj.out] = chunk[proj.local]`` (:func:`ptd.storage.indexer.scatter`), the shuffle
    undone in the same copy where ``out`` is C-contiguous and of the chunk's dtype (else
    through an un-shuffled copy of the chunk)."""
    if out.ndim == 0 or out.dtype != chunk.dtype or not out.flags.c_contiguous:
        scatter(out, proj, chunk.materialize())
        return
    target = out.view(np.uint8).reshape((*out.shape, chunk.dtype.itemsize))
    scatter(target, proj, chunk.byte_view())
