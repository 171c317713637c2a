"""The Backend contract, run against every backend (like zarr's ``StoreTests``).

``TestContract`` holds what every backend must do; the format-specific expectations (how a
non-tensor of each type reads back on h5 vs zarr) are in small tables beside it. Interop tests
with tensordict 0.15 as an oracle are marked ``interop``.
"""

from __future__ import annotations

import json
import os
import pickle
import warnings
from pathlib import Path as FsPath
from typing import Any

import h5py
import numpy as np
import pytest
import torch
import zarr

from ptd.errors import (
    ClosedStoreError,
    CorruptStoreError,
    PickleRefusedError,
    PtdError,
    PtdKeyError,
    PtdTypeError,
    PtdValueError,
    ReadOnlyError,
    StoreExistsError,
    StoreLockedError,
    StoreNotFoundError,
    UnknownBackendError,
)
from ptd.ops.dtypes import from_storage, to_storage
from ptd.storage.api import GUARDED, Backend, NodeKind, ValueKind
from ptd.storage.location import StoreLocation
from ptd.storage.registry import BACKENDS, detect_backend, get_backend, reopen

NUMERIC_DTYPES = [
    "bool",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "int8",
    "int16",
    "int32",
    "int64",
    "float16",
    "float32",
    "float64",
    "complex64",
    "complex128",
]
SUFFIX = {"h5": ".h5", "zarr": ".zarr"}
STR_WARNING = "The h5 backend of PersistentTensorDict reads the string"
PICKLE_WARNING = "PersistentTensorDict is loading a pickled non-tensor zarr field"


# --- fixtures --------------------------------------------------------------------------------
@pytest.fixture(params=list(BACKENDS))
def name(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def path(tmp_path: FsPath, name: str) -> FsPath:
    return tmp_path / f"data{SUFFIX[name]}"


@pytest.fixture
def opener(name: str, path: FsPath):
    """``opener(mode="w", target=path, **kw)``: opens a backend, closed at teardown."""
    opened: list[Backend] = []

    def open_(mode: str = "w", target: Any = None, **kw: Any) -> Backend:
        b = get_backend(name).open(path if target is None else target, mode, **kw)
        opened.append(b)
        return b

    yield open_
    for b in opened:
        b.close()


@pytest.fixture
def be(opener) -> Backend:
    return opener("w")


def _arr(shape=(4, 3), dtype="float32") -> np.ndarray:
    return np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape).astype(dtype)


# --- the contract ----------------------------------------------------------------------------
class TestOpen:
    def test_modes_create_and_reopen(self, opener, path, name):
        b = opener("w")
        assert b.writable
        assert not b.closed
        assert b.name == name
        b.create_array(("a",), shape=(2,), dtype=np.dtype("f4"), data=np.ones(2, "f4"))
        b.close()
        assert b.closed
        r = opener("r")
        assert not r.writable
        np.testing.assert_array_equal(r.read(("a",)), np.ones(2, "f4"))
        r.close()
        a = opener("a")
        a.create_array(("b",), shape=(1,), dtype=np.dtype("i8"))
        a.close()
        assert [c for c, _ in opener("r+").children(())] == ["a", "b"]

    @pytest.mark.parametrize("mode", ["r", "r+"])
    def test_missing_store(self, opener, path, mode):
        with pytest.raises(StoreNotFoundError, match=str(path.name)) as info:
            opener(mode)
        assert isinstance(info.value, FileNotFoundError)

    @pytest.mark.parametrize("mode", ["w-", "x"])
    def test_existing_store(self, opener, mode):
        opener("w").close()
        with pytest.raises(StoreExistsError) as info:
            opener(mode)
        assert isinstance(info.value, FileExistsError)

    @pytest.mark.parametrize("mode", ["w-", "x", "a"])
    def test_new_store_modes(self, opener, mode):
        b = opener(mode)
        assert b.writable
        assert b.reopen_spec is not None
        assert b.reopen_spec.mode == "r+"

    @pytest.mark.parametrize("mode", ["q", "rb", "", None])
    def test_invalid_mode(self, opener, mode):
        with pytest.raises(PtdValueError, match="r, r\\+, w, w-, x, a"):
            opener(mode)

    def test_reopen_spec_never_truncates(self, opener, path, name):
        b = opener("w")
        spec = b.reopen_spec
        assert spec.mode == "r+"
        assert spec.location.path == os.fspath(path)
        b.create_array(("a",), shape=(2,), dtype=np.dtype("f4"), data=np.ones(2, "f4"))
        b.close()
        again = reopen(spec)
        np.testing.assert_array_equal(again.read(("a",)), np.ones(2, "f4"))
        assert opener("r").reopen_spec.mode == "r"

    def test_corrupt_file(self, opener, tmp_path, name):
        bad = tmp_path / f"bad{SUFFIX[name]}"
        if name == "h5":
            bad.write_bytes(b"garbage, not hdf5" * 10)
        else:
            bad.mkdir()
            (bad / "zarr.json").write_text('{"zarr_fo')
        for mode in ("r", "r+"):
            with pytest.raises(CorruptStoreError, match=bad.name):
                opener(mode, target=bad)

    def test_h5_truncated_and_directory(self, tmp_path):
        good = tmp_path / "good.h5"
        b = get_backend("h5").open(good, "w")
        b.create_array(("a",), shape=(1000,), dtype=np.dtype("f8"), data=np.ones(1000))
        b.close()
        trunc = tmp_path / "trunc.h5"
        trunc.write_bytes(good.read_bytes()[:4000])
        with pytest.raises(CorruptStoreError, match=r"trunc.h5"):
            get_backend("h5").open(trunc, "r")
        (tmp_path / "dir.h5").mkdir()
        with pytest.raises(CorruptStoreError, match=r"dir.h5"):
            get_backend("h5").open(tmp_path / "dir.h5", "r")

    def test_zarr_not_a_group(self, tmp_path):
        h5file = tmp_path / "x.h5"
        get_backend("h5").open(h5file, "w").close()
        with pytest.raises(CorruptStoreError, match=r"x.h5"):
            get_backend("zarr").open(h5file, "r")
        zarr.open_array(tmp_path / "arr.zarr", mode="w", shape=(3,), dtype="i4")
        with pytest.raises(CorruptStoreError, match=r"arr.zarr"):
            get_backend("zarr").open(tmp_path / "arr.zarr", "r")

    def test_h5_lock_conflict(self, tmp_path):
        p = tmp_path / "l.h5"
        get_backend("h5").open(p, "w").close()
        b = get_backend("h5").open(p, "r")
        try:
            with pytest.raises(StoreLockedError, match="locking="):
                get_backend("h5").open(p, "w")
        finally:
            b.close()

    def test_h5_read_mode_stays_read_only_on_shared_handle(self, tmp_path):
        p = tmp_path / "s.h5"
        w = get_backend("h5").open(p, "w")
        w.create_array(("a",), shape=(2,), dtype=np.dtype("f4"))
        r = get_backend("h5").open(p, "r")  # HDF5 shares the writable handle
        with pytest.raises(ReadOnlyError):
            r.write(("a",), (), np.zeros(2, "f4"))
        r.close()
        w.close()


