"""A format of the test's own, added as one registry entry and one module
(:mod:`ptd.testing.npy_format`, a directory of ``.npy`` files): the whole backend contract, then
``convert`` (h5 -> npy -> zarr), ``diff``, ``validate``, ``info`` and the command line take it
as they take HDF5 and Zarr. The entry is registered for each test and taken out after, so
nothing leaks into other tests (under xdist or not)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path as FsPath
from typing import Any

import h5py
import numpy as np
import pytest
from typer.testing import CliRunner

import ptd
from ptd.errors import UnsupportedOperationError
from ptd.storage.registry import (
    counterpart,
    detect_backend,
    format_of_suffix,
    registered,
    writable_formats,
)
from ptd.testing.backend_contract import BackendContract
from ptd.testing.npy_format import ENTRY, MARKER, NpyDirBackend
from ptd_cli.main import app

ROWS = 50


@pytest.fixture
def npy() -> Iterator[None]:
    with registered(ENTRY):
        yield


@pytest.mark.usefixtures("npy")
class TestNpyDirBackend(BackendContract):
    backend_cls = NpyDirBackend
    backend_name = "npy"
    suffix = ".npyd"

    def compressed_options(self) -> dict[str, Any]:
        return {}  # the format compresses nothing (its policy says so)

    def make_corrupt(self, path: FsPath) -> None:
        path.mkdir()
        (path / MARKER).write_text('{"format": ')

    def write_string_columns(self, path: FsPath) -> tuple[list[Any], list[Any]]:
        np.save(path / "col.npy", np.array([b"a", b"bc", b"d"]))
        np.save(path / "vcol.npy", np.array(["x", "y", "z"]))
        return [b"a", b"bc", b"d"], ["x", "y", "z"]


def test_the_entry_is_undone_after_each_test() -> None:
    """Without the fixture the format is unknown: registered() took it out again."""
    assert "npy" not in writable_formats()
    assert format_of_suffix("x.npyd") is None


@pytest.fixture
def h5_src(tmp_path: FsPath) -> FsPath:
    """A store as other people write it: plain h5py, a gzip + shuffle chunked leaf, a
    contiguous one, a nested group with attributes, the batch size recorded."""
    rng = np.random.default_rng(0)
    path = tmp_path / "src.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "obs",
            data=rng.standard_normal((ROWS, 4)).astype("f4"),
            chunks=(10, 4),
            compression="gzip",
            shuffle=True,
        )
        f["action"] = np.arange(ROWS, dtype="i8")
        g = f.create_group("next")
        g["reward"] = rng.random(ROWS)
        g.attrs["note"] = "rewards"
        f.attrs["__tensordict__"] = json.dumps({"batch_size": [ROWS]})
    return path


def test_convert_h5_to_npy_to_zarr(npy: None, h5_src: FsPath, tmp_path: FsPath) -> None:
    mid, out = tmp_path / "mid.npyd", tmp_path / "out.zarr"
    res = ptd.convert(h5_src, mid)
    assert (res.src_format, res.dst_format) == ("h5", "npy")
    assert detect_backend(mid) == "npy"
    # raw files: no chunks and no codecs planned, and no note claiming any
    obs = next(leaf for leaf in res.plan if leaf.key == "obs")
    assert (obs.dst_chunks, obs.dst_compression) == (None, None)
    assert not [n for n in res.notes if "gzip" in n]
    # what it wrote is plain numpy's: other tools read it without ptd
    with h5py.File(h5_src) as f:
        np.testing.assert_array_equal(np.load(mid / "obs.npy"), f["obs"][()])
        np.testing.assert_array_equal(np.load(mid / "next" / "reward.npy"), f["next/reward"][()])
    assert ptd.diff(h5_src, mid).same  # what --verify runs
    back = ptd.convert(mid, out)
    assert (back.src_format, back.dst_format) == ("npy", "zarr")
    report = ptd.diff(h5_src, out)
    assert report.same
    assert report.leaves_compared == 3
    assert ptd.info(out).batch_size == [ROWS]
    # a name without a suffix gets the other format: npy -> h5
    assert counterpart("npy") == "h5"


def test_convert_refuses_a_compression_it_cannot_store(
    npy: None, h5_src: FsPath, tmp_path: FsPath
) -> None:
    dst = tmp_path / "x.npyd"
    with pytest.raises(UnsupportedOperationError, match="gzip"):
        ptd.convert(h5_src, dst, compression="gzip")
    assert not dst.exists()  # never half-written
    assert [p.name for p in tmp_path.iterdir()] == ["src.h5"]


def test_diff_names_the_changed_key(npy: None, h5_src: FsPath, tmp_path: FsPath) -> None:
    mid = tmp_path / "mid.npyd"
    ptd.convert(h5_src, mid)
    values = np.load(mid / "next" / "reward.npy", mmap_mode="r+")
    values[7] += 1.0
    values.flush()
    del values
    report = ptd.diff(h5_src, mid)
    assert not report.same
    assert [d.key for d in report.differences] == ["next/reward"]


def test_validate_and_a_file_cut_short(npy: None, h5_src: FsPath, tmp_path: FsPath) -> None:
    mid = tmp_path / "mid.npyd"
    ptd.convert(h5_src, mid)
    report = ptd.validate(mid, data=True)
    assert report.valid, report.problems
    assert report.format == "npy"
    assert report.batch_size == [ROWS]
    file = mid / "next" / "reward.npy"
    with open(file, "r+b") as f:
        f.truncate(os.path.getsize(file) - 2 * 8)  # the last two rows gone
    report = ptd.validate(mid, data=True)
    assert not report.valid
    bad = [p for p in report.problems if p.severity == "error"]
    assert {p.key for p in bad} == {"next/reward"}
    assert [p.chunk for p in bad] == [[ROWS - 2], [ROWS - 1]]  # the rows it still holds count
    assert "too short" in bad[0].message
    assert str(file) in bad[0].message


def test_info_and_paths_into_the_store(npy: None, h5_src: FsPath, tmp_path: FsPath) -> None:
    mid = tmp_path / "mid.npyd"
    ptd.convert(h5_src, mid)
    info = ptd.info(mid)
    assert info.format == "npy"
    assert info.batch_size == [ROWS]
    leaves = {e.key: e for e in info.entries if e.kind == "tensor"}
    assert set(leaves) == {"obs", "action", "next/reward"}
    assert (leaves["obs"].layout, leaves["obs"].compression) == ("contiguous", None)
    assert leaves["obs"].random_row_bytes == 16  # a row costs itself
    inner = ptd.info(mid / "next")  # a path leading into the store
    assert inner.format == "npy"
    assert [e.key for e in inner.entries] == ["reward"]


def _cli(*args: Any) -> Any:
    return CliRunner().invoke(app, [str(a) for a in args])


def test_cli_sees_a_format_registered_in_process(
    npy: None, h5_src: FsPath, tmp_path: FsPath
) -> None:
    dst = tmp_path / "cli"
    run = _cli("convert", h5_src, dst, "--to", "npy", "--verify")
    assert run.exit_code == 0, run.output
    assert "no difference" in run.output
    assert detect_backend(dst) == "npy"
    helped = _cli("convert", "--help").output
    assert ".npyd for npy directory" in " ".join(helped.split())
    run = _cli("validate", dst, "--data")
    assert run.exit_code == 0, run.output


def test_cli_refuses_the_format_once_unregistered(h5_src: FsPath, tmp_path: FsPath) -> None:
    run = _cli("convert", h5_src, tmp_path / "x", "--to", "npy")
    assert run.exit_code == 2
    assert "'--to'" in run.output
    assert "'npy' is not one of 'h5', 'zarr'" in run.output
    assert not (tmp_path / "x").exists()
