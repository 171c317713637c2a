"""``ptd convert``: h5 <-> zarr round trips, re-chunking, codecs, refusal and clean failures."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

import ptd
from ptd.storage.h5.backend import H5Backend
from ptd.storage.zarr.backend import ZarrBackend
from ptd.testing.recording import recording
from ptd.transfer import slabs

from .conftest import (
    ROWS,
    assert_one_line_error,
    assert_same,
    make_plain_h5,
    make_plain_zarr,
    plain,
    read_all,
    sample_td,
    write_ptd,
)

OTHER = {"h5": "zarr", "zarr": "h5"}


def siblings(path: Path) -> list[str]:
    """Everything in ``path``'s directory (to catch temporary leftovers)."""
    return sorted(os.listdir(path.parent))


def tree_snapshot(path: Path) -> dict[str, bytes]:
    if path.is_file():
        return {"": path.read_bytes()}
    return {
        str(p.relative_to(path)): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()
    }


def test_round_trip_h5_zarr_h5(ptd_cli, tmp_path: Path) -> None:
    src = write_ptd(tmp_path / "data.h5", "h5")
    run = ptd_cli("convert", src, "--json")
    assert run.code == 0, run
    zarr_path = tmp_path / "data.zarr"  # the default destination: suffix swapped
    doc = run.json
    assert doc["dst"] == str(zarr_path)
    assert doc["dst_format"] == "zarr"
    assert doc["src_format"] == "h5"
    assert doc["tensors"] == 9
    assert doc["non_tensors"] == 3
    assert doc["groups"] == 2
    assert doc["leaves"] == 12
    assert doc["nbytes"] > 0
    assert doc["dst_bytes"] > 0
    assert doc["seconds"] >= 0
    back = tmp_path / "back.h5"
    run2 = ptd_cli("convert", zarr_path, back)
    assert run2.code == 0, run2
    assert "converted" in run2.stdout
    assert "12 leaves" in run2.stdout
    original = read_all(src)
    for path in (zarr_path, back):
        got = read_all(path)
        assert_same(original, got)
        assert got["reward"].dtype == torch.bfloat16
        assert got["next", "deep", "z"].dtype == torch.complex64
        assert plain(got["label"]) == [f"row-{i}" for i in range(ROWS)]
        assert plain(got["env"]) == "CartPole-v1"
        assert plain(got["cfg"]) == {"lr": 0.1, "layers": [4, 4]}
    # batch-size metadata kept: recorded, not inferred
    for path in (zarr_path, back):
        info = ptd.info(path)
        assert info.batch_size_source == "stored"
        assert {e.key: e.batch_size_source for e in info.entries if e.kind == "group"} == {
            "next": "stored",
            "next/deep": "stored",
        }
    assert sorted(os.listdir(tmp_path)) == ["back.h5", "data.h5", "data.zarr"]


def test_round_trip_zarr_h5_zarr(ptd_cli, tmp_path: Path) -> None:
    src = write_ptd(tmp_path / "data.zarr", "zarr")
    assert ptd_cli("convert", src).code == 0
    assert ptd_cli("convert", tmp_path / "data.h5", tmp_path / "back.zarr").code == 0
    assert_same(read_all(src), read_all(tmp_path / "back.zarr"))
    assert_same(read_all(src), read_all(tmp_path / "data.h5"))


def test_library_result(tmp_path: Path) -> None:
    src = write_ptd(tmp_path / "x.h5", "h5")
    seen: list[tuple[int, int]] = []
    result = ptd.convert(src, progress=lambda done, total: seen.append((done, total)))
    assert isinstance(result, ptd.ConvertResult)
    assert result.dst == str(tmp_path / "x.zarr")
    assert seen[0][0] == 0
    assert seen[-1] == (result.nbytes, result.nbytes)
    assert result.ratio is not None
    assert result.throughput is not None


def test_refuses_existing_destination_untouched(ptd_cli, tmp_path: Path, fmt: str) -> None:
    src = write_ptd(tmp_path / f"a.{fmt}", fmt)
    dst = write_ptd(tmp_path / f"b.{OTHER[fmt]}", OTHER[fmt], n=3)
    before = tree_snapshot(dst)
    listing = siblings(dst)
    run = ptd_cli("convert", src, dst)
    assert_one_line_error(run, str(dst), "exists", "--overwrite")
    assert tree_snapshot(dst) == before
    assert siblings(dst) == listing
    # --overwrite replaces it
    run = ptd_cli("convert", src, dst, "--overwrite")
    assert run.code == 0, run
    assert_same(read_all(src), read_all(dst))
    assert siblings(dst) == listing


