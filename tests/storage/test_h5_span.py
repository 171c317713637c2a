"""ptd.storage.h5.span: an HDF5 index read asks for the span its rows cover when that span is
dense or small, and reads the rows themselves otherwise; either way the answer is numpy's."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from ptd.storage.h5.span import SPAN_BYTES, covering_span, read_span


def test_covering_span() -> None:
    sel = (np.array(list(range(0, 200, 2))),)
    spanned, take, axis = covering_span(sel, (1000, 8), 4)  # dense: 2x the rows
    assert spanned == (slice(0, 199),)
    assert take is not None
    assert take.tolist() == list(range(0, 200, 2))
    assert axis == 0
    # sparse and large: read the rows themselves
    assert covering_span((np.array([0, 10**6 - 1]),), (10**6, 1024), 4) is None
    # sparse but small: the span, at most SPAN_BYTES
    rows = np.array([0, SPAN_BYTES // 4 - 1])
    assert covering_span((rows,), (10**6, 1), 4) is not None
    # an index array after an int: the output axis skips the int's dim
    spanned, take, axis = covering_span((2, slice(0, 3), np.array([1, 3])), (4, 5, 6), 8)
    assert spanned == (2, slice(0, 3), slice(1, 4))
    assert axis == 1


@pytest.mark.parametrize(
    "selection",
    [
        (np.array([3, 4, 9]),),  # dense: the span, then taken from
        (np.array([0, 999]),),  # sparse: the rows themselves
        (np.array([5, 6, 7]),),  # consecutive: the span is the answer
        (slice(2, 4), np.array([0, 2])),
        (np.array([], dtype=np.int64),),
    ],
)
def test_read_span_reads_like_numpy(tmp_path, selection) -> None:
    data = np.arange(1000 * 3, dtype=np.float32).reshape(1000, 3)
    with h5py.File(tmp_path / "x.h5", "w") as f:
        f["x"] = data
        got = read_span(f["x"], data.shape, data.dtype, selection)
    expected = data
    for axis, item in enumerate(selection):
        expected = expected[(slice(None),) * axis + (item,)]
    np.testing.assert_array_equal(got, expected)
