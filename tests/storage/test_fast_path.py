"""The memory-map fast path (issue 8): every read it serves equals the library's own path.

Each comparison opens the same store twice, ``fast_path=True`` and ``fast_path=False``, and
checks that the fast store really reads from maps (so that equality is not trivially the library
path twice). Both backends, every dtype ptd stores, every index kind the core supports, nested,
zero-size and 0-d leaves; then writes in writable modes, pickling, closing, and the switch.
"""

from __future__ import annotations

import gc
import mmap
import os
import pickle
import sys

import h5py
import numpy as np
import pytest
import torch
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ptd import PersistentTensorDict, TensorDict
from ptd.errors import ClosedStoreError, PtdError
from ptd.storage.h5.backend import H5Backend
from ptd.storage.read import mapped as _mmap
from ptd.storage.zarr.backend import ZarrBackend

SUFFIX = {"h5": ".h5", "zarr": ".zarr"}
N = 9

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
    torch.complex128,
] + [getattr(torch, n) for n in ("float8_e4m3fn", "float8_e5m2") if hasattr(torch, n)]


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _values(dtype: torch.dtype, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if dtype.is_complex:
        return torch.randn(shape, generator=g, dtype=dtype)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 10).to(dtype)
    lo = 0 if dtype in (torch.uint8, torch.uint16, torch.uint32, torch.uint64) else -100
    return torch.randint(lo, 120, shape, generator=g).to(dtype)


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def batch_data(batch: tuple[int, ...]) -> dict:
    """Every dtype (shapes ``batch + (3,)``), a few more shapes, nested groups, a zero-size
    trailing dim."""
    out: dict = {_name(d): _values(d, batch + (3,), i) for i, d in enumerate(DTYPES)}
    out["flat"] = _values(torch.float32, batch, 100)
    out["cube"] = _values(torch.int64, batch + (2, 4), 101)
    out["empty"] = torch.zeros(batch + (0,), dtype=torch.float32)
    out["n"] = {
        "x": _values(torch.float64, batch + (5,), 102),
        "m": {"y": _values(torch.int32, batch, 103), "b": _values(torch.bfloat16, batch, 104)},
    }
    return out


def write_store(tmp_path, backend: str, data: dict, batch, name: str = "s", **kwargs) -> str:
    path = str(tmp_path / f"{name}{SUFFIX[backend]}")
    PersistentTensorDict.from_dict(
        data, path, backend=backend, batch_size=list(batch), **kwargs
    ).close()
    return path


def open_pair(path: str, backend: str, **kwargs):
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    return opener(path, fast_path=True, **kwargs), opener(path, fast_path=False, **kwargs)


def leaf_items(td) -> dict:
    return {k if isinstance(k, str) else "/".join(k): td.get(k) for k in td.keys(True, True)}


def assert_identical(got, expected) -> None:
    g, e = leaf_items(got), leaf_items(expected)
    assert sorted(g) == sorted(e)
    for k, ev in e.items():
        gv = g[k]
        assert gv.dtype == ev.dtype, k
        assert gv.shape == ev.shape, k
        assert torch.equal(_bits(gv), _bits(ev)), k


