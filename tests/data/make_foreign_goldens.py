#!/usr/bin/env python
"""Writes ``tests/data/foreign/``: small stores written by other tools, for ``tests/test_foreign.py``.

Each store is written by the tool itself (nothing here imitates a format by hand, except the
MATLAB v7.3 layout, written with h5py as MATLAB lays it out, since MATLAB cannot run here):

    pandas_table.h5, pandas_fixed.h5   pandas ``to_hdf`` (PyTables), table and fixed formats
    pytables.h5                        PyTables: blosc/zstd/bzip2 filters, EArray, VLArray,
                                       soft/hard/external links
    xarray_h5netcdf.nc                 xarray ``to_netcdf(engine="h5netcdf")`` (dimension scales,
                                       their reference attributes)
    xarray_netcdf4.nc                  xarray ``to_netcdf(engine="netcdf4")``
    xarray_v2.zarr, xarray_v3.zarr     xarray ``to_zarr`` in Zarr v2 (consolidated) and v3
    zarr_v2.zarr                       zarr-python ``zarr_format=2``: nested groups, string and
                                       fixed-width text arrays, blosc/zstd/gzip, "/" chunk keys
    zarr_v3_sharded.zarr               zarr-python v3: sharding, zstd, a string array
    tensorstore_v2.zarr, _v3.zarr      tensorstore's ``zarr`` and ``zarr3`` drivers
    matlab_v73.mat                     MATLAB v7.3 layout: 512-byte userblock, MATLAB_class
                                       attributes, a struct, a char array, a cell (references)
    hdf5plugin.h5                      h5py + hdf5plugin: blosc, blosc2, bzip2, lz4, zstd
    links.h5 (+ links_target.h5)       h5py: soft, extra hard, dangling, external, cyclic links
    odd_names.h5                       h5py: names zarr cannot hold (backslash, zarr.json,
                                       __reserved), unicode and spaces; JSON-looking attributes
    unsupported.h5                     h5py: object and region references, compound, vlen,
                                       enum, array types
    robomimic_like.h5                  h5py in robomimic's layout (data/demo_N/obs..., env_args
                                       as a JSON string attribute, mask of demo names)
    h5py_kinds.h5                      h5py: scalars, null-dataspace and zero-row datasets, a
                                       fill-value-only one, chunked + unlimited, big-endian,
                                       enum, bool, float16, complex, opaque, fixed/vlen strings
                                       and bytes, non-ASCII names
    h5py_attrs.h5                      h5py: attributes of every kind (compound, vlen,
                                       reference, enum, empty, NaN...), 200 on one group
    h5py_links.h5 (+ h5py_vds_target.h5)  h5py: soft/external links (dangling ones too), virtual
                                       datasets, object and region reference datasets
    netcdf_like.h5                     h5py's dimension scales as netCDF-4 lays them out
    zarr_v2_codecs.zarr                zarr-python v2: blosc (shuffle, bitshuffle), zstd, gzip,
                                       lz4, none; NaN fill, F order, big-endian, bytes,
                                       structured; NaN and nested attributes
    zarr_v3_kinds.zarr                 zarr-python v3: sharded zstd, vlen strings, NaN fill,
                                       unwritten chunks, a scalar, dimension names, big-endian,
                                       crc32c, transpose, bool, structured, non-ASCII names
    zarr_v2_root_array.zarr, zarr_v3_root_array.zarr   an array at the root of the store

The generating packages are test-only tools, NOT in ptd's ``test`` extra (tensorstore and
PyTables are large wheels; the committed files are what the tests read). To regenerate::

    python -m venv /tmp/gold && /tmp/gold/bin/pip install h5py hdf5plugin "zarr>=3.1.1" \\
        numpy pandas tables xarray h5netcdf netCDF4 tensorstore
    /tmp/gold/bin/python tests/data/make_foreign_goldens.py tests/data/foreign

Only the stores h5py and zarr write (those tools are ptd's own dependencies)::

    python tests/data/make_foreign_goldens.py tests/data/foreign --only-h5py-zarr

Versions used for the committed files: see ``foreign/VERSIONS.json`` (written by this script).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")


def pandas_stores(out: str) -> None:
    import pandas as pd

    df = pd.DataFrame(
        {
            "x": np.arange(20, dtype="f8"),
            "n": np.arange(20, dtype="i4"),
            "s": [f"row{i}" for i in range(20)],
        }
    )
    df.to_hdf(
        os.path.join(out, "pandas_table.h5"),
        key="df",
        format="table",
        complib="blosc:lz4",
        complevel=5,
    )
    df[["x", "n"]].to_hdf(os.path.join(out, "pandas_fixed.h5"), key="df", format="fixed")


def pytables_store(out: str) -> None:
    import tables

    path = os.path.join(out, "pytables.h5")
    with tables.open_file(path, "w", title="pytables golden") as f:
        g = f.create_group("/", "arrays")
        data = np.arange(600, dtype="f4").reshape(100, 6)
        for lib in ("blosc:zstd", "blosc:lz4", "zlib", "bzip2"):
            name = lib.replace(":", "_")
            f.create_carray(
                g,
                name,
                obj=data,
                chunkshape=(25, 6),
                filters=tables.Filters(complevel=5, complib=lib),
            )
        e = f.create_earray(g, "growing", atom=tables.Int64Atom(), shape=(0, 3), chunkshape=(8, 3))
        e.append(np.arange(30).reshape(10, 3))
        v = f.create_vlarray("/", "ragged", atom=tables.Int32Atom(), chunkshape=4)
        v.append([1, 2, 3])
        v.append([4])
        f.create_soft_link("/", "soft_to_zstd", "/arrays/blosc_zstd")
        f.create_hard_link("/", "hard_to_zlib", "/arrays/zlib")
        f.create_external_link("/", "external", "links_target.h5:/secret")
        g._v_attrs.note = "pytables attribute"


def xarray_stores(out: str) -> None:
    import xarray as xr

    ds = xr.Dataset(
        {
            "temperature": (("time", "x"), np.arange(40, dtype="f4").reshape(10, 4)),
            "flag": (("time",), np.arange(10) % 2 == 0),
        },
        coords={"time": np.arange(10, dtype="i8"), "x": np.array([0.5, 1.5, 2.5, 3.5])},
        attrs={"title": "xarray golden", "config": '{"nested": {"k": [1, 2]}}'},
    )
    enc = {"temperature": {"zlib": True, "complevel": 4}}
    ds.to_netcdf(os.path.join(out, "xarray_h5netcdf.nc"), engine="h5netcdf", encoding=enc)
    ds.to_netcdf(os.path.join(out, "xarray_netcdf4.nc"), engine="netcdf4", encoding=enc)
    ds.to_zarr(os.path.join(out, "xarray_v2.zarr"), zarr_format=2, consolidated=True, mode="w")
    ds.to_zarr(os.path.join(out, "xarray_v3.zarr"), zarr_format=3, consolidated=False, mode="w")


def zarr_stores(out: str) -> None:
    import zarr
    from numcodecs import GZip, Zstd

    g = zarr.open_group(os.path.join(out, "zarr_v2.zarr"), mode="w", zarr_format=2)
    g.attrs["env_args"] = '{"env_name": "Lift", "type": 1}'
    g.attrs["count"] = 3
    obs = g.create_group("obs")
    a = obs.create_array("pos", shape=(12, 3), dtype="f8", chunks=(5, 3))
    a[:] = np.arange(36, dtype="f8").reshape(12, 3)
    b = obs.create_array(
        "img", shape=(12, 2, 2), dtype="u1", chunks=(4, 2, 2), compressors=Zstd(level=3)
    )
    b[:] = np.arange(48, dtype="u1").reshape(12, 2, 2)
    c = g.create_array("reward", shape=(12,), dtype="f4", compressors=GZip(level=5))
    c[:] = np.linspace(0, 1, 12, dtype="f4")
    c.attrs["units"] = "points"
    t = g.create_array("names", shape=(12,), dtype="<U6")
    t[:] = np.array([f"n{i}" for i in range(12)])
    s = g.create_array("labels", shape=(12,), dtype=str)
    s[:] = np.array([f"label-{i}" for i in range(12)], dtype=object)
    d = g.create_array(
        "slashed",
        shape=(8, 2),
        dtype="i2",
        chunks=(4, 2),
        chunk_key_encoding={"name": "v2", "separator": "/"},
    )
    d[:] = np.arange(16, dtype="i2").reshape(8, 2)
    g.create_array("empty", shape=(0, 3), dtype="f4")
    zarr.consolidate_metadata(os.path.join(out, "zarr_v2.zarr"))

    g3 = zarr.open_group(os.path.join(out, "zarr_v3_sharded.zarr"), mode="w")
    a = g3.create_array("sharded", shape=(64, 4), dtype="f4", chunks=(8, 4), shards=(32, 4))
    a[:] = np.arange(256, dtype="f4").reshape(64, 4)
    z = g3.create_array(
        "zstd",
        shape=(64,),
        dtype="i8",
        chunks=(16,),
        compressors={"name": "zstd", "configuration": {"level": 5}},
    )
    z[:] = np.arange(64)
    s = g3.create_array("strings", shape=(64,), dtype=str)
    s[:] = np.array([f"s{i}" for i in range(64)], dtype=object)


def tensorstore_stores(out: str) -> None:
    import tensorstore as ts

    data = np.arange(48, dtype="f4").reshape(12, 4)
    for driver, name in (("zarr", "tensorstore_v2.zarr"), ("zarr3", "tensorstore_v3.zarr")):
        root = os.path.join(out, name)
        os.makedirs(root, exist_ok=True)
        if driver == "zarr":
            with open(os.path.join(root, ".zgroup"), "w") as f:
                json.dump({"zarr_format": 2}, f)
        else:
            with open(os.path.join(root, "zarr.json"), "w") as f:
                json.dump({"zarr_format": 3, "node_type": "group", "attributes": {}}, f)
        spec = {
            "driver": driver,
            "kvstore": {"driver": "file", "path": os.path.join(root, "values")},
            "metadata": {"shape": [12, 4]},
            "create": True,
            "delete_existing": True,
        }
        if driver == "zarr":
            spec["metadata"].update(dtype="<f4", chunks=[6, 4])
        else:
            spec["metadata"].update(
                data_type="float32",
                chunk_grid={"name": "regular", "configuration": {"chunk_shape": [6, 4]}},
            )
        arr = ts.open(spec).result()
        arr.write(data).result()


def matlab_store(out: str) -> None:
    import h5py

    path = os.path.join(out, "matlab_v73.mat")
    with h5py.File(path, "w", userblock_size=512) as f:
        x = f.create_dataset("x", data=np.arange(6, dtype="f8").reshape(2, 3))
        x.attrs["MATLAB_class"] = np.bytes_("double")
        txt = f.create_dataset("name", data=np.array([[ord(c)] for c in "hello"], dtype="u2"))
        txt.attrs["MATLAB_class"] = np.bytes_("char")
        txt.attrs["MATLAB_int_decode"] = np.int32(2)
        st = f.create_group("s")
        st.attrs["MATLAB_class"] = np.bytes_("struct")
        a = st.create_dataset("a", data=np.array([[1.0]]))
        a.attrs["MATLAB_class"] = np.bytes_("double")
        refs = f.create_group("#refs#")
        r0 = refs.create_dataset("a", data=np.array([[1.0, 2.0]]))
        r0.attrs["MATLAB_class"] = np.bytes_("double")
        r1 = refs.create_dataset("b", data=np.array([[3.0]]))
        r1.attrs["MATLAB_class"] = np.bytes_("double")
        cell = f.create_dataset("cellvar", shape=(2, 1), dtype=h5py.ref_dtype)
        cell[0, 0] = r0.ref
        cell[1, 0] = r1.ref
        cell.attrs["MATLAB_class"] = np.bytes_("cell")
    with open(path, "r+b") as f:  # MATLAB's header text in the userblock
        f.write(
            b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created by ptd's golden script".ljust(116)
        )


def hdf5plugin_store(out: str) -> None:
    import h5py
    import hdf5plugin

    data = np.arange(2000, dtype="f4").reshape(200, 10)
    with h5py.File(os.path.join(out, "hdf5plugin.h5"), "w") as f:
        f.create_dataset(
            "blosc_lz4", data=data, chunks=(50, 10), **hdf5plugin.Blosc(cname="lz4", clevel=5)
        )
        f.create_dataset(
            "blosc_zstd", data=data, chunks=(50, 10), **hdf5plugin.Blosc(cname="zstd", clevel=3)
        )
        f.create_dataset("blosc2", data=data, chunks=(50, 10), **hdf5plugin.Blosc2())
        f.create_dataset("bzip2", data=data, chunks=(50, 10), **hdf5plugin.BZip2())
        f.create_dataset("lz4", data=data, chunks=(50, 10), **hdf5plugin.LZ4())
        f.create_dataset("zstd", data=data, chunks=(50, 10), **hdf5plugin.Zstd(clevel=4))


def link_stores(out: str) -> None:
    import h5py

    with h5py.File(os.path.join(out, "links_target.h5"), "w") as f:
        f["secret"] = np.arange(4)
    with h5py.File(os.path.join(out, "links.h5"), "w") as f:
        f["obs"] = np.arange(12, dtype="f4").reshape(6, 2)
        f["alias"] = f["obs"]  # a second hard link
        g = f.create_group("g")
        g["same"] = h5py.SoftLink("/obs")
        g["rel"] = h5py.SoftLink("../obs")
        g["dangling"] = h5py.SoftLink("/nowhere")
        g["external"] = h5py.ExternalLink("links_target.h5", "/secret")
        g["loop"] = h5py.SoftLink("/g")
        f["g_again"] = f["g"]


def odd_names_store(out: str) -> None:
    import h5py

    with h5py.File(os.path.join(out, "odd_names.h5"), "w") as f:
        f["back\\slash"] = np.arange(3)
        f["zarr.json"] = np.arange(3)
        f["__reserved"] = np.arange(3)
        f["plain"] = np.arange(3)
        f["with space"] = np.arange(3)
        f["unicodé"] = np.arange(3)
        f.attrs["env_args"] = '{"nested": {"k": [1, 2]}}'
        f.attrs["list_text"] = "[1, 2, 3]"
        f.attrs["raw_bytes"] = np.bytes_(b"abc")
        f.attrs["vector"] = np.arange(3, dtype="i4")
        f["plain"].attrs["meta"] = '{"a": 1}'


def unsupported_store(out: str) -> None:
    import h5py

    with h5py.File(os.path.join(out, "unsupported.h5"), "w") as f:
        f["obs"] = np.arange(8, dtype="f4")
        refs = f.create_dataset("refs", (2,), dtype=h5py.ref_dtype)
        refs[0] = f["obs"].ref
        refs[1] = f["obs"].ref
        rr = f.create_dataset("region_refs", (1,), dtype=h5py.regionref_dtype)
        rr[0] = f["obs"].regionref[2:4]
        f["compound"] = np.array([(1, 2.0), (3, 4.0)], dtype=[("a", "<i4"), ("b", "<f8")])
        vl = f.create_dataset("vlen", (2,), dtype=h5py.vlen_dtype("i4"))
        vl[0] = [1, 2, 3]
        vl[1] = [4]
        f["enum"] = np.arange(3).astype(h5py.enum_dtype({"A": 0, "B": 1, "C": 2}, basetype="i1"))
        f.create_dataset("array_type", (2,), dtype=np.dtype(("<f4", (3,))))


def robomimic_store(out: str) -> None:
    import h5py

    with h5py.File(os.path.join(out, "robomimic_like.h5"), "w") as f:
        data = f.create_group("data")
        data.attrs["env_args"] = json.dumps(
            {"env_name": "Lift", "env_kwargs": {"has_renderer": False}}
        )
        data.attrs["total"] = 15
        for i, n in enumerate((5, 10)):
            d = data.create_group(f"demo_{i}")
            d.attrs["num_samples"] = n
            d["actions"] = np.ones((n, 7), dtype="f8") * i
            d["rewards"] = np.zeros(n, dtype="f8")
            d["dones"] = np.zeros(n, dtype="i8")
            obs = d.create_group("obs")
            obs["eef_pos"] = np.arange(n * 3, dtype="f8").reshape(n, 3)
            obs["agentview_image"] = np.zeros((n, 4, 4, 3), dtype="u1")
            d.create_group("next_obs")["eef_pos"] = np.arange(n * 3, dtype="f8").reshape(n, 3) + 1
        mask = f.create_group("mask")
        mask["train"] = np.array([b"demo_0"], dtype="S6")
        mask["valid"] = np.array([b"demo_1"], dtype="S6")


def h5py_kinds_store(out: str) -> None:
    """What h5py users write that ptd may not expect: scalars, empty (null dataspace) and
    zero-row datasets, a fill-value-only dataset, chunked + unlimited, big-endian, enum,
    bool, float16, complex, opaque, fixed/vlen strings and bytes, non-ASCII names."""
    import h5py

    with h5py.File(os.path.join(out, "h5py_kinds.h5"), "w") as f:
        f["scalar_f8"] = np.float64(2.5)
        f["scalar_i4"] = np.int32(-7)
        f["scalar_str"] = "hello"
        f["empty_null"] = h5py.Empty("f4")
        f.create_dataset("zero_rows", shape=(0, 3), dtype="f4")
        f.create_dataset("fill_only", shape=(6, 2), dtype="i4", fillvalue=7)
        grow = f.create_dataset("unlimited", shape=(5, 4), maxshape=(None, 4), chunks=(2, 4))
        grow[...] = np.arange(20, dtype="f4").reshape(5, 4)
        f.create_dataset("unlimited_empty", shape=(0, 4), maxshape=(None, 4), dtype="i8")
        f["big_f4"] = np.arange(6, dtype=">f4")
        f["big_i8"] = np.arange(6, dtype=">i8").reshape(3, 2)
        f["enum_u1"] = np.arange(4).astype(h5py.enum_dtype({"A": 0, "B": 1, "C": 2, "D": 3}, "u1"))
        f["bool"] = np.array([True, False, True])
        f["half"] = np.linspace(0, 1, 5, dtype="f2")
        f["complex"] = np.array([1 + 2j, 3 - 4j], dtype="c8")
        f["opaque"] = np.void(b"\x01\x02\x03\x04")
        f["fixed_str"] = np.array([b"ab", b"cde", b""], dtype="S3")
        f.create_dataset("vlen_str", data=["x", "yz", "é"], dtype=h5py.string_dtype())
        f.create_dataset("vlen_bytes", data=[b"a", b"bc"], dtype=h5py.string_dtype("ascii"))
        g = f.create_group("données")
        g["température"] = np.arange(4, dtype="f4")
        g["名前"] = np.arange(2, dtype="i2")


def h5py_attrs_store(out: str) -> None:
    """Attributes of every kind h5py writes, on the root, a group and a dataset (compound,
    vlen, reference and enum attributes among them), and a group with many attributes."""
    import h5py

    with h5py.File(os.path.join(out, "h5py_attrs.h5"), "w") as f:
        f["x"] = np.arange(4, dtype="f4")
        a = f.attrs
        a["int"] = 3
        a["float"] = 0.5
        a["nan"] = np.nan
        a["text"] = "root text"
        a["bytes"] = np.bytes_(b"raw")
        a["vector"] = np.arange(3, dtype="i8")
        a["strings"] = np.array(["a", "bé"], dtype=h5py.string_dtype())
        a["bool"] = np.bool_(True)
        a["empty"] = h5py.Empty("f4")
        a["compound"] = np.array([(1, 2.0)], dtype=[("a", "<i4"), ("b", "<f8")])
        a.create(
            "vlen",
            data=np.array([np.array([1, 2]), np.array([3])], dtype=object),
            dtype=h5py.vlen_dtype("i4"),
        )
        a["ref"] = f["x"].ref
        a.create("enum", data=np.int8(1), dtype=h5py.enum_dtype({"OFF": 0, "ON": 1}, "i1"))
        a["complex"] = np.complex64(1 + 1j)
        # types other HDF5 libraries write that h5py cannot read (low-level API)
        scalar = h5py.h5s.create(h5py.h5s.SCALAR)
        h5py.h5a.create(f.id, b"time", h5py.h5t.UNIX_D32LE, scalar)
        opaque = h5py.h5t.create(h5py.h5t.OPAQUE, 4)
        opaque.set_tag(b"vendor blob")
        h5py.h5a.create(f.id, b"opaque", opaque, scalar)
        g = f.create_group("many")
        for i in range(200):
            g.attrs[f"a{i:03d}"] = i
        g["y"] = np.arange(3)
        f["x"].attrs["units"] = "m"
        f["x"].attrs["refs"] = np.array([f["x"].ref, f["many"].ref], dtype=h5py.ref_dtype)


def h5py_links_store(out: str) -> None:
    """External and soft links (dangling ones too), virtual datasets (inside the file and into
    another file), object and region reference datasets."""
    import h5py

    with h5py.File(os.path.join(out, "h5py_vds_target.h5"), "w") as f:
        f["part"] = np.arange(6, dtype="i4")
    with h5py.File(os.path.join(out, "h5py_links.h5"), "w") as f:
        f["a"] = np.arange(6, dtype="i4")
        f["b"] = np.arange(6, 12, dtype="i4")
        f["soft"] = h5py.SoftLink("/a")
        f["soft_dangling"] = h5py.SoftLink("/missing")
        f["ext"] = h5py.ExternalLink("h5py_vds_target.h5", "/part")
        f["ext_missing"] = h5py.ExternalLink("no_such_file.h5", "/x")
        lay = h5py.VirtualLayout(shape=(12,), dtype="i4")
        lay[0:6] = h5py.VirtualSource(".", "a", shape=(6,))
        lay[6:12] = h5py.VirtualSource(".", "b", shape=(6,))
        f.create_virtual_dataset("vds_same_file", lay, fillvalue=-1)
        lay2 = h5py.VirtualLayout(shape=(6,), dtype="i4")
        lay2[:] = h5py.VirtualSource("h5py_vds_target.h5", "part", shape=(6,))
        f.create_virtual_dataset("vds_other_file", lay2, fillvalue=-1)
        refs = f.create_dataset("obj_refs", (2,), dtype=h5py.ref_dtype)
        refs[0], refs[1] = f["a"].ref, f["b"].ref
        rr = f.create_dataset("region_refs", (1,), dtype=h5py.regionref_dtype)
        rr[0] = f["a"].regionref[1:3]


def netcdf_like_store(out: str) -> None:
    """Dimension scales as netCDF-4/h5netcdf lay them out (h5py's dims API): coordinate
    variables, DIMENSION_LIST/REFERENCE_LIST reference attributes, a dimension without a
    coordinate variable, ``_Netcdf4Dimid`` and ``_FillValue`` attributes."""
    import h5py

    with h5py.File(os.path.join(out, "netcdf_like.h5"), "w") as f:
        f.attrs["_NCProperties"] = "version=2,h5netcdf=1.8.3,hdf5=1.14.6,h5py=3.16.0"
        t = f.create_dataset("time", data=np.arange(5, dtype="i8"))
        t.make_scale("time")
        t.attrs["_Netcdf4Dimid"] = np.int32(0)
        t.attrs["units"] = "days since 2000-01-01"
        x = f.create_dataset("x", shape=(3,), dtype="f4")
        x.make_scale("This is a netCDF dimension but not a netCDF variable.         3")
        x.attrs["_Netcdf4Dimid"] = np.int32(1)
        v = f.create_dataset("temp", data=np.arange(15, dtype="f4").reshape(5, 3), fillvalue=np.nan)
        v.attrs["_FillValue"] = np.float32(np.nan)
        v.dims[0].attach_scale(t)
        v.dims[1].attach_scale(x)
        g = f.create_group("sub")
        w = g.create_dataset("wind", data=np.ones(5, dtype="f8"))
        w.dims[0].attach_scale(t)


def zarr_more_stores(out: str) -> None:
    """zarr-python stores: Zarr v2 with each compressor, NaN fill values, F order, bytes and
    structured dtypes; Zarr v3 with sharding, the variable-length string dtype, a structured
    type, crc32c/transpose codecs, big-endian bytes, dimension names, a scalar, unwritten
    chunks; arrays at the root of a store (v2 and v3); non-ASCII names."""
    import zarr
    from numcodecs import LZ4, Blosc, GZip, Zstd

    g = zarr.open_group(os.path.join(out, "zarr_v2_codecs.zarr"), mode="w", zarr_format=2)
    data = np.arange(60, dtype="f4").reshape(20, 3)
    for name, comp in (
        ("blosc_lz4", Blosc(cname="lz4", clevel=5, shuffle=Blosc.SHUFFLE)),
        ("blosc_zstd_bitshuffle", Blosc(cname="zstd", clevel=3, shuffle=Blosc.BITSHUFFLE)),
        ("zstd", Zstd(level=3)),
        ("gzip", GZip(level=4)),
        ("lz4", LZ4()),
        ("none", None),
    ):
        a = g.create_array(name, shape=data.shape, dtype="f4", chunks=(8, 3), compressors=comp)
        a[:] = data
    n = g.create_array("nan_fill", shape=(10,), dtype="f8", chunks=(4,), fill_value=np.nan)
    n[:4] = np.arange(4)
    fo = g.create_array("f_order", shape=(4, 3), dtype="i4", chunks=(2, 3), order="F")
    fo[:] = np.arange(12, dtype="i4").reshape(4, 3)
    be = g.create_array("big_endian", shape=(6,), dtype=">f8", chunks=(6,))
    be[:] = np.arange(6)
    fb = g.create_array("fixed_bytes", shape=(3,), dtype="S4")
    fb[:] = np.array([b"ab", b"cdef", b""], dtype="S4")
    st = g.create_array("structured", shape=(3,), dtype=[("a", "<i4"), ("b", "<f8")])
    st[:] = np.array([(1, 1.5), (2, 2.5), (3, 3.5)], dtype=[("a", "<i4"), ("b", "<f8")])
    g.attrs["nan_attr"] = float("nan")
    g.attrs["nested"] = {"k": [1, 2, {"deep": None}]}
    zarr.consolidate_metadata(os.path.join(out, "zarr_v2_codecs.zarr"))

    g3 = zarr.open_group(os.path.join(out, "zarr_v3_kinds.zarr"), mode="w")
    a = g3.create_array(
        "sharded_zstd",
        shape=(40, 3),
        dtype="i4",
        chunks=(5, 3),
        shards=(20, 3),
        compressors={"name": "zstd", "configuration": {"level": 3}},
    )
    a[:] = np.arange(120, dtype="i4").reshape(40, 3)
    s = g3.create_array("vlen_str", shape=(5,), dtype=str)
    s[:] = np.array(["a", "bb", "ccc", "é", ""], dtype=object)
    n = g3.create_array("nan_fill", shape=(10,), dtype="f4", chunks=(4,), fill_value=np.nan)
    n[:4] = np.arange(4)
    g3.create_array("never_written", shape=(6, 2), dtype="i2", chunks=(3, 2), fill_value=5)
    sc = g3.create_array("scalar", shape=(), dtype="f8")
    sc[...] = 3.25
    g3.create_array("zero_rows", shape=(0, 4), dtype="f4")
    named = g3.create_array(
        "named_dims", shape=(4, 2), dtype="u2", chunks=(2, 2), dimension_names=["time", "x"]
    )
    named[:] = np.arange(8, dtype="u2").reshape(4, 2)
    big = g3.create_array(
        "big_endian",
        shape=(5,),
        dtype="f8",
        serializer={"name": "bytes", "configuration": {"endian": "big"}},
    )
    big[:] = np.arange(5)
    crc = g3.create_array(
        "crc32c",
        shape=(8,),
        dtype="i8",
        chunks=(4,),
        compressors=[{"name": "crc32c"}],
    )
    crc[:] = np.arange(8)
    tr = g3.create_array(
        "transposed",
        shape=(3, 4),
        dtype="f4",
        filters=[{"name": "transpose", "configuration": {"order": [1, 0]}}],
    )
    tr[:] = np.arange(12, dtype="f4").reshape(3, 4)
    bo = g3.create_array("bool", shape=(4,), dtype=bool)
    bo[:] = np.array([True, False, False, True])
    st3 = g3.create_array("structured", shape=(2,), dtype=[("a", "<i4"), ("b", "<f4")])
    st3[:] = np.array([(1, 0.5), (2, 1.5)], dtype=[("a", "<i4"), ("b", "<f4")])
    u = g3.create_group("données")
    t = u.create_array("température", shape=(3,), dtype="f4")
    t[:] = np.arange(3, dtype="f4")
    g3.attrs["title"] = "zarr v3 golden"

    for fmt, name in ((2, "zarr_v2_root_array.zarr"), (3, "zarr_v3_root_array.zarr")):
        r = zarr.create_array(
            os.path.join(out, name),
            shape=(6, 2),
            dtype="i4",
            chunks=(3, 2),
            zarr_format=fmt,
            overwrite=True,
        )
        r[:] = np.arange(12, dtype="i4").reshape(6, 2)
        r.attrs["note"] = "an array at the root"


def versions() -> dict[str, str]:
    out = {}
    for mod in (
        "h5py",
        "hdf5plugin",
        "zarr",
        "numpy",
        "pandas",
        "tables",
        "xarray",
        "h5netcdf",
        "netCDF4",
    ):
        try:
            m = __import__(mod)
            out[mod] = str(getattr(m, "__version__", getattr(m, "version", "?")))
        except ImportError:
            out[mod] = "missing"
    try:
        from importlib.metadata import version

        out["tensorstore"] = version("tensorstore")
    except Exception:  # noqa: BLE001
        out["tensorstore"] = "missing"
    return out


#: the stores only h5py and zarr write (``--only-h5py-zarr`` regenerates just these)
H5PY_ZARR = (
    h5py_kinds_store,
    h5py_attrs_store,
    h5py_links_store,
    netcdf_like_store,
    zarr_more_stores,
)


def main(out: str, only_h5py_zarr: bool = False) -> None:
    if only_h5py_zarr:  # the other tools' stores are kept as they are
        os.makedirs(out, exist_ok=True)
        for fn in H5PY_ZARR:
            fn(out)
            print(f"{fn.__name__}: done")
        return
    if os.path.exists(out):
        shutil.rmtree(out)
    os.makedirs(out)
    # hdf5plugin first: once PyTables is imported, its own blosc filter takes the blosc id
    for fn in (
        *H5PY_ZARR,
        hdf5plugin_store,
        pandas_stores,
        pytables_store,
        xarray_stores,
        zarr_stores,
        tensorstore_stores,
        matlab_store,
        link_stores,
        odd_names_store,
        unsupported_store,
        robomimic_store,
    ):
        fn(out)
        print(f"{fn.__name__}: done")
    with open(os.path.join(out, "VERSIONS.json"), "w") as f:
        json.dump(versions(), f, indent=1, sort_keys=True)
        f.write("\n")


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--only-h5py-zarr"]
    main(
        args[0] if args else os.path.join(os.path.dirname(__file__), "foreign"),
        only_h5py_zarr="--only-h5py-zarr" in sys.argv[1:],
    )
