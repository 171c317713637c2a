"""xarray datasets written by xarray itself (Zarr v2, Zarr v3, netCDF-4 by h5netcdf and by
netCDF4), converted by ``ptd convert``, then opened again with xarray and compared with the
original; ``ptd convert --verify`` and ``ptd.diff`` must find the copy the same. The
attributes through which a format spells a property (``_ARRAY_DIMENSIONS``,
``DIMENSION_LABELS``, netCDF's ``_Netcdf4*`` and ``_FillValue``...) are compared as the
property, never as attributes (``ptd.storage.spelled``)."""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

import ptd
from ptd_cli.main import app

xr = pytest.importorskip("xarray", reason="xarray writes the datasets (pip install ptd[ecosystem])")

runner = CliRunner()


def _dataset() -> Any:
    """A string coordinate, an integer coordinate, a float variable with a NaN hole (NaN fill)
    and two more variables of the same dtype, shape and dims."""
    temp = np.arange(12, dtype="f4").reshape(4, 3)
    temp[1, 1] = np.nan
    ds = xr.Dataset(
        {
            "temp": (("time", "x"), temp, {"units": "K"}),
            "pres": (("time", "x"), np.ones((4, 3), "f4")),
            "hum": (("time", "x"), np.zeros((4, 3), "f4")),
        },
        coords={"time": np.arange(4), "x": np.array(["a", "bb", "c"])},
        attrs={"title": "round trip"},
    )
    ds["temp"].encoding["_FillValue"] = np.float32(np.nan)
    return ds


def _write(tmp_path: Path, how: str) -> Path:
    ds = _dataset()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how in ("zarr2", "zarr3"):
            path = tmp_path / f"{how}.zarr"
            ds.to_zarr(path, zarr_format=int(how[-1]), consolidated=False)
        else:
            module = {"h5netcdf": "h5netcdf", "netcdf4": "netCDF4"}[how]
            pytest.importorskip(module, reason=f"{module} writes the netCDF file (ptd[ecosystem])")
            path = tmp_path / f"{how}.nc"
            ds.to_netcdf(path, engine=how)
    return path


def _open(path: Path) -> Any:
    engine = "zarr" if path.suffix == ".zarr" else "h5netcdf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_dataset(path, engine=engine).load()


def _convert(src: Path, dst: Path, *extra: str) -> None:
    result = runner.invoke(app, ["convert", str(src), str(dst), "--verify", *extra])
    assert result.exit_code == 0, result.output
    assert "verified" in result.output, result.output


def _same(a: Path, b: Path) -> None:
    report = ptd.diff(str(a), str(b), equal_nan=True)
    assert report.same, [(d.key, d.kind, d.a, d.b) for d in report.differences]
    meta = ptd.diff(str(a), str(b), metadata_only=True)
    assert meta.same, [(d.key, d.kind, d.a, d.b) for d in meta.differences]


def _strict_json(path: Path) -> None:
    """Every ``zarr.json`` under ``path`` is JSON (no bare NaN/Infinity token)."""

    def refuse(token: str) -> None:
        raise AssertionError(f"non-JSON token {token} in {path}")

    for doc in path.rglob("zarr.json"):
        json.loads(doc.read_text(), parse_constant=refuse)


def _scales(ds: h5py.Dataset) -> list[str]:
    """The names of the dimension scales attached to each dimension of ``ds``."""
    return [dim[0].name.rsplit("/", 1)[-1] if len(dim) else "" for dim in ds.dims]


def _ours(attrs: dict[str, Any]) -> dict[str, Any]:
    """Attributes without ptd's own markers (``__ptd_string_type__`` keeps a string
    coordinate's numpy kind for ptd: a netCDF reader shows it as an attribute)."""
    return {k: v for k, v in attrs.items() if not k.startswith("__ptd_")}


def _same_in_xarray(copy: Any, original: Any) -> None:
    """values, dims, coordinates and attributes equal (ptd's markers aside)."""
    assert dict(copy.sizes) == dict(original.sizes)
    assert set(copy.coords) == set(original.coords)
    assert set(copy.data_vars) == set(original.data_vars)
    assert copy.attrs == original.attrs
    for name in original.variables:
        assert copy[name].dims == original[name].dims, name
        np.testing.assert_array_equal(copy[name].values, original[name].values)
        assert _ours(dict(copy[name].attrs)) == _ours(dict(original[name].attrs)), name


