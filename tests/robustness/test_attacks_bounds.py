"""Stores that declare more than they hold (``attacks_bounds.py``): each attack is a test of
its own, run through ``python -m ptd`` in a subprocess (attack_kit), and must get one clear
error line naming the key or path, or a correct report, in bounded memory, never a hang; no
code runs, nothing outside the store is written, no output is left behind.

No test times a command: a hang is cut off by attack_kit's generous bound, and the seconds
are measured by the benchmark that runs every module's ``ATTACKS``.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from .attack_kit import HANG_SECONDS, MARKER, CliRun, assert_refused, expand, run_ptd
from .attacks_bounds import ATTACKS, DEEP_LEVELS, h5_huge, zarr_huge

BY_NAME = {a.name: a for a in ATTACKS}
#: peak RSS of one ptd process on these stores (an idle ``ptd`` is about 60-120 MB)
MEMORY_BOUND = 1 << 30


def _walk(root: Path) -> tuple[list[str], list[str]]:
    """The files and the directories below ``root`` (parents first), with a stack: ``rglob``,
    ``os.walk`` (Python 3.11) and ``shutil.rmtree`` recurse and fail on 1,200 levels."""
    files: list[str] = []
    dirs: list[str] = []
    todo = [str(root)]
    while todo:
        d = todo.pop()
        with os.scandir(d) as it:
            for e in it:
                if e.is_dir(follow_symlinks=False):
                    dirs.append(e.path)
                    todo.append(e.path)
                else:
                    files.append(e.path)
    return files, dirs


def _files(root: Path) -> dict[str, tuple[int, int]]:
    """Every file below ``root``: its size and mtime."""
    out = {}
    for f in _walk(root)[0]:
        st = os.stat(f)
        out[os.path.relpath(f, root)] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture(autouse=True)
def _remove_deep_trees(tmp_path: Path):  # type: ignore[no-untyped-def]
    """Delete what a test made, deepest first (pytest's own clean-up recurses)."""
    yield
    files, dirs = _walk(tmp_path)
    for f in files:
        os.unlink(f)
    for d in reversed(dirs):
        os.rmdir(d)


def attack(name: str, tmp_path: Path) -> list[CliRun]:
    """Make the attack's store under ``tmp_path/work`` and run its commands; check what
    every attack must: no hang, no traceback, bounded memory, the marker never created,
    nothing outside the store read-write touched, no output or temporary left behind."""
    a = BY_NAME[name]
    work = tmp_path / "work"
    work.mkdir()
    store = a.make(work)
    before = _files(tmp_path)
    runs = []
    for argv in a.commands:
        run = run_ptd(expand(argv, store, work), cwd=work)
        assert not run.hung, f"{run.argv}: still running after {HANG_SECONDS} s"
        assert run.returncode >= 0, (run.argv, run.returncode, run.stderr)
        assert "Traceback" not in run.stderr + run.stdout, run.stderr
        assert "internal error" not in run.stderr, run.stderr
        assert run.peak_rss < MEMORY_BOUND, (run.argv, run.peak_rss)
        runs.append(run)
    for path in a.watch(work):
        assert not path.exists(), path
    assert not (tmp_path / MARKER).exists()
    assert _files(tmp_path) == before, "files were created, changed or left behind"
    return runs


def _ok(run: CliRun, *needles: str, code: int = 0) -> None:
    assert run.returncode == code, (run.argv, run.returncode, run.stdout, run.stderr)
    for needle in needles:
        assert needle in run.stdout, (needle, run.stdout)


# --- absurd shapes and chunk counts ------------------------------------------------------------
def test_zarr_2pow62_validate_data(tmp_path: Path) -> None:
    (run,) = attack("zarr_2pow62_validate_data", tmp_path)
    # one problem named: the declared size; the data pass says it is all fill value
    _ok(run, "too_large", "missing_chunks", "throughout", code=1)


def test_zarr_2pow62_inspect_stats(tmp_path: Path) -> None:
    (run,) = attack("zarr_2pow62_inspect_stats", tmp_path)
    _ok(run, "0:4611686018427387904", "missing_chunks", "throughout")


def test_zarr_2pow62_diff(tmp_path: Path) -> None:
    (run,) = attack("zarr_2pow62_diff", tmp_path)
    _ok(run, "same")


def test_zarr_2pow62_convert(tmp_path: Path) -> None:
    for run in attack("zarr_2pow62_convert", tmp_path):
        assert_refused(run, "huge.zarr", "bytes")


def test_zarr_8m_one_byte_chunks(tmp_path: Path) -> None:
    data, stats, diff = attack("zarr_8M_1byte_chunks", tmp_path)
    _ok(data, "missing_chunks", "none of the 8000000 chunks")
    _ok(stats, "0:8000000")
    _ok(diff, "same")


def test_h5_1e15_elements_diff(tmp_path: Path) -> None:
    diff, data = attack("h5_1e15_diff", tmp_path)
    _ok(diff, "same")
    _ok(data, "missing_chunks", "none of the 953674317 chunks")


def test_library_read_of_2pow62_is_refused(tmp_path: Path) -> None:
    from ptd import PersistentTensorDict
    from ptd.errors import PtdMemoryError

    store = zarr_huge(tmp_path, [2**62], [1])
    with (
        PersistentTensorDict.from_zarr(store, allow_pickle=False) as p,
        pytest.raises(PtdMemoryError, match="'x'"),
    ):
        p.to_tensordict()


def test_diff_compares_fill_values_once(tmp_path: Path) -> None:
    """Nothing stored on either side: the fill values decide, for every element."""
    from ptd import diff

    (tmp_path / "b").mkdir()
    a = zarr_huge(tmp_path, [8_000_000], [1])
    b = zarr_huge(tmp_path / "b", [8_000_000], [1], fill=7)
    rep = diff(a, b)
    values = [d for d in rep.differences if d.kind == "values_differ"]
    assert len(values) == 1, rep.differences
    assert values[0].count == 8_000_000
    assert values[0].first
    assert values[0].first[0]["a"] == 0
    assert values[0].first[0]["b"] == 7


def test_diff_of_partly_stored_h5_counts_every_element(tmp_path: Path) -> None:
    """A few chunks stored far apart: they are compared, the rest as fill values."""
    import h5py

    from ptd import diff

    a = h5_huge(tmp_path, 10**12, "a.h5")
    b = h5_huge(tmp_path, 10**12, "b.h5")
    with h5py.File(a, "r+") as f:
        f["x"][5 * 2**20 : 5 * 2**20 + 3] = 1
    with h5py.File(b, "r+") as f:
        f["x"][5 * 2**20 : 5 * 2**20 + 3] = [1, 2, 1]
        f["x"][10**12 - 1] = 9
    rep = diff(a, b)
    (d,) = [d for d in rep.differences if d.kind == "values_differ"]
    assert d.count == 2, d
    assert d.first_rows == [5 * 2**20 + 1, 10**12 - 1], d


# --- nesting -------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["zarr", "h5"])
@pytest.mark.parametrize("levels", DEEP_LEVELS)
def test_deep_nesting(tmp_path: Path, fmt: str, levels: int) -> None:
    for run in attack(f"deep_{fmt}_{levels}", tmp_path):
        assert_refused(run, "PTD_MAX_DEPTH", "g/g/g/g/.../g/g/g/g", f"deep{levels}.{fmt}")


def test_deep_json_root(tmp_path: Path) -> None:
    for run in attack("deep_json_root", tmp_path):
        assert_refused(run, "PTD_MAX_JSON_DEPTH", "zarr.json")


def test_deep_json_array(tmp_path: Path) -> None:
    for run in attack("deep_json_array", tmp_path):
        assert_refused(run, "PTD_MAX_JSON_DEPTH", "'x'", "x/zarr.json")


# --- many attributes -----------------------------------------------------------------------------
def test_many_attrs_zarr(tmp_path: Path) -> None:
    inspect, validate = attack("many_attrs_zarr", tmp_path)
    _ok(inspect, "uint8")
    assert "PTD_MAX_ATTRS" in inspect.stdout + inspect.stderr  # the count is shown
    _ok(validate, "valid", "too_many_attrs")


def test_many_attrs_h5(tmp_path: Path) -> None:
    inspect, validate = attack("many_attrs_h5", tmp_path)
    _ok(inspect, "uint8")
    assert "PTD_MAX_ATTRS" in inspect.stdout + inspect.stderr  # the count is shown
    _ok(validate, "valid", "too_many_attrs")


def test_attributes_beyond_the_limit_are_counted(tmp_path: Path) -> None:
    from ptd.storage.registry import get_backend

    from .attacks_bounds import many_attrs_zarr

    store = many_attrs_zarr(tmp_path, 5000)
    be = get_backend("zarr").open(str(store), "r")
    try:
        attrs = be.get_attrs(())
        assert len(attrs) == 1000
        ((name, why),) = be.attrs_skipped[()].items()
        assert name == "(4000 more)"
        assert "PTD_MAX_ATTRS" in why
    finally:
        be.close()


# --- signals ---------------------------------------------------------------------------------------
def _slow_zarr(directory: Path, chunks: int = 40_000) -> Path:
    """A real (not hostile) zarr store of many small gzip chunks, written by hand: checking
    it takes a while, long enough to be stopped."""
    store = directory / "slow.zarr"
    (store / "x" / "c").mkdir(parents=True)
    (store / "zarr.json").write_text(
        json.dumps({"zarr_format": 3, "node_type": "group", "attributes": {}})
    )
    doc = {
        "zarr_format": 3,
        "node_type": "array",
        "shape": [chunks * 64],
        "data_type": "float32",
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [64]}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": 0.0,
        "codecs": [
            {"name": "bytes", "configuration": {"endian": "little"}},
            {"name": "gzip", "configuration": {"level": 1}},
        ],
        "attributes": {},
    }
    (store / "x" / "zarr.json").write_text(json.dumps(doc))
    payload = gzip.compress(np.arange(64, dtype="<f4").tobytes(), 1)
    for i in range(chunks):
        (store / "x" / "c" / str(i)).write_bytes(payload)
    return store


def test_sigterm_stops_a_long_validate_data(tmp_path: Path) -> None:
    store = _slow_zarr(tmp_path)
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "ptd", "--verbose", "validate", "--data", str(store)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + HANG_SECONDS
        for line in proc.stderr:  # wait for the data pass to start
            if "reading" in line or time.monotonic() > deadline:
                break
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=HANG_SECONDS)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, (proc.returncode, out, err)
    assert "Traceback" not in err
