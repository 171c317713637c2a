"""Reading an index array of rows from an HDF5 dataset: as the span it covers, then taken
from, when that span is small or dense (h5py's point selection is slow): :func:`covering_span`
decides, :func:`read_span` reads. This is the store library's own path (an array ptd neither
maps nor decodes itself); the indexer (:mod:`ptd.storage.indexer`) hands it its library form,
sorted unique rows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import h5py
import numpy as np

from ptd.storage.api import Selection, selection_shape

__all__ = ["SPAN_BYTES", "SPAN_RATIO", "covering_span", "read_span"]

#: an index array is read as the span between its first and last row when that span is at
#: most this many bytes, or at most this many times the rows asked (:func:`covering_span`)
SPAN_BYTES = 256 << 10
SPAN_RATIO = 2


def covering_span(
    selection: Sequence[Any], shape: Sequence[int], itemsize: int
) -> tuple[tuple[Any, ...], np.ndarray | None, int] | None:
    """For a selection with a sorted index array: ``(the selection with the array replaced by
    the span it covers, the rows to take from the span's read or None when the rows are
    consecutive (the span is the answer), the output axis)`` when that span is small (at most
    :data:`SPAN_BYTES`) or dense (at most :data:`SPAN_RATIO` times the rows asked), else None
    (read the rows themselves).

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


def read_span(
    ds: h5py.Dataset, shape: tuple[int, ...], dtype: np.dtype, selection: Selection
) -> np.ndarray:
    """``ds[selection]`` (``ds`` has ``shape`` and ``dtype``), an index array read as the span
    it covers when :func:`covering_span` says so."""
    out_shape = selection_shape(shape, selection)
    if 0 in out_shape:
        return np.empty(out_shape, dtype)
    span = covering_span(selection, shape, dtype.itemsize)
    if span is None:
        return ds[selection]
    spanned, take, axis = span
    got = ds[spanned]
    return got if take is None else np.take(got, take, axis=axis)