class TestArrays:
    @pytest.mark.parametrize("dtype", NUMERIC_DTYPES)
    def test_roundtrip_dtypes(self, be, dtype):
        data = _arr((3, 2), dtype)
        be.create_array(("x",), shape=data.shape, dtype=data.dtype, data=data)
        out = be.read(("x",))
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, data)
        meta = be.array_meta(("x",))
        assert meta.kind is ValueKind.NUMERIC
        assert meta.torch_dtype == dtype
        assert meta.shape == (3, 2)

    def test_bfloat16_via_to_storage(self, be):
        t = torch.tensor([[1.5, -2.0], [3.25, 0.0]], dtype=torch.bfloat16)
        arr, attrs = to_storage(t)
        be.create_array(("bf",), shape=arr.shape, dtype=arr.dtype, data=arr, attrs=attrs)
        meta = be.array_meta(("bf",))
        assert meta.torch_dtype == "bfloat16"
        assert meta.kind is ValueKind.NUMERIC
        back = from_storage(be.read(("bf",)), meta.attrs)
        assert back.dtype == torch.bfloat16
        assert torch.equal(back, t)
        row = from_storage(be.read(("bf",), (1,)), meta.attrs)
        assert torch.equal(row, t[1])

    @pytest.mark.parametrize(
        "sel",
        [
            (2,),
            (slice(1, 3),),
            (slice(0, 5, 2),),
            (np.array([0, 2, 3]),),
            (np.array([1, 2, 3]),),  # consecutive
            (slice(1, 4), np.array([0, 2])),
            (1, np.array([1, 2])),
            (np.array([0, 3]), 1),
            (slice(0, 2), 1),
            (3, 2),
            (slice(2, 2),),
            (np.array([], dtype=np.int64),),
        ],
        ids=repr,
    )
    def test_read_write_selections(self, be, sel):
        data = _arr((5, 3), "float64")
        be.create_array(("x",), shape=data.shape, dtype=data.dtype, data=data)
        expect = data[sel]  # one index array at most: numpy agrees with the contract
        out = be.read(("x",), sel)
        assert isinstance(out, np.ndarray)
        assert out.dtype == data.dtype
        np.testing.assert_array_equal(out, expect)
        # write the selection back, negated
        be.write(("x",), sel, -expect)
        data2 = be.read(("x",))
        np.testing.assert_array_equal(be.read(("x",), sel), -expect)
        mask = np.ones_like(data, dtype=bool)
        mask[sel] = False
        np.testing.assert_array_equal(data2[mask], data[mask])

    def test_sparse_index_on_large_array(self, be):
        data = np.arange(40_000 * 64, dtype=np.float32).reshape(40_000, 64)
        be.create_array(("big",), shape=data.shape, dtype=data.dtype, data=data)
        idx = np.array([3, 17_000, 39_999])
        np.testing.assert_array_equal(be.read(("big",), (idx,)), data[idx])
        idx = np.arange(100, 2000, 3)  # dense: read as a span
        np.testing.assert_array_equal(be.read(("big",), (idx, slice(2, 5))), data[idx, 2:5])

    def test_0d_and_zero_size(self, be):
        be.create_array(("s",), shape=(), dtype=np.dtype("f8"), data=np.array(2.5))
        out = be.read(("s",))
        assert isinstance(out, np.ndarray)
        assert out.shape == ()
        assert out == 2.5
        be.write(("s",), (), np.array(4.0))
        assert be.read(("s",)) == 4.0
        be.create_array(("z",), shape=(0, 4), dtype=np.dtype("i4"))
        assert be.read(("z",)).shape == (0, 4)
        assert be.read(("z",), (slice(0, 0),)).shape == (0, 4)
        be.write(("z",), (), np.zeros((0, 4), "i4"))
        assert be.array_meta(("z",)).shape == (0, 4)

    def test_options_on_scalars_and_empty_arrays(self, be, name):
        opts = {"compression": "gzip"} if name == "h5" else {"chunks": 2}
        be.create_array(
            ("s",), shape=(), dtype=np.dtype("f4"), data=np.array(1.0, "f4"), options=opts
        )
        be.create_array(("z",), shape=(0, 3), dtype=np.dtype("f4"), options=opts, chunks=(2, 3))
        be.write_non_tensor(("t",), "x", options=opts)
        assert be.read(("s",)) == 1.0
        assert be.read(("z",)).shape == (0, 3)

    def test_broadcast_write(self, be):
        be.create_array(("x",), shape=(4, 3), dtype=np.dtype("f4"))
        be.write(("x",), (slice(1, 3),), np.array([1, 2, 3], "f4"))
        be.write(("x",), (0,), np.array(7, "f4"))
        out = be.read(("x",))
        np.testing.assert_array_equal(out[1:3], [[1, 2, 3]] * 2)
        np.testing.assert_array_equal(out[0], [7, 7, 7])

    @pytest.mark.parametrize(
        ("sel", "shape"), [((), (6, 7)), ((), (3,)), ((slice(0, 2),), (3, 2)), ((1,), (2, 2))]
    )
    def test_shape_mismatch_raises(self, be, sel, shape, path):
        be.create_array(("n", "x"), shape=(6, 2), dtype=np.dtype("f4"))
        with pytest.raises(PtdValueError, match="n/x") as info:
            be.write(("n", "x"), sel, np.ones(shape, "f4"))
        assert path.name in str(info.value)
        assert str(list(shape)) in str(info.value)
        np.testing.assert_array_equal(be.read(("n", "x")), np.zeros((6, 2), "f4"))

    def test_extra_leading_one_dims(self, be):
        be.create_array(("x",), shape=(4, 3), dtype=np.dtype("f4"))
        be.write(("x",), (1,), np.ones((1, 3), "f4"))  # numpy drops leading 1s on assignment
        np.testing.assert_array_equal(be.read(("x",), (1,)), np.ones(3, "f4"))
        with pytest.raises(PtdValueError, match=r"\[2, 3\]"):
            be.write(("x",), (1,), np.ones((2, 3), "f4"))

    def test_missing_key(self, be, path):
        with pytest.raises(PtdKeyError, match="nope") as info:
            be.read(("nope",))
        assert path.name in str(info.value)
        be.create_group(("g",))
        with pytest.raises(PtdKeyError, match="group"):
            be.read(("g",))
        with pytest.raises(PtdKeyError):
            be.array_meta(("g", "x"))

    def test_create_replaces(self, be):
        be.create_array(("x",), shape=(2,), dtype=np.dtype("f4"))
        be.create_array(("x",), shape=(3, 3), dtype=np.dtype("i8"), data=np.ones((3, 3), "i8"))
        assert be.array_meta(("x",)).shape == (3, 3)
        assert be.read(("x",)).sum() == 9


