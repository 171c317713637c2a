"""ptd reaches zarr's private API through one module, which checks zarr's version first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import zarr

from ptd.errors import PtdError, UntestedDependencyError
from ptd.storage.zarr import version as zarr_version
from ptd.storage.zarr.version import TESTED_ZARR, UNTESTED_ENV, check_version
from ptd.storage.zarr.version import tested as is_tested


def test_the_installed_zarr_is_tested() -> None:
    assert is_tested(zarr.__version__), zarr.__version__
    check_version()  # no error, no warning (warnings are errors in this suite)


@pytest.mark.parametrize(
    ("version", "ok"),
    [("3.1.1", False), ("3.1.2", True), ("3.1.6", True), ("3.1.99", True), ("3.2.0", False),
     ("3.2.0rc1", False), ("4.0.0", False), ("2.18.7", False)],
)  # fmt: skip
def test_the_tested_range(version: str, ok: bool) -> None:
    assert is_tested(version) is ok
    assert TESTED_ZARR == ("3.1.2", "3.2")


def test_an_untested_zarr_is_refused_with_the_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(UNTESTED_ENV, raising=False)
    with pytest.raises(UntestedDependencyError) as info:
        check_version("3.2.0")
    err = info.value
    assert isinstance(err, PtdError)
    assert isinstance(err, ImportError)
    text = str(err)
    assert "zarr 3.2.0 is installed" in text
    assert "zarr >=3.1.2,<3.2" in text
    assert "pip install 'zarr>=3.1.2,<3.2'" in text
    assert f"{UNTESTED_ENV}=1" in text


def test_an_untested_zarr_can_be_tried_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UNTESTED_ENV, "1")
    with pytest.warns(RuntimeWarning, match="trying anyway"):
        zarr_version.check_version("3.2.0")


def _run(
    code: str, tmp_path: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    import os

    full = {k: v for k, v in os.environ.items() if k != UNTESTED_ENV}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=full,
        timeout=120,
    )  # fmt: skip


# the child pretends its zarr is a newer release before ptd imports anything of zarr's
_PRETEND = "import zarr; zarr.__version__ = '3.2.0'\n"


def test_the_cli_says_so_in_one_line_and_h5_keeps_working(tmp_path: Path) -> None:
    import h5py

    store = zarr.open_group(str(tmp_path / "s.zarr"), mode="w")
    store.create_array("x", shape=(4,), dtype="f4")[:] = np.arange(4, dtype="f4")
    with h5py.File(tmp_path / "f.h5", "w") as f:
        f["x"] = np.arange(4.0)
    cli = (
        _PRETEND
        + "import sys; from ptd_cli.main import run; sys.argv = ['ptd'] + sys.argv[1:]; run()"
    )
    got = _run(cli.replace("sys.argv[1:]", "['inspect', 's.zarr']"), tmp_path)
    assert got.returncode != 0
    lines = [ln for ln in got.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, got.stderr
    assert lines[0].startswith("ptd: error: s.zarr: zarr 3.2.0 is installed"), got.stderr
    assert "Traceback" not in got.stderr
    ok = _run(cli.replace("sys.argv[1:]", "['inspect', 'f.h5']"), tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "x" in ok.stdout
