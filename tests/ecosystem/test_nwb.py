"""An NWB file written by pynwb (subject, an electrode table whose ``group`` column holds HDF5
object references, a TimeSeries, units with a ragged ``spike_times`` column) converted to zarr
by ptd: the values are kept, and what zarr cannot hold (the reference column, reference
attributes) is named in the convert summary, never dropped silently; ``--verify`` passes with
exactly those listed as not copied. Back to h5, the copy lacks the references pynwb needs, so
pynwb refuses it, and the summary of the first step named each loss."""

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
    }
    assert all("references" in i["reason"] for i in result.not_copied)

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
