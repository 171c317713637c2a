"""The h5 backend: the Backend contract (:class:`ptd.testing.backend_contract.BackendContract`)
with h5's hooks, and what only HDF5 has: h5py objects as targets, truncated files and locks,
its chunk layout options, and interop with tensordict 0.15 as an oracle (marked ``interop``).
"""

from __future__ import annotations

import warnings
from pathlib import Path as FsPath
from typing import Any, ClassVar

import h5py
import numpy as np
import pytest
import torch

from ptd.errors import (
    CorruptStoreError,
    PtdError,
    ReadOnlyError,
    StoreLockedError,
    StoreNotFoundError,
    UnknownBackendError,
)
from ptd.ops.dtypes import from_storage
from ptd.storage.api import NodeKind, ValueKind
from ptd.storage.h5.backend import H5Backend
from ptd.storage.registry import detect_backend, get_backend
from ptd.testing.backend_contract import BackendContract
from tests.storage.backends.shared import TorchDtypes, arr, td_source

STR_WARNING = "The h5 backend of PersistentTensorDict reads the string"


class TestH5Backend(TorchDtypes, BackendContract):
    backend_cls = H5Backend
    backend_name = "h5"
    suffix = ".h5"
    # non-tensors are typed HDF5 datasets (as tensordict 0.15.3 writes them), never pickles
    stores_mixed_stacks = False
    mixed_stack_refusal = "Cannot write a NonTensorStack to h5 unless"
    stores_big_int_stacks = False
    stores_nul_in_str = False
    pickles_non_tensors = False
    #: value written -> h5 read back
    non_tensor_readback: ClassVar[dict[str, Any]] = {
        "str": b"h\xc3\xa9llo",
        "bytes": np.bytes_(b"ab"),
        "bytes_nul": b"a\x00",
        "int": np.int64(5),
        "float": np.float64(2.5),
        "bool": np.bool_(True),
        "none": None,
        "dict": {"k": [1, None], "s": "x"},
        "list_str": ["a", "b"],
        "list_num": np.array([1, 2, 3]),
        "bigint": 2**70,
        # opaque complex128, as tensordict 0.15.3 writes it
        "complex": np.complex128(1 + 2j),
    }
    non_tensor_read_warnings: ClassVar[dict[str, tuple[type[Warning], str]]] = {
        "str": (FutureWarning, STR_WARNING + " '/n/v'"),
    }

    def compressed_options(self) -> dict[str, Any]:
        return {"compression": "gzip"}

    def make_corrupt(self, path: FsPath) -> None:
        path.write_bytes(b"garbage, not hdf5" * 10)

    def write_string_columns(self, path: FsPath) -> tuple[list[Any], list[Any]]:
        with h5py.File(path, "a") as f:
            f["col"] = np.array([b"a", b"bc", b"d"])
            f["vcol"] = np.array(["x", "y", "z"], dtype=h5py.string_dtype())
        return [b"a", b"bc", b"d"], [b"x", b"y", b"z"]


class TestH5Open:
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

    def test_h5_lock_conflict(self, tmp_path):
        """Open in this process: the advice is to close the other handle, which works."""
        p = tmp_path / "l.h5"
        get_backend("h5").open(p, "w").close()
        b = get_backend("h5").open(p, "r")
        try:
            with pytest.raises(StoreLockedError, match="already has it open") as info:
                get_backend("h5").open(p, "w")
            assert str(p) in str(info.value)
            assert "Close the other" in str(info.value)
        finally:
            b.close()
        get_backend("h5").open(p, "w").close()  # the advice followed: it opens

    def test_h5_read_mode_stays_read_only_on_shared_handle(self, tmp_path):
        p = tmp_path / "s.h5"
        w = get_backend("h5").open(p, "w")
        w.create_array(("a",), shape=(2,), dtype=np.dtype("f4"))
        r = get_backend("h5").open(p, "r")  # HDF5 shares the writable handle
        with pytest.raises(ReadOnlyError):
            r.write(("a",), (), np.zeros(2, "f4"))
        r.close()
        w.close()


