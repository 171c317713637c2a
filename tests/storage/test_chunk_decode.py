"""Chunked, compressed arrays decoded by ptd (issue 14): parallel decode and the chunk cache.

Every read that ptd's own chunk reader serves (``h5_chunks`` / ``zarr_chunks`` through
``chunk_read``) is compared bit for bit with the store library's own read of the same store:
each layout (h5 contiguous, chunked, gzip, shuffle+gzip+fletcher32, hdf5plugin zstd/blosc/lz4;
zarr zstd, gzip, blosc+crc32c, sharded, uncompressed), every dtype ptd stores (bfloat16 as its
bits included), every index kind, with one and several decode threads, with and without the
cache, cold and warm. Each comparison checks that the chunk reader really served the read (so
that equality is not trivially the library twice). Then fill values, corrupt chunks, the
switches, writable modes, closing and fork.
"""

from __future__ import annotations

import importlib
import multiprocessing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import torch
import zarr

from ptd import PersistentTensorDict
from ptd.errors import PtdError, PtdValueError
from ptd.ops.dtypes import to_storage
from ptd.storage import runtime
from ptd.storage.frames import FrameError
from ptd.storage.h5.decode import fletcher32_ok, unshuffle
from ptd.storage.read import cache as cc
from ptd.storage.read import decoded as cr
from ptd.storage.zarr.private import decode_sync

#: zarr's numcodecs wrappers (zarr >= 3.1.3; numcodecs.zarr3 ships them for older zarr)
zarr_numcodecs = getattr(zarr.codecs, "numcodecs", None) or importlib.import_module(
    "numcodecs.zarr3"
)

#: zarr's codecs decode synchronously (zarr >= 3.1.6): only then does ptd's chunk reader serve
#: zarr arrays; with an older zarr it leaves them to zarr (the same values, read by zarr)
ZARR_SERVED = decode_sync(zarr.codecs.BytesCodec()) is not None
#: tests that read zarr arrays among others, and check that the chunk reader served them
_MIXED = {"test_writable_modes", "test_fill_values_and_missing_chunks", "test_forked_worker_reads"}


@pytest.fixture(autouse=True)
def _zarr_reader_needed(request: pytest.FixtureRequest) -> None:
    if ZARR_SERVED:
        return
    if "zarr" in request.node.name or request.node.originalname in _MIXED:
        pytest.skip(f"zarr {zarr.__version__} has no synchronous codec decode (3.1.6 added it)")


N = 61  # rows: not a multiple of any chunk size below (edge chunks)
CHUNK = 7

DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
]

H5_LAYOUTS: dict[str, dict[str, Any]] = {
    "contiguous": {},
    "chunked": {"chunks": True},
    "gzip": {"chunks": True, "compression": "gzip", "compression_opts": 4},
    "shuffle_gzip_fletcher": {
        "chunks": True,
        "compression": "gzip",
        "shuffle": True,
        "fletcher32": True,
    },
}
ZARR_LAYOUTS: dict[str, dict[str, Any]] = {
    "zstd_default": {"compressors": "auto"},
    "gzip": {"compressors": [zarr.codecs.GzipCodec(level=3)]},
    "blosc_crc": {"compressors": [zarr.codecs.BloscCodec(), zarr.codecs.Crc32cCodec()]},
    "sharded": {"compressors": "auto", "sharded": True},
    # numcodecs codecs wrapped by zarr (no _decode_sync): ptd runs zarr's own decode call
    "lz4": {"compressors": [zarr_numcodecs.LZ4()]},
    "lz4_sharded": {"compressors": [zarr_numcodecs.LZ4(acceleration=3)], "sharded": True},
    "zlib_crc32": {"compressors": [zarr_numcodecs.Zlib(level=2), zarr_numcodecs.CRC32()]},
    "uncompressed": {"compressors": None},
}


def _values(dtype: torch.dtype, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 10).to(dtype)
    return torch.randint(-100 if dtype != torch.uint8 else 0, 120, shape, generator=g).to(dtype)


def _leaves() -> dict[str, tuple[np.ndarray, dict[str, str]]]:
    """Every dtype as ``(n, 3)``, a 1-D leaf, a ``(n, 2, 4)`` leaf and a ``(n, 3, 5)`` leaf
    whose second dim is also a batch dim in :func:`test_two_batch_dims`."""
    out = {}
    for i, d in enumerate(DTYPES):
        out[str(d).removeprefix("torch.")] = to_storage(_values(d, (N, 3), i))
    out["flat"] = to_storage(_values(torch.float32, (N,), 50))
    out["cube"] = to_storage(_values(torch.int64, (N, 2, 4), 51))
    return out


