"""``ptd validate`` and ``ptd convert --batch-size/--batch-dims`` on layouts other tools write
(plain h5py / zarr-python): episode files, flat files, links (issue 20)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from tests.cli.conftest import assert_one_line_error
from tests.report.test_length_rule import robomimic, write_plain

LENGTHS = [142, 150, 139, 151, 147]


def test_validate_episode_file(ptd_cli, tmp_path: Path, fmt: str) -> None:
    ok = write_plain(tmp_path / f"ok.{fmt}", fmt, robomimic(LENGTHS))
    bad = write_plain(tmp_path / f"bad.{fmt}", fmt, robomimic(LENGTHS, short=3))
    assert ptd_cli("validate", ok).code == 0
    run = ptd_cli("validate", bad)
    assert run.code == 1, run
    assert "data/demo_3/actions" in run.stdout
    assert "length_mismatch" in run.stdout
    run = ptd_cli("validate", bad, "--json")
    rep = run.json["reports"][0]
    assert [(p["key"], p["code"], p["shape"], p["expected"]) for p in rep["problems"]] == [
        ("data/demo_3/actions", "length_mismatch", [150], [151])
    ]
    groups = {g["key"]: g for g in rep["group_batches"]}
    assert groups["data/demo_3"]["length"] == 151
    assert groups["data/demo_3"]["batch_size_source"] == "inferred"
    # --batch-dims 1: each demo its own batch size (no false problems on the healthy file)
    run = ptd_cli("validate", ok, "--batch-dims", "1", "--json")
    assert run.code == 0, run
    groups = {g["key"]: g for g in run.json["reports"][0]["group_batches"]}
    assert [groups[f"data/demo_{i}"]["batch_size"] for i in range(5)] == [[n] for n in LENGTHS]
    run = ptd_cli("validate", bad, "--batch-dims", "1", "--json")
    assert run.code == 1
    assert [p["key"] for p in run.json["reports"][0]["problems"]] == ["data/demo_3/actions"]


def test_validate_flat_file_and_side_arrays(ptd_cli, tmp_path: Path, fmt: str) -> None:
    tree = {k: np.zeros((5000, 2), np.float32) for k in ("obs", "action", "done")}
    tree["episode_ends"] = np.arange(1, 21) * 250
    assert ptd_cli("validate", write_plain(tmp_path / f"ok.{fmt}", fmt, tree)).code == 0
    tree["reward"] = np.zeros(4999, np.float32)
    run = ptd_cli("validate", write_plain(tmp_path / f"bad.{fmt}", fmt, tree), "--json")
    assert run.code == 1
    assert [p["key"] for p in run.json["reports"][0]["problems"]] == ["reward"]
    # --ignore silences the code
    run = ptd_cli("validate", tmp_path / f"bad.{fmt}", "--ignore", "length_mismatch")
    assert run.code == 0, run


def _links(path: Path, target: Path | None) -> Path:
    with h5py.File(path, "w") as f:
        f["obs"] = np.zeros((20, 2))
        f["missing_file"] = h5py.ExternalLink(str(path.parent / "nowhere.h5"), "/x")
        f["dangling"] = h5py.SoftLink("/no/such/path")
        if target is not None:
            with h5py.File(target, "w") as t:
                t["x"] = np.zeros(3)
            f["existing_file"] = h5py.ExternalLink(str(target), "/x")
    return path


@pytest.mark.parametrize("fmt_out", ["text", "json", "github", "junit", "markdown"])
def test_links_are_warnings_in_every_format(ptd_cli, tmp_path: Path, fmt_out: str) -> None:
    path = _links(tmp_path / "l.h5", tmp_path / "other.h5")
    run = ptd_cli("validate", path, "--format", fmt_out)
    assert run.code == 0, run
    for key in ("missing_file", "dangling", "existing_file"):
        assert key in run.stdout, (key, run)
    assert "skipped_key" in run.stdout
    # at --fail-on warning they fail
    assert ptd_cli("validate", path, "--fail-on", "warning").code == 1
    if fmt_out == "json":
        probs = run.json["reports"][0]["problems"]
        assert {p["severity"] for p in probs} == {"warning"}
        assert run.json["reports"][0]["valid"] is True
    if fmt_out == "github":
        assert "::warning" in run.stdout
        assert "::error" not in run.stdout


@pytest.mark.parametrize("how", [["--batch-size", "5000"], ["--batch-dims", "1"]])
def test_convert_records_the_batch_size(ptd_cli, tmp_path: Path, fmt: str, how: list) -> None:
    src = write_plain(
        tmp_path / "src.h5",
        "h5",
        {k: np.zeros((5000, 2), np.float32) for k in ("obs", "action", "reward")},
    )
    run = ptd_cli("validate", src, "--json")
    lint = run.json["reports"][0]["lint"]
    (l006,) = [f for f in lint if f["code"] == "L006"]
    # the fix names a command that works: run it
    assert "ptd convert SRC DST --batch-size N" in l006["fix"]
    dst = tmp_path / f"dst.{fmt}"
    assert ptd_cli("convert", src, dst, *how).code == 0
    run = ptd_cli("validate", dst, "--json")
    rep = run.json["reports"][0]
    assert run.code == 0
    assert rep["batch_size"] == [5000]
    assert rep["batch_size_source"] == "stored"
    assert "L006" not in {f["code"] for f in rep["lint"]}


def test_convert_batch_dims_per_group_on_an_episode_file(ptd_cli, tmp_path: Path, fmt: str) -> None:
    src = write_plain(tmp_path / f"src.{fmt}", fmt, robomimic(LENGTHS))
    dst = tmp_path / "dst.zarr"
    assert ptd_cli("convert", src, dst, "--batch-dims", "1").code == 0
    run = ptd_cli("validate", dst, "--json")
    assert run.code == 0, run
    groups = {g["key"]: g for g in run.json["reports"][0]["group_batches"]}
    assert groups["data/demo_1"] == {
        "key": "data/demo_1",
        "batch_size": [150],
        "batch_size_source": "stored",
        "length": None,
        "length_source": None,
    }
    assert "L006" not in {f["code"] for f in run.json["reports"][0]["lint"]}


def test_convert_refuses_a_batch_size_that_does_not_fit(ptd_cli, tmp_path: Path) -> None:
    src = write_plain(tmp_path / "bad.h5", "h5", robomimic(LENGTHS, short=3))
    run = ptd_cli("convert", src, tmp_path / "o.zarr", "--batch-dims", "1")
    assert_one_line_error(run, "data/demo_3/actions", "--batch-dims 1")
    assert not (tmp_path / "o.zarr").exists()
    run = ptd_cli("convert", src, tmp_path / "o.zarr", "--batch-size", "7")
    assert_one_line_error(run, "--batch-size 7", "does not start with")
    run = ptd_cli("convert", src, tmp_path / "o.zarr", "--batch-size", "7", "--batch-dims", "1")
    assert_one_line_error(run, "--batch-size and --batch-dims")
    run = ptd_cli("convert", src, tmp_path / "o.zarr", "--batch-size", "x")
    assert_one_line_error(run, "--batch-size")