def test_dry_run_writes_nothing(ptd_cli, tmp_path: Path) -> None:
    src = write_ptd(tmp_path / "a.h5", "h5")
    run = ptd_cli("convert", src, "--dry-run", "--chunks", "2", "--compression", "gzip")
    assert run.code == 0, run
    assert "dry run" in run.stdout
    assert "Nothing was written" in run.stdout
    assert os.listdir(tmp_path) == ["a.h5"]
    doc = ptd_cli("convert", src, "--dry-run", "--json", "--chunks", "2").json
    assert doc["dry_run"] is True
    assert doc["dst_bytes"] is None
    plans = {p["key"]: p for p in doc["plan"]}
    assert plans["obs"]["dst_chunks"] == [2, 3]
    assert os.listdir(tmp_path) == ["a.h5"]


@pytest.mark.parametrize(
    ("to", "codec", "level", "expect"),
    [
        ("zarr", "gzip", "6", "gzip(6)"),
        ("zarr", "zstd", None, "zstd(3)"),
        ("zarr", "blosc", "4", "blosc(zstd,4)"),
        ("zarr", "lz4", None, "blosc(lz4,5)"),
        ("h5", "gzip", "2", "gzip(2)"),
        ("zarr", "none", None, None),
    ],
)
def test_chunks_and_compression(
    ptd_cli, tmp_path: Path, to: str, codec: str, level: str | None, expect: str | None
) -> None:
    src = write_ptd(tmp_path / "a.h5", "h5", n=10)
    dst = tmp_path / f"out.{to}"
    args = ["convert", src, dst, "--to", to, "--chunks", "4", "--compression", codec]
    if level:
        args += ["--level", level]
    run = ptd_cli(*args)
    assert run.code == 0, run
    entries = {e["key"]: e for e in ptd_cli("inspect", dst, "--json").json["entries"]}
    assert entries["obs"]["chunks"] == [4, 3]
    assert entries["pix"]["chunks"] == [4, 2, 2]
    assert entries["obs"]["compression"] == expect
    assert_same(read_all(src), read_all(dst))


def test_same_format_rechunk(ptd_cli, tmp_path: Path, fmt: str) -> None:
    src = write_ptd(tmp_path / f"a.{fmt}", fmt, n=10)
    dst = tmp_path / f"b.{fmt}"
    run = ptd_cli("convert", src, dst, "--to", fmt, "--chunks", "3")
    assert run.code == 0, run
    assert {e["key"]: e["chunks"] for e in ptd_cli("inspect", dst, "--json").json["entries"]}[
        "obs"
    ] == [3, 3]
    assert_same(read_all(src), read_all(dst))


def test_in_place_rechunk_needs_overwrite(ptd_cli, tmp_path: Path) -> None:
    src = write_ptd(tmp_path / "a.zarr", "zarr", n=10)
    expected = read_all(src)
    assert_one_line_error(
        ptd_cli("convert", src, "--to", "zarr", "--chunks", "5"), str(src), "exists"
    )
    run = ptd_cli("convert", src, "--to", "zarr", "--chunks", "5", "--overwrite")
    assert run.code == 0, run
    assert {e["key"]: e["chunks"] for e in ptd.info(src).to_dict()["entries"]}["obs"] == [5, 3]
    assert_same(expected, read_all(src))
    assert os.listdir(tmp_path) == ["a.zarr"]


def test_keeps_source_codec_and_chunks(ptd_cli, tmp_path: Path) -> None:
    src = make_plain_h5(tmp_path / "p.h5")
    dst = tmp_path / "p.zarr"
    assert ptd_cli("convert", src).code == 0
    x = {e["key"]: e for e in ptd_cli("inspect", dst, "--json", "--attrs").json["entries"]}["x"]
    assert x["chunks"] == [2, 4]
    assert x["compression"] == "gzip(5)"


