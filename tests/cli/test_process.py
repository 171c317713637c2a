"""``ptd`` as a process, as people run it: ``python -m ptd``, ``--version``, one
line per usage error, global options after the command, closed pipes, SIGTERM's exit status,
help without Python type names. Run through real subprocesses (the console script's code path:
:func:`ptd_cli.main.run`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from ptd_cli.main import hoist_global_options

ENV = {**os.environ, "PYTHONPATH": os.getcwd(), "COLUMNS": "100", "NO_COLOR": "1"}


def ptd(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptd", *map(str, args)],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
        input=stdin,
        timeout=120,
    )


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("p") / "many.h5"
    with h5py.File(path, "w") as f:
        for i in range(2000):
            f[f"x{i:04d}"] = np.zeros(3)
        f.create_dataset("seq", (3,), dtype=h5py.vlen_dtype(np.dtype("i4")))  # a problem
    return path


def test_python_m_ptd_and_version() -> None:
    run = ptd("--version")
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("ptd ")
    names = {ln.split()[0] for ln in lines[1:]}
    assert {"python", "h5py", "hdf5", "zarr", "numcodecs", "hdf5plugin", "numpy", "torch"} <= names
    doc = json.loads(ptd("version", "--json").stdout)
    assert doc["hdf5"]
    assert doc["zarr"]
    assert doc["ptd"] == lines[0].split()[1]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["inspect", "x.h5", "--bogus"], "No such option: --bogus"),
        (["inspct", "x.h5"], "No such command 'inspct'"),
        (["convert", "x.h5", "y.zarr", "--to", "foo"], "'--to'"),
        (["inspect", "x.h5", "--depth", "zero"], "'--depth'"),
        (["validate", "x.h5", "--ignore", "L999"], "unknown code L999"),
    ],
)
def test_usage_errors_are_one_line(args: list[str], needle: str) -> None:
    run = ptd(*args)
    assert run.returncode == 2, run
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("ptd: error: "), run.stderr
    assert needle in lines[0]
    assert "╭" not in run.stderr
    assert "Traceback" not in run.stderr
    assert run.stdout == ""


def test_unknown_destination_suffix_is_refused(tmp_path: Path, many: Path) -> None:
    run = ptd("convert", many, tmp_path / "out.txt")
    assert run.returncode == 2
    assert "'.txt'" in run.stderr
    assert ".zarr" in run.stderr
    assert not (tmp_path / "out.txt").exists()
    assert (
        ptd("convert", "--to", "zarr", "--skip-unsupported", many, tmp_path / "out.txt").returncode
        == 0
    )


def test_global_options_after_the_command(many: Path) -> None:
    assert hoist_global_options(["inspect", "a", "--debug", "--", "--quiet"]) == [
        "--debug", "inspect", "a", "--", "--quiet",
    ]  # fmt: skip
    for flag in ("--debug", "--quiet", "--no-color"):
        run = ptd("inspect", many, flag)
        assert run.returncode == 0, (flag, run.stderr)


@pytest.mark.parametrize(("args", "code"), [(["inspect"], 0), (["validate", "--expand"], 1)])
def test_a_closed_pipe_ends_quietly(many: Path, args: list[str], code: int) -> None:
    # `ptd ... | head -1`: the reader goes away after one line
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptd", *args, str(many)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()  # as head does
    err = proc.stderr.read().decode()
    proc.stderr.close()
    assert proc.wait(timeout=60) == code, err
    assert first, err
    assert err == "", err


def test_json_to_a_closed_pipe(many: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptd", "inspect", "--json", str(many)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=ENV,
    )
    assert proc.stdout is not None
    assert proc.stderr is not None
    proc.stdout.read(10)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0
    assert err == b""


@pytest.mark.parametrize(
    "command", ["", "inspect", "convert", "validate", "diff", "memmap", "demo"]
)
def test_help_has_no_python_type_names(command: str) -> None:
    run = ptd(*([command] if command else []), "-h")
    assert run.returncode == 0, run.stderr
    found = re.findall(r"<(bool|str|int|float|list\[[a-z]+\]|path)>", run.stdout)
    assert found == [], found


# --------------------------------------------------- library words in the library, CLI's here
def test_errors_name_the_fix_in_each_ones_own_terms(tmp_path: Path, many: Path) -> None:
    import ptd as library
    from ptd.errors import Option, StoreExistsError

    dst = tmp_path / "o.zarr"
    dst.mkdir()
    (dst / "zarr.json").write_text("{}")
    with pytest.raises(StoreExistsError) as info:
        library.convert(many, dst)
    assert "pass overwrite=True to replace it" in str(info.value)
    assert "--" not in str(info.value)
    assert info.value.options == (Option("overwrite"),)
    assert info.value.path == str(dst)
    run = ptd("convert", str(many), str(dst))
    assert run.returncode == 2
    assert run.stderr.splitlines() == [
        f"ptd: error: {dst} already exists; pass --overwrite to replace it"
    ]
    mm = tmp_path / "o.mm"
    mm.mkdir()
    (mm / "x").write_text("x")
    run = ptd("memmap", "--skip-unsupported", str(many), str(mm))
    assert run.stderr.splitlines() == [
        f"ptd: error: {mm} already exists and is not empty: pass --overwrite to replace it"
    ]
    run = ptd(
        "convert", str(many), str(tmp_path / "p.zarr"), "--compression", "none", "--level", "3"
    )
    assert run.returncode == 2
    assert len(run.stderr.splitlines()) == 1
    assert run.stderr.rstrip().endswith(": --level 3 does not apply to compression 'none'")


def test_no_temporary_names_in_messages(
    tmp_path: Path, many: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ptd.containers.memmap import export_memmap, writer
    from ptd.errors import StoreIOError

    def refused(self: object, src: object, key: str, path: str, *args: object) -> None:
        raise PermissionError(13, "Permission denied", path)  # a file inside the temporary

    monkeypatch.setattr(writer._Writer, "_write_file", refused)
    dst = tmp_path / "x.mm"
    with pytest.raises(StoreIOError) as info:
        export_memmap(many, dst, skip_unsupported=True)
    assert ".ptd-tmp-" not in str(info.value), info.value
    assert str(info.value).startswith(f"cannot write the memmap directory {dst}: Permission denied")
    assert os.listdir(tmp_path) == []


def test_the_same_options_have_the_same_short_flags() -> None:
    """An option that several commands share is spelled alike on each, short flag included."""
    from ptd_cli.main import cli_command

    spelled: dict[str, set[tuple[str, ...]]] = {}
    for command in cli_command().commands.values():
        for param in command.params:
            longs = tuple(o for o in param.opts if o.startswith("--"))
            if longs:
                spelled.setdefault(longs[0], set()).add(tuple(sorted(param.opts)))
    for option, forms in spelled.items():
        assert len(forms) == 1, (option, forms)
    assert ("-w", "--workers") in {tuple(sorted(f, key=len)) for f in spelled["--workers"]}