def _write_h5(path: Path, layout: dict[str, Any], extra: dict[str, Any] | None = None) -> None:
    with h5py.File(path, "w") as f:
        for name, (arr, attrs) in _leaves().items():
            opts = dict(layout, **(extra or {}))
            if opts.get("chunks") is True:
                opts["chunks"] = (CHUNK,) + arr.shape[1:]
            ds = f.create_dataset(name, data=arr, **opts)
            ds.attrs.update(attrs)


def _write_zarr(path: Path, layout: dict[str, Any]) -> None:
    root = zarr.open_group(path, mode="w")
    layout = dict(layout)
    sharded = layout.pop("sharded", False)
    for name, (arr, attrs) in _leaves().items():
        chunks = (CHUNK,) + arr.shape[1:]
        kw: dict[str, Any] = dict(layout, chunks=chunks, attributes=attrs)
        if sharded:
            kw["chunks"] = (3,) + arr.shape[1:]
            kw["shards"] = (12,) + arr.shape[1:]
        # created, then written in one assignment: zarr 3.1.2's create_array(data=...) writes
        # a sharded array chunk by chunk, concurrently, and two chunks of one shard then race
        # (a torn shard, 'Stored and computed checksum do not match'; fixed in zarr 3.1.3)
        a = root.create_array(name, shape=arr.shape, dtype=arr.dtype, **kw)
        a[...] = arr


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    base = tmp_path_factory.mktemp("chunks")
    out = {}
    for name, layout in H5_LAYOUTS.items():
        p = base / f"{name}.h5"
        _write_h5(p, layout)
        out[("h5", name)] = p
    for name, layout in ZARR_LAYOUTS.items():
        p = base / f"{name}.zarr"
        _write_zarr(p, layout)
        out[("zarr", name)] = p
    try:
        import hdf5plugin

        for name, plugin in (
            ("zstd", hdf5plugin.Zstd()),
            ("blosc", hdf5plugin.Blosc(cname="lz4", shuffle=hdf5plugin.Blosc.SHUFFLE)),
            ("lz4", hdf5plugin.LZ4()),
            ("lz4_blocks", hdf5plugin.LZ4(nbytes=64)),  # several LZ4 blocks per chunk
        ):
            p = base / f"plugin_{name}.h5"
            _write_h5(p, {"chunks": True}, dict(plugin))
            out[("h5", f"plugin_{name}")] = p
    except ImportError:  # pragma: no cover - hdf5plugin is an optional extra
        pass
    return out


def _open(path: Path, backend: str, **kw: Any) -> PersistentTensorDict:
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    return opener(str(path), batch_size=[N], **kw)


def _oracle(path: Path, backend: str) -> PersistentTensorDict:
    """The same store read through the library alone (no chunk reader, no memory maps)."""
    p = _open(path, backend, fast_path=False)
    p._store.backend._chunked = None
    return p


def _bits(t: torch.Tensor) -> torch.Tensor:
    t = t.contiguous()
    return t.reshape(-1).view(torch.uint8) if t.numel() else t.reshape(-1).to(torch.uint8)


INDEXES: list[Any] = [
    5,
    -1,
    slice(None),
    slice(3, 40),
    slice(2, 59, 5),
    slice(50, 100),
    torch.tensor([1, 4, 8, 30, 60]),
    torch.tensor([60, 0, 33, 7, 14, 13]),
    torch.tensor([9, 9, 2, 9, 58, 2]),
    torch.arange(N) % 3 == 0,
    torch.tensor([], dtype=torch.long),
]
INDEX_IDS = [
    "int",
    "neg",
    "all",
    "slice",
    "step",
    "slice_past_end",
    "sorted",
    "unsorted",
    "repeats",
    "mask",
    "empty",
]

EXPECT_SERVED = {
    ("h5", "contiguous"): False,  # the fast path's maps (or h5py), never the chunk reader
    ("zarr", "uncompressed"): False,
}


