"""The round-trip matrix: each property a source array can have, through every route
(h5 -> zarr, zarr -> h5, h5 -> h5, zarr -> zarr, -> memmap). Each one is either kept (read
back with plain h5py / zarr-python, not through ptd) or named: in ``not_copied`` (with its
``property``) or in the notes. Sources are made with plain h5py and zarr-python."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
from zarr.codecs import numcodecs as zcodecs

import ptd
from ptd.containers.memmap import export_memmap

ROWS = 200


def _convert(src: Path, dst: Path, **kw: Any) -> ptd.ConvertResult:
    result = ptd.convert(src, dst, **kw)
    # whatever a route does, the values come back (decoded), exactly
    for key, want in _values(src).items():
        got = _values(dst)[key]
        np.testing.assert_array_equal(got, want, err_msg=f"{key} through {src} -> {dst}")
    return result


def _values(path: Path) -> dict[str, np.ndarray]:
    if path.suffix == ".h5":
        out: dict[str, np.ndarray] = {}
        with h5py.File(path, "r") as f:
            f.visititems(
                lambda n, o: out.__setitem__(n, o[()]) if isinstance(o, h5py.Dataset) else None
            )
        return out
    g = zarr.open_group(str(path), mode="r")
    return {name: a[...] for name, a in g.arrays()}


def _lost(result: Any, key: str) -> dict[str, str]:
    return {
        i["property"]: i["reason"]
        for i in result.not_copied
        if i.get("property") and i["key"] == key
    }


# ---------------------------------------------------------------------------------- sources
def _h5_source(path: Path) -> Path:
    with h5py.File(path, "w", userblock_size=512) as f:
        x = np.linspace(0, 1, ROWS * 4, dtype="f4").reshape(ROWS, 4)
        f.create_dataset("nanfill", data=x, chunks=(50, 4), fillvalue=np.nan)
        f.create_dataset("int8fill", data=np.arange(ROWS, dtype="i1"), chunks=(50,), fillvalue=-1)
        f.create_dataset(
            "filters",
            data=x,
            chunks=(50, 4),
            shuffle=True,
            fletcher32=True,
            compression="gzip",
            compression_opts=7,
        )
        f.create_dataset("growing", data=x, chunks=(50, 4), maxshape=(None, 4))
        labelled = f.create_dataset("labelled", data=x, chunks=(50, 4))
        labelled.dims[0].label = "time"
        labelled.dims[1].label = "channel"
        labelled.attrs["units"] = "volts"
    with open(path, "r+b") as fh:
        fh.write(b"MATLAB 7.3 MAT-file header".ljust(128, b" "))
    return path


def _zarr_source(path: Path) -> Path:
    g = zarr.open_group(str(path), mode="w", zarr_format=3)
    x = np.linspace(0, 1, ROWS * 4, dtype="f8").reshape(ROWS, 4)
    g.create_array("nanfill", data=x.astype("f4"), chunks=(50, 4), fill_value=np.nan)
    g.create_array("int8fill", data=np.arange(ROWS, dtype="i1"), chunks=(50,), fill_value=-1)
    g.create_array(
        "dims", data=x, chunks=(50, 4), dimension_names=["time", "channel"]
    ).attrs.update({"units": "volts"})
    g.create_array("zlib", data=x, chunks=(50, 4), compressors=[zcodecs.Zlib(level=5)])
    g.create_array("zstd", data=x, chunks=(50, 4), compressors=[zarr.codecs.ZstdCodec(level=3)])
    g.create_array(
        "delta", data=np.arange(ROWS, dtype="i8"), chunks=(50,), filters=[zcodecs.Delta(dtype="i8")]
    )
    g.create_array(
        "scaled",
        data=np.round(x, 2),
        chunks=(50, 4),
        filters=[zcodecs.FixedScaleOffset(offset=0, scale=100, dtype="f8", astype="i4")],
    )
    g.create_array(
        "bitround", data=x.astype("f4"), chunks=(50, 4), filters=[zcodecs.BitRound(keepbits=23)]
    )
    g.create_array(
        "astype",
        data=x.astype("f4").astype("f8"),
        chunks=(50, 4),
        filters=[zcodecs.AsType(encode_dtype="f4", decode_dtype="f8")],
    )
    g.create_array(
        "packbits", data=np.arange(ROWS) % 3 == 0, chunks=(50,), filters=[zcodecs.PackBits()]
    )
    return path


@pytest.fixture
def h5_src(tmp_path: Path) -> Path:
    return _h5_source(tmp_path / "src.h5")


@pytest.fixture
def zarr_src(tmp_path: Path) -> Path:
    return _zarr_source(tmp_path / "src.zarr")


# ------------------------------------------------------------------------------ h5 -> h5
def test_h5_to_h5_keeps_everything(h5_src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst.h5"
    result = _convert(h5_src, dst)
    assert [i for i in result.not_copied if i.get("property")] == []
    with h5py.File(dst, "r") as f:
        assert math.isnan(f["nanfill"].fillvalue)
        assert f["int8fill"].fillvalue == -1
        d = f["filters"]
        assert (d.shuffle, d.fletcher32, d.compression, d.compression_opts) == (
            True,
            True,
            "gzip",
            7,
        )
        assert f["growing"].maxshape == (None, 4)
        assert [dim.label for dim in f["labelled"].dims] == ["time", "channel"]
        # plain labels stay plain labels: no scale attached, no netCDF dimension dataset added
        assert [len(dim) for dim in f["labelled"].dims] == [0, 0]
        assert "time" not in f
        assert "channel" not in f
        assert f["labelled"].attrs["units"] == "volts"
        assert f.userblock_size == 512
    with open(dst, "rb") as fh:
        assert fh.read(26) == b"MATLAB 7.3 MAT-file header"


def _scale_names(ds: h5py.Dataset) -> list[str]:
    """The names of the dimension scales attached to ``ds``, one per dimension (a scale's
    dataset is named after its dimension, as netCDF-4 names them)."""
    return [dim[0].name.rsplit("/", 1)[-1] if len(dim) else "" for dim in ds.dims]


# ------------------------------------------------------------------------------ h5 -> zarr
def test_h5_to_zarr_translates_or_names(h5_src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst.zarr"
    result = _convert(h5_src, dst)
    g = zarr.open_group(str(dst), mode="r")
    assert math.isnan(g["nanfill"].fill_value)
    assert g["int8fill"].fill_value == -1
    assert g["labelled"].metadata.dimension_names == ("time", "channel")
    assert g["labelled"].attrs["units"] == "volts"
    codecs = [type(c).__name__ for c in g["filters"].compressors]
    assert "GzipCodec" in codecs, codecs
    assert any("Shuffle" in c for c in codecs), codecs
    assert any("crc32c" in n.lower() or "checksum" in n.lower() for n in result.notes)
    assert _lost(result, "/") == {"userblock": _lost(result, "/")["userblock"]}
    # the maxshape is recorded, and restored on the way back
    back = tmp_path / "back.h5"
    _convert(dst, back)
    with h5py.File(back, "r") as f:
        assert f["growing"].maxshape == (None, 4)
        # zarr's dimension_names come back to HDF5 in netCDF-4's spelling (dimension scales,
        # xarray's h5netcdf engine reads them), not as the labels the h5 source had
        assert _scale_names(f["labelled"]) == ["time", "channel"]


# ---------------------------------------------------------------------------- zarr -> zarr
def test_zarr_to_zarr_keeps_every_codec(zarr_src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst.zarr"
    result = _convert(zarr_src, dst)
    assert [i for i in result.not_copied if i.get("property")] == []
    a, b = zarr.open_group(str(zarr_src), mode="r"), zarr.open_group(str(dst), mode="r")
    for name, arr in a.arrays():
        got = b[name]
        assert got.metadata.codecs == arr.metadata.codecs, name
        same_fill = (
            math.isnan(got.fill_value) and math.isnan(arr.fill_value)
            if arr.dtype.kind == "f" and math.isnan(arr.fill_value)
            else got.fill_value == arr.fill_value
        )
        assert same_fill, name
        assert got.metadata.dimension_names == arr.metadata.dimension_names, name
    assert b["dims"].attrs["units"] == "volts"


# ------------------------------------------------------------------------------ zarr -> h5
def test_zarr_to_h5_translates_or_names(zarr_src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "dst.h5"
    result = _convert(zarr_src, dst)
    with h5py.File(dst, "r") as f:
        assert math.isnan(f["nanfill"].fillvalue)
        assert f["int8fill"].fillvalue == -1
        assert _scale_names(f["dims"]) == ["time", "channel"]  # netCDF-4's spelling
        assert [dim.label for dim in f["dims"].dims] == ["", ""]  # (labels would show as
        assert f["dims"].attrs["units"] == "volts"  # an attribute in netCDF readers)
        assert f["zlib"].compression == "gzip"  # the same zlib stream, as HDF5 deflate
        assert f["zstd"].compression == "gzip"
        assert f["zstd"].shuffle
    assert any("zstd" in n and "hdf5plugin" in n for n in result.notes), result.notes
    # value filters HDF5 lacks: the decoded values are written, and each one is named
    for key in ("delta", "scaled", "bitround", "astype", "packbits"):
        assert "filter" in _lost(result, key), (key, result.not_copied)
    assert "quantized" in _lost(result, "scaled")["filter"]


def test_zarr_to_h5_reads_without_hdf5plugin(zarr_src: Path, tmp_path: Path) -> None:
    """Plain h5py, with no filter plugin loaded, reads every dataset of the copy."""
    dst = tmp_path / "dst.h5"
    ptd.convert(zarr_src, dst)
    code = (
        "import sys, h5py\n"
        "assert 'hdf5plugin' not in sys.modules\n"
        "with h5py.File(sys.argv[1], 'r') as f:\n"
        "    names = []\n"
        "    f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)\n"
        "    for n in names:\n"
        "        f[n][()]\n"
        "print(len(names))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HDF5_PLUGIN_PATH": "/nonexistent"}
    done = subprocess.run(
        [sys.executable, "-c", code, str(dst)], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == 12  # 10 arrays, and netCDF's scales of `time` and `channel`


# ---------------------------------------------------------------------------------- memmap
@pytest.mark.parametrize("which", ["h5", "zarr"])
def test_to_memmap_keeps_attributes_and_names_the_rest(
    which: str, h5_src: Path, zarr_src: Path, tmp_path: Path
) -> None:
    src = h5_src if which == "h5" else zarr_src
    out = tmp_path / "out.mm"
    summary = export_memmap(src, out)
    meta = json.loads((out / "meta.json").read_text())
    key = "labelled" if which == "h5" else "dims"
    assert meta[key]["_ptd_attrs"]["units"] == "volts"
    assert "dimension_names" in _lost(summary, key)
    if which == "h5":
        assert "maxshape" in _lost(summary, "growing")
    td = ptd.TensorDict.load_memmap(out)
    for name, want in _values(src).items():
        np.testing.assert_array_equal(td[name].numpy(), want, err_msg=name)
