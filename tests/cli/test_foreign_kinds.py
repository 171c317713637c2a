"""What h5py and zarr-python users write that ptd may not expect (``tests/data/foreign``: the
``h5py_*``, ``netcdf_like``, ``zarr_v2_codecs``, ``zarr_v3_kinds`` and root-array stores):
each is read, converted and exported with its data equal to h5py's/zarr's, or refused by
key with the reason; and the bulk writers and readers behind ``convert`` of many small nodes
write what zarr and h5py themselves write."""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

import ptd
from ptd import PersistentTensorDict
from ptd.errors import (
    ConvertError,
    SkippedKeyWarning,
    UnsupportedDtypeError,
    UnsupportedOperationError,
)
from ptd.storage.meta import NewArray
from ptd.storage.registry import get_backend

from .conftest import assert_one_line_error

FOREIGN = Path(__file__).parent.parent / "data" / "foreign"


def _copy(name: str, tmp_path: Path) -> Path:
    src, dst = FOREIGN / name, tmp_path / name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy(src, dst)
    return dst


def _zarr(path: Path) -> zarr.Group:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return zarr.open_group(str(path), mode="r")


# ------------------------------------------------------------------------------ root arrays
@pytest.mark.parametrize("name", ["zarr_v2_root_array.zarr", "zarr_v3_root_array.zarr"])
def test_a_store_whose_root_is_an_array_is_refused_by_every_command(
    name: str, tmp_path: Path, ptd_cli
) -> None:
    store = _copy(name, tmp_path)
    for args in (
        ("inspect", store),
        ("inspect", store, "--json"),
        ("validate", store),
        ("convert", store, tmp_path / "o.zarr"),
        ("convert", store, tmp_path / "o.h5", "--skip-unsupported"),
        ("memmap", store, tmp_path / "o.mm"),
    ):
        run = ptd_cli(*args)
        if args[0] == "validate":  # validate reports it as a problem of that store
            assert run.code in (1, 2), run
            assert "Traceback" not in run.stdout + run.stderr, run
            assert "array at its root" in run.stdout + run.stderr, run
            continue
        assert_one_line_error(run, str(store), "array at its root")
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]  # nothing half-written
    with pytest.raises(ptd.errors.CorruptStoreError, match="array at its root"):
        PersistentTensorDict(filename=str(store), mode="r", backend="zarr")


# ------------------------------------------------------------------------------ h5py kinds
def test_h5py_kinds_read_and_convert_like_h5py(tmp_path: Path) -> None:
    store = _copy("h5py_kinds.h5", tmp_path)
    kinds = {e.key: e.kind for e in ptd.info(store).entries}
    assert kinds["empty_null"] == "unsupported"
    assert kinds["big_f4"] == "tensor"
    with PersistentTensorDict(filename=str(store), mode="r") as p:
        np.testing.assert_array_equal(p["big_i8"].numpy(), np.arange(6).reshape(3, 2))
        np.testing.assert_array_equal(p["fill_only"].numpy(), np.full((6, 2), 7))
        assert p["unlimited_empty"].shape == (0, 4)
        assert p["scalar_f8"].item() == 2.5
        np.testing.assert_array_equal(p["données", "température"].numpy(), np.arange(4.0))
        with pytest.raises(UnsupportedDtypeError, match=r"empty_null.*null dataspace"):
            p["empty_null"]
    with pytest.raises(ConvertError, match="'empty_null' holds no data"):
        ptd.convert(store, tmp_path / "refused.zarr")
    assert not (tmp_path / "refused.zarr").exists()
    for out in (tmp_path / "o.zarr", tmp_path / "o.h5"):
        result = ptd.convert(store, out, skip_unsupported=True)
        left = {i["key"] for i in result.not_copied}
        assert "empty_null" in left
        backend = "zarr" if out.suffix == ".zarr" else "h5"
        with ptd.PersistentTensorDict(filename=str(out), mode="r", backend=backend) as p:
            np.testing.assert_array_equal(p["big_f4"].numpy(), np.arange(6, dtype="f4"))
            np.testing.assert_array_equal(p["unlimited"].numpy(), np.arange(20.0).reshape(5, 4))
            np.testing.assert_array_equal(p["données", "名前"].numpy(), [0, 1])


