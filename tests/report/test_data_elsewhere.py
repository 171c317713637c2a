"""HDF5 data kept outside the file (a virtual dataset across four files, external raw
storage), made with plain h5py: ``validate --data`` and ``inspect --stats`` name the key and go
on checking the rest, instead of stopping the whole check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

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
