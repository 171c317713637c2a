"""Stores other tools wrote (``tests/data/foreign``, made by ``tests/data/make_foreign_goldens.py``):
every command and the library read on each, data equal to what h5py/zarr read directly, nothing
lost silently, refusals that name the key and the reason."""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr

import ptd
from ptd import PersistentTensorDict
from ptd.errors import (
    PtdError,
    ReadOnlyError,
    SkippedKeyWarning,
    UnsupportedOperationError,
)

from .conftest import assert_one_line_error

FOREIGN = Path(__file__).parent.parent / "data" / "foreign"
#: stores whose root is an array: every command refuses them (tests/cli/test_foreign_kinds.py)
ROOT_ARRAYS = ("zarr_v2_root_array.zarr", "zarr_v3_root_array.zarr")
STORES = sorted(
    p.name for p in FOREIGN.iterdir() if p.name != "VERSIONS.json" and p.name not in ROOT_ARRAYS
)


@pytest.fixture
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    """A private copy of a golden store (the links' target file travels with it)."""
    name = request.param
    src = FOREIGN / name
    dst = tmp_path / name
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy(src, dst)
    extra = {"links.h5": "links_target.h5", "h5py_links.h5": "h5py_vds_target.h5"}.get(name)
    if extra is not None:  # the file its links point into travels with it
        shutil.copy(FOREIGN / extra, tmp_path / extra)
    return dst


def _direct(path: Path, key: str) -> np.ndarray:
    """What h5py / zarr read for ``key`` themselves (zarr under the escaped names, see
    docs/format.md)."""
    if path.is_dir():
        from ptd.format.keynames import escape_name
        from ptd.storage.zarr.backend import ZarrBackend

        stored = "/".join(
            escape_name(n) if ZarrBackend.escaped_name(n) else n for n in key.split("/")
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return np.asarray(zarr.open_group(str(path), mode="r")[stored][...])
    with h5py.File(path, "r") as f:
        return np.asarray(f[key][()])


def _tensor_keys(path: Path) -> list[str]:
    return [e.key for e in ptd.info(path).entries if e.kind == "tensor"]


def _as_numpy(value: Any) -> np.ndarray:
    t = value.detach().cpu()
    return t.view(np.dtype(f"u{t.element_size()}")) if "bfloat" in str(t.dtype) else t.numpy()


# ------------------------------------------------------------------------------ every store
@pytest.mark.parametrize("store", STORES, indirect=True)
def test_every_command_runs_cleanly(store: Path, ptd_cli, tmp_path: Path) -> None:
    runs = [
        ptd_cli("inspect", store),
        ptd_cli("inspect", store, "--json"),
        ptd_cli("validate", store),
        ptd_cli("convert", store, tmp_path / "out.zarr", "--skip-unsupported"),
        ptd_cli("convert", store, tmp_path / "out.h5", "--skip-unsupported"),
        ptd_cli("memmap", store, tmp_path / "out.memmap", "--skip-unsupported"),
    ]
    for run in runs:
        assert "Traceback" not in run.stdout + run.stderr, run
        assert run.code in (0, 1), run  # 1: validate found problems
    assert runs[1].json["format"] in ("h5", "zarr")


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_library_reads_what_h5py_and_zarr_read(store: Path) -> None:
    keys = _tensor_keys(store)
    assert keys or store.name in ("unsupported.h5",), "no tensor found"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SkippedKeyWarning)
        backend = "zarr" if store.is_dir() else "h5"
        with PersistentTensorDict(filename=str(store), mode="r", backend=backend) as p:
            for key in keys:
                try:
                    value = p.get(tuple(key.split("/")))
                except UnsupportedOperationError as err:  # a virtual dataset: refused by name
                    assert key in str(err), err
                    assert "outside the file" in str(err), err
                    continue
                got = _as_numpy(value)
                np.testing.assert_array_equal(got, _direct(store, key), err_msg=key)