@pytest.mark.parametrize("how", ["zarr2", "zarr3"])
def test_xarray_zarr_to_h5_keeps_every_dimension_name(tmp_path: Path, how: str) -> None:
    src = _write(tmp_path, how)
    dst = tmp_path / "copy.h5"
    _convert(src, dst)
    _same(src, dst)
    with h5py.File(dst, "r") as f:
        for name in ("temp", "pres", "hum"):  # one dtype, shape and dims: all named
            assert _scales(f[name]) == ["time", "x"], name
            assert "DIMENSION_LABELS" not in f[name].attrs  # the scales name them
        for name in ("time", "x"):  # the coordinates (the string one too) are the scales
            assert f[name].is_scale, name
        assert "_ARRAY_DIMENSIONS" not in f["temp"].attrs  # the spelling is not copied
        assert f["temp"].attrs["units"] == "K"
        assert np.isnan(f["temp"].fillvalue)


@pytest.mark.parametrize("how", ["zarr2", "zarr3"])
def test_xarray_zarr_to_h5_opens_in_h5netcdf(tmp_path: Path, how: str) -> None:
    """The h5 copy names its dimensions the netCDF-4 way (attached dimension scales):
    xarray reads it with h5netcdf as the dataset that was written, no ``phony_dim_N``."""
    pytest.importorskip("h5netcdf", reason="h5netcdf reads the h5 copy (ptd[ecosystem])")
    src = _write(tmp_path, how)
    dst = tmp_path / "copy.h5"
    _convert(src, dst)
    _same_in_xarray(_open(dst), _open(src))


@pytest.mark.parametrize("how", ["h5netcdf", "netcdf4"])
def test_netcdf_to_zarr_to_h5_opens_in_h5netcdf(tmp_path: Path, how: str) -> None:
    src = _write(tmp_path, how)
    mid, dst = tmp_path / "copy.zarr", tmp_path / "copy.h5"
    _convert(src, mid)
    _convert(mid, dst)
    _same(mid, dst)
    original, copy = _open(src), _open(dst)
    assert dict(copy.sizes) == dict(original.sizes)
    for name in original.variables:
        assert copy[name].dims == original[name].dims, name
        np.testing.assert_array_equal(copy[name].values, original[name].values)
    if how == "h5netcdf":  # netCDF4 writes text attributes as bytes (kept as bytes: see README)
        _same_in_xarray(copy, original)


def _bare_dataset() -> Any:
    """Dimensions without a coordinate array (``x`` here; ``time`` has one), the common case
    of an xarray dataset; numeric attributes only (netCDF4 writes text ones as bytes)."""
    return xr.Dataset(
        {
            "v": (("time", "x"), np.arange(12.0).reshape(4, 3), {"scale": 2}),
            "w": (("x",), np.arange(3, dtype="f4")),
            "u": (("time", "x"), np.ones((4, 3), "i4")),
        },
        coords={"time": np.arange(4)},
        attrs={"answer": 42},
    )


def _write_ds(ds: Any, tmp_path: Path, how: str, **kw: Any) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how in ("zarr2", "zarr3"):
            path = tmp_path / f"{how}.zarr"
            ds.to_zarr(path, zarr_format=int(how[-1]), consolidated=False, **kw)
        else:
            module = {"h5netcdf": "h5netcdf", "netcdf4": "netCDF4"}[how]
            pytest.importorskip(module, reason=f"{module} writes the netCDF file (ptd[ecosystem])")
            path = tmp_path / f"{how}.nc"
            ds.to_netcdf(path, engine=how, **kw)
    return path