class TestStructure:
    def test_groups_attrs(self, be):
        be.create_group(("g", "h"), attrs={"__tensordict__": {"batch_size": [3], "version": 1}})
        assert be.kind(("g",)) is NodeKind.GROUP
        assert be.kind(("g", "h")) is NodeKind.GROUP
        assert be.get_attrs(("g", "h")) == {"__tensordict__": {"batch_size": [3], "version": 1}}
        be.set_attrs(("g", "h"), {"note": "x", "n": 3, "l": [1, 2]})
        attrs = be.get_attrs(("g", "h"))
        assert attrs["note"] == "x"
        assert attrs["n"] == 3
        assert attrs["l"] == [1, 2]
        assert all(type(v) in (str, int, list, dict) for v in attrs.values())
        be.set_attrs((), {"root": True})
        assert be.get_attrs(())["root"] is True
        be.create_group(("g", "h"), attrs={"more": 1})  # existing group: attrs merged
        assert be.get_attrs(("g", "h"))["note"] == "x"
        assert be.get_attrs(("g", "h"))["more"] == 1
        be.create_array(("a",), shape=(2,), dtype=np.dtype("f4"), attrs={"unit": "m"})
        assert be.get_attrs(("a",)) == {"unit": "m"} == dict(be.array_meta(("a",)).attrs)

    def test_attr_value_kinds(self, be):
        be.create_group(("g",))
        values = {
            "none": None,
            "names": ["time", "x"],
            "nested": {"names": ["t", None]},
            "f": 1.5,
            "b": False,
            "ints": [1, 2],
        }
        be.set_attrs(("g",), values)
        assert be.get_attrs(("g",)) == values

    def test_kind_children_order(self, be):
        for k in ("zeta", "alpha", "mid"):
            be.create_array((k,), shape=(1,), dtype=np.dtype("f4"))
        be.create_group(("beta",))
        assert be.children(()) == [
            ("alpha", NodeKind.ARRAY),
            ("beta", NodeKind.GROUP),
            ("mid", NodeKind.ARRAY),
            ("zeta", NodeKind.ARRAY),
        ]
        assert be.kind(("nope",)) is None
        assert be.kind(("alpha", "x")) is None
        assert be.kind(()) is NodeKind.GROUP
        assert be.kind(("alpha",)) is NodeKind.ARRAY

    def test_walk(self, be):
        be.create_array(("b",), shape=(3,), dtype=np.dtype("f4"))
        be.create_array(("a", "y"), shape=(3, 2), dtype=np.dtype("i8"))
        be.create_array(("a", "x", "deep"), shape=(3,), dtype=np.dtype("f8"))
        be.create_group(("empty",))
        be.write_non_tensor(("a", "s"), "hello")
        walked = be.walk()
        assert [p for p, _, _ in walked] == [
            ("a",),
            ("a", "s"),
            ("a", "x"),
            ("a", "x", "deep"),
            ("a", "y"),
            ("b",),
            ("empty",),
        ]
        for p, kind, meta in walked:
            assert kind is be.kind(p)
            if kind is NodeKind.ARRAY:
                assert meta == be.array_meta(p)
            else:
                assert meta is None
        assert [p for p, _, _ in be.walk(("a",))] == [
            ("a", "s"),
            ("a", "x"),
            ("a", "x", "deep"),
            ("a", "y"),
        ]
        assert dict((p, m) for p, _, m in walked)[("a", "s")].kind is ValueKind.NON_TENSOR

    def test_delete_move(self, be, path):
        data = _arr((3,), "f4")
        be.create_array(("g", "x"), shape=(3,), dtype=data.dtype, data=data)
        be.create_array(("y",), shape=(3,), dtype=data.dtype, data=data)
        be.move(("g",), ("h", "g2"))
        assert be.kind(("g",)) is None
        np.testing.assert_array_equal(be.read(("h", "g2", "x")), data)
        be.move(("y",), ("z",))
        np.testing.assert_array_equal(be.read(("z",)), data)
        with pytest.raises(PtdKeyError, match="z"):
            be.move(("h",), ("z",))
        with pytest.raises(PtdKeyError, match="missing") as info:
            be.move(("missing",), ("q",))
        assert path.name in str(info.value)
        be.delete(("h", "g2"))
        assert be.children(("h",)) == []
        be.delete(("z",))
        assert be.kind(("z",)) is None
        with pytest.raises(PtdKeyError, match="z"):
            be.delete(("z",))

    def test_read_only(self, opener):
        b = opener("w")
        b.create_array(("x",), shape=(2,), dtype=np.dtype("f4"))
        b.create_group(("g",))
        b.close()
        r = opener("r")
        calls = [
            lambda: r.write(("x",), (), np.ones(2, "f4")),
            lambda: r.create_array(("y",), shape=(1,), dtype=np.dtype("f4")),
            lambda: r.create_group(("h",)),
            lambda: r.delete(("x",)),
            lambda: r.move(("x",), ("w",)),
            lambda: r.set_attrs(("x",), {"a": 1}),
            lambda: r.write_non_tensor(("s",), "x"),
        ]
        for call in calls:
            with pytest.raises(ReadOnlyError, match="'") as info:
                call()
            assert isinstance(info.value, PermissionError)
        np.testing.assert_array_equal(r.read(("x",)), np.zeros(2, "f4"))

    def test_closed(self, be):
        be.create_array(("x",), shape=(2,), dtype=np.dtype("f4"))
        be.read(("x",))  # cached
        be.close()
        be.close()  # idempotent
        assert be.closed
        assert not be.writable
        for call in (
            lambda: be.read(("x",)),
            lambda: be.children(()),
            lambda: be.array_meta(("x",)),
            lambda: be.write(("x",), (), np.ones(2, "f4")),
            lambda: be.kind(("x",)),
            lambda: be.walk(),
            lambda: be.read_non_tensor(("x",)),
        ):
            with pytest.raises(ClosedStoreError):
                call()


