"""Memory-mapped directories in tensordict 0.15's layout (issue 4): ptd/memmap.py.

Round trips from TensorDicts and from stores of both backends, the streaming copy, the error
cases, the committed golden directory written by tensordict 0.15.3 (read without tensordict),
and interop with tensordict in both directions (``interop`` marker).
"""

from __future__ import annotations

import importlib.util
import json
import os
import warnings

import numpy as np
import pytest
import torch

from ptd import NonTensorData, NonTensorStack, PersistentTensorDict, TensorDict
from ptd.containers.memmap import (
    MemmapSummary,
    decode_key,
    encode_key,
    export_memmap,
    load_memmap,
    tensor_nbytes,
)
from ptd.errors import (
    CorruptStoreError,
    PickleRefusedError,
    PtdError,
    PtdTypeError,
    PtdValueError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedDtypeError,
)
from ptd.testing.recording import recording

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(HERE, "data", "memmap_td015")


def _golden_module():
    spec = importlib.util.spec_from_file_location(
        "make_memmap_golden", os.path.join(HERE, "data", "make_memmap_golden.py")
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


GOLDEN_MOD = _golden_module()
DTYPES = GOLDEN_MOD.DTYPES
values_of = GOLDEN_MOD._values


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def sample(n: int = 4) -> TensorDict:
    """A TensorDict with every dtype, a nested level, empty and 0-d-row leaves, odd keys and
    non-tensor entries (JSON and pickled)."""
    td = TensorDict({}, batch_size=[n], names=["row"])
    for key, dt in DTYPES.items():
        td[key] = torch.cat([values_of(dt)] * ((n + 1) // 2))[:n]
    td["empty"] = torch.zeros(n, 0, 3)
    td["row"] = torch.arange(n, dtype=torch.float32)
    td["weird key/x%"] = torch.arange(n)
    td["nested"] = {
        "deep": {"v": torch.arange(2 * n).reshape(n, 2)},
        "w": torch.ones(n, dtype=torch.bfloat16),
    }
    td["text"] = "hello"
    td["none"] = NonTensorData(None, [n])
    td["obj"] = NonTensorData({"k": [1, 2.5, "x"]}, [n])
    td["raw"] = b"\x00\x01bytes"
    td["tup"] = NonTensorData((1, 2), [n])
    td["stack"] = NonTensorStack(*[f"s{i}" for i in range(n)])
    return td


def assert_same(got, want, path="") -> None:
    """Every entry of ``want`` (a ptd tensordict) is in ``got`` with equal value and dtype."""
    assert list(got.batch_size) == list(want.batch_size), path
    assert sorted(got.keys()) == sorted(want.keys()), path
    for key in want.keys():
        w, g = want.get(key), got.get(key)
        where = f"{path}/{key}"
        if isinstance(w, torch.Tensor):
            assert isinstance(g, torch.Tensor), where
            assert g.dtype == w.dtype, where
            assert g.shape == w.shape, where
            if w.dtype in (torch.bfloat16,) or str(w.dtype).startswith("torch.float8"):
                assert torch.equal(g.view(torch.uint8), w.contiguous().view(torch.uint8)), where
            else:
                assert torch.equal(g, w), where
        elif isinstance(w, NonTensorStack):
            assert isinstance(g, NonTensorStack), where
            assert g.tolist() == w.tolist(), where
        elif isinstance(w, NonTensorData):
            assert isinstance(g, NonTensorData), where
            assert type(g.data) is type(w.data), where
            assert g.data == w.data, where
        else:
            assert_same(g, w, where)


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Equal dtype, shape and bytes (NaN-safe, and for dtypes without ``==``)."""
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.numel() == 0:
        return True
    return torch.equal(
        a.contiguous().reshape(-1).view(torch.uint8), b.contiguous().reshape(-1).view(torch.uint8)
    )


def is_mapped(t: torch.Tensor, prefix) -> bool:
    name = t.untyped_storage().filename
    return name is not None and os.path.realpath(name).startswith(os.path.realpath(str(prefix)))


def store_sample(n: int = 4) -> dict:
    """What both backends store faithfully (h5 holds no tuples or dicts in a NonTensorData the
    same way, so those are left to the TensorDict tests)."""
    d = {key: torch.cat([values_of(dt)] * ((n + 1) // 2))[:n] for key, dt in DTYPES.items()}
    d.update(
        empty=torch.zeros(n, 0),
        nested={
            "deep": {"v": torch.arange(2 * n).reshape(n, 2)},
            "w": torch.ones(n, dtype=torch.bfloat16),
        },
        text="hello",
        raw=b"\x00raw",
    )
    return d


@pytest.fixture(params=["h5", "zarr"])
def backend(request):
    return request.param


@pytest.fixture
def store(tmp_path, backend):
    fname = str(tmp_path / ("src.h5" if backend == "h5" else "src.zarr"))
    p = PersistentTensorDict.from_dict(store_sample(), fname, batch_size=[4], backend=backend)
    p["stack"] = NonTensorStack("a", "b", "c", "d")
    yield p
    p.close()


def expected_from_store(store) -> TensorDict:
    """The store's content as the user saved it (h5 reads tensordict strings back as bytes)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        td = store.to_tensordict()
    td["text"] = NonTensorData("hello", td.batch_size)
    td["raw"] = NonTensorData(b"\x00raw", td.batch_size)
    return td


# --------------------------------------------------------------------------------------------
# TensorDict round trips
# --------------------------------------------------------------------------------------------


def test_key_encoding():
    for key in ["plain", "weird key/x", "", ".", "..", "a%b", 'x<>:"|?*\\', "tab\tnul\0", "é"]:
        assert decode_key(encode_key(key)) == key
    assert encode_key("weird key/x") == "weird%20key%2Fx"
    assert encode_key("100%") == "100%25"


def test_tensordict_memmap_round_trip(tmp_path):
    td = sample()
    prefix = tmp_path / "td"
    mm = td.memmap(prefix)
    assert isinstance(mm, TensorDict)
    assert mm.is_locked
    assert mm.names == ["row"]
    assert_same(mm, td)
    for key in mm.keys(True, True):
        t = mm.get(key)
        if t.numel():
            assert is_mapped(t, prefix), key
    assert (prefix / "weird%20key%2Fx%25.memmap").exists()
    assert not (prefix / "empty.memmap").exists()  # no file for an empty leaf
    meta = json.loads((prefix / "meta.json").read_text())
    assert meta["a" if "a" in meta else "f32"] == {
        "device": "cpu",
        "shape": [4, 3],
        "dtype": "torch.float32",
        "is_nested": False,
    }
    assert meta["_class"] == "tensordict:TensorDict"
    assert meta["_names"] == ["row"]
    assert json.loads((prefix / "text" / "meta.json").read_text())["data"] == "hello"
    # JSON first; only what JSON cannot hold is pickled
    assert not (prefix / "obj" / "other.pickle").exists()
    assert (prefix / "raw" / "other.pickle").exists()
    assert (prefix / "tup" / "other.pickle").exists()

    back = TensorDict.load_memmap(prefix, allow_pickle=True)
    assert_same(back, td)
    assert back.names == ["row"]
    assert is_mapped(back["nested", "deep", "v"], prefix)


def test_load_refuses_pickle_by_default(tmp_path):
    td = TensorDict({"raw": b"abc", "x": torch.zeros(2)}, batch_size=[2])
    td.memmap(tmp_path / "p")
    with pytest.raises(PickleRefusedError, match=r"other.pickle"):
        TensorDict.load_memmap(tmp_path / "p")
    with pytest.raises(PickleRefusedError, match=r"other.pickle"):  # None refuses too
        TensorDict.load_memmap(tmp_path / "p", allow_pickle=None)
    assert load_memmap(tmp_path / "p", allow_pickle=True)["raw"] == b"abc"
    with pytest.raises(PtdTypeError):
        load_memmap(tmp_path / "p", allow_pickle="yes")


def test_writes_reach_the_file_in_r_plus_and_not_in_r(tmp_path):
    TensorDict({"a": torch.zeros(3)}, batch_size=[3]).memmap(tmp_path / "m")
    ro = load_memmap(tmp_path / "m", mode="r")
    ro["a"][0] = 5
    assert np.fromfile(tmp_path / "m" / "a.memmap", dtype=np.float32)[0] == 0
    rw = load_memmap(tmp_path / "m")
    rw["a"][1] = 7
    assert np.fromfile(tmp_path / "m" / "a.memmap", dtype=np.float32)[1] == 7
    with pytest.raises(PtdValueError):
        load_memmap(tmp_path / "m", mode="w")


def test_memmap_inplace(tmp_path):
    td = sample()
    nested = td["nested"]
    want = td.clone()
    out = td.memmap_(tmp_path / "ip")
    assert out is td
    assert td.is_locked
    assert td["nested"] is nested
    assert is_mapped(td["nested", "deep", "v"], tmp_path / "ip")
    assert is_mapped(td["f32"], tmp_path / "ip")
    assert_same(td, want)


def test_memmap_without_prefix_is_anonymous(tmp_path):
    td = TensorDict({"a": torch.arange(6).reshape(3, 2), "s": "x"}, batch_size=[3])
    mm = td.memmap()
    assert torch.equal(mm["a"], td["a"])
    assert mm["s"] == "x"
    assert mm["a"].untyped_storage().filename is not None
    mm["a"].add_(1)  # still a working (unlinked) mapping
    assert mm["a"][0, 0] == 1


def test_zero_dim_batch_and_scalars(tmp_path):
    td = TensorDict(
        {"s": torch.tensor(3.5), "v": torch.arange(4), "n": {"z": torch.tensor(True)}},
        batch_size=[],
    )
    mm = td.memmap(tmp_path / "z")
    assert_same(mm, td)
    assert_same(load_memmap(tmp_path / "z"), td)


def test_multi_dim_stack_and_batch(tmp_path):
    td = TensorDict({"a": torch.arange(6).reshape(2, 3)}, batch_size=[2, 3])
    td["st"] = NonTensorStack.from_list([["a", "b", "c"], ["d", "e", "f"]])
    td["lists"] = NonTensorStack.from_list(
        [[[1, 2], [3, 4], [5, 6]], [[1, 2], [3, 4], [5, 6]]], [2, 3]
    )
    td.memmap(tmp_path / "s")
    back = load_memmap(tmp_path / "s")
    assert back["st"] == [["a", "b", "c"], ["d", "e", "f"]]
    assert back.get("lists").batch_size == torch.Size([2, 3])
    assert back["lists"][1][2] == [5, 6]


# --------------------------------------------------------------------------------------------
# From a PersistentTensorDict (both backends)
# --------------------------------------------------------------------------------------------


def test_ptd_memmap_round_trip(tmp_path, store):
    prefix = tmp_path / "from_store"
    mm = store.memmap(prefix)
    want = expected_from_store(store)
    assert isinstance(mm, TensorDict)
    assert mm.is_locked
    assert_same(mm, want)  # h5 strings come back as str, bytes as bytes
    assert is_mapped(mm["f32"], prefix)
    assert is_mapped(mm["nested", "deep", "v"], prefix)
    assert_same(load_memmap(prefix, allow_pickle=True), want)
    with pytest.raises(Exception, match="in-place"):
        store.memmap_(prefix)


def test_ptd_view_memmap(tmp_path, store):
    mm = store[1:3].memmap(tmp_path / "view")
    assert_same(mm, expected_from_store(store)[1:3])
    mm2 = store["nested"].memmap(tmp_path / "nested")
    assert torch.equal(mm2["deep", "v"], store["nested", "deep", "v"])
    mm3 = store[torch.tensor([3, 0])].memmap(tmp_path / "fancy")
    assert torch.equal(mm3["i64"], store["i64"][torch.tensor([3, 0])])


def test_streaming_reads_bounded_chunk_aligned_slabs(recorder, tmp_path, backend):
    n = 1000
    data = torch.arange(n * 64, dtype=torch.float32).reshape(n, 64)  # 256 kB
    fname = str(tmp_path / ("big.h5" if backend == "h5" else "big.zarr"))
    chunk_kw = {"chunks": (30, 64)}  # the same chunks on both backends
    p = PersistentTensorDict(filename=fname, batch_size=[n], mode="w", backend=backend, **chunk_kw)
    p["x"] = data
    p["n", "y"] = torch.arange(n)
    recorder.clear()
    seen = []
    summary = export_memmap(p, tmp_path / "mm", progress=seen.append, slab_bytes=40_000)
    assert isinstance(summary, MemmapSummary)
    assert tensor_nbytes(p) == summary.nbytes
    x_reads = recorder.reads_of("x")
    assert len(x_reads) > 5
    for call in x_reads:
        assert call.nbytes <= 40_000 + 30 * 64 * 4
        assert call.rows[0] % 30 == 0  # aligned to the store's chunks
    assert recorder.rows_read("x").tolist() == list(range(n))
    assert sum(seen) == summary.nbytes == data.numel() * 4 + n * 8
    assert summary.leaves == 2
    assert summary.groups == 1
    back = load_memmap(tmp_path / "mm")
    assert torch.equal(back["x"], data)
    assert torch.equal(back["n", "y"], torch.arange(n))
    p.close()


def test_export_from_path(tmp_path, backend):
    fname = str(tmp_path / ("p.h5" if backend == "h5" else "p.zarr"))
    PersistentTensorDict.from_dict(
        {"a": torch.arange(5), "s": "txt"}, fname, batch_size=[5], backend=backend
    ).close()
    summary = export_memmap(fname, tmp_path / "out")
    assert summary.leaves == 1
    assert summary.non_tensors == 1
    assert summary.nbytes == 40
    assert summary.path == str(tmp_path / "out")
    back = load_memmap(tmp_path / "out")
    assert torch.equal(back["a"], torch.arange(5))
    assert back["s"] == "txt"
    with pytest.raises(StoreExistsError):
        export_memmap(fname, tmp_path / "out")
    export_memmap(fname, tmp_path / "out", overwrite=True)


def test_source_inside_destination_is_refused(tmp_path, backend):
    fname = str(tmp_path / "d" / ("p.h5" if backend == "h5" else "p.zarr"))
    os.makedirs(tmp_path / "d")
    p = PersistentTensorDict.from_dict(
        {"a": torch.arange(5)}, fname, batch_size=[5], backend=backend
    )
    with pytest.raises(PtdValueError, match="inside"):
        p.memmap(tmp_path / "d", existsok=True)
    assert torch.equal(p["a"], torch.arange(5))
    p.close()


# --------------------------------------------------------------------------------------------
# Errors: destination, atomicity
# --------------------------------------------------------------------------------------------


def test_existing_prefix(tmp_path):
    td = TensorDict({"a": torch.zeros(2)}, batch_size=[2])
    (tmp_path / "empty").mkdir()
    td.memmap(tmp_path / "empty")  # an empty directory is fine
    with pytest.raises(StoreExistsError, match="existsok"):
        td.memmap(tmp_path / "empty", existsok=False)
    with pytest.raises(RuntimeError, match="existsok"):  # as tensordict raises
        td.memmap(tmp_path / "empty", existsok=False)
    td.memmap(tmp_path / "empty")  # existsok=True by default, as in tensordict
    (tmp_path / "empty" / "stale.memmap").write_bytes(b"x")
    TensorDict({"b": torch.ones(2)}, batch_size=[2]).memmap(tmp_path / "empty", existsok=True)
    assert sorted(os.listdir(tmp_path / "empty")) == [
        "b.memmap",
        "meta.json",
    ]  # replaced, not merged
    TensorDict({"c": torch.ones(2)}, batch_size=[2]).memmap_(tmp_path / "empty", overwrite=True)
    (tmp_path / "file").write_text("x")
    with pytest.raises(StoreExistsError):
        td.memmap(tmp_path / "file")
    td.memmap(tmp_path / "deep" / "er" / "dir")  # parents are created


def test_failure_midway_leaves_nothing(tmp_path):
    td = TensorDict(
        {"a": torch.arange(3), "bad": NonTensorData(lambda x: x, [3]), "z": torch.ones(3)},
        batch_size=[3],
    )
    with pytest.raises(PtdTypeError, match="bad"):
        td.memmap(tmp_path / "out")
    assert os.listdir(tmp_path) == []
    # with overwrite, the old directory survives a failed write untouched
    TensorDict({"old": torch.arange(3)}, batch_size=[3]).memmap(tmp_path / "out")
    with pytest.raises(PtdTypeError):
        td.memmap(tmp_path / "out", existsok=True)
    assert os.listdir(tmp_path) == ["out"]
    assert torch.equal(load_memmap(tmp_path / "out")["old"], torch.arange(3))


def test_failure_midway_from_store(tmp_path, store):
    calls = []

    def failing(call):
        if call.op == "read":
            calls.append(call.path)
            if len(calls) == 5:
                raise OSError("disk on fire")

    # the store reopened with the failing reads (the fixture opened it before)
    with recording(fault=failing) as rec:
        failing_store = PersistentTensorDict(
            filename=store.filename, batch_size=[4], mode="r", backend=store.backend
        )
        with pytest.raises(OSError, match="disk on fire"):
            failing_store.memmap(tmp_path / "out")
        failing_store.close()
    assert len(calls) == 5
    assert rec.backends
    assert not (tmp_path / "out").exists()
    assert [n for n in os.listdir(tmp_path) if "ptd-tmp" in n] == []


def test_reserved_and_colliding_keys(tmp_path):
    # a key named like a meta.json field is stored escaped and loads under its own name
    TensorDict({"shape": torch.arange(2)}, batch_size=[2]).memmap(tmp_path / "a")
    assert TensorDict.load_memmap(tmp_path / "a")["shape"].tolist() == [0, 1]
    assert os.path.exists(tmp_path / "a" / "%2573hape.memmap")
    import shutil

    shutil.rmtree(tmp_path / "a")
    # a real key spelled like the escaped name of another is refused, not mixed up
    with pytest.raises(PtdValueError, match="taken"):
        TensorDict({"shape": torch.zeros(2), "%73hape": torch.zeros(2)}, batch_size=[2]).memmap(
            tmp_path / "d"
        )
    with pytest.raises(PtdValueError, match="taken"):
        TensorDict({"x": torch.zeros(2), "x.memmap": {"y": torch.zeros(2)}}, batch_size=[2]).memmap(
            tmp_path / "b"
        )
    with pytest.raises(PtdValueError, match="taken"):
        TensorDict({"meta.json": {"y": torch.zeros(2)}}, batch_size=[2]).memmap(tmp_path / "c")
    assert not any(n for n in os.listdir(tmp_path))


# --------------------------------------------------------------------------------------------
# Errors: loading
# --------------------------------------------------------------------------------------------


@pytest.fixture
def saved(tmp_path):
    td = TensorDict(
        {
            "a": torch.arange(6, dtype=torch.float32).reshape(3, 2),
            "n": {"b": torch.ones(3)},
            "s": "x",
        },
        batch_size=[3],
    )
    td.memmap(tmp_path / "m")
    return tmp_path / "m"


def test_missing_prefix(tmp_path):
    with pytest.raises(StoreNotFoundError):
        load_memmap(tmp_path / "nothing")
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(CorruptStoreError, match=r"meta.json"):
        load_memmap(tmp_path / "emptydir")


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"shape": [3]}', "no '_type'"),
        (b'{"_type": "<class \'foo.Bar\'>", "shape": [3]}', "foo.Bar"),
        (
            b'{"_type": "<class \'tensordict._td.TensorDict\'>", "shape": [3], "_format_version": 2}',
            "format version 2",
        ),
        (b'{"_type": "<class \'tensordict._td.TensorDict\'>", "shape": "3"}', "shape"),
        (
            b'{"_type": "<class \'tensordict._td.TensorDict\'>", "shape": [3], "_names": ["a", "b"]}',
            "_names",
        ),
    ],
)
def test_corrupt_meta(saved, content, match):
    (saved / "meta.json").write_bytes(content)
    with pytest.raises(CorruptStoreError, match=match) as info:
        load_memmap(saved)
    assert "meta.json" in str(info.value)


