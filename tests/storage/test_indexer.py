"""ptd.storage.indexer, the one indexer: every engine of both backends (memory maps, ptd's
chunk decode, the store library's own read) answers ``Backend.read`` of any selection -- index
arrays unsorted with repeats, negative values and steps, bool masks, joint arrays, ints, empty
-- exactly as numpy does, and refuses an out-of-range one naming the key. Stores are written
with h5py and zarr-python, never through ptd."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr

from ptd.errors import PtdError
from ptd.storage.h5.backend import H5Backend
from ptd.storage.indexer import Joint, project, read
from ptd.storage.zarr.backend import ZarrBackend
from ptd.storage.zarr.private import decode_sync

SHAPE, CHUNKS = (37, 5, 3), (8, 2, 3)
DATA = np.arange(np.prod(SHAPE), dtype="<f4").reshape(SHAPE)

#: (format, layout): how the store's library writes the array, and the mode ptd opens it in
LAYOUTS = {
    "h5-gzip-shuffle": ("h5", "r"),  # ptd decodes the chunks
    "h5-contiguous": ("h5", "r"),  # a memory map
    "h5-gzip-writable": ("h5", "r+"),  # h5py reads (ptd decodes read-only files only)
    "zarr-zstd": ("zarr", "r"),
    "zarr-sharded": ("zarr", "r"),
    "zarr-raw": ("zarr", "r"),  # mapped chunk files
}


def _write(tmp: Path, layout: str) -> str:
    if layout.startswith("h5"):
        path = str(tmp / f"{layout}.h5")
        with h5py.File(path, "w") as f:
            if layout == "h5-contiguous":
                f.create_dataset("x", data=DATA)
            else:
                f.create_dataset("x", data=DATA, chunks=CHUNKS, compression="gzip", shuffle=True)
        return path
    path = str(tmp / f"{layout}.zarr")
    root = zarr.open_group(path, mode="w")
    kw: dict[str, Any] = {"chunks": CHUNKS}
    if layout == "zarr-sharded":
        kw = {"chunks": (4, 1, 3), "shards": CHUNKS}
    elif layout == "zarr-raw":
        kw["compressors"] = None
    # created, then written: zarr 3.1.2's create_array(data=..., shards=...) stores wrong
    # values for this layout (zarr itself reads back other numbers)
    arr = root.create_array("x", shape=DATA.shape, dtype=DATA.dtype, **kw)
    arr[...] = DATA
    return path


@pytest.fixture(scope="module", params=sorted(LAYOUTS))
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    fmt, mode = LAYOUTS[request.param]
    path = _write(tmp_path_factory.mktemp("ix"), request.param)
    be = (H5Backend if fmt == "h5" else ZarrBackend).open(path, mode)
    yield be
    be.close()


def _numpy(data: np.ndarray, selection: tuple[Any, ...]) -> np.ndarray:
    """Orthogonal indexing by numpy, one entry at a time (a Joint pointwise over its dims)."""
    out = data
    axis = 0
    for item in selection:
        if isinstance(item, Joint):
            out = out[(slice(None),) * axis + tuple(item.arrays)]
            axis += 1
        elif isinstance(item, (slice, np.ndarray)):  # keeps its dim
            out = out[(slice(None),) * axis + (item,)]
            axis += 1
        else:
            out = out[(slice(None),) * axis + (item,)]
    return out


def _entry(rng: np.random.Generator, size: int) -> Any:
    kind = rng.integers(6)
    if kind == 0:
        return int(rng.integers(-size, size))
    if kind == 1:
        start, stop = (int(v) if rng.random() < 0.8 else None for v in rng.integers(-size, size, 2))
        step = int(rng.choice([1, 2, 3, -1, -2, -5]))
        return slice(start, stop, step)
    if kind == 2:  # unsorted, with repeats, some negative
        return rng.integers(-size, size, int(rng.integers(1, 2 * size)))
    if kind == 3:
        return rng.random(size) < 0.4
    if kind == 4:
        return np.array([], dtype=np.int64)
    return slice(None)


def _selections(seed: int, n: int) -> list[tuple[Any, ...]]:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        ndims = int(rng.integers(0, 4))
        sel = tuple(_entry(rng, SHAPE[d]) for d in range(ndims))
        out.append(sel)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_every_engine_matches_numpy(backend: Any, seed: int) -> None:
    for sel in _selections(seed, 60):
        want = _numpy(DATA, sel)
        got = backend.read(("x",), sel)
        assert got.shape == want.shape, sel
        np.testing.assert_array_equal(got, want, err_msg=str(sel))
        out = np.full(want.shape, -1, DATA.dtype)  # a caller's buffer: filled, returned
        assert backend.read(("x",), sel, out=out) is out
        np.testing.assert_array_equal(out, want, err_msg=str(sel))


@pytest.mark.parametrize(
    "sel",
    [
        (Joint((np.array([36, 0, 9, 9, -1]), np.array([4, 0, 1, 1, 2]))),),
        (slice(None, None, -1), Joint((np.array([4, 0, 4]), np.array([2, 2, 0])))),
        (np.array([30, 2, 30]), slice(None), np.array([2, 0])),  # two orthogonal arrays
        (np.array([9, 1, 17, 1, 33]), 3, np.array([1, 2, 1])),
    ],
    ids=["joint", "reversed+joint", "two-arrays", "arrays-around-an-int"],
)
def test_several_index_arrays(backend: Any, sel: tuple[Any, ...]) -> None:
    np.testing.assert_array_equal(backend.read(("x",), sel), _numpy(DATA, sel))


@pytest.mark.parametrize(
    "sel",
    [(37,), (-38,), (np.array([0, 37]),), (np.array([-38]),), (slice(None), 5), (0, 0, 0, 0)],
    ids=["int", "negative-int", "array", "negative-array", "second-dim", "too-many"],
)
def test_out_of_range_is_refused_naming_the_key(backend: Any, sel: tuple[Any, ...]) -> None:
    with pytest.raises(PtdError, match=r"'x'"):
        backend.read(("x",), sel)


def test_each_chunk_is_visited_once_in_the_asked_order() -> None:
    """Repeats and any order are folded into the output places: one projection per chunk."""
    idx = np.array([30, 1, 30, 2, 17, 1, 16])
    ix = project((idx,), (37, 2), (8, 2))
    assert [p.coords for p in ix.chunks] == [(0, 0), (2, 0), (3, 0)]
    seen: list[tuple[int, ...]] = []
    data = np.arange(74).reshape(37, 2)

    def chunk(c: tuple[int, ...]) -> np.ndarray:
        seen.append(c)
        return data[c[0] * 8 : c[0] * 8 + 8]

    np.testing.assert_array_equal(read(ix, chunk, data.dtype), data[idx])
    assert seen == [(0, 0), (2, 0), (3, 0)]


def test_a_whole_array_chunk_takes_the_rows_in_the_asked_order() -> None:
    """A memory map is one chunk: its rows come out in the user's order, no scatter needed."""
    idx = np.array([5, 0, 5, 3])
    (proj,) = project((idx,), (6, 2)).chunks
    assert proj.out == (slice(0, 4), slice(0, 2))
    np.testing.assert_array_equal(proj.local[0], idx)