@pytest.fixture(params=[1, 3], ids=["1thread", "3threads"])
def threads(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    runtime.set_decode_threads(request.param)
    # the stores here have small chunks: decode them on the pool all the same
    monkeypatch.setattr(cr, "PARALLEL_MIN_CHUNK_BYTES", 0)
    yield request.param
    runtime.set_decode_threads(None)


@pytest.mark.parametrize(("chunk_rows", "pooled"), [(4, False), (4096, True)])
def test_small_chunks_stay_on_the_reading_thread(
    monkeypatch: pytest.MonkeyPatch, chunk_rows: int, pooled: bool
) -> None:
    """Chunks under PARALLEL_MIN_CHUNK_BYTES are decoded by the caller alone; larger ones on
    the pool (with the same result)."""
    data = np.arange(8192 * 4, dtype=np.float32).reshape(8192, 4)
    arr = cr.ChunkedArray(
        ("small-chunks", chunk_rows), data.shape, (chunk_rows, 4), data.dtype,
        lambda c: data[c[0] * chunk_rows : (c[0] + 1) * chunk_rows].copy(),
    )  # fmt: skip
    used = []
    real = runtime.cpu_pool
    monkeypatch.setattr(runtime, "cpu_pool", lambda: used.append(1) or real())
    runtime.set_decode_threads(3)
    try:
        got = cr.read_chunked(arr, (slice(0, 8192),), None)
    finally:
        runtime.set_decode_threads(None)
    assert np.array_equal(got, data)
    assert bool(used) == pooled  # 4 rows x 16 B = 64 B: alone; 4096 x 16 B = 64 KiB: pooled


def _layouts() -> list[tuple[str, str]]:
    return (
        [("h5", n) for n in H5_LAYOUTS]
        + [("h5", f"plugin_{n}") for n in ("zstd", "blosc", "lz4", "lz4_blocks")]
        + [("zarr", n) for n in ZARR_LAYOUTS]
    )


@pytest.mark.parametrize("layout", _layouts(), ids=lambda x: f"{x[0]}-{x[1]}")
@pytest.mark.parametrize("cache", [None, 0], ids=["cache", "nocache"])
def test_reads_equal_the_library(
    stores: dict[tuple[str, str], Path], layout: tuple[str, str], cache: Any, threads: int
) -> None:
    if layout not in stores:
        pytest.skip("hdf5plugin is not installed")
    backend = layout[0]
    path = stores[layout]
    with _open(path, backend, chunk_cache=cache) as p, _oracle(path, backend) as ref:
        keys = list(ref.keys())
        for _round in range(2):  # cold, then warm (from the cache when there is one)
            for idx in INDEXES:
                got, want = p[idx], ref[idx]
                for k in keys:
                    a, b = got[k], want[k]
                    assert a.dtype == b.dtype, (k, idx)
                    assert a.shape == b.shape, (k, idx)
                    assert torch.equal(_bits(a), _bits(b)), (layout, k, idx)
            # nested views: a slice, then an unsorted index, then a step slice, then an int
            v, w = (
                p[4:55][torch.tensor([40, 3, 3, 17, 22, 9])][1:6:2],
                ref[4:55][torch.tensor([40, 3, 3, 17, 22, 9])][1:6:2],
            )
            for k in keys:
                assert torch.equal(_bits(v[k]), _bits(w[k]))
                assert torch.equal(_bits(v[1][k]), _bits(w[1][k]))
            # a read of the whole leaf and of a trailing-dim selection
            for k in keys:
                assert torch.equal(_bits(p[k]), _bits(ref[k]))
        reader = p._store.backend._chunked
        served = EXPECT_SERVED.get(layout, True)
        if served:
            if cache is None:
                assert reader.cache is not None
                assert reader.cache.misses > 0
                assert reader.cache.hits > 0  # the second round hit the cache
            else:
                assert reader.cache is None
            assert all(a is not None for _, a in reader._arrays.values())  # every leaf
        elif reader is not None:
            assert all(a is None for _, a in reader._arrays.values())


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_raw_library_equality(stores: dict[tuple[str, str], Path], backend: str) -> None:
    """The stored arrays as h5py/zarr return them (not through ptd's library path)."""
    name = "shuffle_gzip_fletcher" if backend == "h5" else "sharded"
    path = stores[(backend, name)]
    idx = np.array([44, 2, 2, 19, 60, 0])
    with _open(path, backend) as p:
        be = p._store.backend
        for key in ("float32", "cube", "bool", "int16"):
            if backend == "h5":
                with h5py.File(path, "r") as f:
                    full = f[key][...]
            else:
                full = zarr.open_array(path / key, mode="r")[...]
            got = be.read((key,), (idx,))
            assert got.dtype == full.dtype
            assert got.tobytes() == full[idx].tobytes()
            got = be.read((key,), (slice(3, 50, 4), 1))
            assert got.tobytes() == full[3:50:4, 1].tobytes()


def test_two_batch_dims(tmp_path: Path, backend: str) -> None:
    """Chunks across two batch dims; index arrays on the second one."""
    data = {"x": torch.arange(20 * 9 * 2, dtype=torch.float64).reshape(20, 9, 2)}
    path = tmp_path / ("s.h5" if backend == "h5" else "s.zarr")
    arr, _ = to_storage(data["x"])
    if backend == "h5":
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=arr, chunks=(3, 4, 2), compression="gzip")
    else:
        zarr.open_group(path, mode="w").create_array(
            "x", data=arr, chunks=(3, 4, 2), compressors="auto"
        )
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    with opener(str(path), batch_size=[20, 9]) as p:
        assert p._store.backend._chunked is not None
        x = data["x"]
        for idx in [
            (slice(2, 17, 3), torch.tensor([8, 0, 4, 4])),
            (torch.tensor([19, 1, 5]), slice(1, 8)),
            (4, torch.tensor([2, 7])),
            (slice(None), 6),
            (torch.arange(20) % 2 == 1, slice(0, 9, 4)),
        ]:
            assert torch.equal(p[idx]["x"], x[idx]), idx
        assert any(a is not None for _, a in p._store.backend._chunked._arrays.values())


