"""What every hostile-store test shares: an :class:`Attack` (a store made by plain h5py, zarr or
file writes, and the commands a person would run on it), a CLI run in a process of its own that
reports its exit status, output, seconds and peak memory, and the marker a payload would create.
The tests run commands in forks of a warm server (:mod:`.forkserver`: no import cost per
command); the benchmark in new processes (``fresh=True``), whose start it measures too.

Each ``tests/robustness/attacks_*.py`` module lists its attacks in ``ATTACKS``; the tests run
them one by one, and ``benchmarks/bench_attacks.py`` runs them all and prints the seconds and
peak RSS of each command (figures are measured there, never asserted in tests).
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from .forkserver import ForkServer

#: a hung command is stopped after this many seconds (a generous bound: tests never time a run)
HANG_SECONDS = 120

#: the name of the file a payload would create: its presence means code from a file ran
MARKER = "PWNED"


@dataclasses.dataclass(frozen=True)
class Attack:
    """One hostile store and what is run on it.

    ``make(directory)`` writes the store (and anything it points at) under ``directory`` and
    returns the path a user would name. ``commands`` are ``ptd`` argument lists; ``{store}``
    stands for that path and ``{out}`` for a fresh output path beside it (``{out_h5}`` and
    ``{out_zarr}`` for an output of that format).
    """

    name: str
    make: Callable[[Path], Path]
    commands: tuple[tuple[str, ...], ...]
    #: what the attack would reach or run: a path that must not be created or changed
    watch: Callable[[Path], Sequence[Path]] = lambda d: (d / MARKER,)


@dataclasses.dataclass(frozen=True)
class CliRun:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss: int  # bytes, of the ptd process alone (its VmHWM at exit)
    hung: bool


#: the ptd process writes its own peak RSS here at exit (see _MEASURED_MAIN)
_HWM_ENV = "PTD_TEST_HWM_FILE"

#: ``python -m ptd`` that writes the process's own peak RSS (``VmHWM``) at exit. ``wait4``'s
#: ru_maxrss is kept across exec, so it would count the forked copy of a parent that has torch
#: loaded (pytest: about 200 MB) instead of ptd's own memory; VmHWM belongs to the address
#: space that exec made.
_MEASURED_MAIN = """
import atexit, os, runpy, sys
def _hwm():
    try:
        with open("/proc/self/status") as f:
            kb = next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:"))
        with open(os.environ["PTD_TEST_HWM_FILE"], "w") as f:
            f.write(str(kb * 1024))
    except (OSError, StopIteration, KeyError, ValueError):
        pass
atexit.register(_hwm)
sys.argv[0] = "ptd"
runpy.run_module("ptd", run_name="__main__", alter_sys=True)
"""


def _peak_rss(hwm_file: str, maxrss: int) -> int:
    """The process's own peak RSS (VmHWM it wrote at exit), else wait4's ``maxrss`` (a process
    killed before its exit handlers ran; an upper bound)."""
    try:
        with open(hwm_file) as f:
            return int(f.read())
    except (OSError, ValueError):
        return maxrss


def expand(argv: Sequence[str], store: Path, out_dir: Path) -> tuple[str, ...]:
    fields = {
        "store": str(store),
        "out": str(out_dir / "out"),
        "out_h5": str(out_dir / "out.h5"),
        "out_zarr": str(out_dir / "out.zarr"),
    }
    return tuple(a.format(**fields) for a in argv)


#: the warm processes the tests run commands in (see :mod:`.forkserver`): one that has
#: imported the command line (which imports no torch for most commands), one that has imported
#: the library too, for snippets that read a store as a user's script would
_CLI_SERVER = ForkServer(["ptd_cli.main", "zarr", "h5py"])
_LIBRARY_SERVER = ForkServer(["ptd_cli.main", "ptd", "zarr", "h5py", "torch"])
atexit.register(_CLI_SERVER.close)
atexit.register(_LIBRARY_SERVER.close)


def run_ptd(
    argv: Sequence[str],
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = HANG_SECONDS,
    *,
    fresh: bool = False,
) -> CliRun:
    """``ptd ARGV`` in a process of its own: a fork of a warm server (the tests: see
    :mod:`.forkserver`), or with ``fresh`` a new ``python -m ptd`` (the benchmark, which
    measures the start too). Its peak RSS is the one it reports at exit."""
    return _run(argv, cwd, env, timeout, fresh=fresh, code=None)


def run_python(
    code: str,
    argv: Sequence[str] = (),
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    timeout: float = HANG_SECONDS,
) -> CliRun:
    """``python -c CODE ARGV`` in a fork of a warm server that has imported the library."""
    return _run(argv, cwd, env, timeout, fresh=False, code=code)


def _run(
    argv: Sequence[str],
    cwd: Path | None,
    env: dict[str, str] | None,
    timeout: float,
    *,
    fresh: bool,
    code: str | None,
) -> CliRun:
    full_env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"}
    full_env.pop("FORCE_COLOR", None)
    full_env.update(env or {})
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(tempfile.NamedTemporaryFile(prefix="ptd-out-"))
        err = stack.enter_context(tempfile.NamedTemporaryFile(prefix="ptd-err-"))
        hwm_file = stack.enter_context(tempfile.NamedTemporaryFile(prefix="ptd-hwm-"))
        start = time.monotonic()
        if fresh:
            returncode, maxrss, hung = _run_fresh(
                argv, out, err, hwm_file.name, cwd, full_env, timeout
            )
        else:
            server = _CLI_SERVER if code is None else _LIBRARY_SERVER
            returncode, maxrss, hung = server.run(
                argv,
                stdout=out.name,
                stderr=err.name,
                hwm=hwm_file.name,
                cwd=str(cwd or os.getcwd()),
                env={**full_env, _HWM_ENV: hwm_file.name},
                timeout=timeout,
                code=code,
            )
        seconds = time.monotonic() - start
        out.seek(0)
        err.seek(0)
        return CliRun(
            argv=tuple(argv),
            returncode=returncode,
            stdout=out.read().decode("utf-8", "replace"),
            stderr=err.read().decode("utf-8", "replace"),
            seconds=seconds,
            peak_rss=_peak_rss(hwm_file.name, maxrss),
            hung=hung,
        )


def _run_fresh(
    argv: Sequence[str],
    out: IO[bytes],
    err: IO[bytes],
    hwm: str,
    cwd: Path | None,
    env: dict[str, str],
    timeout: float,
) -> tuple[int, int, bool]:
    """``python -m ptd ARGV`` in a new process: ``(exit status, wait4's peak RSS, hung)``."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _MEASURED_MAIN, *argv],
        stdout=out,
        stderr=err,
        stdin=subprocess.DEVNULL,
        cwd=cwd,
        env={**env, _HWM_ENV: hwm},
    )
    hung = threading.Event()

    def stop() -> None:
        hung.set()
        proc.send_signal(signal.SIGKILL)

    timer = threading.Timer(timeout, stop)
    timer.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        timer.cancel()
    return os.waitstatus_to_exitcode(status), usage.ru_maxrss * 1024, hung.is_set()


def assert_refused(run: CliRun, *needles: str) -> None:
    """One ``ptd: error:`` line naming each needle, a non-zero exit, no traceback, no hang."""
    assert not run.hung, f"{run.argv}: still running after {HANG_SECONDS} s"
    assert run.returncode not in (0, -signal.SIGKILL), (run.argv, run.returncode, run.stderr)
    assert "Traceback" not in run.stderr, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ptd: error:")]
    assert len(errors) == 1, (run.argv, run.stderr)
    for needle in needles:
        assert needle in errors[0], (needle, errors[0])