def test_plain_h5_foreign_file(ptd_cli, tmp_path: Path) -> None:
    src = make_plain_h5(tmp_path / "p.h5")
    run = ptd_cli("convert", src, "--json")
    assert run.code == 0, run
    dst = tmp_path / "p.zarr"
    # a string array that is not its group's batch is kept as it is: nothing to note
    assert not any("words" in n for n in run.json["notes"]), run.json["notes"]
    doc = ptd_cli("inspect", dst, "--json", "--attrs").json
    assert doc["attrs"] == {"title": "plain h5py", "tags": ["a", "b"]}
    entries = {e["key"]: e for e in doc["entries"]}
    assert entries["x"]["attrs"] == {"units": "m/s"}
    assert entries["sub"]["attrs"] == {"note": "a group"}
    assert entries["big_endian"]["dtype"] == "int32"
    # an unmarked string column whose rows are the batch becomes a marked stack of str
    assert entries["names"]["stack"] is True
    got = read_all(dst)
    assert got["names"] == [f"n{i}" for i in range(ROWS)]  # str, not bytes
    # (a string array of the source's shape since issue 20, not one JSON value)
    assert list(got["words"]) == ["only", "three", "words"]
    assert got["title_str"] == "hello"
    np.testing.assert_array_equal(
        got["x"].numpy(), np.arange(ROWS * 4, dtype=np.float32).reshape(ROWS, 4)
    )
    assert got["big_endian"].tolist() == list(range(ROWS))
    # and back to h5: still str, still equal
    assert ptd_cli("convert", dst, tmp_path / "back.h5").code == 0
    back = read_all(tmp_path / "back.h5")
    assert plain(back["names"]) == got["names"]
    assert torch.equal(back["x"], got["x"])


def test_plain_zarr_foreign_store(ptd_cli, tmp_path: Path) -> None:
    src = make_plain_zarr(tmp_path / "p.zarr")
    run = ptd_cli("convert", src, "--json")
    assert run.code == 0, run
    doc = ptd_cli("inspect", tmp_path / "p.h5", "--json", "--attrs").json
    # zstd would be an HDF5 plugin filter: the copy is shuffle+gzip, and the notes say so
    compressions = {e["compression"] for e in doc["entries"] if e["compression"]}
    assert compressions
    assert not any(c.startswith("zstd") for c in compressions)
    assert any("zstd" in n and "hdf5plugin" in n for n in run.json["notes"]), run.json
    assert doc["attrs"] == {"title": "plain zarr"}
    got = read_all(tmp_path / "p.h5")
    assert got["x"].dtype == torch.float64
    assert got["sub", "flags"].tolist() == [i % 3 == 0 for i in range(ROWS)]
    assert plain(got["names"]) == [f"z{i}" for i in range(ROWS)]


def test_h5_plugin_codec_refused_cleanly(ptd_cli, tmp_path: Path) -> None:
    import h5py
    import hdf5plugin

    src = write_ptd(tmp_path / "a.zarr", "zarr")
    h5py.h5z.unregister_filter(32015)  # as on a machine without the zstd filter plugin
    try:
        run = ptd_cli("convert", src, "--compression", "zstd")
    finally:
        hdf5plugin.register("zstd", force=True)
    assert_one_line_error(run, "zstd", "pip install hdf5plugin", "gzip")
    assert os.listdir(tmp_path) == ["a.zarr"]


def _fail_on_second_write(monkeypatch: pytest.MonkeyPatch, exc: BaseException) -> None:
    calls = {"n": 0}
    for cls in (H5Backend, ZarrBackend):
        original = cls.write

        def write(self, path, selection, value, _original=original):
            calls["n"] += 1
            if calls["n"] == 2:
                raise exc
            return _original(self, path, selection, value)

        monkeypatch.setattr(cls, "write", write)
        # small arrays are created with their data in batches: a batch is a write too
        original_many = cls.create_arrays

        def create_arrays(self, specs, _original=original_many):
            before = calls["n"]
            calls["n"] += len(specs)  # one write per array
            if before < 2 <= calls["n"]:
                raise exc
            return _original(self, specs)

        monkeypatch.setattr(cls, "create_arrays", create_arrays)


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (OSError(28, "No space left on device"), 2),
        (KeyboardInterrupt(), 130),
    ],
)
def test_failure_leaves_nothing(
    ptd_cli,
    tmp_path: Path,
    fmt: str,
    monkeypatch: pytest.MonkeyPatch,
    exc: BaseException,
    code: int,
) -> None:
    src = write_ptd(tmp_path / f"a.{fmt}", fmt)
    dst = tmp_path / f"a.{OTHER[fmt]}"
    _fail_on_second_write(monkeypatch, exc)
    run = ptd_cli("convert", src)
    assert_one_line_error(run, str(dst), code=code)
    if code == 2:
        assert "No space left on device" in run.stderr
    else:
        assert "interrupted" in run.stderr
    assert os.listdir(tmp_path) == [src.name]