def test_corrupt_nested_meta_names_its_file(saved):
    (saved / "n" / "meta.json").write_bytes(b"{")
    with pytest.raises(CorruptStoreError, match=os.path.join("n", "meta.json")):
        load_memmap(saved)


def test_too_short_leaf_raises_and_does_not_grow(saved):
    path = saved / "a.memmap"
    path.write_bytes(path.read_bytes()[:10])
    with pytest.raises(CorruptStoreError, match="too short") as info:
        load_memmap(saved)
    assert "a.memmap" in str(info.value)
    assert isinstance(info.value, PtdError)
    assert path.stat().st_size == 10


def test_too_long_leaf_is_fine(saved):
    path = saved / "a.memmap"
    path.write_bytes(path.read_bytes() + b"\0" * 16)
    assert torch.equal(load_memmap(saved)["a"], torch.arange(6.0).reshape(3, 2))


def test_missing_leaf_file_and_dir_raise(saved):
    os.remove(saved / "n" / "b.memmap")
    with pytest.raises(CorruptStoreError, match=r"b.memmap"):
        load_memmap(saved)


def test_missing_subdir_raises(saved):
    import shutil

    shutil.rmtree(saved / "s")
    with pytest.raises(CorruptStoreError, match="missing"):
        load_memmap(saved)


