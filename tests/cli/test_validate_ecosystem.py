"""``ptd validate`` on files the tools write themselves (issue 37): valid as written, and
invalid naming the key once one array is cut short afterwards with plain h5py / zarr-python
(a dimension's length, an ``indptr``, a ``VectorIndex``)."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from pathlib import Path

import h5py
import numpy as np
import pytest


def cut_short(store: Path, key: str, axis: int = 0) -> None:
    """Take the last row (along ``axis``) off ``key`` with plain h5py or zarr-python, keeping
    its attributes and the dimension scales attached to it; a zarr store's consolidated
    metadata is written again (the store stays consistent: only the array is short)."""
    if store.is_dir():
        import zarr

        arr = zarr.open_array(str(store), path=key, mode="r+")
        shape = list(arr.shape)
        shape[axis] -= 1
        arr.resize(tuple(shape))
        zarr.consolidate_metadata(str(store))
        return
    with h5py.File(store, "r+") as f:
        ds = f[key]
        full, dtype = ds[()], ds.dtype
        data = np.take(full, np.arange(full.shape[axis] - 1), axis=axis)
        attrs = {k: ds.attrs[k] for k in ds.attrs if k not in ("DIMENSION_LIST", "REFERENCE_LIST")}
        scales = [[s.name for s in dim.values()] for dim in ds.dims]
        del f[key]
        new = f.create_dataset(key, data=data, dtype=dtype)
        new.attrs.update(attrs)
        for i, names in enumerate(scales):
            for name in names:
                new.dims[i].attach_scale(f[name])


def _keys(run) -> list[tuple[str, str]]:
    return [(p["key"], p["code"]) for p in run.json["reports"][0]["problems"]]


XARRAY_WRITES = ["zarr2", "zarr3", "h5netcdf", "netcdf4"]


@pytest.mark.parametrize("how", XARRAY_WRITES)
def test_xarray_named_dimensions(ptd_cli, tmp_path: Path, how: str) -> None:
    xr = pytest.importorskip("xarray", reason="xarray writes the datasets of this test")
    pytest.importorskip(
        {"h5netcdf": "h5netcdf", "netcdf4": "netCDF4"}.get(how, "zarr"),
        reason=f"xarray's {how} engine is not installed",
    )
    ds = xr.Dataset(
        {"temp": (("time", "x"), np.zeros((30, 4))), "speed": (("time",), np.arange(30.0))},
        coords={"time": np.arange(30), "x": ["a", "b", "c", "d"]},
    )
    if how.startswith("zarr"):
        path = tmp_path / "ds.zarr"
        ds.to_zarr(path, zarr_format=int(how[-1]), mode="w")
    else:
        path = tmp_path / "ds.nc"
        ds.to_netcdf(path, engine=how)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 0, run
    cut_short(path, "speed")
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert _keys(run) == [("speed", "dimension_mismatch")]
    assert "'time'" in run.json["reports"][0]["problems"][0]["message"]


@pytest.mark.parametrize("how", ["h5netcdf", "netcdf4"])
def test_netcdf_dimension_without_coordinate(ptd_cli, tmp_path: Path, how: str) -> None:
    """A dimension with no coordinate is stated by netCDF's dimension-only scale: its length
    is the dimension's, exactly (not a guess from the arrays), and the scale is no key."""
    xr = pytest.importorskip("xarray", reason="xarray writes the datasets of this test")
    pytest.importorskip(
        {"h5netcdf": "h5netcdf", "netcdf4": "netCDF4"}[how],
        reason=f"xarray's {how} engine is not installed",
    )
    ds = xr.Dataset(
        {"temp": (("time", "x"), np.zeros((30, 4))), "speed": (("time", "x"), np.ones((30, 4)))},
        coords={"time": np.arange(30)},
    )
    path = tmp_path / "ds.nc"
    ds.to_netcdf(path, engine=how)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 0, run
    assert run.json["reports"][0]["leaves"] == 3  # time, temp, speed: not the dimension x
    cut_short(path, "speed", axis=1)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert _keys(run) == [("speed", "dimension_mismatch")]
    message = run.json["reports"][0]["problems"][0]["message"]
    assert "'x'" in message, message
    assert "the length the file states for it" in message, message


def _anndata(tmp_path: Path, suffix: str) -> Path:
    ad = pytest.importorskip("anndata", reason="anndata writes the h5ad and zarr files")
    import pandas as pd
    import scipy.sparse as sp

    x = sp.random(50, 20, density=0.2, format="csr", random_state=0, dtype=np.float32)
    obs = pd.DataFrame(
        {"cell_type": pd.Categorical(np.array(["a", "b", "c"] * 17)[:50]), "n": np.arange(50)},
        index=[f"c{i}" for i in range(50)],
    )
    adata = ad.AnnData(
        X=x,
        obs=obs,
        var=pd.DataFrame(index=[f"g{i}" for i in range(20)]),
        layers={"counts": x.tocsc()},
        obsm={"pca": np.zeros((50, 3))},
    )
    path = tmp_path / f"a.{suffix}"
    if suffix == "h5ad":
        adata.write_h5ad(path)
    else:
        with warnings.catch_warnings():  # anndata's note that its default zarr format changes
            warnings.simplefilter("ignore", UserWarning)
            adata.write_zarr(path)
    return path