# ------------------------------------------------------------------------------ links, VDS
def test_virtual_datasets_are_refused_or_skipped_by_name(tmp_path: Path, ptd_cli) -> None:
    store = _copy("h5py_links.h5", tmp_path)
    shutil.copy(FOREIGN / "h5py_vds_target.h5", tmp_path)
    run = ptd_cli("convert", store, tmp_path / "o.zarr")
    assert_one_line_error(run, str(store), "--skip-unsupported")
    assert not (tmp_path / "o.zarr").exists()
    run = ptd_cli("convert", store, tmp_path / "o.zarr", "--skip-unsupported", "--json")
    assert run.code == 0, run
    reasons = {i["key"]: i["reason"] for i in run.json["not_copied"]}
    assert "outside the file" in reasons["vds_same_file"]
    assert "outside the file" in reasons["vds_other_file"]
    assert "dangling" in reasons["soft_dangling"]
    assert "external link" in reasons["ext"]
    # object references and a soft link are carried as the paths they name (hdmf-zarr's
    # spelling), never copied as data: the summary says so by name
    assert "obj_refs" not in reasons
    assert "soft" not in reasons
    notes = " ".join(run.json["notes"])
    for named in ("'obj_refs'", "'soft'", "stored as the paths"):
        assert named in notes, named
    g = _zarr(tmp_path / "o.zarr")
    assert "soft" not in g
    assert g.attrs["zarr_link"][0]["name"] == "soft"
    assert g["obj_refs"].attrs["zarr_dtype"] == "object"
    assert "vds_same_file" not in g
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedKeyWarning)  # the dangling and external links
        with (
            PersistentTensorDict(filename=str(store), mode="r") as p,
            pytest.raises(UnsupportedOperationError, match=r"vds_other_file.*outside the"),
        ):
            p["vds_other_file"]
    assert_one_line_error(ptd_cli("memmap", store, tmp_path / "o.mm"), "--skip-unsupported")
    mm = ptd_cli("memmap", store, tmp_path / "o.mm", "--skip-unsupported")
    assert mm.code == 0, mm
    assert "vds_other_file" in mm.stdout, mm


# ------------------------------------------------------------------------------ attributes
@pytest.mark.parametrize("to", ["zarr", "h5"])
def test_attributes_ptd_cannot_copy_are_named(tmp_path: Path, to: str, ptd_cli) -> None:
    store = _copy("h5py_attrs.h5", tmp_path)
    out = tmp_path / f"o.{to}"
    run = ptd_cli("convert", store, out, "--json")
    assert run.code == 0, run
    named = {(i["key"], i["attr"]): i["reason"] for i in run.json["not_copied"] if "attr" in i}
    for attr in ("time", "opaque", "compound"):
        assert ("/", attr) in named, (attr, named)
    assert "numpy cannot represent" in named[("/", "time")]
    assert "compound" in named[("/", "compound")]
    # object references: an HDF5 copy makes them again (to the object at the same path), a
    # zarr copy stores the paths they name (hdmf-zarr's spelling) and says so in its notes
    refs = [("/", "ref"), ("x", "refs")]
    assert not any(r in named for r in refs), named
    if to == "zarr":
        assert _zarr(out).attrs["ref"] == {
            "zarr_dtype": "object",
            "value": {"source": ".", "path": "/x"},
        }
        assert any("object-reference attributes" in n for n in run.json["notes"])
    else:
        with h5py.File(out, "r") as f:
            assert f[f.attrs["ref"]].name == "/x"
    # every other root attribute is in the destination with the value h5py reads
    with h5py.File(store, "r") as f:
        expected = {
            k: f.attrs[k] for k in ("int", "float", "text", "vector", "strings", "bool", "enum")
        }
    if to == "zarr":
        got = dict(_zarr(out).attrs)
    else:
        with h5py.File(out, "r") as f:
            got = {k: f.attrs[k] for k in f.attrs}
    for k, v in expected.items():
        value = got[k]
        if isinstance(v, np.ndarray) and v.dtype.kind == "O":
            v = [x.decode() if isinstance(x, bytes) else x for x in v.tolist()]
        if isinstance(value, np.ndarray) and value.dtype.kind == "O":
            value = [x.decode() if isinstance(x, bytes) else x for x in value.tolist()]
        np.testing.assert_array_equal(np.asarray(value), np.asarray(v), err_msg=k)
    assert len(_zarr(out)["many"].attrs if to == "zarr" else h5py.File(out)["many"].attrs) >= 200
    summary = ptd_cli("convert", store, tmp_path / f"again.{to}")
    assert "attribute 'time'" in summary.stdout.replace("\n", " ")