def _open_with(path: Path, engine: str, **kw: Any) -> Any:
    if engine != "zarr":
        pytest.importorskip(
            {"h5netcdf": "h5netcdf", "netcdf4": "netCDF4"}[engine],
            reason=f"xarray's {engine} engine reads the h5 copy (ptd[ecosystem])",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return xr.open_dataset(path, engine=engine, **kw).load()


READERS = ["h5netcdf", "netcdf4"]


@pytest.mark.parametrize("reader", READERS)
@pytest.mark.parametrize("how", ["zarr2", "zarr3", "h5netcdf", "netcdf4"])
def test_dimension_without_coordinate_survives_an_h5_copy(
    tmp_path: Path, how: str, reader: str
) -> None:
    """A dimension with no coordinate array gets netCDF-4's dimension-only scale in the h5
    copy: netCDF readers (both engines) name it as the original does, no ``phony_dim_N``;
    h5 -> zarr -> h5 again keeps it, the zarr copy has no array ``x``; ptd finds every copy
    the same as its source."""
    src = _write_ds(_bare_dataset(), tmp_path, how)
    original = _open_with(src, "zarr" if src.suffix == ".zarr" else "h5netcdf")
    dst = tmp_path / "copy.h5"
    _convert(src, dst)
    _same(src, dst)
    with h5py.File(dst, "r") as f:
        assert _scales(f["v"]) == ["time", "x"]
        assert _scales(f["w"]) == ["x"]
        assert f["x"].attrs["NAME"].decode().startswith("This is a netCDF dimension")
        assert f["x"].shape == (3,)
        assert f["x"].id.get_storage_size() == 0  # no data
    _same_in_xarray(_open_with(dst, reader), original)
    td = ptd.PersistentTensorDict.from_h5(str(dst), mode="r")
    try:
        assert set(td.keys()) == {"time", "v", "w", "u"}  # the dimension: no key
    finally:
        td.close()
    mid, again = tmp_path / "back.zarr", tmp_path / "again.h5"
    _convert(dst, mid)
    _same(dst, mid)
    assert not (mid / "x").exists()  # the dimension is no array of the zarr copy
    _same_in_xarray(_open_with(mid, "zarr"), original)
    _convert(mid, again)
    _same(src, again)
    _same_in_xarray(_open_with(again, reader), original)


@pytest.mark.parametrize("reader", READERS)
def test_dimension_of_arrays_in_two_groups(tmp_path: Path, reader: str) -> None:
    """Arrays of two groups naming one dimension without a coordinate: the scale sits in
    their common group (netCDF looks a dimension up towards the root); a dimension of
    another length in a subgroup gets its own scale there."""
    src = tmp_path / "groups.zarr"
    root = zarr.open_group(src, mode="w", zarr_format=3)
    root.create_array("a", data=np.arange(3.0), dimension_names=["x"])
    root.create_group("g").create_array("b", data=np.ones((2, 3)), dimension_names=["y", "x"])
    root.create_group("h").create_array("c", data=np.ones(5), dimension_names=["x"])
    root.create_array("h/d", data=np.ones(5), dimension_names=["x"])
    dst = tmp_path / "groups.h5"
    _convert(src, dst)
    _same(src, dst)
    with h5py.File(dst, "r") as f:
        assert sorted(n for n in f if f[n].attrs.get("CLASS") == b"DIMENSION_SCALE") == ["x"]
        assert f["x"].shape == (3,)
        assert f["g/y"].shape == (2,)
        assert f["h/x"].shape == (5,)
    assert _open_with(dst, reader)["a"].dims == ("x",)
    assert _open_with(dst, reader, group="g")["b"].dims == ("y", "x")
    inner = _open_with(dst, reader, group="h")
    assert inner["c"].dims == ("x",)
    assert inner.sizes["x"] == 5


def test_dimension_named_like_another_array_stays_a_label(tmp_path: Path) -> None:
    """A name held by an array that is no coordinate (2-D here) is not made a dimension:
    the arrays naming it keep their labels (no scale on any dimension)."""
    src, dst = tmp_path / "taken.zarr", tmp_path / "taken.h5"
    root = zarr.open_group(src, mode="w", zarr_format=3)
    root.create_array("x", data=np.ones((2, 2)), dimension_names=["p", "q"])
    root.create_array("v", data=np.ones((4, 3)), dimension_names=["t", "x"])
    _convert(src, dst)
    _same(src, dst)
    with h5py.File(dst, "r") as f:
        assert _scales(f["v"]) == ["", ""]
        assert [d.label for d in f["v"].dims] == ["t", "x"]
        assert f["x"].shape == (2, 2)
        assert _scales(f["x"]) == ["p", "q"]  # its own dimensions have no other holder


def test_coordinate_of_a_parent_group_is_attached(tmp_path: Path) -> None:
    """netCDF looks a dimension up from an array's group towards the root."""
    src, dst = tmp_path / "nested.zarr", tmp_path / "nested.h5"
    root = zarr.open_group(src, mode="w", zarr_format=3)
    root.create_array("time", data=np.arange(5), dimension_names=["time"])
    inner = root.create_group("g")
    inner.create_array("v", data=np.ones((5, 2)), dimension_names=["time", None])
    inner.create_array("w", data=np.ones(5), dimension_names=["time"])
    _convert(src, dst)
    _same(src, dst)
    with h5py.File(dst, "r") as f:
        assert f["time"].is_scale
        assert _scales(f["g/w"]) == ["time"]
        assert _scales(f["g/v"]) == ["", ""]  # an unnamed dimension: labels only
        assert [d.label for d in f["g/v"].dims] == ["time", ""]


@pytest.mark.parametrize("how", ["h5netcdf", "netcdf4"])
def test_netcdf_to_zarr_opens_in_xarray(tmp_path: Path, how: str) -> None:
    src = _write(tmp_path, how)
    dst = tmp_path / "copy.zarr"
    _convert(src, dst)
    _same(src, dst)
    _strict_json(dst)
    temp = zarr.open_array(dst / "temp", mode="r")
    assert math.isnan(temp.metadata.fill_value)
    assert list(temp.metadata.dimension_names) == ["time", "x"]
    # coordinates (a dimension scale in the netCDF file) are named too
    assert list(zarr.open_array(dst / "time", mode="r").metadata.dimension_names) == ["time"]
    assert list(zarr.open_array(dst / "x", mode="r").metadata.dimension_names) == ["x"]
    original, copy = _open(src), _open(dst)
    assert dict(copy.sizes) == dict(original.sizes)
    for name in original.variables:
        assert copy[name].dims == original[name].dims, name
        np.testing.assert_array_equal(copy[name].values, original[name].values)
    if how == "h5netcdf":  # netCDF4 writes text attributes as bytes (kept as bytes: see README)
        xr.testing.assert_identical(copy, original)


def test_zarr_v2_to_v3_opens_in_xarray(tmp_path: Path) -> None:
    src = _write(tmp_path, "zarr2")
    dst = tmp_path / "v3.zarr"
    _convert(src, dst)
    _same(src, dst)
    _strict_json(dst)
    xr.testing.assert_identical(_open(dst), _open(src))
    assert "_ARRAY_DIMENSIONS" not in zarr.open_array(dst / "temp", mode="r").attrs


def test_zarr_v3_string_coordinate_keeps_its_dimension_name(tmp_path: Path) -> None:
    src = _write(tmp_path, "zarr3")
    dst = tmp_path / "again.zarr"
    _convert(src, dst, "--compression", "zstd")
    xr.testing.assert_identical(_open(dst), _open(src))


def test_diff_names_a_lost_dimension_name(tmp_path: Path) -> None:
    """The property is compared: a copy whose dims lost their names differs."""
    src = _write(tmp_path, "zarr3")
    dst = tmp_path / "copy.h5"
    _convert(src, dst)
    with h5py.File(dst, "r+") as f:
        for dim, name in zip(f["pres"].dims, ("time", "x"), strict=True):
            dim.detach_scale(f[name])
    report = ptd.diff(str(src), str(dst), equal_nan=True)
    assert [(d.key, d.kind) for d in report.differences] == [("pres", "properties_differ")]
    assert report.differences[0].b == {"dimension_names": None}


def test_nan_attributes_are_json_in_zarr_and_read_back(tmp_path: Path) -> None:
    src = tmp_path / "a.h5"
    with h5py.File(src, "w") as f:
        ds = f.create_dataset("v", data=np.arange(3.0))
        ds.attrs["valid_range"] = np.array([np.nan, np.inf, -np.inf])
        ds.attrs["scale"] = np.float64(np.nan)
    dst = tmp_path / "a.zarr"
    _convert(src, dst)
    _strict_json(dst)
    stored = json.loads((dst / "v" / "zarr.json").read_text())["attributes"]
    assert stored["valid_range"] == ["NaN", "Infinity", "-Infinity"]
    assert stored["scale"] == "NaN"
    report = ptd.diff(str(src), str(dst), equal_nan=True)  # read back as floats
    assert report.same, [(d.key, d.kind, d.a, d.b) for d in report.differences]