@pytest.mark.parametrize("suffix", ["h5ad", "zarr"])
@pytest.mark.parametrize("key", ["X/indptr", "layers/counts/indptr"])
def test_anndata_sparse(ptd_cli, tmp_path: Path, suffix: str, key: str) -> None:
    path = _anndata(tmp_path, suffix)
    run = ptd_cli("validate", path, "--data", "--json")
    assert run.code == 0, run
    assert run.json["reports"][0]["layouts"]["X"] == "anndata csr_matrix"
    cut_short(path, key)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert _keys(run) == [(key, "encoding_mismatch")]


@pytest.mark.parametrize("suffix", ["h5ad", "zarr"])
def test_anndata_categorical_codes(ptd_cli, tmp_path: Path, suffix: str) -> None:
    path = _anndata(tmp_path, suffix)
    cut_short(path, "obs/cell_type/codes")
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert _keys(run) == [("obs/cell_type", "encoding_mismatch")]


def _set_value(store: Path, key: str, index: int, value: int) -> None:
    """Overwrite one value of ``key`` with plain h5py or zarr-python."""
    if store.is_dir():
        import zarr

        zarr.open_array(str(store), path=key, mode="r+")[index] = value
        return
    with h5py.File(store, "r+") as f:
        f[key][index] = value


@pytest.mark.parametrize("suffix", ["h5ad", "zarr"])
def test_anndata_categorical_code_past_the_categories(ptd_cli, tmp_path: Path, suffix: str) -> None:
    path = _anndata(tmp_path, suffix)
    _set_value(path, "obs/cell_type/codes", 5, 3)  # three categories: 0, 1, 2 (or -1)
    assert ptd_cli("validate", path).code == 0  # the metadata is intact
    run = ptd_cli("validate", path, "--data", "--json")
    assert run.code == 1, run
    # (anndata leaves the chunks of an all-zero zarr array unwritten: a warning, not this)
    errors = [k for k in _keys(run) if k[1] != "missing_chunks"]
    assert errors == [("obs/cell_type/codes", "encoding_mismatch")]


def _nwb(tmp_path: Path) -> Path:
    pynwb = pytest.importorskip("pynwb", reason="pynwb writes the NWB file")
    nwb = pynwb.NWBFile(
        session_description="s",
        identifier="id",
        session_start_time=datetime(2020, 1, 1, tzinfo=UTC),
        experimenter=["me"],
    )
    device = nwb.create_device("probe")
    shank = nwb.create_electrode_group("shank0", description="d", location="x", device=device)
    for _ in range(12):
        nwb.add_electrode(group=shank, location="x")
    rng = np.random.default_rng(0)
    for i in range(11):
        nwb.add_unit(spike_times=np.sort(rng.uniform(0, 10, size=3 + i)))
    nwb.add_acquisition(
        pynwb.TimeSeries(
            name="lfp", data=np.zeros((40, 2)), timestamps=np.arange(40) / 10.0, unit="V"
        )
    )
    path = tmp_path / "s.nwb"
    with pynwb.NWBHDF5IO(str(path), "w") as io:
        io.write(nwb)
    return path


def test_nwb_reference_column_and_ragged_units(ptd_cli, tmp_path: Path) -> None:
    path = _nwb(tmp_path)
    run = ptd_cli("validate", path, "--data", "--json")
    assert run.code == 0, run
    rep = run.json["reports"][0]
    group = "general/extracellular_ephys/electrodes/group"
    assert [(p["key"], p["code"]) for p in rep["lint"] if p["code"] in ("L008", "L012")] == [
        (group, "L012")
    ]
    run = ptd_cli("inspect", path, "--json")
    kinds = {e["key"]: e["kind"] for e in run.json["entries"]}
    assert kinds[group] == "reference"
    cut_short(path, "units/spike_times_index")
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert _keys(run) == [("units/spike_times_index", "encoding_mismatch")]
    assert "units/spike_times_index" in ptd_cli("validate", path).stdout


def test_nwb_timeseries_timestamps_cut_short(ptd_cli, tmp_path: Path) -> None:
    path = _nwb(tmp_path)
    cut_short(path, "acquisition/lfp/timestamps")
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert _keys(run) == [("acquisition/lfp/timestamps", "encoding_mismatch")]
