"""ptd.storage.read.plan: the one selection -> chunk planner, against numpy on every kind of
selection (repeats, unsorted rows, ints, strided slices) and chunking."""

from __future__ import annotations

import numpy as np
import pytest

from ptd.storage.read.plan import (
    chunk_pieces,
    covering_span,
    normalize,
    out_shape,
    plan_dim,
    sort_first,
    take_local,
)


def _read(data: np.ndarray, chunks: tuple[int, ...], selection: tuple) -> np.ndarray:
    """What a chunk reader does with the plan: each piece copied out of its chunk."""
    sel = normalize(selection, data.shape)
    out = np.empty(out_shape(data.shape, sel), data.dtype)
    for combo in chunk_pieces(sel, data.shape, chunks):
        coords = tuple(p[0] for p in combo)
        chunk = data[tuple(slice(k * c, (k + 1) * c) for k, c in zip(coords, chunks, strict=True))]
        dst = tuple(p[2] for p in combo if p[2] is not None)
        out[dst] = take_local(chunk, tuple(p[1] for p in combo))
    return out


def _numpy(data: np.ndarray, selection: tuple) -> np.ndarray:
    """Orthogonal (h5py's) indexing by numpy, one axis at a time: ints drop their axis."""
    out = data
    for axis in reversed(range(len(selection))):
        item = selection[axis]
        if isinstance(item, slice):
            out = out[(slice(None),) * axis + (item,)]
        else:
            out = np.take(out, item, axis=axis)  # an int drops the axis, an array keeps it
    return out


@pytest.mark.parametrize(
    "rows",
    [[2, 4, 4], [4, 4, 5], [3, 1, 8, 6], [0, 1, 2], [9, 0, 9, 0], [5], [7, 6, 5, 4]],
    ids=str,
)
@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 10])
def test_index_arrays_read_like_numpy(rows: list[int], chunk: int) -> None:
    data = np.arange(40).reshape(10, 4)
    sel = (np.array(rows),)
    assert np.array_equal(_read(data, (chunk, 3), sel), _numpy(data, sel))


def test_random_selections_read_like_numpy() -> None:
    rng = np.random.default_rng(0)
    data = np.arange(17 * 6 * 5).reshape(17, 6, 5)
    for _ in range(300):
        chunks = tuple(int(rng.integers(1, s + 2)) for s in data.shape)
        picks = []
        arr_dim = int(rng.integers(0, 3))
        for d, size in enumerate(data.shape):
            kind = rng.integers(0, 3)
            if d == arr_dim:
                picks.append(rng.integers(0, size, size=int(rng.integers(1, 8))))
            elif kind == 0:
                picks.append(int(rng.integers(-size, size)))
            else:
                a, b = sorted(int(x) for x in rng.integers(0, size + 1, size=2))
                picks.append(slice(a, b, int(rng.integers(1, 4))))
        sel = tuple(picks)
        want = _numpy(data, tuple(normalize(sel, data.shape)))
        assert np.array_equal(_read(data, chunks, sel), want), (sel, chunks)


def test_sort_first_only_when_the_rows_cross_chunks_out_of_order() -> None:
    shape, chunks = (100,), (10,)
    assert sort_first((np.array([1, 5, 3]),), shape, chunks) is None  # one chunk
    assert sort_first((np.array([1, 15, 15]),), shape, chunks) is None  # in order
    pos, rows, inverse, axis = sort_first((np.array([15, 1, 15]),), shape, chunks)
    assert (pos, rows.tolist(), inverse.tolist(), axis) == (0, [1, 15], [1, 0, 1], 0)


def test_normalize_refuses_out_of_range() -> None:
    with pytest.raises(IndexError, match="out of range for a dimension of size 5"):
        normalize((5,), (5,))
    with pytest.raises(IndexError, match="out of range"):
        normalize((np.array([0, 5]),), (5,))
    assert normalize((-5,), (5,)) == (0,)


def test_plan_dim_pieces() -> None:
    assert plan_dim(7, 10, 4) == [(1, 3, None)]
    assert plan_dim(slice(0, 0), 10, 4) == []
    pieces = plan_dim(np.array([2, 4, 4]), 10, 8)  # repeats: not a slice
    assert len(pieces) == 1
    assert isinstance(pieces[0][1], np.ndarray)


def test_covering_span() -> None:
    sel = (np.array(list(range(0, 200, 2))),)
    spanned, take, axis = covering_span(sel, (1000, 8), 4)  # dense: 2x the rows
    assert spanned == (slice(0, 199),)
    assert take is not None
    assert take.tolist() == list(range(0, 200, 2))
    assert axis == 0
    # sparse and large: read the rows themselves
    assert covering_span((np.array([0, 10**6 - 1]),), (10**6, 1024), 4) is None
