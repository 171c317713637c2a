"""Tables (HDF5 compound types, zarr structured arrays) and leaves of every kind: one story in
inspect, validate, convert and diff, and ``diff`` / ``convert --verify`` see one changed value
of any leaf. Fixtures are written with plain h5py / zarr-python."""

from __future__ import annotations

import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

from .conftest import assert_one_line_error

N = 500
TABLE = np.dtype([("t", "<f8"), ("id", "<i4"), ("v", "<f4")])


def _columns() -> dict[str, np.ndarray]:
    rec = np.zeros(N, TABLE)
    rec["t"] = np.arange(N) * 0.5
    rec["id"] = np.arange(N) % 7
    rec["v"] = np.where(np.arange(N) % 3 == 0, np.nan, 1.5)
    return {
        "table": rec,
        "names": np.array([f"step-{i}" for i in range(N)], dtype="S12"),
        "done": np.arange(N) % 5 == 0,
        "reward": np.where(np.arange(N) % 4 == 0, np.nan, np.arange(N, dtype="f8")),
        "obs": np.arange(N * 3, dtype="f4").reshape(N, 3),
    }


def write_store(path: Path, fmt: str, cols: dict[str, np.ndarray] | None = None) -> Path:
    cols = _columns() if cols is None else cols
    if fmt == "h5":
        with h5py.File(path, "w") as f:
            for name, data in cols.items():
                f.create_dataset(name, data=data, chunks=(100,) + data.shape[1:])
    else:
        root = zarr.open_group(path, mode="w", zarr_format=3)
        for name, data in cols.items():
            root.create_array(name, data=data, chunks=(100,) + data.shape[1:])
    return path


def _changed(kind: str) -> tuple[dict[str, np.ndarray], str, str | None]:
    """The columns with ONE value changed in a leaf of ``kind``: (columns, key, field)."""
    cols = _columns()
    if kind == "table-int-field":
        cols["table"]["id"][123] += 1
        return cols, "table", "id"
    if kind == "table-nan-field":  # a NaN of a float field becomes a number
        cols["table"]["v"][3] = 0.0
        return cols, "table", "v"
    if kind == "string":
        cols["names"][42] = b"step-x"
        return cols, "names", None
    if kind == "bool":
        cols["done"][7] = not cols["done"][7]
        return cols, "done", None
    if kind == "nan-float":  # a number becomes NaN
        cols["reward"][1] = np.nan
        return cols, "reward", None
    raise AssertionError(kind)


KINDS = ["table-int-field", "table-nan-field", "string", "bool", "nan-float"]


@pytest.mark.parametrize("kind", KINDS)
def test_diff_sees_one_changed_value(ptd_cli, tmp_path: Path, fmt: str, kind: str) -> None:
    suffix = ".h5" if fmt == "h5" else ".zarr"
    a = write_store(tmp_path / f"a{suffix}", fmt)
    cols, key, field = _changed(kind)
    b = write_store(tmp_path / f"b{suffix}", fmt, cols)
    run = ptd_cli("diff", "--json", "--equal-nan", a, b)
    assert run.code == 1, run
    diffs = run.json["differences"]
    assert [(d["key"], d["field"]) for d in diffs] == [(key, field)], diffs
    if diffs[0]["kind"] == "values_differ":
        assert diffs[0]["count"] == 1
        assert diffs[0]["first_rows"] == [
            {"table-int-field": 123, "table-nan-field": 3, "bool": 7, "nan-float": 1}[kind]
        ]
    else:  # a string column is a non-tensor: compared as values
        assert diffs[0]["kind"] == "non_tensor_differs", diffs
    # and the text report names the key (and the field) too
    text = ptd_cli("diff", "--equal-nan", a, b)
    assert text.code == 1
    assert key in text.stdout
    if field:
        assert f"field {field!r}" in text.stdout


