"""``ptd memmap`` and ``ptd demo``."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from ptd.containers.memmap import load_memmap

from .conftest import ROWS, assert_one_line_error, plain, read_all, write_ptd


def test_memmap_export(ptd_cli, ptd_store: Path, tmp_path: Path) -> None:
    dst = tmp_path / "out.memmap"
    run = ptd_cli("memmap", ptd_store, dst, "--json")
    assert run.code == 0, run
    doc = run.json
    assert doc["path"] == str(dst)
    assert doc["leaves"] == 9
    assert doc["nbytes"] > 0
    loaded = load_memmap(str(dst))
    src = read_all(ptd_store)
    assert torch.equal(loaded["obs"], src["obs"])
    assert loaded["reward"].dtype == torch.bfloat16
    assert plain(loaded["label"]) == [f"row-{i}" for i in range(ROWS)]
    human = ptd_cli("memmap", ptd_store, tmp_path / "again.memmap")
    assert human.code == 0
    assert "memmap" in human.stdout


def test_memmap_refuses_existing(ptd_cli, ptd_store: Path, tmp_path: Path) -> None:
    dst = tmp_path / "out.memmap"
    dst.mkdir()
    (dst / "keep.txt").write_text("mine")
    assert_one_line_error(ptd_cli("memmap", ptd_store, dst), str(dst))
    assert os.listdir(dst) == ["keep.txt"]
    assert ptd_cli("memmap", ptd_store, dst, "--overwrite").code == 0
    assert "keep.txt" not in os.listdir(dst)


def test_memmap_bad_source(ptd_cli, tmp_path: Path) -> None:
    assert_one_line_error(ptd_cli("memmap", tmp_path / "nope.h5", tmp_path / "out"), "nope.h5")
    assert not (tmp_path / "out").exists()


@pytest.mark.interop
def test_memmap_read_by_tensordict(ptd_cli, tmp_path: Path) -> None:
    td = pytest.importorskip("tensordict")
    src = write_ptd(tmp_path / "a.h5", "h5")
    dst = tmp_path / "a.memmap"
    assert ptd_cli("memmap", src, dst).code == 0
    loaded = td.TensorDict.load_memmap(str(dst))
    assert torch.equal(loaded["obs"], read_all(src)["obs"])
    assert loaded["next", "step"].dtype == torch.int32


def test_demo_temporary(ptd_cli) -> None:
    run = ptd_cli("demo")
    assert run.code == 0, run
    for step in (
        "1. build",
        "2. inspect",
        "3. convert",
        "4. validate",
        "5. export",
        "round trip",
        "values and dtypes equal",
    ):
        assert step in run.stdout, step
    assert "INVALID" in run.stdout  # the deliberate wrong batch size
    assert "Traceback" not in run.stdout + run.stderr
    # the closing line is true: the temporary directory it names as removed is gone
    last = run.stdout.strip().splitlines()[-1]
    assert last.startswith("done: the files were in a temporary directory, removed now"), last
    root = next(ln for ln in run.stdout.splitlines() if ln.startswith("working in "))[11:]
    assert not os.path.exists(root.strip())


def test_demo_keeps_files_in_dir(ptd_cli, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    run = ptd_cli("demo", out)
    assert run.code == 0, run
    assert run.stdout.strip().splitlines()[-1] == f"done: the files are in {out}"
    names = set(os.listdir(out))
    assert {"demo.h5", "demo.zarr", "demo-roundtrip.h5", "demo.memmap", "demo-schema.json"} <= names
    assert not any(n.startswith(".") for n in names)
    # a second run replaces the demo's own files
    assert ptd_cli("demo", out).code == 0
    assert (
        ptd_cli(
            "validate", out / "demo.h5", out / "demo.zarr", "--schema", out / "demo-schema.json"
        ).code
        == 0
    )


def test_demo_dir_is_a_file(ptd_cli, tmp_path: Path) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert_one_line_error(ptd_cli("demo", f), str(f))
