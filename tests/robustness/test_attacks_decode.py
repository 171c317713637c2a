"""Each hostile chunk of :mod:`.attacks_decode` run through the commands a person would run:
refused with one line naming the key, nothing executed, no output left, memory bounded; the
``.tdz`` bomb through ``load_memmap``; the B-tree key flip read as h5py reads it; and a
differential test: seeded mutants of small HDF5 files read by ptd (two read paths) and h5py
give the same values, or ptd raises a ptd error."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import h5py
import hdf5plugin
import numpy as np
import pytest

from ptd.errors import PtdError

from .attack_kit import MARKER, Attack, assert_refused, expand, run_ptd
from .attacks_decode import (
    ATTACKS,
    make_btree_key_flip,
    make_tdz_bomb,
)

#: generous: an idle ``python -m ptd`` with torch loaded is about 400 MB; a bomb is >= 1 GiB
PEAK_RSS_LIMIT = 900 << 20


def _left_over(out_dir: Path) -> list[str]:
    return sorted(p.name for p in out_dir.iterdir())


@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_is_refused(attack: Attack, tmp_path: Path) -> None:
    src = tmp_path / "src"
    src.mkdir()
    store = attack.make(src)
    before = {p: p.stat().st_mtime_ns for p in src.rglob("*")}
    for argv in attack.commands:
        out_dir = tmp_path / ("out-" + argv[0])
        out_dir.mkdir(exist_ok=True)
        run = run_ptd(expand(argv, store, out_dir), cwd=tmp_path)
        if argv[0] == "validate":
            # validate reports the damaged chunk as a problem naming the key (exit 1)
            assert not run.hung, run.argv
            assert run.returncode == 1, (run.argv, run.returncode, run.stderr)
            assert "Traceback" not in run.stderr
            assert "'obs'" in run.stdout, run.stdout
            assert "undecodable_chunk" in run.stdout, run.stdout
        else:
            assert_refused(run, "'obs'", store.name)
        assert run.peak_rss < PEAK_RSS_LIMIT, (run.argv, run.peak_rss)
        assert _left_over(out_dir) == [], (run.argv, _left_over(out_dir))
    for watched in attack.watch(src):
        assert not watched.exists()
    assert {p: p.stat().st_mtime_ns for p in src.rglob("*")} == before


def test_tdz_bomb_is_refused(tmp_path: Path) -> None:
    archive = make_tdz_bomb(tmp_path)
    assert archive.stat().st_size < 4096
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    code = textwrap.dedent(
        f"""
        import sys
        from ptd import TensorDict
        from ptd.errors import CorruptStoreError
        try:
            TensorDict.load_memmap({str(archive)!r}, mode="r")
        except CorruptStoreError as err:
            print("refused:", err)
            sys.exit(3)
        """
    )
    env = {**os.environ, "TMPDIR": str(tmp)}
    with open(tmp_path / "out.txt", "w+b") as out_file:
        proc = subprocess.Popen(
            [sys.executable, "-c", code], env=env, stdout=out_file, stderr=subprocess.STDOUT
        )
        timer = threading.Timer(120, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_file.seek(0)
        out = out_file.read()
    assert proc.returncode == 3, out
    assert usage.ru_maxrss * 1024 < PEAK_RSS_LIMIT, usage.ru_maxrss
    assert b"a.memmap" in out, out
    assert b"bomb.tdz" in out, out
    assert list(tmp.iterdir()) == []  # nothing extracted, nothing left
    assert not (tmp_path / MARKER).exists()


def test_btree_key_flip_reads_as_h5py(tmp_path: Path) -> None:
    from ptd import PersistentTensorDict

    path = make_btree_key_flip(tmp_path)
    with h5py.File(path, "r") as f:
        ref = f["obs"][:]
    assert ref[0, 0] == 13.0  # h5py reads the second chunk for rows 0-3
    p = PersistentTensorDict.from_h5(str(path), mode="r")
    try:
        np.testing.assert_array_equal(p["obs"][:].numpy(), ref)
        np.testing.assert_array_equal(p["obs"][:2].numpy(), ref[:2])
        np.testing.assert_array_equal(p[0:2]["obs"].numpy(), ref[:2])
        np.testing.assert_array_equal(p[np.array([5, 0, 9])]["obs"].numpy(), ref[[5, 0, 9]])
    finally:
        p.close()
    # the command line copies h5py's values
    out = tmp_path / "out.zarr"
    run = run_ptd(["convert", str(path), str(out)])
    assert run.returncode == 0, run.stderr
    import zarr

    np.testing.assert_array_equal(zarr.open_array(str(out / "obs"), mode="r")[:], ref)


# --- differential: seeded mutants read by ptd and by h5py -------------------------------------

_FILTERS = {
    "gzip": {"compression": "gzip"},
    "shuffle_gzip_fletcher": {"compression": "gzip", "shuffle": True, "fletcher32": True},
    "zstd": dict(hdf5plugin.Zstd()),
    "blosc": dict(hdf5plugin.Blosc(cname="lz4")),
    "lz4": dict(hdf5plugin.LZ4()),
}


def _base(path: Path, filters: str, libver: str) -> None:
    rng = np.random.default_rng(0)
    with h5py.File(path, "w", libver=libver) as f:
        f.create_dataset(
            "obs",
            data=rng.integers(0, 50, (40, 3)).astype("float32"),
            chunks=(4, 3),
            **_FILTERS[filters],
        )


def _mutate(path: Path, seed: int) -> None:
    """Flip a byte of a B-tree node, of a chunk, or of a chunk's stored size."""
    rng = np.random.default_rng(seed)
    data = bytearray(path.read_bytes())
    with h5py.File(path, "r") as f:
        dsid = f["obs"].id
        infos = [dsid.get_chunk_info(i) for i in range(dsid.get_num_chunks())]
    what = seed % 3
    if what == 0 and b"TREE" in data:  # a B-tree key (v1 index)
        at = data.index(b"TREE")
        while data[at + 4] != 1:
            at = data.index(b"TREE", at + 4)
        n = int.from_bytes(data[at + 6 : at + 8], "little")
        pos = at + 24 + 40 * int(rng.integers(0, n + 1)) + int(rng.integers(0, 32))
    elif what == 1 or not infos:  # the bytes of a chunk
        info = infos[int(rng.integers(0, len(infos)))]
        pos = info.byte_offset + int(rng.integers(0, info.size))
    else:  # a byte anywhere in the metadata before the first chunk
        first = min(i.byte_offset for i in infos)
        pos = int(rng.integers(0, first))
    data[pos] ^= 1 << int(rng.integers(0, 8))
    path.write_bytes(bytes(data))