@pytest.mark.parametrize("kind", KINDS)
def test_diff_across_formats_sees_one_changed_value(ptd_cli, tmp_path: Path, kind: str) -> None:
    a = write_store(tmp_path / "a.h5", "h5")
    cols, key, field = _changed(kind)
    b = write_store(tmp_path / "b.zarr", "zarr", cols)
    run = ptd_cli("diff", "--json", "--equal-nan", a, b)
    assert run.code == 1, run
    assert [(d["key"], d["field"]) for d in run.json["differences"]] == [(key, field)]
    same = ptd_cli("diff", "--json", "--equal-nan", a, write_store(tmp_path / "c.zarr", "zarr"))
    assert same.code == 0, same
    assert same.json["same"], same
    assert same.json["leaves_compared"] == 4  # table, done, reward, obs (names: a non-tensor)


def test_nan_equals_nan_only_when_asked(ptd_cli, tmp_path: Path, fmt: str) -> None:
    a = write_store(tmp_path / ("a.h5" if fmt == "h5" else "a.zarr"), fmt)
    run = ptd_cli("diff", "--json", a, a)
    assert run.code == 1
    by_key = {(d["key"], d["field"]): d for d in run.json["differences"]}
    assert set(by_key) == {("reward", None), ("table", "v")}
    assert all(d["count"] == d["both_nan"] for d in by_key.values())
    text = ptd_cli("diff", a, a)
    assert "NaN on both sides: --equal-nan" in text.stdout
    assert ptd_cli("diff", "--equal-nan", a, a).code == 0


@pytest.mark.parametrize(("src_fmt", "dst_fmt"), [("h5", "zarr"), ("zarr", "h5"), ("h5", "h5")])
def test_convert_verify_passes_nan_and_tables(
    ptd_cli, tmp_path: Path, src_fmt: str, dst_fmt: str
) -> None:
    src = write_store(tmp_path / ("s.h5" if src_fmt == "h5" else "s.zarr"), src_fmt)
    dst = tmp_path / ("d.h5" if dst_fmt == "h5" else "d.zarr")
    run = ptd_cli("convert", "--json", "--verify", "--to", dst_fmt, src, dst)
    assert run.code == 0, run
    assert run.json["verify"]["verified"] is True
    assert run.json["verify"]["equal_nan"] is True
    assert run.json["verify"]["leaves_compared"] == 4
    assert run.json["tables"] == 1
    assert run.json["tensors"] == 3
    # the records came through: plain readers see them
    if dst_fmt == "h5":
        with h5py.File(dst, "r") as f:
            back = f["table"][()]
    else:
        back = zarr.open_group(dst, mode="r")["table"][...]
    want = _columns()["table"]
    assert back.dtype.names == want.dtype.names
    np.testing.assert_array_equal(back["id"], want["id"])
    np.testing.assert_array_equal(back["v"], want["v"])  # NaN where NaN
    strict = ptd_cli("convert", "--verify", "--no-equal-nan", "--overwrite", src, dst)
    assert strict.code == 1, strict
    assert "values_differ" in strict.stdout
    assert "'v'" in strict.stdout


def test_zarr_destination_notes_the_structured_type(ptd_cli, tmp_path: Path) -> None:
    src = write_store(tmp_path / "s.h5", "h5")
    run = ptd_cli("convert", "--json", src, tmp_path / "d.zarr")
    assert run.code == 0, run
    notes = [n for n in run.json["notes"] if "structured" in n]
    assert len(notes) == 1, run.json["notes"]
    plan = {p["key"]: p for p in run.json["plan"]}
    assert plan["table"]["kind"] == "table"
    assert plan["table"]["dtype"] == "table (t f8, id i4, v f4)"


def test_verify_tolerances_need_verify(ptd_cli, tmp_path: Path) -> None:
    src = write_store(tmp_path / "s.h5", "h5")
    for args in (["--rtol", "0.1"], ["--no-equal-nan"], ["--allow-uncompared"]):
        run = ptd_cli("convert", *args, src, tmp_path / "d.zarr")
        assert_one_line_error(run, args[0], "--verify")
        assert not (tmp_path / "d.zarr").exists()
    run = ptd_cli("convert", "--verify", "--rtol", "-1", src, tmp_path / "d.zarr")
    assert run.code == 2
    assert not (tmp_path / "d.zarr").exists()