# ------------------------------------------------------------------------------ zarr kinds
def test_zarr_bytes_column_converts_to_h5(tmp_path: Path) -> None:
    store = _copy("zarr_v2_codecs.zarr", tmp_path)
    ptd.convert(store, tmp_path / "o.h5", skip_unsupported=True)
    with h5py.File(tmp_path / "o.h5", "r") as f:
        assert f["fixed_bytes"][()].tolist() == [b"ab", b"cdef", b""]
        np.testing.assert_array_equal(f["big_endian"][()], np.arange(6.0))
        nan = f["nan_fill"][()]
        assert np.isnan(nan[4:]).all()
        assert (nan[:4] == np.arange(4)).all()


def test_zarr_v3_kinds_convert_to_h5_with_zarrs_values(tmp_path: Path) -> None:
    store = _copy("zarr_v3_kinds.zarr", tmp_path)
    result = ptd.convert(store, tmp_path / "o.h5")
    assert result.not_copied == []  # a compound of numbers: h5 holds it as it is
    g = _zarr(store)
    with h5py.File(tmp_path / "o.h5", "r") as f:
        for key in (
            "sharded_zstd",
            "never_written",
            "big_endian",
            "crc32c",
            "transposed",
            "structured",
        ):
            np.testing.assert_array_equal(f[key][()], g[key][...], err_msg=key)
        assert f["scalar"][()] == 3.25
        assert f["données/température"].shape == (3,)


# ------------------------------------------------------------------------------ bulk writers
def _specs(n: int) -> list[NewArray]:
    specs = [
        NewArray(("g", f"a{i:02d}"), (3, 2), np.dtype("f4"), data=np.full((3, 2), i, "f4"))
        for i in range(n)
    ]
    specs[1].attrs = {"units": "m", "nan": float("nan"), "nested": {"k": [1, 2]}}
    specs += [
        NewArray(("g", "big"), (4,), np.dtype(">i8"), data=np.arange(4, dtype=">i8")),
        NewArray(("g", "scalar"), (), np.dtype("f8"), data=np.array(1.5)),
        NewArray(("g", "none"), (2,), np.dtype("u1")),
        NewArray(
            ("h", "gz"),
            (6,),
            np.dtype("i4"),
            data=np.arange(6, dtype="i4"),
            chunks=(3,),
            options={"compressors": [{"name": "gzip", "configuration": {"level": 3}}]},
        ),
    ]
    return specs


