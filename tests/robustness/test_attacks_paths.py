"""Nothing outside the named paths is read or written (``attacks_paths.py``).

One test per attack and command (``test_cli[ATTACK-COMMAND]``): the command is refused with
one error line naming the key or file (HDF5: the key is listed as skipped and not copied), the
files outside the store keep their bytes and mtime, their contents appear in no output, and a
refused command leaves no output behind. Then the library's doors: reads and in-place writes
of stores opened by path (zarr v3 and v2, memmap directories loaded ``r+``), HDF5 writes
through a soft link, and ``.tdz`` members naming paths outside.
"""

from __future__ import annotations

import os
import stat
import warnings
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

import ptd
from ptd.errors import CorruptStoreError, PtdError, PtdKeyError, UnsupportedOperationError

from . import attacks_paths as ap
from .attack_kit import HANG_SECONDS, MARKER, assert_refused, expand, run_ptd

_CASES = [
    pytest.param(attack, argv, id=f"{attack.name}-{argv[0]}{'-data' if '--data' in argv else ''}")
    for attack in ap.ATTACKS
    for argv in attack.commands
]


def _snapshot(paths: list[Path]) -> dict[Path, tuple[bytes, int] | None]:
    out: dict[Path, tuple[bytes, int] | None] = {}
    for p in paths:
        out[p] = (p.read_bytes(), os.stat(p).st_mtime_ns) if p.is_file() else None
    return out


def _files_under(directory: Path) -> list[Path]:
    return [p for p in directory.rglob("*") if p.is_file() and not p.is_symlink()]


@pytest.mark.parametrize(("attack", "argv"), _CASES)
def test_cli(attack: ap.Attack, argv: tuple[str, ...], tmp_path: Path) -> None:
    store = attack.make(tmp_path)
    watched = list(attack.watch(tmp_path))
    fifo = [p for p in (tmp_path / "outside").iterdir() if stat.S_ISFIFO(os.lstat(p).st_mode)]
    before = _snapshot(watched)
    out_dir = tmp_path / "results"
    out_dir.mkdir()
    run = run_ptd(expand(argv, store, out_dir), cwd=tmp_path, timeout=HANG_SECONDS)
    assert not run.hung, (
        f"{argv}: still running after {HANG_SECONDS} s (a file outside was opened?)"
    )
    outcome, needle = ap.OUTCOME[attack.name]
    if outcome == "refused" and argv[0] == "validate":
        # validate reports it as a problem naming the key and the file, and fails
        assert run.returncode not in (0, -9), (run.argv, run.returncode, run.stderr)
        assert "Traceback" not in run.stderr, run.stderr
        assert needle in run.stdout, run.stdout
        assert "outside the store" in run.stdout, run.stdout
    elif outcome == "refused":
        assert_refused(run, needle)
        assert os.listdir(out_dir) == [], "a refused command left output behind"
    else:
        assert run.returncode == 0, (run.argv, run.stderr)
        assert "Traceback" not in run.stderr
        if outcome == "skipped":
            assert f"{needle}:" in run.stdout + run.stderr, run.stdout + run.stderr
    # nothing outside was created or changed; no secret in any output
    assert not (tmp_path / MARKER).exists()
    assert _snapshot(watched) == before
    assert all(stat.S_ISFIFO(os.lstat(p).st_mode) for p in fifo)
    if outcome == "works":  # (here SECRET lies inside the store: it is copied)
        with h5py.File(out_dir / "out.h5") as f:
            assert f["obs"][()].tobytes() == ap.INSIDE
        return
    assert ap.SECRET.decode() not in run.stdout + run.stderr
    for produced in _files_under(out_dir):
        assert ap.SECRET not in produced.read_bytes(), f"{produced} holds the outside file's bytes"
    if outcome == "skipped" and argv[0] == "convert":
        with h5py.File(out_dir / "out.h5") as f:
            assert needle not in f


# --- the library's doors ---------------------------------------------------------------------
_ZARR_LINKS = ["zarr3_raw_chunk_link", "zarr3_zstd_chunk_link", "zarr3_sharded_chunk_link"]