@pytest.mark.parametrize("to", ["zarr", "h5"])
@pytest.mark.parametrize("store", STORES, indirect=True)
def test_convert_keeps_every_tensor_or_names_it(store: Path, to: str, tmp_path: Path) -> None:
    out = tmp_path / f"out.{to}"
    result = ptd.convert(store, out, skip_unsupported=True)
    left_out = {item["key"] for item in result.not_copied if "attr" not in item}
    if to == "zarr":  # a soft link is carried as its target's path (zarr_link), not as data
        left_out |= {lp.key for lp in result.plan if lp.kind == "link"}
    for item in result.not_copied:
        assert item["reason"], item
    for key in _tensor_keys(store):
        if key in left_out or any(key.startswith(k + "/") for k in left_out):
            continue
        np.testing.assert_array_equal(_direct(out, key), _direct(store, key), err_msg=key)
    if to == "zarr":
        assert json.loads((out / "zarr.json").read_text())["zarr_format"] == 3


@pytest.mark.parametrize("store", STORES, indirect=True)
def test_memmap_keeps_every_tensor_or_names_it(store: Path, tmp_path: Path) -> None:
    from ptd.containers.memmap import export_memmap, load_memmap

    summary = export_memmap(store, tmp_path / "mm", skip_unsupported=True)
    left_out = {item["key"] for item in summary.not_copied}
    td = load_memmap(tmp_path / "mm", allow_pickle=True)
    for key in _tensor_keys(store):
        if key in left_out or any(key.startswith(k + "/") for k in left_out):
            continue
        got = _as_numpy(td.get(tuple(key.split("/"))))
        np.testing.assert_array_equal(got, _direct(store, key), err_msg=key)


# ------------------------------------------------------------------------------ zarr v2
@pytest.mark.parametrize(
    "store", ["zarr_v2.zarr", "xarray_v2.zarr", "tensorstore_v2.zarr"], indirect=True
)
def test_zarr_v2_is_read_only_and_converts_to_v3(store: Path, tmp_path: Path, ptd_cli) -> None:
    info = ptd.info(store)
    assert info.format == "zarr"
    assert info.zarr_format == 2
    assert " v2 (read-only)" in ptd_cli("inspect", store).stdout
    assert ptd_cli("inspect", store, "--json").json["zarr_format"] == 2
    for mode in ("r+", "a"):
        with pytest.raises(ReadOnlyError, match="Zarr v2 store"):
            PersistentTensorDict(filename=str(store), mode=mode, backend="zarr")
    out = tmp_path / "v3.zarr"
    ptd.convert(store, out)
    assert ptd.info(out).zarr_format == 3


def test_zarr_v2_strings_and_attributes(tmp_path: Path) -> None:
    store = FOREIGN / "zarr_v2.zarr"
    info = ptd.info(store, attrs=True)
    assert info.attrs == {"env_args": '{"env_name": "Lift", "type": 1}', "count": 3}
    kinds = {e.key: e.kind for e in info.entries}
    assert kinds["names"] == kinds["labels"] == "non_tensor"
    out = tmp_path / "v3.zarr"
    ptd.convert(store, out)
    g = zarr.open_group(str(out), mode="r")
    assert g.attrs["env_args"] == '{"env_name": "Lift", "type": 1}'  # still a str
    assert g["reward"].attrs["units"] == "points"
    with PersistentTensorDict(filename=str(out), mode="r", backend="zarr") as p:
        assert list(p["labels"]) == [f"label-{i}" for i in range(12)]