def _bits(t: torch.Tensor) -> torch.Tensor:
    """bfloat16/float8 compared bit for bit (torch has no equality for float8)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16)
    if t.dtype.is_floating_point and t.element_size() == 1:
        return t.view(torch.uint8)
    return t


def mapped(p, key: tuple[str, ...]) -> bool:
    """Whether the store of ``p`` serves ``key`` from a memory map."""
    be = p._store.backend
    if be._maps is None:
        return False
    if isinstance(be, H5Backend):
        return be._maps.source(key, be._entry(key)[0]) is not None
    return be._maps.layout(key, be._array(key)) is not None


def tensor_keys(p) -> list[tuple[str, ...]]:
    return [k if isinstance(k, tuple) else (k,) for k in p.keys(True, True)]


def proc_maps_of(path: str) -> list[str]:
    with open("/proc/self/maps") as f:
        return [line for line in f if path in line]


def proc_fds_of(path: str) -> list[str]:
    out = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(path):
            out.append(target)
    return out


needs_proc = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")


# --------------------------------------------------------------------------------------------
# every dtype, every index kind, nested, zero-size, 0-d
# --------------------------------------------------------------------------------------------

INDEXES_1D = [
    "full",
    (),
    0,
    3,
    -1,
    slice(None),
    slice(2, 7),
    slice(1, 9, 3),
    slice(7, 2, -1),
    slice(None, None, -2),
    slice(4, 4),
    [4, 0, 4],
    [],
    [8],
    torch.tensor([7, 2, 2, 5, 0]),
    torch.tensor([3, 1, 8, 6]),
    torch.tensor([5]),
    np.array([8, 1, 1]),
    torch.arange(N).flip(0),
    torch.tensor([True, False, True, True, False, False, True, False, True]),
    torch.zeros(N, dtype=torch.bool),
    Ellipsis,
    (Ellipsis,),
    (slice(2, 8), ...),
    range(1, 7, 2),
]


def _ids(idx) -> str:
    return repr(idx).replace(" ", "")[:40]


@pytest.fixture(scope="module", params=["h5", "zarr"])
def stores_1d(request, tmp_path_factory):
    backend = request.param
    tmp = tmp_path_factory.mktemp(f"fp1d-{backend}")
    data = batch_data((N,))
    plain = write_store(tmp, backend, data, (N,), "plain")
    # zarr: chunks of 4 rows (several chunk files per leaf, an edge chunk); h5: chunked
    # datasets, which keep h5py's path
    chunked = write_store(tmp, backend, data, (N,), "chunked", chunks=4)
    pairs = {"plain": open_pair(plain, backend), "chunked": open_pair(chunked, backend)}
    yield backend, pairs
    for fast, slow in pairs.values():
        fast.close()
        slow.close()


@pytest.mark.parametrize("layout", ["plain", "chunked"])
@pytest.mark.parametrize("idx", INDEXES_1D, ids=_ids)
def test_every_index_kind_matches_the_library_path(stores_1d, layout, idx) -> None:
    _backend, pairs = stores_1d
    fast, slow = pairs[layout]
    if isinstance(idx, str):
        got, expected = fast.to_tensordict(), slow.to_tensordict()
    else:
        got, expected = fast[idx].to_tensordict(), slow[idx].to_tensordict()
    assert got.batch_size == expected.batch_size
    assert_identical(got, expected)
    if not isinstance(idx, str):  # a leaf read straight from the view, too
        for key in (("float32",), ("n", "m", "b"), ("bool",)):
            a, b = fast[idx][key], slow[idx][key]
            assert a.dtype == b.dtype
            assert a.shape == b.shape
            assert torch.equal(_bits(a), _bits(b))


@pytest.mark.parametrize("layout", ["plain", "chunked"])
def test_the_fast_store_reads_from_maps(stores_1d, layout) -> None:
    backend, pairs = stores_1d
    fast, slow = pairs[layout]
    keys = tensor_keys(fast)
    assert slow._store.backend._maps is None
    for key in keys:
        # zero-size: h5 has nothing to map (zarr serves the empty result from its layout)
        expect = key != ("empty",) or backend == "zarr"
        if backend == "h5" and layout == "chunked":
            expect = False  # chunked h5 datasets keep h5py's path
        assert mapped(fast, key) is expect, key


def test_views_of_views_match(stores_1d) -> None:
    _backend, pairs = stores_1d
    for fast, slow in pairs.values():
        for chain in (
            (slice(2, 8), [3, 0, 3]),
            (torch.tensor([5, 1, 5, 7]), slice(1, None)),
            (slice(None, None, -1), torch.tensor([True, False] * 4 + [True]), 0),
            ([8, 2, 6], [2, 2, 0]),
        ):
            a, b = fast, slow
            for idx in chain:
                a, b = a[idx], b[idx]
            assert_identical(a.to_tensordict(), b.to_tensordict())


INDEXES_2D = [
    (1, 2),
    (slice(None), 3),
    (2, slice(1, 4)),
    (slice(0, 4, 2), slice(4, 0, -1)),
    ([3, 0, 3], slice(None)),
    (slice(None), [4, 4, 1]),
    ([0, 2], [1, 3]),
    (torch.tensor([2, 0]), 4),
    (1, torch.tensor([4, 0, 0])),
    torch.tensor([[True, False, True, False, True]] * 4),
    (torch.tensor([True, False, False, True]), slice(1, 3)),
    (..., 2),
    (..., [0, 4]),
    ([], slice(None)),
]


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_two_batch_dims(tmp_path, backend) -> None:
    data = {
        "a": _values(torch.float32, (4, 5, 3), 1),
        "b": _values(torch.int16, (4, 5), 2),
        "n": {"c": _values(torch.bool, (4, 5, 2), 3)},
    }
    path = write_store(tmp_path, backend, data, (4, 5), "grid")
    fast, slow = open_pair(path, backend)
    try:
        assert all(mapped(fast, k) for k in tensor_keys(fast))
        for idx in INDEXES_2D:
            assert_identical(fast[idx].to_tensordict(), slow[idx].to_tensordict())
    finally:
        fast.close()
        slow.close()


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_zero_size_batch(tmp_path, backend) -> None:
    path = write_store(tmp_path, backend, batch_data((0,)), (0,), "zero")
    fast, slow = open_pair(path, backend)
    try:
        for idx in ("full", slice(None), [], slice(0, 0), torch.zeros(0, dtype=torch.bool), ...):
            a = fast.to_tensordict() if idx == "full" else fast[idx].to_tensordict()
            b = slow.to_tensordict() if idx == "full" else slow[idx].to_tensordict()
            assert_identical(a, b)
    finally:
        fast.close()
        slow.close()


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_zero_d_leaves(tmp_path, backend) -> None:
    data = {_name(d): _values(d, (), i) for i, d in enumerate(DTYPES)}
    data["n"] = {"x": torch.tensor(2.5), "y": torch.tensor(True)}
    path = write_store(tmp_path, backend, data, (), "scalars")
    fast, slow = open_pair(path, backend)
    try:
        assert_identical(fast.to_tensordict(), slow.to_tensordict())
        for key in tensor_keys(fast):
            assert torch.equal(
                fast[key].view(-1).view(torch.uint8), slow[key].view(-1).view(torch.uint8)
            )
        # zarr maps 0-d chunks too; h5 keeps h5py for 0-d datasets
        assert mapped(fast, ("float32",)) is (backend == "zarr")
    finally:
        fast.close()
        slow.close()


@st.composite
def _index(draw, n: int):
    kind = draw(st.sampled_from(["int", "slice", "list", "mask", "tensor"]))
    if kind == "int":
        return draw(st.integers(-n, n - 1))
    if kind == "slice":
        start = draw(st.none() | st.integers(-n - 2, n + 2))
        stop = draw(st.none() | st.integers(-n - 2, n + 2))
        step = draw(st.none() | st.integers(-3, 3).filter(bool))
        return slice(start, stop, step)
    if kind == "mask":
        return torch.tensor(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    values = draw(st.lists(st.integers(-n, n - 1), max_size=2 * n))
    return values if kind == "list" else torch.tensor(values, dtype=torch.int64)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_index_chains(stores_1d, data) -> None:
    _backend, pairs = stores_1d
    layout = data.draw(st.sampled_from(["plain", "chunked"]))
    fast, slow = pairs[layout]
    for _ in range(data.draw(st.integers(1, 3))):
        if not fast.batch_size or fast.batch_size[0] == 0:
            break
        idx = data.draw(_index(fast.batch_size[0]))
        fast, slow = fast[idx], slow[idx]
    assert_identical(fast.to_tensordict(), slow.to_tensordict())


# --------------------------------------------------------------------------------------------
# the backend level: selections, read_direct
# --------------------------------------------------------------------------------------------

SELECTIONS = [
    (),
    (2,),
    (slice(1, 5, 2),),
    (np.array([0, 3, 4]),),
    (1, np.array([0, 3])),
    (np.array([1, 2]), 3),
    (slice(0, 5, 1), 2, np.array([1, 5])),
    (4, 3, 5),
    (2, slice(1, 4, 2), np.array([0, 2, 3, 5])),
    (np.array([], dtype=np.int64),),
    (slice(2, 2, 1),),
    (1, slice(3, 3, 1), np.array([1])),
]


def _backend_pair(tmp_path, backend: str, chunks=None, dtype=np.float32):
    path = str(tmp_path / f"b{SUFFIX[backend]}")
    cls = H5Backend if backend == "h5" else ZarrBackend
    be = cls.open(path, "w")
    full = (np.arange(5 * 4 * 6) * 1.5).reshape(5, 4, 6).astype(dtype)
    be.create_array(("g",), shape=full.shape, dtype=full.dtype, data=full, chunks=chunks)
    be.close()
    return cls.open(path, "r", fast_path=True), cls.open(path, "r", fast_path=False), full


@pytest.mark.parametrize(("backend", "chunks"), [("h5", None), ("zarr", None), ("zarr", (2, 3, 4))])
def test_backend_selections(tmp_path, backend, chunks) -> None:
    fast, slow, full = _backend_pair(tmp_path, backend, chunks)
    try:
        assert fast._maps is not None
        assert slow._maps is None
        for sel in SELECTIONS:
            a, b = fast.read(("g",), sel), slow.read(("g",), sel)
            assert type(a) is np.ndarray, sel
            assert a.dtype == b.dtype, sel
            assert a.shape == b.shape, sel
            assert np.array_equal(a, b), sel
            assert a.flags.writeable, sel
            assert a.flags.c_contiguous, sel
            if a.size:
                assert not np.shares_memory(a, fast.read(("g",), sel)), sel  # new arrays
        # unsorted, repeated indices, in the asked order: from maps and through the library
        for sel in (
            (np.array([3, 0, 3, 4]),),
            (2, np.array([3, 0, 0])),
            (np.array([4, 1, 1]), 1, slice(0, 6, 2)),
        ):
            got = fast.read(("g",), sel)
            ref = full
            axis = 0
            for s in sel:
                if isinstance(s, np.ndarray):
                    ref = np.take(ref, s, axis=axis)
                    axis += 1
                elif isinstance(s, slice):
                    ref = ref[(slice(None),) * axis + (s,)]
                    axis += 1
                else:
                    ref = ref[(slice(None),) * axis + (s,)]
            assert np.array_equal(got, ref), sel
            assert np.array_equal(slow.read(("g",), sel), ref), sel
        with pytest.raises(PtdError):
            fast.read(("g",), (np.array([2, 7]),))
    finally:
        fast.close()
        slow.close()


def test_read_selection_orthogonal_semantics() -> None:
    """Unlike numpy, an int next to the index array does not join it into one advanced
    index: the array keeps its position (h5py's rule)."""
    a = np.arange(5 * 4 * 6).reshape(5, 4, 6)
    got = _mmap.read_selection(a, (slice(0, 5, 2), 1, np.array([0, 5])))
    assert got.shape == (3, 2)
    assert np.array_equal(got, a[0:5:2, 1][:, [0, 5]])
    got = _mmap.read_selection(a, (np.array([1, 3]), slice(0, 4, 1), 2))
    assert np.array_equal(got, a[[1, 3], :, 2])


# --------------------------------------------------------------------------------------------
# layouts that are mapped, and those that keep the library's path
# --------------------------------------------------------------------------------------------


def _compare_raw(path: str, backend: str, key: tuple[str, ...], sels) -> tuple[bool, bool]:
    cls = H5Backend if backend == "h5" else ZarrBackend
    fast, slow = cls.open(path, "r", fast_path=True), cls.open(path, "r", fast_path=False)
    try:
        for sel in sels:
            a, b = fast.read(key, sel), slow.read(key, sel)
            assert a.dtype == b.dtype, sel
            assert a.shape == b.shape, sel
            assert np.array_equal(a, b), sel
        if isinstance(fast, H5Backend):
            return fast._maps.source(key, fast._entry(key)[0]) is not None, True
        return fast._maps.layout(key, fast._array(key)) is not None, True
    finally:
        fast.close()
        slow.close()


SEL_1D = [(), (3,), (slice(1, 8, 3),), (np.array([0, 4, 9]),)]


def test_h5_layouts(tmp_path) -> None:
    path = str(tmp_path / "layouts.h5")
    data = np.arange(10, dtype=np.float64) * 3.25
    with h5py.File(path, "w", userblock_size=512) as f:
        f.create_dataset("plain", data=data)
        f.create_dataset("big_endian", data=data.astype(">f8"))
        f.create_dataset("big_i4", data=np.arange(10, dtype=">i4"))
        f.create_dataset("gzip", data=data, chunks=(4,), compression="gzip")
        f.create_dataset("chunked", data=data, chunks=(3,))
        f.create_dataset("unallocated", shape=(10,), dtype="f8")
        f.create_dataset("filled", shape=(10,), dtype="i2", fillvalue=7)
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        space = h5py.h5s.create_simple((10,))
        dsid = h5py.h5d.create(f.id, b"compact", h5py.h5t.NATIVE_DOUBLE, space, dcpl=dcpl)
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, data)
    expect = {
        "plain": True,
        "big_endian": True,
        "big_i4": True,
        "gzip": False,
        "chunked": False,
        "unallocated": False,
        "filled": False,
        "compact": False,
    }
    for name, is_mapped in expect.items():
        got, _ = _compare_raw(path, "h5", (name,), SEL_1D)
        assert got is is_mapped, name


