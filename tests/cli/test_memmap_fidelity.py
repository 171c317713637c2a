"""``ptd memmap`` keeps what it can and names what it cannot: user attributes (in meta.json,
where tensordict's loader passes over them), keys named like meta.json's own fields (NWB's
``device``: stored escaped), names too long for a file system (refused up front, skipped with
``--skip-unsupported``), and properties a memmap has no place for (listed as not kept)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import zarr

import ptd
from ptd.format.memmap_dir import stored_entry_name

from .conftest import assert_one_line_error

LONG = "k" * 300  # legal in HDF5, longer than a file name can be


def make_nwb_like(path: Path, fmt: str) -> Path:
    """An NWB-style layout made with plain h5py / zarr-python: attributes on the root, on
    groups and on datasets, a group holding a ``device`` node."""
    data = np.arange(400, dtype="f4").reshape(100, 4)
    if fmt == "h5":
        with h5py.File(path, "w") as f:
            f.attrs["nwb_version"] = "2.7.0"
            ts = f.create_group("acquisition/ts")
            ts.attrs["neurodata_type"] = "ElectricalSeries"
            d = ts.create_dataset("data", data=data, chunks=(10, 4), maxshape=(None, 4))
            d.attrs["unit"] = "volts"
            d.attrs["conversion"] = np.float64(0.5)
            dev = ts.create_group("device")
            dev.attrs["description"] = "a probe"
            dev.create_dataset("gain", data=np.ones(100))
            ts.create_dataset("shape", data=np.arange(100))  # a second meta.json field name
    else:
        root = zarr.open_group(str(path), mode="w", zarr_format=3)
        root.attrs["nwb_version"] = "2.7.0"
        ts = root.create_group("acquisition").create_group("ts")
        ts.attrs["neurodata_type"] = "ElectricalSeries"
        d = ts.create_array("data", data=data, chunks=(10, 4), dimension_names=["time", "ch"])
        d.attrs.update({"unit": "volts", "conversion": 0.5})
        dev = ts.create_group("device")
        dev.attrs["description"] = "a probe"
        dev.create_array("gain", data=np.ones(100))
        ts.create_array("shape", data=np.arange(100))
    return path


@pytest.fixture(params=["h5", "zarr"])
def nwb(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    fmt = request.param
    return make_nwb_like(tmp_path / ("nwb.h5" if fmt == "h5" else "nwb.zarr"), fmt)


def test_attributes_and_field_names_survive(nwb: Path, tmp_path: Path, ptd_cli) -> None:
    out = tmp_path / "out.mm"
    run = ptd_cli("memmap", nwb, out, "--json")
    assert run.code == 0, run
    summary = run.json
    assert sorted(summary["escaped"]) == ["acquisition/ts/device", "acquisition/ts/shape"]
    # every attribute is back, read through the memmap backend (inspect, diff, convert)
    doc = ptd_cli("inspect", out, "--json", "--attrs").json
    assert doc["attrs"] == {"nwb_version": "2.7.0"}
    by_key = {e["key"]: e for e in doc["entries"]}
    assert by_key["acquisition/ts/data"]["attrs"] == {"unit": "volts", "conversion": 0.5}
    assert by_key["acquisition/ts/device"]["attrs"] == {"description": "a probe"}
    # the store and its memmap copy compare the same, attributes included
    same = ptd_cli("diff", nwb, out, "--json")
    assert same.code == 0, same
    # ptd loads the keys under their own names
    td = ptd.TensorDict.load_memmap(out)
    assert torch.equal(td["acquisition", "ts", "shape"], torch.arange(100))
    assert torch.equal(
        td["acquisition", "ts", "device", "gain"], torch.ones(100, dtype=torch.float64)
    )
    assert td["acquisition", "ts"].batch_size == torch.Size([100])


def test_tensordict_reads_the_copy(nwb: Path, tmp_path: Path) -> None:
    """tensordict 0.15 loads the directory: ptd's fields are skipped, escaped keys keep their
    escaped names."""
    out = tmp_path / "out.mm"
    ptd.containers.memmap.export_memmap(nwb, out)
    code = (
        "import sys, torch, tensordict\n"
        "td = tensordict.TensorDict.load_memmap(sys.argv[1])\n"
        "ts = td['acquisition', 'ts']\n"
        f"assert torch.equal(ts[{stored_entry_name('shape')!r}], torch.arange(100)), ts\n"
        f"assert ts[{stored_entry_name('device')!r}, 'gain'].shape == (100,)\n"
        "assert ts['data'].shape == (100, 4)\n"
        "assert '_ptd' not in ts.keys()\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(out)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_meta_json_layout(nwb: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.mm"
    ptd.containers.memmap.export_memmap(nwb, out)
    with open(out / "acquisition" / "ts" / "meta.json") as f:
        meta = json.load(f)
    assert meta["shape"] == [100]  # tensordict's field, not the key
    assert meta["%73hape"]["_ptd_name"] == "shape"
    assert meta["%64evice"] == {"type": "TensorDict", "_ptd_name": "device"}
    assert meta["data"]["_ptd_attrs"] == {"unit": "volts", "conversion": 0.5}
    assert meta["_ptd"] == {"attrs": {"neurodata_type": "ElectricalSeries"}}
    assert os.path.exists(out / "acquisition" / "ts" / "%2573hape.memmap")


def test_properties_a_memmap_cannot_hold_are_named(nwb: Path, tmp_path: Path) -> None:
    summary = ptd.containers.memmap.export_memmap(nwb, tmp_path / "out.mm")
    lost = {(i["key"], i["property"]) for i in summary.not_copied if "property" in i}
    if nwb.suffix == ".h5":
        assert lost == {("acquisition/ts/data", "maxshape")}
    else:
        assert lost == {("acquisition/ts/data", "dimension_names")}


def test_tensordict_key_named_like_a_field(tmp_path: Path) -> None:
    td = ptd.TensorDict({"device": torch.arange(3), "_ptd": torch.ones(3)}, batch_size=[3])
    td.memmap(tmp_path / "td")
    back = ptd.TensorDict.load_memmap(tmp_path / "td")
    assert torch.equal(back["device"], torch.arange(3))
    assert torch.equal(back["_ptd"], torch.ones(3))
    assert back.device is None or str(back.device) == "cpu"


def test_attribute_json_cannot_hold_is_listed(tmp_path: Path, ptd_cli) -> None:
    src = tmp_path / "refs.h5"
    with h5py.File(src, "w") as f:
        d = f.create_dataset("x", data=np.arange(4))
        d.attrs["ok"] = 3
        d.attrs["ref"] = f.ref  # an object reference: no JSON value
        d.attrs["raw"] = np.void(b"\xff\x00")
    run = ptd_cli("memmap", src, tmp_path / "o.mm", "--json")
    assert run.code == 0, run
    attrs = {(i["key"], i["attr"]) for i in run.json["not_copied"] if "attr" in i}
    assert ("x", "ref") in attrs
    with open(tmp_path / "o.mm" / "meta.json") as f:
        assert json.load(f)["x"]["_ptd_attrs"]["ok"] == 3


# ------------------------------------------------------------------------------ long names
def _long_h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset("short", data=np.arange(5))
        f.create_group("g").create_dataset(LONG, data=np.arange(5))
    return path


@pytest.mark.parametrize("dst", ["out.mm", "out.zarr"])
def test_long_names_refused_up_front(tmp_path: Path, ptd_cli, dst: str) -> None:
    src = _long_h5(tmp_path / "long.h5")
    cmd = "memmap" if dst.endswith(".mm") else "convert"
    run = ptd_cli(cmd, src, tmp_path / dst)
    assert_one_line_error(run, "g/kkkk", "(302 bytes)", "255", "--skip-unsupported")
    assert LONG not in run.stderr  # the key is named, not spelled out
    assert sorted(os.listdir(tmp_path)) == ["long.h5"]  # nothing half-written


@pytest.mark.parametrize("dst", ["out.mm", "out.zarr"])
def test_long_names_skipped(tmp_path: Path, ptd_cli, dst: str) -> None:
    src = _long_h5(tmp_path / "long.h5")
    cmd = "memmap" if dst.endswith(".mm") else "convert"
    run = ptd_cli(cmd, src, tmp_path / dst, "--skip-unsupported", "--json")
    assert run.code == 0, run
    assert [i["key"] for i in run.json["not_copied"]] == [f"g/{LONG}"]
    back = ptd_cli("inspect", tmp_path / dst, "--json").json
    assert {e["key"] for e in back["entries"]} >= {"short"}
    assert not any(LONG in e["key"] for e in back["entries"])


def test_long_names_stay_in_hdf5(tmp_path: Path) -> None:
    """HDF5 holds the name: h5 -> h5 copies it."""
    src = _long_h5(tmp_path / "long.h5")
    result = ptd.convert(src, tmp_path / "copy.h5")
    assert result.not_copied == []
    with h5py.File(tmp_path / "copy.h5") as f:
        assert f[f"g/{LONG}"][()].tolist() == list(range(5))
