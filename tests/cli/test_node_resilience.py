"""One node whose metadata the store library cannot parse is one unsupported key, never a
failed store: zarr v2 (plain JSON files, with and without consolidated metadata), zarr v3
(a ``zarr.json`` zarr-python cannot read) and HDF5 (a datatype h5py cannot map).

Every store here holds ``good`` (int32 [0, 1, 2, 3]), ``obs/pos`` (float32, 4 x 2) and one
bad node; the fixtures are plain files, zarr-python and h5py (zarr-python 2 is not installed:
its compatibility fixture's ``|S7`` array with ``"fill_value": 0`` is written as JSON).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

from ptd.containers.persistent.persistent_tensordict import PersistentTensorDict
from ptd.errors import UnsupportedDtypeError

from .conftest import assert_one_line_error

GOOD = np.arange(4, dtype="<i4")
POS = np.arange(8, dtype="<f4").reshape(4, 2)


def _v2_array(path: Path, doc: dict, data: np.ndarray | None = None) -> None:
    path.mkdir(parents=True)
    (path / ".zarray").write_text(json.dumps(doc))
    if data is not None:
        chunk = ".".join("0" for _ in data.shape)
        (path / chunk).write_bytes(data.tobytes())


def _v2_doc(shape: list[int], dtype: str, fill: object) -> dict:
    return {
        "zarr_format": 2,
        "shape": shape,
        "chunks": shape,
        "dtype": dtype,
        "compressor": None,
        "fill_value": fill,
        "order": "C",
        "filters": None,
    }


def v2_store(root: Path, *, consolidated: bool = False) -> Path:
    """A Zarr v2 store as zarr-python 2 wrote it; ``bad`` is ``|S7`` with ``fill_value: 0``
    (zarr-python 3 expects a base64 string there)."""
    root.mkdir()
    (root / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    (root / "obs").mkdir()
    (root / "obs" / ".zgroup").write_text(json.dumps({"zarr_format": 2}))
    _v2_array(root / "good", _v2_doc([4], "<i4", 0), GOOD)
    _v2_array(root / "obs" / "pos", _v2_doc([4, 2], "<f4", 0.0), POS)
    _v2_array(root / "bad", _v2_doc([4], "|S7", 0))
    if consolidated:
        docs = {}
        for dirpath, _dirs, files in os.walk(root):
            for f in files:
                if f.startswith(".z"):
                    rel = os.path.relpath(os.path.join(dirpath, f), root).replace(os.sep, "/")
                    docs[rel] = json.loads(Path(dirpath, f).read_text())
        (root / ".zmetadata").write_text(
            json.dumps({"zarr_consolidated_format": 1, "metadata": docs})
        )
    return root


#: how the bad node's ``zarr.json`` is spoiled, and a word of zarr's error about it
V3_DAMAGE: dict[str, tuple[Callable[[dict], object] | str, str]] = {
    "data_type": (lambda d: d.__setitem__("data_type", "no_such_type"), "no_such_type"),
    "codec": (lambda d: d["codecs"].append({"name": "no_such_codec"}), "no_such_codec"),
    "json": ('{"zarr_format": 3, "node_type": "arr', "JSONDecodeError"),
    "missing_field": (lambda d: d.pop("shape"), "shape"),
    "group": ('{"zarr_format": 3, "node_type": "group", "attributes": 5}', "TypeError"),
}


def v3_store(root: Path, damage: str, *, consolidated: bool = False) -> Path:
    g = zarr.open_group(str(root), mode="w")
    g.create_array("good", data=GOOD)
    g.create_group("obs").create_array("pos", data=POS)
    g.create_array("bad", data=np.arange(4, dtype="i8"))
    if consolidated:
        zarr.consolidate_metadata(str(root))
    spoil, _ = V3_DAMAGE[damage]
    doc_path = root / "bad" / "zarr.json"
    if isinstance(spoil, str):
        doc_path.write_text(spoil)
    else:
        doc = json.loads(doc_path.read_text())
        spoil(doc)
        doc_path.write_text(json.dumps(doc))
    if consolidated:  # the root's copy of it too
        assert callable(spoil)
        root_doc = json.loads((root / "zarr.json").read_text())
        spoil(root_doc["consolidated_metadata"]["metadata"]["bad"])
        (root / "zarr.json").write_text(json.dumps(root_doc))
    return root


def h5_store(path: Path) -> Path:
    """``bad``: an opaque datatype whose tag names no numpy dtype (h5py raises TypeError)."""
    with h5py.File(path, "w") as f:
        f["good"] = GOOD
        f["obs/pos"] = POS
        opaque = h5py.h5t.create(h5py.h5t.OPAQUE, 3)
        opaque.set_tag(b"NUMPY:not-a-dtype")
        h5py.h5d.create(f.id, b"bad", opaque, h5py.h5s.create_simple((4,)))
    return path


#: store maker, and a word of the library's reason that must reach the user
CASES: dict[str, tuple[Callable[[Path], Path], str]] = {
    "v2": (lambda d: v2_store(d / "v2.zarr"), "base64"),
    "v2-consolidated": (lambda d: v2_store(d / "v2c.zarr", consolidated=True), "base64"),
    **{
        f"v3-{k}": ((lambda d, k=k: v3_store(d / f"v3{k}.zarr", k)), V3_DAMAGE[k][1])
        for k in V3_DAMAGE
    },
    "v3-consolidated": (
        lambda d: v3_store(d / "v3c.zarr", "data_type", consolidated=True),
        "no_such_type",
    ),
    "h5": (lambda d: h5_store(d / "bad.h5"), "not-a-dtype"),
}


@pytest.fixture(params=sorted(CASES))
def bad_store(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    make, word = CASES[request.param]
    return make(tmp_path), word


def test_fixtures_are_what_the_library_cannot_read(bad_store: tuple[Path, str]) -> None:
    # the premise: the library itself fails on the bad node (else these tests prove nothing)
    path, _ = bad_store
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if path.suffix == ".h5":
            with h5py.File(path, "r") as f, pytest.raises(TypeError):
                _ = f["bad"].dtype
        else:
            g = zarr.open_group(str(path), mode="r", use_consolidated=False)
            with pytest.raises(Exception):  # noqa: B017, PT011 - zarr's error varies with the damage
                g["bad"]


def test_store_opens_and_every_other_key_reads(bad_store: tuple[Path, str]) -> None:
    path, word = bad_store
    opener = (
        PersistentTensorDict.from_h5 if path.suffix == ".h5" else PersistentTensorDict.from_zarr
    )
    with opener(str(path), mode="r") as p:
        assert sorted(p.keys()) == ["bad", "good", "obs"]
        assert list(p.batch_size) == [4]
        np.testing.assert_array_equal(p["good"].numpy(), GOOD)
        np.testing.assert_array_equal(p["obs", "pos"].numpy(), POS)
        with pytest.raises(UnsupportedDtypeError, match=word) as err:
            p["bad"]
        assert "'bad'" in str(err.value)


def test_inspect_lists_the_node_with_the_library_reason(bad_store, ptd_cli) -> None:
    path, word = bad_store
    run = ptd_cli("inspect", "--json", path)
    assert run.code == 0, run
    entries = {e["key"]: e for e in run.json["entries"]}
    assert set(entries) == {"bad", "good", "obs", "obs/pos"}
    assert entries["bad"]["kind"] == "unsupported"
    assert word in entries["bad"]["reason"]
    assert entries["good"]["kind"] == "tensor"
    assert entries["obs/pos"]["shape"] == [4, 2]
    assert run.json["totals"]["unsupported"] == 1
    table = ptd_cli("inspect", path)
    assert table.code == 0, table
    assert "Traceback" not in table.stdout + table.stderr
    assert "unsupported" in table.stdout
    assert "good" in table.stdout


def test_validate_reports_it_as_unreadable(bad_store, ptd_cli) -> None:
    path, word = bad_store
    run = ptd_cli("validate", "--json", path)
    assert run.code == 1, run
    [report] = run.json["reports"]
    problems = report["problems"]
    assert [(p["key"], p["code"]) for p in problems] == [("bad", "unreadable")]
    assert word in problems[0]["message"]
    assert report["batch_size"] == [4]
    # it is not also a lint finding about a dtype it does not know
    assert all(f["key"] != "bad" for f in report["lint"])
    text = ptd_cli("validate", path)
    assert text.code == 1, text
    assert "Traceback" not in text.stdout + text.stderr, text
    assert "unreadable" in text.stdout


@pytest.mark.parametrize("command", ["convert", "memmap"])
def test_copies_refuse_naming_it_or_skip_it(bad_store, ptd_cli, tmp_path, command) -> None:
    path, word = bad_store
    to = "out.h5" if path.suffix != ".h5" else "out.zarr"
    dst = tmp_path / (to if command == "convert" else "mm")
    run = ptd_cli(command, path, dst)
    assert_one_line_error(run, "'bad'", word, "skip-unsupported")
    assert not dst.exists()
    run = ptd_cli(command, "--skip-unsupported", "--json", path, dst)
    assert run.code == 0, run
    [left] = run.json["not_copied"]
    assert left["key"] == "bad"
    assert word in left["reason"]
    if command == "memmap":
        assert sorted(os.listdir(dst))
        assert not (dst / "bad.memmap").exists()
        return
    if dst.suffix == ".h5":
        with h5py.File(dst, "r") as f:
            assert sorted(f) == ["good", "obs"]
            np.testing.assert_array_equal(f["obs/pos"][()], POS)
    else:
        g = zarr.open_group(str(dst), mode="r")
        assert sorted(k for k, _ in g.members()) == ["good", "obs"]
        np.testing.assert_array_equal(g["good"][...], GOOD)


def test_diff_compares_the_rest(bad_store, ptd_cli, tmp_path) -> None:
    path, _ = bad_store
    # the bad node cannot be compared: listed, and the comparison is not a pass unless allowed
    uncompared = ptd_cli("diff", "--json", path, path)
    assert uncompared.code == 1, uncompared
    assert uncompared.json["same"] is True
    assert [x["key"] for x in uncompared.json["not_compared"]] == ["bad"]
    assert "metadata cannot be read" in uncompared.json["not_compared"][0]["reason"]
    same = ptd_cli("diff", "--allow-uncompared", path, path)
    assert same.code == 0, same
    assert "not compared: 1 leaf" in same.stdout
    copy = tmp_path / "copy.zarr"
    assert ptd_cli("convert", "--skip-unsupported", path, copy).code == 0
    run = ptd_cli("diff", "--json", path, copy)
    assert run.code == 1, run
    assert "Traceback" not in run.stdout + run.stderr
    assert {d["key"] for d in run.json["differences"]} == {"bad"}


def test_a_real_process_prints_no_traceback(tmp_path: Path) -> None:
    # several bad children: zarr's concurrent listing fails on each; asyncio's "never
    # retrieved" reports of the others must not reach the terminal either
    root = tmp_path / "many.zarr"
    v3_store(root, "data_type")
    for name in ("bad2", "bad3"):
        (root / name).mkdir()
        (root / name / "zarr.json").write_text((root / "bad" / "zarr.json").read_text())
    env = {**os.environ, "PYTHONPATH": os.getcwd(), "COLUMNS": "200"}
    for args in (["inspect", str(root)], ["validate", str(root)]):
        out = subprocess.run(
            [sys.executable, "-m", "ptd_cli.main", *args],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
        assert "Traceback" not in out.stderr + out.stdout, out.stderr
        assert "never retrieved" not in out.stderr, out.stderr
        assert "bad3" in out.stdout