# --- non-tensors -----------------------------------------------------------------------------
def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b)) and type(a) is type(b)
    return a == b and type(a) is type(b)


#: value written -> (h5 read back, zarr read back)
SINGLE = {
    "str": ("héllo", b"h\xc3\xa9llo", "héllo"),
    "bytes": (b"ab", np.bytes_(b"ab"), b"ab"),
    "bytes_nul": (b"a\x00", b"a\x00", b"a\x00"),
    "int": (5, np.int64(5), 5),
    "float": (2.5, np.float64(2.5), 2.5),
    "bool": (True, np.bool_(True), True),
    "none": (None, None, None),
    "dict": ({"k": [1, None], "s": "x"}, {"k": [1, None], "s": "x"}, {"k": [1, None], "s": "x"}),
    "list_str": (["a", "b"], ["a", "b"], ["a", "b"]),
    "list_num": ([1, 2, 3], np.array([1, 2, 3]), [1, 2, 3]),
    "bigint": (2**70, 2**70, 2**70),
    # h5: opaque complex128, as tensordict 0.15.3 writes it; zarr: pickled (not JSON)
    "complex": (1 + 2j, np.complex128(1 + 2j), 1 + 2j),
}


class TestNonTensor:
    @pytest.mark.parametrize("case", list(SINGLE))
    def test_single_roundtrip(self, be, name, case):
        value, h5_expect, zarr_expect = SINGLE[case]
        expect = h5_expect if name == "h5" else zarr_expect
        be.write_non_tensor(("n", "v"), value)
        meta = be.array_meta(("n", "v"))
        assert meta.kind is ValueKind.NON_TENSOR
        assert meta.stack_shape is None
        warn = name == "h5" and case == "str"
        if warn:
            with pytest.warns(FutureWarning, match=STR_WARNING + " '/n/v'"):
                out = be.read_non_tensor(("n", "v"), allow_pickle=True)
        else:
            out = be.read_non_tensor(("n", "v"), allow_pickle=True)
        assert not out.is_stack
        assert _same(out.value, expect), (out.value, expect)
        # selection is ignored for single values
        if not warn:
            assert _same(be.read_non_tensor(("n", "v"), (0,), allow_pickle=True).value, expect)

    @pytest.mark.parametrize(
        ("values", "shape"),
        [
            (["a", "bb", "é"], (3,)),
            ([["a", "b"], ["c", "d"], ["e", "f"]], (3, 2)),
            ([1, 2, 3], (3,)),
            ([[1, 2], [3, 4]], (2, 2)),
            ([b"x", b"yy", b"z"], (3,)),
            ([1.5, 2.5], (2,)),
            ([True, False], (2,)),
            ([], (0,)),
        ],
        ids=repr,
    )
    def test_stack_roundtrip(self, be, values, shape):
        be.write_non_tensor(("st",), values, stack_shape=shape)
        meta = be.array_meta(("st",))
        assert meta.kind is ValueKind.NON_TENSOR
        assert meta.stack_shape == shape
        out = be.read_non_tensor(("st",), allow_pickle=True)
        assert out.is_stack
        assert out.stack_shape == shape
        assert out.value == values
        assert all(
            type(a) is type(b)
            for a, b in zip(
                np.ravel(np.array(out.value, dtype=object)),
                np.ravel(np.array(values, dtype=object)),
                strict=True,
            )
        )
        if shape[0] >= 2:
            sel = (np.array([0, shape[0] - 1]),)
            part = be.read_non_tensor(("st",), sel, allow_pickle=True)
            assert part.is_stack
            assert part.value == [values[0], values[-1]]
            assert part.stack_shape == (2,) + shape[1:]
            one = be.read_non_tensor(("st",), (1,), allow_pickle=True)
            assert one.value == values[1]
            sl = be.read_non_tensor(("st",), (slice(1, None),), allow_pickle=True)
            assert sl.value == values[1:]
            assert sl.stack_shape == (shape[0] - 1,) + shape[1:]

    def test_stack_shape_mismatch(self, be):
        with pytest.raises(PtdValueError, match="st"):
            be.write_non_tensor(("st",), ["a", "b"], stack_shape=(3,))

    @pytest.mark.parametrize("values", [[1, "a"], [{"k": 1}, {"k": 2}], [None, None], [1, 2.0]])
    def test_h5_stack_type_errors(self, opener, name, values):
        b = opener("w")
        if name == "zarr":
            b.write_non_tensor(("st",), values, stack_shape=(2,))
            assert b.read_non_tensor(("st",)).value == values
            return
        with pytest.raises(PtdTypeError, match=r"'st'.*Cannot write a NonTensorStack to h5 unless"):
            b.write_non_tensor(("st",), values, stack_shape=(2,))
        assert b.kind(("st",)) is None

    def test_h5_int_stack_overflow(self, opener, name):
        b = opener("w")
        if name == "zarr":
            b.write_non_tensor(("st",), [2**70, 1], stack_shape=(2,))
            assert b.read_non_tensor(("st",)).value == [2**70, 1]
            return
        with pytest.raises(PtdTypeError, match=r"'st'.*int64"):
            b.write_non_tensor(("st",), [2**70, 1], stack_shape=(2,))

    def test_nul_in_str(self, be, name):
        if name == "zarr":
            be.write_non_tensor(("s",), "a\x00b")
            be.write_non_tensor(("st",), ["a\x00", "b"], stack_shape=(2,))
            assert be.read_non_tensor(("s",)).value == "a\x00b"
            assert be.read_non_tensor(("st",)).value == ["a\x00", "b"]
            return
        with pytest.raises(PtdValueError, match="NUL"):
            be.write_non_tensor(("s",), "a\x00b")
        with pytest.raises(PtdValueError, match=r"'st'.*NUL"):
            be.write_non_tensor(("st",), ["a\x00", "b"], stack_shape=(2,))

    def test_unencodable_on_h5(self, opener, name):
        b = opener("w")
        if name == "zarr":
            b.write_non_tensor(("o",), (1, 2))  # pickled
            assert b.read_non_tensor(("o",), allow_pickle=True).value == (1, 2)
            return
        with pytest.raises(PtdTypeError, match="'o'"):
            b.write_non_tensor(("o",), (1, "a"))
        with pytest.raises(PtdTypeError, match="'o'"):
            b.write_non_tensor(("o",), np.array([object()], dtype=object))

    def test_rows_as_stack_of_foreign_column(self, be, name, path):
        be.close()
        if name == "h5":
            with h5py.File(path, "a") as f:
                f["col"] = np.array([b"a", b"bc", b"d"])
                f["vcol"] = np.array(["x", "y", "z"], dtype=h5py.string_dtype())
            expect = [b"a", b"bc", b"d"], [b"x", b"y", b"z"]
        else:
            g = zarr.open_group(path, mode="a")
            g.create_array("col", shape=(3,), dtype=str)[...] = np.array(["a", "bc", "d"])
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # no zarr v3 spec for fixed bytes yet
                vcol = g.create_array("vcol", shape=(3,), dtype="S2")
            vcol[...] = np.array([b"x", b"y", b"z"])
            expect = ["a", "bc", "d"], [b"x", b"y", b"z"]
        b = get_backend(name).open(path, "r")
        try:
            for key, exp in zip(("col", "vcol"), expect, strict=True):
                meta = b.array_meta((key,))
                assert meta.kind is ValueKind.NON_TENSOR
                rows = b.read_non_tensor((key,), as_stack=True)
                assert rows.is_stack
                assert rows.value == exp
                assert rows.stack_shape == (3,)
                part = b.read_non_tensor((key,), (np.array([0, 2]),), as_stack=True)
                assert part.value == [exp[0], exp[2]]
                whole = b.read_non_tensor((key,))
                assert not whole.is_stack
                assert isinstance(whole.value, np.ndarray)
                assert whole.value.tolist() == exp
        finally:
            b.close()

    def test_replace_non_tensor(self, be):
        be.write_non_tensor(("v",), [1, 2], stack_shape=(2,))
        be.write_non_tensor(("v",), {"a": 1})
        assert be.read_non_tensor(("v",)).value == {"a": 1}
        assert be.array_meta(("v",)).stack_shape is None


