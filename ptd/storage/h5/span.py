"""Reading an index array of rows from an HDF5 dataset: as the span it covers, then taken
from, when that span is small or dense (h5py's point selection is slow); the decision is the
read planner's (:func:`ptd.storage.read.plan.covering_span`)."""

from __future__ import annotations

import h5py
import numpy as np

from ptd.storage.api import Selection, selection_shape
from ptd.storage.read.plan import covering_span

__all__ = ["read_span"]


def read_span(
    ds: h5py.Dataset, shape: tuple[int, ...], dtype: np.dtype, selection: Selection
) -> np.ndarray:
    """``ds[selection]`` (``ds`` has ``shape`` and ``dtype``), an index array read as the span
    it covers when :func:`~ptd.storage.read.plan.covering_span` says so."""
    out_shape = selection_shape(shape, selection)
    if 0 in out_shape:
        return np.empty(out_shape, dtype)
    span = covering_span(selection, shape, dtype.itemsize)
    if span is None:
        return ds[selection]
    spanned, take, axis = span
    got = ds[spanned]
    return got if take is None else np.take(got, take, axis=axis)