def test_fill_values_and_missing_chunks(tmp_path: Path) -> None:
    h5 = tmp_path / "f.h5"
    with h5py.File(h5, "w") as f:
        ds = f.create_dataset("x", shape=(50, 2), dtype="i4", chunks=(8, 2), fillvalue=7)
        ds[10:14] = 1
        ds = f.create_dataset(
            "y", shape=(50,), dtype="f8", chunks=(8,), fillvalue=-2.5, compression="gzip"
        )
        ds[40:41] = 3.0
    z = tmp_path / "f.zarr"
    root = zarr.open_group(z, mode="w")
    a = root.create_array("x", shape=(50, 2), dtype="i4", chunks=(8, 2), fill_value=7)
    a[10:14] = 1
    a[20:24] = 7  # equal to the fill value: never written (write_empty_chunks is off)
    b = root.create_array("y", shape=(50,), dtype="f8", chunks=(4,), shards=(16,), fill_value=-2.5)
    b[40:41] = 3.0
    for path, backend in ((h5, "h5"), (z, "zarr")):
        with _open_n(path, backend, 50) as p:
            ref_x = np.full((50, 2), 7, "i4")
            ref_x[10:14] = 1
            ref_y = np.full(50, -2.5)
            ref_y[40] = 3.0
            idx = torch.tensor([49, 0, 12, 40, 40, 21])
            assert np.array_equal(p[idx]["x"].numpy(), ref_x[idx.numpy()])
            assert np.array_equal(p[idx]["y"].numpy(), ref_y[idx.numpy()])
            assert np.array_equal(p["y"].numpy(), ref_y)
            assert p._store.backend._chunked.cache.misses > 0


def _open_n(path: Path, backend: str, n: int) -> PersistentTensorDict:
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    return opener(str(path), batch_size=[n])