class TestZarrPayloads:
    """zarr's JSON/pickle payloads (h5 never pickles)."""

    @pytest.fixture
    def z(self, tmp_path):
        b = get_backend("zarr").open(tmp_path / "p.zarr", "w")
        yield b
        b.close()

    def _raw(self, z, key, payload: bytes, encoding: Any, dtype="uint8"):
        g = zarr.open_group(z.reopen_spec.location.path, mode="r+", use_consolidated=False)
        data = np.frombuffer(payload, dtype=np.uint8).astype(dtype)
        arr = g.create_array(
            key,
            shape=data.shape,
            dtype=dtype,
            compressors=None,
            attributes={"__tensordict_non_tensor__": {"encoding": encoding}},
        )
        arr[...] = data

    def test_layout(self, z, tmp_path):
        z.write_non_tensor(("s",), "é", options={"chunks": 1, "compressors": "zstd"})
        meta = json.loads((tmp_path / "p.zarr" / "s" / "zarr.json").read_text())
        assert meta["shape"] == [8]
        assert meta["data_type"] == "uint8"
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [8]
        assert meta["codecs"] == [{"name": "bytes"}] or meta["codecs"][0]["name"] == "bytes"
        assert len(meta["codecs"]) == 1
        assert meta["attributes"] == {"__tensordict_non_tensor__": {"encoding": "json"}}
        assert (tmp_path / "p.zarr" / "s" / "c" / "0").read_bytes() == b'"\\u00e9"'

    @pytest.mark.parametrize(
        ("value", "encoding"),
        [
            ("hello", "json"),
            (5, "json"),
            (None, "json"),
            ({"k": [1, 2]}, "json"),
            (True, "json"),
            (2**70, "json"),
            (float("inf"), "json"),
            ((1, 2), "pickle"),
            (b"x", "pickle"),
            ({1: "a"}, "pickle"),
            (np.int64(3), "pickle"),
        ],
        ids=repr,
    )
    def test_encoding_choice(self, z, value, encoding):
        z.write_non_tensor(("v",), value)
        assert z.array_meta(("v",)).non_tensor_kind == encoding
        out = z.read_non_tensor(("v",), allow_pickle=True).value
        assert out == value
        assert type(out) is type(value)

    def test_allow_pickle_policy(self, z):
        z.write_non_tensor(("p",), (1, 2))
        z.write_non_tensor(("j",), [1, 2])
        with pytest.raises(
            PickleRefusedError,
            match=r"Refusing to load pickled non-tensor data from a zarr TensorDict.*'p'",
        ) as info:
            z.read_non_tensor(("p",), allow_pickle=False)
        assert isinstance(info.value, RuntimeError)
        assert z.read_non_tensor(("j",), allow_pickle=False).value == [1, 2]
        with pytest.warns(FutureWarning, match=PICKLE_WARNING):
            assert z.read_non_tensor(("p",), allow_pickle=None).value == (1, 2)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert z.read_non_tensor(("p",), allow_pickle=True).value == (1, 2)
        with pytest.raises(PtdTypeError, match="allow_pickle must be a bool or None"):
            z.read_non_tensor(("p",), allow_pickle="yes")

    def test_refused_before_decoding(self, z):
        # a payload whose unpickling would fail: the refusal must come first
        self._raw(z, "evil", b"\x80\x04garbage", "pickle")
        with pytest.raises(PickleRefusedError):
            z.read_non_tensor(("evil",), allow_pickle=False)
        with pytest.raises(PtdValueError, match="'evil'"):
            z.read_non_tensor(("evil",), allow_pickle=True)

    @pytest.mark.parametrize(
        ("payload", "encoding", "match"),
        [
            (b'"x"', "yaml", "Unknown zarr non-tensor encoding: 'yaml'."),
            (b'{"a": ', "json", "Corrupt JSON"),
            (b'"\xff\xfe"', "json", "UTF-8"),
            (pickle.dumps({"a": list(range(50))})[:-20], "pickle", "Corrupt pickle"),
            (b"", "json", "Corrupt JSON"),
            (b'"x"', None, "Unknown zarr non-tensor encoding: None."),
        ],
    )
    def test_corrupt_payloads(self, z, payload, encoding, match):
        self._raw(z, "bad", payload, encoding)
        with pytest.raises(PtdValueError, match=match) as info:
            z.read_non_tensor(("bad",), allow_pickle=True)
        assert "'bad'" in str(info.value)
        assert "p.zarr" in str(info.value)

    def test_marker_on_wrong_dtype(self, z):
        self._raw(z, "bad", b'"x"', "json", dtype="float32")
        with pytest.raises(PtdValueError, match="uint8"):
            z.read_non_tensor(("bad",))

    def test_string_stack_layout_and_options(self, z, tmp_path):
        z.write_non_tensor(
            ("st",), [["a", "b"], ["c", "d"]], stack_shape=(2, 2), options={"chunks": 1}
        )
        meta = json.loads((tmp_path / "p.zarr" / "st" / "zarr.json").read_text())
        assert meta["data_type"] == "string"
        assert meta["fill_value"] == ""
        assert meta["codecs"] == [{"name": "vlen-utf8", "configuration": {}}]
        assert meta["attributes"] == {"__tensordict_stack__": [2, 2]}
        assert meta["chunk_grid"]["configuration"]["chunk_shape"] == [1, 2]


