"""``Backend.dimension_names`` answers what ``array_properties(...).dimension_names`` says,
without the rest of the inventory (the layout check of ``validate`` asks it of every array):
on files written by plain h5py (dimension labels, attached dimension scales) and plain
zarr-python (``dimension_names``), directly and through a backend narrowed to a group."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from ptd.storage.api import Backend
from ptd.storage.registry import get_backend
from ptd.storage.subtree import narrow

#: array -> the names its format states (None: no dimension named)
EXPECTED: dict[str, tuple[str | None, ...] | None] = {
    "g/time": ("time",),
    "g/obs": ("time", "feature"),
    "g/plain": None,
}


def _write_h5(path: Path) -> None:
    h5py = pytest.importorskip("h5py", reason="h5py writes the HDF5 fixture")
    with h5py.File(path, "w") as f:
        g = f.create_group("g")
        t = g.create_dataset("time", data=np.arange(4, dtype="f8"))
        t.make_scale("time")
        obs = g.create_dataset("obs", data=np.zeros((4, 3), dtype="f4"))
        obs.dims[0].attach_scale(t)
        obs.dims[1].label = "feature"  # a label wins over the attached scale
        obs.dims[0].label = "time"
        g.create_dataset("plain", data=np.zeros((4, 2), dtype="i4"))


def _write_zarr(path: Path) -> None:
    zarr = pytest.importorskip("zarr", reason="zarr-python writes the zarr fixture")
    root = zarr.open_group(str(path), mode="w")
    g = root.create_group("g")
    g.create_array("time", shape=(4,), dtype="f8", dimension_names=["time"])[...] = np.arange(4)
    g.create_array("obs", shape=(4, 3), dtype="f4", dimension_names=["time", "feature"])
    g.create_array("plain", shape=(4, 2), dtype="i4")


#: each backend's fixture writer and suffix
WRITERS = {"h5": (_write_h5, ".h5"), "zarr": (_write_zarr, ".zarr")}


def _open(tmp_path: Path, backend: str) -> Backend:
    write, suffix = WRITERS[backend]
    path = tmp_path / f"dims{suffix}"
    write(path)
    return get_backend(backend).open(path, "r")


def test_dimension_names_match_the_property_inventory(tmp_path: Path, backend: str) -> None:
    be = _open(tmp_path, backend)
    try:
        for key, expected in EXPECTED.items():
            path = tuple(key.split("/"))
            meta = be.array_meta(path)
            assert be.dimension_names(path, meta) == expected, key
            assert be.dimension_names(path) == expected, key  # the metadata read for it
            assert be.array_properties(path, meta).dimension_names == expected, key
    finally:
        be.close()


def test_dimension_names_through_a_narrowed_backend(tmp_path: Path, backend: str) -> None:
    be = narrow(_open(tmp_path, backend), ("g",), "dims/g")
    try:
        for key, expected in EXPECTED.items():
            path = (key.split("/")[1],)
            assert be.dimension_names(path, be.array_meta(path)) == expected, key
            assert be.array_properties(path).dimension_names == expected, key
    finally:
        be.close()
