"""An NWB file written by pynwb (subject, an electrode table whose ``group`` column holds HDF5
object references, a TimeSeries, units with a ragged ``spike_times`` column) converted to zarr
by ptd: the values are kept, and what zarr cannot hold (the reference column, reference
attributes, the soft link from an electrode group to its device) is named in the convert summary, never dropped silently; ``--verify`` passes with
exactly those listed as not copied. Back to h5, the copy lacks the references pynwb needs, so
pynwb refuses it, and the summary of the first step named each loss. Converted to h5 directly,
the references and soft links are made again and pynwb reads the copy as the original."""

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
from hdmf.build.errors import ConstructError  # noqa: E402  (pynwb's own dependency)

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


def test_nwb_to_zarr_keeps_values_and_names_the_references(tmp_path: Path) -> None:
    src, copy = tmp_path / "a.nwb", tmp_path / "a.zarr"
    _write_nwb(src)

    # without the opt-in the reference column refuses the copy, naming the key
    with pytest.raises(ptd.errors.PtdError, match=f"{ELECTRODES}/group"):
        ptd.convert(src, copy, to="zarr")
    assert not copy.exists()

    result = ptd.convert(src, copy, to="zarr", skip_unsupported=True)
    lost = {(i["key"], i.get("attr")) for i in result.not_copied}
    assert lost == {
        (f"{ELECTRODES}/group", None),
        ("/", ".specloc"),
        ("units/spike_times_index", "target"),
        (DEVICE_LINK, None),
    }
    reasons = {i["key"]: i["reason"] for i in result.not_copied if "attr" not in i}
    assert reasons[DEVICE_LINK] == "a soft link to /general/devices/probe, which zarr cannot hold"
    assert all("references" in r for k, r in reasons.items() if k != DEVICE_LINK)
    assert "shank0/device" not in zarr.open_group(str(copy), mode="r")[ELECTRODES[:-11]]

    checked = ptd.verify_conversion(result)
    assert checked.verified(), checked.differences
    assert {(i["key"], i.get("attr")) for i in checked.left_out} == lost

    root = zarr.open_group(str(copy), mode="r")
    with h5py.File(src, "r") as f:
        for key in (
            "acquisition/ts/data",
            f"{ELECTRODES}/x",
            f"{ELECTRODES}/location",
            "units/spike_times",
            "units/spike_times_index",
            "general/subject/species",
            "general/experimenter",
        ):
            want, got = f[key][()], root[key][()]
            if isinstance(want, bytes) or (isinstance(want, np.ndarray) and want.dtype.kind == "O"):
                want = np.char.decode(np.asarray(want, dtype=bytes), "utf-8")
            assert np.asarray(got).tolist() == np.asarray(want).tolist(), key
        # the attributes that are not references are kept: units' index still names its kind
        assert root["units/spike_times_index"].attrs["neurodata_type"] == "VectorIndex"
        assert root.attrs["nwb_version"] == f.attrs["nwb_version"]


def test_nwb_back_to_h5_is_refused_by_pynwb_and_the_losses_were_named(tmp_path: Path) -> None:
    src, copy, back = tmp_path / "a.nwb", tmp_path / "a.zarr", tmp_path / "back.nwb"
    _write_nwb(src)
    first = ptd.convert(src, copy, to="zarr", skip_unsupported=True)
    second = ptd.convert(copy, back, to="h5")
    assert second.not_copied == []
    # h5 -> zarr -> h5 is the same as the zarr copy: nothing more was lost on the way back
    assert ptd.diff(copy, back).same
    assert f"{ELECTRODES}/group" in {i["key"] for i in first.not_copied}
    with h5py.File(back, "r") as f:
        assert "group" not in f[ELECTRODES]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pynwb.NWBHDF5IO(str(back), "r") as io, pytest.raises(ConstructError, match="shank0"):
            io.read()


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