class TestLayoutOptions:
    def test_h5_contiguous_default_and_compression(self, tmp_path):
        b = get_backend("h5").open(tmp_path / "o.h5", "w")
        b.create_array(("a",), shape=(10, 4), dtype=np.dtype("f4"))
        m = b.array_meta(("a",))
        assert m.chunks is None
        assert m.compression is None
        assert m.stored_nbytes is not None
        b.create_array(
            ("c",),
            shape=(10, 4),
            dtype=np.dtype("f4"),
            options={"compression": "gzip", "compression_opts": 4, "shuffle": True},
        )
        m = b.array_meta(("c",))
        assert m.chunks is not None
        assert "gzip(4)" in m.compression
        assert "shuffle" in m.compression
        b.create_array(("d",), shape=(10, 4, 6), dtype=np.dtype("f4"), options={"chunks": (2,)})
        assert b.array_meta(("d",)).chunks == (2, 4, 6)
        b.create_array(
            ("e",), shape=(10, 4), dtype=np.dtype("f4"), chunks=(5, 2), options={"chunks": (1,)}
        )
        assert b.array_meta(("e",)).chunks == (5, 2)
        b.close()

    @pytest.mark.parametrize(
        ("shape", "chunks", "expect"),
        [
            ((10, 4, 6), None, (10, 4, 6)),
            ((10, 4, 6), (2,), (2, 4, 6)),
            ((10, 4, 6), 5, (5, 4, 6)),
            ((10, 4, 6), (5, 2, 3, 9), (5, 2, 3)),
            ((0, 4), None, (1, 4)),
            ((), None, ()),
        ],
    )
    def test_zarr_chunks_option(self, tmp_path, shape, chunks, expect):
        b = get_backend("zarr").open(tmp_path / "o.zarr", "w")
        opts = {} if chunks is None else {"chunks": chunks}
        b.create_array(("a",), shape=shape, dtype=np.dtype("f4"), options=opts)
        m = b.array_meta(("a",))
        assert m.chunks == expect
        assert m.compression is None
        meta = json.loads((tmp_path / "o.zarr" / "a" / "zarr.json").read_text())
        assert meta["codecs"] == [{"name": "bytes", "configuration": {"endian": "little"}}]
        b.close()

    def test_zarr_compressors_and_explicit_chunks(self, tmp_path):
        from zarr.codecs import ZstdCodec

        b = get_backend("zarr").open(tmp_path / "o.zarr", "w")
        b.create_array(
            ("a",),
            shape=(8, 2),
            dtype=np.dtype("f4"),
            chunks=(4, 1),
            options={"compressors": ZstdCodec(level=3), "chunks": 2},
        )
        m = b.array_meta(("a",))
        assert m.chunks == (4, 1)
        assert m.compression == "zstd(3)"
        b.close()


class TestZarrStores:
    def test_consolidated_metadata_kept_in_sync(self, tmp_path):
        p = tmp_path / "c.zarr"
        b = get_backend("zarr").open(p, "w")
        b.create_array(("n", "a"), shape=(2,), dtype=np.dtype("f4"))
        b.finalize()
        b.close()
        assert "consolidated_metadata" in json.loads((p / "zarr.json").read_text())
        b = get_backend("zarr").open(p, "r+")
        b.create_array(("n", "new"), shape=(2,), dtype=np.dtype("f4"))
        b.set_attrs(("n",), {"__tensordict__": {"batch_size": [2], "version": 1}})
        b.delete(("n", "a"))
        b.close()
        r = zarr.open_group(p, mode="r")
        assert r.metadata.consolidated_metadata is not None
        assert sorted(r["n"].keys()) == ["new"]
        assert r["n"].attrs["__tensordict__"] == {"batch_size": [2], "version": 1}
        b = get_backend("zarr").open(p, "r")
        assert b.children(("n",)) == [("new", NodeKind.ARRAY)]
        b.close()

    def test_no_consolidation_unless_present(self, tmp_path):
        p = tmp_path / "c.zarr"
        b = get_backend("zarr").open(p, "w")
        b.create_array(("a",), shape=(2,), dtype=np.dtype("f4"))
        b.close()
        assert (
            "consolidated_metadata" not in json.loads((p / "zarr.json").read_text())
            or json.loads((p / "zarr.json").read_text())["consolidated_metadata"] is None
        )

    def test_memory_store_and_user_group(self):
        store = zarr.storage.MemoryStore()
        b = get_backend("zarr").open(store, "w")
        b.create_array(("g", "a"), shape=(3,), dtype=np.dtype("i4"), data=np.arange(3, dtype="i4"))
        b.write_non_tensor(("s",), "x")
        assert b.reopen_spec is None
        b.close()
        b = get_backend("zarr").open(store, "r+")
        np.testing.assert_array_equal(b.read(("g", "a")), np.arange(3))
        b.close()
        group = zarr.open_group(store, mode="r+")
        b = get_backend("zarr").open(group["g"])
        assert b.children(()) == [("a", NodeKind.ARRAY)]
        b.create_array(("b",), shape=(1,), dtype=np.dtype("f4"))
        b.move(("b",), ("c", "d"))
        b.close()
        assert sorted(group["g"].keys()) == ["a", "c"]
        assert detect_backend(store) == "zarr"
        assert detect_backend(group) == "zarr"

    def test_storage_options_need_a_url(self, tmp_path):
        with pytest.raises(PtdValueError, match="storage_options"):
            get_backend("zarr").open(tmp_path / "x.zarr", "w", storage_options={"anon": True})

    def test_read_mode_on_writable_store_object(self, tmp_path):
        get_backend("zarr").open(tmp_path / "l.zarr", "w").close()
        b = get_backend("zarr").open(zarr.storage.LocalStore(tmp_path / "l.zarr"), "r")
        assert not b.writable
        with pytest.raises(ReadOnlyError):
            b.create_group(("g",))
        b.close()

    def test_zip_store(self, tmp_path):
        p = tmp_path / "s.zip"
        b = get_backend("zarr").open(p, "w")
        b.create_array(("a",), shape=(3,), dtype=np.dtype("f4"), data=np.ones(3, "f4"))
        b.write_non_tensor(("st",), ["a", "b"], stack_shape=(2,))
        b.finalize()  # skipped: a zip file cannot replace entries
        b.close()
        assert detect_backend(p) == "zarr"
        r = get_backend("zarr").open(p, "r")
        np.testing.assert_array_equal(r.read(("a",)), np.ones(3, "f4"))
        assert r.read_non_tensor(("st",)).value == ["a", "b"]
        r.close()


