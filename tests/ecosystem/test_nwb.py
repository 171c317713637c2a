"""An NWB file written by pynwb (subject, an electrode table whose ``group`` column holds HDF5
object references, a TimeSeries, units with a ragged ``spike_times`` column) converted to zarr
by ptd: the reference column, the reference attributes and the soft link from an electrode
group to its device are carried as the paths they name (hdmf-zarr's spelling), named in the
convert summary's notes; back to h5 they are made again, and pynwb reads that copy as the
original. Converted to h5 directly, likewise."""

from __future__ import annotations

import warnings
from datetime import UTC, datetime
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

import ptd

pynwb = pytest.importorskip("pynwb", reason="pynwb writes and reads the NWB fixture")

ELECTRODES = "general/extracellular_ephys/electrodes"
#: pynwb links an electrode group to its device with an HDF5 soft link
DEVICE_LINK = "general/extracellular_ephys/shank0/device"


def _write_nwb(path: Path) -> None:
    nwb = pynwb.NWBFile(
        session_description="round trip",
        identifier="ptd-37",
        session_start_time=datetime(2024, 1, 1, tzinfo=UTC),
        experimenter=["Ada"],
    )
    nwb.subject = pynwb.file.Subject(subject_id="m1", species="Mus musculus", age="P90D", sex="F")
    device = nwb.create_device(name="probe")
    group = nwb.create_electrode_group(
        name="shank0", description="d", location="CA1", device=device
    )
    for i in range(4):
        nwb.add_electrode(group=group, location="CA1", x=float(i), y=0.0, z=0.0)
    data = np.arange(20, dtype=np.float32).reshape(10, 2)
    nwb.add_acquisition(pynwb.TimeSeries(name="ts", data=data, unit="V", rate=10.0))
    nwb.add_unit(spike_times=[0.1, 0.2, 0.5])
    nwb.add_unit(spike_times=[0.3])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pynwb.NWBHDF5IO(str(path), "w") as io:
            io.write(nwb)


def _read_nwb(path: Path) -> dict[str, object]:
    """What pynwb reads from an NWB file: the electrodes (the group column by the names of
    the groups its references resolve to, and each group's device), the units' spike times,
    the TimeSeries data."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pynwb.NWBHDF5IO(str(path), "r") as io:
            nwb = io.read()
            table = nwb.electrodes.to_dataframe()
            return {
                "groups": [g.name for g in table["group"]],
                "devices": [g.device.name for g in table["group"]],
                "x": table["x"].tolist(),
                "location": table["location"].tolist(),
                "spikes": [list(t) for t in nwb.units["spike_times"][:]],
                "ts": np.asarray(nwb.acquisition["ts"].data[:]).tolist(),
                "experimenter": list(nwb.experimenter),
            }


def test_nwb_to_h5_keeps_references_and_links_and_opens_in_pynwb(tmp_path: Path) -> None:
    src, copy = tmp_path / "a.nwb", tmp_path / "b.h5"
    _write_nwb(src)
    result = ptd.convert(src, copy, to="h5")  # nothing to refuse: no --skip-unsupported
    assert result.not_copied == []
    kinds = {p.key: p.kind for p in result.plan}
    assert kinds[f"{ELECTRODES}/group"] == "references"
    assert kinds[DEVICE_LINK] == "link"
    with h5py.File(copy, "r") as f:
        link = f.get(DEVICE_LINK, getlink=True)
        assert isinstance(link, h5py.SoftLink)
        assert link.path == "/general/devices/probe"
        assert f[f["/"].attrs[".specloc"]].name == "/specifications"
        assert f[f["units/spike_times_index"].attrs["target"]].name == "/units/spike_times"
    assert _read_nwb(copy) == _read_nwb(src)
    assert ptd.diff(src, copy).same
    assert ptd.verify_conversion(result).verified()


def test_nwb_through_zarr_and_back_opens_in_pynwb(tmp_path: Path) -> None:
    """NWB -> zarr (references and soft links carried as the paths they name, hdmf-zarr's
    spelling) -> h5: pynwb reads the HDF5 copy as the original."""
    src, copy, back = tmp_path / "a.nwb", tmp_path / "a.zarr", tmp_path / "b.h5"
    _write_nwb(src)
    first = ptd.convert(src, copy, to="zarr")  # no skip_unsupported needed
    assert first.not_copied == []
    notes = " ".join(first.notes)
    for named in (f"{ELECTRODES}/group", DEVICE_LINK, ".specloc", "spike_times_index: target"):
        assert named in notes, named
    root = zarr.open_group(str(copy), mode="r")
    assert root[f"{ELECTRODES}/group"].attrs["zarr_dtype"] == "object"
    assert root["units/spike_times_index"].attrs["target"]["value"]["path"] == "/units/spike_times"
    second = ptd.convert(copy, back, to="h5")
    assert second.not_copied == []
    assert _read_nwb(back) == _read_nwb(src)
    assert ptd.diff(src, copy).same
    assert ptd.diff(src, back).same
    assert ptd.verify_conversion(first).verified()
    assert ptd.verify_conversion(second).verified()


def test_diff_compares_references_by_the_paths_they_name(tmp_path: Path) -> None:
    src, copy = tmp_path / "a.nwb", tmp_path / "b.h5"
    _write_nwb(src)
    ptd.convert(src, copy, to="h5")
    with h5py.File(copy, "r+") as f:
        f[f"{ELECTRODES}/group"][1] = f["general/devices/probe"].ref
    report = ptd.diff(src, copy)
    assert [d.key for d in report.differences] == [f"{ELECTRODES}/group"]
    assert "/general/devices/probe" in report.differences[0].message
    with h5py.File(copy, "r+") as f:
        f[f"{ELECTRODES}/group"][1] = f["general/extracellular_ephys/shank0"].ref
        f["units/spike_times_index"].attrs["target"] = f["acquisition"].ref
    report = ptd.diff(src, copy)
    assert [(d.key, d.kind) for d in report.differences] == [
        ("units/spike_times_index", "attrs_differ")
    ]