def test_h5_big_endian_keeps_its_dtype(tmp_path) -> None:
    path = str(tmp_path / "be.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(6, dtype=">i4").reshape(3, 2))
    fast = PersistentTensorDict.from_h5(path, fast_path=True)
    slow = PersistentTensorDict.from_h5(path, fast_path=False)
    be = fast._store.backend
    assert be.read(("x",), ()).dtype == np.dtype(">i4")
    assert mapped(fast, ("x",))
    assert_identical(fast[[2, 0]].to_tensordict(), slow[[2, 0]].to_tensordict())
    fast.close()
    slow.close()


def test_h5_non_default_driver_keeps_h5py(tmp_path) -> None:
    path = str(tmp_path / "core.h5")
    with h5py.File(path, "w") as f:
        f.create_dataset("x", data=np.arange(8.0))
    with h5py.File(path, "r", driver="core") as f:
        p = PersistentTensorDict(group=f, batch_size=[8], fast_path=True)
        assert p._store.backend._maps is None
        assert torch.equal(p[[3, 1]]["x"], torch.tensor([3.0, 1.0], dtype=torch.float64))


def test_zarr_layouts(tmp_path) -> None:
    from zarr.codecs import BytesCodec

    path = str(tmp_path / "layouts.zarr")
    g = zarr.open_group(path, mode="w")
    data = np.arange(10, dtype=np.int32) * 3
    a = g.create_array("plain", shape=(10,), chunks=(4,), dtype="i4", compressors=None)
    a[:] = data
    a = g.create_array(
        "big_endian",
        shape=(10,),
        chunks=(3,),
        dtype=">i4",
        compressors=None,
        serializer=BytesCodec(endian="big"),
    )
    a[:] = data
    a = g.create_array(
        "sparse", shape=(10,), chunks=(2,), dtype="f4", compressors=None, fill_value=-1.5
    )
    a[2:5] = 4.0  # chunks 0, 3, 4 are never written: fill value
    a = g.create_array(
        "dot_keys",
        shape=(10,),
        chunks=(4,),
        dtype="u2",
        compressors=None,
        chunk_key_encoding={"name": "default", "separator": "."},
    )
    a[:] = data
    a = g.create_array(
        "v2_keys",
        shape=(10,),
        chunks=(4,),
        dtype="u2",
        compressors=None,
        chunk_key_encoding={"name": "v2", "separator": "."},
    )
    a[:] = data
    a = g.create_array("big_chunk", shape=(10,), chunks=(16,), dtype="i8", compressors=None)
    a[:] = data
    a = g.create_array("compressed", shape=(10,), chunks=(4,), dtype="i4")
    a[:] = data
    a = g.create_array(
        "sharded", shape=(10,), chunks=(2,), shards=(4,), dtype="i4", compressors=None
    )
    a[:8] = data[:8]
    a = g.create_array("bools", shape=(10,), chunks=(3,), dtype=bool, compressors=None)
    a[:] = data % 2 == 0
    expect = {
        "plain": True,
        "big_endian": True,
        "sparse": True,
        "dot_keys": True,
        "v2_keys": True,
        "big_chunk": True,
        "compressed": False,
        "sharded": False,
        "bools": True,
    }
    for name, is_mapped in expect.items():
        got, _ = _compare_raw(path, "zarr", (name,), SEL_1D)
        assert got is is_mapped, name
    fast = ZarrBackend.open(path, "r", fast_path=True)
    # zarr returns what the metadata says (native int32 once reopened): so does the fast path
    assert (
        fast.read(("big_endian",), ()).dtype
        == zarr.open_group(path, mode="r")["big_endian"][:].dtype
    )
    assert np.array_equal(fast.read(("sparse",), ()), [-1.5] * 2 + [4.0] * 3 + [-1.5] * 5)
    fast.close()


def test_zarr_multi_dim_chunks_match(tmp_path) -> None:
    data = {"a": _values(torch.float32, (11, 7, 5), 0), "b": _values(torch.int64, (11, 7), 1)}
    path = write_store(tmp_path, "zarr", data, (11, 7), "mc", chunks=(3, 2))
    fast, slow = open_pair(path, "zarr")
    try:
        assert all(mapped(fast, k) for k in tensor_keys(fast))
        idxs = [i for i in INDEXES_2D if "True" not in repr(i)]  # masks are for [4, 5]
        idxs += [slice(None), (slice(1, 10, 4), slice(6, 0, -3)), ([10, 0, 5, 0], 6)]
        idxs += [torch.arange(77).reshape(11, 7) % 3 == 0, ([9, 2, 9], [6, 0, 1])]
        for idx in idxs:
            assert_identical(fast[idx].to_tensordict(), slow[idx].to_tensordict())
    finally:
        fast.close()
        slow.close()


# --------------------------------------------------------------------------------------------
# writes are seen by the next read
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_writes_through_ptd_are_seen(tmp_path, backend) -> None:
    data = {"a": torch.zeros(20, 3), "n": {"b": torch.arange(20)}}
    p = PersistentTensorDict.from_dict(
        data, str(tmp_path / f"w{SUFFIX[backend]}"), backend=backend, fast_path=True
    )
    expected = {"a": data["a"].clone(), "b": data["n"]["b"].clone()}
    assert torch.equal(p["a"], expected["a"])  # maps made
    assert mapped(p, ("a",))
    assert mapped(p, ("n", "b"))
    for step in range(4):
        idx = torch.tensor([step, 7, 19 - step])
        new_a, new_b = expected["a"][idx] + step + 1, expected["b"][idx] + step + 1
        p[idx] = TensorDict({"a": new_a, "n": {"b": new_b}}, batch_size=[3])
        expected["a"][idx], expected["b"][idx] = new_a, new_b
        assert torch.equal(p["a"], expected["a"]), step
        assert torch.equal(p["n", "b"], expected["b"]), step
        assert torch.equal(p[idx]["a"], expected["a"][idx]), step
    p["a"][5] = 9  # a copy: no effect on the store
    p["a"] += 1
    expected["a"] += 1
    assert torch.equal(p["a"], expected["a"])
    # a new entry grows the file: mapped again, old views stay right
    p["c"] = torch.arange(20.0)
    assert torch.equal(p["c"], torch.arange(20.0))
    assert torch.equal(p["a"], expected["a"])
    assert mapped(p, ("c",))
    # replaced entries
    with pytest.warns(UserWarning, match="Replacing an array"):
        p.set("a", torch.ones(20, 3), inplace=False)
    assert torch.equal(p["a"], torch.ones(20, 3))
    p.close()


def test_h5_writes_through_other_handles_are_seen(tmp_path) -> None:
    path = str(tmp_path / "shared.h5")
    PersistentTensorDict.from_dict({"a": torch.zeros(10, 2)}, path).close()
    # the user's own writable h5py file, written with h5py behind ptd's back
    with h5py.File(path, "r+") as f:
        p = PersistentTensorDict(group=f, batch_size=[10], fast_path=True)
        assert torch.equal(p["a"], torch.zeros(10, 2))
        assert mapped(p, ("a",))
        f["a"][3] = [5.0, 6.0]  # small: sits in HDF5's buffers until flushed
        assert torch.equal(p["a"][3], torch.tensor([5.0, 6.0]))
        assert torch.equal(p[[3, 3]]["a"], torch.tensor([[5.0, 6.0]] * 2))
    # a second ptd store on the same file in this process ("r" sharing an "r+" handle)
    w = PersistentTensorDict.from_h5(path, mode="r+", fast_path=True)
    r = PersistentTensorDict.from_h5(path, mode="r", fast_path=True)
    assert torch.equal(r["a"][3], torch.tensor([5.0, 6.0]))
    w[4] = TensorDict({"a": torch.tensor([1.0, 2.0])}, batch_size=[])
    assert torch.equal(r["a"][4], torch.tensor([1.0, 2.0]))
    assert torch.equal(r[[4]]["a"], torch.tensor([[1.0, 2.0]]))
    r.close()
    w.close()


def test_zarr_writes_through_other_handles_are_seen(tmp_path) -> None:
    path = str(tmp_path / "shared.zarr")
    PersistentTensorDict.from_dict(
        {"a": torch.zeros(12, 2)}, path, backend="zarr", chunks=4
    ).close()
    r = PersistentTensorDict.from_zarr(path, mode="r+", fast_path=True)
    assert torch.equal(r["a"], torch.zeros(12, 2))
    assert mapped(r, ("a",))
    g = zarr.open_group(path, mode="r+")
    g["a"][5] = [3.0, 4.0]
    assert torch.equal(r["a"][5], torch.tensor([3.0, 4.0]))
    assert torch.equal(r[[5, 0]]["a"], torch.tensor([[3.0, 4.0], [0.0, 0.0]]))
    g["a"][4:8] = 0  # an all-fill chunk: zarr deletes its file
    assert not os.path.exists(os.path.join(path, "a", "c", "1", "0"))
    assert torch.equal(r["a"][5], torch.zeros(2))
    g["a"][9] = 1  # a chunk file written where there was none
    assert torch.equal(r[[9, 8]]["a"], torch.tensor([[1.0, 1.0], [0.0, 0.0]]))
    r.close()


# --------------------------------------------------------------------------------------------
# pickling, DataLoader workers, close
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["h5", "zarr"])
@pytest.mark.parametrize("fast_path", [True, False])
def test_pickle_makes_maps_again(tmp_path, backend, fast_path) -> None:
    path = write_store(tmp_path, backend, batch_data((N,)), (N,), "pk")
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    p = opener(path, fast_path=fast_path)
    before = p[[4, 1]].to_tensordict()  # maps made (fast) before pickling
    q = pickle.loads(pickle.dumps(p[[4, 1, 4]]))
    qb = q._store.backend
    assert qb is not p._store.backend
    assert (qb._maps is not None) is fast_path  # the switch travels with the pickle
    if fast_path:
        assert qb._maps is not p._store.backend._maps
    assert_identical(q.to_tensordict(), p[[4, 1, 4]].to_tensordict())
    assert_identical(before, p[[4, 1]].to_tensordict())
    q.close()
    p.close()