# ------------------------------------------------------------------------------ links
def test_links_are_listed_followed_and_skipped_by_name(tmp_path: Path, ptd_cli) -> None:
    shutil.copy(FOREIGN / "links.h5", tmp_path / "links.h5")
    shutil.copy(FOREIGN / "links_target.h5", tmp_path / "links_target.h5")
    path = tmp_path / "links.h5"
    info = ptd.info(path)
    links = {e.key: e.link for e in info.entries}
    assert links["g/same"] == "soft link to /obs"
    assert links["obs"] == "hard link to 'alias'"  # the first key in name order is the target
    assert links["g_again"] == "hard link to 'g'"
    skipped = {s["key"]: s["reason"] for s in info.skipped}
    assert set(skipped) == {
        f"{g}/{k}" for g in ("g", "g_again") for k in ("dangling", "external", "loop", "rel")
    }
    # HDF5 paths have no "..": such a soft link dangles
    assert skipped["g/rel"] == "dangling soft link to ../obs, which does not exist"
    assert "dangling soft link to /nowhere" in skipped["g/dangling"]
    assert "external link to links_target.h5:/secret" in skipped["g/external"]
    assert "cycle" in skipped["g/loop"]
    # the library lists the linked keys, and warns about the skipped ones
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with PersistentTensorDict(filename=str(path), mode="r") as p:
            td = p.to_tensordict()
    warned = {str(w.message).split("'")[1] for w in caught if w.category is SkippedKeyWarning}
    assert warned == set(skipped)
    assert set(td.keys(include_nested=True, leaves_only=True)) >= {
        "obs",
        "alias",
        ("g", "same"),
        ("g_again", "same"),
    }
    # validate reports them; convert copies each hard-linked key once, names the skipped ones
    # and the soft links zarr cannot hold (issue 37: never their target's data in their place)
    # (issue 20: skipped links are warnings, so the file is valid at the default --fail-on)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 0
    assert {pr["code"] for pr in run.json["reports"][0]["problems"]} == {"skipped_key"}
    assert {pr["severity"] for pr in run.json["reports"][0]["problems"]} == {"warning"}
    out = tmp_path / "out.zarr"
    result = ptd.convert(path, out)
    soft = {"g/same", "g_again/same"}
    # the soft links are carried as the paths they name (hdmf-zarr's zarr_link), never as
    # their target's data, and the notes say so by name
    assert {i["key"] for i in result.not_copied} == set(skipped)
    assert any("'g/same'" in n and "stored as the paths" in n for n in result.notes)
    g = zarr.open_group(str(out), mode="r")
    assert g["g"].attrs["zarr_link"] == [{"name": "same", "source": ".", "path": "/obs"}]
    for key in ("obs", "alias"):
        np.testing.assert_array_equal(g[key][...], np.arange(12, dtype="f4").reshape(6, 2))
    assert "external" not in g["g"]
    assert "same" not in g["g"]
    assert "same" not in g["g_again"]
    assert ptd.verify_conversion(result).verified()
    summary = ptd_cli("convert", path, tmp_path / "out2.h5")
    assert summary.code == 0
    assert "not copied: g/external: external link" in summary.stdout
    # an HDF5 copy makes the soft links again
    with h5py.File(tmp_path / "out2.h5", "r") as f:
        for key in soft:
            link = f.get(key, getlink=True)
            assert isinstance(link, h5py.SoftLink), key
            assert link.path == "/obs"
    assert ptd_cli("diff", path, tmp_path / "out2.h5").code == 0


# ------------------------------------------------------------------------------ names
def test_names_zarr_cannot_hold_are_escaped(tmp_path: Path, ptd_cli) -> None:
    """(They were refused until issue 20: now stored escaped, the original recorded.)"""
    path = FOREIGN / "odd_names.h5"
    result = ptd.convert(path, tmp_path / "x.zarr")
    assert result.not_copied == []
    assert any("stored escaped" in n for n in result.notes)
    g = zarr.open_group(str(tmp_path / "x.zarr"), mode="r")
    assert sorted(g.array_keys()) == [
        "%5F_reserved",
        "back%5Cslash",
        "plain",
        "unicodé",
        "with space",
        "zarr%2Ejson",
    ]
    assert g["%5F_reserved"].attrs["__ptd_name__"] == "__reserved"
    with PersistentTensorDict.from_zarr(tmp_path / "x.zarr") as p:
        assert set(p.keys()) >= {"back\\slash", "zarr.json", "__reserved"}
    assert ptd_cli("diff", path, tmp_path / "x.zarr").code == 0
    # h5 holds every name as it is
    result = ptd.convert(path, tmp_path / "x.h5")
    assert result.not_copied == []
    with h5py.File(tmp_path / "x.h5", "r") as f:
        assert "back\\slash" in f
        assert "zarr.json" in f


def test_zarr_backend_escapes_a_backslash_key(tmp_path: Path) -> None:
    import torch

    with PersistentTensorDict(filename=str(tmp_path / "s.zarr"), mode="w", backend="zarr") as p:
        p["a\\b"] = torch.zeros(3)
        assert list(p.keys()) == ["a\\b"]
    assert os.path.isdir(tmp_path / "s.zarr" / "a%5Cb")


def test_json_looking_string_attributes_stay_strings(tmp_path: Path) -> None:
    path = FOREIGN / "odd_names.h5"
    for to in ("zarr", "h5"):
        out = tmp_path / f"o.{to}"
        ptd.convert(path, out, skip_unsupported=True)
        attrs = ptd.info(out, attrs=True)
        assert attrs.attrs is not None
        assert attrs.attrs["env_args"] == '{"nested": {"k": [1, 2]}}'
        assert attrs.attrs["list_text"] == "[1, 2, 3]"
        plain = next(e for e in attrs.entries if e.key == "plain")
        assert plain.attrs == {"meta": '{"a": 1}'}
    robo = tmp_path / "robo.zarr"
    ptd.convert(FOREIGN / "robomimic_like.h5", robo)
    env = zarr.open_group(str(robo), mode="r")["data"].attrs["env_args"]
    assert isinstance(env, str)
    assert json.loads(env)["env_name"] == "Lift"


