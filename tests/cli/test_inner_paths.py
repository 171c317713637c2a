"""Paths that lead into a store (h5ls's convention): ``ptd inspect robo.h5/data/demo_0``.

Fixtures are written with plain h5py / zarr-python. The store is the longest existing prefix
that is a file, or the outermost directory of the path holding ``zarr.json``/``.zgroup``; keys
are reported relative to the path given.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

import ptd
from ptd.errors import StoreNotFoundError
from ptd.storage.location import StoreLocation
from ptd.storage.stores import open_store, parse_source
from tests.cli.conftest import assert_one_line_error

LENGTHS = (5, 7, 9)


def _episodes_h5(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        for i, n in enumerate(LENGTHS):
            g = f.create_group(f"data/demo_{i}")
            g["actions"] = np.arange(n * 2, dtype="f4").reshape(n, 2) + i
            g["obs/pos"] = np.ones((n, 3), "f8") * i
            g["rewards"] = np.zeros(n, "f4")
        f["mask/train"] = np.array([b"demo_0", b"demo_1"])
    return path


def _episodes_zarr(path: Path, zarr_format: int = 3) -> Path:
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    for i, n in enumerate(LENGTHS):
        root.create_array(
            f"data/demo_{i}/actions", data=np.arange(n * 2, dtype="f4").reshape(n, 2) + i
        )
        root.create_array(f"data/demo_{i}/obs/pos", data=np.ones((n, 3), "f8") * i)
        root.create_array(f"data/demo_{i}/rewards", data=np.zeros(n, "f4"))
    return path


@pytest.fixture(params=["h5", "zarr", "zarr_v2"])
def episodes(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    if request.param == "h5":
        return _episodes_h5(tmp_path / "robo.h5")
    if request.param == "zarr":
        return _episodes_zarr(tmp_path / "robo.zarr")
    return _episodes_zarr(tmp_path / "robo_v2.zarr", zarr_format=2)


# --- parsing ---------------------------------------------------------------------------------
def test_parse_source_splits_h5_path(tmp_path: Path) -> None:
    f = _episodes_h5(tmp_path / "robo.h5")
    loc = parse_source(f"{f}/data/demo_0/")
    assert (loc.path, loc.inner) == (str(f), ("data", "demo_0"))
    assert loc.described == f"{f}/data/demo_0"
    # frozen, picklable, and the plain parse (the library's openers) does not split
    assert pickle.loads(pickle.dumps(loc)) == loc
    assert StoreLocation.parse(f"{f}/data/demo_0").inner == ()
    assert parse_source(f).inner == ()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_parse_source_zarr_outermost_marker_directory(tmp_path: Path, zarr_format: int) -> None:
    store = _episodes_zarr(tmp_path / "robo.zarr", zarr_format)
    # data/demo_0 is a directory with its own zarr.json/.zgroup: the store is still robo.zarr
    loc = parse_source(store / "data" / "demo_0")
    assert (loc.path, loc.inner) == (str(store), ("data", "demo_0"))
    loc = parse_source(store / "data" / "demo_0" / "actions")
    assert loc.inner == ("data", "demo_0", "actions")
    loc = parse_source(store / "data" / "missing" / "x")
    assert loc.inner == ("data", "missing", "x")


# --- inspect ---------------------------------------------------------------------------------
def test_inspect_inner_group_lists_relative_keys(ptd_cli, episodes: Path) -> None:
    run = ptd_cli("inspect", f"{episodes}/data/demo_1", "--json")
    assert run.code == 0, run
    doc = run.json
    assert doc["path"] == str(episodes)
    assert doc["inner"] == "data/demo_1"
    assert [e["key"] for e in doc["entries"]] == ["actions", "obs", "obs/pos", "rewards"]
    shapes = {e["key"]: e["shape"] for e in doc["entries"] if e["kind"] == "tensor"}
    assert shapes["actions"] == [LENGTHS[1], 2]
    assert doc["batch_size"] == [LENGTHS[1]]
    text = ptd_cli("inspect", f"{episodes}/data/demo_1")
    assert text.code == 0, text
    assert f"{episodes}/data/demo_1" in text.stdout
    assert "demo_0" not in text.stdout
    assert "data/" not in text.stdout.split("\n", 1)[1]


def test_inspect_inner_array_shows_that_leaf(ptd_cli, episodes: Path) -> None:
    run = ptd_cli("inspect", f"{episodes}/data/demo_2/obs/pos", "--json")
    assert run.code == 0, run
    assert [(e["key"], e["shape"]) for e in run.json["entries"]] == [("pos", [LENGTHS[2], 3])]
    assert run.json["inner"] == "data/demo_2/obs/pos"


def test_missing_inner_key_is_one_error_naming_file_and_key(ptd_cli, episodes: Path) -> None:
    for cmd in (("inspect",), ("validate",), ("diff", episodes), ("convert", "--dry-run")):
        run = ptd_cli(*cmd, f"{episodes}/data/demo_9/actions")
        assert_one_line_error(run, str(episodes), "'data/demo_9/actions'", code=2)


def test_key_below_an_array_is_missing(ptd_cli, episodes: Path) -> None:
    run = ptd_cli("inspect", f"{episodes}/data/demo_0/actions/x")
    assert_one_line_error(run, "'data/demo_0/actions/x'", code=2)


def test_path_inside_a_file_that_is_not_a_store(ptd_cli, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a store")
    run = ptd_cli("inspect", f"{notes}/data")
    assert_one_line_error(run, str(notes), "neither an HDF5 file nor a zarr store", code=2)
    with pytest.raises(StoreNotFoundError, match="does not exist"):
        ptd.info(tmp_path / "nothing" / "here")


def test_library_info_takes_inner_paths(episodes: Path) -> None:
    info = ptd.info(f"{episodes}/data/demo_0")
    assert [e.key for e in info.entries] == ["actions", "obs", "obs/pos", "rewards"]
    assert info.inner == "data/demo_0"


# --- validate --------------------------------------------------------------------------------
def test_validate_inner_group_and_array(ptd_cli, episodes: Path) -> None:
    run = ptd_cli("validate", f"{episodes}/data/demo_0", "--json")
    assert run.code == 0, run
    report = run.json["reports"][0]
    assert report["valid"]
    assert report["leaves"] == 3
    assert report["batch_size"] == [LENGTHS[0]]
    assert report["path"] == f"{episodes}/data/demo_0"
    run = ptd_cli("validate", f"{episodes}/data/demo_0/actions", "--json")
    assert run.code == 0, run
    assert run.json["reports"][0]["leaves"] == 1


def test_validate_inner_group_reports_relative_keys(tmp_path: Path) -> None:
    f = tmp_path / "bad.h5"
    with h5py.File(f, "w") as h:
        h["data/demo_0/actions"] = np.zeros((6, 2), "f4")
        h["data/demo_0/obs"] = np.zeros((5, 2), "f4")
    rep = ptd.validate(f"{f}/data/demo_0", batch_size=[6])
    assert not rep.valid
    assert [p.key for p in rep.problems] == ["obs"]


# --- diff ------------------------------------------------------------------------------------
def test_diff_two_inner_groups_of_one_file(ptd_cli, episodes: Path) -> None:
    run = ptd_cli("diff", f"{episodes}/data/demo_0", f"{episodes}/data/demo_1", "--json")
    assert run.code == 1, run
    keys = {d["key"] for d in run.json["differences"]}
    assert "actions" in keys
    assert not any(k.startswith("data/") for k in keys)
    same = ptd_cli("diff", f"{episodes}/data/demo_0", f"{episodes}/data/demo_0")
    assert same.code == 0, same


# --- convert and memmap export from an inner group -------------------------------------------
@pytest.mark.parametrize("to", ["h5", "zarr"])
def test_convert_from_inner_group(ptd_cli, episodes: Path, tmp_path: Path, to: str) -> None:
    dst = tmp_path / f"demo_1_out.{to}"
    run = ptd_cli("convert", f"{episodes}/data/demo_1", dst)
    assert run.code == 0, run
    assert sorted(k for k, _ in ptd.info(dst).to_dict().items() if k == "entries")
    assert [e.key for e in ptd.info(dst).entries] == ["actions", "obs", "obs/pos", "rewards"]
    assert ptd_cli("diff", f"{episodes}/data/demo_1", dst).code == 0
    if to == "h5":
        with h5py.File(dst, "r") as h:
            np.testing.assert_array_equal(
                h["actions"][:], np.arange(14, dtype="f4").reshape(7, 2) + 1
            )


def test_convert_workers_reopen_the_narrowed_store(episodes: Path, tmp_path: Path) -> None:
    dst = tmp_path / "w.zarr"
    ptd.convert(f"{episodes}/data/demo_2", dst, workers=2)
    assert ptd.diff(f"{episodes}/data/demo_2", dst).same


def test_memmap_export_from_inner_group(ptd_cli, episodes: Path, tmp_path: Path) -> None:
    out = tmp_path / "demo_0.mm"
    run = ptd_cli("memmap", f"{episodes}/data/demo_0", out)
    assert run.code == 0, run
    assert ptd.diff(f"{episodes}/data/demo_0", out).same
    run = ptd_cli("memmap", f"{episodes}/data/demo_0/actions", tmp_path / "a.mm")
    assert_one_line_error(run, "is an array", code=2)


# --- the narrowed backend itself -------------------------------------------------------------
def test_narrowed_backend_paths_are_relative(episodes: Path) -> None:
    be = open_store(parse_source(f"{episodes}/data/demo_1"))
    try:
        assert [n for n, _ in be.children(())] == ["actions", "obs", "rewards"]
        assert be.array_meta(("obs", "pos")).path == ("obs", "pos")
        assert all(m is None or m.path == p for p, _k, m in be.walk())
        np.testing.assert_array_equal(be.read(("actions",), (slice(0, 1),)), [[1.0, 2.0]])
        assert be.stored_path(("actions",)) == ("data", "demo_1", "actions")
        spec = be.reopen_spec
        assert spec is not None
        assert spec.location.inner == ("data", "demo_1")
    finally:
        be.close()
    assert be.closed