class TestH5Objects:
    def test_user_file_and_group(self, tmp_path):
        p = tmp_path / "u.h5"
        with h5py.File(p, "w") as f:
            g = f.create_group("sub")
            b = get_backend("h5").open(g)
            assert b.reopen_spec is None
            assert "sub" in b.location
            b.create_array(("x",), shape=(2,), dtype=np.dtype("f4"), data=np.ones(2, "f4"))
            b.close()
            assert f.id.valid  # not closed: the user's file
            np.testing.assert_array_equal(f["sub/x"][()], np.ones(2))
            assert detect_backend(f) == "h5"

    def test_big_endian_and_unsupported(self, tmp_path):
        p = tmp_path / "f.h5"
        with h5py.File(p, "w") as f:
            f["be"] = np.arange(3, dtype=">f4")
            f["ld"] = np.ones(2, dtype=np.longdouble)
            f["cp"] = np.zeros(2, dtype=[("a", "i4"), ("b", "f4")])
            f["en"] = np.array([0, 1], dtype=h5py.enum_dtype({"A": 0, "B": 1}, basetype="i1"))
        b = get_backend("h5").open(p, "r")
        m = b.array_meta(("be",))
        assert m.kind is ValueKind.NUMERIC
        assert m.torch_dtype == "float32"
        assert torch.equal(from_storage(b.read(("be",)), m.attrs), torch.arange(3.0))
        assert b.array_meta(("ld",)).kind is ValueKind.UNSUPPORTED
        assert b.array_meta(("cp",)).kind is ValueKind.UNSUPPORTED
        assert b.array_meta(("en",)).kind is ValueKind.NON_TENSOR
        b.close()

    def test_walk_matches_a_bare_visititems_walk(self, tmp_path):
        """walk() lists every group and dataset with the shape and dtype h5py reports
        (its speed is measured by benchmarks/bench_core.py, not asserted here)."""
        p = tmp_path / "w.h5"
        with h5py.File(p, "w") as f:
            for i in range(5):
                g = f.create_group(f"g{i}")
                for j in range(4):
                    g.create_dataset(f"d{j}", data=np.zeros((4, j + 1), np.float32))
        b = get_backend("h5").open(p, "r")
        with h5py.File(p, "r") as f:
            bare: dict = {}
            f.visititems(
                lambda n, o: bare.__setitem__(
                    n, (o.shape, o.dtype) if isinstance(o, h5py.Dataset) else None
                )
            )
        walked = {
            "/".join(path): (None if meta is None else (meta.shape, meta.dtype))
            for path, kind, meta in b.walk()
        }
        b.close()
        assert walked == bare


class TestRegistry:
    def test_get_backend(self):
        assert get_backend("h5").name == "h5"
        assert get_backend("zarr").name == "zarr"
        with pytest.raises(UnknownBackendError) as info:
            get_backend("hdf5")
        assert str(info.value) == "Unknown backend 'hdf5'. Supported backends are ['h5', 'zarr']."
        assert isinstance(info.value, NotImplementedError)
        assert isinstance(info.value, PtdError)

    def test_detect(self, tmp_path):
        h = tmp_path / "a.bin"
        get_backend("h5").open(h, "w").close()
        assert detect_backend(h) == "h5"
        assert detect_backend(str(h)) == "h5"
        ub = tmp_path / "ub.bin"
        with h5py.File(ub, "w", userblock_size=1024) as f:
            f["x"] = 1
        assert detect_backend(ub) == "h5"
        z = tmp_path / "z.store"
        get_backend("zarr").open(z, "w").close()
        assert detect_backend(z) == "zarr"
        junk = tmp_path / "junk"
        junk.write_bytes(b"nothing here")
        with pytest.raises(CorruptStoreError, match="junk"):
            detect_backend(junk)
        (tmp_path / "d").mkdir()
        with pytest.raises(CorruptStoreError, match="d"):
            detect_backend(tmp_path / "d")
        with pytest.raises(StoreNotFoundError):
            detect_backend(tmp_path / "missing")


class TestGuard:
    def test_every_guarded_method_is_guarded(self, name):
        """Also those that Backend implements for every backend (read, write, close...)."""
        cls = get_backend(name)
        for attr in GUARDED:
            fn = getattr(cls, attr)
            assert getattr(getattr(fn, "__func__", fn), "__ptd_guarded__", False), attr

    @pytest.mark.parametrize(("hook", "call"), [
        ("_read", lambda b: b.read(("x",))),
        ("_write", lambda b: b.write(("x",), (), np.zeros(3))),
        ("_decode_non_tensor", lambda b: b.read_non_tensor(("x",))),
    ])  # fmt: skip
    def test_unexpected_errors_in_shared_methods(self, opener, monkeypatch, hook, call):
        be = opener("w", fast_path=False)  # reads through the library: the hooks
        be.create_array(("x",), shape=(3,), dtype=np.dtype("float64"))

        def boom(*args, **kwargs):
            raise RuntimeError("boom")

        monkeypatch.setattr(type(be), hook, boom)
        with pytest.raises(PtdError, match="boom") as info:
            call(be)
        assert "'x'" in str(info.value)
        assert be.location in str(info.value)

    def test_store_location_target(self, name, path):
        loc = StoreLocation.parse(path)
        b = get_backend(name).open(loc, "w")
        b.create_array(("a",), shape=(2,), dtype=np.dtype("int64"), data=np.arange(2))
        b.close()
        r = get_backend(name).open(loc, "r")
        assert r.location == str(path)
        assert r.reopen_spec.location == loc
        assert r.read(("a",)).tolist() == [0, 1]
        r.close()
        with pytest.raises(PtdTypeError, match=f"with the {name} backend: expected a path"):
            get_backend(name).open(3.5, "r")
        with pytest.raises(PtdValueError, match="storage_options only apply"):
            get_backend(name).open(path, "r", storage_options={"anon": True})


# --- interop with tensordict 0.15 (the oracle) -----------------------------------------------
def _td_source():
    td = pytest.importorskip("tensordict")
    from tensordict import NonTensorData, NonTensorStack, TensorDict

    return td, TensorDict(
        {
            "a": torch.arange(6.0).reshape(3, 2),
            "n": {"b": torch.ones(3, dtype=torch.int64)},
            "s": NonTensorData("hello"),
            "st": NonTensorStack("x", "y", "z"),
            "si": NonTensorStack(1, 2, 3),
        },
        batch_size=[3],
    )


