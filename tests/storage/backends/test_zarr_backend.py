"""The zarr backend: the Backend contract (:class:`ptd.testing.backend_contract.BackendContract`)
with zarr's hooks, and what only Zarr has: its JSON/pickle payloads, its chunk and codec
options, zarr stores and groups as targets (and their detection), consolidated metadata, zip
stores, and interop with tensordict 0.15 as an oracle (marked ``interop``).
"""

from __future__ import annotations

import json
import pickle
import warnings
from pathlib import Path as FsPath
from typing import Any

import numpy as np
import pytest
import torch
import zarr

from ptd.errors import (
    CorruptStoreError,
    PickleRefusedError,
    PtdTypeError,
    PtdValueError,
    ReadOnlyError,
)
from ptd.storage.api import NodeKind, ValueKind
from ptd.storage.registry import detect_backend, get_backend
from ptd.storage.zarr.backend import ZarrBackend
from ptd.testing.backend_contract import BackendContract
from tests.storage.backends.shared import TorchDtypes, arr, td_source


class TestZarrBackend(TorchDtypes, BackendContract):
    backend_cls = ZarrBackend
    backend_name = "zarr"
    suffix = ".zarr"
    # non-tensors are JSON payloads, or pickled when JSON cannot hold them: every value of
    # SINGLE_NON_TENSORS reads back as written, type and all (the defaults of the flags and
    # of non_tensor_readback); complex is pickled, not JSON

    def compressed_options(self) -> dict[str, Any]:
        return {"chunks": 2}

    def make_corrupt(self, path: FsPath) -> None:
        path.mkdir()
        (path / "zarr.json").write_text('{"zarr_fo')

    def write_string_columns(self, path: FsPath) -> tuple[list[Any], list[Any]]:
        g = zarr.open_group(path, mode="a")
        g.create_array("col", shape=(3,), dtype=str)[...] = np.array(["a", "bc", "d"])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # no zarr v3 spec for fixed bytes yet
            vcol = g.create_array("vcol", shape=(3,), dtype="S2")
        vcol[...] = np.array([b"x", b"y", b"z"])
        return ["a", "bc", "d"], [b"x", b"y", b"z"]


class TestZarrOpen:
    def test_zarr_not_a_group(self, tmp_path):
        h5file = tmp_path / "x.h5"
        get_backend("h5").open(h5file, "w").close()
        with pytest.raises(CorruptStoreError, match=r"x.h5"):
            get_backend("zarr").open(h5file, "r")
        zarr.open_array(tmp_path / "arr.zarr", mode="w", shape=(3,), dtype="i4")
        with pytest.raises(CorruptStoreError, match=r"arr.zarr"):
            get_backend("zarr").open(tmp_path / "arr.zarr", "r")

    def test_directory_without_zarr_json_is_no_store(self, tmp_path):
        """(the rest of detection: test_h5_backend.py's TestRegistry, and the contract)"""
        (tmp_path / "d").mkdir()
        with pytest.raises(CorruptStoreError, match="d"):
            detect_backend(tmp_path / "d")


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
            match=r"'p'.*asks to unpickle it \(a pickled non-tensor entry\).*allow_pickle=True",
        ) as info:
            z.read_non_tensor(("p",), allow_pickle=False)
        assert isinstance(info.value, RuntimeError)
        assert z.read_non_tensor(("j",), allow_pickle=False).value == [1, 2]
        with pytest.raises(PickleRefusedError, match=r"unlike tensordict 0\.15"):
            z.read_non_tensor(("p",), allow_pickle=None)  # the default refuses too
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


class TestZarrLayoutOptions:
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


# --- interop with tensordict 0.15 (the oracle) -----------------------------------------------


@pytest.mark.interop
def test_interop_read_tensordict_files(tmp_path):
    tdmod, td = td_source()
    p = tmp_path / "td.zarr"
    tdmod.PersistentTensorDict.from_dict(td, filename=str(p), backend="zarr").close()
    assert detect_backend(p) == "zarr"
    b = get_backend("zarr").open(p, "r")
    try:
        kinds = {path: (kind, meta and meta.kind) for path, kind, meta in b.walk()}
        assert kinds[("a",)] == (NodeKind.ARRAY, ValueKind.NUMERIC)
        assert kinds[("n",)] == (NodeKind.GROUP, None)
        assert kinds[("s",)] == (NodeKind.ARRAY, ValueKind.NON_TENSOR)
        np.testing.assert_array_equal(b.read(("a",), (np.array([0, 2]),)), td["a"][[0, 2]].numpy())
        np.testing.assert_array_equal(b.read(("n", "b")), np.ones(3, np.int64))
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
def test_interop_tensordict_reads_ptd_files(tmp_path):
    tdmod = pytest.importorskip("tensordict")
    p = tmp_path / "ptd.zarr"
    b = get_backend("zarr").open(p, "w")
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
        warnings.simplefilter("ignore", FutureWarning)  # zarr pickles
        ptd = tdmod.PersistentTensorDict.from_zarr(str(p), batch_size=[3])
        try:
            assert ptd.batch_size == torch.Size([3])
            assert torch.equal(ptd["a"], torch.from_numpy(arr((3, 2))))
            assert torch.equal(ptd["n", "b"], torch.arange(3))
            assert ptd["s"] == "hello"
            assert ptd["by"] == b"raw"
            assert ptd.get("st").tolist() == ["x", "y", "z"]
            assert ptd.get("st2").tolist() == [["p", "q"], ["r", "s"], ["t", "u"]]
            assert ptd.get("si").tolist() == [1, 2, 3]
            assert ptd.get("sb").tolist() == [b"a", b"b", b"c"]
        finally:
            ptd.close()


@pytest.mark.interop
def test_interop_zarr_layout_matches_tensordict(tmp_path):
    tdmod, td = td_source()
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
