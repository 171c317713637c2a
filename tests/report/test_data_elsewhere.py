"""HDF5 data kept outside the file (a virtual dataset across four files, external raw
storage), made with plain h5py: ``validate --data`` and ``inspect --stats`` name the key and go
on checking the rest, instead of stopping the whole check."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import ptd
from ptd import PersistentTensorDict
from ptd.errors import ArgumentError, UnsupportedOperationError
from ptd.report.validate import validate
from ptd_cli.main import app

h5py = pytest.importorskip("h5py", reason="the files are written with h5py")


def _vds(tmp_path: Path) -> Path:
    layout = h5py.VirtualLayout(shape=(20,), dtype="i4")
    for i in range(4):
        with h5py.File(tmp_path / f"src{i}.h5", "w") as f:
            f["d"] = np.full(5, i, dtype="i4")
        layout[i * 5 : (i + 1) * 5] = h5py.VirtualSource(f"src{i}.h5", "d", shape=(5,))
    path = tmp_path / "vds.h5"
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("elsewhere", layout, fillvalue=-1)
        f["plain"] = np.arange(20)
    return path


def _external(tmp_path: Path) -> Path:
    (tmp_path / "raw.bin").write_bytes(np.arange(20, dtype="<i4").tobytes())
    path = tmp_path / "external.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("elsewhere", shape=(20,), dtype="<i4", external=[("raw.bin", 0, 80)])
        f["plain"] = np.arange(20)
    return path


@pytest.fixture(params=["virtual", "external"])
def elsewhere(request: pytest.FixtureRequest, tmp_path: Path) -> Path:
    return _vds(tmp_path) if request.param == "virtual" else _external(tmp_path)


def test_validate_data_goes_on(elsewhere: Path) -> None:
    report = validate(str(elsewhere), data=True).to_dict()
    text = str(report)
    assert "elsewhere" in text
    assert "outside the file" in text
    assert list(report["stats"]) == ["plain"]  # the rest was checked


@pytest.mark.parametrize("command", [["validate", "--data"], ["inspect", "--stats"]])
def test_cli_names_the_key_and_goes_on(elsewhere: Path, command: list[str]) -> None:
    run = CliRunner().invoke(app, [*command, str(elsewhere)], env={"COLUMNS": "250"})
    assert run.exit_code in (0, 1), run.output
    assert "ptd: error" not in run.stderr
    assert "Traceback" not in run.output
    assert "outside the file" in run.stdout
    assert "plain" in run.stdout
    assert "9.5" in run.stdout  # the plain leaf's mean


# --- the sources named (validate, validate --data, inspect, diff) -------------------------------
SOURCES = {"virtual": ["src0.h5", "src1.h5", "src2.h5", "src3.h5"], "external": ["raw.bin"]}


def _kind(path: Path) -> str:
    return "virtual" if path.name == "vds.h5" else "external"


def test_data_check_names_the_sources_and_the_store_stays_valid(elsewhere: Path) -> None:
    report = validate(str(elsewhere), data=True)
    (problem,) = [p for p in report.problems if p.key == "elsewhere"]
    assert problem.code == "not_checked"
    assert problem.severity == "warning"  # the key is named; the store is not invalid for it
    for name in SOURCES[_kind(elsewhere)]:
        assert name in problem.message
    assert report.valid


def test_plain_validate_notes_the_key_and_its_sources(elsewhere: Path) -> None:
    report = validate(str(elsewhere))
    (problem,) = [p for p in report.problems if p.key == "elsewhere"]
    assert (problem.code, problem.severity) == ("data_elsewhere", "info")
    for name in SOURCES[_kind(elsewhere)]:
        assert name in problem.message
    assert report.valid


@pytest.mark.parametrize("data", [[], ["--data"]])
def test_cli_validate_names_the_sources_in_text_and_json(elsewhere: Path, data: list[str]) -> None:
    runner = CliRunner()
    text = runner.invoke(app, ["validate", *data, str(elsewhere)], env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    as_json = runner.invoke(app, ["validate", *data, "--json", str(elsewhere)])
    assert as_json.exit_code == 0, as_json.output
    doc = json.loads(as_json.stdout)
    (problem,) = [p for p in doc["reports"][0]["problems"] if p["key"] == "elsewhere"]
    assert problem["code"] == ("not_checked" if data else "data_elsewhere")
    for name in SOURCES[_kind(elsewhere)]:
        assert name in text.stdout
        assert name in problem["message"]
    # a field of its own for scripts, not only words in the message
    assert [Path(s).name for s in problem["sources"]] == SOURCES[_kind(elsewhere)]


def test_inspect_shows_where_the_data_is_not_a_ratio(elsewhere: Path) -> None:
    kind = _kind(elsewhere)
    info = ptd.info(str(elsewhere))
    entry = next(e for e in info.entries if e.key == "elsewhere")
    assert (entry.layout, entry.ratio, entry.sources) == (kind, None, SOURCES[kind])
    assert info.totals.ratio == 1.0  # over the data in the file only (the plain leaf)
    run = CliRunner().invoke(app, ["inspect", str(elsewhere)], env={"COLUMNS": "250"})
    assert run.exit_code == 0, run.output
    row = next(line for line in run.stdout.splitlines() if "elsewhere" in line)
    assert kind in row.split()
    assert not re.search(r"\d\.\d\dx", row)
    assert "(1.00x)" in run.stdout


def test_diff_names_the_key_with_its_sources_and_goes_on(elsewhere: Path, tmp_path: Path) -> None:
    other = tmp_path / "copy"
    shutil.copytree(elsewhere.parent, other, ignore=shutil.ignore_patterns("copy"))
    report = ptd.diff(str(elsewhere), str(other / elsewhere.name))
    assert report.same
    (entry,) = report.not_compared
    assert entry["key"] == "elsewhere"
    for name in SOURCES[_kind(elsewhere)]:
        assert name in entry["reason"]
    run = CliRunner().invoke(app, ["diff", str(elsewhere), str(other / elsewhere.name)])
    assert "ptd: error" not in run.stderr
    assert "src" in run.stdout or "raw.bin" in run.stdout


# --- follow_virtual (library) --------------------------------------------------------------------
def test_follow_virtual_reads_sources_beside_the_file(tmp_path: Path) -> None:
    path = _vds(tmp_path)
    with PersistentTensorDict.from_h5(path, follow_virtual=True) as p:
        got = p["elsewhere"]
    assert torch.equal(got, torch.arange(4, dtype=torch.int32).repeat_interleave(5))
    with (
        PersistentTensorDict.from_h5(path) as p,
        pytest.raises(UnsupportedOperationError, match="follow_virtual=True"),
    ):
        p["elsewhere"]


def _vds_from(tmp_path: Path, source: str) -> Path:
    layout = h5py.VirtualLayout(shape=(5,), dtype="i4")
    layout[:] = h5py.VirtualSource(source, "d", shape=(5,))
    path = tmp_path / "in" / "vds.h5"
    with h5py.File(path, "w") as f:
        f.create_virtual_dataset("elsewhere", layout, fillvalue=-1)
    return path


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    (tmp_path / "in").mkdir()
    (tmp_path / "out").mkdir()
    with h5py.File(tmp_path / "out" / "secret.h5", "w") as f:
        f["d"] = np.arange(5, dtype="i4")
    return tmp_path


@pytest.mark.parametrize("how", ["relative", "absolute", "symlink", "missing"])
def test_follow_virtual_refuses_sources_outside_the_directory(outside: Path, how: str) -> None:
    if how == "symlink":
        (outside / "in" / "link.h5").symlink_to(outside / "out" / "secret.h5")
    source = {
        "relative": "../out/secret.h5",
        "absolute": str(outside / "out" / "secret.h5"),
        "symlink": "link.h5",
        "missing": "nothing.h5",
    }[how]
    path = _vds_from(outside, source)
    with (
        PersistentTensorDict.from_h5(path, follow_virtual=True) as p,
        pytest.raises(UnsupportedOperationError) as err,
    ):
        p["elsewhere"]
    assert source in str(err.value)  # the source path is named
    assert ("does not exist" if how == "missing" else "outside") in str(err.value)


def test_follow_virtual_never_reads_external_storage(tmp_path: Path) -> None:
    path = _external(tmp_path)
    with (
        PersistentTensorDict.from_h5(path, follow_virtual=True) as p,
        pytest.raises(UnsupportedOperationError, match=r"raw\.bin"),
    ):
        p["elsewhere"]


def test_follow_virtual_is_refused_where_there_is_no_virtual_data(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match="follow_virtual applies to HDF5 files only"):
        PersistentTensorDict.from_zarr(tmp_path / "x.zarr", mode="w", follow_virtual=True)
    assert not (tmp_path / "x.zarr").exists()


# --- --follow-virtual (command line) -------------------------------------------------------------
def _cli(*args: object) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args], env={"COLUMNS": "300"})


def test_cli_validate_and_inspect_follow_virtual(tmp_path: Path) -> None:
    path = _vds(tmp_path)
    run = _cli("validate", "--data", "--follow-virtual", "--json", path)
    assert run.exit_code == 0, run.output
    stats = json.loads(run.stdout)["reports"][0]["stats"]
    assert stats["elsewhere"]["mean"] == 1.5  # the four sources read: 0,0,..,3
    assert not [p for p in json.loads(run.stdout)["reports"][0]["problems"] if p["key"]]
    run = _cli("inspect", "--stats", "--follow-virtual", "--json", path)
    assert run.exit_code == 0, run.output
    assert json.loads(run.stdout)["stats"]["elsewhere"]["max"] == 3


def test_cli_follow_virtual_still_refuses_sources_outside(outside: Path) -> None:
    path = _vds_from(outside, "../out/secret.h5")
    run = _cli("validate", "--data", "--follow-virtual", path)
    assert run.exit_code == 0, run.output  # named as not checked, the store stays valid
    assert "../out/secret.h5" in run.stdout
    assert "outside" in run.stdout


def test_cli_diff_and_convert_follow_virtual(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr", reason="the copy is read back with zarr-python")
    path = _vds(tmp_path)
    for out in (tmp_path / "o.zarr", tmp_path / "o.h5"):
        run = _cli("convert", "--follow-virtual", "--verify", path, out)
        assert run.exit_code == 0, run.output
        assert "no difference" in run.stdout
        run = _cli("diff", "--follow-virtual", path, out)
        assert run.exit_code == 0, run.output
        assert "2 leaves compared" in run.stdout
    expected = np.repeat(np.arange(4, dtype="i4"), 5)
    np.testing.assert_array_equal(zarr.open_group(tmp_path / "o.zarr")["elsewhere"][...], expected)
    with h5py.File(tmp_path / "o.h5") as f:
        assert f["elsewhere"].id.get_create_plist().get_layout() != h5py.h5d.VIRTUAL
        np.testing.assert_array_equal(f["elsewhere"][...], expected)
    run = _cli("convert", path, tmp_path / "refused.zarr")  # without the option: refused
    assert run.exit_code == 2
    assert "src0.h5" in run.stderr
    assert not (tmp_path / "refused.zarr").exists()


@pytest.mark.parametrize("command", [["validate", "--data"], ["inspect", "--stats"]])
def test_cli_follow_virtual_on_zarr_is_one_error_line(tmp_path: Path, command: list[str]) -> None:
    zarr = pytest.importorskip("zarr", reason="the store is written with zarr-python")
    zarr.create_group(tmp_path / "s.zarr")
    run = _cli(*command, "--follow-virtual", tmp_path / "s.zarr")
    assert run.exit_code == 2
    assert run.stderr.count("ptd: error:") == 1
    assert "follow_virtual applies to HDF5 files only" in run.stderr
    assert "Traceback" not in run.output