class _Rows(torch.utils.data.Dataset):
    def __init__(self, p) -> None:
        self.p = p

    def __len__(self) -> int:
        return self.p.batch_size[0]

    def __getitem__(self, i):
        out = self.p[i]["float32"]
        assert mapped(self.p, ("float32",)), "the worker does not read from a map"
        return out


@pytest.mark.parametrize("backend", ["h5", "zarr"])
@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_dataloader_workers(tmp_path, backend, context) -> None:
    """Forked workers inherit the parent's read-only maps; spawned ones get the store pickled
    and map it again."""
    path = write_store(tmp_path, backend, batch_data((N,)), (N,), "dl")
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    p = opener(path, fast_path=True)
    p["float32"]  # maps exist in the parent before the workers start
    loader = torch.utils.data.DataLoader(
        _Rows(p),
        batch_size=4,
        num_workers=2 if context == "fork" else 1,
        multiprocessing_context=context,
    )
    got = torch.cat(list(loader))
    assert torch.equal(got, p["float32"])
    p.close()


@needs_proc
@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_close_unmaps_everything(tmp_path, backend) -> None:
    path = write_store(
        tmp_path,
        backend,
        batch_data((N,)),
        (N,),
        "cl",
        **({"chunks": 4} if backend == "zarr" else {}),
    )
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    p = opener(path, fast_path=True)
    p[[3, 1]].to_tensordict()
    p.to_tensordict()
    assert proc_maps_of(path), "nothing mapped"
    p.close()
    gc.collect()
    assert proc_maps_of(path) == []
    assert proc_fds_of(path) == []