def _attack(name: str) -> ap.Attack:
    return next(a for a in ap.ATTACKS if a.name == name)


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast", "zarr"])
@pytest.mark.parametrize("mode", ["r", "r+"])
@pytest.mark.parametrize("name", [*_ZARR_LINKS, "zarr2_chunk_link", "zarr_chunk_dir_link"])
def test_zarr_link_out_read(name: str, mode: str, fast_path: bool, tmp_path: Path) -> None:
    store = _attack(name).make(tmp_path)
    if mode == "r+" and name.startswith("zarr2"):
        pytest.skip("zarr v2 stores are read-only in ptd")
    before = _snapshot(ap.watched(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = ptd.PersistentTensorDict.from_zarr(str(store), mode=mode, fast_path=fast_path)
        try:
            with pytest.raises(UnsupportedOperationError, match="outside the store"):
                p["obs"]
        finally:
            p.close()
    assert _snapshot(ap.watched(tmp_path)) == before


@pytest.mark.parametrize("name", _ZARR_LINKS)
def test_zarr_link_out_write(name: str, tmp_path: Path) -> None:
    """``p["obs"] += 1`` in mode r+ (a read, then a chunk write) and a slice write."""
    store = _attack(name).make(tmp_path)
    before = _snapshot(ap.watched(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        p = ptd.PersistentTensorDict.from_zarr(str(store), mode="r+")
        try:
            with pytest.raises(UnsupportedOperationError, match="outside the store"):
                p["obs"] += 1
            with pytest.raises(PtdError):
                p.set_at_("obs", torch.zeros(8, dtype=torch.uint8), slice(0, 8))
        finally:
            p.close()
    assert _snapshot(ap.watched(tmp_path)) == before


def test_zarr_link_inside_reads_and_writes(tmp_path: Path) -> None:
    store = ap.zarr_chunk_link_inside(tmp_path)
    p = ptd.PersistentTensorDict.from_zarr(str(store), mode="r+")
    try:
        assert bytes(p["obs"].numpy()) == ap.INSIDE
        p["obs"] += 1
        assert p["obs"][0].item() == ap.INSIDE[0] + 1
    finally:
        p.close()


def test_memmap_load_r_plus_write(tmp_path: Path) -> None:
    """``TensorDict.load_memmap(dir)`` (mode "r+": shared maps) and ``td["obs"] += 1``."""
    store = ap.memmap_file_link(tmp_path)
    before = _snapshot(ap.watched(tmp_path))
    for mode in ("r+", "r", None):
        with pytest.raises(UnsupportedOperationError, match=r"obs\.memmap"):
            ptd.TensorDict.load_memmap(str(store), mode=mode)
    assert _snapshot(ap.watched(tmp_path)) == before


def test_memmap_dir_link_load(tmp_path: Path) -> None:
    store = ap.memmap_dir_link(tmp_path)
    before = _snapshot(ap.watched(tmp_path))
    with pytest.raises(UnsupportedOperationError, match="sub"):
        ptd.TensorDict.load_memmap(str(store))
    assert _snapshot(ap.watched(tmp_path)) == before


def test_memmap_link_inside_loads_and_writes(tmp_path: Path) -> None:
    store = ap.memmap_file_link_inside(tmp_path)
    td = ptd.TensorDict.load_memmap(str(store))
    td["obs"] += 1
    del td
    assert (store / "data.bin").read_bytes() == bytes(b + 1 for b in ap.INSIDE)


def test_h5_soft_link_out_library(tmp_path: Path) -> None:
    """Reads act as a missing key; writes through the link are refused; nothing changes in
    the other file."""
    store = ap.h5_soft_group_through_external(tmp_path)
    with h5py.File(store, "a") as f:
        f["leak"] = h5py.SoftLink("/ext/token")
    before = _snapshot(ap.watched(tmp_path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for mode in ("r", "r+"):
            p = ptd.PersistentTensorDict.from_h5(str(store), mode=mode)
            try:
                assert sorted(p.keys()) == ["obs"]
                assert "leak" not in p
                assert ("leakgrp", "x") not in p
                for key in ("leak", ("leakgrp", "x"), "ext"):
                    with pytest.raises(KeyError):
                        p[key]
                if mode == "r+":
                    for key in (("leakgrp", "new"), ("leakgrp", "x"), ("ext", "new")):
                        with pytest.raises(PtdKeyError, match="leads out of the file"):
                            p[key] = torch.zeros(3)
            finally:
                p.close()
    assert _snapshot(ap.watched(tmp_path)) == before


def test_h5_soft_link_inside_still_read(tmp_path: Path) -> None:
    store = tmp_path / "s.h5"
    with h5py.File(store, "w") as f:
        f.create_group("g")["x"] = np.arange(4)
        f["alias"] = h5py.SoftLink("/g")
        f["g"]["rel"] = h5py.SoftLink("x")
    p = ptd.PersistentTensorDict.from_h5(str(store), mode="r")
    try:
        assert p["alias", "x"].tolist() == [0, 1, 2, 3]
        assert p["g", "rel"].tolist() == [0, 1, 2, 3]
    finally:
        p.close()


def test_h5_not_created_through_link_out(tmp_path: Path) -> None:
    victim = ap._secret_file(tmp_path)
    before = _snapshot([victim])
    dst = tmp_path / "work"
    dst.mkdir()
    os.symlink(victim, dst / "new.h5")
    with pytest.raises(UnsupportedOperationError, match="symbolic link"):
        ptd.PersistentTensorDict.from_dict({"a": torch.zeros(3)}, filename=str(dst / "new.h5"))
    assert _snapshot([victim]) == before


def _tdz(path: Path, members: list[tuple[str, bytes, bool]]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, data, link in members:
            info = zipfile.ZipInfo(name)
            if link:
                info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, data)
    return path


@pytest.mark.parametrize("member", ["..\\escaped.memmap", "link"], ids=["backslash", "symlink"])
def test_tdz_member_outside(member: str, tmp_path: Path) -> None:
    meta = b'{"shape": [], "device": "cpu", "_class": "tensordict:TensorDict"}'
    link = member == "link"
    archive = _tdz(
        tmp_path / "x.tdz",
        [("meta.json", meta, False), (member, b"/etc/passwd" if link else b"\0" * 8, link)],
    )
    with pytest.raises(CorruptStoreError, match=r"x\.tdz") as err:
        ptd.TensorDict.load_memmap(str(archive))
    assert repr(member)[1:-1] in str(err.value) or "link" in str(err.value)
    assert not (tmp_path / "escaped.memmap").exists()