def test_dict_attributes_ptd_wrote_still_read_as_dicts(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "d.h5"
    with PersistentTensorDict(filename=str(path), mode="w") as p:
        p["x"] = torch.zeros(2)
        p.file.attrs["text"] = '{"a": 1}'  # the user's string
    be = ptd.storage.registry.get_backend("h5").open(str(path), "r+")
    try:
        be.set_attrs((), {"cfg": {"a": [1, 2]}, "text2": '{"b": 2}'})
        attrs = be.get_attrs(())
        assert attrs["cfg"] == {"a": [1, 2]}
        assert attrs["text2"] == '{"b": 2}'
        assert attrs["text"] == '{"a": 1}'
        be.set_attrs((), {"cfg": "now text"})
        assert be.get_attrs(())["cfg"] == "now text"
    finally:
        be.close()


# ------------------------------------------------------------------------------ unsupported
@pytest.mark.parametrize(
    ("key", "what"),
    [
        ("refs", "HDF5 object references"),
        ("region_refs", "HDF5 region references"),
        ("vlen", "variable-length sequences"),
        ("array_type", "an HDF5 array type"),
    ],
)
def test_unsupported_types_are_named_per_key(key: str, what: str, ptd_cli) -> None:
    path = FOREIGN / "unsupported.h5"
    entry = next(e for e in ptd.info(path).entries if e.key == key)
    assert what in (entry.reason or "")
    assert what in ptd_cli("inspect", path).stdout
    report = ptd.validate(path)
    if "references" in what:  # a kind of its own: listed (lint L012), not a problem
        assert entry.kind == "reference"
        assert not any(pr.key == key for pr in report.problems)
        assert any(pr.key == key and pr.code == "L012" for pr in report.lint)
    else:
        assert entry.kind == "unsupported"
        assert any(pr.key == key and what in pr.message for pr in report.problems)


def test_unsupported_refused_unless_skipped(tmp_path: Path, ptd_cli) -> None:
    path = FOREIGN / "unsupported.h5"
    run = ptd_cli("convert", path, tmp_path / "u.zarr")
    assert_one_line_error(run, "unsupported.h5", "key 'array_type' holds", "--skip-unsupported")
    run = ptd_cli("convert", path, tmp_path / "u.zarr", "--skip-unsupported", "--json")
    assert run.code == 0, run
    not_copied = {i["key"]: i["reason"] for i in run.json["not_copied"]}
    # object references are carried as the paths they name; region references are not
    assert set(not_copied) == {"region_refs", "vlen", "array_type"}
    assert not_copied["region_refs"] == (
        "key 'region_refs' holds HDF5 region references, which ptd cannot copy"
    )
    # a compound of plain numbers is copied as it is, to both formats
    ptd.convert(path, tmp_path / "u.h5", skip_unsupported=True)
    for out in (tmp_path / "u.zarr", tmp_path / "u.h5"):
        np.testing.assert_array_equal(_direct(out, "compound"), _direct(path, "compound"))
    run = ptd_cli("memmap", path, tmp_path / "u.mm")
    assert_one_line_error(run, "key 'array_type' holds", "--skip-unsupported")


def test_matlab_cells_are_named(tmp_path: Path, ptd_cli) -> None:
    path = FOREIGN / "matlab_v73.mat"
    run = ptd_cli("convert", path, tmp_path / "m0.zarr")
    assert run.code == 0, run  # a cell array's references are carried as the paths they name
    result = ptd.convert(path, tmp_path / "m.zarr", skip_unsupported=True)
    assert [i["key"] for i in result.not_copied if "attr" not in i and "property" not in i] == []
    assert any("'cellvar'" in n for n in result.notes)
    assert ptd.diff(path, tmp_path / "m.zarr").same
    # MATLAB v7.3 files start with a 512-byte user block (MATLAB's header): a zarr store has none
    assert {"key": "/", "property": "userblock"}.items() <= next(
        i for i in result.not_copied if i.get("property") == "userblock"
    ).items()
    g = zarr.open_group(str(tmp_path / "m.zarr"), mode="r")
    assert g["x"].attrs["MATLAB_class"] == "double"
    np.testing.assert_array_equal(g["#refs#/a"][...], [[1.0, 2.0]])


def test_dimension_scales_are_carried_as_dimensions(tmp_path: Path) -> None:
    """netCDF's dimension scales hold references (``DIMENSION_LIST``): not attributes to copy
    (or to list as lost) but the dimension names, which the h5 copy spells its own way."""
    result = ptd.convert(FOREIGN / "xarray_h5netcdf.nc", tmp_path / "x.h5")
    assert [i for i in result.not_copied if "attr" in i] == []

    def dims(path: Path) -> dict[str, list[str]]:
        with h5py.File(path, "r") as f:
            return {
                k: [next(iter(d.keys()), "") if len(d) else d.label for d in f[k].dims]
                for k in ("temperature", "flag")
            }

    assert dims(tmp_path / "x.h5") == dims(FOREIGN / "xarray_h5netcdf.nc")
    assert dims(tmp_path / "x.h5")["temperature"] == ["time", "x"]


# ------------------------------------------------------------------------------ hdf5plugin
FILTER_IDS = {"zstd": 32015, "blosc": 32001, "lz4": 32004}


def test_plugin_filters_read_and_are_described() -> None:
    path = FOREIGN / "hdf5plugin.h5"
    codecs = {e.key: e.compression for e in ptd.info(path).entries}
    assert codecs == {
        "blosc2": "blosc2",
        "blosc_lz4": "blosc(lz4,5)",
        "blosc_zstd": "blosc(zstd,3)",
        "bzip2": "bz2(9)",  # the one neutral name (numcodecs spells it so too)
        "lz4": "lz4",
        "zstd": "zstd(4)",
    }
    with PersistentTensorDict(filename=str(path), mode="r") as p:
        for key in codecs:
            np.testing.assert_array_equal(
                p[key].numpy(), np.arange(2000, dtype="f4").reshape(200, 10)
            )


@pytest.mark.parametrize("codec", ["zstd", "blosc", "lz4"])
def test_convert_writes_plugin_filters(codec: str, tmp_path: Path, ptd_cli) -> None:
    out = tmp_path / "c.h5"
    run = ptd_cli("convert", FOREIGN / "pandas_fixed.h5", out, "--compression", codec)
    assert run.code == 0, run
    with h5py.File(out, "r") as f:
        ds = f["df/block0_values"]
        ids = [
            ds.id.get_create_plist().get_filter(i)[0]
            for i in range(ds.id.get_create_plist().get_nfilters())
        ]
        assert FILTER_IDS[codec] in ids
    np.testing.assert_array_equal(
        _direct(out, "df/block0_values"), _direct(FOREIGN / "pandas_fixed.h5", "df/block0_values")
    )


def test_unavailable_filter_is_named_with_its_package(tmp_path: Path, ptd_cli) -> None:
    import hdf5plugin

    # ptd's own chunk reader decodes zstd without the HDF5 filter in mode "r"; a writable
    # store reads through HDF5, which needs the filter
    path = tmp_path / "hdf5plugin.h5"
    shutil.copyfile(FOREIGN / "hdf5plugin.h5", path)
    h5py.h5z.unregister_filter(32015)
    try:
        with (
            PersistentTensorDict(filename=str(path), mode="r+") as p,
            pytest.raises(PtdError, match=r"zstd \(HDF5 filter 32015, from the hdf5plugin"),
        ):
            p["zstd"]
        # convert reads zstd and lz4 chunks itself; bzip2 (not decoded by ptd) needs the
        # HDF5 filter
        h5py.h5z.unregister_filter(32004)
        h5py.h5z.unregister_filter(307)
        run = ptd_cli("convert", path, tmp_path / "z.zarr")
        assert_one_line_error(run, "hdf5plugin.h5", "'bzip2'", "pip install hdf5plugin")
        assert ".ptd-tmp" not in run.stderr
        assert not (tmp_path / "z.zarr").exists()
        hdf5plugin.register("bzip2", force=True)
        run = ptd_cli("convert", path, tmp_path / "z.zarr")  # lz4 without its HDF5 filter
        assert run.code == 0, run
    finally:
        hdf5plugin.register("zstd", force=True)
        hdf5plugin.register("lz4", force=True)
        hdf5plugin.register("bzip2", force=True)
    assert all(h5py.h5z.filter_avail(f) for f in (32015, 32004, 307))
    with h5py.File(path, "r") as f:  # the lz4 leaf ptd decoded equals h5py's read
        want = f["lz4"][()]
    got = zarr.open_group(str(tmp_path / "z.zarr"), mode="r")["lz4"][()]
    assert np.array_equal(np.asarray(got), want)


# ------------------------------------------------------------------------------ many nodes
def test_many_small_arrays_convert_concurrently_and_read_back(tmp_path: Path) -> None:
    src = tmp_path / "many.h5"
    with h5py.File(src, "w") as f:
        g = f.create_group("data")
        for i in range(60):
            d = g.create_dataset(f"d{i:03d}", data=np.full((3, 2), i, dtype="f4"))
            d.attrs["i"] = i
        g.create_dataset("gz", data=np.arange(10.0), compression="gzip")
        g.create_dataset("scalar", data=np.float64(2.5))
        g.create_dataset("empty", shape=(0, 4), dtype="i2")
        g.create_dataset("zeros", data=np.zeros((4, 4), dtype="i8"))
    out = tmp_path / "many.zarr"
    result = ptd.convert(src, out)
    assert result.tensors == 64
    grp = zarr.open_group(str(out), mode="r")
    for i in range(60):
        arr = grp[f"data/d{i:03d}"]
        np.testing.assert_array_equal(arr[...], np.full((3, 2), i, dtype="f4"))
        assert arr.attrs["i"] == i
    np.testing.assert_array_equal(grp["data/gz"][...], np.arange(10.0))
    assert grp["data/scalar"][...] == 2.5
    assert grp["data/empty"].shape == (0, 4)
    np.testing.assert_array_equal(grp["data/zeros"][...], np.zeros((4, 4), dtype="i8"))
    with PersistentTensorDict(filename=str(out), mode="r", backend="zarr") as p:
        np.testing.assert_array_equal(p["data", "d059"].numpy(), np.full((3, 2), 59, dtype="f4"))
    back = tmp_path / "back.h5"
    ptd.convert(out, back)
    np.testing.assert_array_equal(_direct(back, "data/d007"), np.full((3, 2), 7, dtype="f4"))


def test_create_arrays_replaces_and_checks_names(tmp_path: Path) -> None:
    from ptd.storage.meta import NewArray
    from ptd.storage.registry import get_backend

    be = get_backend("zarr").open(str(tmp_path / "b.zarr"), "w")
    try:
        be.create_array(("g", "a"), shape=(2,), dtype=np.dtype("i4"), data=np.array([7, 8]))
        specs = [
            NewArray(("g", "a"), (3,), np.dtype("f8"), data=np.arange(3.0)),
            NewArray(("g", "b"), (2, 2), np.dtype("u1"), data=np.ones((2, 2), "u1")),
            NewArray(("h", "c"), (2,), np.dtype(">i4"), data=np.array([1, 2], ">i4")),
        ]
        be.create_arrays(specs)
        np.testing.assert_array_equal(be.read(("g", "a")), np.arange(3.0))
        np.testing.assert_array_equal(be.read(("g", "b")), np.ones((2, 2), "u1"))
        np.testing.assert_array_equal(be.read(("h", "c")), [1, 2])
        be.create_arrays([NewArray(("x\\y",), (1,), np.dtype("i1"))])  # escaped
        assert [n for n, _ in be.children(())] == ["g", "h", "x\\y"]
        with pytest.raises(KeyError, match="'/'"):
            be.create_arrays([NewArray(("x", ""), (1,), np.dtype("i1"))])
    finally:
        be.close()
    assert os.path.isdir(tmp_path / "b.zarr" / "g" / "b")


def test_zarr_v2_at_a_url(tmp_path: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = zarr.open_group("memory://i13-v2.zarr", mode="w", zarr_format=2)
        g.create_array("a", shape=(4, 2), dtype="f4")[:] = np.ones((4, 2), "f4")
    info = ptd.info("memory://i13-v2.zarr")
    assert info.zarr_format == 2
    assert [e.key for e in info.entries] == ["a"]
    ptd.convert("memory://i13-v2.zarr", tmp_path / "m.h5")
    np.testing.assert_array_equal(_direct(tmp_path / "m.h5", "a"), np.ones((4, 2), "f4"))
