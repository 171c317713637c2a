"""HDF5 files being written, or left open by a writer that was killed: an h5py SWMR writer
appending while ptd reads (library and command line), the same file after SIGKILL, a plain
writer killed with its consistency flags set, and every piece of advice the errors give,
followed. The files are written by h5py in subprocesses, never through ptd."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import ptd
from ptd.errors import (
    ArgumentError,
    PtdTypeError,
    PtdValueError,
    StoreLockedError,
    WriterStateWarning,
)
from ptd.storage.h5.opening import superblock_checksum, writer_state

h5py = pytest.importorskip("h5py", reason="the writers of these files are h5py processes")

# An SWMR writer: row r of x holds r // 2 (3 columns), of y r // 2; two rows per step, each
# step flushed; "ready" once 3 steps are on disk, then appends until stdin closes or it is
# killed ("kill" argument: SIGKILL itself after 5 steps, the file still open).
SWMR_WRITER = textwrap.dedent(
    """
    import os, signal, sys, time
    import h5py
    f = h5py.File(sys.argv[1], "w", libver="latest")
    x = f.create_dataset("x", shape=(0, 3), maxshape=(None, 3), chunks=(4, 3), dtype="f4")
    y = f.create_dataset("y", shape=(0,), maxshape=(None,), chunks=(4,), dtype="i8")
    f.swmr_mode = True
    n = 0
    for step in range(100000):
        x.resize((n + 2, 3)); x[n:n + 2] = step; x.flush()
        y.resize((n + 2,)); y[n:n + 2] = step; y.flush()
        n += 2
        if step == 2:
            print("ready", flush=True)
        if sys.argv[2] == "kill" and step == 4:
            os.kill(os.getpid(), signal.SIGKILL)
        if sys.argv[2] == "live":
            time.sleep(0.02)
    """
)

# A plain writer (latest format, no SWMR) killed with the file open: flags 0x01 left set
PLAIN_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import h5py, numpy as np
    f = h5py.File(sys.argv[1], "w", libver="latest")
    f["a"] = np.arange(10)
    f["g/b"] = np.ones((10, 2), dtype="f4")
    f.flush()
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def _killed(script: str, path: Path, *args: str) -> Path:
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path), *args], capture_output=True, timeout=120
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    return path


@pytest.fixture
def swmr_killed(tmp_path: Path) -> Path:
    return _killed(SWMR_WRITER, tmp_path / "swmr_killed.h5", "kill")


@pytest.fixture
def plain_killed(tmp_path: Path) -> Path:
    return _killed(PLAIN_KILLED, tmp_path / "plain_killed.h5")


@pytest.fixture
def live_writer(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "live.h5"
    proc = subprocess.Popen(
        [sys.executable, "-c", SWMR_WRITER, str(path), "live"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
        yield path
        assert proc.poll() is None, "the writer stopped while ptd read"
    finally:
        proc.kill()
        proc.communicate()  # waits, and closes the pipes


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_rows(td: ptd.PersistentTensorDict) -> int:
    """The rows read are what the writer wrote (row r holds r // 2); their number."""
    x, y = td["x"].numpy(), td["y"].numpy()
    rows = np.arange(len(y)) // 2
    np.testing.assert_array_equal(y, rows)
    np.testing.assert_array_equal(x[: len(rows)], np.repeat(rows[:, None], 3, axis=1)[: len(x)])
    return len(y)


def _cli(*args: object, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ptd", *(str(a) for a in args)],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, COLUMNS="250", NO_COLOR="1", **(env or {})),
    )


# --------------------------------------------------------------------------- the flags
def test_the_flags_are_read_from_the_superblock(swmr_killed: Path, plain_killed: Path) -> None:
    assert writer_state(str(swmr_killed)).flags == 0x05  # type: ignore[union-attr]
    assert writer_state(str(plain_killed)).flags == 0x01  # type: ignore[union-attr]
    for path in (swmr_killed, plain_killed):
        state = writer_state(str(path))
        assert state is not None
        stored = path.read_bytes()[len(state.head) : len(state.head) + 4]
        assert superblock_checksum(state.head).to_bytes(4, "little") == stored


def test_a_clean_file_has_no_flags(tmp_path: Path) -> None:
    for libver in ("earliest", "latest"):
        path = tmp_path / f"{libver}.h5"
        with h5py.File(path, "w", libver=libver) as f:
            f["a"] = np.arange(3)
        state = writer_state(str(path))
        assert state is not None
        assert state.flags == 0


# --------------------------------------------------------------------------- killed writers
def test_killed_swmr_writer_library(swmr_killed: Path) -> None:
    before = _digest(swmr_killed)
    with pytest.warns(WriterStateWarning, match=r"SWMR writing \(consistency flags 0x05\)"):
        td = ptd.PersistentTensorDict.from_h5(swmr_killed)
    with td:
        assert td.batch_size == (10,)  # five steps of two rows were flushed
        assert _check_rows(td) == 10
    assert _digest(swmr_killed) == before  # read as it is, nothing written


def test_killed_plain_writer_library(plain_killed: Path) -> None:
    before = _digest(plain_killed)
    with pytest.warns(WriterStateWarning, match=r"open for writing \(consistency flags 0x01\)"):
        td = ptd.PersistentTensorDict.from_h5(plain_killed)
    with td:
        assert td.batch_size == (10,)
        np.testing.assert_array_equal(td["a"].numpy(), np.arange(10))
        np.testing.assert_array_equal(td["g", "b"].numpy(), np.ones((10, 2), "f4"))
    assert _digest(plain_killed) == before
    with pytest.raises(OSError, match="already open for write"):  # h5py alone refuses it
        h5py.File(plain_killed, "r", locking=False)


@pytest.mark.parametrize("command", [["inspect"], ["validate"], ["validate", "--data"]])
@pytest.mark.parametrize("which", ["swmr_killed", "plain_killed"])
def test_killed_writer_cli(command: list[str], which: str, request: pytest.FixtureRequest) -> None:
    path = request.getfixturevalue(which)
    run = _cli(*command, path)
    assert run.returncode == 0, run
    assert "Traceback" not in run.stderr
    warnings = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(warnings) == 1, run
    assert warnings[0].startswith("ptd: warning: "), run
    assert "consistency flags" in warnings[0]
    assert path.name in warnings[0]
    assert "batch_size=[10]" in run.stdout, run


# --------------------------------------------------------------------------- a live writer
def test_live_swmr_writer_library(live_writer: Path) -> None:
    seen = []
    for _ in range(3):
        with pytest.warns(WriterStateWarning, match="SWMR"):
            td = ptd.PersistentTensorDict.from_h5(live_writer)
        with td:
            seen.append(_check_rows(td))
    # explicitly asked for: no warning about it needed, same reads
    with ptd.PersistentTensorDict.from_h5(live_writer, swmr=True) as td:
        seen.append(_check_rows(td))
    assert min(seen) >= 6


@pytest.mark.parametrize("command", [["inspect"], ["validate"], ["validate", "--data"]])
def test_live_swmr_writer_cli(command: list[str], live_writer: Path) -> None:
    run = _cli(*command, live_writer)
    assert "Traceback" not in run.stderr, run
    assert "ptd: error" not in run.stderr, run
    assert "SWMR writing" in run.stderr, run
    assert run.returncode in (0, 1), run  # 1: a leaf resized before the other is fine
    assert "live.h5" in run.stdout, run


# --------------------------------------------------------------------------- advice, followed
def test_writing_a_killed_file_advice_is_followed(swmr_killed: Path, tmp_path: Path) -> None:
    with pytest.raises(StoreLockedError, match=r"Open it in mode 'r'") as err:
        ptd.PersistentTensorDict.from_h5(swmr_killed, mode="r+")
    assert str(swmr_killed) in str(err.value)
    assert "ptd convert" in str(err.value)
    # advice 1: mode "r" reads it
    with pytest.warns(WriterStateWarning), ptd.PersistentTensorDict.from_h5(swmr_killed) as td:
        assert td.batch_size == (10,)
    # advice 2: write to a copy made by ptd convert
    copy = tmp_path / "copy.h5"
    run = _cli("convert", swmr_killed, copy)
    assert run.returncode == 0, run
    with ptd.PersistentTensorDict.from_h5(copy, mode="r+") as td:
        assert _check_rows(td) == 10
        td.set_("y", td["y"] + 1)
    with ptd.PersistentTensorDict.from_h5(copy) as td:
        assert int(td["y"][0]) == 1


@pytest.fixture
def held(tmp_path: Path) -> Iterator[Path]:
    """A file (version 0 superblock) another process holds open for writing."""
    path = tmp_path / "held.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(4)
    code = (
        "import h5py,sys; f=h5py.File(sys.argv[1],'a'); print('ready',flush=True); sys.stdin.read()"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        yield path
    finally:
        proc.communicate(timeout=60)  # closes stdin (the holder exits) and the pipes


def test_lock_advice_is_followed(held: Path) -> None:
    with pytest.raises(StoreLockedError) as err:
        ptd.PersistentTensorDict.from_h5(held)
    msg = str(err.value)
    assert "locking=False" in msg
    assert "HDF5_USE_FILE_LOCKING=FALSE" in msg
    with ptd.PersistentTensorDict.from_h5(held, locking=False) as td:  # library advice
        np.testing.assert_array_equal(td["a"].numpy(), np.arange(4))
    run = _cli("inspect", held)
    assert run.returncode == 2, run
    assert "HDF5_USE_FILE_LOCKING=FALSE" in run.stderr, run
    run = _cli("inspect", held, env={"HDF5_USE_FILE_LOCKING": "FALSE"})  # CLI advice
    assert run.returncode == 0, run
    assert "batch_size=[4]" in run.stdout, run


# --------------------------------------------------------------------------- open options
def test_swmr_option(tmp_path: Path) -> None:
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w", libver="latest") as f:
        f["a"] = np.arange(5)
    with ptd.PersistentTensorDict.from_h5(path, swmr=True) as td:
        assert td._store.backend._root.file.swmr_mode  # what it says: h5py's SWMR reading
        np.testing.assert_array_equal(td["a"].numpy(), np.arange(5))
    with pytest.raises(PtdValueError, match=r"swmr=True.*mode 'r'"):
        ptd.PersistentTensorDict.from_h5(path, mode="r+", swmr=True)
    with ptd.PersistentTensorDict.from_h5(path) as td:
        assert not td._store.backend._root.file.swmr_mode


def test_swmr_option_is_refused_for_zarr(tmp_path: Path) -> None:
    zarr = pytest.importorskip("zarr", reason="the zarr store is written with zarr-python")
    path = tmp_path / "s.zarr"
    zarr.create_array(str(path), shape=(3,), dtype="i4")
    with pytest.raises(ArgumentError, match="swmr= applies to HDF5"):
        ptd.PersistentTensorDict.from_zarr(path, swmr=True)


@pytest.mark.parametrize(
    ("option", "error", "needle"),
    [
        ({"bogus_option": 1}, PtdTypeError, "bogus_option"),
        ({"driver": "core"}, ArgumentError, "driver"),
        ({"libver": "latest"}, ArgumentError, "libver"),
        ({"rdcc_nbytes": 1 << 20}, ArgumentError, "rdcc_nbytes"),
    ],
)
def test_unknown_and_unpassed_options_are_refused(
    tmp_path: Path, option: dict[str, object], error: type[Exception], needle: str
) -> None:
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(5)
    with pytest.raises(error, match=needle):
        ptd.PersistentTensorDict.from_h5(path, mode="r", **option)


def test_creation_options_are_still_accepted(tmp_path: Path) -> None:
    td = ptd.TensorDict({"a": np.arange(8)}, batch_size=[8])
    out = ptd.PersistentTensorDict.from_dict(
        td, tmp_path / "c.h5", compression="gzip", chunks=(4,), fletcher32=True
    )
    with out:
        assert out._store.backend._root["a"].compression == "gzip"
