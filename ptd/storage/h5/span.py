"""Reading an index array of rows from an HDF5 dataset: as the span it covers, then taken
from, when that span is small or dense (h5py's point selection is slow)."""

from __future__ import annotations

import h5py
import numpy as np

from ptd.storage.api import Selection, selection_shape

__all__ = ["read_span"]

#: an index array is read as the span between its first and last row when that span is at
#: most this many bytes, or at most this many times the rows asked (h5py point selection is slow)
_SPAN_BYTES = 256 << 10
_SPAN_RATIO = 2


def read_span(
    ds: h5py.Dataset, shape: tuple[int, ...], dtype: np.dtype, selection: Selection
) -> np.ndarray:
    """``ds[selection]`` (``ds`` has ``shape`` and ``dtype``); an index array is read as the
    span it covers, then taken from, when that span is small or dense (h5py's point selection
    is slow)."""
    out_shape = selection_shape(shape, selection)
    if 0 in out_shape:
        return np.empty(out_shape, dtype)
    for pos, item in enumerate(selection):
        if isinstance(item, np.ndarray):
            n = item.shape[0]
            lo, hi = int(item[0]), int(item[-1]) + 1
            spanned = selection[:pos] + (slice(lo, hi),) + selection[pos + 1 :]
            if hi - lo == n:  # consecutive: a plain slice
                return ds[spanned]
            row_bytes = dtype.itemsize * int(np.prod(shape[pos + 1 :], dtype=np.int64))
            if (hi - lo) * row_bytes <= _SPAN_BYTES or hi - lo <= _SPAN_RATIO * n:
                axis = sum(1 for s in selection[:pos] if not isinstance(s, (int, np.integer)))
                return np.take(ds[spanned], item - lo, axis=axis)
            return ds[selection]
    return ds[selection]