@pytest.mark.interop
@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_interop_read_tensordict_files(tmp_path, backend):
    tdmod, td = _td_source()
    p = tmp_path / f"td{SUFFIX[backend]}"
    tdmod.PersistentTensorDict.from_dict(td, filename=str(p), backend=backend).close()
    assert detect_backend(p) == backend
    b = get_backend(backend).open(p, "r")
    try:
        kinds = {path: (kind, meta and meta.kind) for path, kind, meta in b.walk()}
        assert kinds[("a",)] == (NodeKind.ARRAY, ValueKind.NUMERIC)
        assert kinds[("n",)] == (NodeKind.GROUP, None)
        assert kinds[("s",)] == (NodeKind.ARRAY, ValueKind.NON_TENSOR)
        np.testing.assert_array_equal(b.read(("a",), (np.array([0, 2]),)), td["a"][[0, 2]].numpy())
        np.testing.assert_array_equal(b.read(("n", "b")), np.ones(3, np.int64))
        if backend == "h5":
            with pytest.warns(FutureWarning, match=STR_WARNING + " '/s'"):
                assert b.read_non_tensor(("s",)).value == b"hello"
        else:
            assert b.read_non_tensor(("s",)).value == "hello"
            assert b.get_attrs(())["__tensordict__"] == {"batch_size": [3], "version": 1}
        st = b.read_non_tensor(("st",))
        assert st.is_stack
        assert st.value == ["x", "y", "z"]
        assert st.stack_shape == (3,)
        assert b.array_meta(("st",)).stack_shape == (3,)
        si = b.read_non_tensor(("si",), (slice(1, 3),))
        assert si.value == [2, 3]
        assert si.stack_shape == (2,)
    finally:
        b.close()


@pytest.mark.interop
@pytest.mark.parametrize("backend", ["h5", "zarr"])
def test_interop_tensordict_reads_ptd_files(tmp_path, backend):
    tdmod = pytest.importorskip("tensordict")
    p = tmp_path / f"ptd{SUFFIX[backend]}"
    b = get_backend(backend).open(p, "w")
    b.create_array(("a",), shape=(3, 2), dtype=np.dtype("f4"), data=_arr((3, 2)))
    b.create_array(("n", "b"), shape=(3,), dtype=np.dtype("i8"), data=np.arange(3))
    b.write_non_tensor(("s",), "hello")
    b.write_non_tensor(("by",), b"raw")
    b.write_non_tensor(("st",), ["x", "y", "z"], stack_shape=(3,))
    b.write_non_tensor(("st2",), [["p", "q"], ["r", "s"], ["t", "u"]], stack_shape=(3, 2))
    b.write_non_tensor(("si",), [1, 2, 3], stack_shape=(3,))
    b.write_non_tensor(("sb",), [b"a", b"b", b"c"], stack_shape=(3,))
    b.finalize()
    b.close()
    reader = getattr(tdmod.PersistentTensorDict, "from_h5" if backend == "h5" else "from_zarr")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # h5 strings and zarr pickles
        ptd = reader(str(p), batch_size=[3]) if backend == "zarr" else reader(str(p))
        try:
            assert ptd.batch_size == torch.Size([3])
            assert torch.equal(ptd["a"], torch.from_numpy(_arr((3, 2))))
            assert torch.equal(ptd["n", "b"], torch.arange(3))
            assert ptd["s"] == (b"hello" if backend == "h5" else "hello")
            assert ptd["by"] == b"raw"
            assert ptd.get("st").tolist() == ["x", "y", "z"]
            assert ptd.get("st2").tolist() == [["p", "q"], ["r", "s"], ["t", "u"]]
            assert ptd.get("si").tolist() == [1, 2, 3]
            assert ptd.get("sb").tolist() == [b"a", b"b", b"c"]
        finally:
            ptd.close()


@pytest.mark.interop
def test_interop_zarr_layout_matches_tensordict(tmp_path):
    tdmod, td = _td_source()
    ref = tmp_path / "ref.zarr"
    tdmod.PersistentTensorDict.from_dict(td, filename=str(ref), backend="zarr").close()
    mine = tmp_path / "mine.zarr"
    b = get_backend("zarr").open(mine, "w")
    b.create_array(("a",), shape=(3, 2), dtype=np.dtype("f4"), data=td["a"].numpy())
    b.write_non_tensor(("s",), "hello")
    b.write_non_tensor(("st",), ["x", "y", "z"], stack_shape=(3,))
    b.write_non_tensor(("si",), [1, 2, 3], stack_shape=(3,))
    b.close()
    for key in ("a", "s", "st", "si"):
        want = json.loads((ref / key / "zarr.json").read_text())
        got = json.loads((mine / key / "zarr.json").read_text())
        assert got == want, key
    assert (mine / "s" / "c" / "0").read_bytes() == (ref / "s" / "c" / "0").read_bytes()


@pytest.mark.interop
def test_interop_h5_layout_matches_tensordict(tmp_path):
    tdmod, td = _td_source()
    ref = tmp_path / "ref.h5"
    tdmod.PersistentTensorDict.from_dict(td, filename=str(ref), backend="h5").close()
    mine = tmp_path / "mine.h5"
    b = get_backend("h5").open(mine, "w")
    b.create_array(("a",), shape=(3, 2), dtype=np.dtype("f4"), data=td["a"].numpy())
    b.write_non_tensor(("s",), "hello")
    b.write_non_tensor(("st",), ["x", "y", "z"], stack_shape=(3,))
    b.write_non_tensor(("si",), [1, 2, 3], stack_shape=(3,))
    b.close()
    with h5py.File(ref, "r") as r, h5py.File(mine, "r") as m:
        for key in ("a", "s", "st", "si"):
            assert r[key].id.get_type() == m[key].id.get_type(), key
            assert r[key].shape == m[key].shape
            assert r[key].chunks == m[key].chunks
            assert (
                r[key].id.get_create_plist() == m[key].id.get_create_plist()
                or r[key].chunks is None
            )
            ra = {k: np.asarray(v).tolist() for k, v in r[key].attrs.items()}
            ma = {k: np.asarray(v).tolist() for k, v in m[key].attrs.items()}
            assert ra == ma, key
            for k in r[key].attrs:
                assert r[key].attrs.get_id(k).get_type() == m[key].attrs.get_id(k).get_type()