@needs_proc
def test_close_releases_a_deleted_file(tmp_path) -> None:
    path = str(tmp_path / "gone.h5")
    PersistentTensorDict.from_dict({"a": torch.arange(10.0)}, path).close()
    p = PersistentTensorDict.from_h5(path, fast_path=True)
    assert torch.equal(p[[2, 5]]["a"], torch.tensor([2.0, 5.0]))
    os.unlink(path)
    assert torch.equal(p[[1]]["a"], torch.tensor([1.0]))  # still readable while open
    p.close()
    assert proc_maps_of(path) == []
    assert proc_fds_of(path) == []


def test_user_file_closed_under_the_store(tmp_path) -> None:
    path = str(tmp_path / "user.h5")
    PersistentTensorDict.from_dict({"a": torch.arange(10.0)}, path).close()
    f = h5py.File(path, "r")
    p = PersistentTensorDict(group=f, batch_size=[10], fast_path=True)
    be = p._store.backend
    assert torch.equal(p["a"], torch.arange(10.0))
    assert mapped(p, ("a",))
    f.close()
    with pytest.raises(ClosedStoreError):
        p["a"]
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever h5py raises: no stale data
        be.read(("a",), (np.array([1, 2]),))
    assert be._maps._fmap is None  # unmapped with the user's file
    p.close()


