"""``ptd validate``: batch-size checks, metadata, schema, exit codes 0 / 1 / 2."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import zarr

import ptd

from .conftest import ROWS, assert_one_line_error, make_plain_h5, make_plain_zarr, write_ptd

REPORT_FIELDS = {
    "path",
    "format",
    "valid",
    "batch_size",
    "batch_size_source",
    "groups",
    "leaves",
    "problems",
    "group_batches",  # issue 20: every group's batch size and length, with their sources
    "schema",
    "error",
    "data_checked",
    "data_nbytes",
    "data_seconds",
    "seconds",
    "stats",
    "consolidated_stale",
    "lint",
    "layouts",  # issue 37: the groups that follow a known encoding, and which
}


def problems(doc: dict, i: int = 0) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in doc["reports"][i]["problems"]:
        out.setdefault(p["key"], []).append(p)
    return out


def test_valid_store(ptd_cli, ptd_store: Path, fmt: str) -> None:
    run = ptd_cli("validate", ptd_store, "--json")
    assert run.code == 0, run
    doc = run.json
    assert doc["valid"] is True
    (rep,) = doc["reports"]
    assert set(rep) == REPORT_FIELDS
    assert rep["format"] == fmt
    assert rep["batch_size"] == [ROWS]
    assert rep["batch_size_source"] == "stored"
    assert rep["leaves"] == 12
    assert rep["groups"] == 2
    assert rep["problems"] == []
    assert rep["error"] is None
    human = ptd_cli("validate", ptd_store)
    assert human.code == 0
    assert "valid" in human.stdout


def test_wrong_batch_size_lists_each_problem(ptd_cli, ptd_store: Path) -> None:
    run = ptd_cli("validate", ptd_store, "--batch-size", "4", "--json")
    assert run.code == 1, run
    doc = run.json
    assert doc["valid"] is False
    found = problems(doc)
    assert found["obs"][0] == {
        "key": "obs",
        "code": "batch_mismatch",
        "shape": [ROWS, 3],
        "expected": [4],
        "message": found["obs"][0]["message"],
    }
    assert "obs" in found["obs"][0]["message"]
    assert found["label"][0]["code"] == "batch_mismatch"  # a marked string stack counts
    assert found["next"][0]["code"] == "group_batch_mismatch"
    assert "env" not in found  # one value for the whole batch: nothing to check
    human = ptd_cli("validate", ptd_store, "--batch-size", "4")
    assert human.code == 1
    assert "INVALID" in human.stdout
    assert "batch_mismatch" in human.stdout
    assert "[6, 3]" in human.stdout


def test_given_batch_size_that_fits(ptd_cli, tmp_path: Path) -> None:
    path = tmp_path / "a.h5"
    ptd.PersistentTensorDict.from_dict(
        {"x": torch.zeros(4, 3, 2)}, str(path), batch_size=[4]
    ).close()
    assert ptd_cli("validate", path, "--batch-size", "4,3").code == 0
    assert ptd_cli("validate", path, "--batch-size", "[4, 3, 2]").code == 0
    assert ptd_cli("validate", path, "--batch-size", "").code == 0  # no batch dims
    assert ptd_cli("validate", path, "--batch-size", "3").code == 1


def test_stored_metadata_that_does_not_fit(ptd_cli, tmp_path: Path, fmt: str) -> None:
    path = write_ptd(tmp_path / f"a.{fmt}", fmt)
    # a leaf with a different leading dim, added behind ptd's back
    if fmt == "h5":
        with h5py.File(path, "a") as f:
            f.create_dataset("odd", data=np.zeros((5, 2), dtype=np.float32))
    else:
        g = zarr.open_group(str(path), mode="a")
        g.create_array("odd", shape=(5, 2), dtype="float32")
        zarr.consolidate_metadata(str(path))  # ptd's stores have consolidated metadata
    # the stored batch size is ignored, as by PersistentTensorDict.from_h5/from_zarr (one
    # answer: the batch size is inferred), and reported, naming the leaf that does not fit
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    rep = run.json["reports"][0]
    assert (rep["batch_size"], rep["batch_size_source"]) == ([], "inferred")
    found = problems(run.json)
    assert list(found) == [""]
    assert found[""][0]["code"] == "bad_metadata"
    assert "[6]" in found[""][0]["message"]
    assert "'odd' has shape [5, 2]" in found[""][0]["message"]
    # checked against the batch size it should have: that leaf is the one problem
    run = ptd_cli("validate", path, "--batch-size", str(ROWS), "--json")
    assert run.code == 1, run
    found = problems(run.json)
    assert list(found) == ["odd"]
    assert found["odd"][0]["shape"] == [5, 2]
    assert found["odd"][0]["expected"] == [ROWS]


def test_malformed_metadata(ptd_cli, tmp_path: Path) -> None:
    path = write_ptd(tmp_path / "a.h5", "h5")
    with h5py.File(path, "a") as f:
        f["next"].attrs["__tensordict__"] = '{"batch_size": "six"}'
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert problems(run.json)["next"][0]["code"] == "bad_metadata"


def test_inferred_batch_for_foreign_files(ptd_cli, tmp_path: Path) -> None:
    for path in (make_plain_h5(tmp_path / "p.h5"), make_plain_zarr(tmp_path / "p.zarr")):
        run = ptd_cli("validate", path, "--json")
        assert run.code == 0, run
        assert run.json["reports"][0]["batch_size_source"] == "inferred"
        assert run.json["reports"][0]["batch_size"] == [ROWS]


def test_batch_dims(ptd_cli, tmp_path: Path) -> None:
    path = tmp_path / "p.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.zeros((8, 3))
        f["b"] = np.zeros((8, 3, 2))
        f["c"] = np.zeros((7,))
    run = ptd_cli("validate", path, "--batch-dims", "1", "--json")
    assert run.code == 1, run
    rep = run.json["reports"][0]
    assert rep["batch_size"] == [8]
    assert [(p["key"], p["expected"]) for p in rep["problems"]] == [("c", [8])]
    assert ptd_cli("validate", path, "--batch-dims", "0").code == 0


def test_schema(ptd_cli, tmp_path: Path) -> None:
    ref = write_ptd(tmp_path / "ref.h5", "h5", n=6)
    schema = tmp_path / "schema.json"
    schema.write_text(ptd_cli("inspect", ref, "--json").stdout)
    # another store with the same layout and a different batch size: valid
    other = write_ptd(tmp_path / "other.zarr", "zarr", n=9)
    run = ptd_cli("validate", other, "--schema", schema, "--json")
    assert run.code == 0, run
    assert run.json["reports"][0]["schema"] == str(schema)
    # a changed dtype, a changed shape, a missing key and an extra one
    bad = tmp_path / "bad.h5"
    ptd.PersistentTensorDict.from_dict(
        {
            "obs": torch.zeros(6, 4),
            "action": torch.zeros(6, dtype=torch.int32),
            "extra": torch.zeros(6),
        },
        str(bad),
    ).close()
    run = ptd_cli("validate", bad, "--schema", schema, "--json")
    assert run.code == 1, run
    found = problems(run.json)
    assert found["obs"][0]["code"] == "shape_mismatch"
    assert found["obs"][0]["shape"] == [6, 4]
    assert found["obs"][0]["expected"] == ["*", 3]
    assert found["action"][0]["code"] == "dtype_mismatch"
    assert found["action"][0]["expected"] == "int64"
    assert found["extra"][0]["code"] == "unexpected_key"
    assert found["reward"][0]["code"] == "missing_key"
    assert found["next"][0]["code"] == "missing_key"


def test_schema_kind_mismatch_and_depth(ptd_cli, tmp_path: Path) -> None:
    ref = tmp_path / "ref.h5"
    ptd.PersistentTensorDict.from_dict(
        {"a": {"x": torch.zeros(2)}, "b": torch.zeros(2)}, str(ref)
    ).close()
    schema = tmp_path / "s.json"
    schema.write_text(ptd_cli("inspect", ref, "--json", "--depth", "1").stdout)
    other = tmp_path / "o.h5"
    ptd.PersistentTensorDict.from_dict(
        {"a": {"y": torch.zeros(3)}, "b": {"z": torch.zeros(3)}}, str(other)
    ).close()
    run = ptd_cli("validate", other, "--schema", schema, "--json")
    assert run.code == 1
    found = problems(run.json)
    assert list(found) == ["b"]  # a/y is deeper than the schema lists
    assert found["b"][0]["code"] == "kind_mismatch"


def test_multiple_paths_exit_code(ptd_cli, tmp_path: Path) -> None:
    good = write_ptd(tmp_path / "good.h5", "h5")
    missing = tmp_path / "missing.zarr"
    run = ptd_cli("validate", good, missing, "--json")
    assert run.code == 2, run
    doc = run.json
    assert doc["valid"] is False
    assert doc["reports"][0]["valid"] is True
    assert doc["reports"][1]["valid"] is False
    assert str(missing) in doc["reports"][1]["error"]
    # human mode: the unreadable one is one line on stderr; the good one is still reported
    run = ptd_cli("validate", good, missing)
    assert run.code == 2
    assert "valid" in run.stdout
    assert_one_line_error(run, str(missing))
    # problems (1) and valid (0): 1
    assert ptd_cli("validate", good, good, "--batch-size", "3").code == 1


@pytest.mark.parametrize(
    "args",
    [
        ["--batch-size", "a,b"],
        ["--batch-size", "-1"],
        ["--batch-size", "3", "--batch-dims", "1"],
        ["--batch-dims", "-2"],
    ],
)
def test_usage_errors(ptd_cli, ptd_store: Path, args: list[str]) -> None:
    run = ptd_cli("validate", ptd_store, *args)
    assert run.code == 2, run
    assert "Traceback" not in run.stderr


def test_bad_schema_file(ptd_cli, ptd_store: Path, tmp_path: Path) -> None:
    bad = tmp_path / "schema.json"
    bad.write_text("{not json")
    assert_one_line_error(ptd_cli("validate", ptd_store, "--schema", bad), str(bad))
    bad.write_text(json.dumps({"hello": 1}))
    assert_one_line_error(ptd_cli("validate", ptd_store, "--schema", bad), "ptd inspect --json")
    assert_one_line_error(
        ptd_cli("validate", ptd_store, "--schema", tmp_path / "nope.json"), "nope.json"
    )


def test_unreadable_input(ptd_cli, tmp_path: Path) -> None:
    garbage = tmp_path / "g.h5"
    garbage.write_bytes(b"nope" * 50)
    run = ptd_cli("validate", garbage, "--json")
    assert run.code == 2
    assert run.json["reports"][0]["error"]
    assert "Traceback" not in run.stderr


def test_unsupported_dtype_is_a_problem(ptd_cli, tmp_path: Path) -> None:
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", (4,), dtype=h5py.vlen_dtype(np.dtype("i4")))
        f["y"] = np.zeros(4)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1
    assert problems(run.json)["x"][0]["code"] == "unsupported_dtype"


def test_a_table_is_valid_and_noted_once(ptd_cli, tmp_path: Path) -> None:
    # a compound dataset is a valid array of records: no problem, one lint note (L010), and
    # never also the L008 "torch cannot hold it" error
    path = tmp_path / "c.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.zeros(4, dtype=[("a", "i4"), ("b", "f4")])
        f["y"] = np.zeros(4)
    run = ptd_cli("validate", path, "--json")
    assert run.code == 0, run
    assert "x" not in problems(run.json)
    notes = [f for f in run.json["reports"][0]["lint"] if f["key"] == "x"]
    assert [f["code"] for f in notes] == ["L010"], notes
    assert "table (a i4, b f4)" in notes[0]["message"]


def test_library_api(tmp_path: Path) -> None:
    path = write_ptd(tmp_path / "a.zarr", "zarr")
    report = ptd.validate(path, batch_size=[ROWS])
    assert isinstance(report, ptd.ValidationReport)
    assert report.valid
    assert ptd.validate(path, schema=ptd.info(path)).valid


@pytest.mark.interop
def test_tensordict_written_is_valid(ptd_cli, tmp_path: Path, fmt: str) -> None:
    td = pytest.importorskip("tensordict")
    data = td.TensorDict(
        {
            "a": torch.zeros(4, 3),
            "n": {"b": torch.ones(4)},
            "st": td.NonTensorStack(*[td.NonTensorData(c) for c in "wxyz"]),
        },
        batch_size=[4],
    )
    path = tmp_path / f"td.{fmt}"
    td.PersistentTensorDict.from_dict(data, str(path), backend=fmt).close()
    run = ptd_cli("validate", path, "--json")
    assert run.code == 0, run
    assert run.json["reports"][0]["batch_size"] == [4]
    assert ptd_cli("validate", path, "--batch-size", "2").code == 1


def test_unreadable_node_is_a_problem(ptd_cli, tmp_path: Path) -> None:
    path = make_plain_zarr(tmp_path / "p.zarr")  # no consolidated metadata
    (path / "sub" / "flags" / "zarr.json").write_text("{broken")
    run = ptd_cli("validate", path, "--json")
    assert run.code == 1, run
    assert problems(run.json)["sub/flags"][0]["code"] == "unreadable"
    # inspect lists it as an unsupported key, and the rest
    listed = {e["key"]: e for e in ptd_cli("inspect", path, "--json").json["entries"]}
    assert listed["sub/flags"]["kind"] == "unsupported"
    assert "JSONDecodeError" in listed["sub/flags"]["reason"]


def test_storage_options_with_a_local_path(ptd_cli, ptd_store: Path) -> None:
    # one policy: storage options belong to URLs; given with a local path they are an error
    with pytest.raises(ptd.errors.PtdValueError, match="only apply to URLs"):
        ptd.validate(ptd_store, storage_options={"anon": True})
    run = ptd_cli("validate", ptd_store, "-O", "anon=true", "--json")
    assert run.code == 2, run
    assert "only apply to URLs" in run.json["reports"][0]["error"]