@pytest.mark.parametrize(
    "layout", ["h5-gzip-shuffle", "zarr-zstd", "zarr-sharded", "zarr-raw", "h5-contiguous"]
)
def test_random_rows_are_copied_once_after_decode(
    tmp_path: Path, layout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random rows (unsorted, repeated) go from each decoded (or mapped) chunk straight into
    the returned array: every copy the engines make writes into the result's memory, one per
    chunk touched (no sorted intermediate, no re-ordering take after it). Shown by buffer
    identity."""
    from ptd.storage import indexer
    from ptd.storage.read import decoded, shuffled
    from ptd.storage.zarr import maps as zarr_maps

    writes: list[tuple[np.ndarray, np.ndarray]] = []
    real = indexer.scatter

    def traced(out: np.ndarray, proj: Any, chunk: np.ndarray, **kw: Any) -> None:
        writes.append((out, chunk))
        real(out, proj, chunk, **kw)

    for module in (indexer, decoded, shuffled, zarr_maps):
        monkeypatch.setattr(module, "scatter", traced)
    fmt, mode = LAYOUTS[layout]
    if fmt == "zarr" and layout != "zarr-raw" and decode_sync(zarr.codecs.BytesCodec()) is None:
        pytest.skip("zarr < 3.1.6 has no synchronous codec decode: zarr reads its own chunks")
    be = (H5Backend if fmt == "h5" else ZarrBackend).open(_write(tmp_path, layout), mode)
    try:
        idx = np.array([33, 2, 33, 17, 5, 30, 2])
        got = be.read(("x",), (idx,))
        np.testing.assert_array_equal(got, DATA[idx])
        if layout == "h5-contiguous":
            # a memory map is one chunk: a minibatch of rows is one take from the map into a
            # new array (the one copy), no scatter
            assert writes == []
            src = be._maps.source(("x",), be._array_handle(("x",)).ds)
            assert not np.shares_memory(got, src)
            assert got.base is None or not np.shares_memory(got.base, src)
            return
        assert writes
        for out, _ in writes:
            assert np.shares_memory(out, got)
        # each chunk touched once: (row chunks) x (chunks across dim 1)
        rows, cols = {"h5-contiguous": SHAPE[:2], "zarr-sharded": (4, 1)}.get(layout, CHUNKS[:2])
        assert len(writes) == len(np.unique(idx // rows)) * -(-SHAPE[1] // cols)
    finally:
        be.close()
