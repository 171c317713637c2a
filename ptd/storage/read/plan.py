"""The one planner from a backend selection to the chunks that hold it.

A backend selection (:mod:`ptd.storage.selection`: ints, slices with a positive step, at most
one 1-D index array) over an array cut in chunks becomes, per dim, the chunks it touches, what
it asks of each in the chunk's own coordinates, and where that lands in the output
(:func:`plan_dim`); across dims, every combination (:func:`chunk_pieces`). The decoded reads
(:mod:`ptd.storage.read.decoded`: chunks fetched and decoded, through the cache) and the
mapped reads of zarr chunk files (:mod:`ptd.storage.zarr.maps`) both read through it, and an
HDF5 index read asks it whether the span an index array covers is worth reading whole
(:func:`covering_span`).

An index array may be unsorted or repeat rows: the plan is right either way (each run of rows
in one chunk is one piece), but a chunk would be visited once per run; :func:`sort_first`
says when to read the sorted unique rows instead and put them back in order with one take.

>>> import numpy as np
>>> plan_dim(np.array([1, 2, 5, 9]), 10, 4)
[(0, slice(1, 3, None), slice(0, 2, None)), (1, array([1]), slice(2, 3, None)), (2, array([1]), slice(3, 4, None))]
>>> plan_dim(slice(3, 10, 3), 10, 4)
[(0, slice(3, 4, 3), slice(0, 1, None)), (1, slice(2, 4, 3), slice(1, 2, None)), (2, slice(1, 2, 3), slice(2, 3, None))]
>>> normalize((-1,), (5, 2))
(4, slice(0, 2, 1))
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = [
    "SPAN_BYTES",
    "SPAN_RATIO",
    "Piece",
    "chunk_pieces",
    "covering_span",
    "normalize",
    "out_shape",
    "plan_dim",
    "sort_first",
    "take_local",
]

#: one dim's part of a chunk read: (chunk index, the entry in the chunk's coordinates, the
#: output range, or None for an int, which drops the dim)
Piece = tuple[int, Any, slice | None]

#: an index array is read as the span between its first and last row when that span is at
#: most this many bytes, or at most this many times the rows asked (:func:`covering_span`)
SPAN_BYTES = 256 << 10
SPAN_RATIO = 2


def normalize(selection: Sequence[Any], shape: Sequence[int]) -> tuple[Any, ...]:
    """``selection`` padded with whole slices to every dim of ``shape``, negative ints counted
    from the end, and its ints and index arrays checked against the shape (IndexError)."""
    out: list[Any] = []
    for item, size in zip(selection, shape, strict=False):
        if isinstance(item, np.ndarray):
            if item.size and (int(item.min()) < 0 or int(item.max()) >= size):
                raise IndexError(f"index out of range for a dimension of size {size}")
        elif not isinstance(item, slice):
            i = int(item)
            if i < 0:
                i += size
            if not 0 <= i < size:
                raise IndexError(
                    f"index {int(item)} is out of range for a dimension of size {size}"
                )
            item = i
        out.append(item)
    return tuple(out) + tuple(slice(0, s, 1) for s in shape[len(selection) :])


def out_shape(shape: Sequence[int], selection: Sequence[Any]) -> tuple[int, ...]:
    """The shape a normalized ``selection`` of an array of ``shape`` reads (ints drop their
    dim)."""
    out = []
    for item, s in zip(selection, shape, strict=True):
        if isinstance(item, np.ndarray):
            out.append(int(item.shape[0]))
        elif isinstance(item, slice):
            out.append(len(range(*item.indices(s))))
    return tuple(out)


def plan_dim(item: Any, size: int, c: int) -> list[Piece]:
    """How one selection entry over a dim of ``size`` cut in chunks of ``c`` splits by chunk
    (see :data:`Piece`). An index array becomes one piece per run of rows in one chunk (a
    slice where the rows are consecutive); the entry must be in range (:func:`normalize`)."""
    if isinstance(item, np.ndarray):
        n = len(item)
        if n == 0:
            return []
        # vectorized: one numpy pass for every piece (a random minibatch has one piece per
        # chunk it touches, and this runs once per leaf per batch)
        ks = item // c
        cuts = np.flatnonzero(ks[1:] != ks[:-1]) + 1
        starts = np.concatenate(([0], cuts))
        ends = np.concatenate((cuts, [n]))
        local = item - ks * c
        # a piece is a slice when its rows are consecutive (in order, no repeats): its ends
        # span its length, and (checked only then) no step inside it is other than +1
        counts = ends - starts
        runs = (counts > 1) & (local[ends - 1] - local[starts] == counts - 1)
        if runs.any():
            bad = np.concatenate(([0], np.cumsum(np.diff(item) != 1)))
            runs &= bad[ends - 1] == bad[starts]
        out: list[Piece] = []
        for a, b, k, lo, run in zip(
            starts.tolist(),
            ends.tolist(),
            ks[starts].tolist(),
            local[starts].tolist(),
            runs.tolist(),
            strict=True,
        ):
            if run:
                out.append((k, slice(lo, lo + b - a), slice(a, b)))
            else:
                out.append((k, local[a:b], slice(a, b)))
        return out
    if isinstance(item, slice):
        start, stop, step = item.indices(size)
        out = []
        pos = 0
        for k in range(start // c, (stop - 1) // c + 1) if stop > start else ():
            lo, hi = k * c, min(k * c + c, stop)
            first = start if start >= lo else start + -(-(lo - start) // step) * step
            if first >= hi:
                continue
            n = len(range(first, hi, step))
            out.append((k, slice(first - lo, hi - lo, step), slice(pos, pos + n)))
            pos += n
        return out
    i = int(item)
    return [(i // c, i % c, None)]


def chunk_pieces(
    selection: Sequence[Any], shape: Sequence[int], chunks: Sequence[int]
) -> list[tuple[Piece, ...]]:
    """Every chunk a normalized ``selection`` touches, as one :data:`Piece` per dim (the
    chunk's coordinates are the pieces' first items)."""
    plans = [plan_dim(item, s, c) for item, s, c in zip(selection, shape, chunks, strict=True)]
    return list(itertools.product(*plans))


def sort_first(
    selection: Sequence[Any], shape: Sequence[int], chunks: Sequence[int]
) -> tuple[int, np.ndarray, np.ndarray, int] | None:
    """For a normalized ``selection`` whose index array spans several chunks and is not in
    order: ``(position, sorted unique rows, inverse, output axis)``, so that a reader reads
    ``selection`` with the sorted rows at ``position`` and puts them back with
    ``np.take(out, inverse, axis)``; None when the plan can go as it is."""
    for pos, item in enumerate(selection):
        if (
            isinstance(item, np.ndarray)
            and len(item) > 1
            and not bool(np.all(item[1:] >= item[:-1]))
            and int(item.min()) // chunks[pos] != int(item.max()) // chunks[pos]
        ):
            u, inv = np.unique(item, return_inverse=True)
            axis = sum(1 for s in selection[:pos] if isinstance(s, (slice, np.ndarray)))
            return pos, u, inv.reshape(-1), axis
    return None


def take_local(chunk: np.ndarray, local: Sequence[Any]) -> Any:
    """``chunk[local]`` with orthogonal (h5py's) semantics: ints first (so that numpy does not
    pair them with the index array), then the slices and the one index array."""
    if any(not isinstance(x, (slice, np.ndarray)) for x in local):
        chunk = chunk[
            tuple(slice(None) if isinstance(x, (slice, np.ndarray)) else x for x in local)
        ]
        local = tuple(x for x in local if isinstance(x, (slice, np.ndarray)))
    return chunk[tuple(local)]


def covering_span(
    selection: Sequence[Any], shape: Sequence[int], itemsize: int
) -> tuple[tuple[Any, ...], np.ndarray | None, int] | None:
    """For a selection with a sorted index array: ``(the selection with the array replaced by
    the span it covers, the rows to take from the span's read or None when the rows are
    consecutive (the span is the answer), the output axis)`` when that span is small (at most
    :data:`SPAN_BYTES`) or dense (at most :data:`SPAN_RATIO` times the rows asked), else None
    (read the rows themselves). A library whose point selection is slow (h5py) reads the span
    and takes.

    >>> covering_span((np.array([3, 4, 9]),), (100, 2), 4)
    ((slice(3, 10, None),), array([0, 1, 6]), 0)
    >>> covering_span((1, np.array([5, 6])), (4, 100), 8)
    ((1, slice(5, 7, None)), None, 0)
    """
    for pos, item in enumerate(selection):
        if isinstance(item, np.ndarray) and item.shape[0]:
            n = item.shape[0]
            lo, hi = int(item[0]), int(item[-1]) + 1
            spanned = (*selection[:pos], slice(lo, hi), *selection[pos + 1 :])
            row_bytes = itemsize * int(np.prod(shape[pos + 1 :], dtype=np.int64))
            axis = sum(1 for s in selection[:pos] if not isinstance(s, (int, np.integer)))
            if hi - lo == n:  # consecutive: the span is the answer
                return spanned, None, axis
            if (hi - lo) * row_bytes <= SPAN_BYTES or hi - lo <= SPAN_RATIO * n:
                return spanned, item - lo, axis
            return None
    return None