def _h5py_values(path: Path) -> np.ndarray | None:
    try:
        with h5py.File(path, "r") as f:
            return f["obs"][:]
    except Exception:  # noqa: BLE001 - h5py refuses the mutant: ptd may too
        return None


def _ptd_values(path: Path) -> list[np.ndarray] | PtdError:
    from ptd import PersistentTensorDict

    try:
        p = PersistentTensorDict.from_h5(str(path), mode="r")
    except PtdError as err:
        return err
    try:
        whole = p["obs"][:].numpy()
        rows = np.concatenate([p[i : i + 5]["obs"].numpy() for i in range(0, 40, 5)])
        picked = p[np.array([39, 0, 17, 4])]["obs"].numpy()
        return [whole, rows, picked]
    except PtdError as err:
        return err
    finally:
        p.close()


_CASES = [
    (filters, libver, seed)
    for filters in _FILTERS
    for libver in ("earliest", "latest")
    for seed in range(4)
]


@pytest.mark.parametrize(("filters", "libver", "seed"), _CASES)
def test_mutant_reads_as_h5py_or_raises(
    filters: str, libver: str, seed: int, tmp_path: Path
) -> None:
    path = tmp_path / f"{filters}-{libver}-{seed}.h5"
    _base(path, filters, libver)
    _mutate(path, seed * 7919 + len(filters))
    got = _ptd_values(path)
    if isinstance(got, PtdError):
        return  # refused with a ptd error: allowed
    ref = _h5py_values(path)
    assert ref is not None, "ptd read values where h5py refuses the file"
    whole, rows, picked = got
    np.testing.assert_array_equal(whole, ref)
    np.testing.assert_array_equal(rows, ref)
    np.testing.assert_array_equal(picked, ref[[39, 0, 17, 4]])
