"""Ctrl-C and SIGTERM stop a long ``ptd`` command promptly and leave nothing behind.

Each run is a real process (``python -m ptd``). The moment is reached by watching the command's
own output appear (its temporary sibling growing: the copy phase), never by a sleep; then the
signal is sent and the test checks the exit status (130 / 143: stopped by the signal, not run to
its end), that nothing is at the destination nor beside it, that the source is unchanged and
that a destination being ``--overwrite``-n keeps its old content.

No test here times anything (the suite runs on busy machines): a command still running
:data:`HANG_S` after the signal fails the test as hung, and how fast each phase stops is
measured by ``benchmarks/bench_interrupt.py``."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import zarr

ENV = {**os.environ, "PYTHONPATH": os.getcwd(), "NO_COLOR": "1"}
ROWS = 600_000
#: a command still running this long after the signal is hung (a bound, never a measure)
HANG_S = 60


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(f.read_bytes())
    return h.hexdigest()


@pytest.fixture(scope="module")
def sources(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("src")
    data = np.random.default_rng(0).random((ROWS, 16))  # ~77 MB, incompressible-ish
    h5 = d / "big.h5"
    with h5py.File(h5, "w") as f:
        f.create_dataset("obs", data=data, chunks=(10_000, 16), compression="gzip")
        f["name with space/x"] = np.arange(5)
    zs = d / "big.zarr"
    root = zarr.open_group(zs, mode="w", zarr_format=3)
    root.create_array("obs", data=data, chunks=(10_000, 16))
    return {"h5": h5, "zarr": zs}


def _read_bytes(pid: int) -> int:
    """Bytes the process has read so far (Linux's /proc/PID/io)."""
    try:
        for line in Path(f"/proc/{pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _as_in_a_terminal() -> None:
    """In the child before exec: Ctrl-C delivered as in a terminal. A shell runs a background
    job (``pytest ... &``) with SIGINT ignored, and every process below inherits that: the
    interrupts these tests send would be dropped."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start(args: list[str]) -> subprocess.Popen[str]:
    """``python -m ptd ARGS`` as a user runs it, its stderr piped to the test."""
    return subprocess.Popen(
        [sys.executable, "-m", "ptd", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=ENV,
        text=True,
        preexec_fn=_as_in_a_terminal,
    )


def _wait_for_phase(proc: subprocess.Popen[str], phase: str) -> None:
    """Read ``ptd --verbose``'s stderr until it says it entered ``phase``."""
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(f"ptd: {phase}"):
            return
    proc.wait()
    proc.stderr.close()
    pytest.fail(f"the command ended before {phase!r}: {seen}")


def _temporary_bytes(out_dir: Path) -> int:
    """Bytes in the temporaries in ``out_dir`` now (files may vanish while they are counted:
    zarr renames its partial chunk files into place)."""
    total = 0
    for t in [p for p in out_dir.iterdir() if p.name.startswith(".ptd-tmp-")]:
        try:
            files = [t] if t.is_file() else list(t.rglob("*"))
        except FileNotFoundError:
            continue
        for f in files:
            try:
                total += f.stat().st_size if f.is_file() else 0
            except FileNotFoundError:
                continue
    return total


def _stopped(proc: subprocess.Popen[str]) -> str:
    """Wait for ``proc`` to exit after a signal; its stderr. Still running after
    :data:`HANG_S` seconds: killed, and the test fails as hung."""
    try:
        proc.wait(timeout=HANG_S)  # (its stderr is a few lines: the pipe never fills)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"still running {HANG_S} s after the signal: {proc.args}")
    assert proc.stderr is not None
    err = proc.stderr.read()  # what _wait_for_phase's reads left buffered included
    proc.stderr.close()
    return err


def _interrupt(
    args: list[str], out_dir: Path | None, sig: int, reading: int = 0
) -> tuple[int, str]:
    """Start ``ptd ARGS``, wait until its temporary output in ``out_dir`` is growing (or,
    without one, until it has read ``reading`` bytes: a job that writes nothing), send
    ``sig``; returns (exit status, stderr)."""
    proc = _start(args)
    try:
        deadline = time.monotonic() + 60
        phase = None
        while time.monotonic() < deadline and proc.poll() is None:
            if out_dir is None:
                if _read_bytes(proc.pid) > reading:  # mid-read
                    phase = "reading"
                    break
                time.sleep(0.005)
                continue
            if _temporary_bytes(out_dir) > 1 << 20:  # mid-copy: the temporary holds data
                phase = "copying"
                break
            time.sleep(0.005)
        assert phase is not None, "the command ended before it could be interrupted"
        proc.send_signal(sig)
        err = _stopped(proc)
    except BaseException:  # never leave the command running behind a failed test
        proc.kill()
        proc.communicate()
        raise
    return proc.returncode, err


CASES = [
    ("h5", "out.zarr", signal.SIGINT, 130),
    ("h5", "out.h5", signal.SIGINT, 130),
    ("zarr", "out.h5", signal.SIGTERM, 143),
    ("h5", "out.zarr", signal.SIGTERM, 143),
]


@pytest.mark.parametrize(("src_fmt", "dst_name", "sig", "code"), CASES)
def test_convert_stops_and_cleans_up(
    sources: dict[str, Path], tmp_path: Path, src_fmt: str, dst_name: str, sig: int, code: int
) -> None:
    src = sources[src_fmt]
    before = _digest(src)
    rc, err = _interrupt(["convert", str(src), str(tmp_path / dst_name)], tmp_path, sig)
    assert rc == code, err
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)  # no destination, no temporary
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines == [
        f"ptd: interrupted: {tmp_path / dst_name} was not written (nothing was left behind)"
    ] or (len(lines) == 1 and lines[0].startswith("ptd: interrupted")), err
    assert "Task was destroyed" not in err
    assert "Exception ignored" not in err
    assert _digest(src) == before


def test_overwritten_destination_is_kept(sources: dict[str, Path], tmp_path: Path) -> None:
    dst = tmp_path / "out.zarr"
    old = zarr.open_group(dst, mode="w", zarr_format=3)
    old.create_array("old", data=np.arange(3))
    before = _digest(dst)
    rc, err = _interrupt(
        ["convert", "--overwrite", str(sources["h5"]), str(dst)], tmp_path, signal.SIGINT
    )
    assert rc == 130, err
    assert sorted(os.listdir(tmp_path)) == ["out.zarr"]
    assert _digest(dst) == before


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_memmap_stops_and_cleans_up(
    sources: dict[str, Path], tmp_path: Path, sig: int, code: int
) -> None:
    rc, err = _interrupt(
        ["memmap", str(sources["h5"]), str(tmp_path / "out.memmap")], tmp_path, sig
    )
    assert rc == code, err
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "args",
    [["validate", "--data"], ["diff"], ["inspect", "--stats"]],
    ids=["validate-data", "diff", "inspect-stats"],
)
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_reading_jobs_stop(sources: dict[str, Path], args: list[str], sig: int, code: int) -> None:
    paths = [str(sources["h5"])] * (2 if args == ["diff"] else 1)
    rc, err = _interrupt(
        [*args, *paths], None, sig, reading=40 << 20
    )  # past the imports (~tens of MB): in the data
    assert rc == code, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("ptd: interrupted"), err


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_leftovers_of_killed_runs_are_removed(sources: dict[str, Path], tmp_path: Path) -> None:
    # what a SIGKILLed convert leaves: its temporary, forever, unless the next run removes it
    old = time.time() - 3600
    dead = tmp_path / f".ptd-tmp-{_dead_pid()}-0badc0de.out.zarr"
    recent = tmp_path / f".ptd-tmp-{_dead_pid()}-0badc0df.out.zarr"  # may still be in use
    alive = tmp_path / f".ptd-tmp-{os.getpid()}-0badc0e0.out.zarr"  # a running process's
    swapped = tmp_path / f".ptd-old-{_dead_pid()}-0badc0e1.out.zarr"  # a replaced store: data
    for d in (dead, recent, alive, swapped):
        d.mkdir()
        (d / "zarr.json").write_text("{}")
    for d in (dead, alive, swapped):
        os.utime(d / "zarr.json", (old, old))
        os.utime(d, (old, old))
    run = subprocess.run(
        [sys.executable, "-m", "ptd", "convert", str(sources["zarr"]), str(tmp_path / "x.h5")],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    left = sorted(os.listdir(tmp_path))
    assert dead.name not in left
    assert {recent.name, alive.name, swapped.name, "x.h5"} == set(left), left


# ------------------------------------------------------------- each phase, by its own output
@pytest.fixture(scope="module")
def many_nodes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Stores of 3,000 small leaves: planning, creating and publishing them take long enough
    (tenths of a second each) for a signal to land inside each phase."""
    d = tmp_path_factory.mktemp("many")
    h5 = d / "many.h5"
    with h5py.File(h5, "w") as f:
        for i in range(3000):
            f.create_dataset(f"g{i // 100}/x{i}", data=np.arange(10.0))
    zs = d / "many.zarr"
    root = zarr.open_group(zs, mode="w", zarr_format=3)
    for i in range(3000):
        root.create_array(f"g{i // 100}/x{i}", data=np.arange(10.0))
    return {"h5": h5, "zarr": zs}


def _interrupt_in(args: list[str], phase: str, sig: int) -> tuple[int, list[str]]:
    """Run ``ptd --verbose ARGS``, send ``sig`` as soon as it says it entered ``phase``
    (``ptd: copying ...``); returns (exit status, stderr lines after)."""
    proc = _start(["--verbose", *args])
    try:
        _wait_for_phase(proc, phase)
        proc.send_signal(sig)
        rest = _stopped(proc)
    except BaseException:  # never leave the command running behind a failed test
        proc.kill()
        proc.communicate()
        raise
    return proc.returncode, [ln for ln in rest.splitlines() if ln.strip()]


PHASES = [
    ("h5", "out.zarr", "planning", signal.SIGINT),
    ("h5", "out.zarr", "copying", signal.SIGTERM),
    ("h5", "out.zarr", "publishing", signal.SIGINT),
    ("zarr", "out.h5", "copying", signal.SIGINT),
    ("zarr", "out.h5", "publishing", signal.SIGTERM),
]


@pytest.mark.parametrize(("src_fmt", "dst_name", "phase", "sig"), PHASES)
def test_convert_stops_in_each_phase(
    many_nodes: dict[str, Path], tmp_path: Path, src_fmt: str, dst_name: str, phase: str, sig: int
) -> None:
    src = many_nodes[src_fmt]
    before = _digest(src)
    rc, lines = _interrupt_in(["convert", str(src), str(tmp_path / dst_name)], phase, sig)
    assert rc == (130 if sig == signal.SIGINT else 143), lines
    assert lines == [
        f"ptd: interrupted while {phase}: {tmp_path / dst_name} was not written "
        "(nothing was left behind)"
    ]
    assert os.listdir(tmp_path) == []
    assert _digest(src) == before


def test_a_killed_runs_temporary_is_removed_by_the_rerun(
    many_nodes: dict[str, Path], tmp_path: Path
) -> None:
    # SIGKILL mid-copy: nothing can clean up, the temporary stays; the next write beside it
    # knows its process is gone (same host, pid not running) and removes it at once
    dst = tmp_path / "out.zarr"
    proc = _start(["-v", "convert", str(many_nodes["h5"]), str(dst)])
    try:
        _wait_for_phase(proc, "copying")
    finally:
        proc.kill()
        proc.communicate()
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1, left
    assert left[0].startswith(".ptd-tmp-"), left
    rerun = subprocess.run(
        [sys.executable, "-m", "ptd", "convert", str(many_nodes["h5"]), str(dst)],
        capture_output=True,
        text=True,
        env=ENV,
        check=False,
        timeout=600,
    )
    assert rerun.returncode == 0, rerun.stderr
    assert os.listdir(tmp_path) == ["out.zarr"]
    root = zarr.open_group(dst, mode="r")
    assert np.array_equal(root["g29/x2999"][...], np.arange(10.0))
    assert len(list(root["g0"].array_keys())) == 100


def test_memmap_stops_while_planning(many_nodes: dict[str, Path], tmp_path: Path) -> None:
    rc, lines = _interrupt_in(
        ["memmap", str(many_nodes["h5"]), str(tmp_path / "o.mm")], "planning", signal.SIGINT
    )
    assert (rc, os.listdir(tmp_path)) == (130, []), lines
    assert lines == [
        f"ptd: interrupted while planning: {tmp_path / 'o.mm'} was not written "
        "(nothing was left behind)"
    ]


def test_a_stop_after_the_last_safe_point_keeps_the_complete_output(
    many_nodes: dict[str, Path], tmp_path: Path
) -> None:
    # memmap's publishing is one rename: the signal lands after it, the output is whole
    rc, lines = _interrupt_in(
        ["memmap", str(many_nodes["h5"]), str(tmp_path / "o.mm")], "publishing", signal.SIGINT
    )
    assert rc == 130, lines
    if os.listdir(tmp_path):  # the usual case: it had renamed the finished directory
        assert lines == [
            "ptd: interrupted after the work was done: the output is complete and kept"
        ]
        assert os.listdir(tmp_path) == ["o.mm"]
        assert (tmp_path / "o.mm" / "meta.json").is_file()
    else:  # the signal came before the rename: nothing written
        assert lines[-1].startswith("ptd: interrupted while publishing")


def test_a_second_interrupt_exits_at_once_naming_what_stays(
    many_nodes: dict[str, Path], tmp_path: Path
) -> None:
    # stopped while publishing 3,000 leaves, its clean-up (removing ~6,000 files) takes
    # tenths of a second: a second Ctrl-C then exits at once, in the middle of it (what
    # "at once" means is checked by what it did, not by a clock: it said so, and left the
    # temporary it had not finished removing)
    proc = _start(["-v", "convert", str(many_nodes["h5"]), str(tmp_path / "o.zarr")])
    try:
        _wait_for_phase(proc, "publishing")
        proc.send_signal(signal.SIGINT)
        time.sleep(0.1)  # two signals at once are one to Python: the second must come later
        proc.send_signal(signal.SIGINT)
        rest = [ln for ln in _stopped(proc).splitlines() if ln.strip()]
    except BaseException:  # never leave the command running behind a failed test
        proc.kill()
        proc.communicate()
        raise
    assert proc.returncode == 130
    left = [p for p in tmp_path.iterdir() if p.name.startswith(".ptd-tmp-")]
    if left:  # the usual case: it exited in the middle of the clean-up, at once
        assert rest == [f"ptd: interrupted again: could not remove {left[0]}; delete it by hand"]
    else:  # the first stop had cleaned up already
        assert rest, rest
        assert all(ln.startswith("ptd: interrupted") for ln in rest), rest
    assert not (tmp_path / "o.zarr").exists()


def test_a_late_stop_is_reported_and_never_lost() -> None:
    """In-process: a stop requested after a job's last check is ``unheeded`` (the front end
    reports it); the next job in the process stops at its first check."""
    from ptd.errors import Interrupted
    from ptd.storage import cancel

    with cancel.section():
        cancel.check()
        cancel.request(signal.SIGINT)  # after the last check: the job ends normally
    assert cancel.unheeded() == signal.SIGINT
    assert not cancel.active()

    def stopped_while_copying() -> None:
        with cancel.section():
            cancel.phase("copying")
            cancel.check()

    with pytest.raises(Interrupted) as info:
        stopped_while_copying()
    assert (info.value.signum, info.value.phase) == (signal.SIGINT, "copying")
    assert cancel.unheeded() is None
    assert cancel.requested() is None
    with cancel.section():
        cancel.check()  # nothing pending any more