def test_bad_leaf_entries(saved):
    meta = json.loads((saved / "meta.json").read_text())
    meta["a"]["dtype"] = "torch.float128"
    (saved / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(UnsupportedDtypeError, match="float128"):
        load_memmap(saved)
    meta["a"]["dtype"] = "torch.float32"
    meta["a"]["shape"] = [4, 2]
    (saved / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(CorruptStoreError, match="batch size"):
        load_memmap(saved)


def test_hand_written_minimal_directory(tmp_path):
    """format.md §3.4: the minimal form, written with numpy and json only."""
    d = tmp_path / "hw_min"
    os.makedirs(d / "nested" / "s")
    np.arange(6, dtype=np.float32).reshape(3, 2).tofile(d / "a.memmap")
    np.ones(3, dtype=np.int64).tofile(d / "nested" / "b.memmap")
    td_type = "<class 'tensordict._td.TensorDict'>"
    (d / "meta.json").write_text(
        json.dumps(
            {
                "a": {"shape": [3, 2], "dtype": "torch.float32"},
                "nested": {"type": "TensorDict"},
                "shape": [3],
                "_type": td_type,
            }
        )
    )
    (d / "nested" / "meta.json").write_text(
        json.dumps(
            {
                "b": {"shape": [3], "dtype": "torch.int64"},
                "s": {"type": "NonTensorData"},
                "shape": [3],
                "_type": td_type,
            }
        )
    )
    (d / "nested" / "s" / "meta.json").write_text(
        json.dumps({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "data": "hello"})
    )
    td = load_memmap(d)
    assert td.batch_size == torch.Size([3])
    assert td.device is None
    assert torch.equal(td["nested", "b"], torch.ones(3, dtype=torch.int64))
    assert td["nested", "s"] == "hello"


def test_legacy_raw_names_and_ptd_type(tmp_path):
    """The reference's PersistentTensorDict.memmap writes raw key names and PTD types."""
    d = tmp_path / "legacy"
    os.makedirs(d / "sub dir")
    np.arange(3, dtype=np.int32).tofile(d / "sp ace.memmap")
    np.arange(3, dtype=np.int16).tofile(d / "sub dir" / "v.memmap")
    ptd_type = "<class 'tensordict.persistent.PersistentTensorDict'>"
    (d / "meta.json").write_text(
        json.dumps(
            {
                "sp ace": {"dtype": "torch.int32", "shape": [3], "device": "cpu"},
                "sub dir": {"type": "PersistentTensorDict"},
                "shape": [3],
                "device": "cpu",
                "_type": ptd_type,
                "_class": "tensordict:PersistentTensorDict",
            }
        )
    )
    (d / "sub dir" / "meta.json").write_text(
        json.dumps({"v": {"dtype": "torch.int16", "shape": [3]}, "shape": [3], "_type": ptd_type})
    )
    td = PersistentTensorDict.load_memmap(d)
    assert isinstance(td, TensorDict)
    assert torch.equal(td["sp ace"], torch.arange(3, dtype=torch.int32))
    assert torch.equal(td["sub dir", "v"], torch.arange(3, dtype=torch.int16))


# --------------------------------------------------------------------------------------------
# The golden directory written by tensordict 0.15.3 (runs without tensordict)
# --------------------------------------------------------------------------------------------


def test_golden_directory_loads_without_tensordict():
    exp = GOLDEN_MOD.expected()
    with pytest.raises(PickleRefusedError):  # "raw" is pickled by tensordict
        load_memmap(GOLDEN, mode="r")
    td = load_memmap(GOLDEN, mode="r", allow_pickle=True)
    assert td.batch_size == torch.Size([2])
    assert td.names == ["row"]
    for key, dt in DTYPES.items():
        got = td[key]
        assert got.dtype == dt, key
        assert is_mapped(got, GOLDEN) is False  # mode "r": a private (copy-on-write) mapping
        want = exp[key]
        if dt in (torch.bfloat16, torch.float8_e4m3fn):
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), key
        else:
            assert torch.equal(got, want), key
    assert td["empty"].shape == torch.Size([2, 0])
    assert torch.equal(td["sp ace/x"], exp["sp ace/x"])
    assert torch.equal(td["nested", "deep", "v"], exp["nested"]["deep"]["v"])
    assert torch.equal(td["nested", "w"], exp["nested"]["w"])
    assert td["text"] == exp["text"]
    assert td["number"] == 42
    assert td["mapping"] == exp["mapping"]
    assert td["stack"] == exp["stack"]
    assert td["raw"] == exp["raw"]


def test_golden_r_plus_maps_the_files(tmp_path):
    import shutil

    shutil.copytree(GOLDEN, tmp_path / "g")
    td = load_memmap(tmp_path / "g", allow_pickle=True)
    assert is_mapped(td["f32"], tmp_path / "g")
    td["i64"][0, 0] = 100
    assert np.fromfile(tmp_path / "g" / "i64.memmap", dtype=np.int64)[0] == 100


# --------------------------------------------------------------------------------------------
# Interop with tensordict 0.15.3 (the oracle)
# --------------------------------------------------------------------------------------------


@pytest.mark.interop
def test_ptd_writes_tensordict_reads(tmp_path):
    tensordict = pytest.importorskip("tensordict")
    td = sample()
    td.exclude("f8", inplace=True)  # tensordict 0.15 cannot load float8 (format.md §3.3)
    td.memmap(tmp_path / "p")
    t = tensordict.TensorDict.load_memmap(tmp_path / "p", allow_pickle=True)
    assert t.batch_size == td.batch_size
    assert t.names == ["row"]
    for key in td.keys(True, True):
        got, want = t.get(key), td.get(key)
        assert got.dtype == want.dtype, key
        if want.dtype == torch.bfloat16:
            assert torch.equal(got.view(torch.int16), want.view(torch.int16))
        else:
            assert torch.equal(got, want), key
    assert t["text"] == "hello"
    assert t["none"] is None
    assert t["obj"] == {"k": [1, 2.5, "x"]}
    assert t["raw"] == b"\x00\x01bytes"
    assert t["tup"] == (1, 2)
    assert list(t["stack"]) == ["s0", "s1", "s2", "s3"]
    assert t["nested", "w"].dtype == torch.bfloat16


@pytest.mark.interop
def test_ptd_store_writes_tensordict_reads(tmp_path, store):
    tensordict = pytest.importorskip("tensordict")
    store.del_("f8")  # tensordict 0.15 cannot load float8 (format.md §3.3)
    store.memmap(tmp_path / "p")
    t = tensordict.TensorDict.load_memmap(tmp_path / "p", allow_pickle=True)
    want = expected_from_store(store)
    for key in want.keys(True, True):
        if key == "f8":
            continue
        assert same_bits(t.get(key), want.get(key)), key
    assert t["text"] == "hello"
    assert t["raw"] == b"\x00raw"
    assert list(t["stack"]) == ["a", "b", "c", "d"]


@pytest.mark.interop
def test_tensordict_writes_ptd_reads(tmp_path):
    tensordict = pytest.importorskip("tensordict")
    T = tensordict.TensorDict
    t = T(
        {
            "a": torch.arange(6.0).reshape(3, 2),
            "bf": torch.randn(3, 4).to(torch.bfloat16),
            "n": T(
                {
                    "b": torch.zeros(3, 0),
                    "sp ace": torch.arange(3),
                    "deep": {"c": torch.ones(3, 1, dtype=torch.complex64)},
                },
                [3],
            ),
            "s": "hello",
            "u": torch.arange(3).to(torch.uint16),
            "b": torch.tensor([True, False, True]),
        },
        batch_size=[3],
        names=["batch"],
    )
    t["st"] = tensordict.NonTensorStack("x", "y", "z")
    t["by"] = tensordict.NonTensorData(b"raw", batch_size=[3])
    t.memmap(tmp_path / "t")
    td = load_memmap(tmp_path / "t", allow_pickle=True)
    assert td.names == ["batch"]
    assert td.batch_size == torch.Size([3])
    for key in t.keys(True, True):
        assert same_bits(td.get(key), t.get(key).as_subclass(torch.Tensor)), key
    assert td["s"] == "hello"
    assert td["st"] == ["x", "y", "z"]
    assert td["by"] == b"raw"
    assert td["n", "b"].shape == torch.Size([3, 0])
    assert is_mapped(td["n", "deep", "c"], tmp_path / "t")


@pytest.mark.interop
def test_ptd_in_place_then_tensordict_reads(tmp_path):
    tensordict = pytest.importorskip("tensordict")
    td = TensorDict({"a": torch.zeros(3)}, batch_size=[3])
    td.memmap_(tmp_path / "i")
    td["a"][1] = 4.0  # writes reach the file
    t = tensordict.TensorDict.load_memmap(tmp_path / "i")
    assert t["a"].tolist() == [0.0, 4.0, 0.0]


def test_no_stray_warnings_on_h5_strings(tmp_path):
    p = PersistentTensorDict.from_dict({"s": "hello"}, str(tmp_path / "s.h5"), batch_size=[])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        mm = p.memmap(tmp_path / "m")
    assert mm["s"] == "hello"
    p.close()
