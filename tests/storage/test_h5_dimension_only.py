"""netCDF-4's scale of a dimension that is no variable, made with plain h5py the way the
netCDF library writes it: a property of the file (the dimension and its length), never a
key: not listed, not in the batch size, not copied by ``convert``, not compared by ``diff``,
and not a place ``PersistentTensorDict`` writes over."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

import ptd
from ptd.errors import PtdKeyError

MARKER = b"This is a netCDF dimension but not a netCDF variable."


def _netcdf_like(path: Path, length: int = 3) -> Path:
    """``v`` [4, x] and ``t`` [4] (a coordinate ``t``), ``x`` a dimension-only scale."""
    with h5py.File(path, "w") as f:
        t = f.create_dataset("t", data=np.arange(4))
        t.make_scale("t")
        x = f.create_dataset("x", shape=(length,), dtype=">f4")  # no data: fill only
        x.make_scale(MARKER + b"%10d" % length)
        x.attrs["_Netcdf4Dimid"] = np.int32(1)
        v = f.create_dataset("v", data=np.arange(4.0 * length).reshape(4, length))
        v.dims[0].attach_scale(t)
        v.dims[1].attach_scale(x)
    return path


def test_not_a_key_nor_in_the_batch_size(tmp_path: Path) -> None:
    path = _netcdf_like(tmp_path / "a.h5")
    td = ptd.PersistentTensorDict.from_h5(str(path), mode="r")
    try:
        assert sorted(td.keys()) == ["t", "v"]
        assert "x" not in td
        assert list(td.batch_size) == [4]  # x [3] would leave no shared leading dim
        with pytest.raises(KeyError, match="'x'"):
            td["x"]
    finally:
        td.close()
    info = ptd.info(str(path))
    assert sorted(e.key for e in info.entries) == ["t", "v"]
    assert not info.skipped


def test_convert_does_not_copy_it_and_diff_is_same(tmp_path: Path) -> None:
    a = _netcdf_like(tmp_path / "a.h5")
    b = _netcdf_like(tmp_path / "b.h5")
    assert ptd.diff(str(a), str(b)).same
    dst = tmp_path / "a.zarr"
    ptd.convert(str(a), str(dst))
    group = zarr.open_group(dst, mode="r")
    assert sorted(group.array_keys()) == ["t", "v"]  # no array "x"
    assert list(group["v"].metadata.dimension_names) == ["t", "x"]
    report = ptd.diff(str(a), str(dst))
    assert report.same, [(d.key, d.kind, d.a, d.b) for d in report.differences]


def test_diff_sees_another_length_as_the_arrays_shape(tmp_path: Path) -> None:
    """The dimension itself is no key: two files that differ only by it differ by their
    arrays' shapes, named by the array."""
    report = ptd.diff(str(_netcdf_like(tmp_path / "a.h5")), str(_netcdf_like(tmp_path / "b.h5", 2)))
    assert {d.key for d in report.differences} == {"v"}


def test_writing_over_it_is_refused_naming_the_dimension(tmp_path: Path) -> None:
    import torch

    path = _netcdf_like(tmp_path / "a.h5")
    td = ptd.PersistentTensorDict.from_h5(str(path), mode="r+")
    try:
        with pytest.raises(PtdKeyError, match=r"netCDF dimension 'x' \(of length 3\)"):
            td["x"] = torch.zeros(4)
        with pytest.raises(PtdKeyError, match="netCDF dimension 'x'"):
            td["x", "inner"] = torch.zeros(4)
        with pytest.raises(KeyError, match="'x'"):
            del td["x"]
        td["x2"] = torch.zeros(4)  # the advice: another key
    finally:
        td.close()
    with h5py.File(path, "r") as f:  # the dimension is intact, still attached
        assert f["x"].attrs["NAME"].startswith(MARKER)
        assert f["v"].dims[1][0].name == "/x"
        assert f["x2"].shape == (4,)