# --------------------------------------------------------------------------------------------
# the switch
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_switch(tmp_path, backend, monkeypatch) -> None:
    path = write_store(tmp_path, backend, {"a": torch.arange(6.0)}, (6,), "sw")
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr

    def maps(**kw):
        p = opener(path, **kw)
        try:
            return p._store.backend._maps is not None
        finally:
            p.close()

    monkeypatch.delenv(_mmap.ENV_VAR, raising=False)
    assert maps()
    assert maps(fast_path=True)
    assert not maps(fast_path=False)
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv(_mmap.ENV_VAR, off)
        assert not maps()
        assert maps(fast_path=True)
        assert not maps(fast_path=False)
    monkeypatch.setenv(_mmap.ENV_VAR, "1")
    assert maps()
    p = PersistentTensorDict(filename=path, backend=backend, batch_size=[6], fast_path=False)
    assert p._store.backend._maps is None
    assert "fast_path" not in p._store.dataset_kwargs
    p.close()
    q = PersistentTensorDict.from_dict(
        {"a": torch.arange(3)},
        str(tmp_path / f"fd{SUFFIX[backend]}"),
        backend=backend,
        fast_path=False,
    )
    assert q._store.backend._maps is None
    q.close()


def test_parallel_copy_of_large_reads(tmp_path, monkeypatch) -> None:
    """Large copies out of a map are split over threads: same result."""
    monkeypatch.setattr(_mmap, "PARALLEL_COPY_BYTES", 1)
    monkeypatch.setattr(_mmap, "_MIN_PART_BYTES", 64)
    a = np.arange(4000, dtype=np.float64).reshape(1000, 4)
    for view in (a, a[::3], a[5:900, 1:3], a[:2]):
        out = _mmap._copy(view)
        assert np.array_equal(out, view)
        assert out.flags.c_contiguous
        assert not np.shares_memory(out, a)
    assert sys.modules.get("torch") is not None


