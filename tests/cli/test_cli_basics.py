"""The CLI's global options: --version and --help."""

from __future__ import annotations

import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from ptd_cli.main import CliState, app, get_version, main

runner = CliRunner()


@pytest.fixture(autouse=True)
def _wide_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    # Rich wraps help text to the terminal width; keep it wide and colourless for assertions
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("FORCE_COLOR", raising=False)


def test_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"ptd {get_version()}"
    # then the libraries a bug report needs, one per line
    names = [ln.split()[0] for ln in lines[1:]]
    assert {"python", "h5py", "hdf5", "zarr", "numcodecs", "hdf5plugin", "numpy", "torch"} <= set(
        names
    )


def test_version_is_not_empty() -> None:
    version = get_version()
    assert version
    assert version[0].isdigit()


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help(flag: str) -> None:
    result = runner.invoke(app, [flag])
    assert result.exit_code == 0, result.output
    assert "ptd" in result.output
    assert "--version" in result.output
    assert "--debug" in result.output


def test_no_args_shows_help() -> None:
    result = runner.invoke(app, [])
    # click's no_args_is_help exits with 0 (click < 8.2) or 2 (click >= 8.2); both print usage
    assert result.exit_code in (0, 2), result.output
    assert "Usage" in result.output
    assert "ptd" in result.output


def test_import_does_not_load_the_library() -> None:
    # `ptd --help` must stay fast: importing the CLI must not import torch, numpy, h5py, zarr or
    # the library, nor the progress bar (drawn by convert/memmap only)
    code = (
        "import sys, ptd_cli.main; "
        "heavy = [m for m in ('torch', 'numpy', 'h5py', 'zarr', 'ptd', 'rich.progress') "
        "if m in sys.modules]; "
        "print(','.join(heavy))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == ""


@pytest.mark.parametrize(("args", "expected"), [([], "debug=False"), (["--debug"], "debug=True")])
def test_debug_flag_reaches_commands(args: list[str], expected: str) -> None:
    # a throwaway app with the real callback, so the shared `app` gets no test command

    probe = typer.Typer()
    probe.callback()(main)

    @probe.command()
    def show(ctx: typer.Context) -> None:
        assert isinstance(ctx.obj, CliState)
        typer.echo(f"debug={ctx.obj.debug}")

    result = runner.invoke(probe, [*args, "show"])
    assert result.exit_code == 0, result.output
    assert result.output.strip() == expected
