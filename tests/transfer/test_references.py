"""HDF5 object references and soft links through ``convert`` (files made with plain h5py):
an HDF5 copy makes each again, pointing at the object at the same path in the copy; a zarr
copy holds each as the path it names (hdmf-zarr's spelling), never writing the linked data in
its place, and an HDF5 copy of that makes them again; region references are listed as not
copied."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

import ptd


def _write(path: Path, *, region: bool = False) -> None:
    with h5py.File(path, "w") as f:
        f["data/a"] = np.arange(6, dtype="f4")
        f["data/b"] = np.arange(4, dtype="i8").reshape(2, 2)
        f.create_group("meta").attrs["kind"] = "device"
        refs = f.create_dataset("refs", (5,), dtype=h5py.ref_dtype, maxshape=(None,))
        for i, key in enumerate(["data/a", "data/b", "meta", "data/a"]):
            refs[i] = f[key].ref  # (refs[4] stays a null reference)
        f["data/a"].attrs["target"] = f["data/b"].ref
        f.attrs["specloc"] = f["meta"].ref
        f["data/link"] = h5py.SoftLink("/meta")
        f["data/rel"] = h5py.SoftLink("a")  # relative to its group
        if region:
            f.create_dataset("regions", (1,), dtype=h5py.regionref_dtype)[0] = f[
                "data/a"
            ].regionref[1:3]


def _names(f: h5py.File, refs: np.ndarray) -> list[str]:
    return [f[r].name if r else "" for r in refs]


def test_h5_copy_keeps_references_and_soft_links(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.h5", tmp_path / "b.h5"
    _write(src)
    result = ptd.convert(src, dst, to="h5")
    assert result.not_copied == []
    with h5py.File(dst, "r") as f:
        assert _names(f, f["refs"][()]) == ["/data/a", "/data/b", "/meta", "/data/a", ""]
        assert f["refs"].maxshape == (None,)
        assert f[f["data/a"].attrs["target"]].name == "/data/b"
        assert f[f.attrs["specloc"]].name == "/meta"
        assert f.get("data/link", getlink=True).path == "/meta"
        assert f.get("data/rel", getlink=True).path == "a"
        assert f["data/link"].attrs["kind"] == "device"
        np.testing.assert_array_equal(f["data/rel"][()], np.arange(6, dtype="f4"))
    assert ptd.diff(src, dst).same
    assert ptd.verify_conversion(result).verified()


def test_diff_sees_a_reference_that_names_another_object(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.h5", tmp_path / "b.h5"
    _write(src)
    ptd.convert(src, dst, to="h5")
    with h5py.File(dst, "r+") as f:
        f.attrs["specloc"] = f["data"].ref
    report = ptd.diff(src, dst)
    assert [(d.key, d.kind) for d in report.differences] == [("", "attrs_differ")]
    with h5py.File(dst, "r+") as f:
        f.attrs["specloc"] = f["meta"].ref
        f["refs"][4] = f["meta"].ref
    report = ptd.diff(src, dst)
    assert [(d.key, d.kind) for d in report.differences] == [("refs", "values_differ")]
    assert "'' vs '/meta'" in report.differences[0].message


@pytest.mark.parametrize("via", ["h5", "zarr"])
def test_a_copy_through_either_format_keeps_references_and_links(tmp_path: Path, via: str) -> None:
    """h5 -> ``via`` -> h5: a zarr copy holds them as the paths they name (hdmf-zarr's
    spelling), and the HDF5 copy of it makes real references and soft links again."""
    src, mid, back = tmp_path / "a.h5", tmp_path / f"b.{via}", tmp_path / "c.h5"
    _write(src)
    first = ptd.convert(src, mid, to=via)  # no skip_unsupported needed
    assert first.not_copied == []
    if via == "zarr":
        g = zarr.open_group(str(mid), mode="r")
        assert g["refs"].attrs["zarr_dtype"] == "object"
        assert json.loads(str(g["refs"][0])) == {"source": ".", "path": "/data/a"}
        assert g["refs"][4] == ""  # a null reference
        assert g.attrs["specloc"] == {
            "zarr_dtype": "object",
            "value": {"source": ".", "path": "/meta"},
        }
        assert {e["name"]: e["path"] for e in g["data"].attrs["zarr_link"]} == {
            "link": "/meta",
            "rel": "/data/a",  # a relative target, absolute as hdmf-zarr spells it
        }
        assert "link" not in g["data"]
        assert "rel" not in g["data"]
        assert any("'refs'" in n and "'data/link'" in n for n in first.notes)
    second = ptd.convert(mid, back, to="h5")
    assert second.not_copied == []
    with h5py.File(back, "r") as f:
        assert _names(f, f["refs"][()]) == ["/data/a", "/data/b", "/meta", "/data/a", ""]
        assert f[f["data/a"].attrs["target"]].name == "/data/b"
        assert f[f.attrs["specloc"]].name == "/meta"
        assert isinstance(f.get("data/link", getlink=True), h5py.SoftLink)
        assert f["data/link"].attrs["kind"] == "device"
        np.testing.assert_array_equal(f["data/rel"][()], np.arange(6, dtype="f4"))
    for a, b in ((src, mid), (src, back), (mid, back)):
        assert ptd.diff(a, b).same, (a, b, ptd.diff(a, b).differences)
    assert ptd.verify_conversion(first).verified()
    assert ptd.verify_conversion(second).verified()


def test_region_references_are_listed_not_copied(tmp_path: Path) -> None:
    src, dst = tmp_path / "a.h5", tmp_path / "b.h5"
    _write(src, region=True)
    with pytest.raises(ptd.errors.PtdError, match="region references"):
        ptd.convert(src, dst, to="h5")
    result = ptd.convert(src, dst, to="h5", skip_unsupported=True)
    assert [i["key"] for i in result.not_copied] == ["regions"]
    with h5py.File(dst, "r") as f:
        assert "regions" not in f
        assert _names(f, f["refs"][()])[:3] == ["/data/a", "/data/b", "/meta"]


@pytest.mark.parametrize("to", ["h5", "zarr"])
def test_a_reference_to_an_object_left_out_is_null_and_listed(tmp_path: Path, to: str) -> None:
    src, dst = tmp_path / "a.h5", tmp_path / f"b.{to}"
    _write(src, region=True)
    with h5py.File(src, "r+") as f:
        f["refs"][4] = f["regions"].ref  # the region references are not copied
        f["meta"].attrs["points_at"] = f["regions"].ref
    result = ptd.convert(src, dst, to=to, skip_unsupported=True)
    lost = {(i["key"], i.get("attr")): i["reason"] for i in result.not_copied}
    assert set(lost) == {("regions", None), ("refs", None), ("meta", "points_at")}
    assert lost[("refs", None)] == (
        "object references to /regions, which the copy does not hold: written as null references"
    )
    if to == "h5":
        with h5py.File(dst, "r") as f:
            assert _names(f, f["refs"][()]) == ["/data/a", "/data/b", "/meta", "/data/a", ""]
            assert not f["meta"].attrs["points_at"]
    else:
        g = zarr.open_group(str(dst), mode="r")
        assert g["refs"][4] == ""
        assert g["meta"].attrs["points_at"] == {"zarr_dtype": "object", "value": None}
    assert ptd.verify_conversion(result).verified()