def _corrupt(path: Path, offset: int, size: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset + size // 2)
        byte = f.read(1)
        f.seek(offset + size // 2)
        f.write(bytes([byte[0] ^ 0xFF]))


@pytest.mark.parametrize("layout", ["gzip", "shuffle_gzip_fletcher"])
def test_corrupt_h5_chunk_raises_like_h5py(tmp_path: Path, layout: str) -> None:
    path = tmp_path / "c.h5"
    _write_h5(path, H5_LAYOUTS[layout])
    with h5py.File(path, "r") as f:
        info = f["float32"].id.get_chunk_info_by_coord((14, 0))
    _corrupt(path, info.byte_offset, info.size)
    with (
        h5py.File(path, "r") as f,
        pytest.raises(OSError, match=r"(?i)read|filter|inflate|checksum"),
    ):
        f["float32"][14:21]
    with _open(path, "h5") as p:
        with pytest.raises(PtdError, match="float32"):
            p[torch.tensor([15, 3])]["float32"]
        assert torch.equal(p[0:14]["float32"], _oracle_read(path, "float32", slice(0, 14)))


def _oracle_read(path: Path, key: str, sel: Any) -> torch.Tensor:
    with h5py.File(path, "r") as f:
        return torch.from_numpy(f[key][sel])


def test_corrupt_zarr_chunk_raises(tmp_path: Path) -> None:
    path = tmp_path / "c.zarr"
    _write_zarr(path, ZARR_LAYOUTS["zstd_default"])
    chunk = path / "float32" / "c" / "2" / "0"
    chunk.write_bytes(b"not zstd at all" * 3)
    with pytest.raises(Exception):  # noqa: B017, PT011 - whatever zarr raises
        zarr.open_array(path / "float32", mode="r")[14:21]
    with _open(path, "zarr") as p:
        with pytest.raises(PtdError, match="float32"):
            p[torch.tensor([15, 3])]["float32"]
        p[0:14]["float32"]  # the other chunks still read


def test_fletcher32_and_shuffle_helpers() -> None:
    with h5py.File("mem.h5", "w", driver="core", backing_store=False) as f:
        data = np.arange(1001, dtype="<i2")
        ds = f.create_dataset("x", data=data, chunks=(1001,), fletcher32=True)
        _, raw = ds.id.read_direct_chunk((0,))
    assert fletcher32_ok(raw)
    bad = bytearray(raw)
    bad[10] ^= 1
    assert not fletcher32_ok(bytes(bad))
    assert not fletcher32_ok(b"ab")
    shuffled = np.frombuffer(np.arange(10, dtype="<u4").tobytes() + b"xyz", np.uint8)
    n = 10
    sh = np.concatenate([shuffled[: 4 * n].reshape(n, 4).T.reshape(-1), shuffled[4 * n :]])
    assert bytes(unshuffle(sh.tobytes(), 4)) == shuffled.tobytes()
    assert unshuffle(b"abc", 4) == b"abc"


def test_user_h5py_file_and_core_driver(stores: dict, tmp_path: Path) -> None:
    """A user's read-only h5py.File and a file opened with the core driver are served (chunks
    come through read_direct_chunk, whatever the driver)."""
    path = stores[("h5", "gzip")]
    with h5py.File(path, "r") as f, _oracle(path, "h5") as ref:
        p = PersistentTensorDict(group=f, batch_size=[N])
        idx = torch.tensor([50, 1, 1, 33])
        assert torch.equal(p[idx]["float64"], ref[idx]["float64"])
        assert p._store.backend._chunked.cache.misses > 0
    with h5py.File(path, "r", driver="core") as f, _oracle(path, "h5") as ref:
        p = PersistentTensorDict(group=f, batch_size=[N])
        assert torch.equal(p[idx]["int32"], ref[idx]["int32"])
        assert p._store.backend._chunked.cache.misses > 0


def test_read_direct_chunk_holds_h5pys_lock(stores: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks come through read_direct_chunk, which h5py releases before its PR 2764 call
    without h5py's own lock: ptd takes it (a DataLoader's read-ahead
    thread and the loading thread read the same file at once)."""
    from h5py._objects import phil

    from ptd.storage.h5 import decode

    entered: list[int] = []

    class Recording:
        def __enter__(self) -> None:
            phil.__enter__()
            entered.append(1)

        def __exit__(self, *exc: object) -> None:
            phil.__exit__(*exc)

    monkeypatch.setattr(decode, "_h5py_lock", Recording())
    path = stores[("h5", "gzip")]
    with h5py.File(path, "r", driver="core") as f, _oracle(path, "h5") as ref:
        p = PersistentTensorDict(group=f, batch_size=[N])
        idx = torch.tensor([50, 1, 1, 33])
        assert torch.equal(p[idx]["int32"], ref[idx]["int32"])
    assert entered  # every read_direct_chunk went through the lock


def test_writable_modes(stores: dict, tmp_path: Path) -> None:
    """No chunk cache while a store may be written; h5 writable files keep h5py's path; zarr
    writes are seen by the next read."""
    src = stores[("h5", "gzip")]
    path = tmp_path / "w.h5"
    path.write_bytes(src.read_bytes())
    with _open(path, "h5", mode="r+") as p:
        assert p._store.backend._chunked is None
        p[3:5]["float32"] = torch.ones(2, 3)
        assert torch.equal(p[torch.tensor([4, 3])]["float32"], torch.ones(2, 3))
    zpath = tmp_path / "w.zarr"
    _write_zarr(zpath, ZARR_LAYOUTS["sharded"])
    with _open(zpath, "zarr", mode="r+") as p:
        reader = p._store.backend._chunked
        assert reader is not None
        assert reader.cache is None
        before = p[torch.tensor([30, 4])]["float64"]
        p[4]["float64"] = torch.full((3,), 9.0, dtype=torch.float64)
        after = p[torch.tensor([30, 4])]["float64"]
        assert torch.equal(after[0], before[0])
        assert torch.equal(after[1], torch.full((3,), 9.0))
        assert any(a is not None for _, a in reader._arrays.values())


def test_option_and_environment(stores: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    path = stores[("zarr", "zstd_default")]
    with _open(path, "zarr", chunk_cache="1MB") as p:
        assert p._store.backend._chunked.cache.budget == 1_000_000
    monkeypatch.setenv(cc.ENV_VAR, "3 MiB")
    with _open(path, "zarr") as p:
        assert p._store.backend._chunked.cache.budget == 3 << 20
    with _open(path, "zarr", chunk_cache=False) as p:
        assert p._store.backend._chunked.cache is None
    monkeypatch.setenv(cc.ENV_VAR, "0")
    with _open(path, "zarr") as p:
        assert p._store.backend._chunked.cache is None
    monkeypatch.setenv(cc.ENV_VAR, "lots")
    with pytest.raises(PtdValueError, match="PTD_CHUNK_CACHE"):
        _open(path, "zarr")
    monkeypatch.delenv(cc.ENV_VAR)
    with _open(path, "zarr") as p:
        assert p._store.backend._chunked.cache.budget == cc.DEFAULT_BUDGET
    for bad in ("-3", "12 parsecs", True, -1, 2.5):
        with pytest.raises(PtdValueError, match="chunk_cache"):
            PersistentTensorDict.from_zarr(str(path), chunk_cache=bad)


def test_pickle_keeps_the_option(stores: dict) -> None:
    import pickle

    path = stores[("h5", "gzip")]
    with _open(path, "h5", chunk_cache="2MB") as p:
        q = pickle.loads(pickle.dumps(p))
        try:
            assert q._store.backend._chunked.cache.budget == 2_000_000
            assert torch.equal(q[torch.tensor([3, 1])]["int8"], p[torch.tensor([3, 1])]["int8"])
        finally:
            q.close()


def test_close_releases(stores: dict) -> None:
    path = stores[("h5", "shuffle_gzip_fletcher")]
    p = _open(path, "h5")
    p[torch.tensor([3, 40])]["float32"]
    reader = p._store.backend._chunked
    assert reader.cache.nbytes > 0
    p.close()
    assert p._store.backend._chunked is None
    assert reader.cache.nbytes == 0


def test_decode_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PTD_DECODE_THREADS", "3")
    assert runtime.decode_threads() == 3
    monkeypatch.setenv("PTD_DECODE_THREADS", "999")
    assert runtime.decode_threads() == 16
    monkeypatch.setenv("PTD_DECODE_THREADS", "x")
    with pytest.raises(PtdValueError, match="PTD_DECODE_THREADS"):
        runtime.decode_threads()
    monkeypatch.delenv("PTD_DECODE_THREADS")
    assert runtime.decode_threads() == max(1, min(torch.get_num_threads(), 16))
    runtime.set_decode_threads(2)
    try:
        assert runtime.decode_threads() == 2
    finally:
        runtime.set_decode_threads(None)
    for bad in (0, -1, 1.5, "2"):
        with pytest.raises(PtdValueError):
            runtime.set_decode_threads(bad)  # type: ignore[arg-type]


def test_cache_lru_and_budget() -> None:
    cache = cc.ChunkCache(300)
    a, b, c = (np.zeros(100, np.uint8) for _ in range(3))
    cache.put("x", 0, a, 10_000)
    cache.put("x", 1, b, 10_000)
    cache.put("x", 2, c, 10_000)
    assert cache.get("x", 0) is a  # now the most recent
    cache.put("x", 3, np.zeros(100, np.uint8), 10_000)  # evicts 1, the least recently used
    assert cache.get("x", 1) is None
    assert cache.get("x", 2) is c
    assert len(cache) == 3
    assert not a.flags.writeable  # cached chunks are frozen
    cache.put("x", 9, np.zeros(301, np.uint8), 10_000)  # larger than the budget: not kept
    assert cache.get("x", 9) is None
    assert cache.nbytes == 300
    cache.put("x", 0, np.zeros(50, np.uint8), 10_000)  # replacing a chunk fixes the count
    assert cache.nbytes == 250
    # a second array of the same size: each may now hold half the budget
    cache.put("y", 0, np.zeros(100, np.uint8), 10_000)
    assert cache.nbytes <= 300
    assert cache.get("y", 0) is not None
    assert sum(int(v.nbytes) for v in cache._parts["x"].items.values()) <= 150
    cache.clear()
    assert cache.nbytes == 0
    assert len(cache) == 0


def test_cache_shares_alternating_arrays() -> None:
    """Two arrays read in turn, random chunks, the budget half their size: each keeps its share
    (a single LRU would hit almost never)."""
    cache = cc.ChunkCache(100 * 1000)
    rng = np.random.default_rng(0)
    for _ in range(60):
        for name in ("obs", "next"):
            for k in np.unique(rng.integers(0, 100, 60)):
                if cache.get(name, int(k)) is None:
                    cache.put(name, int(k), np.zeros(1000, np.uint8), 100 * 1000)
    assert 0.4 < cache.hits / (cache.hits + cache.misses) < 0.6
    assert cache.nbytes <= cache.budget


def test_cache_after_fork_starts_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    cache = cc.ChunkCache(1000)
    cache.put("a", 0, np.zeros(10, np.uint8), 10)
    lock = cache._lock
    lock.acquire()  # held "at the fork"
    try:
        monkeypatch.setattr(runtime, "_PID", runtime.pid() + 1)
        assert cache.get("a", 0) is None
        assert cache.nbytes == 0
        assert cache._lock is not lock
    finally:
        lock.release()


def test_cache_threads() -> None:
    """Many threads putting and getting: the byte count stays right and under the budget."""
    from concurrent.futures import ThreadPoolExecutor

    cache = cc.ChunkCache(10_000)

    def work(i: int) -> None:
        for j in range(200):
            key = (i * 7 + j) % 50
            name = key % 3
            if cache.get(name, key) is None:
                cache.put(name, key, np.zeros(100 + key, np.uint8), 5000 * (name + 1))

    with ThreadPoolExecutor(8) as ex:
        list(ex.map(work, range(16)))
    held = sum(int(v.nbytes) for p in cache._parts.values() for v in p.items.values())
    assert cache.nbytes == held <= 10_000
    assert all(
        p.nbytes == sum(int(v.nbytes) for v in p.items.values()) for p in cache._parts.values()
    )


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_forked_worker_reads(stores: dict) -> None:
    """A store opened in the parent, read in a forked child: the child's reader has its own
    cache and thread pool and gives the parent's answer."""
    path = stores[("zarr", "sharded")]
    runtime.set_decode_threads(2)
    try:
        with _open(path, "zarr") as p:
            want = p[torch.tensor([40, 2, 2])]["float32"].numpy().tobytes()
            ctx = multiprocessing.get_context("fork")
            q = ctx.Queue()

            def in_child() -> None:
                try:
                    got = p[torch.tensor([40, 2, 2])]["float32"]
                    reader = p._store.backend._chunked
                    q.put(("ok", got.numpy().tobytes(), reader.cache.misses))
                except BaseException as err:  # noqa: BLE001
                    q.put(("err", repr(err), 0))

            proc = ctx.Process(target=in_child)
            proc.start()
            status, got, misses = q.get(timeout=60)
            proc.join(60)
        assert status == "ok", got
        assert got == want
        assert misses > 0
    finally:
        runtime.set_decode_threads(None)


def test_read_chunked_bounds() -> None:
    data = np.arange(10)
    arr = cr.ChunkedArray("k", (10,), (4,), data.dtype, lambda c: data[c[0] * 4 : c[0] * 4 + 4])
    with pytest.raises(IndexError):
        cr.read_chunked(arr, (np.array([3, 10]),), None)
    with pytest.raises(IndexError):
        cr.read_chunked(arr, (10,), None)
    assert cr.read_chunked(arr, (slice(8, 20),), None).tolist() == [8, 9]


def test_deflate_with_and_without_libdeflate(stores: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """gzip'd chunks decode to the same bytes through libdeflate (when installed) and zlib."""
    import sys
    import zlib

    from ptd.storage.h5 import decode as h5_chunks

    path = stores[("h5", "shuffle_gzip_fletcher")]
    idx = torch.tensor([60, 3, 3, 28, 41])
    with _oracle(path, "h5") as ref:
        want = {k: ref[idx][k] for k in ("float64", "int16", "bfloat16")}
    inflate = h5_chunks._inflater(64, 64)
    try:
        import deflate  # noqa: F401

        assert "inflate_zlib" not in inflate.__qualname__
    except ImportError:
        assert "inflate_zlib" in inflate.__qualname__
    for blocked in (False, True):
        if blocked:
            monkeypatch.setitem(sys.modules, "deflate", None)  # an import of it fails
            inflate = h5_chunks._inflater(64, 64)
            assert "inflate_zlib" in inflate.__qualname__
        data = np.arange(16, dtype="<u4").tobytes()
        assert inflate(zlib.compress(data)) == data
        for bad in (zlib.compress(data + b"x"), zlib.compress(data)[:-5], b"garbage"):
            with pytest.raises(FrameError):  # too long, truncated, not deflate
                inflate(bad)
        with _open(path, "h5", chunk_cache=0) as p:
            for k, w in want.items():
                assert torch.equal(_bits(p[idx][k]), _bits(w))


@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_big_endian(tmp_path: Path, backend: str) -> None:
    data = np.arange(40 * 3, dtype=">f8").reshape(40, 3) / 7
    ints = np.arange(40, dtype=">i4") - 20
    if backend == "h5":
        path = tmp_path / "be.h5"
        with h5py.File(path, "w") as f:
            f.create_dataset("x", data=data, chunks=(6, 3), compression="gzip", shuffle=True)
            f.create_dataset("i", data=ints, chunks=(6,), compression="gzip")
    else:
        path = tmp_path / "be.zarr"
        root = zarr.open_group(path, mode="w")
        big = zarr.codecs.BytesCodec(endian="big")
        root.create_array("x", data=data, chunks=(6, 3), serializer=big, compressors="auto")
        root.create_array("i", data=ints, chunks=(6,), serializer=big, compressors="auto")
    opener = PersistentTensorDict.from_h5 if backend == "h5" else PersistentTensorDict.from_zarr
    idx = torch.tensor([39, 0, 0, 17, 6])
    with opener(str(path), batch_size=[40]) as p:
        assert torch.equal(p[idx]["x"], torch.from_numpy(data.astype("<f8")[idx.numpy()]))
        assert torch.equal(p[5:33:4]["i"], torch.from_numpy(ints.astype("<i4")[5:33:4]))
        reader = p._store.backend._chunked
        assert all(a is not None for _, a in reader._arrays.values())


def test_lz4_filter_framing() -> None:
    """The HDF5 LZ4 filter's framing: raw and compressed blocks decode; a frame that does not
    add up is refused (h5py then reads the chunk and raises as it does)."""
    import numcodecs

    from ptd.storage.h5 import decode as hc

    data = bytes(range(256)) * 3 + b"\x00" * 232  # 1000 bytes
    block = 600
    first = numcodecs.LZ4().encode(data[:block])[4:]  # an LZ4 block (numcodecs' size dropped)
    second = data[block:]  # stored as is: its size equals the block's
    frame = (
        len(data).to_bytes(8, "big")
        + block.to_bytes(4, "big")
        + len(first).to_bytes(4, "big")
        + first
        + len(second).to_bytes(4, "big")
        + second
    )
    decode = hc._lz4_decoder(len(data), len(data))
    assert decode is not None
    assert bytes(decode(frame)) == data
    bad = [
        frame[:10],  # no header
        frame[:-1],  # short
        frame + b"\x00",  # trailing bytes
        (999).to_bytes(8, "big") + frame[8:],  # another total size
        frame[:16] + b"\xff" * len(first) + frame[16 + len(first) :],  # a corrupt block
    ]
    for b in bad:
        with pytest.raises(FrameError):
            decode(b)
