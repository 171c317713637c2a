"""``ptd inspect``: format by content, batch size (stored / inferred), tree, JSON document."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import ptd
from ptd.testing.recording import Call, recording

from .conftest import ROWS, assert_one_line_error, make_plain_h5, make_plain_zarr, write_ptd

ENTRY_FIELDS = {
    "random_row_bytes",
    "key",
    "name",
    "depth",
    "kind",
    "shape",
    "batch_dims",
    "dtype",
    "storage_dtype",
    "chunks",
    "shards",
    "compression",
    "nbytes",
    "stored_nbytes",
    "ratio",
    "non_tensor_kind",
    "stack",
    "batch_size",
    "batch_size_source",
    "stored_batch_size",
    "metadata_problem",
    "attrs",
    "link",
    "reason",
    "fields",
    "pipeline",
    "fill_value",
    "dimension_names",
    "maxshape",
    "resizable",
    "layout",
    "sources",
}
TOP_FIELDS = {
    "format_version",
    "path",
    "inner",
    "format",
    "batch_size",
    "batch_size_source",
    "stored_batch_size",
    "metadata_problem",
    "depth",
    "attrs",
    "entries",
    "totals",
    "zarr_format",
    "userblock_size",
    "skipped",
}
TOTAL_FIELDS = {
    "groups",
    "tensors",
    "non_tensors",
    "tables",
    "references",  # issue 37: columns of HDF5 references, a kind of their own
    "unsupported",
    "nbytes",
    "stored_nbytes",
    "ratio",
    "file_bytes",
}


def by_key(doc: dict) -> dict[str, dict]:
    return {e["key"]: e for e in doc["entries"]}


def test_json_document(ptd_cli, ptd_store: Path, fmt: str) -> None:
    run = ptd_cli("inspect", ptd_store, "--json")
    assert run.code == 0, run
    doc = run.json
    assert set(doc) == TOP_FIELDS
    assert doc["format_version"] == 1
    assert doc["format"] == fmt
    assert doc["batch_size"] == [ROWS]
    assert doc["batch_size_source"] == "stored"
    assert doc["stored_batch_size"] == [ROWS]
    entries = by_key(doc)
    for e in doc["entries"]:
        assert set(e) == ENTRY_FIELDS
    # parents before children, depth first
    keys = [e["key"] for e in doc["entries"]]
    assert (
        keys.index("next")
        < keys.index("next/deep")
        < keys.index("next/deep/z")
        < keys.index("next/obs")
    )
    obs = entries["obs"]
    assert (obs["kind"], obs["shape"], obs["batch_dims"], obs["dtype"]) == (
        "tensor",
        [ROWS, 3],
        1,
        "float32",
    )
    assert obs["nbytes"] == ROWS * 3 * 4
    assert obs["stored_nbytes"] is not None
    assert obs["ratio"] is not None
    assert entries["reward"]["dtype"] == "bfloat16"
    assert entries["reward"]["storage_dtype"] == "uint16"
    assert entries["half"]["dtype"] == "float16"
    assert entries["next/deep/z"]["dtype"] == "complex64"
    assert entries["next/deep/z"]["depth"] == 3
    assert entries["next"]["kind"] == "group"
    assert entries["next"]["batch_size"] == [ROWS]
    assert entries["next"]["batch_size_source"] == "stored"
    label = entries["label"]
    assert (label["kind"], label["non_tensor_kind"], label["stack"], label["shape"]) == (
        "non_tensor",
        "str",
        True,
        [ROWS],
    )
    assert entries["env"]["kind"] == "non_tensor"
    assert entries["env"]["shape"] == []
    totals = doc["totals"]
    assert set(totals) == TOTAL_FIELDS
    assert totals["groups"] == 2
    assert totals["tensors"] == 9
    assert totals["non_tensors"] == 3
    assert totals["nbytes"] == sum(e["nbytes"] for e in doc["entries"] if e["kind"] == "tensor")
    assert totals["file_bytes"] > 0


def test_json_is_stable_and_matches_library(ptd_cli, ptd_store: Path) -> None:
    run = ptd_cli("inspect", ptd_store, "--json")
    assert run.code == 0, run
    assert run.json == json.loads(ptd.info(ptd_store).to_json())


def test_format_detected_by_content(ptd_cli, tmp_path: Path) -> None:
    h5 = write_ptd(tmp_path / "a.h5", "h5")
    z = write_ptd(tmp_path / "a.zarr", "zarr")
    odd_h5 = tmp_path / "data.bin"
    shutil.copy(h5, odd_h5)
    odd_zarr = tmp_path / "store.h5"  # a zarr store with an h5 suffix
    shutil.copytree(z, odd_zarr)
    assert ptd_cli("inspect", odd_h5, "--json").json["format"] == "h5"
    assert ptd_cli("inspect", odd_zarr, "--json").json["format"] == "zarr"


def test_inferred_batch_size_is_marked(ptd_cli, tmp_path: Path) -> None:
    doc = ptd_cli("inspect", make_plain_h5(tmp_path / "p.h5"), "--json").json
    assert doc["batch_size"] == [ROWS]
    assert doc["batch_size_source"] == "inferred"
    assert doc["stored_batch_size"] is None
    e = by_key(doc)
    assert e["x"]["compression"] == "gzip(5)"
    assert e["x"]["chunks"] == [2, 4]
    assert e["names"]["non_tensor_kind"] == "str"
    assert e["names"]["stack"] is False
    assert e["big_endian"]["dtype"] == "int32"
    out = ptd_cli("inspect", tmp_path / "p.h5")
    assert "(inferred)" in out.stdout


def test_plain_zarr(ptd_cli, tmp_path: Path) -> None:
    doc = ptd_cli("inspect", make_plain_zarr(tmp_path / "p.zarr"), "--json").json
    assert doc["format"] == "zarr"
    e = by_key(doc)
    assert e["x"]["compression"] == "zstd(5)"
    assert e["x"]["stored_nbytes"] > 0
    assert e["sub/flags"]["dtype"] == "bool"
    assert e["names"]["kind"] == "non_tensor"


def test_depth_limits_entries_not_totals(ptd_cli, ptd_store: Path) -> None:
    full = ptd_cli("inspect", ptd_store, "--json").json
    top = ptd_cli("inspect", ptd_store, "--json", "--depth", "1").json
    assert top["depth"] == 1
    assert all(e["depth"] == 1 for e in top["entries"])
    assert "next" in by_key(top)
    assert "next/obs" not in by_key(top)
    assert top["totals"] == full["totals"]
    assert ptd_cli("inspect", ptd_store, "--json", "--depth", "0").json["entries"] == []


def test_attrs(ptd_cli, tmp_path: Path) -> None:
    path = make_plain_h5(tmp_path / "p.h5")
    doc = ptd_cli("inspect", path, "--json", "--attrs").json
    assert doc["attrs"] == {"title": "plain h5py", "tags": ["a", "b"]}
    e = by_key(doc)
    assert e["x"]["attrs"] == {"units": "m/s"}
    assert e["sub"]["attrs"] == {"note": "a group"}
    assert ptd_cli("inspect", path, "--json").json["entries"][0]["attrs"] is None
    human = ptd_cli("inspect", path, "--attrs")
    assert "units='m/s'" in human.stdout


def test_human_tree(ptd_cli, ptd_store: Path) -> None:
    run = ptd_cli("inspect", ptd_store)
    assert run.code == 0, run
    out = run.stdout
    assert str(ptd_store) in out
    assert "batch_size=[6] (stored)" in out
    for needle in (
        "obs",
        "bfloat16",
        "next/",
        "deep/",
        "└── ",
        "├── ",
        "[6 ¦ 3]",
        "str stack",
        "total:",
    ):
        assert needle in out, needle
    assert run.stderr == ""


def test_reads_no_array_data(ptd_cli, ptd_store: Path) -> None:
    def refuse(call: Call) -> None:
        if call.op.startswith("read"):
            raise AssertionError(f"inspect read array data: {call}")

    with recording(fault=refuse) as rec:
        run = ptd_cli("inspect", ptd_store, "--json")
        assert run.code == 0, run
        assert ptd_cli("inspect", ptd_store).code == 0
    assert len(rec.backends) == 2  # both commands' stores were watched
    assert rec.reads() == []


@pytest.mark.parametrize("make", ["missing", "garbage", "empty_dir", "plain_dir", "truncated"])
def test_bad_input_one_line_exit_2(ptd_cli, tmp_path: Path, make: str) -> None:
    path = tmp_path / "bad.h5"
    if make == "garbage":
        path.write_bytes(b"this is not an hdf5 file" * 10)
    elif make == "empty_dir":
        path.mkdir()
    elif make == "plain_dir":
        path.mkdir()
        (path / "x.txt").write_text("hi")
    elif make == "truncated":
        good = write_ptd(tmp_path / "good.h5", "h5")
        path.write_bytes(good.read_bytes()[:700])
    run = ptd_cli("inspect", path, "--json")
    assert_one_line_error(run, str(path))
    assert run.stdout == ""


def test_corrupt_zarr_metadata(ptd_cli, tmp_path: Path) -> None:
    z = write_ptd(tmp_path / "a.zarr", "zarr")
    (z / "zarr.json").write_text("{not json")
    assert_one_line_error(ptd_cli("inspect", z), str(z))


def test_debug_shows_traceback(ptd_cli, tmp_path: Path) -> None:
    run = ptd_cli("--debug", "inspect", tmp_path / "missing.h5")
    assert run.code == 2
    assert "Traceback" in run.stderr


def test_negative_depth_is_usage_error(ptd_cli, ptd_store: Path) -> None:
    assert ptd_cli("inspect", ptd_store, "--depth", "-1").code == 2


@pytest.mark.interop
def test_tensordict_written(ptd_cli, tmp_path: Path, fmt: str) -> None:
    td = pytest.importorskip("tensordict")
    import torch

    data = td.TensorDict(
        {
            "a": torch.zeros(4, 3),
            "n": {"b": torch.ones(4, dtype=torch.int16)},
            "s": td.NonTensorData("hi"),
            "st": td.NonTensorStack(*[td.NonTensorData(c) for c in "wxyz"]),
        },
        batch_size=[4],
    )
    path = tmp_path / f"td.{fmt}"
    td.PersistentTensorDict.from_dict(data, str(path), backend=fmt).close()
    doc = ptd_cli("inspect", path, "--json").json
    assert doc["format"] == fmt
    assert doc["batch_size"] == [4]
    e = by_key(doc)
    assert e["n/b"]["dtype"] == "int16"
    assert e["st"]["stack"] is True
    assert e["s"]["kind"] == "non_tensor"


def test_malformed_metadata_is_a_warning(ptd_cli, tmp_path: Path) -> None:
    import h5py

    path = write_ptd(tmp_path / "a.h5", "h5")
    with h5py.File(path, "a") as f:
        f.attrs["__tensordict__"] = json.dumps({"batch_size": ["6"]})
    doc = ptd_cli("inspect", path, "--json").json
    # ignored and inferred, as PersistentTensorDict.from_h5 does; the problem is reported
    assert (doc["batch_size"], doc["batch_size_source"]) == ([ROWS], "inferred")
    assert doc["stored_batch_size"] is None
    assert "no valid batch_size" in doc["metadata_problem"]
    assert by_key(doc)["next"]["metadata_problem"] is None
    run = ptd_cli("inspect", path)
    assert run.code == 0, run
    assert "warning: the __tensordict__ attribute has no valid batch_size" in run.stdout


def test_storage_options_with_a_local_path(ptd_cli, ptd_store: Path) -> None:
    # one policy: storage options belong to URLs; given with a local path they are an error
    with pytest.raises(ptd.errors.PtdValueError, match="only apply to URLs"):
        ptd.info(ptd_store, storage_options={"anon": True})
    assert_one_line_error(
        ptd_cli("inspect", ptd_store, "-O", "anon=true"), "only apply to URLs", str(ptd_store)
    )