class TestH5LayoutOptions:
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
    """The registry as a whole (each backend's name and detection: the contract)."""

    def test_get_backend(self):
        assert get_backend("h5").name == "h5"
        assert get_backend("zarr").name == "zarr"
        with pytest.raises(UnknownBackendError) as info:
            get_backend("hdf5")
        assert str(info.value) == "Unknown backend 'hdf5'. Supported backends are ['h5', 'zarr']."
        assert isinstance(info.value, NotImplementedError)
        assert isinstance(info.value, PtdError)

    def test_detect(self, tmp_path):
        """HDF5 by its signature, after a user block too; a file that is neither format, and
        a missing one (a directory without zarr.json: test_zarr_backend.py)."""
        h = tmp_path / "a.bin"
        get_backend("h5").open(h, "w").close()
        assert detect_backend(h) == "h5"
        assert detect_backend(str(h)) == "h5"
        ub = tmp_path / "ub.bin"
        with h5py.File(ub, "w", userblock_size=1024) as f:
            f["x"] = 1
        assert detect_backend(ub) == "h5"
        junk = tmp_path / "junk"
        junk.write_bytes(b"nothing here")
        with pytest.raises(CorruptStoreError, match="junk"):
            detect_backend(junk)
        with pytest.raises(StoreNotFoundError):
            detect_backend(tmp_path / "missing")


# --- interop with tensordict 0.15 (the oracle) -----------------------------------------------


@pytest.mark.interop
def test_interop_read_tensordict_files(tmp_path):
    tdmod, td = td_source()
    p = tmp_path / "td.h5"
    tdmod.PersistentTensorDict.from_dict(td, filename=str(p), backend="h5").close()
    assert detect_backend(p) == "h5"
    b = get_backend("h5").open(p, "r")
    try:
        kinds = {path: (kind, meta and meta.kind) for path, kind, meta in b.walk()}
        assert kinds[("a",)] == (NodeKind.ARRAY, ValueKind.NUMERIC)
        assert kinds[("n",)] == (NodeKind.GROUP, None)
        assert kinds[("s",)] == (NodeKind.ARRAY, ValueKind.NON_TENSOR)
        np.testing.assert_array_equal(b.read(("a",), (np.array([0, 2]),)), td["a"][[0, 2]].numpy())
        np.testing.assert_array_equal(b.read(("n", "b")), np.ones(3, np.int64))
        with pytest.warns(FutureWarning, match=STR_WARNING + " '/s'"):
            assert b.read_non_tensor(("s",)).value == b"hello"
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
def test_interop_tensordict_reads_ptd_files(tmp_path):
    tdmod = pytest.importorskip("tensordict")
    p = tmp_path / "ptd.h5"
    b = get_backend("h5").open(p, "w")
    b.create_array(("a",), shape=(3, 2), dtype=np.dtype("f4"), data=arr((3, 2)))
    b.create_array(("n", "b"), shape=(3,), dtype=np.dtype("i8"), data=np.arange(3))
    b.write_non_tensor(("s",), "hello")
    b.write_non_tensor(("by",), b"raw")
    b.write_non_tensor(("st",), ["x", "y", "z"], stack_shape=(3,))
    b.write_non_tensor(("st2",), [["p", "q"], ["r", "s"], ["t", "u"]], stack_shape=(3, 2))
    b.write_non_tensor(("si",), [1, 2, 3], stack_shape=(3,))
    b.write_non_tensor(("sb",), [b"a", b"b", b"c"], stack_shape=(3,))
    b.finalize()
    b.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # h5 strings
        ptd = tdmod.PersistentTensorDict.from_h5(str(p))
        try:
            assert ptd.batch_size == torch.Size([3])
            assert torch.equal(ptd["a"], torch.from_numpy(arr((3, 2))))
            assert torch.equal(ptd["n", "b"], torch.arange(3))
            assert ptd["s"] == b"hello"
            assert ptd["by"] == b"raw"
            assert ptd.get("st").tolist() == ["x", "y", "z"]
            assert ptd.get("st2").tolist() == [["p", "q"], ["r", "s"], ["t", "u"]]
            assert ptd.get("si").tolist() == [1, 2, 3]
            assert ptd.get("sb").tolist() == [b"a", b"b", b"c"]
        finally:
            ptd.close()


@pytest.mark.interop
def test_interop_h5_layout_matches_tensordict(tmp_path):
    tdmod, td = td_source()
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