@pytest.mark.parametrize("fmt", ["zarr", "h5"])
def test_bulk_create_and_read_many_match_one_by_one(tmp_path: Path, fmt: str) -> None:
    bulk, single = tmp_path / f"bulk.{fmt}", tmp_path / f"single.{fmt}"
    specs = _specs(12)
    if fmt == "h5":
        specs[-1].options = {"compression": "gzip"}
    for path, many in ((bulk, True), (single, False)):
        be = get_backend(fmt).open(str(path), "w")
        try:
            be.create_groups([(("g",), {"title": "g"}), (("g", "sub"), None), (("h",), {})])
            if many:
                be.create_arrays(specs)
            else:
                for s in specs:
                    be.create_array(
                        s.path,
                        shape=s.shape,
                        dtype=s.dtype,
                        data=s.data,
                        attrs=s.attrs,
                        chunks=s.chunks,
                        options=s.options,
                    )
            be.finalize()
        finally:
            be.close()
    a, b = get_backend(fmt).open(str(bulk), "r"), get_backend(fmt).open(str(single), "r")
    try:
        paths = [s.path for s in specs]
        for x, y, p in zip(a.read_many(paths), [b.read(p) for p in paths], paths, strict=True):
            assert x.dtype == y.dtype, p
            assert x.shape == y.shape, p
            np.testing.assert_array_equal(x, y, err_msg=str(p))
        for p in paths + [("g",), ("g", "sub"), ("h",)]:
            assert json.dumps(a.get_attrs(p), sort_keys=True, default=str) == json.dumps(
                b.get_attrs(p), sort_keys=True, default=str
            ), p
        assert [n for n, _ in a.children(("g",))] == [n for n, _ in b.children(("g",))]
    finally:
        a.close()
        b.close()


def _no_token(name: str) -> None:
    raise AssertionError(f"zarr.json holds the non-JSON token {name}")


def test_bulk_zarr_metadata_and_consolidation_equal_zarrs(tmp_path: Path) -> None:
    store = tmp_path / "bulk.zarr"
    be = get_backend("zarr").open(str(store), "w")
    try:
        be.create_groups([(("g",), {"title": "g"}), (("g", "sub"), None), (("h",), {})])
        be.create_arrays(_specs(5))
        be.finalize()
    finally:
        be.close()
    ours = json.loads((store / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    for key, doc in ours.items():  # each node's own document, as zarr wrote or would write it
        own = json.loads((store / key / "zarr.json").read_text())
        if own["node_type"] == "group":
            own.setdefault("consolidated_metadata", doc.get("consolidated_metadata"))
        assert own == doc, key
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        zarr.consolidate_metadata(str(store))
    theirs = json.loads((store / "zarr.json").read_text())["consolidated_metadata"]["metadata"]
    assert json.dumps(ours, sort_keys=True) == json.dumps(theirs, sort_keys=True)
    g = _zarr(store)
    np.testing.assert_array_equal(g["g/a03"][...], np.full((3, 2), 3, "f4"))
    assert g["g/a01"].attrs["units"] == "m"
    # valid JSON in zarr.json: a NaN attribute is spelled "NaN", listed for ptd to read back
    assert g["g/a01"].attrs["nan"] == "NaN"
    assert "nan" in g["g/a01"].attrs["__ptd_float_attrs__"]
    assert "NaN" in (store / "g" / "a01" / "zarr.json").read_text()
    assert json.loads((store / "g" / "a01" / "zarr.json").read_text(), parse_constant=_no_token)
    back = get_backend("zarr").open(str(store), "r")
    try:
        assert np.isnan(back.get_attrs(("g", "a01"))["nan"])  # ptd reads it back as the float
    finally:
        back.close()
    np.testing.assert_array_equal(g["h/gz"][...], np.arange(6))
    assert g["g/big"][...].tolist() == [0, 1, 2, 3]


def test_read_many_names_the_key_of_a_damaged_chunk(tmp_path: Path) -> None:
    store = tmp_path / "d.zarr"
    be = get_backend("zarr").open(str(store), "w")
    be.create_arrays(_specs(3))
    be.close()
    (store / "g" / "a01" / "c" / "0" / "0").write_bytes(b"short")  # not the chunk's size
    (store / "g" / "a02" / "c" / "0" / "0").unlink()  # missing: the fill value
    be = get_backend("zarr").open(str(store), "r")
    try:
        out = be.read_many([("g", "a00"), ("g", "a02")])
        np.testing.assert_array_equal(out[1], np.zeros((3, 2), "f4"))
        with pytest.raises(ptd.errors.PtdError, match="g/a01"):
            be.read_many([("g", "a00"), ("g", "a01")])
    finally:
        be.close()