def test_tolerances_reach_the_verify(ptd_cli, tmp_path: Path) -> None:
    src = write_store(tmp_path / "s.h5", "h5")
    run = ptd_cli("convert", "--json", "--verify", "--rtol", "0.5", "--atol", "2", src)
    assert run.code == 0, run
    assert run.json["verify"]["rtol"] == 0.5
    assert run.json["verify"]["atol"] == 2.0


def test_inspect_and_validate_say_the_same(ptd_cli, tmp_path: Path, fmt: str) -> None:
    path = write_store(tmp_path / ("a.h5" if fmt == "h5" else "a.zarr"), fmt)
    doc = ptd_cli("inspect", "--json", path).json
    (entry,) = [e for e in doc["entries"] if e["key"] == "table"]
    assert entry["kind"] == "table"
    assert entry["reason"] == "table (t f8, id i4, v f4)"
    assert [f["name"] for f in entry["fields"]] == ["t", "id", "v"]
    assert entry["nbytes"] == N * TABLE.itemsize
    assert doc["totals"]["tables"] == 1
    assert doc["totals"]["unsupported"] == 0
    text = ptd_cli("inspect", path)
    assert "table (t f8, id i4, v f4)" in text.stdout
    assert "1 table" in text.stdout
    assert "unsupported" not in text.stdout
    run = ptd_cli("validate", "--format", "github", path)
    assert run.code == 0, run
    lines = [ln for ln in run.stdout.splitlines() if "(table)" in ln]
    assert len(lines) == 1, run.stdout
    assert lines[0].startswith("::notice"), run.stdout


def test_tables_of_other_fields_differ_in_dtype(ptd_cli, tmp_path: Path) -> None:
    a = write_store(tmp_path / "a.h5", "h5")
    cols = _columns()
    other = np.zeros(N, [("t", "<f8"), ("idx", "<i4"), ("v", "<f4")])
    cols["table"] = other
    b = write_store(tmp_path / "b.h5", "h5", cols)
    run = ptd_cli("diff", "--json", "--equal-nan", a, b)
    assert run.code == 1
    (d,) = run.json["differences"]
    assert d["kind"] == "dtype_differs"
    assert "idx i4" in d["b"]


def test_a_leaf_not_compared_fails_unless_allowed(ptd_cli, tmp_path: Path) -> None:
    path = tmp_path / "v.h5"
    with h5py.File(path, "w") as f:
        f["x"] = np.arange(10.0)
        seq = f.create_dataset("seq", (10,), dtype=h5py.vlen_dtype(np.dtype("i4")))
        seq[0] = np.arange(3, dtype="i4")
    other = tmp_path / "w.h5"
    shutil.copy(path, other)
    run = ptd_cli("diff", "--json", path, other)
    assert run.code == 1, run
    assert run.json["same"] is True
    assert [x["key"] for x in run.json["not_compared"]] == ["seq"]
    assert "variable-length" in run.json["not_compared"][0]["reason"]
    allowed = ptd_cli("diff", "--allow-uncompared", path, other)
    assert allowed.code == 0
    assert "not compared: 1 leaf" in allowed.stdout


def test_verify_accepts_keys_skipped_on_purpose(ptd_cli, tmp_path: Path) -> None:
    cols = _columns()
    rec = np.zeros(N, [("t", "<f8"), ("label", "S4")])  # a string field: zarr cannot hold it
    cols["labels"] = rec
    src = write_store(tmp_path / "s.h5", "h5", cols)
    refused = ptd_cli("convert", src, tmp_path / "d.zarr")
    assert_one_line_error(refused, "labels")
    run = ptd_cli("convert", "--json", "--verify", "--skip-unsupported", src, tmp_path / "d.zarr")
    assert run.code == 0, run
    assert [x["key"] for x in run.json["verify"]["left_out"]] == ["labels"]
    assert run.json["verify"]["differences"] == []
    # h5 holds it: copied and compared field by field
    run = ptd_cli("convert", "--json", "--verify", src, tmp_path / "d.h5")
    assert run.code == 0, run
    assert run.json["verify"]["leaves_compared"] == 5, run