# ------------------------------------------------------------------------------------------
# resident memory: pages copied out of a map are released (file-backed maps only)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * mmap.PAGESIZE


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs /proc (Linux)")
def test_streaming_copies_out_of_a_map_keep_resident_memory_bounded(tmp_path) -> None:
    from ptd.storage.read import mapped as M

    path = tmp_path / "big.bin"
    size = 64 << 20
    np.arange(size, dtype=np.uint8).tofile(path)
    with open(path, "rb") as fh:
        mm = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    arr = np.frombuffer(mm, dtype=np.uint8)
    before = _rss_bytes()
    step = 4 << 20
    for start in range(0, size, step):
        out = M._copy(arr[start : start + step])
        assert out[0] == np.uint8(start % 256)
        assert out[-1] == np.uint8((start + step - 1) % 256)
        del out
    assert _rss_bytes() - before < 32 << 20  # without the release: the whole 64 MiB stays mapped
    del arr
    mm.close()


def test_copies_from_ordinary_memory_are_never_released() -> None:
    """MADV_DONTNEED would zero anonymous memory: only file-backed maps are released."""
    from ptd.storage.read import mapped as M

    heap = np.full(4 << 20, 7, dtype=np.uint8)
    out = M._copy(heap)
    assert out.min() == 7
    assert heap.min() == 7
    assert heap.max() == 7
