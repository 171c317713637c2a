"""String arrays through ``ptd memmap`` (issue 20, item 2): a store's string array that is not
a column of its group's batch (robomimic's ``mask/train``, a list of demo names in a group of
batch size []) becomes a NonTensorStack of its shape, its values as str in ``meta.json`` (no
pickle), read back with that shape by tensordict 0.15, by ``ptd.load_memmap`` and by the
memmap read backend (``ptd diff`` / ``inspect`` / ``convert``)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import zarr
from typer.testing import CliRunner

import ptd
from ptd import NonTensorData, NonTensorStack
from ptd.containers.memmap import load_memmap
from ptd_cli.main import app

DEMOS = [f"demo_{i}" for i in range(18)]
GRID = [["a", "bb", "ccc"], ["dd", "e", "ff"]]
TEXT = ["α0", "b", "c"]


def _h5_source(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f["data/demo_0/actions"] = np.zeros((5, 2), dtype="f4")
        f["data/demo_1/actions"] = np.zeros((7, 2), dtype="f4")
        f.create_dataset("mask/train", data=np.array([d.encode() for d in DEMOS], dtype="S8"))
        f.create_dataset("mask/text", data=np.array(TEXT, dtype=object), dtype=h5py.string_dtype())
        f.create_dataset("grid", data=np.array(GRID, dtype="S3"))
        f.create_dataset("empty", data=np.array([], dtype="S4"))
    return path


def _zarr_source(path: Path) -> Path:
    g = zarr.open_group(path, mode="w")
    g.create_array("data/demo_0/actions", shape=(5, 2), dtype="f4")[:] = 0
    g.create_array("data/demo_1/actions", shape=(7, 2), dtype="f4")[:] = 0
    g.create_array("mask/train", shape=(18,), dtype="S8")[:] = np.array(DEMOS, dtype="S8")
    g.create_array("mask/text", shape=(3,), dtype=str)[:] = np.array(TEXT)
    g.create_array("grid", shape=(2, 3), dtype=str)[:] = np.array(GRID)
    g.create_array("empty", shape=(0,), dtype="S4")
    return path


SOURCES: dict[str, Callable[[Path], Path]] = {"h5": _h5_source, "zarr": _zarr_source}
#: key -> (shape, values) of the strings every source holds
EXPECTED: dict[tuple[str, ...], tuple[list[int], Any]] = {
    ("mask", "train"): ([18], DEMOS),
    ("mask", "text"): ([3], TEXT),
    ("grid",): ([2, 3], GRID),
    ("empty",): ([0], []),
}


@pytest.fixture(params=sorted(SOURCES))
def exported(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, Path]:
    ext = request.param
    src = SOURCES[ext](tmp_path / f"robo.{ext}")
    out = tmp_path / "robo.mm"
    summary = ptd.containers.memmap.export_memmap(src, out)
    assert summary.pickled == 0
    return src, out


def _cli(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_meta_json_holds_the_strings_no_pickle(exported: tuple[Path, Path]) -> None:
    _src, out = exported
    for key, (_shape, values) in EXPECTED.items():
        meta = json.loads((out.joinpath(*key) / "meta.json").read_text())
        assert meta["_class"] == "tensordict:NonTensorStack", key
        assert meta["data"] == values, key
    pickles = [
        f for _d, _s, files in os.walk(out) for f in files if f.endswith((".pkl", ".pickle"))
    ]
    assert pickles == []


@pytest.mark.interop
def test_tensordict_loads_the_shape_and_values(exported: tuple[Path, Path]) -> None:
    tensordict = pytest.importorskip("tensordict")
    _src, out = exported
    td = tensordict.TensorDict.load_memmap(out, allow_pickle=False)
    assert list(td["mask"].batch_size) == []
    for key, (shape, values) in EXPECTED.items():
        got = td.get(key)
        assert list(got.batch_size) == shape, key
        assert got.tolist() == values, key


def test_ptd_loads_the_shape_and_values(exported: tuple[Path, Path]) -> None:
    _src, out = exported
    td = load_memmap(out, allow_pickle=False)
    for key, (shape, values) in EXPECTED.items():
        got = td.get(key)
        assert isinstance(got, NonTensorStack), key
        assert list(got.batch_size) == shape, key
        assert got.tolist() == values, key


def test_diff_and_inspect_see_the_shape(exported: tuple[Path, Path]) -> None:
    src, out = exported
    run = _cli("diff", src, out)
    assert run.exit_code == 0, run.stdout + run.stderr
    run = _cli("inspect", out, "--json")
    assert run.exit_code == 0, run.stdout + run.stderr
    shapes = {e["key"]: e.get("shape") for e in json.loads(run.stdout)["entries"]}
    for key, (shape, _values) in EXPECTED.items():
        assert shapes["/".join(key)] == shape, key


def test_convert_back_to_h5_gives_string_arrays(exported: tuple[Path, Path], tmp_path) -> None:
    src, out = exported
    back = tmp_path / "back.h5"
    run = _cli("convert", out, back)
    assert run.exit_code == 0, run.stdout + run.stderr
    with h5py.File(back, "r") as f:
        for key, (shape, values) in EXPECTED.items():
            ds = f["/".join(key)]
            assert h5py.check_string_dtype(ds.dtype) is not None, key
            assert list(ds.shape) == shape, key
            assert ds.asstr()[()].tolist() == values, key
    assert _cli("diff", src, back).exit_code == 0


def test_batch_column_of_strings_keeps_its_behaviour(tmp_path: Path) -> None:
    """A string column whose rows are its group's batch (recorded) is a stack of that batch,
    as before; a string array that does not start with the batch size is one value (a
    nested list of str, JSON), since a stack must extend its group's batch size."""
    path = tmp_path / "col.h5"
    with h5py.File(path, "w") as f:
        f.attrs["__tensordict__"] = json.dumps({"batch_size": [4], "version": 1})
        f["x"] = np.arange(4.0)
        f.create_dataset("names", data=np.array([b"a", b"b", b"c", b"d"], dtype="S1"))
        f.create_dataset("short", data=np.array([b"a", b"b"], dtype="S1"))
    out = tmp_path / "col.mm"
    summary = ptd.containers.memmap.export_memmap(path, out)
    assert summary.pickled == 0
    td = load_memmap(out)
    assert list(td.batch_size) == [4]
    names = td.get("names")
    assert isinstance(names, NonTensorStack)
    assert list(names.batch_size) == [4]
    short = td.get("short")
    assert isinstance(short, NonTensorData)
    assert short.data == ["a", "b"]


def test_bytes_that_are_not_text_stay_bytes(tmp_path: Path) -> None:
    path = tmp_path / "raw.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("raw", data=np.array([b"\xff\x00a", b"ok"], dtype="S3"))
    out = tmp_path / "raw.mm"
    summary = ptd.containers.memmap.export_memmap(path, out)
    assert summary.pickled == 1  # tensordict holds a stack of bytes as a pickle
    got = load_memmap(out, allow_pickle=True).get("raw")
    assert isinstance(got, NonTensorStack)
    assert got.tolist() == [b"\xff\x00a", b"ok"]