def test_failure_keeps_existing_destination(
    ptd_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = write_ptd(tmp_path / "a.h5", "h5")
    dst = write_ptd(tmp_path / "a.zarr", "zarr", n=2)
    before = tree_snapshot(dst)
    _fail_on_second_write(monkeypatch, OSError(28, "No space left on device"))
    run = ptd_cli("convert", src, "--overwrite")
    assert run.code == 2, run
    assert tree_snapshot(dst) == before
    assert sorted(os.listdir(tmp_path)) == ["a.h5", "a.zarr"]


@pytest.mark.parametrize(
    "args",
    [
        ["--compression", "brotli"],
        ["--compression", "gzip", "--level", "12"],
        ["--level", "3"],
        ["--to", "parquet"],
        ["--chunks", "0"],
    ],
)
def test_usage_errors_exit_2(ptd_cli, tmp_path: Path, args: list[str]) -> None:
    src = write_ptd(tmp_path / "a.h5", "h5")
    run = ptd_cli("convert", src, *args)
    assert run.code == 2, run
    assert "Traceback" not in run.stderr + run.stdout
    assert os.listdir(tmp_path) == ["a.h5"]


@pytest.mark.parametrize("what", ["missing", "garbage", "dir"])
def test_bad_source_exit_2(ptd_cli, tmp_path: Path, what: str) -> None:
    src = tmp_path / "in.h5"
    if what == "garbage":
        src.write_bytes(b"\x00garbage" * 100)
    elif what == "dir":
        src.mkdir()
    run = ptd_cli("convert", src)
    assert_one_line_error(run, str(src))
    assert not (tmp_path / "in.zarr").exists()


def test_missing_destination_directory(ptd_cli, tmp_path: Path) -> None:
    src = write_ptd(tmp_path / "a.h5", "h5")
    assert_one_line_error(ptd_cli("convert", src, tmp_path / "nope" / "b.zarr"), "nope")


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root ignores permissions")
def test_permission_denied(ptd_cli, tmp_path: Path) -> None:
    src = write_ptd(tmp_path / "a.h5", "h5")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        assert_one_line_error(ptd_cli("convert", src, ro / "b.zarr"), str(ro))
        assert os.listdir(ro) == []
    finally:
        ro.chmod(0o700)


def test_permission_denied_simulated(
    ptd_cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # (root ignores directory permissions: simulate the check's answer)
    src = write_ptd(tmp_path / "a.h5", "h5")
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)
    assert_one_line_error(ptd_cli("convert", src), "permission denied", str(tmp_path))
    assert os.listdir(tmp_path) == ["a.h5"]


def test_pickle_refused_unless_allowed(ptd_cli, tmp_path: Path) -> None:
    src = tmp_path / "p.zarr"
    data = ptd.TensorDict(
        {"x": torch.zeros(3), "t": ptd.NonTensorData({1, 2}, batch_size=[3])}, batch_size=[3]
    )
    ptd.PersistentTensorDict.from_dict(data, str(src), backend="zarr").close()
    run = ptd_cli("convert", src, tmp_path / "q.zarr")
    assert_one_line_error(run, "--allow-pickle")
    assert not (tmp_path / "q.zarr").exists()
    run = ptd_cli("convert", src, tmp_path / "q.zarr", "--allow-pickle")
    assert run.code == 0, run
    # h5 never pickles: a set cannot go there, and the error names the key
    run = ptd_cli("convert", src, tmp_path / "q.h5", "--allow-pickle")
    assert_one_line_error(run, "'t'")
    assert not (tmp_path / "q.h5").exists()


def test_no_warning_for_tensordict_strings(tmp_path: Path) -> None:
    # h5 strings read as bytes with a FutureWarning; convert decodes them silently
    # (pyproject turns warnings into errors, so a leaked warning fails this test)
    src = tmp_path / "s.h5"
    data = ptd.TensorDict(
        {"s": ptd.NonTensorData("héllo", batch_size=[2]), "x": torch.ones(2)}, batch_size=[2]
    )
    ptd.PersistentTensorDict.from_dict(data, str(src)).close()
    ptd.convert(src)
    z = ptd.PersistentTensorDict.from_zarr(str(tmp_path / "s.zarr"))
    assert z["s"] == "héllo"
    z.close()


def test_large_leaf_streams_in_slabs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a tiny slab size: the copy happens in many bounded writes, aligned to dst chunks
    monkeypatch.setattr(slabs, "SLAB_BYTES", 4096)
    src = tmp_path / "big.h5"
    data = {"x": torch.arange(2000 * 16, dtype=torch.float32).reshape(2000, 16)}
    ptd.PersistentTensorDict.from_dict(data, str(src)).close()
    with recording() as rec:
        ptd.convert(src, chunks=64)
    writes = rec.writes_of("x")
    assert len(writes) > 10
    assert max(c.nbytes for c in writes) <= 4096 * 2
    assert all(c.rows[0] % 64 == 0 for c in writes)
    assert rec.bytes_read("x") == data["x"].numel() * 4  # each row read once
    got = read_all(tmp_path / "big.zarr")
    assert torch.equal(got["x"], data["x"])


@pytest.mark.interop
def test_tensordict_files_round_trip(ptd_cli, tmp_path: Path, fmt: str) -> None:
    td = pytest.importorskip("tensordict")
    data = td.TensorDict(
        {
            "a": torch.randn(4, 3),
            "i": torch.arange(4, dtype=torch.int16),
            "n": {"b": torch.ones(4, 2, dtype=torch.float16)},
            "s": td.NonTensorData("hello"),
            "st": td.NonTensorStack(*[td.NonTensorData(c) for c in "wxyz"]),
        },
        batch_size=[4],
    )
    src = tmp_path / f"td.{fmt}"
    td.PersistentTensorDict.from_dict(data, str(src), backend=fmt).close()
    dst = tmp_path / f"out.{OTHER[fmt]}"
    run = ptd_cli("convert", src, dst)
    assert run.code == 0, run
    back = tmp_path / f"back.{fmt}"
    assert ptd_cli("convert", dst, back).code == 0
    for path in (dst, back):
        got = read_all(path)
        assert torch.equal(got["a"], data["a"])
        assert got["i"].dtype == torch.int16
        assert got["n", "b"].dtype == torch.float16
        assert plain(got["st"]) == list("wxyz")
        assert plain(got["s"]) == "hello"
    # tensordict reads what ptd converted
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        loader = (
            td.PersistentTensorDict.from_h5
            if OTHER[fmt] == "h5"
            else td.PersistentTensorDict.from_zarr
        )
        p = loader(str(dst))
        try:
            assert torch.equal(p["a"], data["a"])
            assert p["n", "b"].dtype == torch.float16
            assert p.batch_size == torch.Size([4])
        finally:
            p.close()


def test_sample_td_dtypes_are_covered() -> None:
    dtypes = {v.dtype for v in sample_td().values(True, True) if isinstance(v, torch.Tensor)}
    assert {
        torch.bfloat16,
        torch.float16,
        torch.bool,
        torch.uint8,
        torch.int32,
        torch.complex64,
    } <= dtypes


def test_single_chunk_source_is_decoded_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # ptd/tensordict's zarr default is one chunk per array: a slab smaller than that chunk
    # would decode the whole chunk for every slab; the copy reads it once instead
    monkeypatch.setattr(slabs, "SLAB_BYTES", 4096)
    src = tmp_path / "one.zarr"
    data = {"x": torch.arange(2000 * 16, dtype=torch.float32).reshape(2000, 16)}
    ptd.PersistentTensorDict.from_dict(data, str(src), backend="zarr").close()
    assert ptd.info(src).entries[0].chunks == [2000, 16]
    with recording() as rec:
        ptd.convert(src, tmp_path / "one.h5")
    (read,) = rec.reads()
    assert read.key == "x"
    assert read.store == str(src)
    assert torch.equal(read_all(tmp_path / "one.h5")["x"], data["x"])
